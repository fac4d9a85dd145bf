"""Caps on what a spec document may make the loader do, checked before anything is built.

Why: a spec comes from outside (a pull request, another tool). YAML can describe far more
than it spells out: ten aliases of ten aliases of ... (the "billion laughs") expand to more
nodes than memory holds, and nesting thousands of levels deep exhausts Python's stack. This
module walks the parser's event stream once, in constant memory per nesting level, and
refuses the document at the first event that crosses a cap, so nothing is ever expanded,
and a hostile document costs at most about ``MAX_YAML_NODES`` parser events.
Each refusal is a located finding (file:line:col, the field, what to do).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    SequenceStartEvent,
)

from clusterctl.spec.findings import Finding, Level, SpecError
from clusterctl.spec.findings import Path as FieldPath

# A spec of a few thousand nodes is a few kilobytes (examples/onprem-h100-256.yaml: 6 KiB).
MAX_DOCUMENT_BYTES = 512 * 1024
# YAML nodes (keys, values, list items) after alias expansion; the 256-node example has ~300.
MAX_YAML_NODES = 10_000
# Nesting levels of mappings and lists; the spec's own models nest 6 deep.
MAX_DEPTH = 32
# Characters in one scalar; the longest spec value (an SSH public key) is capped at 16384.
MAX_SCALAR_CHARS = 16_384
# Characters in an unquoted number: Python refuses to parse decimal integers of more than 4300
# digits (a traceback), and shorter huge numbers overflow the plan's float arithmetic.
MAX_NUMBER_CHARS = 32
_NUMBER_RE = re.compile(r"[-+]?\.?[0-9][0-9a-zA-Z_.+-]*", re.ASCII)
# More than MAX_DEPTH flow brackets opened in a row (blanks, anchors or tags between them). The
# YAML scanner looks ahead up to 1024 characters for a key at every open bracket, which costs
# about a second on a run of a thousand; this finds such a run first, in one linear pass.
_BRACKET_RUN_RE = re.compile(r"(?:[\[{](?:[ \t\r\n]|[&!][^ \t\r\n\[\]{},]*)*){" + str(MAX_DEPTH + 1) + "}", re.ASCII)
# The tags YAML gives plain scalars, lists and mappings; anything else (!!python/..., !!binary,
# custom !tags) has no meaning in a spec.
_ALLOWED_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")
) | {"!"}


@dataclass
class _Frame:
    """One open mapping or list while walking the events."""

    mapping: bool
    anchor: str | None
    size: int = 1
    index: int = 0
    key: str | int | None = None
    expecting_key: bool = True
    segment: str | int | None = None


@dataclass
class _Walk:
    file: str
    stack: list[_Frame] = field(default_factory=list)
    anchors: dict[str, int] = field(default_factory=dict)
    open_anchors: set[str] = field(default_factory=set)
    root_size: int = 0

    def path(self) -> FieldPath:
        """The field path of the node being read."""
        out: list[str | int] = []
        for frame in self.stack:
            if frame.mapping:
                if not frame.expecting_key and frame.key is not None:
                    out.append(frame.key)
            else:
                out.append(frame.index)
        return tuple(out)

    def refuse(self, event: Any, message: str, hint: str) -> SpecError:
        mark = event.start_mark
        return SpecError(
            [
                Finding(
                    code="SPEC-limit",
                    level=Level.ERROR,
                    path=self.path(),
                    message=message,
                    hint=hint,
                    rule="yaml",
                    file=self.file,
                    line=(mark.line + 1) if mark else 1,
                    column=(mark.column + 1) if mark else 1,
                )
            ]
        )

    def add(self, event: Any, size: int) -> None:
        """A node of ``size`` expanded YAML nodes completed: charge it to its parent."""
        if not self.stack:
            self.root_size += size
            return
        parent = self.stack[-1]
        parent.size += size
        if parent.size > MAX_YAML_NODES:
            alias = isinstance(event, AliasEvent)
            raise self.refuse(
                event,
                f"The spec expands to more than {MAX_YAML_NODES} YAML nodes"
                + (f" here, where alias `*{event.anchor}` repeats {size} nodes" if alias else "")
                + "; refused before expanding it.",
                "Aliases that repeat aliases grow exponentially (a 'billion laughs' document); write the values out "
                "or reuse fewer levels of anchors."
                if alias
                else "A spec describes groups of nodes, not each node; shorten the lists.",
            )
        if parent.mapping:
            if parent.expecting_key:
                parent.expecting_key = False
            else:
                parent.expecting_key = True
                parent.key = None
        else:
            parent.index += 1

    def key_seen(self, value: str | int) -> None:
        """Remember a mapping key (a scalar read while the mapping expects a key)."""
        if self.stack and self.stack[-1].mapping and self.stack[-1].expecting_key:
            self.stack[-1].key = value

    def check_tag(self, event: Any) -> None:
        tag = getattr(event, "tag", None)
        if tag is not None and str(tag) not in _ALLOWED_TAGS:
            raise self.refuse(
                event,
                f"The YAML tag `{str(tag)[:40]}` is not allowed in a spec.",
                'Remove the tag; quote a value that should stay text, e.g. "12.8".',
            )


def guard_yaml(text: str, file: str) -> None:
    """Refuse a document that crosses a cap, before it is composed or expanded.

    Raises:
        SpecError: one located finding for the first cap crossed.
    """
    if len(text) > MAX_DOCUMENT_BYTES:
        line = text.count("\n", 0, MAX_DOCUMENT_BYTES) + 1
        raise SpecError([_too_big(file, line, len(text.encode("utf-8", "replace")))])
    run = _BRACKET_RUN_RE.search(text)
    if run:
        raise SpecError([_too_deep(file, text, run.start())])
    walk = _Walk(file)
    try:
        for event in YAML(typ="rt").parse(text):
            _step(walk, event)
    except YAMLError:
        # Syntax errors are reported (located) by the loader's own parse, which follows.
        return


def _step(walk: _Walk, event: Any) -> None:
    if isinstance(event, NodeEvent):
        walk.check_tag(event)
        anchor = getattr(event, "anchor", None)
        if not isinstance(event, AliasEvent) and anchor and (anchor in walk.anchors or anchor in walk.open_anchors):
            # YAML lets a later anchor shadow an earlier one; ruamel only warns. In a spec it is a
            # copy-paste slip that silently changes what every later alias means.
            raise walk.refuse(
                event,
                f"Anchor `&{anchor}` is defined a second time here.",
                f"Give each anchor its own name; aliases `*{anchor}` after this line would otherwise mean this node.",
            )
    if isinstance(event, ScalarEvent):
        if len(event.value) > MAX_SCALAR_CHARS:
            raise walk.refuse(
                event,
                f"This value is {len(event.value)} characters long; a spec value may have at most {MAX_SCALAR_CHARS}.",
                "Shorten it; no spec field needs a value this long.",
            )
        if event.style is None and len(event.value) > MAX_NUMBER_CHARS and _NUMBER_RE.fullmatch(event.value):
            raise walk.refuse(
                event,
                f"This number has {len(event.value)} characters; a spec number may have at most {MAX_NUMBER_CHARS}.",
                "Check the value for a typo; quote it if it is meant as text.",
            )
        walk.key_seen(event.value)
        _open_anchor_done(walk, event, 1)
        walk.add(event, 1)
    elif isinstance(event, AliasEvent):
        if event.anchor in walk.open_anchors:
            raise walk.refuse(
                event,
                f"Alias `*{event.anchor}` refers to the mapping or list it is inside of (a recursive structure).",
                "Remove the alias; a spec cannot contain itself.",
            )
        walk.add(event, walk.anchors.get(event.anchor, 1))
    elif isinstance(event, MappingStartEvent | SequenceStartEvent):
        if len(walk.stack) >= MAX_DEPTH:
            raise walk.refuse(
                event,
                f"The spec nests mappings and lists more than {MAX_DEPTH} levels deep.",
                "No spec field nests this deep; check the indentation or the brackets.",
            )
        if walk.stack and walk.stack[-1].mapping and walk.stack[-1].expecting_key:
            raise walk.refuse(
                event,
                "A mapping key here is itself a list or mapping; spec keys are plain names.",
                "Write the key as a name, e.g. `gpu-a:`, and put the list or mapping under it.",
            )
        walk.stack.append(_Frame(mapping=isinstance(event, MappingStartEvent), anchor=event.anchor))
        if event.anchor:
            walk.open_anchors.add(event.anchor)
    elif isinstance(event, CollectionEndEvent) and walk.stack:
        frame = walk.stack.pop()
        _open_anchor_done(walk, event, frame.size, frame.anchor)
        walk.add(event, frame.size)


def _open_anchor_done(walk: _Walk, event: Any, size: int, anchor: str | None = None) -> None:
    """Record the expanded size of an anchored node once it is complete."""
    name = anchor if anchor is not None else getattr(event, "anchor", None)
    if name:
        walk.anchors[name] = size
        walk.open_anchors.discard(name)


def _too_deep(file: str, text: str, offset: int) -> Finding:
    return Finding(
        code="SPEC-limit",
        level=Level.ERROR,
        path=(),
        message=f"The spec opens more than {MAX_DEPTH} lists or mappings in a row here; it may nest at most "
        f"{MAX_DEPTH} levels deep.",
        hint="No spec field nests this deep; check the brackets.",
        rule="yaml",
        file=file,
        line=text.count("\n", 0, offset) + 1,
        column=offset - text.rfind("\n", 0, offset),
    )


def _too_big(file: str, line: int, size: int) -> Finding:
    return Finding(
        code="SPEC-limit",
        level=Level.ERROR,
        path=(),
        message=(
            f"The spec is {size} bytes; a spec may have at most {MAX_DOCUMENT_BYTES} "
            f"({MAX_DOCUMENT_BYTES // 1024} KiB), crossed at this line."
        ),
        hint="A spec describes groups of nodes and is a few kilobytes; check that this is the right file.",
        rule="yaml",
        file=file,
        line=line,
        column=1,
    )


def read_capped(path: Path, file: str) -> bytes:
    """Read at most ``MAX_DOCUMENT_BYTES`` of a regular file; refuse a larger one with a located finding.

    Raises:
        SpecError: the file is larger than the cap.
        OSError: it cannot be read, or it is not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "it is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_DOCUMENT_BYTES:
        line = data.count(b"\n", 0, MAX_DOCUMENT_BYTES) + 1
        raise SpecError([_too_big(file, line, max(len(data), info.st_size))])
    return data
