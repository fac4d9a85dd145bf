"""No spec field is a bare ``str``: every string a spec holds has a type that checks it.

Walks every spec model from ``Spec`` down (discriminated unions, optionals, lists and dict keys
and values included), plus every model defined in ``clusterctl.spec``, and fails on a ``str``
annotation that carries no validator.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, PlainValidator, TypeAdapter, WrapValidator

import clusterctl.spec
from clusterctl.spec.base import StrictModel
from clusterctl.spec.models import Spec
from clusterctl.spec.types import TextCheck

_VALIDATORS = (BeforeValidator, AfterValidator, PlainValidator, WrapValidator, TextCheck)


def _bare_strings(tp: Any, metadata: list[Any], where: str, seen: set[type]) -> list[str]:
    """Places under ``tp`` where a plain ``str`` has no validator."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        return _bare_strings(args[0], [*args[1:], *metadata], where, seen)
    if origin in (Union, types.UnionType):
        return [hit for arg in args if arg is not type(None) for hit in _bare_strings(arg, metadata, where, seen)]
    if origin is Literal:
        return []
    if origin in (list, set, frozenset, tuple):
        return [hit for arg in args if arg is not Ellipsis for hit in _bare_strings(arg, [], f"{where}[]", seen)]
    if origin is dict:
        key, value = args
        return _bare_strings(key, [], f"{where}{{key}}", seen) + _bare_strings(value, [], f"{where}{{}}", seen)
    if tp is str:
        return [] if any(isinstance(m, _VALIDATORS) for m in metadata) else [where]
    if inspect.isclass(tp) and issubclass(tp, BaseModel):
        return _model_bare_strings(tp, seen)
    return []


def _model_bare_strings(model: type[BaseModel], seen: set[type]) -> list[str]:
    if model in seen:
        return []
    seen.add(model)
    hits: list[str] = []
    for name, info in model.model_fields.items():
        hits += _bare_strings(info.annotation, list(info.metadata), f"{model.__name__}.{name}", seen)
    return hits


def _spec_models() -> list[type[BaseModel]]:
    """Every StrictModel defined in a module of the clusterctl.spec package."""
    for module in pkgutil.iter_modules(clusterctl.spec.__path__):
        importlib.import_module(f"clusterctl.spec.{module.name}")
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [StrictModel]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("clusterctl.spec."):
                found.append(sub)
    return found


def test_no_spec_field_is_a_bare_str() -> None:
    seen: set[type] = set()
    hits = _model_bare_strings(Spec, seen)
    for model in _spec_models():
        hits += _model_bare_strings(model, seen)
    assert not hits, f"spec fields typed as a bare str (use a type from clusterctl.spec.types): {sorted(set(hits))}"


def test_the_walk_reaches_union_members_and_nested_models() -> None:
    seen: set[type] = set()
    _model_bare_strings(Spec, seen)
    names = {m.__name__ for m in seen}
    # Provider union members, storage union members, models inside lists, dicts and optionals.
    assert names >= {"AwsProvider", "GcpProvider", "AzureProvider", "BaremetalProvider", "LocalProvider"}
    assert names >= {"LustreStorage", "WekaStorage", "NfsStorage", "HardwareProfile", "BurstSpec", "PackageRepo"}


def test_the_walk_finds_a_bare_str_wherever_it_hides() -> None:
    class Inner(BaseModel):
        note: str

    class Outer(BaseModel):
        fine: Annotated[str, BeforeValidator(str)]
        listed: list[str]
        keyed: dict[str, int]
        maybe: str | None
        union: Annotated[Inner | int, "metadata"]

    hits = _model_bare_strings(Outer, set())
    assert sorted(hits) == ["Inner.note", "Outer.keyed{key}", "Outer.listed[]", "Outer.maybe"]


def _string_schemas(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        found = [(where, node)] if node.get("type") == "string" else []
        return found + [hit for key, value in node.items() for hit in _string_schemas(value, f"{where}/{key}")]
    if isinstance(node, list):
        return [hit for i, value in enumerate(node) for hit in _string_schemas(value, f"{where}/{i}")]
    return []


def test_the_schema_shows_every_string_fields_contract() -> None:
    strings = _string_schemas(Spec.model_json_schema())
    assert len(strings) > 40
    unconstrained = [where for where, node in strings if not {"pattern", "enum", "const", "format"} & set(node)]
    assert not unconstrained, f"`clusterctl schema` shows strings without a pattern: {unconstrained}"
    for where, node in strings:
        if "pattern" in node:
            assert "(?P<" not in node["pattern"], f"{where}: Python-only group names are not JSON Schema"
            re.compile(node["pattern"])


def test_every_documented_example_is_accepted_by_its_field() -> None:
    checked = 0
    for model in _spec_models():
        for info in model.model_fields.values():
            field_type: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
            for example in info.examples or []:
                TypeAdapter(field_type).validate_python(example)  # raises with the field's own message
                checked += 1
    assert checked > 40
