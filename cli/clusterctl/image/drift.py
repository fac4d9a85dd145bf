"""A node's installed packages against its profile's locked image.

What counts as drift: the lock records the packages of the image (what the install stage put
there). A node drifted when one of those is installed at another version, or is gone. Packages
the node has that the image has not (the configure stage installs some on purpose, an admin may
add tools) are listed as ``extra``: shown, never a failure.

The node is read with one command (:data:`DPKG_QUERY`), the same one the lock is written from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# Status (want, state, error), the package with its architecture where Debian qualifies it, version.
DPKG_QUERY = "dpkg-query -W -f '${db:Status-Abbrev}\\t${binary:Package}\\t${Version}\\n'"


class PackageListError(ValueError):
    """A line of dpkg-query's output that is not status, name and version."""


def parse_packages(text: str) -> dict[str, str]:
    """Installed packages (name -> version) from :data:`DPKG_QUERY`'s output.

    Only packages whose state is installed count (``ii``, ``hi``: the second letter); a package
    removed with its configuration kept (``rc``), half installed or unpacked is not installed.

    Raises:
        PackageListError: a line is not three tab-separated fields.
    """
    packages: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3 or len(parts[0]) < 2 or not parts[1]:
            raise PackageListError(f"line {number} is not 'status<TAB>package<TAB>version': {line[:120]!r}")
        status, name, version = parts
        if status[1] == "i":
            packages[name] = version
    return packages


def installed_packages(
    text: str, where: str, error: Callable[[str], Exception], preposition: str = "in"
) -> dict[str, str]:
    """The installed packages ``text`` lists, read ``preposition`` ``where`` (a builder, an image).

    Raises:
        Exception: what ``error`` makes of a message naming ``where``, when the list cannot be
            read or names no installed package.
    """
    try:
        packages = parse_packages(text)
    except PackageListError as exc:
        raise error(f"the package list of {where} could not be read: {exc}") from None
    if not packages:
        raise error(f"dpkg-query lists no installed package {preposition} {where}")
    return packages


@dataclass(frozen=True)
class PackageDrift:
    """How a node's packages differ from its image's.

    Attributes:
        changed: package -> (locked version, installed version).
        missing: package -> locked version, for packages of the image the node no longer has.
        extra: package -> installed version, for packages the image has not (informational).
    """

    changed: dict[str, tuple[str, str]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def drifted(self) -> bool:
        """A package of the image changed version or is gone."""
        return bool(self.changed or self.missing)

    def differences(self) -> list[str]:
        """One phrase per drifted package, by name: ``hello 2.10-3 -> 2.10-2``, ``hello missing (locked 2.10-3)``."""
        items = [(name, f"{name} {old} -> {new}") for name, (old, new) in self.changed.items()]
        items += [(name, f"{name} missing (locked {old})") for name, old in self.missing.items()]
        return [text for _, text in sorted(items)]

    def summary(self, limit: int = 5) -> str:
        """The drift in one line, at most ``limit`` packages named (then a count)."""
        parts = self.differences()
        shown = parts[:limit] + ([f"{len(parts) - limit} more"] if len(parts) > limit else [])
        text = "; ".join(shown) if shown else "matches the lock"
        if self.extra:
            text += f" (+{len(self.extra)} not in the image)"
        return text

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "drifted": self.drifted,
            "changed": {k: {"locked": old, "installed": new} for k, (old, new) in sorted(self.changed.items())},
            "missing": dict(sorted(self.missing.items())),
            "extra": dict(sorted(self.extra.items())),
        }


def compare_packages(locked: Mapping[str, str], installed: Mapping[str, str]) -> PackageDrift:
    """``installed`` (a node's) against ``locked`` (its image's)."""
    return PackageDrift(
        changed={n: (v, installed[n]) for n, v in sorted(locked.items()) if n in installed and installed[n] != v},
        missing={n: v for n, v in sorted(locked.items()) if n not in installed},
        extra={n: v for n, v in sorted(installed.items()) if n not in locked},
    )
