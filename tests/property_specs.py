"""Hypothesis strategies for spec documents: mutations of the examples, as data and as YAML text.

Shared by ``tests/unit/test_property_pipeline.py`` and ``benchmarks/property_pipeline.py``, so
the benchmark times exactly the documents the test checks.

A document is drawn from one of four families:

- ``data``: examples/local.yaml or examples/onprem-h100-256.yaml loaded, then 1-4 random
  edits (set a random value of a random type, delete, rename, add an unknown key, duplicate or
  drop a list item), dumped back to YAML;
- ``text``: the example's YAML source with line-level edits (delete, duplicate, swap lines,
  insert a hostile line, replace a value, re-indent, truncate, splice characters in);
- ``yaml``: random YAML text built from YAML's own syntax (anchors, aliases, tags, merge keys,
  flow collections, directives, documents markers);
- ``bytes``: random bytes, including invalid UTF-8.
"""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from ruamel.yaml import YAML

from tests.conftest import EXAMPLES
from tests.specs import example_data

BASES = ("local.yaml", "onprem-h100-256.yaml")
DATA = {name: example_data(name) for name in BASES}
TEXT = {name: (EXAMPLES / name).read_text() for name in BASES}

# Strings a hostile or careless spec author writes: template syntax, shell, paths, line breaks,
# format metacharacters, look-alike and invisible unicode, and values that YAML 1.1 would retype.
HOSTILE = [
    "{{ lookup('pipe', 'touch PWNED') }}",
    "{% raw %}x{% endraw %}",
    "{# c #}",
    "$(touch PWNED)",
    "`id`",
    "; rm -rf /",
    "a\nb",
    "a\rb",
    "x\nNodeName=evil",
    "[evil]\nkey=value",
    "#comment",
    "key=value",
    "'\"",
    "../../../etc/passwd",
    "/etc/shadow",
    "..",
    ".",
    "",
    " ",
    "\t",
    "a\x00b",
    "\u202e",
    "ｇｐｕ",
    "gpu\u200b",
    "ɡpu",
    "x" * 300,
    "yes",
    "no",
    "on",
    "off",
    "~",
    "null",
    "12.10",
    "0x1F",
    "1e9",
    "2024-01-01",
    "1_000",
    "0.0.0.0/0",
    "::1",
    "mlx5_1",
    "H100-SXM-80GB",
    "local",
    "-1",
    "*",
    "&a",
    "!!python/object:os.system",
    "%",
]

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.integers(min_value=-3, max_value=70000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=24),
    st.sampled_from(HOSTILE),
)
KEYS = st.one_of(
    st.sampled_from(["kind", "name", "group", "count", "x", "hardware", "version", "<<", "", "1"]),
    st.text(max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


@dataclass(frozen=True)
class Document:
    """One generated spec file: which family, which example it came from, and its bytes."""

    family: str
    base: str
    content: bytes

    def write(self, folder: Path) -> Path:
        """Write the spec (and examples/machines.csv, which the on-prem example references)."""
        path = folder / "spec.yaml"
        path.write_bytes(self.content)
        csv = folder / "machines.csv"
        if not csv.exists():
            csv.write_bytes((EXAMPLES / "machines.csv").read_bytes())
        return path


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


PATHS = {name: _paths(data) for name, data in DATA.items()}


def _dump(data: Any) -> bytes:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue().encode("utf-8", errors="surrogatepass")


@st.composite
def data_documents(draw: st.DrawFn) -> Document:
    """An example as data with 1-4 random edits."""
    base = draw(st.sampled_from(BASES))
    data = copy.deepcopy(DATA[base])
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(PATHS[base]))
        parent: Any = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            last = path[-1]
            action = draw(st.sampled_from(["set", "set", "set", "delete", "rename", "add", "dup", "wrap"]))
            if action == "set":
                parent[last] = draw(VALUES)
            elif action == "delete":
                del parent[last]
            elif action == "rename" and isinstance(parent, dict):
                parent[draw(KEYS)] = parent.pop(last)
            elif action == "add" and isinstance(parent[last], dict):
                parent[last][draw(KEYS)] = draw(VALUES)
            elif action == "dup" and isinstance(parent[last], list) and parent[last]:
                parent[last].append(copy.deepcopy(parent[last][0]))
            elif action == "wrap":
                parent[last] = draw(st.sampled_from([[parent[last]], {"value": parent[last]}, str(parent[last])]))
        except (KeyError, IndexError, TypeError):
            continue
    return Document("data", base, _dump(data))


YAML_LINES = st.one_of(
    st.sampled_from(
        [
            "a: &x [1, 2]",
            "b: *x",
            "<<: *x",
            "c: &y {k: v}",
            "<<: {kind: evil}",
            "!!python/object/apply:os.system [touch PWNED]",
            "x: !!binary aGVsbG8=",
            "x: !custom tag",
            "%YAML 1.1",
            "%TAG ! tag:evil,2024:",
            "---",
            "...",
            "? [complex, key]",
            ": value",
            "- item",
            "\tindented: with a tab",
            "key: 'unterminated",
            'key: "unterminated',
            "key: |",
            "key: >-",
            "{flow: [unclosed",
            "key: value # comment",
            "key: 0o17",
            "key: .nan",
            "key: -.inf",
            "key: 2001-12-14t21:59:43.10-05:00",
            "name: x\x00y",
            "\ufeffname: bom",
            "name: \u2028line separator",
        ]
    ),
    st.builds(lambda k, v: f"{k}: {v}", KEYS, st.sampled_from(HOSTILE)),
)


@st.composite
def text_documents(draw: st.DrawFn) -> Document:
    """An example's YAML source with 1-3 line or character edits."""
    base = draw(st.sampled_from(BASES))
    lines = TEXT[base].split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "dup", "swap", "insert", "value", "indent", "truncate", "splice"]))
        if action == "delete" and len(lines) > 1:
            del lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "insert":
            indent = " " * draw(st.sampled_from([0, 2, 4, 6]))
            lines.insert(i, indent + draw(YAML_LINES))
        elif action == "value" and ":" in lines[i]:
            head = lines[i].split(":", 1)[0]
            value = draw(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=16)))
            lines[i] = f"{head}: {value}"
        elif action == "indent":
            lines[i] = " " * draw(st.integers(0, 9)) + lines[i].lstrip()
        elif action == "truncate":
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: draw(st.integers(0, len(lines[-1])))]
        elif action == "splice":
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + draw(st.text(min_size=1, max_size=4)) + lines[i][at:]
    text = "\n".join(lines)
    return Document("text", base, text.encode("utf-8", errors="surrogatepass"))


@st.composite
def yaml_documents(draw: st.DrawFn) -> Document:
    """Random YAML text from YAML's own syntax."""
    body = "\n".join(draw(st.lists(YAML_LINES, min_size=1, max_size=8)))
    return Document("yaml", "-", body.encode("utf-8", errors="surrogatepass"))


@st.composite
def byte_documents(draw: st.DrawFn) -> Document:
    """Random bytes (often not UTF-8)."""
    return Document("bytes", "-", draw(st.binary(max_size=200)))


def documents() -> st.SearchStrategy[Document]:
    """Any of the four families, weighted towards edits of the examples (they reach the deepest code)."""
    return st.one_of(data_documents(), data_documents(), text_documents(), yaml_documents(), byte_documents())
