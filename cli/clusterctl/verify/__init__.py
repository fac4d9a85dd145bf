"""Acceptance checks: parse real tool outputs, judge them against thresholds, run them on a cluster.

One module per concern, each with its command, parser use, threshold and judgement, and the
check class that runs it: ``gpu`` (inventory, DCGM), ``fabric`` (GPU-NIC locality, InfiniBand
ports), ``storage`` (mounts, fio), ``slurm`` (nodes, slurmd, partitions), ``timesync``
(chrony), ``transport`` (the NCCL transport each fabric needs), ``nccl`` (nccl-tests over the
fabric-shaped test plan, ``testplan``) and ``packages`` (each node against clusterctl.lock).
What they share is in ``base`` (options, context, check classes) and ``result`` (a verdict as a
`clusterctl.spec.findings.Finding`); ``checks`` lists them in run order.

Pure, and importable without pydantic (tests/gpu runs the judges on a bare python3): the
parsers (``parsers/``), the concern modules, the rail-to-device map (``rails``), the per-GPU-model
defaults (``thresholds``) and the saved-output judge behind ``clusterctl check-output``
(``offline``). The spec's overrides (``acceptance``) read the spec.

Side effects, for ``clusterctl verify``: ``runner`` (runs the checks in order through an
executor of `clusterctl.run.executor`), ``drain`` (scontrol) and ``report`` (JSON, HTML from
``templates/verify/``, terminal).
"""
