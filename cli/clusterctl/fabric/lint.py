"""Parse and lint Slurm ``topology.conf`` (``topology/tree``).

The checks follow what slurmctld does with the file (SchedMD/slurm
``src/plugins/topology/tree/switch_record.c``): it refuses duplicate switch names,
undefined or self children, cycles, a switch with both ``Nodes`` and ``Switches`` and
names over 64 characters; it only warns, and then schedules badly, when a node sits
under two leaves, a name is not a node, or no switch reaches every node.

Each problem is a `clusterctl.spec.findings.Finding` located at its line of the file (``line``
0 for the whole file), with the rule named in `CODES`:

Codes:
    FAB-L001 error: a node is under more than one leaf switch.
    FAB-L002 error: a known node is under no switch.
    FAB-L003 error: a name under a switch is not a known node.
    FAB-L004 error: a switch lists a child switch that is not defined.
    FAB-L005 error: a switch name is defined twice.
    FAB-L006 warning: several roots with no common parent.
    FAB-L007 error: the switches form a cycle (or a switch is its own child).
    FAB-L008 warning: a switch is the child of more than one switch.
    FAB-L009 error: a switch has both ``Nodes`` and ``Switches``.
    FAB-L010 error: a line Slurm cannot read (syntax, bad hostlist, unknown key, long name).
    FAB-L011 warning: a switch with neither ``Nodes`` nor ``Switches``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from dataclasses import dataclass

from clusterctl.bounded import integer
from clusterctl.hostlist import HostlistError, compress, expand
from clusterctl.spec.findings import Finding, Level

MAX_SWITCH_NAME = 64
_KEYS = {"switchname": "SwitchName", "switches": "Switches", "nodes": "Nodes", "linkspeed": "LinkSpeed"}
# Code -> (rule name, level).
CODES: dict[str, tuple[str, Level]] = {
    "FAB-L001": ("node-under-two-leaves", Level.ERROR),
    "FAB-L002": ("node-under-no-switch", Level.ERROR),
    "FAB-L003": ("unknown-node", Level.ERROR),
    "FAB-L004": ("undefined-child-switch", Level.ERROR),
    "FAB-L005": ("duplicate-switch", Level.ERROR),
    "FAB-L006": ("several-roots", Level.WARNING),
    "FAB-L007": ("switch-cycle", Level.ERROR),
    "FAB-L008": ("several-parents", Level.WARNING),
    "FAB-L009": ("nodes-and-switches", Level.ERROR),
    "FAB-L010": ("unreadable-line", Level.ERROR),
    "FAB-L011": ("empty-switch", Level.WARNING),
}


def lint_finding(code: str, message: str, line_no: int | None) -> Finding:
    """A problem of a ``topology.conf``: its code, a sentence saying what to change, its line (None: the file)."""
    rule, level = CODES[code]
    return Finding(code=code, level=level, message=message, rule=rule, line=line_no or 0)


@dataclass(frozen=True)
class SwitchDef:
    """One ``SwitchName`` line.

    Attributes:
        name: The switch name.
        line_no: 1-based line of the definition (its first line when continued).
        nodes: Expanded ``Nodes=`` names, in file order.
        switches: Expanded ``Switches=`` names, in file order.
        link_speed: ``LinkSpeed=`` if given (Slurm does not use it).
        nodes_expr: The ``Nodes=`` hostlist as written, ``None`` when absent.
        switches_expr: The ``Switches=`` hostlist as written, ``None`` when absent.
    """

    name: str
    line_no: int
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: int | None = None
    nodes_expr: str | None = None
    switches_expr: str | None = None


@dataclass(frozen=True)
class TopologyConf:
    """A parsed ``topology.conf``.

    Attributes:
        switches: Every definition in file order, duplicates included.
        problems: Lines that could not be read (code ``FAB-L010``).
    """

    switches: tuple[SwitchDef, ...]
    problems: tuple[Finding, ...] = ()

    def by_name(self) -> dict[str, SwitchDef]:
        """Return definitions by name; with duplicates, the first wins."""
        out: dict[str, SwitchDef] = {}
        for switch in self.switches:
            out.setdefault(switch.name, switch)
        return out

    def parents(self) -> dict[str, list[str]]:
        """Return, for each child switch name, the switches that list it."""
        out: dict[str, list[str]] = defaultdict(list)
        for switch in self.by_name().values():
            for child in dict.fromkeys(switch.switches):
                out[child].append(switch.name)
        return dict(out)

    def roots(self) -> list[str]:
        """Return the names of defined switches that are no switch's child, in file order."""
        parents = self.parents()
        return [name for name in self.by_name() if name not in parents]

    def leaves_of_node(self) -> dict[str, list[str]]:
        """Return, for each node name, the leaf switches that list it."""
        out: dict[str, list[str]] = defaultdict(list)
        for switch in self.switches:
            for node in dict.fromkeys(switch.nodes):
                out[node].append(switch.name)
        return dict(out)

    def nodes(self) -> set[str]:
        """Return every node name listed under any switch."""
        return {node for switch in self.switches for node in switch.nodes}


