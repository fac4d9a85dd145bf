"""Slurm hostlist expressions: expand ``gpu[001-004,007]`` and compress names back.

Why here: slurm.conf, topology.conf, the fabric linter and the verify test plan
all speak hostlists, and Slurm's own rules (zero padding kept, one bracket group
per name) must be applied the same way everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NAME_RE = re.compile(r"^(?P<prefix>.*?)(?P<num>\d+)(?P<suffix>\D*)$")


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


def _expand_one(item: str) -> list[str]:
    start = item.find("[")
    if start < 0:
        return [item]
    end = item.find("]", start)
    prefix, body, rest = item[:start], item[start + 1 : end], item[end + 1 :]
    names: list[str] = []
    for tail in _expand_one(rest):
        for rng in body.split(","):
            rng = rng.strip()
            if "-" in rng:
                lo_s, hi_s = rng.split("-", 1)
                if not (lo_s.isdigit() and hi_s.isdigit()):
                    raise HostlistError(f"bad range {rng!r} in hostlist {item!r}")
                lo, hi = int(lo_s), int(hi_s)
                if hi < lo:
                    raise HostlistError(f"descending range {rng!r} in hostlist {item!r}")
                width = len(lo_s)
                names.extend(f"{prefix}{n:0{width}d}{tail}" for n in range(lo, hi + 1))
            elif rng.isdigit():
                names.append(f"{prefix}{rng}{tail}")
            else:
                raise HostlistError(f"bad element {rng!r} in hostlist {item!r}")
    return names


def expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into names, in the order written."""
    names: list[str] = []
    for item in _split_top_level(expr):
        names.extend(_expand_one(item))
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
