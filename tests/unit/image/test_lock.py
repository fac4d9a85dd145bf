"""clusterctl.lock: round trip, deterministic text, refusals that say what to do, checks against a plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterctl.image.hash import ImageHash
from clusterctl.image.lock import (
    LOCK_NAME,
    Lock,
    LockedImage,
    LockError,
    check_lock,
    expected_packages,
    lock_path,
    parse_lock,
    read_lock,
    write_lock,
)

INPUTS = {"format": 1, "os": "debian-12", "arch": "amd64", "versions": {"enroot": "3.5.0"}, "roles": {"base": "ab"}}


def image(profile: str = "small", digest: str = "a" * 64, **kw: object) -> LockedImage:
    fields: dict[str, object] = {
        "profile": profile,
        "hash": digest,
        "target": "local",
        "ref": "sha256:" + "1" * 64,
        "os": "debian-12",
        "arch": "amd64",
        "packages": {"zlib1g:amd64": "1:1.2.13", "bash": "5.2.15-2+b7", "hello": "2.10-3"},
        "tag": f"clusterctl/node:debian-12-{digest[:12]}",
        "inputs": INPUTS,
    }
    fields.update(kw)
    return LockedImage(**fields)  # type: ignore[arg-type]


def lock(*images: LockedImage, cluster: str = "local") -> Lock:
    return Lock(
        cluster=cluster,
        clusterctl="0.1.0",
        collections_hash="c" * 64,
        roles_hash="r" * 64,
        images={i.profile: i for i in images},
    )


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / LOCK_NAME
    original = lock(image("small"), image("emu-h100", "b" * 64))
    assert write_lock(path, original) is True
    assert read_lock(path) == original


def test_text_is_deterministic_sorted_and_one_package_a_line(tmp_path: Path) -> None:
    one = lock(image("small"), image("emu-h100", "b" * 64))
    other = lock(image("emu-h100", "b" * 64), image("small"))
    assert one.text() == other.text()
    lines = one.text().splitlines()
    assert '      "packages": {' in lines
    assert '        "bash": "5.2.15-2+b7",' in lines
    assert '        "zlib1g:amd64": "1:1.2.13"' in lines
    data = json.loads(one.text())
    assert list(data) == sorted(data)
    assert list(data["images"]["small"]["packages"]) == ["bash", "hello", "zlib1g:amd64"]
    assert set(data) == {"lock_version", "cluster", "clusterctl", "collections_hash", "roles_hash", "images"}
    assert set(data["images"]["small"]) >= {"hash", "target", "ref", "os", "arch", "packages"}
    assert one.text().endswith("}\n")


def test_unchanged_lock_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / LOCK_NAME
    assert write_lock(path, lock(image()))
    before = path.stat().st_mtime_ns
    assert write_lock(path, lock(image())) is False
    assert path.stat().st_mtime_ns == before
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_missing_lock_is_none(tmp_path: Path) -> None:
    assert read_lock(tmp_path / LOCK_NAME) is None


def test_lock_path_is_beside_the_spec(tmp_path: Path) -> None:
    assert lock_path(tmp_path / "spec.yaml") == tmp_path / "clusterctl.lock"
    assert lock_path(tmp_path / "spec.yaml", tmp_path / "x.lock") == tmp_path / "x.lock"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"lock_version": 2}', "lock_version 2; this clusterctl reads version 1"),
        ('{"lock_version": 1, "cluster": "local", "clusterctl": "0.1.0", "images": []}', "images must be an object"),
        ('{"lock_version": 1, "clusterctl": "0.1.0", "images": {}}', "cluster must be a non-empty string"),
        (
            '{"lock_version": 1, "cluster": "l", "clusterctl": "0", "images": {"s": {"hash": "h", "target": "mars",'
            ' "ref": "r", "os": "o", "arch": "a"}}}',
            "images.s.target is 'mars'",
        ),
        (
            '{"lock_version": 1, "cluster": "l", "clusterctl": "0", "images": {"s": {"hash": "h", "target": "local",'
            ' "ref": "r", "os": "o", "arch": "a", "packages": {"x": 1}}}}',
            "images.s.packages must map package names to version strings",
        ),
        (
            '{"lock_version": 1, "cluster": "l", "clusterctl": "0", "images": {"s": {"target": "local",'
            ' "ref": "r", "os": "o", "arch": "a"}}}',
            "images.s.hash must be a non-empty string",
        ),
    ],
)
def test_bad_locks_are_refused_with_the_file_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / LOCK_NAME
    path.write_text(text)
    with pytest.raises(LockError) as caught:
        read_lock(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_a_directory_is_not_a_lock(tmp_path: Path) -> None:
    (tmp_path / LOCK_NAME).mkdir()
    with pytest.raises(LockError, match="not a regular file"):
        read_lock(tmp_path / LOCK_NAME)


def _now(profile: str, digest: str, **inputs: object) -> ImageHash:
    return ImageHash(profile=profile, hash=digest, inputs={**INPUTS, **inputs})


def test_check_lock_passes_matching_present_images(tmp_path: Path) -> None:
    checks = check_lock(
        lock(image("small")), "local", {"small": _now("small", "a" * 64)}, "local", lambda _i: True, path=tmp_path
    )
    assert checks["small"].usable
    assert checks["small"].problem == ""


def test_check_lock_mismatch_messages(tmp_path: Path) -> None:
    path = tmp_path / LOCK_NAME
    current = {
        "small": _now("small", "f" * 64, versions={"enroot": "3.5.1"}),
        "emu-h100": _now("emu-h100", "b" * 64),
        "gpu": _now("gpu", "d" * 64),
        "cloud": _now("cloud", "e" * 64),
    }
    locked = lock(image("small"), image("emu-h100", "b" * 64), image("cloud", "e" * 64, target="aws"))
    checks = check_lock(locked, "local", current, "local", lambda i: i.profile != "emu-h100", path=path)
    assert checks["small"].problem == (
        "the spec or the roles changed since small's image was built (locked aaaaaaaaaaaa, now ffffffffffff): "
        "versions.enroot 3.5.0 -> 3.5.1"
    )
    assert checks["emu-h100"].problem == (
        "the locked image of emu-h100 (clusterctl/node:debian-12-bbbbbbbbbbbb) is not on local"
    )
    assert checks["gpu"].problem == f"hardware profile gpu has no image in {path}"
    assert checks["cloud"].problem == "the locked image of cloud is for aws; this cluster runs on local"
    assert not any(c.usable for c in checks.values())


def test_check_lock_of_another_cluster(tmp_path: Path) -> None:
    path = tmp_path / LOCK_NAME
    checks = check_lock(
        lock(image(), cluster="other"), "local", {"small": _now("small", "a" * 64)}, "local", lambda _i: True, path=path
    )
    assert checks["small"].problem.startswith(f"{path} is the lock of cluster other, not local")


def test_expected_packages_only_for_this_cluster() -> None:
    assert expected_packages(None, "local") == {}
    assert expected_packages(lock(image(), cluster="other"), "local") == {}
    assert set(expected_packages(lock(image()), "local")) == {"small"}


def test_parse_lock_accepts_what_it_wrote() -> None:
    text = lock(image()).text()
    assert parse_lock(text, Path("x")).text() == text
