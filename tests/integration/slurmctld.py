"""Run Debian's real slurmctld in a container on a rendered build directory.

Used to prove that what clusterctl renders loads in Slurm: topology.conf, partitions,
node definitions (nodes stay UNKNOWN/DOWN: no slurmd runs).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.docker_helpers import docker, image_with_packages

SLURMCTLD_IMAGE = "local/clusterctl-test-slurmctld:bookworm"


def slurmctld_image() -> str:
    """Debian 12's slurmctld + client + munge on the base image (built once)."""
    return image_with_packages(SLURMCTLD_IMAGE, ["slurmctld", "slurm-client", "munge"])


class Slurmctld:
    """A running slurmctld container."""

    def __init__(self, name: str) -> None:
        self.name = name

    def exec(self, command: str, check: bool = True) -> str:
        """Run a shell command in the container; return stdout."""
        return docker("exec", self.name, "bash", "-c", command, check=check).stdout

    def scontrol(self, *args: str) -> str:
        """``scontrol ARGS`` output."""
        return self.exec("scontrol " + " ".join(args))

    def log(self) -> str:
        """slurmctld's log."""
        return self.exec("cat /var/log/slurm/slurmctld.log", check=False)


@contextlib.contextmanager
def running_slurmctld(slurm_dir: Path, hostname: str, timeout: float = 60) -> Iterator[Slurmctld]:
    """Start slurmctld on the files of ``slurm_dir`` (a rendered ``build/<c>/slurm``).

    Accounting is switched off in the copy (no slurmdbd runs here); everything else is as rendered.
    The rendered ``hosts`` beside ``slurm_dir`` (when present) resolves the nodes, as on a real
    cluster; without it slurmctld waits on DNS timeouts for every node name.
    """
    image = slurmctld_image()
    name = f"clusterctl-test-slurmctld-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "--hostname", hostname, image, "sleep", "infinity")
    ctld = Slurmctld(name)
    try:
        for path in sorted(slurm_dir.rglob("*")):
            if path.is_file():
                target = f"/etc/slurm/{path.relative_to(slurm_dir)}"
                docker("exec", name, "mkdir", "-p", str(Path(target).parent))
                docker("cp", str(path), f"{name}:{target}")
        setup = (
            "set -e; sed -i 's/^AccountingStorageType=.*/AccountingStorageType=accounting_storage\\/none/;"
            " /^AccountingStorage\\(Host\\|Port\\|TRES\\)=/d; /^PriorityWeight/d;"
            # The container's address is Docker's, not the plan's: reach the controller by name.
            " s/^SlurmctldHost=\\([^(]*\\)(.*)/SlurmctldHost=\\1/' /etc/slurm/slurm.conf;"
            " rm -f /etc/slurm/plugstack.conf.d/pyxis.conf;"
            " mkdir -p /var/spool/slurmctld /var/log/slurm /run/munge;"
            " chown slurm: /var/spool/slurmctld /var/log/slurm; chown munge: /run/munge;"
            " dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null;"
            " chown munge: /etc/munge/munge.key; chmod 400 /etc/munge/munge.key;"
            " su -s /bin/sh munge -c /usr/sbin/munged; /usr/sbin/slurmctld"
        )
        hosts = slurm_dir.parent / "hosts"
        if hosts.is_file():
            entries = [
                line
                for line in hosts.read_text().splitlines()
                if line and not line.startswith("#") and hostname not in line.split()[1:]
            ]
            docker("exec", "-i", name, "bash", "-c", "cat >> /etc/hosts", input_text="\n".join(entries) + "\n")
        docker("exec", name, "bash", "-c", setup)
        deadline = time.monotonic() + timeout
        while docker("exec", name, "scontrol", "ping", check=False).stdout.count("UP") == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurmctld did not come up:\n{ctld.log()[-3000:]}")
            time.sleep(1)
        yield ctld
    finally:
        docker("rm", "-f", name, check=False)


def parse_scontrol_records(text: str) -> list[dict[str, str]]:
    """Parse ``scontrol show ...`` output: a record starts at an unindented line; key=value pairs."""
    records: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace() or not records:
            records.append({})
        for token in line.split():
            if "=" in token:
                key, _, value = token.partition("=")
                records[-1][key] = value
    return [r for r in records if r]
