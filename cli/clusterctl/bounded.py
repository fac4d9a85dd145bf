"""Numbers and JSON documents read from outside clusterctl, kept within bounds.

A node's output, a BMC's answer, a lock or a state file can hold a 5,000-digit number, ``1e400``
(infinity once read), ``NaN`` or an array nested 100,000 deep. Python turns those into
exceptions nobody expects (``int()`` refuses more than 4,300 digits, ``json`` recurses until
RecursionError) or into values no check should pass (an infinite bandwidth). Everything read from
outside goes through these functions, which refuse such input with ``BoundsError`` (a
``ValueError``) and a message that says what was wrong; each parser turns that into its own error.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

# Far beyond any count, size, rank or id a tool prints (2**64 has 20 digits).
MAX_INT_DIGITS = 30
# Far beyond any bandwidth, latency or size, and far below overflow.
MAX_REAL = 1e30
# JSON from tools and clusterctl's own files is a few levels deep.
MAX_JSON_DEPTH = 64
MAX_JSON_CHARS = 64 * 1024 * 1024

_INT_RE = re.compile(rf"[+-]?\d{{1,{MAX_INT_DIGITS}}}")
_REAL_RE = re.compile(r"[+-]?(?:\d{1,64}(?:\.\d{0,64})?|\.\d{1,64})(?:[eE][+-]?\d{1,3})?")

F = TypeVar("F", bound=Callable[..., Any])


class BoundsError(ValueError):
    """A value from outside is not a number or document clusterctl reads."""


def _show(text: str) -> str:
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def integer(text: str, what: str = "number") -> int:
    """``text`` as an int of at most ``MAX_INT_DIGITS`` digits.

    Raises:
        BoundsError: It is not one.
    """
    stripped = text.strip()
    if not _INT_RE.fullmatch(stripped):
        raise BoundsError(f"the {what} {_show(stripped)} is not an integer of at most {MAX_INT_DIGITS} digits")
    return int(stripped)


def real(text: str, what: str = "number") -> float:
    """``text`` as a finite float of magnitude at most ``MAX_REAL`` (no ``nan``, ``inf`` or ``1e400``).

    Raises:
        BoundsError: It is not one.
    """
    stripped = text.strip()
    if not _REAL_RE.fullmatch(stripped):
        raise BoundsError(f"the {what} {_show(stripped)} is not a decimal number")
    return finite(float(stripped), what)


def finite(value: float, what: str = "number") -> float:
    """``value`` when it is finite and at most ``MAX_REAL`` in magnitude.

    Raises:
        BoundsError: It is not.
    """
    if not math.isfinite(value) or abs(value) > MAX_REAL:
        raise BoundsError(f"the {what} {value!r} is out of range")
    return value


def _depth_within(text: str, limit: int) -> bool:
    """Whether ``text``'s brackets nest at most ``limit`` deep (strings skipped); one pass."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return False
        elif char in "]}":
            depth -= 1
    return True


def _no_constant(name: str) -> Any:
    raise BoundsError(f"{name} is not a JSON number")


def json_decoder(text: str, what: str = "document", *, max_depth: int = MAX_JSON_DEPTH) -> json.JSONDecoder:
    """A decoder for ``text`` whose numbers are bounded, once ``text``'s size and nesting are checked.

    ``decoder.raw_decode(text)`` reads a document followed by other text; a number out of bounds
    raises BoundsError, malformed JSON ``json.JSONDecodeError``.

    Raises:
        BoundsError: ``text`` is too large or nests too deep.
    """
    if len(text) > MAX_JSON_CHARS:
        raise BoundsError(f"the {what} is {len(text)} characters, more than {MAX_JSON_CHARS}")
    if not _depth_within(text, max_depth):
        raise BoundsError(f"the {what} nests more than {max_depth} levels deep")
    return json.JSONDecoder(
        parse_int=lambda t: integer(t, f"number in the {what}"),
        parse_float=lambda t: real(t, f"number in the {what}"),
        parse_constant=_no_constant,
    )


def json_document(text: str, what: str = "document", *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` as JSON, with its numbers, size and nesting within bounds.

    Raises:
        BoundsError: Too large, nested too deep, a number out of bounds, or not JSON.
    """
    decoder = json_decoder(text, what, max_depth=max_depth)
    try:
        return decoder.decode(text)
    except BoundsError:
        raise
    except ValueError as exc:
        raise BoundsError(f"the {what} is not JSON: {exc}") from None


def guarded(make: Callable[[str], Exception], keep: tuple[type[BaseException], ...] = ()) -> Callable[[F], F]:
    """A parser that answers any out-of-bounds input with ``make(message)``, never a stray exception.

    The second lock behind the bounded conversions: a number or nesting a parser did not bound
    itself (Python's own limits: ValueError, OverflowError, RecursionError) becomes the parser's
    error, which its callers report as unreadable output. Exceptions in ``keep`` (the parser's
    own, when it is a ValueError) go through as they are.
    """

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def parse(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except keep:
                raise
            except (ValueError, OverflowError, RecursionError) as exc:
                raise make(f"unreadable output: {exc}") from None

        return parse  # type: ignore[return-value]

    return wrap
