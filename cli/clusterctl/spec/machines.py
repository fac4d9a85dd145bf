"""Read a bare-metal machine inventory (``machines.csv``: hostname,bmc,mac,rack) with line numbers."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

REQUIRED_COLUMNS = ("hostname", "bmc", "mac", "rack")


@dataclass(frozen=True)
class Machine:
    """One row of machines.csv."""

    hostname: str
    bmc: str
    mac: str
    rack: str
    line: int


class MachinesError(ValueError):
    """machines.csv cannot be used; carries the line (0 when it is about the whole file)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


def read_machines(path: Path) -> list[Machine]:
    """Parse machines.csv; raises ``MachinesError`` naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MachinesError(f"cannot read {path}: {exc.strerror or exc}") from None
    reader = csv.reader(io.StringIO(text))
    rows = list(reader)
    if not rows:
        raise MachinesError(f"{path} is empty; it needs a header row {','.join(REQUIRED_COLUMNS)}", 1)
    header = [c.strip().lower() for c in rows[0]]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise MachinesError(
            f"{path} lacks column(s) {', '.join(missing)}; the header must be {','.join(REQUIRED_COLUMNS)}", 1
        )
    idx = {name: header.index(name) for name in REQUIRED_COLUMNS}
    machines: list[Machine] = []
    for line_no, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise MachinesError(f"row has {len(row)} column(s), the header has {len(header)}", line_no)
        hostname, bmc, mac, rack = (row[idx[c]].strip() for c in REQUIRED_COLUMNS)
        machines.append(Machine(hostname=hostname, bmc=bmc, mac=mac, rack=rack, line=line_no))
    return machines
