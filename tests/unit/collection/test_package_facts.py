"""clusterctl.node.package_facts: the packages fact from one dpkg-query call, in package_facts' shape."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.collection.modules import load

ROOT = Path(__file__).resolve().parents[3]
MODULE = (
    ROOT / "collections" / "ansible_collections" / "clusterctl" / "node" / "plugins" / "modules" / "package_facts.py"
)


def _load() -> ModuleType:
    return load("clusterctl_package_facts_module", MODULE)


def test_installed_versions_count_and_removed_ones_do_not() -> None:
    lines = [
        "ii \tdatacenter-gpu-manager\t1:3.3.9\tamd64",
        "hi \tcuda-toolkit-12-8\t12.8.1-1\tamd64",
        "iU \tnccl-half-unpacked\t2.26.2-1+cuda12.8\tamd64",
        "rc \tnvidia-driver-old\t550.54.15-1\tamd64",
        "un \tnever-installed\t\t",
        "ii \tlibc6:i386\t2.36-9+deb12u10\ti386",
        "ii \tlibc6\t2.36-9+deb12u10\tamd64",
        "garbage without tabs",
    ]
    packages = _load().parse("\n".join(lines) + "\n")
    assert sorted(packages) == [
        "cuda-toolkit-12-8",
        "datacenter-gpu-manager",
        "libc6",
        "libc6:i386",
        "nccl-half-unpacked",
    ]
    assert packages["datacenter-gpu-manager"] == [
        {"name": "datacenter-gpu-manager", "version": "1:3.3.9", "arch": "amd64", "source": "dpkg"}
    ]
    assert packages["cuda-toolkit-12-8"][0]["version"] == "12.8.1-1"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg-query on this machine")
def test_the_format_is_one_dpkg_query_accepts_and_every_installed_package_is_read() -> None:
    module = _load()
    shown = subprocess.run(
        ["dpkg-query", "--show", f"--showformat={module.FORMAT}"], capture_output=True, text=True, check=True
    ).stdout
    installed = subprocess.run(
        ["dpkg-query", "--show", "--showformat=${db:Status-Abbrev} ${binary:Package}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    names = {line.split()[1] for line in installed if line[1] not in "nc"}
    packages = module.parse(shown)
    assert set(packages) == names
    assert all(entry[0]["version"] for entry in packages.values())
