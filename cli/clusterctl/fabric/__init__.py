"""The InfiniBand fabric check, pure parts: no subprocesses, no network.

``model`` holds the discovered fabric (nodes, ports, links, link speeds), ``parsers``
reads ``ibnetdiscover`` (plain and ``-p``) and ``iblinkinfo`` text into it,
``discovered_topology`` derives the switch hierarchy and renders a Slurm
``topology.conf`` (through the render's template), and ``lint`` checks any
``topology.conf`` for defects Slurm would reject or silently mis-schedule. ``expected``
reads the designed cabling from a plan and ``compare`` checks a discovered fabric against
it, structurally: ``cabling`` holds the comparison's state and codes, ``placement`` the host
HCAs on their leaves, ``uplinks`` the uplinks, ports and link rates. Every problem is a
`clusterctl.spec.findings.Finding`.
"""
