"""Which locked images `up` uses: a bare-metal archive counts where this run's PXE server serves it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from clusterctl.image.baremetal import IMAGES
from clusterctl.image.build import current_hashes
from clusterctl.image.lock import Lock, LockedImage, write_lock
from clusterctl.image.targets import target_for
from clusterctl.ops.images import locked_images
from clusterctl.pipeline import load_and_validate
from tests.conftest import EXAMPLES

SPEC = EXAMPLES / "onprem-h100-256.yaml"


def test_a_bare_metal_archive_counts_in_the_build_directory_up_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up --out DIR` (as the lab runs it): the archive is in DIR, none in build/<cluster> here."""
    monkeypatch.chdir(tmp_path)
    plan = load_and_validate(SPEC).plan
    build = tmp_path / "elsewhere" / plan.cluster.name
    target = target_for(plan, build_dir=build)
    images = {}
    for profile, now in current_hashes(plan, arch=target.arch(), base=target.base).items():
        archive = build / IMAGES / f"clusterctl-ubuntu-24.04-{profile}.tar.zst"
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(profile.encode())
        digest = hashlib.sha256(profile.encode()).hexdigest()
        archive.with_name(archive.name + ".sha256").write_text(f"{digest}  {archive.name}\n")
        images[profile] = LockedImage(
            profile, now.hash, "baremetal", f"sha256:{digest}", "ubuntu-24.04", target.arch(), tag=archive.name
        )
    lock_file = tmp_path / "atlas.lock"
    write_lock(lock_file, Lock(plan.cluster.name, "0.1.0", "c", "r", images))

    here = locked_images(str(SPEC), plan, lock_file, locked=False)
    assert here.images == {}
    assert all("is not on baremetal" in warning for warning in here.warnings)
    there = locked_images(str(SPEC), plan, lock_file, locked=True, build_dir=build)
    assert (there.images, there.warnings, there.error) == (images, [], "")
