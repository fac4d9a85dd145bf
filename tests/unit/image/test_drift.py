"""A node's packages against its image's: changed and missing ones are drift, extra ones are not."""

from __future__ import annotations

import pytest

from clusterctl.image.drift import PackageListError, compare_packages, installed_packages, parse_packages

# dpkg-query -W -f '${db:Status-Abbrev}\t${binary:Package}\t${Version}\n' on Debian 12.
DPKG_OUTPUT = (
    "ii \tadduser\t3.134\n"
    "ii \tapt\t2.6.1\n"
    "hi \tslurmd\t22.05.8-4+deb12u3\n"
    "ii \tlibc6:amd64\t2.36-9+deb12u10\n"
    "rc \told-package\t1.0\n"
    "iU \thalf-unpacked\t2.0\n"
)


def test_parse_keeps_installed_packages_only() -> None:
    assert parse_packages(DPKG_OUTPUT) == {
        "adduser": "3.134",
        "apt": "2.6.1",
        "slurmd": "22.05.8-4+deb12u3",
        "libc6:amd64": "2.36-9+deb12u10",
    }


@pytest.mark.parametrize("line", ["ii adduser 3.134", "ii \t\t1.0", "i\tx\t1"])
def test_parse_refuses_other_lines(line: str) -> None:
    with pytest.raises(PackageListError, match="line 2"):
        parse_packages("ii \tapt\t2.6.1\n" + line + "\n")


class _BuildFailed(Exception):
    pass


def test_installed_packages_of_a_build() -> None:
    assert installed_packages(DPKG_OUTPUT, "the builder of gpu", _BuildFailed, "on")["apt"] == "2.6.1"
    with pytest.raises(_BuildFailed, match=r"^the package list of img could not be read: line 1 "):
        installed_packages("garbage\n", "img", _BuildFailed)
    with pytest.raises(_BuildFailed, match=r"^dpkg-query lists no installed package on the builder of gpu$"):
        installed_packages("rc \told\t1.0\n", "the builder of gpu", _BuildFailed, "on")


def test_identical_lists_do_not_drift() -> None:
    locked = parse_packages(DPKG_OUTPUT)
    drift = compare_packages(locked, dict(locked))
    assert not drift.drifted
    assert drift.summary() == "matches the lock"


def test_changed_and_missing_packages_drift_extra_ones_do_not() -> None:
    locked = {"apt": "2.6.1", "hello": "2.10-3", "slurmd": "22.05.8-4", "zsh": "5.9-4"}
    installed = {"apt": "2.6.1", "hello": "2.10-2", "slurmd": "22.05.8-4", "munge-extra": "0.5", "vim": "9.0"}
    drift = compare_packages(locked, installed)
    assert drift.drifted
    assert drift.changed == {"hello": ("2.10-3", "2.10-2")}
    assert drift.missing == {"zsh": "5.9-4"}
    assert drift.extra == {"munge-extra": "0.5", "vim": "9.0"}
    assert drift.differences() == ["hello 2.10-3 -> 2.10-2", "zsh missing (locked 5.9-4)"]
    assert drift.summary() == "hello 2.10-3 -> 2.10-2; zsh missing (locked 5.9-4) (+2 not in the image)"
    assert drift.to_dict()["changed"] == {"hello": {"locked": "2.10-3", "installed": "2.10-2"}}


def test_only_extra_packages_is_no_drift() -> None:
    drift = compare_packages({"apt": "2.6.1"}, {"apt": "2.6.1", "chrony": "4.3"})
    assert not drift.drifted
    assert drift.summary() == "matches the lock (+1 not in the image)"


def test_summary_names_at_most_limit_packages() -> None:
    locked = {f"p{i}": "1" for i in range(8)}
    drift = compare_packages(locked, {f"p{i}": "2" for i in range(8)})
    assert drift.summary(limit=3) == "p0 1 -> 2; p1 1 -> 2; p2 1 -> 2; 5 more"
