"""The local target: node images in this machine's Docker, built from the local provider's base image.

An image is tagged ``clusterctl/node:<os>-<hash12>`` and labelled with its full content hash
(``clusterctl.image.hash``) and profile (``clusterctl.image.profile``); the lock records its image
ID. The builder is a container started as the local provider starts nodes (same base image, same
systemd flags), so what the install stage does on it is what it would do on a node. Before it is
committed, everything that makes a machine one machine is removed, so every node made from the
image is a new one: apt's caches, the machine ID, the SSH host keys (a unit makes new ones at the
first boot), logs, temporary files.
"""

from __future__ import annotations

import json
import time

from clusterctl.agent.apply import STATE_DIR
from clusterctl.image import IMAGE_FORMAT, LABEL_ARCH, LABEL_FORMAT, LABEL_HASH, LABEL_OS, LABEL_PROFILE
from clusterctl.image.build import BuildJob, FoundImage, ImageBuildError, InstallRunner, failure_message
from clusterctl.image.drift import DPKG_QUERY, installed_packages
from clusterctl.image.hash import BUILDER_HOSTNAME, ImageHash, host_arch
from clusterctl.image.lock import LockedImage
from clusterctl.run.docker import docker, inspect
from clusterctl.run.engine import engine_layer
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.providers.local import DEFAULT_IMAGE, SYSTEMD_FLAGS, ensure_engine_and_image, wait_booted

REPOSITORY = "clusterctl/node"
SYSTEMD = "/lib/systemd/systemd"
PHASE = "image"
# Commands that may take a while on 2 cores: the install stage is Ansible's (no limit here), these are ours.
_COMMIT_TIMEOUT_S = 1200

# Run on the builder after the install stage, before the commit: nothing of this machine stays.
SSH_KEYS_UNIT = """\
[Unit]
Description=New SSH host keys for this node (made from a clusterctl image, which has none)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=ssh.service
"""
CLEANUP = f"""\
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get clean
# No lists, so nothing may say they are fresh: Ansible's cache_valid_time reads the update stamp, else
# the lists directory's time, and would take the empty lists for a fresh cache with nothing to install.
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/lib/apt/periodic/update-success-stamp
touch -d @0 /var/lib/apt/lists
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id /var/lib/systemd/random-seed
if [ -x /usr/sbin/sshd ]; then
  rm -f /etc/ssh/ssh_host_*
  cat > /etc/systemd/system/clusterctl-ssh-host-keys.service <<'UNIT'
{SSH_KEYS_UNIT}UNIT
  mkdir -p /etc/systemd/system/ssh.service.wants
  ln -sf ../clusterctl-ssh-host-keys.service /etc/systemd/system/ssh.service.wants/clusterctl-ssh-host-keys.service
fi
find /var/log -type f -exec truncate -s 0 {{}} +
rm -rf /var/log/journal/* /tmp/* /var/tmp/* /root/.ansible /root/.cache
"""


def image_tag(os: str, image: ImageHash) -> str:
    """``clusterctl/node:<os>-<hash12>``."""
    return f"{REPOSITORY}:{os}-{image.short}"


def builder_name(image: ImageHash) -> str:
    """The builder container of an image (one per hash: two builds of one image never run at once)."""
    return f"clusterctl-image-{image.short}"


def _bake_engine(name: str) -> None:
    """Unpack the agent's engine layer where a node's agent keeps its layers, by digest: it never fetches it."""
    from clusterctl.run.executor import DockerExecutor

    layer = engine_layer()
    target = f"{STATE_DIR}/layers/{layer.digest}"
    command = (
        f"set -e; rm -rf {target}.unpacking; mkdir -p {target}.unpacking; "
        f"tar -xz --no-same-owner -C {target}.unpacking; mv {target}.unpacking {target}"
    )
    rc, out, err = DockerExecutor({name: name}).send(name, command, layer.data, 300)
    if rc != 0:
        raise ImageBuildError(f"baking the agent's engine into {name} failed: {(err or out).strip()[-500:]}")


class LocalImageTarget:
    """Docker images for the local provider (see the module docstring)."""

    name = "local"

    def __init__(self, base: str = DEFAULT_IMAGE) -> None:
        """Build from ``base`` (the local provider's image: ``provider.image`` or local/debian:bookworm)."""
        self.base = base

    def arch(self) -> str:
        """This machine's architecture: the engine runs its own."""
        return host_arch()

    def find(self, image: ImageHash, os: str) -> FoundImage | None:
        """The image tagged for this hash, if its label carries the same full hash."""
        tag = image_tag(os, image)
        info = inspect("image", tag)
        if info is None:
            return None
        labels = (info.get("Config") or {}).get("Labels") or {}
        if labels.get(LABEL_HASH) != image.hash:
            return None
        return FoundImage(ref=str(info["Id"]), tag=tag)

    def present(self, locked: LockedImage) -> bool:
        """Whether the locked image ID is in the engine."""
        return inspect("image", locked.ref) is not None

    def packages(self, ref: str) -> dict[str, str]:
        """The packages in image ``ref`` (read in a throwaway container, without booting it)."""
        result = docker("run", "--rm", "--network", "none", "--entrypoint", "bash", ref, "-c", DPKG_QUERY, timeout=120)
        return installed_packages(result.stdout, ref, ProviderError)

    def build(self, job: BuildJob, install: InstallRunner, events: EventBus) -> FoundImage:
        """Start a builder from the base image, run the install stage on it, clean it, commit it."""
        image = job.image
        os = job.plan.cluster.os
        tag = image_tag(os, image)
        name = builder_name(image)
        ensure_engine_and_image(self.base, events)
        if inspect("container", name) is not None:
            # A builder an interrupted build left behind.
            docker("rm", "-f", "-v", name)
        events.host(PHASE, job.builder.profile, "running", f"starting builder {name} from {self.base}")
        docker("run", "-d", "--name", name, "--hostname", BUILDER_HOSTNAME, *SYSTEMD_FLAGS, self.base, SYSTEMD)
        try:
            wait_booted(name)
            started = time.monotonic()
            result = install({"ansible_connection": "community.docker.docker", "ansible_host": name})
            if not result.succeeded:
                raise ImageBuildError(failure_message(job.builder.profile, result))
            events.host(PHASE, job.builder.profile, "ok", f"install stage in {time.monotonic() - started:.0f} s")
            if image.inputs.get("engine"):
                _bake_engine(name)
            listed = docker("exec", name, "bash", "-c", DPKG_QUERY, timeout=120).stdout
            packages = installed_packages(listed, name, ProviderError)
            docker("exec", name, "bash", "-c", CLEANUP, timeout=300)
            labels = {
                LABEL_HASH: image.hash,
                LABEL_PROFILE: job.builder.profile,
                LABEL_OS: os,
                LABEL_ARCH: str(image.inputs.get("arch", "")),
                LABEL_FORMAT: str(IMAGE_FORMAT),
            }
            changes = ["-c", "LABEL " + " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))]
            changes += ["-c", f"CMD {json.dumps([SYSTEMD])}"]
            docker("commit", *changes, name, tag, timeout=_COMMIT_TIMEOUT_S)
        finally:
            docker("rm", "-f", "-v", name, check=False)
        info = inspect("image", tag)
        if info is None:
            raise ImageBuildError(f"docker committed {name} as {tag}, but the engine does not list it")
        events.host(PHASE, job.builder.profile, "changed", f"committed {tag}")
        return FoundImage(ref=str(info["Id"]), tag=tag, packages=packages)
