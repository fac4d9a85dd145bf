"""The Ansible collections the roles use (community.docker, community.general, ansible.posix, ...).

They come from the ``ansible`` package on PyPI, as Galaxy may be unreachable: a checkout's
``make collections`` extracts them into ``.ansible-collections/``; an installed clusterctl
finds them wherever Ansible would (``ANSIBLE_COLLECTIONS_PATH``, ``~/.ansible/collections``,
an installed ``ansible`` package) or, failing that, fetches the pinned ``ansible`` wheel once
with pip, checks its sha256 and extracts only these collections into the per-user cache
(``$XDG_CACHE_HOME/clusterctl/ansible-collections/<release>``, default ``~/.cache/...``).

Why fetch rather than depend on ``ansible``: that package installs about 40,000 files of
collections clusterctl never uses; the five it needs are 1,100 files.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from clusterctl.paths import collections_dir, data_root

# The `ansible` release whose collections the roles are tested with, and its wheel's sha256 as
# PyPI lists it (https://pypi.org/simple/ansible/).
ANSIBLE_RELEASE = "12.3.0"
WHEEL = f"ansible-{ANSIBLE_RELEASE}-py3-none-any.whl"
WHEEL_SHA256 = "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414"
WHEEL_MB = 54
# What a run needs on the collections path (a place that has these is used as it is).
REQUIRED_COLLECTIONS = ("community/docker", "community/general", "ansible/posix")
# What a fetch extracts: those, what community.docker imports, and community.mysql (accounting).
FETCHED_COLLECTIONS = (*REQUIRED_COLLECTIONS, "community/library_inventory_filtering_v1", "community/mysql")
FETCH_TIMEOUT_S = 600

Progress = Callable[[str], None]
Download = Callable[[Path], Path]


class AnsibleSetupError(Exception):
    """Ansible cannot run here; the message says what to install."""


def cache_dir() -> Path:
    """Where a fetch puts the collections: per user, per ``ansible`` release."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "clusterctl" / "ansible-collections" / ANSIBLE_RELEASE


def _has_required(base: Path) -> bool:
    return all((base / "ansible_collections" / name).is_dir() for name in REQUIRED_COLLECTIONS)


def installed_package_root() -> Path | None:
    """The directory holding an importable ``ansible_collections`` package with the collections, if any.

    Why not ``find_spec("ansible_collections.community.docker")``: finding a submodule imports
    its parents, and raises when ``ansible_collections`` itself is missing.
    """
    try:
        spec = importlib.util.find_spec("ansible_collections")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        root = Path(location).parent
        if _has_required(root):
            return root
    return None


