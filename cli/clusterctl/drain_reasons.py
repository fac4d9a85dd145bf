"""The drain reasons clusterctl gives Slurm: the prefix says who drained a node and who may resume it.

A reason that starts with ``clusterctl`` is clusterctl's; any other is an admin's and is never
undone. The ones below are left alone by ``heal`` and the controller's heal timer because a
command owns them until it finishes (``up`` removing or upgrading a node, ``node replace``).
"""

from __future__ import annotations

PREFIX = "clusterctl"
HEALTH = "clusterctl-health:"
VERIFY = "clusterctl-verify:"
REMOVE = "clusterctl:remove"
UPGRADE = "clusterctl:upgrade"
REPLACED = "clusterctl:replaced"
# Reasons a running command owns; the heal timer on the controller never resumes them.
OWNED_BY_A_COMMAND = (REMOVE, UPGRADE, REPLACED)