# A line with thousands of bad tokens is one problem to fix, not thousands of findings to print.
MAX_LINE_PROBLEMS = 20


def parse_topology_conf(text: str) -> TopologyConf:
    """Parse ``topology.conf`` text.

    Keys are case-insensitive, ``#`` starts a comment, a trailing ``\\`` continues the
    line, and ``Nodes``/``Switches`` are hostlist expressions, as in Slurm.

    Returns:
        The switch definitions, plus unreadable lines as ``FAB-L010`` findings in
        ``problems`` (parsing never raises, so a linter can report every problem).
    """
    switches: list[SwitchDef] = []
    problems: list[Finding] = []
    for line_no, line in _logical_lines(text):
        switch, errors = _parse_line(line, line_no)
        problems.extend(lint_finding("FAB-L010", msg, line_no) for msg in errors[:MAX_LINE_PROBLEMS])
        if len(errors) > MAX_LINE_PROBLEMS:
            more = f"{len(errors) - MAX_LINE_PROBLEMS} more problem(s) on this line are not listed."
            problems.append(lint_finding("FAB-L010", more, line_no))
        if switch is not None:
            switches.append(switch)
    return TopologyConf(tuple(switches), tuple(problems))


def lint_topology_conf(text: str, known_nodes: set[str] | None = None, *, file: str = "") -> list[Finding]:
    """Check a ``topology.conf`` for defects.

    Args:
        text: The file content.
        known_nodes: The cluster's node names (from slurm.conf or the plan). When given,
            also report nodes missing from every switch and names that are not nodes.
        file: Where the text comes from, for the findings' location.

    Returns:
        Findings sorted by line (whole-file findings last), then code.
    """
    conf = parse_topology_conf(text)
    findings = list(conf.problems)
    findings += _duplicates(conf)
    findings += _structure(conf)
    findings += _multi_homed(conf)
    if known_nodes is not None:
        findings += _against_known(conf, known_nodes)
    findings += _roots(conf)
    ordered = sorted(findings, key=lambda f: (f.line == 0, f.line, f.code, f.message))
    return [dataclasses.replace(f, file=file) for f in ordered] if file else ordered


# --- parsing -----------------------------------------------------------------------------


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).rstrip()
        if not pending:
            start = line_no
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(pending).strip()
        pending = []
        if joined:
            out.append((start, joined))
    if pending and " ".join(pending).strip():
        out.append((start, " ".join(pending).strip()))
    return out


def _strip_comment(line: str) -> str:
    # Slurm treats "\#" as a literal '#'; anything after a bare '#' is a comment.
    match = re.search(r"(?<!\\)#", line)
    text = line[: match.start()] if match else line
    return text.replace("\\#", "#")


