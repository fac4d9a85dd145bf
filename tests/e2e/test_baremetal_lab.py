"""Day 0 on bare metal, booted for real: examples/baremetal-lab.yaml on KVM (or qemu's TCG) machines.

The lab (lab/) makes the site: a bridge, sushy-tools' Redfish emulator over HTTPS with basic auth
in front of libvirt domains, dnsmasq as rendered and an HTTP server as the PXE server. Then
``clusterctl up`` (the lab's stand-in for the Pulumi engine drives the stack's own dynamic
provider) powers the machines on through their BMCs; they PXE-boot the baked image from the
render (ctl001 BIOS/iPXE installed, disk001 UEFI/GRUB installed, ram001 BIOS stateless, ram002
UEFI stateless and a hot spare), and the configure stage and readiness put them in Slurm.

The tests look at the nodes over SSH with clusterctl's key and pinned host keys, run a job on
both compute nodes, roll a driver pin (a real reboot of each: PXE again from RAM, the disk when
installed), put the spare in a failed node's place, take the day-0 failure paths on a machine
added for them, and end with ``down``: every domain off. Under ``CI=true`` nothing here is
skipped, with or without KVM. Of the four failure paths, the refused checksum and the refused BMC
credentials always run; the wrong MAC and the other host key need CLUSTERCTL_LAB_ALL_FAILURES=1
(one waits out the ready timeout, each boots a machine).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.run.executor import executor_for
from clusterctl.run.sshkeys import ensure_host_keys
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.e2e.conftest import save_artifact

pytestmark = [pytest.mark.e2e]

SPEC = EXAMPLES / "baremetal-lab.yaml"
MACHINES = EXAMPLES / "baremetal-lab-machines.csv"
CLUSTER = "baremetal-lab"
COMPUTE = ["disk001", "ram001"]
VIRSH = ["virsh", "-c", "qemu:///system"]
# The machine the failure paths are taken on: a fifth VM, stateless, in a group of its own.
EXTRA_GROUP = "  - {group: extra, role: compute, hardware: vm, count: 1}\n"
EXTRA_ROW = "extra001,https://10.231.0.1:18443/redfish/v1/Systems/clusterctl-lab-extra001,{mac},lab,UEFI\n"
EXTRA_MAC = "52:54:00:c7:10:05"


@dataclass
class LabCluster:
    """The lab's cluster and where its files are."""

    root: Path
    spec: Path
    build_dir: Path
    state_root: Path
    lock: Path
    plan: Plan
    up_seconds: float = 0.0

    @property
    def state_dir(self) -> Path:
        return self.state_root / CLUSTER

    def lab(self, *args: str, spec: Path | None = None, timeout: float = 7200) -> subprocess.CompletedProcess[str]:
        """``python -m lab ARGS SPEC`` with this cluster's directories."""
        argv = [sys.executable, "-m", "lab", *args, str(spec or self.spec), "--out", str(self.build_dir)]
        argv += ["--state-dir", str(self.state_root), "--lock", str(self.lock)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, check=False)

    def cli(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """``clusterctl ARGS`` (the lab's engine) with this cluster's state."""
        argv = [sys.executable, "-m", "lab.clusterctl", *args, "--state-dir", str(self.state_root)]
        full = {**os.environ, "COLUMNS": "200", **(env or {})}
        return subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=REPO_ROOT, env=full, check=False)

    def up(self, spec: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """``clusterctl up SPEC`` from the lock."""
        options = ("--yes", "--lock", str(self.lock), "--out", str(self.build_dir))
        return self.cli("up", str(spec or self.spec), *options, env=env)

    def run(self, host: str, command: str, timeout: float = 120) -> tuple[int, str, str]:
        """A command on a node, over SSH with clusterctl's key and its pinned host keys (as root)."""
        return executor_for(self.plan, self.state_dir).run(host, command, timeout)

    def console(self, host: str) -> str:
        return (self.build_dir / "lab" / f"{host}.console.log").read_text(errors="replace")


def _copy_spec(root: Path, text: str, machines: str) -> Path:
    spec = root / SPEC.name
    spec.write_text(text)
    (root / MACHINES.name).write_text(machines)
    return spec


@pytest.fixture(scope="module")
def lab_cluster() -> Iterator[LabCluster]:
    """The lab built and its cluster brought up once for the module; all of it removed at the end."""
    # Not pytest's temporary folder (0700): dnsmasq and libvirt's qemu run as their own users and must
    # reach the PXE tree and the disks through it.
    root = Path(tempfile.mkdtemp(prefix="clusterctl-lab-"))
    root.chmod(0o711)
    spec = _copy_spec(root, SPEC.read_text(), MACHINES.read_text())
    build = root / "build" / CLUSTER
    cluster = LabCluster(root, spec, build, root / "state", root / f"{CLUSTER}.lock", plan=None)  # type: ignore[arg-type]
    # A lab left by an interrupted session (same domains, bridge and ports) goes first.
    cluster.lab("down", timeout=900)
    started = time.monotonic()
    result = cluster.lab("up")
    cluster.up_seconds = time.monotonic() - started
    save_artifact("e2e-lab-up.log", result.stdout + result.stderr)
    if result.returncode != 0:
        _save_consoles(cluster)
        cluster.lab("down", timeout=900)
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"python -m lab up failed ({result.returncode}):\n{(result.stdout + result.stderr)[-6000:]}")
    cluster.plan = load_and_validate(spec).plan
    yield cluster
    _save_consoles(cluster)
    down = cluster.lab("down", timeout=900)
    save_artifact("e2e-lab-down.log", down.stdout + down.stderr)
    assert down.returncode == 0, down.stdout + down.stderr
    left = subprocess.run([*VIRSH, "list", "--all", "--name"], capture_output=True, text=True, check=False).stdout
    assert not [name for name in left.split() if name.startswith("clusterctl-lab-")], left
    assert subprocess.run(["ip", "link", "show", "cclab0"], capture_output=True, check=False).returncode != 0
    shutil.rmtree(root, ignore_errors=True)


