"""Slurm hostlist expressions: expand ``gpu[001-004,007]`` and compress names back.

Why here: slurm.conf, topology.conf, the fabric linter and the verify test plan
all speak hostlists, and Slurm's own rules (zero padding kept, one bracket group
per name) must be applied the same way everywhere.

Hostlists also come from outside (a topology.conf to lint, slurmctld's resume
argument, sinfo output), so ``expand`` counts the names an expression stands for
before it builds any, and refuses more than ``MAX_HOSTLIST_NAMES``: ``node[0-99999999]``
is an error, never a hundred million strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NAME_RE = re.compile(r"^(?P<prefix>.*?)(?P<num>\d+)(?P<suffix>\D*)$")

# Twice the largest cluster a spec may describe (clusterctl.spec.models.MAX_NODES_TOTAL).
MAX_HOSTLIST_NAMES = 65536
# Digits of one range bound: enough for any index, short of Python's int-parsing limits.
MAX_INDEX_DIGITS = 12


class HostlistError(ValueError):
    """A hostlist expression that cannot be expanded."""


def _split_top_level(expr: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in expr:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {expr!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in hostlist {expr!r}")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:55] + "...")


def _ranges(body: str, item: str) -> list[tuple[int, int, int, str]]:
    """Parse one bracket body into (low, high, width, text) ranges, checking every bound."""
    out: list[tuple[int, int, int, str]] = []
    for rng in body.split(","):
        rng = rng.strip()
        lo_s, _, hi_s = rng.partition("-")
        hi_s = hi_s if "-" in rng else lo_s
        if not (lo_s.isascii() and lo_s.isdigit() and hi_s.isascii() and hi_s.isdigit()):
            what = "range" if "-" in rng else "element"
            raise HostlistError(f"bad {what} {_short(rng)} in hostlist {_short(item)}")
        if max(len(lo_s), len(hi_s)) > MAX_INDEX_DIGITS:
            raise HostlistError(
                f"index {_short(rng)} in hostlist {_short(item)} has more than {MAX_INDEX_DIGITS} digits"
            )
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise HostlistError(f"descending range {_short(rng)} in hostlist {_short(item)}")
        out.append((lo, hi, len(lo_s), rng))
    return out


def _groups(item: str) -> tuple[list[str], list[list[tuple[int, int, int, str]]]]:
    """Split ``a[1-2]b[3]c`` into literal parts and the ranges of each bracket group."""
    literals: list[str] = []
    groups: list[list[tuple[int, int, int, str]]] = []
    rest = item
    while (start := rest.find("[")) >= 0:
        end = rest.find("]", start)
        literals.append(rest[:start])
        groups.append(_ranges(rest[start + 1 : end], item))
        rest = rest[end + 1 :]
    literals.append(rest)
    return literals, groups


def count(expr: str) -> int:
    """How many names ``expr`` stands for, without building them.

    Raises:
        HostlistError: the expression is malformed.
    """
    total = 0
    for item in _split_top_level(expr):
        _, groups = _groups(item)
        names = 1
        for ranges in groups:
            names *= sum(hi - lo + 1 for lo, hi, _, _ in ranges)
        total += names
    return total


def _expand_groups(literals: list[str], groups: list[list[tuple[int, int, int, str]]]) -> list[str]:
    if not groups:
        return [literals[0]]
    names: list[str] = []
    # Slurm's order: the last bracket group varies slowest (as the recursive expansion always did).
    for tail in _expand_groups(literals[1:], groups[1:]):
        for lo, hi, width, rng in groups[0]:
            if "-" in rng:
                names.extend(f"{literals[0]}{n:0{width}d}{tail}" for n in range(lo, hi + 1))
            else:
                names.append(f"{literals[0]}{rng}{tail}")
    return names


def expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into names, in the order written.

    Raises:
        HostlistError: the expression is malformed or stands for more than ``MAX_HOSTLIST_NAMES`` names
            (counted before any name is built).
    """
    names_wanted = count(expr)
    if names_wanted > MAX_HOSTLIST_NAMES:
        raise HostlistError(
            f"hostlist {_short(expr)} stands for {names_wanted} names; at most {MAX_HOSTLIST_NAMES} are allowed "
            "(check the ranges for a typo)"
        )
    names: list[str] = []
    for item in _split_top_level(expr):
        names.extend(_expand_groups(*_groups(item)))
    return names


def compress(names: Iterable[str]) -> str:
    """Compress names into a Slurm hostlist, keeping first-seen order of prefixes.

    Numbers keep their zero padding; names without a trailing number stay as they are.
    """
    groups: dict[tuple[str, str, int], list[int]] = {}
    order: list[tuple[str, str, int] | str] = []
    for name in names:
        match = _NAME_RE.match(name)
        if not match:
            order.append(name)
            continue
        num = match["num"]
        # Zero-padded numbers keep their width; unpadded ones (n1..n10) share a group.
        width = len(num) if num.startswith("0") and len(num) > 1 else 0
        padded_key = (match["prefix"], match["suffix"], len(num))
        key = padded_key if width or padded_key in groups else (match["prefix"], match["suffix"], 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match["num"]))
    out: list[str] = []
    for entry in order:
        if isinstance(entry, str):
            out.append(entry)
            continue
        key = entry
        prefix, suffix, width = key
        numbers = sorted(set(groups[key]))
        if len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]:0{width}d}{suffix}")
            continue
        ranges: list[str] = []
        lo = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{lo:0{width}d}" if lo == prev else f"{lo:0{width}d}-{prev:0{width}d}")
            if n is not None:
                lo = prev = n
        out.append(f"{prefix}[{','.join(ranges)}]{suffix}")
    return ",".join(out)
