"""Parse ``chronyc tracking``: ``Name : value`` lines (chrony's ``client.c`` ``process_cmd_tracking``).

The fields verify needs: ``Reference ID`` (``00000000 ()`` when no source is selected),
``Stratum``, ``System time`` (``0.000012 seconds slow of NTP time``) and ``Leap status``
(``Normal``, or ``Not synchronised``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterctl.bounded import guarded, integer, real
from clusterctl.verify.parsers._text import numbered_lines
from clusterctl.verify.result import ParseError, unreadable

TRACKING_COMMAND = "chronyc -n tracking"
# "Reference ID    : C0A80001 (...)": the name before the first colon (split there, never by a
# lazy pattern before `\s*:`, which is quadratic on a line of blanks).
_KEY_RE = re.compile(r"[A-Za-z][A-Za-z ()]*")
_SYSTEM_TIME_RE = re.compile(r"^(?P<seconds>[0-9.]+) seconds (?P<dir>fast|slow) of NTP time$")


@dataclass(frozen=True)
class ChronyTracking:
    """What ``chronyc tracking`` says about the clock."""

    reference: str
    stratum: int
    offset_s: float
    leap_status: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def synchronised(self) -> bool:
        """A source is selected and the leap status is normal."""
        return self.leap_status == "Normal" and not self.reference.startswith("00000000")


@guarded(unreadable)
def parse_chronyc_tracking(text: str) -> ChronyTracking:
    """Parse ``chronyc tracking`` output.

    Args:
        text: The output.

    Returns:
        The reference, stratum, signed offset (positive: the system clock is fast) and
        leap status.

    Raises:
        ParseError: A required field is missing or unreadable (``506 Cannot talk to
            daemon`` when chronyd is not running lands here).
    """
    values: dict[str, str] = {}
    where: dict[str, tuple[int, str]] = {}
    lines = numbered_lines(text)
    for line_no, raw, cleaned in lines:
        key, colon, value = cleaned.strip().partition(":")
        key = key.rstrip()
        if not colon or not _KEY_RE.fullmatch(key):
            if cleaned.strip():
                raise ParseError("expected 'Name : value' (is chronyd running?)", line_no, raw)
            continue
        values[key] = value.strip()
        where[key] = (line_no, raw)
    for required in ("Reference ID", "Stratum", "System time", "Leap status"):
        if required not in values:
            raise ParseError(f"no {required!r} line in chronyc tracking output", len(lines), "")
    system = _SYSTEM_TIME_RE.match(values["System time"])
    if system is None:
        line_no, raw = where["System time"]
        raise ParseError("unreadable System time", line_no, raw)
    offset = real(system["seconds"]) * (1 if system["dir"] == "fast" else -1)
    try:
        stratum = integer(values["Stratum"])
    except ValueError:
        line_no, raw = where["Stratum"]
        raise ParseError("unreadable Stratum", line_no, raw) from None
    return ChronyTracking(
        reference=values["Reference ID"],
        stratum=stratum,
        offset_s=offset,
        leap_status=values["Leap status"],
        fields=values,
    )
