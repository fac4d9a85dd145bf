"""Parse nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ...) into typed rows.

The table layout comes from nccl-tests ``src/util.cu`` (``writeResultHeader``,
``writeBenchmarkLinePreamble``, ``writeBenchmarkLineBody``): five leading columns
(size, count, type, redop, root), then time/algbw/busbw/#wrong out of place and again
in place. ``#wrong`` is ``N/A`` when the run used ``-c 0``. Older releases had no root
column and a float ``error`` column instead of ``#wrong``; the header line tells which.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from clusterctl.bounded import guarded, integer, real
from clusterctl.verify.parsers._text import numbered_lines, split_launcher_prefix
from clusterctl.verify.result import ParseError, unreadable

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoallv",
    "alltoall",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "sendrecv",
    "hypercube",
)

# Program names as they appear in a command line, a path or "# Collective test starting: ...".
_PROGRAM_RE = re.compile(r"(?<![\w])(" + "|".join(COLLECTIVES) + r")_perf")
_VERSION_RE = re.compile(r"^#\s*nccl-tests version (\S+)")
_CONFIG_RE = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_ITERS_RE = re.compile(r"warmup iters:\s*(\d+)\s+iters:\s*(\d+)")
_VALIDATION_RE = re.compile(r"validation:\s*(\d+)")
_GRAPH_RE = re.compile(r"graph:\s*(\d+)")
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<name>\S.*)$"
)
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")

_LEADING_COLUMNS = {"size", "count", "type", "redop", "root"}
_DEFAULT_LEAD = ("size", "count", "type", "redop", "root")
_DEFAULT_GROUP = ("time", "algbw", "busbw", "#wrong")

# Bytes per element of the nccl-tests type names (src/common.cu test_typenames).
_TYPE_SIZES = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "f8e4m3": 1,
    "f8e5m2": 1,
}


@dataclass(frozen=True)
class NcclRank:
    """One ``#  Rank N Group G Pid P on HOST device D [BUS] NAME`` line."""

    rank: int
    group: int | None
    pid: int
    host: str
    device: int
    bus_id: str
    gpu_name: str


@dataclass(frozen=True)
class NcclMeasurement:
    """The time/algbw/busbw/#wrong group of one row, out of place or in place.

    ``wrong`` is None when nccl-tests printed ``N/A`` (data check off) or the output is
    from an old release that printed a float ``error`` instead (kept in ``max_error``).
    """

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    max_error: float | None = None


@dataclass(frozen=True)
class NcclRow:
    """One result row: a message size measured out of place and in place."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: NcclMeasurement | None
    in_place: NcclMeasurement
    line_no: int

    @property
    def busbw_gbps(self) -> float:
        """The better of the out-of-place and in-place bus bandwidth."""
        if self.out_of_place is None:
            return self.in_place.busbw_gbps
        return max(self.out_of_place.busbw_gbps, self.in_place.busbw_gbps)

    @property
    def wrong(self) -> int | None:
        """Wrong elements over both measurements; None when neither was checked."""
        counts = [m.wrong for m in (self.out_of_place, self.in_place) if m is not None and m.wrong is not None]
        return sum(counts) if counts else None


@dataclass(frozen=True, kw_only=True)
class NcclRunInfo:
    """The header and footer values of one run; None where the output does not print them."""

    nccl_tests_version: str | None = None
    n_threads: int | None = None
    n_gpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    warmup_iters: int | None = None
    iters: int | None = None
    validation: bool | None = None
    graph: int | None = None
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None


@dataclass(frozen=True)
class NcclTestsResult(NcclRunInfo):
    """Everything read from one nccl-tests run.

    ``collective_source`` says how ``collective`` was found: ``command line`` (the
    program name appears in the text), ``columns`` (deduced from redop/root/count),
    ``caller`` (passed in) or ``unknown``.
    """

    rows: tuple[NcclRow, ...]
    ranks: tuple[NcclRank, ...]
    collective: str | None
    collective_source: str

    @property
    def hosts(self) -> tuple[str, ...]:
        """Hostnames from the device lines, in rank order, each once."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def gpu_names(self) -> tuple[str, ...]:
        """Distinct GPU names from the device lines."""
        return tuple(dict.fromkeys(r.gpu_name for r in self.ranks))

    @property
    def n_ranks(self) -> int | None:
        """Number of ranks listed under ``# Using devices`` (None when the excerpt has none)."""
        return len(self.ranks) or None

    @property
    def largest_row(self) -> NcclRow:
        """The row with the largest message size (the last one of that size)."""
        return max(reversed(self.rows), key=lambda r: r.size_bytes)

    @property
    def busbw_at_largest_gbps(self) -> float:
        """Bus bandwidth at the largest message size."""
        return self.largest_row.busbw_gbps

    @property
    def max_busbw_gbps(self) -> float:
        """Highest bus bandwidth over all rows."""
        return max(r.busbw_gbps for r in self.rows)

    def rows_from(self, min_size_bytes: int) -> tuple[NcclRow, ...]:
        """Rows whose message size is at least ``min_size_bytes``."""
        return tuple(r for r in self.rows if r.size_bytes >= min_size_bytes)


