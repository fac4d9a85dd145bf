"""Checks on node names and addresses before they reach an argv or a Slurm command.

Names and addresses read from Slurm or a node are data: a NodeAddr of ``-oProxyCommand=...``
must never reach ssh as an option. Every argv that carries one ends options with ``--`` as
well; these checks are the second lock.
"""

from __future__ import annotations

import ipaddress
import re

# RFC 1123 labels, dot-separated (what the spec's Hostname type allows, and Slurm's node names).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_NAME_RE = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
MAX_NAME = 253


class NameCheckError(ValueError):
    """A node name or address that is not one."""


def is_node_name(text: str) -> bool:
    """A host name: letters, digits and inner hyphens in dot-separated labels; never starts with ``-``."""
    return 0 < len(text) <= MAX_NAME and _NAME_RE.fullmatch(text) is not None


def is_address(text: str) -> bool:
    """An IPv4 or IPv6 address, or a host name."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return is_node_name(text)
    return True


def node_name(text: str) -> str:
    """``text`` when it is a node name.

    Raises:
        NameCheckError: It is not.
    """
    if not is_node_name(text):
        raise NameCheckError(f"{text[:80]!r} is not a node name")
    return text


def address(text: str) -> str:
    """``text`` when it is an address or host name.

    Raises:
        NameCheckError: It is not.
    """
    if not is_address(text):
        raise NameCheckError(f"{text[:80]!r} is not an address")
    return text