def _parse_line(line: str, line_no: int) -> tuple[SwitchDef | None, list[str]]:
    errors: list[str] = []
    values: dict[str, str] = {}
    for index, token in enumerate(line.split()):
        key, sep, value = token.partition("=")
        canonical = _KEYS.get(key.lower())
        if not sep:
            errors.append(f"'{token}' is not key=value; write SwitchName=<name> followed by Nodes= or Switches=.")
            continue
        if canonical is None:
            hint = (
                " BlockName lines belong to topology/block, not topology/tree."
                if key.lower().startswith("block")
                else ""
            )
            errors.append(
                f"Unknown key '{key}'; topology/tree accepts SwitchName, Switches, Nodes and LinkSpeed.{hint}"
            )
            continue
        if index == 0 and canonical != "SwitchName":
            errors.append(f"The line starts with {canonical}=; every line must start with SwitchName=.")
            return None, errors
        if canonical in values:
            errors.append(f"{canonical}= is given twice on one line; keep one.")
            continue
        values[canonical] = value.strip('"')
    name = values.get("SwitchName")
    if name is None:
        return None, errors
    if not name:
        errors.append("SwitchName= is empty; give the switch a name.")
        return None, errors
    if len(name) > MAX_SWITCH_NAME:
        errors.append(f"Switch name '{name}' has {len(name)} characters; Slurm allows at most {MAX_SWITCH_NAME}.")
    nodes = _expand(values.get("Nodes"), "Nodes", errors)
    switches = _expand(values.get("Switches"), "Switches", errors)
    link_speed = None
    if "LinkSpeed" in values:
        if values["LinkSpeed"].isdigit():
            link_speed = integer(values["LinkSpeed"])
        else:
            errors.append(f"LinkSpeed={values['LinkSpeed']} is not a whole number.")
    return (
        SwitchDef(name, line_no, nodes, switches, link_speed, values.get("Nodes"), values.get("Switches")),
        errors,
    )


def _expand(expr: str | None, key: str, errors: list[str]) -> tuple[str, ...]:
    if expr is None:
        return ()
    if not expr:
        errors.append(f"{key}= is empty; list names or remove the key.")
        return ()
    try:
        return tuple(expand(expr))
    except HostlistError as err:
        errors.append(f"{key}={expr} is not a valid hostlist: {err}.")
        return ()


# --- rules -------------------------------------------------------------------------------


def _duplicates(conf: TopologyConf) -> list[Finding]:
    first: dict[str, int] = {}
    out = []
    for switch in conf.switches:
        if switch.name in first:
            out.append(
                lint_finding(
                    "FAB-L005",
                    f"Switch '{switch.name}' is already defined on line {first[switch.name]}; "
                    "Slurm refuses the file. Merge the two lines or rename one.",
                    switch.line_no,
                )
            )
        else:
            first[switch.name] = switch.line_no
    return out


def _structure(conf: TopologyConf) -> list[Finding]:
    defined = conf.by_name()
    out = []
    for switch in defined.values():
        if switch.nodes and switch.switches:
            out.append(
                lint_finding(
                    "FAB-L009",
                    f"Switch '{switch.name}' has both Nodes= and Switches=; Slurm refuses this. "
                    "Put the nodes under a leaf switch of their own.",
                    switch.line_no,
                )
            )
        elif switch.nodes_expr is None and switch.switches_expr is None:
            out.append(
                lint_finding(
                    "FAB-L011",
                    f"Switch '{switch.name}' has neither Nodes= nor Switches=; Slurm treats it as an "
                    "empty leaf. Remove it or list its children.",
                    switch.line_no,
                )
            )
        missing = [c for c in dict.fromkeys(switch.switches) if c not in defined]
        if missing:
            out.append(
                lint_finding(
                    "FAB-L004",
                    f"Switch '{switch.name}' lists undefined child switch(es) {', '.join(missing)}; "
                    "define them with their own SwitchName= line or remove them.",
                    switch.line_no,
                )
            )
    for child, parents in sorted(conf.parents().items()):
        if len(parents) > 1 and child in defined:
            out.append(
                lint_finding(
                    "FAB-L008",
                    f"Switch '{child}' is a child of {', '.join(parents)}; Slurm keeps only the last "
                    "parent it reads. Collapse those parents into one switch line.",
                    defined[child].line_no,
                )
            )
    out += _cycles(conf)
    return out


