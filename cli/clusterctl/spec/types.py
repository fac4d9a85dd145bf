"""Domain value types of the spec: quoted versions, bandwidths with units, Slurm durations.

Each normalizes user shorthand in a before-validator and prints back the way it was
written, so ``"60 GB/s"`` round-trips and the plan can still compute in bytes per second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer, WithJsonSchema

_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9A-Za-z]+)*([-+~][0-9A-Za-z.+~-]+)?$")


def _version(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(
            f"versions must be quoted strings; YAML read {value!r} as a number, which drops "
            f'digits (12.10 becomes 12.1): write it as "{value}"'
        )
    if not _VERSION_RE.match(value):
        raise ValueError(f'{value!r} is not a version number such as "12.8" or "570.133.20"')
    return value


VersionStr = Annotated[
    str,
    BeforeValidator(_version),
    WithJsonSchema({"type": "string", "pattern": _VERSION_RE.pattern}),
]

_DNS_LABEL_RE = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")


def _dns_label(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a name, got {value!r}")
    if not _DNS_LABEL_RE.match(value):
        raise ValueError(
            f"{value!r} is not DNS-safe: use lower-case letters, digits and '-', start with a letter, "
            "at most 63 characters"
        )
    return value


DnsLabel = Annotated[
    str,
    BeforeValidator(_dns_label),
    WithJsonSchema({"type": "string", "pattern": _DNS_LABEL_RE.pattern, "maxLength": 63}),
]

_BW_UNITS: dict[str, float] = {
    "B/s": 1.0,
    "KB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "TB/s": 1e12,
    "KiB/s": 2.0**10,
    "MiB/s": 2.0**20,
    "GiB/s": 2.0**30,
    "TiB/s": 2.0**40,
    "Mb/s": 1e6 / 8,
    "Gb/s": 1e9 / 8,
    "Tb/s": 1e12 / 8,
}
_BW_RE = re.compile(r"^\s*(?P<value>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[KMGT]?i?[Bb]/s)\s*$")


@dataclass(frozen=True)
class Bandwidth:
    """A bandwidth with its unit as written: ``Bandwidth(60, "GB/s")``."""

    value: float
    unit: str

    @property
    def bytes_per_s(self) -> float:
        """The bandwidth in bytes per second."""
        return self.value * _BW_UNITS[self.unit]

    def __str__(self) -> str:
        number = int(self.value) if float(self.value).is_integer() else self.value
        return f"{number} {self.unit}"


def _bandwidth(value: Any) -> Bandwidth:
    if isinstance(value, Bandwidth):
        return value
    if not isinstance(value, str):
        raise ValueError(f'a bandwidth needs a unit, e.g. "60 GB/s"; got {value!r}')
    match = _BW_RE.match(value)
    if not match or match["unit"] not in _BW_UNITS:
        units = ", ".join(u for u in _BW_UNITS if u.startswith(("G", "T", "M")))
        raise ValueError(f"{value!r} is not a bandwidth; write a number and one of {units}")
    return Bandwidth(float(match["value"]), match["unit"])


BandwidthValue = Annotated[
    Bandwidth,
    BeforeValidator(_bandwidth),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "pattern": _BW_RE.pattern, "examples": ["60 GB/s", "400 Gb/s"]}),
]

# Slurm time formats: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
# "days-hours:minutes", "days-hours:minutes:seconds", or UNLIMITED.
_SLURM_TIME_RE = re.compile(r"^(UNLIMITED|INFINITE|\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2})$")


def _slurm_time(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not _SLURM_TIME_RE.match(value):
        raise ValueError(
            f'{value!r} is not a Slurm time; use "minutes", "HH:MM:SS", "D-HH:MM:SS" or "UNLIMITED", '
            'quoted in YAML (e.g. "14-00:00:00")'
        )
    return value


SlurmTime = Annotated[
    str,
    BeforeValidator(_slurm_time),
    WithJsonSchema({"type": "string", "pattern": _SLURM_TIME_RE.pattern}),
]

_DURATION_RE = re.compile(r"^\s*(?P<value>\d+)\s*(?P<unit>s|m|h|d)\s*$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Duration:
    """A duration written as ``"30m"``, ``"90s"``, ``"2h"`` or ``"1d"``."""

    value: int
    unit: str

    @property
    def seconds(self) -> int:
        """The duration in seconds."""
        return self.value * _DURATION_UNITS[self.unit]

    def __str__(self) -> str:
        return f"{self.value}{self.unit}"


def _duration(value: Any) -> Duration:
    if isinstance(value, Duration):
        return value
    match = _DURATION_RE.match(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f'{value!r} is not a duration; write e.g. "90s", "30m", "2h" or "1d"')
    return Duration(int(match["value"]), match["unit"])


DurationValue = Annotated[
    Duration,
    BeforeValidator(_duration),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "pattern": _DURATION_RE.pattern, "examples": ["30m", "15m"]}),
]


def _address_text(value: Any) -> Any:
    # ipaddress accepts integers (and so booleans): `management_cidr: false` would become 0.0.0.0/32.
    if not isinstance(value, str | IPv4Address | IPv4Network):
        raise ValueError(f"write an IPv4 address or network as text, e.g. 10.20.0.0/16; got {value!r}")
    return value


IPv4NetworkValue = Annotated[IPv4Network, BeforeValidator(_address_text)]
IPv4AddressValue = Annotated[IPv4Address, BeforeValidator(_address_text)]

PositiveInt = Annotated[int, Field(gt=0, strict=True)]
NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]
