"""The resolved plan: every node, rack, scalable unit, rail, leaf, address, mount and partition.

``build_plan`` turns a validated spec into concrete, JSON-serializable facts; renderers,
providers, verify and the fabric check read the plan and never re-derive from the spec.
The models (``models.py``) are frozen: a plan is built in one pass, by concern: ``nodes``
(seats, then nodes), ``fabric`` and ``rdma``, ``slurm`` (with ``gres``), ``storage``,
``sizing``, ``nccl`` / ``nccl_cloud``, ``cloud`` / ``burst``; ``build`` puts them together.
"""

from clusterctl.plan.build import build_plan
from clusterctl.plan.models import Plan, PlanNode

__all__ = ["Plan", "PlanNode", "build_plan"]
