"""Semantic rules over a spec: each a small named function with a stable code and level.

``run_rules`` runs the structural rules first (references, names, addresses); only when
they pass is the plan built and the rules that need it (fabric size, storage, sizing) run.
"""

from clusterctl.rules.engine import (
    RULES,
    SAFETY_TAG,
    Rule,
    RuleContext,
    UnskippableRuleError,
    check_skip,
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
    "run_rules",
    "validate",
]
