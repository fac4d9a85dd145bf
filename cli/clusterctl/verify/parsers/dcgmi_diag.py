"""Parse the table printed by ``dcgmi diag -r N``.

Layout (NVIDIA/DCGM ``dcgmi/Diag.cpp``): a Metadata section (DCGM version, driver,
GPU device IDs), then Deployment/Integration/Hardware/Stress sections with one row per
test. Long Info/Warning text is cut into 45-character pieces, one table row each
(``DisplayVerboseInfo``, ``DATA_INFO_TAG_LEN``); the cut ignores word boundaries, so the
pieces are joined back by position, not by whitespace.

Two result styles exist. DCGM 3.x prints ``Pass - All`` or, when GPUs differ, rows like
``Pass - GPUs: 0, 1`` and ``Fail - GPU: 2``, with ``Warning``/``Info`` rows after.
DCGM 4.x prints the overall result, then one ``GPU0: Pass`` row per entity, with
``Warning: GPU0`` rows under it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from clusterctl.bounded import guarded, integer
from clusterctl.verify.parsers._text import numbered_lines
from clusterctl.verify.result import ParseError, unreadable

_SECTION_RE = re.compile(r"^[|+]-+ +(?P<name>\w+(?: \w+)*) +-+\+")
# An empty result is DCGM 4's "not run" (HelperDisplayDiagResult returns "").
_STATUS_RE = re.compile(r"^(?:(?P<status>Pass|Fail|Skip|Warn)(?: - (?:All|GPUs?: (?P<gpus>[\d, ]+)))?)?$")
_GPU_STATUS_RE = re.compile(r"^(?P<status>Pass|Fail|Skip|Warn) - GPUs?: (?P<gpus>[\d, ]+)$")
_ENTITY_STATUS_RE = re.compile(r"^(?P<kind>[A-Za-z]+?)(?P<index>\d+): (?P<status>Pass|Fail|Skip|Warn)$")
_MESSAGE_NAME_RE = re.compile(r"^(?P<kind>Info|Warning|Error)(?:: (?P<entity>[A-Za-z]+\d+))?$")
_LEADING_GPU_RE = re.compile(r"^GPU (\d+)\b")
_COMMAND_RE = re.compile(r"\bdcgmi\s+diag\b.*?(?:-r|--run)[\s=]+(\S+)")
_LEVEL_NAMES = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}


class DiagStatus(StrEnum):
    """A DCGM test result."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    WARN = "warn"


# Which result wins when a test reports several (one per GPU group or entity).
_SEVERITY = {DiagStatus.SKIP: 0, DiagStatus.PASS: 1, DiagStatus.WARN: 2, DiagStatus.FAIL: 3}


@dataclass(frozen=True)
class DcgmMessage:
    """An Info, Warning or Error message under a test, its wrapped pieces joined.

    ``entity`` is ``GPU0``-style: from the DCGM 4 row name, or from a DCGM 3 message that
    starts with ``GPU n``. ``kind`` is ``Note`` for continuation rows not under a message
    (the ``Code: (...)`` row DCGM prints after a Diagnostic warning).
    """

    kind: str
    text: str
    entity: str | None
    line_no: int


@dataclass(frozen=True)
class DcgmTest:
    """One test row (and the rows that belong to it).

    ``gpu_status`` holds per-GPU results where the table lists them (DCGM 3 when GPUs
    differ, DCGM 4 always); a DCGM 3 ``Pass - All`` leaves it empty.
    """

    name: str
    section: str
    status: DiagStatus
    gpu_status: tuple[tuple[int, DiagStatus], ...]
    messages: tuple[DcgmMessage, ...]
    line_no: int

    def gpus_with(self, status: DiagStatus) -> tuple[int, ...]:
        """GPU indices listed with ``status``."""
        return tuple(gpu for gpu, s in self.gpu_status if s is status)


@dataclass(frozen=True)
class DcgmDiag:
    """A parsed ``dcgmi diag`` run.

    ``error`` holds the ``Error: ...`` text dcgmi prints instead of a table when the run
    could not complete; ``tests`` is then empty.
    """

    tests: tuple[DcgmTest, ...]
    metadata: dict[str, str] = field(default_factory=dict)
    level: int | None = None
    error: str | None = None

    @property
    def dcgm_version(self) -> str | None:
        """``DCGM Version`` from the Metadata section."""
        return self.metadata.get("DCGM Version")

    @property
    def driver_version(self) -> str | None:
        """``Driver Version Detected`` from the Metadata section."""
        return self.metadata.get("Driver Version Detected")

    @property
    def gpu_device_ids(self) -> tuple[str, ...]:
        """PCI device IDs of the GPUs tested, one per GPU (``2330`` is H100 SXM)."""
        ids = self.metadata.get("GPU Device IDs Detected", "")
        return tuple(i.strip() for i in ids.split(",") if i.strip())

    def with_status(self, status: DiagStatus) -> tuple[DcgmTest, ...]:
        """Tests whose overall result is ``status``."""
        return tuple(t for t in self.tests if t.status is status)


