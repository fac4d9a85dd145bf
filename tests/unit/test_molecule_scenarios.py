"""Every Molecule scenario runs the way containers work on these machines.

The shared base config (.config/molecule/config.yml) cannot carry the platform flags (Molecule
replaces lists), so each scenario repeats them; this test keeps them from drifting: the locally
built image, no pulls, not privileged (it fails here), systemd as PID 1 with the cgroup mount, and
container names that cannot clash with other engineers' scenarios on the same Docker host.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "roles").glob("*/molecule/*/molecule.yml"))
BASE = ROOT / ".config" / "molecule" / "config.yml"


def _platforms(path: Path) -> list[dict]:
    return (yaml.safe_load(path.read_text()) or {}).get("platforms") or []


def test_base_config_disables_galaxy() -> None:
    base = yaml.safe_load(BASE.read_text())
    assert base["prerun"] is False
    assert base["dependency"]["enabled"] is False
    assert base["driver"]["name"] == "docker"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: f"{p.parts[-4]}/{p.parts[-2]}")
def test_platforms_use_the_local_systemd_image(scenario: Path) -> None:
    platforms = _platforms(scenario)
    assert platforms, f"{scenario}: no platforms"
    for platform in platforms:
        name = platform.get("name", "?")
        assert platform.get("image") == "local/debian:bookworm", f"{name}: not the locally built image"
        assert platform.get("pre_build_image") is True, f"{name}: would build an image"
        assert platform.get("pull") is False, f"{name}: would pull"
        assert not platform.get("privileged"), f"{name}: privileged containers fail on these machines"
        assert "SYS_ADMIN" in platform.get("capabilities", []), f"{name}: systemd needs CAP_SYS_ADMIN"
        assert platform.get("command") == "/lib/systemd/systemd", f"{name}: systemd must be PID 1"
        assert platform.get("cgroupns_mode") == "host", f"{name}: needs cgroupns_mode host"
        assert "/sys/fs/cgroup:/sys/fs/cgroup:rw" in platform.get("volumes", []), f"{name}: needs the cgroup mount"
        assert {"/run", "/run/lock", "/tmp"} <= set(platform.get("tmpfs", [])), f"{name}: needs the tmpfs mounts"


def test_container_names_are_unique_and_specific() -> None:
    names = [p["name"] for s in SCENARIOS for p in _platforms(s)]
    assert len(names) == len(set(names)), (
        f"container names used twice: {sorted(n for n in names if names.count(n) > 1)}"
    )
    assert "instance" not in names, "`instance` clashes with other engineers' scenarios: use <role>-<purpose>"
