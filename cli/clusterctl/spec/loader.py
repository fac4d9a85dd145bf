"""Load ``spec.yaml`` with positions, validate it, and turn every problem into a located finding.

Why a custom loader: errors must name ``file:line:col``. ruamel keeps the position of every
key and value; pydantic reports a ``loc`` path. We convert the document into plain Python
while recording positions by path, and map pydantic's ``loc`` (which includes discriminated
union tags) back onto document paths.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from clusterctl.spec.findings import Finding, Level
from clusterctl.spec.findings import Path as FieldPath
from clusterctl.spec.limits import guard_yaml, read_capped
from clusterctl.spec.messages import describe
from clusterctl.spec.models import Spec
from clusterctl.spec.types import YamlFloat


class _NoTimestampConstructor(RoundTripConstructor):
    """Keeps ``2024-01-01``-looking scalars as strings (YAML timestamps are a footgun here)."""


_NoTimestampConstructor.add_constructor(
    "tag:yaml.org,2002:timestamp",
    lambda self, node: self.construct_scalar(node),
)


# What a spec with schema errors is not checked for: the rules read a whole, typed spec.
SCHEMA_FIRST = "The rules (references, names, network, versions, fabric, storage, sizing) run once these are fixed."


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.Constructor = _NoTimestampConstructor
    yaml.allow_duplicate_keys = False
    return yaml


@dataclass
class Positions:
    """Line/column (1-based) of every key and value in a document, by field path."""

    values: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: FieldPath, prefer_key: bool = False) -> tuple[int, int]:
        """The position of ``path`` or of its nearest ancestor that has one."""
        probe = tuple(path)
        while True:
            if prefer_key and probe in self.keys:
                return self.keys[probe]
            if probe in self.values:
                return self.values[probe]
            if probe in self.keys:
                return self.keys[probe]
            if not probe:
                return (1, 1)
            probe = probe[:-1]


# Where a plain scalar ends in block or flow style.
_SCALAR_END = re.compile(r"[\s,\]}#]")


def _written(lines: list[str], line: int, column: int) -> str:
    """The plain scalar as it stands in the source at 0-based ``line``/``column`` ("" when out of range)."""
    if line >= len(lines):
        return ""
    text = lines[line][column:]
    end = _SCALAR_END.search(text)
    return text[: end.start()] if end else text


def _plain(node: Any, path: FieldPath, pos: Positions, lines: list[str], at: tuple[int, int] = (0, 0)) -> Any:
    """Convert ruamel's round-trip nodes into plain Python, recording positions.

    A float keeps the text it was written as (`YamlFloat`): YAML reads ``12.10`` as 12.1, and a
    message that asks for quotes must give back what the user wrote.
    """
    if isinstance(node, CommentedMap):
        out: dict[Any, Any] = {}
        for key in node:
            sub = (*path, key if isinstance(key, str | int) else str(key))
            # A key that came in through a merge (`<<: *defaults`) has no position of its own in
            # this mapping: it is placed at the mapping itself.
            here = (node.lc.data or {}).get(key)
            kl, kc, vl, vc = here if here else (node.lc.line, node.lc.col, node.lc.line, node.lc.col)
            pos.keys[sub] = (kl + 1, kc + 1)
            pos.values[sub] = (vl + 1, vc + 1)
            out[key] = _plain(node[key], sub, pos, lines, (vl, vc))
        return out
    if isinstance(node, CommentedSeq):
        items: list[Any] = []
        for index, item in enumerate(node):
            sub = (*path, index)
            line, col = node.lc.item(index)
            pos.values[sub] = (line + 1, col + 1)
            items.append(_plain(item, sub, pos, lines, (line, col)))
        return items
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return YamlFloat(float(node), _written(lines, *at))
    if isinstance(node, str):
        return str(node)
    return node


@dataclass
class LoadedSpec:
    """A validated spec together with where it came from."""

    spec: Spec
    path: Path
    positions: Positions
    data: dict[str, Any]

    @property
    def base_dir(self) -> Path:
        """Directory that relative paths in the spec (e.g. machines.csv) are relative to."""
        return self.path.parent

    def place(self, finding: Finding) -> Finding:
        """Fill in file/line/column of a finding located in this spec."""
        if finding.file and finding.line:
            return finding
        line, col = self.positions.locate(finding.path)
        return dataclasses.replace(finding, file=finding.file or str(self.path), line=line, column=col)


# --- mapping pydantic's loc onto document paths ---------------------------------------------------


def _unwrap(tp: Any) -> Any:
    """Strip Annotated and Optional wrappers."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp


