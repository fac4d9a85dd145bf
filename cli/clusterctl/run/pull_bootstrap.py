"""What a provider puts on a pulling node at provisioning: the agent, its settings and the node's secrets.

Through the provider's own channel only (``docker exec`` for the local provider, which only root on
this machine can use; SSH with the pinned host key for bare metal), never through the bundle server:
the munge key (the agent verifies its pointers with a key derived from it, the munge role installs
it) and the node's SSH host key, which clusterctl generated and pins (the heal timer's known_hosts
is written from it). The rest is the agent's code, its command and unit from the build directory,
and its settings (the cluster, the node's name, the bundle servers). One tar, unpacked as root, then
the agent started.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from clusterctl.plan.models import Plan, PlanNode
from clusterctl.render import bundle
from clusterctl.run.sshkeys import KeyPair

AGENT_DIR = "/etc/clusterctl/agent"
CONFIG = f"{AGENT_DIR}/agent.json"
MUNGE_KEY = f"{AGENT_DIR}/munge.key"
UNIT = "clusterctl-agent.service"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
# A node's agent waits at most this long before fetching a new bundle (spreads a thousand nodes over it).
JITTER_S = 5.0

# Unpack the tar (paths clusterctl chose, owned by root), keep the secrets' folder private, and
# start (or restart) the agent; sshd, where it runs already, takes the new host key.
COMMAND = (
    "set -e; umask 022; tar -x --no-same-owner --no-overwrite-dir -C / -f -; "
    f"chmod 0700 {AGENT_DIR}; chmod 0400 {MUNGE_KEY}; chmod 0600 {HOST_KEY}; "
    "systemctl daemon-reload; "
    f"systemctl enable --quiet {UNIT}; systemctl restart {UNIT}; "
    "systemctl try-restart ssh.service 2>/dev/null || true"
)


def settings(plan: Plan, node: PlanNode) -> dict[str, object]:
    """The agent's settings for ``node`` (``/etc/clusterctl/agent/agent.json``)."""
    return {
        "cluster": plan.cluster.name,
        "node": node.hostname,
        "servers": bundle.server_urls(plan),
        "munge_key": MUNGE_KEY,
        "jitter_s": JITTER_S,
        # Host variables of every apply: where the munge role finds the key this node was given.
        "facts": {"munge_key_file": MUNGE_KEY},
    }


def payload(plan: Plan, node: PlanNode, build_dir: Path, munge_key: bytes, host_key: KeyPair) -> bytes:
    """The tar for ``node``: its settings and secrets, the agent's code, command and unit."""
    entries: list[tuple[str, bytes, int]] = [
        (CONFIG, (json.dumps(settings(plan, node), indent=1, sort_keys=True) + "\n").encode(), 0o644),
        (MUNGE_KEY, munge_key, 0o400),
        (HOST_KEY, host_key.private.encode(), 0o600),
        (f"{HOST_KEY}.pub", (host_key.public.strip() + "\n").encode(), 0o644),
        (bundle.AGENT_PATH, (build_dir / "agent" / "clusterctl-agent").read_bytes(), 0o755),
        (f"/etc/systemd/system/{UNIT}", (build_dir / "agent" / UNIT).read_bytes(), 0o644),
    ]
    entries += [(f"{bundle.LIB_DIR}/{name}", data, mode) for name, data, mode in bundle.agent_files_raw()]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def command() -> str:
    """The shell command that takes the payload on its stdin."""
    return COMMAND
