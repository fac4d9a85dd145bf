"""Files the spec points to: the bare-metal machine inventory (``machines.csv``) and the BMC CA bundle.

Both come from outside the spec, so both are read as untrusted input (SECURITY.md):

- only the file named, as a path relative to the spec file's directory: no absolute path, no
  ``..``, no symlink that leads out of that directory; a regular file, at most a few MiB;
- every cell of machines.csv (hostname, bmc, mac, rack) is checked with the spec's own types;
- errors say ``file:line:column`` and quote at most the offending cell, shortened and escaped,
  never any other content of the file (a "CSV" that is really /etc/shadow is not echoed);
- bad encodings, NUL bytes and huge lines are located errors, never a traceback.
"""

from __future__ import annotations

import csv
import errno
import os
import ssl
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import TypeAdapter, ValidationError

from clusterctl.spec.types import BmcAddress, HostLabel, MacAddress, SlurmName

REQUIRED_COLUMNS = ("hostname", "bmc", "mac", "rack")
# Optional: a machine whose firmware boots otherwise than the spec's provider.boot_mode (a mixed fleet).
OPTIONAL_COLUMNS = ("boot_mode",)
BOOT_MODES = {"uefi": "UEFI", "legacy": "Legacy", "bios": "Legacy"}
# Room for a few tens of thousands of rows (a row is ~50 bytes); a larger file is not an inventory.
MAX_MACHINES_BYTES = 4 << 20
MAX_LINE_CHARS = 1024
MAX_COLUMNS = 32
# A CA bundle with the whole Mozilla store is ~220 KiB.
MAX_CA_BUNDLE_BYTES = 1 << 20
# Every problem is reported, up to this many (a wrong file would otherwise print thousands).
MAX_PROBLEMS = 20
SHOWN_CHARS = 40


@dataclass(frozen=True)
class Machine:
    """One row of machines.csv (cells validated; ``mac`` in lower case)."""

    hostname: str
    bmc: str
    mac: str
    rack: str
    line: int
    columns: dict[str, int] = field(default_factory=dict, compare=False)
    boot_mode: str | None = None  # UEFI or Legacy; None: the spec's provider.boot_mode

    def column(self, name: str) -> int:
        """The 1-based column where cell ``name`` starts on its line (1 when unknown)."""
        return self.columns.get(name, 1)


@dataclass(frozen=True)
class MachinesProblem:
    """One problem in a file the spec points to; line/column 0 when it is about the whole file."""

    message: str
    line: int = 0
    column: int = 0


class MachinesError(ValueError):
    """A file the spec points to cannot be used; carries every problem found, each located.

    ``line``/``column`` are those of the first problem (0 when it is about the whole file or
    about the path the spec gives).
    """

    def __init__(self, message: str | list[MachinesProblem], line: int = 0, column: int = 0) -> None:
        problems = [MachinesProblem(message, line, column)] if isinstance(message, str) else list(message)
        super().__init__(problems[0].message if problems else "unusable file")
        self.problems = problems
        self.line = problems[0].line if problems else 0
        self.column = problems[0].column if problems else 0


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """A cell as it may appear in a message: control and non-ASCII characters escaped, shortened."""
    escaped = ascii(value[:limit])[1:-1]
    return f"`{escaped}`" + ("..." if len(value) > limit else "")


# --- reading a file beside the spec --------------------------------------------------------------


def resolve_beside_spec(base_dir: Path, relative: str, what: str) -> Path:
    """The file ``relative`` names inside ``base_dir``, checked not to lead anywhere else.

    Raises:
        MachinesError: the path is absolute, has ``..``, leads out of ``base_dir`` through a
            symlink, does not exist, or is not a regular file (line 0: it is about the path).
    """
    if not relative or "\x00" in relative or any(ord(c) < 32 or ord(c) == 127 for c in relative):
        raise MachinesError(f"the {what} path is empty or holds control characters")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or relative.startswith("~"):
        raise MachinesError(
            f"the {what} path {shown(relative)} is absolute; give it relative to the spec file's directory "
            "and keep the file there"
        )
    if ".." in pure.parts or "\\" in relative:
        raise MachinesError(
            f"the {what} path {shown(relative)} climbs out of the spec file's directory (`..`); keep the file in "
            "that directory or below it"
        )
    base = base_dir.resolve()
    try:
        target = (base / pure).resolve(strict=True)
    except FileNotFoundError:
        raise MachinesError(f"the {what} {shown(relative)} does not exist next to the spec (in {base})") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a component that is not a directory
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "symlink loop"
        raise MachinesError(f"the {what} {shown(relative)} cannot be resolved ({reason})") from None
    if not target.is_relative_to(base):
        raise MachinesError(
            f"the {what} {shown(relative)} is a symlink that leads out of the spec file's directory; clusterctl "
            "reads only files inside it. Copy the file there instead of linking it."
        )
    return target


