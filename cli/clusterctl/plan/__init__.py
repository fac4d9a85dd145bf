"""The resolved plan: every node, rack, scalable unit, rail, leaf, address, mount and partition.

``build_plan`` turns a validated spec into concrete, JSON-serializable facts; renderers,
providers, verify and the fabric check read the plan and never re-derive from the spec.
"""

from clusterctl.plan.build import build_plan
from clusterctl.plan.models import Plan, PlanNode

__all__ = ["Plan", "PlanNode", "build_plan"]
