"""Split ``scontrol show ... -o`` output into records and a record into its fields, in linear time.

Slurm ends every one-line record with ``\\n`` and never writes one inside a record: a reason that
holds line breaks is printed with spaces in their place (``slurm_sprint_node_table``). So records
are split on ``\\n`` alone, never with ``str.splitlines``, which also breaks at ``\\x1e``, ``\\x85``
or ``\\u2028`` and would let a drain reason forge a record of its own.

A field is ``Key=value``; a value runs until the next token that opens a field. Inside the free
text Slurm takes from users and nodes (``Reason``, ``Comment``, ``Extra``, ``OS``), only a key
Slurm itself prints opens a field, so ``Reason=fan broken, x=y`` stays one reason. A key that
identifies the record appearing twice makes the record ambiguous: someone wrote ``State=`` or
``Reason=`` into free text. Callers never act on an ambiguous record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A scontrol listing of the largest cluster a spec may describe (32,768 nodes) is about 60 MB.
MAX_OUTPUT_CHARS = 128 * 1024 * 1024
# One record: Slurm keeps reasons and comments short in practice; this is far beyond any.
MAX_RECORD_CHARS = 1024 * 1024
MAX_RECORDS = 65536

# Every key scontrol prints in a node or partition record (src/api/node_info.c, partition_info.c,
# Slurm 22.05 to 25.x). Free-text values end only at one of these.
NODE_KEYS = frozenset(
    [
        "ActiveFeatures",
        "AllocMem",
        "AllocTRES",
        "Arch",
        "AvailableFeatures",
        "AveWatts",
        "BcastAddr",
        "Boards",
        "BootTime",
        "CPUAlloc",
        "CPUEfctv",
        "CPULoad",
        "CPUSpecList",
        "CPUTot",
        "CapWatts",
        "CfgTRES",
        "Comment",
        "CoreSpecCount",
        "CoresPerSocket",
        "CpuBind",
        "CurrentWatts",
        "ExtSensorsJoules",
        "ExtSensorsTemp",
        "ExtSensorsWatts",
        "Extra",
        "FreeMem",
        "Gres",
        "GresDrain",
        "GresUsed",
        "InstanceId",
        "InstanceType",
        "LastBusyTime",
        "MCS_label",
        "MemSpecLimit",
        "NextState",
        "NodeAddr",
        "NodeHostName",
        "NodeName",
        "OS",
        "Owner",
        "Parameters",
        "Partitions",
        "Port",
        "RealMemory",
        "Reason",
        "ReservationName",
        "RestrictedCoresPerGPU",
        "ResumeAfterTime",
        "SlurmdStartTime",
        "Sockets",
        "State",
        "SuspendTime",
        "TLSCertLastRenewal",
        "TLSCertTokenSet",
        "ThreadsPerCore",
        "TmpDisk",
        "Topology",
        "Version",
        "Weight",
    ]
)
PARTITION_KEYS = frozenset(
    [
        "AllocNodes",
        "AllowAccounts",
        "AllowGroups",
        "AllowQos",
        "Alternate",
        "CpuBind",
        "DefMemPerCPU",
        "DefMemPerNode",
        "Default",
        "DefaultTime",
        "DenyAccounts",
        "DenyQos",
        "DisableRootJobs",
        "Exclusive",
        "ExclusiveTopo",
        "ExclusiveUser",
        "GraceTime",
        "Hidden",
        "JobDefaults",
        "LLN",
        "MaxCPUsPerNode",
        "MaxCPUsPerSocket",
        "MaxMemPerCPU",
        "MaxMemPerNode",
        "MaxNodes",
        "MaxTime",
        "MinNodes",
        "NodeSets",
        "Nodes",
        "OverSubscribe",
        "OverTimeLimit",
        "PartitionName",
        "PowerDownOnIdle",
        "PreemptMode",
        "PriorityJobFactor",
        "PriorityTier",
        "QoS",
        "ReqResv",
        "ResumeTimeout",
        "RootOnly",
        "SelectTypeParameters",
        "State",
        "SuspendTime",
        "SuspendTimeout",
        "TRES",
        "TRESBillingWeights",
        "Topology",
        "TotalCPUs",
        "TotalNodes",
    ]
)
FREE_TEXT = frozenset({"Reason", "Comment", "Extra", "OS"})
# Keys that say which record this is and what state it is in: never twice in one record.
IDENTITY = frozenset(
    {"NodeName", "NodeAddr", "NodeHostName", "State", "Partitions", "Reason", "PartitionName", "Nodes"}
)

_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
# What Slurm appends to the first line of a reason: " [user@2026-12-03T10:00:00]".
_STAMP_RE = re.compile(r" \[[^\[\]@\s]{0,64}@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]")


class RecordError(ValueError):
    """Output that is not what scontrol prints: says where and shows the line."""

    def __init__(self, message: str, line_no: int = 0, line: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.line_no = line_no
        self.line = line[:200]

    def __str__(self) -> str:
        where = f"line {self.line_no}: " if self.line_no else ""
        return f"{where}{self.message}"


@dataclass(frozen=True)
class Record:
    """One record: its fields (first value of each key), its line number, and the keys seen twice."""

    fields: dict[str, str]
    line_no: int
    duplicated: tuple[str, ...] = ()

    @property
    def ambiguous(self) -> bool:
        """A key that identifies the record or its state appears twice: free text forged a field."""
        return bool(self.duplicated)


def split_records(text: str, max_records: int = MAX_RECORDS) -> list[tuple[int, str]]:
    """The non-blank lines of ``text`` split at ``\\n`` only, with 1-based line numbers.

    Raises:
        RecordError: The output or one line is larger than any scontrol listing.
    """
    if len(text) > MAX_OUTPUT_CHARS:
        raise RecordError(f"the output is {len(text)} characters, more than {MAX_OUTPUT_CHARS}")
    out: list[tuple[int, str]] = []
    for line_no, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_RECORD_CHARS:
            raise RecordError(f"a record of {len(line)} characters, more than {MAX_RECORD_CHARS}", line_no)
        stripped = line.strip(" \t\r")
        if stripped:
            out.append((line_no, stripped))
            if len(out) > max_records:
                raise RecordError(f"more than {max_records} records", line_no)
    return out


def _opens_field(token: str, known: frozenset[str], in_free_text: bool) -> str | None:
    """The key ``token`` opens (``Key=...``), or None when it is part of the current value."""
    eq = token.find("=")
    if eq <= 0:
        return None
    key = token[:eq]
    if key in known:
        return key
    if in_free_text or not _KEY_RE.fullmatch(key):
        return None
    # A key this release of Slurm prints and this table does not know yet.
    return key


def parse_fields(line: str, line_no: int, known: frozenset[str]) -> Record:
    """The ``Key=value`` fields of one record; one pass over its space-separated tokens."""
    fields: dict[str, str] = {}
    duplicated: list[str] = []
    key = ""
    value: list[str] = []

    def close() -> None:
        if not key:
            return
        if key in fields:
            if key in IDENTITY and key not in duplicated:
                duplicated.append(key)
            return
        fields[key] = " ".join(value).strip()

    for token in line.split(" "):
        opened = _opens_field(token, known, key in FREE_TEXT)
        if opened is None:
            if not key:
                raise RecordError("expected Key=value", line_no, line)
            value.append(token)
            continue
        close()
        key, value = opened, [token[len(opened) + 1 :]]
    close()
    if "Reason" in fields:
        fields["Reason"] = strip_stamp(fields["Reason"])
    return Record(fields=fields, line_no=line_no, duplicated=tuple(duplicated))


def strip_stamp(reason: str) -> str:
    """The reason without the ``[user@time]`` Slurm appends to its first line."""
    return _STAMP_RE.sub("", reason, count=1).strip()


def records(text: str, first_key: str, known: frozenset[str]) -> list[Record]:
    """Every ``first_key=...`` record of ``text``.

    Raises:
        RecordError: A line is not such a record (scontrol's "Unable to contact slurm controller"
            lands here), the output is too large, or there is no record.
    """
    out: list[Record] = []
    for line_no, line in split_records(text):
        if not line.startswith(f"{first_key}="):
            raise RecordError(f"expected a {first_key}= record (is slurmctld reachable?)", line_no, line)
        out.append(parse_fields(line, line_no, known))
    if not out:
        raise RecordError(f"scontrol listed no {first_key} record")
    return out
