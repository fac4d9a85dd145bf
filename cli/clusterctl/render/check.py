"""Render once while validating, so a value no generated format can carry is a located spec error.

Why: the spec's types refuse most dangerous values, but the formats are the last word (a
value can be fine as a path and still impossible in a Slurm line). A :class:`RenderError`
names the value and the format; this module finds the spec field that value came from and
turns the error into a finding with its ``file:line:col``, like every other spec error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clusterctl.render.escape import RenderError
from clusterctl.spec import Finding, Level, LoadedSpec
from clusterctl.spec.findings import Path as FieldPath

CODE = "CC-R001"
RULE = "render"


def _strings(data: Any, path: FieldPath = ()) -> Iterator[tuple[FieldPath, str]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str):  # a name the user chose (a profile, a slurm.conf parameter)
                yield (*path, key), key
            yield from _strings(value, (*path, str(key)))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _strings(value, (*path, index))
    elif isinstance(data, str):
        yield path, data


def source_field(data: Any, value: object) -> FieldPath:
    """The spec field a rendered value most likely came from (``()`` when none is found).

    The value itself, else the longest spec string it contains (a host list built from a group
    name), else the shortest spec string containing it (a part of a value).
    """
    text = str(value)
    strings = list(_strings(data))
    for path, item in strings:
        if item == text:
            return path
    inside = [(len(item), path) for path, item in strings if item and item in text]
    if inside:
        return max(inside, key=lambda pair: pair[0])[1]
    around = [(len(item), path) for path, item in strings if text and text in item]
    if around:
        return min(around, key=lambda pair: pair[0])[1]
    return ()


def finding(error: RenderError, loaded: LoadedSpec) -> Finding:
    """``error`` as a spec finding located at the field its value came from."""
    return loaded.place(
        Finding(
            code=CODE,
            level=Level.ERROR,
            path=source_field(loaded.data, error.value),
            message=error.message[0].upper() + error.message[1:] + ".",
            hint="Generated files carry spec values only as data; use the characters the field's type allows.",
            rule=RULE,
        )
    )