@dataclass(frozen=True)
class _Layout:
    lead: tuple[str, ...]
    group: tuple[str, ...]
    has_timestamp: bool


def _layout_from_header(tokens: list[str], line_no: int, line: str) -> _Layout:
    time_idx = [i for i, t in enumerate(tokens) if t in ("time", "cputime")]
    if len(time_idx) != 2 or tokens[:3] != ["size", "count", "type"]:
        raise ParseError("unrecognised nccl-tests column header", line_no, line)
    lead = tuple(tokens[: time_idx[0]])
    if not set(lead) <= _LEADING_COLUMNS:
        raise ParseError(f"unknown leading columns {', '.join(lead)}", line_no, line)
    width = time_idx[1] - time_idx[0]
    group = tuple(tokens[time_idx[0] : time_idx[1]])
    if not {"algbw", "busbw"} <= set(group):
        raise ParseError("the column header has no algbw and busbw columns", line_no, line)
    tail = tokens[time_idx[1] + width :]
    return _Layout(lead=lead, group=group, has_timestamp="timestamp" in tail)


def _number(token: str, what: str, line_no: int, line: str) -> float:
    try:
        return real(token, what)
    except ValueError:
        raise ParseError(f"{what} {token[:40]!r} is not a number in range", line_no, line) from None


def _integer(token: str, what: str, line_no: int, line: str) -> int:
    try:
        return integer(token, what)
    except ValueError:
        raise ParseError(f"{what} {token[:40]!r} is not an integer in range", line_no, line) from None


def _measurement(names: tuple[str, ...], values: list[str], line_no: int, line: str) -> NcclMeasurement:
    fields = dict(zip(names, values, strict=True))
    time_key = "time" if "time" in fields else "cputime"
    wrong: int | None = None
    max_error: float | None = None
    if "#wrong" in fields and fields["#wrong"] != "N/A":
        # Printed with %g, so a large count can read "1e+06".
        wrong = int(_number(fields["#wrong"], "#wrong", line_no, line))
    if "error" in fields and fields["error"] != "N/A":
        max_error = _number(fields["error"], "error", line_no, line)
    return NcclMeasurement(
        time_us=_number(fields[time_key], "time", line_no, line),
        algbw_gbps=_number(fields["algbw"], "algbw", line_no, line),
        busbw_gbps=_number(fields["busbw"], "busbw", line_no, line),
        wrong=wrong,
        max_error=max_error,
    )


def _row(tokens: list[str], layout: _Layout, line_no: int, line: str) -> NcclRow:
    if layout.has_timestamp and len(tokens) >= 2 and ":" in tokens[-1]:
        tokens = tokens[:-2]  # "YYYY-MM-DD HH:MM:SS" written after the in-place group
    n_lead, width = len(layout.lead), len(layout.group)
    # Old alltoall printed an empty redop, which leaves no token at all.
    if "redop" in layout.lead and len(tokens) in (n_lead - 1 + width, n_lead - 1 + 2 * width):
        idx = layout.lead.index("redop")
        tokens = [*tokens[:idx], "", *tokens[idx:]]
    body = tokens[n_lead:]
    if len(body) == 2 * width:
        oop: NcclMeasurement | None = _measurement(layout.group, body[:width], line_no, line)
        body = body[width:]
    elif len(body) == width:
        oop = None  # trace replay prints only the in-place group
    else:
        expected = n_lead + 2 * width
        raise ParseError(f"expected {expected} columns in a result row, found {len(tokens)}", line_no, line)
    lead = dict(zip(layout.lead, tokens[:n_lead], strict=True))
    redop = lead.get("redop")
    return NcclRow(
        size_bytes=_integer(lead["size"], "size", line_no, line),
        count=_integer(lead["count"], "count", line_no, line),
        dtype=lead["type"],
        redop=redop if redop else None,
        root=_integer(lead["root"], "root", line_no, line) if "root" in lead else None,
        out_of_place=oop,
        in_place=_measurement(layout.group, body, line_no, line),
        line_no=line_no,
    )


def _collective_from_columns(rows: tuple[NcclRow, ...]) -> str | None:
    """Deduce the collective from redop, root and the size/count ratio of the largest row.

    Returns None where two collectives print the same columns (all_gather and alltoall,
    gather and scatter).
    """
    sized = [r for r in rows if r.count > 0]
    if not sized:
        return None
    row = max(sized, key=lambda r: r.size_bytes)
    if row.redop is None:
        return None  # old layouts without a redop column (or an empty one) say too little
    reduces = row.redop is not None and row.redop != "none"
    rooted = row.root is not None and row.root >= 0
    type_size = _TYPE_SIZES.get(row.dtype)
    per_rank: bool | None = None  # True when size = count x type size x nranks
    if type_size is not None:
        per_rank = row.size_bytes != row.count * type_size
    if reduces:
        if rooted:
            return "reduce"
        if per_rank is None:
            return None
        return "reduce_scatter" if per_rank else "all_reduce"
    if per_rank is None or per_rank:
        return None
    return "broadcast" if rooted else "sendrecv"


