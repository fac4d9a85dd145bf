"""Acceptance checks: parse real tool outputs, judge them against thresholds, run them on a cluster.

Pure parts: the parsers (``parsers/``: nccl-tests, ``NCCL_DEBUG=INFO`` logs, ``dcgmi diag``,
``nvidia-smi topo -m``, ``ibstat``, fio JSON, ``nvidia-smi --query-gpu``, ``scontrol``,
``chronyc``, the node's rails file ``/etc/clusterctl/rdma-rails.conf``), the rail-to-device
map the rail checks judge by (``rails``), the per-GPU-model defaults (``thresholds``) and the spec's overrides
(``acceptance``), the verdicts (``judge``, ``gpu_inventory``, and ``transport``: the NCCL
transport each fabric needs), the fabric-shaped NCCL test plan (``testplan``) and the
saved-output judge behind ``clusterctl check-output`` (``offline``).

Side effects, for ``clusterctl verify``: ``executor`` (docker exec / SSH), ``checks`` (one
class per check), ``runner`` (runs them in order), ``drain`` (scontrol) and ``report``
(JSON, HTML, terminal).
"""
