"""The rule registry and runner.

One pass reports every independent problem. Phase-1 rules read the spec alone and all run,
each tolerating the others' errors (a group naming an unknown profile is REF001's, not a
crash of another rule). Some of them guard what the plan is built from (``gates_plan``: the
references, names, addresses, cloud instance types); only when none of those failed is the
plan built and the phase-2 rules, which read it, run. A version, storage or partition error
does not stop anything else.

Rules tagged ``safety`` (``clusterctl.rules.safety``) guard names, paths and injection; they
cannot be skipped: ``check_skip`` refuses them by name or code, before any spec is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.plan import Plan, build_plan
from clusterctl.plan.service import Swap
from clusterctl.spec.findings import Finding, Level
from clusterctl.spec.findings import Path as FieldPath
from clusterctl.spec.loader import LoadedSpec
from clusterctl.spec.models import Spec


@dataclass
class RuleContext:
    """What a rule can look at: the spec, where it came from, and (phase 2) the plan."""

    spec: Spec
    base_dir: Path
    plan: Plan | None = None

    def require_plan(self) -> Plan:
        """The plan; phase-2 rules only run once it exists."""
        assert self.plan is not None, "phase-2 rule ran without a plan"
        return self.plan


RuleFunc = Callable[[RuleContext], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A registered rule."""

    code: str
    name: str
    level: Level
    phase: int
    func: RuleFunc
    summary: str = ""
    tags: frozenset[str] = field(default_factory=frozenset)
    # An error of this (phase-1) rule leaves no plan to build: the phase-2 rules then do not run.
    gates_plan: bool = False

    def finding(
        self,
        path: FieldPath,
        message: str,
        hint: str = "",
        level: Level | None = None,
        *,
        file: str = "",
        line: int = 0,
        column: int = 0,
    ) -> Finding:
        """A finding of this rule (``file``/``line``/``column`` when it is located in another file)."""
        return Finding(
            code=self.code,
            level=level or self.level,
            path=path,
            message=message,
            hint=hint,
            rule=self.name,
            file=file,
            line=line,
            column=column,
        )


RULES: dict[str, Rule] = {}

SAFETY_TAG = "safety"


class UnskippableRuleError(ValueError):
    """``--skip-rule`` named a safety rule."""


def _register_all() -> None:
    """Import every rule module (each registers its rules on import)."""
    from clusterctl.rules import burst, checks, cloud, efa, rdma, safety  # noqa: F401


def check_skip(skip: Iterable[str]) -> set[str]:
    """The names/codes to skip, checked: every one names a rule, and none names a safety rule.

    Raises:
        ValueError: an unknown rule.
        UnskippableRuleError: a safety rule; the message names it and says why it cannot be skipped.
    """
    _register_all()
    skipped = set(skip)
    unknown = skipped - set(RULES) - {r.code for r in RULES.values()}
    if unknown:
        raise ValueError(f"unknown rule(s) to skip: {', '.join(sorted(unknown))}")
    safety = [r for r in RULES.values() if SAFETY_TAG in r.tags and (r.name in skipped or r.code in skipped)]
    if safety:
        named = "; ".join(f"{r.name} ({r.code}): {r.summary.rstrip('.')}" for r in safety)
        raise UnskippableRuleError(
            f"safety rules cannot be skipped: {named}. They keep spec values from becoming duplicate host names, "
            "system mount points or configuration; fix the spec instead."
        )
    return skipped


def rule(
    code: str, name: str, level: Level, phase: int = 2, tags: Iterable[str] = (), gates_plan: bool | None = None
) -> Callable[[RuleFunc], Rule]:
    """Register a rule function under ``name`` with a stable ``code``.

    ``phase``: 1 for rules that read the spec alone, 2 for those that read the plan.
    ``gates_plan``: whether the plan is built from what a phase-1 rule guards (default: every
    phase-1 rule does; a rule whose errors leave the plan buildable says False).
    """

    def register(func: RuleFunc) -> Rule:
        if name in RULES or any(r.code == code for r in RULES.values()):
            raise ValueError(f"duplicate rule {name}/{code}")
        doc = (func.__doc__ or "").strip().splitlines()
        gates = phase == 1 if gates_plan is None else gates_plan and phase == 1
        registered = Rule(code, name, level, phase, func, doc[0] if doc else "", frozenset(tags), gates)
        RULES[name] = registered
        return registered

    return register


def run_rules(
    loaded: LoadedSpec, skip: Iterable[str] = (), swaps: Sequence[Swap] = ()
) -> tuple[list[Finding], Plan | None]:
    """Run every rule not in ``skip``; return located findings and the plan (None if it could not be built).

    ``swaps``: the spares the cluster put in service so far (its state), which the plan applies.

    Raises:
        ValueError: ``skip`` names an unknown rule, or a safety rule (``UnskippableRuleError``).
    """
    skipped = check_skip(skip)
    active = [r for r in RULES.values() if r.name not in skipped and r.code not in skipped]
    ctx = RuleContext(spec=loaded.spec, base_dir=loaded.base_dir)
    findings: list[Finding] = []
    for current in (r for r in active if r.phase == 1):
        findings.extend(loaded.place(f) for f in current.func(ctx))
    if plan_blockers(findings):
        return _sorted(findings), None
    ctx.plan = build_plan(loaded.spec, loaded.base_dir, str(loaded.path), swaps)
    for current in (r for r in active if r.phase == 2):
        findings.extend(loaded.place(f) for f in current.func(ctx))
    return _sorted(findings), ctx.plan


def plan_blockers(findings: Iterable[Finding]) -> list[str]:
    """The codes of the errors that leave no plan to build (sorted, each once)."""
    gating = {r.code for r in RULES.values() if r.gates_plan}
    return sorted({f.code for f in findings if f.level is Level.ERROR and f.code in gating})


def not_run(findings: Iterable[Finding]) -> str:
    """What the rules did not check because of ``findings``, as a sentence ("" when everything ran)."""
    blockers = plan_blockers(findings)
    if not blockers:
        return ""
    later = sorted(r.code for r in RULES.values() if r.phase == 2)
    return (
        f"The rules that read the plan ({', '.join(later)}: fabric size, storage and checkpoint sizing, "
        f"machines.csv) run once {', '.join(blockers)} {'is' if len(blockers) == 1 else 'are'} fixed."
    )


def _sorted(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.file, f.line, f.column, f.code))


def validate(
    loaded: LoadedSpec, skip: Iterable[str] = (), swaps: Sequence[Swap] = ()
) -> tuple[list[Finding], Plan | None]:
    """Run the rules; the plan returned is the built one with the findings in ``plan.findings``.

    Why a copy: the plan is frozen; its findings are known only once the phase-2 rules have
    read it, so the plan that carries them is a new one.
    """
    findings, plan = run_rules(loaded, skip, swaps)
    if plan is not None:
        plan = plan.model_copy(update={"findings": [f.to_dict() for f in findings]})
    return findings, plan
