"""The one place that reads and drives Slurm: commands, parsers, drain reasons, the heal decision.

Every other module talks to Slurm through this package. The modules listed in ``NODE_MODULES``
import nothing but the standard library and each other (relative imports), because the
controller's heal timer and the nodes' health check run this same code where clusterctl is not
installed: ``render.health`` ships them with the scripts. ``client`` drives Slurm through an
executor of ``clusterctl.run`` and stays on the control machine.
"""

from __future__ import annotations

# Shipped to the controller and the compute nodes (build directory: health/lib/clusterctl/slurm/).
NODE_MODULES = (
    "__init__.py",
    "__main__.py",
    "commands.py",
    "heal.py",
    "names.py",
    "nodes.py",
    "reasons.py",
    "records.py",
    "timer.py",
)