def _union_members(tp: Any) -> dict[str, type[BaseModel]]:
    """For a union of models with a ``kind`` literal, map each tag to its model."""
    members: dict[str, type[BaseModel]] = {}
    if typing.get_origin(tp) not in (Union, types.UnionType):
        return members
    for arg in typing.get_args(tp):
        if isinstance(arg, type) and issubclass(arg, BaseModel) and "kind" in arg.model_fields:
            kind_tp = arg.model_fields["kind"].annotation
            if typing.get_origin(kind_tp) is Literal:
                for tag in typing.get_args(kind_tp):
                    members[str(tag)] = arg
    return members


def resolve_loc(loc: tuple[str | int, ...]) -> tuple[FieldPath, type[BaseModel] | None]:
    """Map a pydantic ``loc`` to a document path and the model owning its last segment."""
    tp: Any = Spec
    path: list[str | int] = []
    owner: type[BaseModel] | None = None
    for seg in loc:
        tp = _unwrap(tp)
        members = _union_members(tp)
        if members and isinstance(seg, str) and seg in members:
            tp = members[seg]
            continue
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            owner = tp
            info = tp.model_fields.get(str(seg))
            tp = info.annotation if info else None
        elif typing.get_origin(tp) is list:
            tp = typing.get_args(tp)[0]
        elif typing.get_origin(tp) is dict:
            tp = typing.get_args(tp)[1]
        else:
            tp = None
        path.append(seg)
    return tuple(path), owner


def _suggest(word: str, owner: type[BaseModel] | None) -> str:
    if owner is None:
        return ""
    close = difflib.get_close_matches(word, list(owner.model_fields), n=1, cutoff=0.6)
    return f"Did you mean `{close[0]}`?" if close else f"Known fields: {', '.join(owner.model_fields)}."


def _value_at(data: Any, path: FieldPath) -> Any:
    for seg in path:
        if not isinstance(data, dict | list):
            return None
        try:
            data = data[seg]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _field_name(path: FieldPath, key_error: bool = False) -> str:
    """How a message names the field: ``mount``, ``rails[0]``, or the mapping whose key is wrong."""
    if not path:
        return "spec"
    if key_error:
        return f"{path[-2]}` key `{path[-1]}" if len(path) > 1 else str(path[-1])
    if isinstance(path[-1], int) and len(path) > 1:
        return f"{path[-2]}[{path[-1]}]"
    return str(path[-1])


def _error(
    file: str,
    code: str,
    rule: str,
    message: str,
    hint: str,
    at: tuple[int, int] = (0, 0),
    path: FieldPath = (),
    data: dict[str, Any] | None = None,
) -> Finding:
    """An error in the spec file, ``at`` its 1-based line and column ((0, 0) when unknown)."""
    line, column = at
    return Finding(
        code, Level.ERROR, message, hint, rule, path=path, file=file, line=line, column=column, data=data or {}
    )


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of the character at ``offset``."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def _mark_position(mark: Any) -> tuple[int, int]:
    """The 1-based line and column of a ruamel error mark ((0, 0) when there is none)."""
    return (mark.line + 1, mark.column + 1) if mark else (0, 0)


