"""Acceptance checks: parse real tool outputs and judge them against thresholds.

Owns the pure parsers (``parsers/``: nccl-tests, ``dcgmi diag``, ``nvidia-smi topo -m``,
``ibstat``, fio JSON), the per-GPU-model acceptance defaults (``thresholds``) and the
verdicts (``judge``). Nothing here runs a tool or touches a host; ``run`` does that.
"""