@dataclass
class _OpenTest:
    name: str
    section: str
    status: DiagStatus
    line_no: int
    gpu_status: list[tuple[int, DiagStatus]] = field(default_factory=list)
    messages: list[DcgmMessage] = field(default_factory=list)
    # The message being continued: kind, entity, first line, pieces.
    pending: tuple[str, str | None, int, list[str]] | None = None

    def flush(self) -> None:
        if self.pending is None:
            return
        kind, entity, line_no, pieces = self.pending
        text = "".join(pieces).strip()
        if entity is None and (gpu := _LEADING_GPU_RE.match(text)):
            entity = f"GPU{gpu[1]}"
        self.messages.append(DcgmMessage(kind=kind, text=text, entity=entity, line_no=line_no))
        self.pending = None

    def add_status(self, status: DiagStatus) -> None:
        if _SEVERITY[status] > _SEVERITY[self.status]:
            self.status = status

    def freeze(self) -> DcgmTest:
        self.flush()
        return DcgmTest(
            name=self.name,
            section=self.section,
            status=self.status,
            gpu_status=tuple(self.gpu_status),
            messages=tuple(self.messages),
            line_no=self.line_no,
        )


def _table_row(line: str) -> str | None:
    """The table part of a line (from its first ``|`` or ``+`` to its last), None when it has none."""
    text = line.rstrip()
    starts = [i for i in (text.find("|"), text.find("+")) if i >= 0]
    if not starts or text[-1:] not in ("|", "+") or min(starts) == len(text) - 1:
        return None
    return text[min(starts) :]


def _gpu_list(text: str) -> list[int]:
    return [integer(g) for g in text.replace(",", " ").split()]


def _level(text: str) -> int | None:
    match = _COMMAND_RE.search(text)
    if match is None:
        return None
    value = match[1].lower()
    if value.isdigit():
        return integer(value)
    return _LEVEL_NAMES.get(value)


@guarded(unreadable)
def parse_dcgmi_diag(text: str) -> DcgmDiag:
    """Parse the output of ``dcgmi diag`` (DCGM 3.x or 4.x table format).

    Args:
        text: The captured output; a shell prompt with the command line may precede the
            table, and it gives the run level when present.

    Returns:
        The metadata, every test with its per-GPU results and joined messages, and the
        level when the command line shows it.

    Raises:
        ParseError: A row cannot be read (unknown result, a message before any test) or
            the text holds neither a result table nor a dcgmi ``Error:`` line.
    """
    lines = numbered_lines(text)
    level = _level("\n".join(cleaned for _, _, cleaned in lines))
    metadata: dict[str, str] = {}
    tests: list[DcgmTest] = []
    current: _OpenTest | None = None
    section = ""
    saw_table = False
    errors: list[str] = []

    for line_no, raw, cleaned in lines:
        row = _table_row(cleaned)
        if row is None:
            if cleaned.strip().startswith("Error:"):
                errors.append(cleaned.strip())
            continue
        saw_table = True
        if row.startswith("+") or row.startswith("|-"):
            if heading := _SECTION_RE.match(row):
                section = heading["name"]
            continue
        name_cell, rest = row[1:].split("|", 1)
        value_cell = rest[: rest.rfind("|")]
        name, value = name_cell.strip(), value_cell.strip()
        if not section:
            continue  # the "| Diagnostic | Result |" header
        if section == "Metadata":
            metadata[name] = value
            continue

        if message := _MESSAGE_NAME_RE.match(name):
            if current is None:
                raise ParseError(f"{name} row before any test row", line_no, raw)
            current.flush()
            current.pending = (message["kind"], message["entity"], line_no, [])
        elif name:
            if current is not None:
                tests.append(current.freeze())
            status = _STATUS_RE.match(value)
            if status is None:
                raise ParseError(f"unknown result {value!r} for test {name!r}", line_no, raw)
            current = _OpenTest(name, section, DiagStatus((status["status"] or "skip").lower()), line_no)
            if status["gpus"]:
                current.gpu_status.extend((g, current.status) for g in _gpu_list(status["gpus"]))
            continue
        elif current is None:
            raise ParseError("continuation row before any test row", line_no, raw)
        elif gpu_row := _GPU_STATUS_RE.match(value):
            current.flush()
            status_value = DiagStatus(gpu_row["status"].lower())
            current.gpu_status.extend((g, status_value) for g in _gpu_list(gpu_row["gpus"]))
            current.add_status(status_value)
            continue
        elif entity := _ENTITY_STATUS_RE.match(value):
            current.flush()
            status_value = DiagStatus(entity["status"].lower())
            if entity["kind"] == "GPU":
                current.gpu_status.append((integer(entity["index"]), status_value))
            current.add_status(status_value)  # CPU entities (cpu_eud) count towards the result too
            continue
        elif current.pending is None:
            current.pending = ("Note", None, line_no, [])

        # The piece is the field between "| " and the two padding spaces before "|". Keep
        # its own trailing space: it may be the space between two words the cut separated.
        piece = value_cell[1:]
        current.pending[3].append(piece[:-2] if piece.endswith("  ") else piece)

    if current is not None:
        tests.append(current.freeze())
    if not tests:
        if errors and not saw_table:
            return DcgmDiag(tests=(), level=level, error=" ".join(errors))
        raise ParseError("no dcgmi diag test rows found", len(lines), "")
    return DcgmDiag(tests=tuple(tests), metadata=metadata, level=level)