def _save_consoles(cluster: LabCluster) -> None:
    for log in sorted((cluster.build_dir / "lab").glob("*.console.log")):
        save_artifact(f"e2e-lab-{log.name}", log.read_text(errors="replace"))


def _sinfo(cluster: LabCluster) -> dict[str, str]:
    rc, out, err = cluster.run("ctl001", "sinfo -h -N -o '%N %t'")
    assert rc == 0, err
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def _wait(predicate: object, timeout: float, what: str, step: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _domain_state(host: str) -> str:
    done = subprocess.run([*VIRSH, "domstate", f"clusterctl-lab-{host}"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


@pytest.mark.order(200)
def test_each_compute_node_booted_the_image_with_its_generated_host_key(lab_cluster: LabCluster) -> None:
    """boot=clusterctl on the kernel command line; / is the tmpfs (stateless) or the virtual disk
    (installed); the node's host key is the one clusterctl generated, and SSH with strict host key
    checking against it is how this test got in at all."""
    generated = ensure_host_keys(lab_cluster.state_dir, COMPUTE)
    for host, fstype, source in (("disk001", "ext4", "/dev/vda2"), ("ram001", "tmpfs", "tmpfs")):
        look = "cat /proc/cmdline; findmnt -n -o FSTYPE,SOURCE /; cat /etc/ssh/ssh_host_ed25519_key.pub"
        rc, out, err = lab_cluster.run(host, look)
        assert rc == 0, f"{host}: {err}"
        cmdline, mount, key = out.splitlines()[:3]
        assert "boot=clusterctl" in cmdline.split(), cmdline
        assert mount.split() == [fstype, source], f"{host}: / is {mount}"
        assert key.split()[:2] == generated[host].public.split()[:2], host
    assert "console=ttyS0,115200n8" in lab_cluster.run("disk001", "cat /proc/cmdline")[1]


@pytest.mark.order(200)
def test_the_compute_nodes_configured_themselves_from_their_bundle(lab_cluster: LabCluster) -> None:
    """The control machine pushed the controller only; each compute machine's agent, put there over
    SSH once the machine presented its generated host key, applied the bundle `up` published for it."""
    log = (lab_cluster.build_dir / "logs" / "ansible.log").read_text()
    assert re.search(r"^(ok|changed): \[ctl001\]", log, re.MULTILINE), "the controller was pushed"
    stages = (lab_cluster.build_dir / "ansible" / "inventory" / "images.yml").read_text()
    assert "ctl001:" in stages, stages  # the controller too ran the configure stage only
    published = StateDir(lab_cluster.state_root, CLUSTER).read()["pull"]["bundles"]
    for host in (*COMPUTE, "ram002"):
        assert not re.search(rf"\[{host}\]", log), f"a configure-stage task ran on {host} from the control machine"
        rc, journal, err = lab_cluster.run(host, "journalctl -u clusterctl-agent --no-pager -o cat")
        assert rc == 0, err
        assert f"applied bundle {published[host]}" in journal, journal[-2000:]
        # Booted from its profile's locked archive (the initramfs' record says which): configure only.
        assert "(stage configure)" in journal, journal[-2000:]
        assert "(stage all)" not in journal, journal[-2000:]
        rc, mode, err = lab_cluster.run(host, "stat -c %a /etc/clusterctl/agent/munge.key")
        assert (rc, mode.strip()) == (0, "400"), err


@pytest.mark.order(201)
def test_the_nodes_are_idle_in_slurm_and_a_job_runs_on_both(lab_cluster: LabCluster) -> None:
    states = _sinfo(lab_cluster)
    assert {h: states.get(h) for h in COMPUTE} == {"disk001": "idle", "ram001": "idle"}, states
    rc, out, err = lab_cluster.run("ctl001", "srun -N2 -p batch hostname", timeout=300)
    assert rc == 0, err
    assert sorted(out.split()) == COMPUTE
    _save_figures(lab_cluster)


@pytest.mark.order(201)
def test_each_compute_node_finds_the_others_by_name_through_the_controller(lab_cluster: LabCluster) -> None:
    """Their /etc/hosts lists only ctl001; ctl001's dnsmasq answers the rest, short and full names."""
    for host, other in (("disk001", "ram001"), ("ram001", "disk001")):
        rc, hosts, err = lab_cluster.run(host, "cat /etc/hosts")
        assert rc == 0, err
        assert other not in hosts
        expected = next(n.address for n in lab_cluster.plan.nodes if n.hostname == other)
        for name in (other, f"{other}.lab.internal"):
            rc, out, err = lab_cluster.run(host, f"getent hosts -- {name}")
            assert rc == 0, (host, name, err)
            assert out.split()[0] == expected, (host, name, out)


def _save_figures(lab_cluster: LabCluster) -> None:
    """Per machine: from the BMC's power-on to its host key answering, and to slurmd registering (README)."""
    resources = json.loads((lab_cluster.state_dir / "lab-stack.json").read_text())["resources"]
    lines = [f"lab up (image build, lab, clusterctl up): {lab_cluster.up_seconds:.0f} s"]
    for resource in sorted(resources.values(), key=lambda r: r["outputs"]["hostname"]):
        host, created = resource["outputs"]["hostname"], resource.get("created") or {}
        rc, out, _ = lab_cluster.run("ctl001", f"scontrol show node -o -- {shlex.quote(host)}")
        started = re.search(r"SlurmdStartTime=(\S+)", out) if rc == 0 else None
        registered = (
            time.mktime(time.strptime(started.group(1), "%Y-%m-%dT%H:%M:%S"))
            if started and started.group(1) not in ("None", "Unknown")
            else None
        )
        answered = created["answered"] - created["began"] if created else None
        assert answered is None or answered > 0, (host, created)
        slurm = f"{registered - created['began']:.0f} s" if registered and created else "-"
        lines.append(f"{host}: power-on to host key {answered or 0:.0f} s, to slurmd registered {slurm}")
    save_artifact("e2e-lab-figures.txt", "\n".join(lines) + "\n")


@pytest.mark.order(202)
def test_a_driver_pin_change_reboots_each_node_for_real_and_resumes_it(lab_cluster: LabCluster, tmp_path: Path) -> None:
    """The roll reboots through Slurm: ram001 PXE-boots the image again (and is configured again),
    disk001 boots its disk; both come back healthy and resumed, one at a time."""
    boots = {h: lab_cluster.console(h).count("Linux version") for h in COMPUTE}
    text = lab_cluster.spec.read_text()
    assert 'nvidia_driver: "570.133.20"' in text
    lab_cluster.spec.write_text(text.replace('nvidia_driver: "570.133.20"', 'nvidia_driver: "570.148.08"'))
    rolled = lab_cluster.up()
    save_artifact("e2e-lab-roll.log", rolled.stdout + rolled.stderr)
    assert rolled.returncode == 0, rolled.stdout[-4000:] + rolled.stderr[-3000:]
    output = rolled.stdout + rolled.stderr
    assert output.index("upgrade batch 1") < output.index("upgrade batch 2")
    assert "ram001 rebooted from RAM without their configuration" in output
    for host in COMPUTE:
        console = lab_cluster.console(host)
        assert console.count("Linux version") > boots[host], f"{host} did not boot again"
    assert "clusterctl: booting stateless" in lab_cluster.console("ram001").rsplit("Linux version", 1)[-1]
    assert "clusterctl: booting" not in lab_cluster.console("disk001").rsplit("Linux version", 1)[-1]
    # disk001 booted its own GRUB, with the serial console it was installed with.
    rc, cmdline, err = lab_cluster.run("disk001", "cat /proc/cmdline")
    assert rc == 0, err
    assert "boot=clusterctl" not in cmdline.split()
    assert "console=ttyS0,115200n8" in cmdline.split()
    assert {h: _sinfo(lab_cluster).get(h) for h in COMPUTE} == {"disk001": "idle", "ram001": "idle"}


@pytest.mark.order(203)
def test_the_spare_takes_a_failed_nodes_place(lab_cluster: LabCluster) -> None:
    options = ("--out", str(lab_cluster.build_dir), "--yes", "--lock", str(lab_cluster.lock))
    rc, _, err = lab_cluster.run("ctl001", "scontrol update nodename=ram001 state=drain reason='e2e: ECC errors'")
    assert rc == 0, err
    replaced = lab_cluster.cli("node", "replace", str(lab_cluster.spec), "ram001", *options)
    save_artifact("e2e-lab-replace.log", replaced.stdout + replaced.stderr)
    assert replaced.returncode == 0, replaced.stdout[-3000:] + replaced.stderr[-3000:]
    assert "ram002 takes ram001's place" in replaced.stdout + replaced.stderr
    rc, out, err = lab_cluster.run("ctl001", "srun -N2 -p batch hostname", timeout=300)
    assert rc == 0, err
    assert sorted(out.split()) == ["disk001", "ram002"]
    returned = lab_cluster.cli("node", "return", str(lab_cluster.spec), "ram001", *options)
    assert returned.returncode == 0, returned.stdout[-3000:] + returned.stderr[-3000:]


# --- the day-0 failure paths, on a machine added for them -----------------------------------------


@pytest.fixture
def extra(lab_cluster: LabCluster) -> Iterator[Path]:
    """The spec with one more machine, extra001 (UEFI, stateless), its domain made; removed afterwards."""
    folder = lab_cluster.root / "extra"
    folder.mkdir(exist_ok=True)
    text = lab_cluster.spec.read_text()
    # After the last group: addresses follow the groups' order, and no machine of the cluster may move
    # (up refuses a spec that moves one: the stack would make it again).
    ram = "  - {group: ram, role: compute, hardware: vm, count: 2, spares: 1}\n"
    assert ram in text
    text = text.replace(ram, ram + EXTRA_GROUP)
    text = text.replace("groups: {ram: stateless}", "groups: {ram: stateless, extra: stateless}")
    text = text.replace("groups: [disk, ram]", "groups: [disk, ram, extra]")
    # Short for the failures that end only when the node never answers (still long enough to boot).
    text = text.replace("ready_timeout: 20m", "ready_timeout: 8m")
    machines = MACHINES.read_text() + EXTRA_ROW.format(mac=EXTRA_MAC)
    spec = _copy_spec(folder, text, machines)
    (folder / "baremetal-lab-bmc-ca.pem").write_bytes((lab_cluster.root / "baremetal-lab-bmc-ca.pem").read_bytes())
    made = lab_cluster.lab("up", "--no-cluster", spec=spec, timeout=1800)
    assert made.returncode == 0, made.stdout + made.stderr
    yield spec
    subprocess.run([*VIRSH, "destroy", "clusterctl-lab-extra001"], capture_output=True, check=False)


def _unchanged(lab_cluster: LabCluster, before: dict[str, str]) -> None:
    """The cluster's machines kept running their boot, the stack kept its machines, Slurm its nodes."""
    for host, boot in before.items():
        rc, out, _ = lab_cluster.run(host, "cat /proc/sys/kernel/random/boot_id")
        assert (rc, out.strip()) == (0, boot), f"{host} was touched"
    nodes = json.loads((lab_cluster.state_dir / "lab-stack.json").read_text())["resources"]
    assert sorted(r["outputs"]["hostname"] for r in nodes.values()) == ["ctl001", "disk001", "ram001", "ram002"]
    assert "extra001" not in _sinfo(lab_cluster)


def _boots(lab_cluster: LabCluster) -> dict[str, str]:
    return {h: lab_cluster.run(h, "cat /proc/sys/kernel/random/boot_id")[1].strip() for h in ("ctl001", *COMPUTE)}


def _failed_up(lab_cluster: LabCluster, spec: Path, name: str, env: dict[str, str] | None = None) -> str:
    started = time.monotonic()
    result = lab_cluster.up(spec, env=env)
    output = result.stdout + result.stderr
    save_artifact(f"e2e-lab-failure-{name}.log", output + f"\n(up took {time.monotonic() - started:.0f} s)\n")
    assert result.returncode == 1, output[-4000:]
    assert "Traceback" not in output
    return output


@pytest.mark.order(210)
def test_an_archive_with_another_checksum_is_refused_by_the_node(lab_cluster: LabCluster, extra: Path) -> None:
    """The archive on the PXE server changed under the lock: the node refuses it and says so on its
    console; up names the machine and shows that line; it is powered off again, nothing else moved."""
    before = _boots(lab_cluster)
    archive = next((lab_cluster.build_dir / "pxe" / "http" / "images").glob("*.tar.zst"))
    saved = archive.with_name(archive.name + ".e2e-saved")
    archive.rename(saved)
    try:
        archive.write_bytes(saved.read_bytes()[:-4096] + b"\0" * 4096)
        output = _failed_up(lab_cluster, extra, "checksum")
    finally:
        archive.unlink()
        saved.rename(archive)
    assert re.search(r"\n  extra001: 10\.231\.0\.14:22 did not answer within \d+ s", output), output[-3000:]
    assert "(powered off again)" in output
    assert "last lines of extra001's console" in output
    assert re.search(r"clusterctl: refusing to boot http://\S+: its sha256 is [0-9a-f]{64}, not the locked", output)
    assert _domain_state("extra001") == "shut off"
    _unchanged(lab_cluster, before)


needs_all = pytest.mark.skipif(
    os.environ.get("CLUSTERCTL_LAB_ALL_FAILURES") != "1",
    reason="set CLUSTERCTL_LAB_ALL_FAILURES=1: each waits out the ready timeout or boots a machine",
)


@pytest.mark.order(211)
def test_a_bmc_that_refuses_the_credentials_is_named(lab_cluster: LabCluster, extra: Path) -> None:
    before = _boots(lab_cluster)
    wrong = {"CLUSTERCTL_BMC_USERNAME": "lab-admin", "CLUSTERCTL_BMC_PASSWORD": "not-the-password"}
    output = _failed_up(lab_cluster, extra, "credentials", env=wrong)
    refused = r"\n  extra001: BMC https://10\.231\.0\.1:18443/\S+: rejected user `lab-admin` \(HTTP 401\)"
    assert re.search(refused, output), output[-3000:]
    assert "not-the-password" not in output
    assert _domain_state("extra001") == "shut off"
    _unchanged(lab_cluster, before)


@needs_all
@pytest.mark.order(212)
def test_a_machine_whose_mac_is_wrong_never_pxe_boots(lab_cluster: LabCluster, extra: Path) -> None:
    before = _boots(lab_cluster)
    machines = extra.parent / MACHINES.name
    machines.write_text(machines.read_text().replace(EXTRA_MAC, "52:54:00:c7:10:55"))
    output = _failed_up(lab_cluster, extra, "wrong-mac")
    assert re.search(r"\n  extra001: 10\.231\.0\.14:22 did not answer within \d+ s after the PXE boot", output)
    assert "get its lease from dnsmasq" in output
    assert "last lines of extra001's console" in output
    # The firmware's own words (OVMF: no DHCP offer), not the earlier boot's refused archive.
    assert "  PXE-E18: Server response timeout." in output, output[-3000:]
    assert "refusing to boot" not in output
    assert _domain_state("extra001") == "shut off"
    _unchanged(lab_cluster, before)


@needs_all
@pytest.mark.order(213)
def test_another_machine_answering_with_another_host_key_is_refused(lab_cluster: LabCluster, extra: Path) -> None:
    """extra001's address answers first from another machine (ram002 given it too): its host key is not
    the one clusterctl generated for extra001, so nothing is trusted and extra001 is powered off again."""
    before = _boots(lab_cluster)
    rc, _, err = lab_cluster.run("ram002", "ip addr add 10.231.0.14/24 dev enp1s0")
    assert rc == 0, err
    try:
        output = _failed_up(lab_cluster, extra, "host-key")
    finally:
        lab_cluster.run("ram002", "ip addr del 10.231.0.14/24 dev enp1s0")
    presents = r"\n  extra001: 10\.231\.0\.14:22 presents the SSH host key SHA256:\S+, not the pinned SHA256:"
    assert re.search(presents, output), output[-3000:]
    assert "nothing was trusted (powered off again)" in output
    assert _domain_state("extra001") == "shut off"
    _unchanged(lab_cluster, before)


@pytest.mark.order(290)
def test_down_powers_every_machine_off(lab_cluster: LabCluster) -> None:
    down = lab_cluster.cli("down", str(lab_cluster.spec), "--yes", "--force", "--out", str(lab_cluster.build_dir))
    save_artifact("e2e-lab-clusterctl-down.log", down.stdout + down.stderr)
    assert down.returncode == 0, down.stdout + down.stderr
    for host in ("ctl001", "disk001", "ram001", "ram002"):
        assert _domain_state(host) == "shut off", host
