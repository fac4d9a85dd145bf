"""Configure by pull: the node's agent, the bundle server, and the documents they exchange.

A node applies its configuration itself: its agent (``loop``) waits on its pointer at the bundle
server on the controller (``server``), fetches the content-addressed layers the pointer names
(``fetch``, ``layers``), runs the configure stage with ``ansible-playbook -c local`` (``apply``)
when the bundle or the node changed (``digest``), and tells Slurm what it applied
(``clusterctl.slurm.applied``). Pointers are signed with a key derived from the munge key
(``pointer``), which reaches the node at provisioning, never through the server.

Every module here runs on the nodes and the controller where clusterctl is not installed: it
imports the standard library, its own package, ``clusterctl.bounded`` and the modules of
``clusterctl.slurm`` named in ``SHIPPED``, nothing else. The control machine uses the same code.
"""

from __future__ import annotations

# clusterctl/agent/<name> on the nodes.
NODE_MODULES = (
    "__init__.py",
    "__main__.py",
    "apply.py",
    "cause.py",
    "digest.py",
    "fetch.py",
    "layers.py",
    "loop.py",
    "pointer.py",
    "publish.py",
    "server.py",
)
# Other modules of clusterctl the agent imports, shipped beside it (paths under clusterctl/).
SHIPPED = (
    "bounded.py",
    "slurm/__init__.py",
    "slurm/applied.py",
    "slurm/commands.py",
    "slurm/names.py",
    "slurm/reasons.py",
    "slurm/records.py",
)
