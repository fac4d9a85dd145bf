"""What the controller of a cluster with burst groups needs to run `clusterctl burst` itself.

`up` builds two deterministic tars on the control machine and the burst_controller role
installs them: clusterctl with every dependency as wheels plus the Ansible collections
(nodes may have no package index, as here), and the rendered build directory. Unchanged
inputs give byte-identical tars, so a no-change `up` copies nothing.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from clusterctl import __version__
from clusterctl.paths import data_root
from clusterctl.plan import Plan
from clusterctl.render.builddir import MANIFEST, read_manifest
from clusterctl.run.ansible import REQUIRED_COLLECTIONS, collections_path
from clusterctl.run.providers.base import ProviderError

EXTRA_COLLECTIONS = ("community/library_inventory_filtering_v1",)


def _add(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = tarfile.TarInfo(arcname)
    data = path.read_bytes()
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _deterministic_tar(target: Path, files: list[tuple[Path, str]]) -> bool:
    """Write ``files`` (source, name in tar) sorted, with fixed metadata; True when content changed."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for source, name in sorted(files, key=lambda f: f[1]):
            _add(tar, source, name)
    data = buf.getvalue()
    if target.exists() and target.read_bytes() == data:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)
    return True


def _source_digest(root: Path) -> str:
    digest = hashlib.sha256(__version__.encode())
    for sub in ("cli/clusterctl", "roles", "collections", "templates", "stacks", "pyproject.toml"):
        base = root / sub
        paths = (
            [base]
            if base.is_file()
            else sorted(
                p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts and ".pyc" not in p.suffixes
            )
        )
        for path in paths:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _collections_root() -> Path:
    for base in collections_path().split(":"):
        if all((Path(base) / "ansible_collections" / c).is_dir() for c in REQUIRED_COLLECTIONS):
            return Path(base)
    raise ProviderError(
        "the Ansible collections are needed on the controller for bursting; run scripts/ansible-collections.sh"
    )


def build_bundle(state_dir: Path) -> Path:
    """bundle.tar: wheelhouse/ (clusterctl + dependencies) and ansible_collections/; rebuilt when the source changes."""
    root = data_root()
    if not (root / "pyproject.toml").is_file():
        raise ProviderError(
            "bursting from the controller needs clusterctl's source tree (pyproject.toml) to "
            f"build its wheel; {root} has none"
        )
    out = state_dir / "burst"
    bundle = out / "bundle.tar"
    stamp = out / "bundle.digest"
    digest = _source_digest(root)
    if bundle.exists() and stamp.exists() and stamp.read_text() == digest:
        return bundle
    with tempfile.TemporaryDirectory() as tmp_name:
        wheelhouse = Path(tmp_name) / "wheelhouse"
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheelhouse), str(root)],
            capture_output=True,
            text=True,
            check=False,
            timeout=1200,
        )
        if result.returncode != 0:
            raise ProviderError(f"building clusterctl's wheelhouse for the controller failed:\n{result.stderr[-2000:]}")
        files = [(p, f"wheelhouse/{p.name}") for p in wheelhouse.glob("*.whl")]
        collections = _collections_root()
        for name in (*REQUIRED_COLLECTIONS, *EXTRA_COLLECTIONS):
            base = collections / "ansible_collections" / name
            files += [
                (p, str(p.relative_to(collections)))
                for p in base.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts
            ]
        _deterministic_tar(bundle, files)
    stamp.write_text(digest)
    return bundle


def build_archive(build_dir: Path, state_dir: Path) -> Path:
    """build.tar: the rendered files listed in the build directory's manifest, and the manifest (no
    logs, no artifacts). With its manifest the copy on the controller is a build directory clusterctl
    made, so `clusterctl burst resume` there may write its run files (logs/ansible.log) into it."""
    names = read_manifest(build_dir) or []
    target = state_dir / "burst" / "build.tar"
    _deterministic_tar(target, [(build_dir / name, name) for name in [*names, MANIFEST]])
    return target


def burst_extravars(plan: Plan, build_dir: Path, state_dir: Path) -> dict[str, str]:
    """Extra variables for site.yml's burst_controller play (empty without burst groups)."""
    if not plan.slurm.burst:
        return {}
    return {
        "burst_controller_bundle": str(build_bundle(state_dir).resolve()),
        "burst_controller_build_archive": str(build_archive(build_dir, state_dir).resolve()),
    }