def _cycles(conf: TopologyConf) -> list[Finding]:
    defined = conf.by_name()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    reported: set[frozenset[str]] = set()
    out: list[Finding] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        path.append(name)
        for child in dict.fromkeys(defined[name].switches):
            if child not in defined:
                continue
            if state.get(child) == 1:
                cycle = [*path[path.index(child) :], child]
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    out.append(
                        lint_finding(
                            "FAB-L007",
                            f"The switches form a cycle: {' -> '.join(cycle)}; a switch must not be "
                            "an ancestor of itself. Remove the upward reference.",
                            defined[child].line_no,
                        )
                    )
            elif child not in state:
                visit(child, path)
        path.pop()
        state[name] = 2

    for name in defined:
        if name not in state:
            visit(name, [])
    return out


def _multi_homed(conf: TopologyConf) -> list[Finding]:
    # slurmctld only logs "Multiple leaf switches contain nodes" and then counts the node under
    # both leaves, so jobs get placed as if it were one hop from two switches: an error here.
    by_name = conf.by_name()
    out = []
    for node, leaves in sorted(conf.leaves_of_node().items()):
        if len(leaves) > 1:
            second = by_name[leaves[1]]
            out.append(
                lint_finding(
                    "FAB-L001",
                    f"Node {node} is under more than one leaf switch ({', '.join(leaves)}); a node "
                    "must hang off exactly one leaf. Keep it under the leaf it is cabled to.",
                    second.line_no,
                )
            )
    return out


def _against_known(conf: TopologyConf, known_nodes: set[str]) -> list[Finding]:
    out = []
    for switch in conf.switches:
        unknown = [n for n in dict.fromkeys(switch.nodes) if n not in known_nodes]
        if unknown:
            hints = {n: _suggest(n, known_nodes) for n in unknown}
            hint = "; ".join(f"{n} -> {h}" for n, h in hints.items() if h)
            out.append(
                lint_finding(
                    "FAB-L003",
                    f"Switch '{switch.name}' lists {compress(unknown)}, which "
                    f"{'is not a node' if len(unknown) == 1 else 'are not nodes'} of the cluster. "
                    + (f"Did you mean: {hint}?" if hint else "Fix the names or remove them."),
                    switch.line_no,
                )
            )
    missing = sorted(known_nodes - conf.nodes())
    if missing:
        out.append(
            lint_finding(
                "FAB-L002",
                f"Node(s) {compress(missing)} are under no switch; Slurm cannot place jobs on them "
                "with topology/tree. Add them under the leaf they are cabled to.",
                None,
            )
        )
    return out


def _suggest(name: str, known: set[str]) -> str | None:
    """A known node that ends with ``name`` (a dropped prefix), if exactly one does."""
    matches = [k for k in known if k.endswith(name) and k != name]
    return matches[0] if len(matches) == 1 else None


def _roots(conf: TopologyConf) -> list[Finding]:
    # Disconnected roots are how Slurm is told that fabrics are separate, so only a warning.
    roots = conf.roots()
    if len(roots) <= 1:
        return []
    return [
        lint_finding(
            "FAB-L006",
            f"{len(roots)} switches ({', '.join(roots)}) have no common parent, so Slurm will never "
            "place one job across them. That is right only for physically separate fabrics; "
            "otherwise add a SwitchName=<spine> Switches=... line above them.",
            None,
        )
    ]