def read_beside_spec(base_dir: Path, relative: str, what: str, max_bytes: int) -> tuple[Path, bytes]:
    """The bytes of the regular file ``relative`` names inside ``base_dir`` (at most ``max_bytes``).

    Why the open flags: the path was resolved above; ``O_NOFOLLOW`` refuses a symlink put in its
    place since, and ``O_NONBLOCK`` keeps a FIFO from hanging the read before it is refused.
    """
    target = resolve_beside_spec(base_dir, relative, what)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MachinesError(f"the {what} {shown(relative)} was replaced by a symlink; refusing it") from None
        raise MachinesError(f"cannot read the {what} {shown(relative)}: {exc.strerror or 'error'}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise MachinesError(f"the {what} {shown(relative)} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > max_bytes:
            raise MachinesError(
                f"the {what} {shown(relative)} has {info.st_size} bytes; at most {max_bytes} are read, so this is "
                "not the file you meant"
            )
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise MachinesError(f"cannot read the {what} {shown(relative)}: {exc.strerror or 'error'}") from None
    if len(data) > max_bytes:
        raise MachinesError(f"the {what} {shown(relative)} grew past {max_bytes} bytes while it was read")
    return target, data


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of byte ``offset``; the column counts bytes."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def _text(data: bytes, what: str) -> str:
    """``data`` as UTF-8 text (a BOM is dropped), refusing NUL bytes; errors are located, content-free."""
    nul = data.find(b"\x00")
    if nul >= 0:
        line, column = _position(data, nul)
        raise MachinesError(f"the {what} holds a NUL byte; it is not a text file", line, column)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, column = _position(data, exc.start)
        raise MachinesError(f"the {what} is not UTF-8 text (byte {exc.start + 1})", line, column) from None


# --- machines.csv ---------------------------------------------------------------------------------

# The spec's own types: a row's hostname is a planned node's name, its rack becomes a topology
# switch name in slurm.conf's topology.conf, and the BMC address reaches the Redfish client.
_CELL_TYPES: dict[str, TypeAdapter[str]] = {
    "hostname": TypeAdapter(HostLabel),
    "bmc": TypeAdapter(BmcAddress),
    "mac": TypeAdapter(MacAddress),
    "rack": TypeAdapter(SlurmName),
}


def _cell_starts(line: str) -> list[int]:
    """1-based columns where each CSV cell of ``line`` starts (commas inside quotes do not split)."""
    starts = [1]
    quoted = False
    for index, char in enumerate(line):
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            starts.append(index + 2)
    return starts


def _check_cell(name: str, value: str) -> tuple[str | None, str]:
    """(normalized value, "") or (None, why): the reason never repeats more of the cell than ``shown``."""
    if name == "boot_mode":
        mode = BOOT_MODES.get(value.lower())
        return (mode, "") if mode else (None, "`boot_mode` cell: UEFI or Legacy (empty: the spec's provider.boot_mode)")
    try:
        return _CELL_TYPES[name].validate_python(value), ""
    except ValidationError as exc:
        reason = str(exc.errors(include_url=False)[0].get("msg", "")).removeprefix("Value error, ")
        if value and len(value) > SHOWN_CHARS:  # in case the type's message quotes the whole value
            reason = reason.replace(repr(value), shown(value)).replace(value, shown(value))
        return None, f"`{name}` cell: {ascii(reason[:240])[1:-1]}"


def parse_machines(data: bytes, name: str = "machines.csv") -> list[Machine]:
    """Parse the bytes of machines.csv (header ``hostname,bmc,mac,rack``, optional ``boot_mode``).

    Every cell is validated.

    Raises:
        MachinesError: with every problem (up to ``MAX_PROBLEMS``), each at its line and column.
    """
    text = _text(data, f"file {name}")
    lines = text.split("\n")
    problems: list[MachinesProblem] = []

    def problem(message: str, line: int, column: int = 1) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(MachinesProblem(message, line, column))

    rows: list[tuple[int, str, list[str]]] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.removesuffix("\r")
        if len(line) > MAX_LINE_CHARS:
            problem(
                f"line {number} has {len(line)} characters; a machines.csv row has at most {MAX_LINE_CHARS}", number
            )
            continue
        if not line.strip():
            continue
        try:
            cells = next(csv.reader([line], strict=True))
        except csv.Error:
            problem("this line is not CSV (a quote is not closed or is misplaced)", number)
            continue
        if len(cells) > MAX_COLUMNS:
            problem(f"this line has {len(cells)} cells; machines.csv has {len(REQUIRED_COLUMNS)} columns", number)
            continue
        rows.append((number, line, cells))
    if not rows:
        if problems:
            raise MachinesError(problems)
        raise MachinesError(f"{name} is empty; it needs a header row {','.join(REQUIRED_COLUMNS)}", 1, 1)
    header_line, _, header_cells = rows[0]
    header = [c.strip().lower() for c in header_cells]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        problem(
            f"the first line must be the header {','.join(REQUIRED_COLUMNS)}; it lacks {', '.join(missing)}",
            header_line,
        )
        raise MachinesError(problems)
    index = {column: header.index(column) for column in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if column in header}
    machines: list[Machine] = []
    for number, line, cells in rows[1:]:
        starts = _cell_starts(line)
        if len(cells) != len(header):
            column = starts[min(len(cells), len(starts)) - 1] if len(cells) > len(header) else len(line) + 1
            problem(f"this row has {len(cells)} cell(s); the header has {len(header)}", number, column)
            continue
        values: dict[str, str] = {}
        columns: dict[str, int] = {}
        for column_name in REQUIRED_COLUMNS:
            position = index[column_name]
            raw_cell = cells[position]
            start = starts[position] if position < len(starts) else 1
            columns[column_name] = start + len(raw_cell) - len(raw_cell.lstrip())
            value, why = _check_cell(column_name, raw_cell.strip())
            if value is None:
                problem(why, number, columns[column_name])
            else:
                values[column_name] = value
        optional: dict[str, str] = {}
        for column_name in (c for c in OPTIONAL_COLUMNS if c in index):
            position = index[column_name]
            raw_cell = cells[position]
            if not raw_cell.strip():
                continue
            start = starts[position] if position < len(starts) else 1
            columns[column_name] = start + len(raw_cell) - len(raw_cell.lstrip())
            value, why = _check_cell(column_name, raw_cell.strip())
            if value is None:
                problem(why, number, columns[column_name])
            else:
                optional[column_name] = value
        if len(values) == len(REQUIRED_COLUMNS):
            machines.append(Machine(line=number, columns=columns, **values, **optional))
    if problems:
        raise MachinesError(problems)
    return machines


def read_machines(base_dir: Path, relative: str) -> list[Machine]:
    """Read and parse the machines file ``relative`` (the spec's ``provider.machines``).

    Args:
        base_dir: the spec file's directory; the file must lie inside it.
        relative: the path the spec gives, relative to ``base_dir``.

    Raises:
        MachinesError: the file cannot be used; every problem, located (line 0: about the path).
    """
    _, data = read_beside_spec(base_dir, relative, "machines file", MAX_MACHINES_BYTES)
    return parse_machines(data, PurePosixPath(relative).name)


def read_ca_bundle(base_dir: Path, relative: str) -> str:
    """The PEM text of the BMC CA bundle ``relative`` (inside ``base_dir``), checked to load as CAs.

    Raises:
        MachinesError: the file cannot be used (its content is never quoted).
    """
    _, data = read_beside_spec(base_dir, relative, "CA bundle", MAX_CA_BUNDLE_BYTES)
    text = _text(data, "CA bundle")
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise MachinesError(f"the CA bundle {shown(relative)} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    try:
        ssl.create_default_context(cadata=text)
    except (ssl.SSLError, ValueError):
        raise MachinesError(
            f"the CA bundle {shown(relative)} does not load as PEM CA certificates; give the PEM file of the CA "
            "that signed the BMCs' certificates"
        ) from None
    return text
