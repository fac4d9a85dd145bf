"""The workflows: ``up`` and ``down`` in phases, and day 2 (heal, hot spares, rolling upgrades, retiring
nodes, readiness, diff, the converged-state check, burst resume and suspend, status).

Commands call these and report what they return. Workflows drive the adapters below them
(``clusterctl.run``: providers, Ansible, SSH, state, Pulumi, Docker; ``clusterctl.slurm``), never
the other way round.
"""
