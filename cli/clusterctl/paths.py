"""Where clusterctl's data (roles, templates, stacks, examples) lives: a checkout or the wheel."""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def data_root() -> Path:
    """The directory holding ``roles/``, ``collections/``, ``templates/``, ``stacks/`` and ``inventory/``.

    Why two places: an installed wheel carries them under ``clusterctl/_data``; an editable
    install or a checkout has them at the repository root.
    """
    packaged = Path(__file__).resolve().parent / "_data"
    if (packaged / "templates").is_dir():
        return packaged
    return Path(__file__).resolve().parents[2]


def templates_dir() -> Path:
    """Jinja templates of generated files."""
    return data_root() / "templates"


def roles_dir() -> Path:
    """The Ansible roles (and ``site.yml`` beside them)."""
    return data_root() / "roles"


def collections_dir() -> Path:
    """clusterctl's own Ansible collections (``ansible_collections/clusterctl/node``: sync_files).

    Why here and not with the others: they ship with clusterctl and change with its roles, so every
    run puts this directory first on ANSIBLE_COLLECTIONS_PATH.
    """
    return data_root() / "collections"


def stacks_dir() -> Path:
    """The Pulumi programs."""
    return data_root() / "stacks"


def owner_name(uid: int) -> str:
    """``uid 1000 (alice)``: who owns a file, for a message that says why clusterctl refuses it."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"
