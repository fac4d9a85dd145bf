"""Semantic rules over a spec: each a small named function with a stable code and level.

``run_rules`` runs every rule that reads the spec alone; unless one of those that guard what
the plan is built from (references, names, addresses) failed, it builds the plan and runs the
rules that read it (fabric size, storage sizing, machines.csv).
"""

from clusterctl.rules.engine import (
    RULES,
    SAFETY_TAG,
    Rule,
    RuleContext,
    UnskippableRuleError,
    check_skip,
    not_run,
    plan_blockers,
    run_rules,
    validate,
)

__all__ = [
    "RULES",
    "SAFETY_TAG",
    "Rule",
    "RuleContext",
    "UnskippableRuleError",
    "check_skip",
    "not_run",
    "plan_blockers",
    "run_rules",
    "validate",
]