def candidates() -> list[Path]:
    """Where collections may already be, in Ansible's order, then the checkout's and the cache's."""
    configured = [Path(p) for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
    return [
        *configured,
        data_root() / ".ansible-collections",
        cache_dir(),
        Path.home() / ".ansible" / "collections",
        Path("/usr/share/ansible/collections"),
    ]


def _path(found: Path, places: Iterable[Path]) -> str:
    """The ANSIBLE_COLLECTIONS_PATH of a run: clusterctl's own collection first, then ``found`` and the rest."""
    ordered = [collections_dir(), found, *places]
    return os.pathsep.join(dict.fromkeys(str(p) for p in ordered))


def collections_path() -> str:
    """ANSIBLE_COLLECTIONS_PATH for a run: clusterctl's own collection first, then where the others are.

    Never fetches (hashes of what a run would use call it too); `ensure_collections` does.

    Raises:
        AnsibleSetupError: the collections are nowhere to be found; the message says how to get them.
    """
    places = candidates()
    found = next((p for p in places if _has_required(p)), None) or installed_package_root()
    if found is None:
        raise AnsibleSetupError(_missing())
    return _path(found, places)


def ensure_collections(progress: Progress, download: Download | None = None) -> str:
    """ANSIBLE_COLLECTIONS_PATH for a run, fetching the collections into the cache first when they are missing.

    ``progress`` gets one line before a fetch starts (it takes a few seconds to minutes).

    Raises:
        AnsibleSetupError: they are missing and cannot be fetched; the message names the fix.
    """
    with contextlib.suppress(AnsibleSetupError):
        return collections_path()
    target = cache_dir()
    progress(
        f"The Ansible collections the roles need are not installed: fetching them once from the `ansible "
        f"{ANSIBLE_RELEASE}` package on PyPI ({WHEEL_MB} MB, checked against its sha256) into {target}."
    )
    fetch(target, download or pip_download)
    return collections_path()


def pip_download(dest: Path) -> Path:
    """Download the pinned ``ansible`` wheel into ``dest`` with this interpreter's pip (its index and proxy settings).

    Raises:
        AnsibleSetupError: pip is missing or the download failed.
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dest)]
    command += ["--disable-pip-version-check", "--quiet", f"ansible=={ANSIBLE_RELEASE}"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise AnsibleSetupError(_missing(f"pip did not finish downloading in {FETCH_TIMEOUT_S} s")) from None
    wheel = dest / WHEEL
    if result.returncode != 0 or not wheel.is_file():
        lines = [line for line in result.stderr.splitlines() if line.strip() and "is ignored" not in line]
        why = lines[-1].strip() if lines else f"pip exited {result.returncode}"
        if "No module named pip" in result.stderr:
            why = "this Python environment has no pip"
        raise AnsibleSetupError(_missing(f"`pip download ansible=={ANSIBLE_RELEASE}` failed: {why[:300]}"))
    return wheel


def fetch(target: Path, download: Download, sha256: str = "") -> None:
    """Download the wheel, check it (against ``sha256``, default the pinned one) and put the collections at
    ``target`` (atomically: all or nothing).

    Raises:
        AnsibleSetupError: the download failed, or the wheel is not the pinned one.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "wheel").mkdir()
        wheel = download(tmp / "wheel")
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        sha256 = sha256 or WHEEL_SHA256
        if digest != sha256:
            raise AnsibleSetupError(
                _missing(f"the downloaded {wheel.name} has sha256 {digest}, not the pinned {sha256}; nothing was kept")
            )
        staged = tmp / "collections"
        _extract(wheel, staged)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(target)
        staged.rename(target)


def _extract(wheel: Path, dest: Path) -> None:
    """Only the fetched collections' files, each checked to stay under ``ansible_collections/``."""
    prefixes = tuple(f"ansible_collections/{name}/" for name in FETCHED_COLLECTIONS)
    dest.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = PurePosixPath(member.filename)
            if member.is_dir() or not member.filename.startswith(prefixes):
                continue
            if name.is_absolute() or ".." in name.parts:
                raise AnsibleSetupError(_missing(f"{wheel.name} holds an unsafe path {member.filename!r}"))
            out = dest.joinpath(*name.parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, out.open("wb") as sink:
                shutil.copyfileobj(source, sink)
    if not _has_required(dest):
        raise AnsibleSetupError(_missing(f"{wheel.name} does not hold {', '.join(REQUIRED_COLLECTIONS)}"))


def _missing(why: str = "") -> str:
    names = [n.replace("/", ".") for n in FETCHED_COLLECTIONS if "filtering" not in n]
    failed = f", and fetching them failed: {why}." if why else "."
    return (
        f"The Ansible collections {', '.join(names)} are not installed{failed} Install them with "
        f"`pip install ansible=={ANSIBLE_RELEASE}` in clusterctl's environment, or with "
        f"`ansible-galaxy collection install {' '.join(names)}`, or point ANSIBLE_COLLECTIONS_PATH at a directory "
        "that has them; then run again."
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m clusterctl.run.collections [DEST]``: the checkout's ``make collections`` (into DEST)."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else cache_dir()
    stamp = target / ".version"
    if stamp.is_file() and stamp.read_text().strip() == ANSIBLE_RELEASE and _has_required(target):
        return 0
    try:
        fetch(target, pip_download)
    except AnsibleSetupError as exc:
        print(f"ansible-collections: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    stamp.write_text(ANSIBLE_RELEASE + "\n")
    count = sum(1 for p in target.rglob("*") if p.is_file())
    print(f"ansible-collections: {count} files from {WHEEL} in {target}", file=sys.stderr)  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