def _findings_from_validation(error: ValidationError, file: str, positions: Positions, data: Any) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[tuple[FieldPath, str]] = set()
    for err in error.errors(include_url=False):
        path, owner = resolve_loc(tuple(err["loc"]))
        kind = err["type"]
        # pydantic reports a bad mapping key as ``(..., key, "[key]")``: point at the key itself.
        key_error = bool(path) and path[-1] == "[key]"
        if key_error:
            path = path[:-1]
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            # Point at the `kind:` the user wrote (or the mapping lacking it).
            kind_pos = positions.values.get((*path, "kind"))
            line, col = kind_pos or positions.locate(path)
        elif kind == "missing":
            # The field is absent: point at the mapping that should hold it.
            line, col = positions.locate(path[:-1], prefer_key=True)
        else:
            # A whole mapping or list is wrong (too long, too many nodes): point at its key, not its first item.
            container = isinstance(_value_at(data, path), dict | list)
            line, col = positions.locate(path, prefer_key=kind == "extra_forbidden" or key_error or container)
        name = _field_name(path, key_error)
        ctx = dict(err.get("ctx") or {})
        message = describe(kind, name, err.get("input"), ctx, err["msg"])
        hint = ""
        if kind == "extra_forbidden":
            hint = _suggest(name, owner)
        elif kind in ("bool_type", "bool_parsing"):
            hint = "Write true or false."
        elif kind == "union_tag_invalid":
            hint = f"Known kinds: {ctx.get('expected_tags', '')}."
        key = (path, kind)
        if key in seen:
            continue
        seen.add(key)
        value = repr(_value_at(data, path))[:80]
        findings.append(_error(file, f"SPEC-{kind}", "schema", message, hint, (line, col), path, {"value": value}))
    return findings


def parse_yaml(text: str, file: str) -> tuple[Any, Positions]:
    """Parse YAML text into plain data and positions, raising ``SpecError`` on syntax errors.

    The document is first checked against the caps in ``clusterctl.spec.limits`` (size, alias
    expansion, nesting depth, value length), so a hostile document is refused before it is built.
    """
    from clusterctl.spec.findings import SpecError

    guard_yaml(text, file)
    positions = Positions()
    try:
        document = _yaml().load(text)
    except DuplicateKeyError as exc:
        message = f"Duplicate key: {exc.problem}.".replace("\n", " ")
        hint = "Each key may appear once in a mapping; remove or merge the duplicate."
        at = _mark_position(exc.problem_mark)
        raise SpecError([_error(file, "SPEC-duplicate-key", "yaml", message, hint, at)]) from None
    except MarkedYAMLError as exc:
        message = f"This is not valid YAML: {exc.problem or exc.context}."
        hint = "Check indentation and quoting around this line."
        at = _mark_position(exc.problem_mark or exc.context_mark)
        raise SpecError([_error(file, "SPEC-yaml", "yaml", message, hint, at)]) from None
    except YAMLError as exc:
        # Unmarked errors: the reader refusing a control character (it gives a character offset).
        offset = getattr(exc, "position", None)
        at = _line_column(text, offset) if isinstance(offset, int) else (1, 1)
        character = getattr(exc, "character", None)
        what = f"the character #x{character:04x}" if isinstance(character, int) else str(exc).split("\n")[0][:120]
        message = f"This is not valid YAML: {what} is not allowed in a YAML file."
        hint = "Remove control characters (NUL, escape codes); a spec is plain UTF-8 text."
        raise SpecError([_error(file, "SPEC-yaml", "yaml", message, hint, at)]) from None
    return _plain(document, (), positions, text.splitlines()), positions


def load_spec(path: str | Path) -> LoadedSpec:
    """Read and validate a spec file.

    Raises:
        SpecError: with every problem found, each located at file:line:col.
    """
    from clusterctl.spec.findings import SpecError

    spec_path = Path(path)
    file = str(spec_path)
    try:
        raw = read_capped(spec_path, file)
    except OSError as exc:
        message = f"Cannot read the spec: {exc.strerror or exc}."
        hint = "Check the path; a spec is a YAML file such as examples/local.yaml."
        raise SpecError([_error(file, "SPEC-file", "file", message, hint)]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"The spec is not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot start a character."
        # latin-1 decodes every byte to one character, so the byte offset stays the character offset.
        at = _line_column(raw.decode("latin-1"), exc.start)
        raise SpecError([_error(file, "SPEC-file", "file", message, "Save the file as UTF-8.", at)]) from None
    data, positions = parse_yaml(text, file)
    if not isinstance(data, dict):
        message = "The spec must be a YAML mapping with `version`, `name`, `provider`, ... at the top."
        raise SpecError([_error(file, "SPEC-document", "schema", message, "See examples/local.yaml.", (1, 1))])
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_findings_from_validation(exc, file, positions, data), SCHEMA_FIRST) from None
    return LoadedSpec(spec=spec, path=spec_path, positions=positions, data=data)
