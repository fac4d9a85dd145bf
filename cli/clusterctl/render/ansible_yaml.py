"""YAML that Ansible reads as data: every string is ``!unsafe`` unless render means it as a template.

Why: Ansible templates every string variable it uses, recursively, so a spec value such as
``/home/{{ lookup('pipe', 'touch x') }}`` in the inventory would run on the control machine
the first time a role used it. ``!unsafe`` marks a string as data: roles still receive the
literal text (also inside their own templates), and ``{{``, ``{%`` and ``{#`` stay text.
Only the variables of :data:`TEMPLATED`, with exactly the value written there (a constant of
the render, never spec data), are left for Ansible to template.

The inventory (``hosts.yml``, ``group_vars/all.yml``), the extra variables of a run and the
inventories written at run time all go through :func:`dump`. Python code that reads these
files back uses :func:`load`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.nodes import ScalarNode as _PyYAMLScalar
from yaml.resolver import Resolver as _PyYAMLResolver

from clusterctl.render.escape import printable, yaml_quote

# The allow-list: the only values in generated YAML that Ansible templates, by top-level
# variable name and exact value. Each is a constant of the render, never spec data.
TEMPLATED: dict[str, str] = {
    # Files this inventory was rendered with (render/inventory.py); roles copy them from here.
    "clusterctl_render_dir": "{{ inventory_dir }}/../..",
}

UNSAFE_TAG = "!unsafe"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_IMPLICIT_KEY_MAX = 1000
_FLOW_LINE_MAX = 150


def _key(key: Any) -> str:
    text = str(key)
    return text if _PLAIN_KEY.match(text) else f"{UNSAFE_TAG} {yaml_quote(text)}"


def scalar(value: Any) -> str:
    """One YAML scalar: strings ``!unsafe``, the other types as they are."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)}: {scalar(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    text = str(value)
    if _reads_as_other_type(text):
        return yaml_quote(text)
    return f"{UNSAFE_TAG} {yaml_quote(text)}"


_STR_TAG = "tag:yaml.org,2002:str"


def _reads_as_other_type(text: str) -> bool:
    """Whether ansible-core would read ``!unsafe "text"`` as a number, boolean, null or date.

    Why: ansible-core 2.19 builds an ``!unsafe`` scalar by resolving its text again as if it were
    plain (``ansible/_internal/_yaml/_constructor.py`` ``_resolve_and_construct_object``:
    ``resolve(..., (True, False))``), so ``!unsafe "12.8"`` arrives as the float 12.8 and
    ``"23.10"`` as 23.1. Such text holds no template syntax (no ``{``): written quoted and
    untagged, it stays the string it is and there is nothing to template.
    """
    if "{" in text:
        return False
    return _PyYAMLResolver().resolve(_PyYAMLScalar, text, (True, False)) != _STR_TAG


def _lines(data: Any, indent: int, out: list[str]) -> None:
    """Block-style YAML of dicts and lists with :func:`scalar` leaves.

    Why not a YAML library: emitting the inventory of a few thousand hosts took seconds with
    the pure-Python emitters; this is a plain walk over dicts, lists and scalars.
    """
    pad = " " * indent
    if isinstance(data, dict):
        for key in sorted(data):
            value = data[key]
            name = _key(key)
            # YAML allows implicit keys up to 1024 characters; longer ones need the explicit "? key".
            head = f"{pad}? {name}\n{pad}:" if len(name) > _IMPLICIT_KEY_MAX else f"{pad}{name}:"
            nested = isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))
            # A list of scalars stays on one line unless that line gets long (yamllint's 160 columns).
            long_list = isinstance(value, list) and len(head) + len(scalar(value)) > _FLOW_LINE_MAX
            if (nested or long_list) and value:
                out.append(head)
                _lines(value, indent + 2, out)
            elif indent == 0 and isinstance(value, str) and TEMPLATED.get(str(key)) == value:
                out.append(f"{head} {yaml_quote(value)}")
            else:
                out.append(f"{head} {scalar(value)}")
    elif isinstance(data, list):
        for item in data:
            if isinstance(item, dict) and item:
                sub: list[str] = []
                _lines(item, indent + 2, sub)
                sub[0] = f"{pad}- {sub[0].lstrip()}"
                out.extend(sub)
            else:
                out.append(f"{pad}- {scalar(item)}")


def dump(data: dict[str, Any], header: str) -> str:
    """``data`` as an Ansible YAML document whose first comment is ``header``."""
    lines: list[str] = []
    _lines(data, 0, lines)
    return f"---\n# {printable(header)}\n" + "\n".join(lines) + "\n"


class _Constructor(SafeConstructor):
    """Reads ``!unsafe`` scalars, lists and maps as plain data."""


def _unsafe(constructor: SafeConstructor, node: Node) -> Any:
    if isinstance(node, ScalarNode):
        return constructor.construct_scalar(node)
    if isinstance(node, SequenceNode):
        return constructor.construct_sequence(node, deep=True)
    if isinstance(node, MappingNode):
        return constructor.construct_mapping(node, deep=True)
    raise ValueError(f"unexpected YAML node {node!r}")


_Constructor.add_constructor(UNSAFE_TAG, _unsafe)


def load(text: str) -> Any:
    """Read a file :func:`dump` wrote (``!unsafe`` strings come back as plain strings)."""
    reader = YAML(typ="safe", pure=True)
    reader.Constructor = _Constructor
    return reader.load(text)