def _config_line(info: NcclRunInfo, match: re.Match[str], line: str) -> NcclRunInfo:
    """``info`` with what the ``# nThread ... nGpus ... minBytes ...`` line says."""
    info = replace(
        info,
        n_threads=integer(match[1]),
        n_gpus=integer(match[2]),
        min_bytes=integer(match[3]),
        max_bytes=integer(match[4]),
    )
    if iters := _ITERS_RE.search(line):
        info = replace(info, warmup_iters=integer(iters[1]), iters=integer(iters[2]))
    if validation := _VALIDATION_RE.search(line):
        info = replace(info, validation=validation[1] != "0")
    if graph := _GRAPH_RE.search(line):
        info = replace(info, graph=integer(graph[1]))
    return info


@guarded(unreadable)
def parse_nccl_tests(text: str, collective: str | None = None) -> NcclTestsResult:
    """Parse the text output of one nccl-tests run.

    Launcher prefixes (``srun --label``'s `` 0: ``, ``mpirun --tag-output``'s
    ``[1,0]<stdout>:``), ANSI escapes, ``...`` elision lines and interleaved NCCL log
    lines are skipped. When several tasks print, only the first task's lines are read.

    Args:
        text: The captured output (stdout, or a log that contains it).
        collective: The collective to record when the text does not name it (no
            ``*_perf`` program name) and the columns are ambiguous.

    Returns:
        The parsed run.

    Raises:
        ParseError: A result row or column header cannot be read, a second result table
            starts, or no result row is found.
    """
    lines = numbered_lines(text)
    program: str | None = None
    for _, _, line in lines:
        match = _PROGRAM_RE.search(line)
        if match:
            program = match.group(1)
            break

    task: int | None = None
    layout: _Layout | None = None
    header_line = 0
    rows: list[NcclRow] = []
    ranks: list[NcclRank] = []
    info = NcclRunInfo()

    for line_no, raw, cleaned in lines:
        prefix_task, line = split_launcher_prefix(cleaned)
        stripped = line.strip()
        if not stripped or stripped == "...":
            continue
        tokens = stripped.split()
        is_row_start = tokens[0].isdigit() and (layout is not None or (len(tokens) > 1 and tokens[1].isdigit()))
        if not (stripped.startswith("#") or is_row_start):
            continue  # NCCL INFO lines, shell prompts, launcher chatter
        if prefix_task is not None:
            if task is None:
                task = prefix_task
            elif prefix_task != task:
                continue
        if is_row_start:
            rows.append(_row(tokens, layout or _Layout(_DEFAULT_LEAD, _DEFAULT_GROUP, False), line_no, raw))
            continue
        body = stripped.lstrip("#").split()
        if body[:2] == ["size", "count"]:
            if rows:
                raise ParseError(
                    f"a second result table starts here (the first began at line {header_line}); "
                    "give one nccl-tests run per file",
                    line_no,
                    raw,
                )
            layout = _layout_from_header(body, line_no, raw)
            header_line = line_no
        elif match := _RANK_RE.match(stripped):
            group = match["group"]
            ranks.append(
                NcclRank(
                    rank=integer(match["rank"]),
                    group=integer(group) if group is not None else None,
                    pid=integer(match["pid"]),
                    host=match["host"],
                    device=integer(match["device"]),
                    bus_id=match["bus"],
                    gpu_name=match["name"],
                )
            )
        elif match := _CONFIG_RE.match(stripped):
            info = _config_line(info, match, stripped)
        elif match := _VERSION_RE.match(stripped):
            info = replace(info, nccl_tests_version=match[1])
        elif match := _OOB_RE.match(stripped):
            info = replace(info, out_of_bounds=integer(match[1]))
        elif match := _AVG_RE.match(stripped):
            info = replace(info, avg_busbw_gbps=_number(match[1], "average bus bandwidth", line_no, raw))

    if not rows:
        raise ParseError("no nccl-tests result rows found", len(lines), "")

    frozen_rows = tuple(rows)
    found: str | None
    if program is not None:
        found, source = program, "command line"
    elif (found := _collective_from_columns(frozen_rows)) is not None:
        source = "columns"
    elif collective is not None:
        found, source = collective, "caller"
    else:
        source = "unknown"
    return NcclTestsResult(
        rows=frozen_rows, ranks=tuple(ranks), collective=found, collective_source=source, **asdict(info)
    )
