"""Pydantic's error messages rewritten in the spec's own words.

Why: a user who wrote ``sharp: no`` should read "write true or false", not
"Input should be a valid boolean". Each entry maps a pydantic error type to a sentence
template; ``{field}``, ``{input}`` and pydantic's ``ctx`` keys are available.
"""

from __future__ import annotations

MESSAGES: dict[str, str] = {
    "missing": "Required field `{field}` is missing; add it.",
    "extra_forbidden": "Unknown field `{field}`; remove it or check the spelling.",
    "bool_type": "`{field}` must be true or false (YAML's yes/no/on/off are not accepted here), got {input!r}.",
    "bool_parsing": "`{field}` must be true or false, got {input!r}.",
    "int_type": "`{field}` must be a whole number, got {input!r}.",
    "int_parsing": "`{field}` must be a whole number, got {input!r}.",
    "int_from_float": "`{field}` must be a whole number, got {input!r}.",
    "float_type": "`{field}` must be a number, got {input!r}.",
    "float_parsing": "`{field}` must be a number, got {input!r}.",
    "string_type": "`{field}` must be a string, got {input!r}; quote it in YAML.",
    "literal_error": "`{field}` must be one of {expected}, got {input!r}.",
    "union_tag_invalid": "`kind: {tag}` is not known here; use one of {expected_tags}.",
    "union_tag_not_found": "`{field}` needs a `kind` field; use one of the known kinds.",
    "dict_type": "`{field}` must be a mapping (key: value pairs), got {input_type}.",
    "model_type": "`{field}` must be a mapping (key: value pairs), got {input_type}.",
    "model_attributes_type": "`{field}` must be a mapping (key: value pairs), got {input_type}.",
    "list_type": "`{field}` must be a list, got {input_type}.",
    "too_short": "`{field}` needs at least {min_length} item(s).",
    "too_long": "`{field}` allows at most {max_length} item(s).",
    "greater_than": "`{field}` must be greater than {gt}, got {input!r}.",
    "greater_than_equal": "`{field}` must be at least {ge}, got {input!r}.",
    "less_than_equal": "`{field}` must be at most {le}, got {input!r}.",
    "ip_v4_network": "`{field}` must be an IPv4 network such as 10.20.0.0/16, got {input!r}.",
    "ip_v4_address": "`{field}` must be an IPv4 address, got {input!r}.",
    "none_required": "`{field}` must be empty.",
    "finite_number": "`{field}` must be a finite number, got {input!r}; .inf and .nan are not accepted.",
    "less_than": "`{field}` must be less than {lt}, got {input!r}.",
    "string_too_long": "`{field}` may have at most {max_length} characters; shorten it.",
    "string_too_short": "`{field}` needs at least {min_length} character(s).",
    "string_pattern_mismatch": "`{field}` must match the pattern {pattern}; see `clusterctl schema`.",
    "set_type": "`{field}` must be a list, got {input_type}.",
    "tuple_type": "`{field}` must be a list, got {input_type}.",
    "enum": "`{field}` must be one of {expected}, got {input!r}.",
    "multiple_of": "`{field}` must be a multiple of {multiple_of}, got {input!r}.",
    "int_too_big": "`{field}` is too large a number.",
}


def describe(error_type: str, field: str, value: object, ctx: dict[str, object], raw: str) -> str:
    """The domain message for one pydantic error (falls back to pydantic's own text)."""
    if error_type == "value_error":
        text = raw.removeprefix("Value error, ")
        return f"`{field}`: {text}" + ("" if text.endswith(".") else ".")
    template = MESSAGES.get(error_type)
    if template is None:
        return f"`{field}`: {raw}" + ("" if raw.endswith(".") else ".")
    values: dict[str, object] = {
        "field": field,
        "input": value,
        "input_type": type(value).__name__ if value is not None else "nothing",
    }
    values.update(ctx)
    try:
        return template.format(**values)
    except (KeyError, IndexError):
        return f"`{field}`: {raw}."
