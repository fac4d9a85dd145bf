"""examples/aws-p5.yaml against AWS's own EFA references: one test per piece they need.

The references (pinned commits; read with git, not copied here):
- aws-samples/awsome-distributed-training @ 7217859 (awsome below):
  1.architectures/efa-cheatsheet.md, micro-benchmarks/nccl-tests/{nccl-tests.Dockerfile,
  slurm/nccl-tests-ami.sbatch, slurm/nccl-tests-container.sbatch},
  2.ami_and_containers/1.amazon_machine_image/roles/{aws_efa,nvidia_enroot_pyxis}
- aws/aws-parallelcluster-cookbook @ f75d84c (ParallelCluster below):
  cookbooks/aws-parallelcluster-environment/resources/efa/partial/{_common,_disable_ptrace_debian}.rb,
  resources/lustre/partial/{_install_lustre_debian,_mount_unmount}.rb, test/controls/efa_spec.rb,
  cookbooks/aws-parallelcluster-platform/templates/enroot/enroot.conf.erb
- aws/aws-ofi-nccl @ 2daf7d3 (doc/efa-env-var.md, src/platform-aws.cpp) and its release tags
  (src/Makefile.am, contrib/debian-template/rules)

Both what the render writes (nccl.conf, the job environment, the mount units, the inventory) and
what the roles do (roles/efa, roles/container_runtime, roles/storage_clients, site.yml) are
checked; the TaskProlog is run, not only read. Before the EFA work every test here failed: no efa
role, no job environment (no plugin directory on LD_LIBRARY_PATH), ENROOT_RESTRICT_DEV on, and the
FSx units mounted `:/ckpt` with lnet.service but no address.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.enroot_testkit import container_environment
from tests.shipped_slurm import slurm_tool
from tests.specs import example_data, write_spec

from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from clusterctl.render.tree import render_files

ROLES = REPO_ROOT / "roles"
VENDOR = Path(__file__).resolve().parent / "vendor"
MULTIARCH = "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"


@pytest.fixture(scope="module")
def plan():  # type: ignore[no-untyped-def]
    return load_and_validate(EXAMPLES / "aws-p5.yaml").plan


@pytest.fixture(scope="module")
def files(plan) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f.path: f.text for f in render_files(plan)}


@pytest.fixture(scope="module")
def job_env(files: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the rendered TaskProlog exports into a task that set nothing (the last line per name wins)."""
    script = tmp_path_factory.mktemp("prolog") / "nccl-p5.sh"
    script.write_text(files["slurm/task_prolog.d/nccl-p5.sh"])
    out = subprocess.run(
        ["bash", str(script)], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True
    ).stdout
    env: dict[str, str] = {}
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value
    return env


def _yaml(path: Path) -> object:
    return yaml.safe_load(path.read_text())


def _tasks(path: Path, module: str) -> list[dict]:
    """The tasks of a tasks file that call ``module``, blocks included."""
    found: list[dict] = []

    def walk(tasks: list[dict]) -> None:
        for task in tasks:
            if module in task:
                found.append(task[module])
            walk(task.get("block", []))

    walk(_yaml(path))  # type: ignore[arg-type]
    return found


def _default(role: str, name: str, **variables: object) -> str:
    """A role default evaluated as Ansible would with ``variables`` (plain Jinja is enough here)."""
    value = _yaml(ROLES / role / "defaults" / "main.yml")[name]  # type: ignore[index]
    return jinja2.Environment().from_string(str(value)).render(**variables).strip()


def _nccl_conf(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


# --- NCCL on EFA ------------------------------------------------------------------------------


def test_bootstrap_interface_is_the_ena_one(files: dict[str, str]) -> None:
    # awsome 1.architectures/efa-cheatsheet.md@7217859: "Set this to `en` to cover both p5.48xlarge and p4d".
    assert _nccl_conf(files["nccl/p5.conf"])["NCCL_SOCKET_IFNAME"] == "en"


def test_jobs_find_libfabric_open_mpi_and_the_plugin(job_env: dict[str, str]) -> None:
    # awsome micro-benchmarks/nccl-tests/slurm/nccl-tests-ami.sbatch@7217859:
    #   -x LD_LIBRARY_PATH=...:/opt/amazon/efa/lib:/opt/amazon/openmpi/lib:/opt/amazon/ofi-nccl/lib:...
    # and nccl-tests.Dockerfile@7217859 (.../ofi-nccl/lib/x86_64-linux-gnu, the .deb's directory before
    # aws-ofi-nccl 1.17.0: aws/aws-ofi-nccl contrib/debian-template/rules@v1.16.3, MULTIARCH_DIR).
    assert job_env["LD_LIBRARY_PATH"].split(":") == ["/opt/amazon/efa/lib", "/opt/amazon/openmpi/lib", MULTIARCH]


def test_jobs_name_the_plugins_tuner(job_env: dict[str, str]) -> None:
    # awsome micro-benchmarks/nccl-tests/slurm/nccl-tests-container.sbatch@7217859:
    #   export NCCL_TUNER_PLUGIN=/opt/amazon/ofi-nccl/lib/$(uname -m)-linux-gnu/libnccl-ofi-tuner.so
    # (aws-ofi-nccl 1.14.2 ships the tuner as its own library: src/Makefile.am@v1.14.2 libnccl-ofi-tuner.la).
    assert job_env["NCCL_TUNER_PLUGIN"] == f"{MULTIARCH}/libnccl-ofi-tuner.so"


def test_no_fi_variables_the_current_plugin_sets_itself(files: dict[str, str], job_env: dict[str, str]) -> None:
    # aws/aws-ofi-nccl doc/efa-env-var.md@2daf7d3: FI_EFA_USE_DEVICE_RDMA "do not set" for libfabric >= 1.18
    # and plugin >= 1.7.0; FI_PROVIDER/NCCL_PROTO only for plugin <= 1.5.0; FI_EFA_FORK_SAFE not needed;
    # RDMAV_FORK_SAFE "Do not use".
    emitted = set(job_env) | set(_nccl_conf(files["nccl/p5.conf"]))
    assert not emitted & {"FI_PROVIDER", "NCCL_PROTO", "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE", "RDMAV_FORK_SAFE"}


def test_jobs_get_the_sbatch_buffers_until_the_plugin_sets_them(files: dict[str, str], job_env: dict[str, str]) -> None:
    # awsome micro-benchmarks/nccl-tests/slurm/nccl-tests-container.sbatch@7217859 lines 40 and 43 (and
    # nccl-tests-ami.sbatch lines 40-41): NCCL_BUFFSIZE=8388608, NCCL_P2P_NET_CHUNKSIZE=524288 on p5.
    # aws/aws-ofi-nccl sets both for p5/p5e itself only from v1.16.0 (src/platform-aws.cpp@v1.16.0 lines
    # 146-147); src/platform-aws.c@v1.14.2, the example's plugin, does not: the job must. Same values.
    sbatch = (VENDOR / "nccl-tests-container.sbatch").read_text().splitlines()
    assert (sbatch[39], sbatch[42]) == ("export NCCL_BUFFSIZE=8388608", "export NCCL_P2P_NET_CHUNKSIZE=524288")
    assert "NCCL_BUFFSIZE" not in (VENDOR / "platform-aws.c@v1.14.2").read_text()
    v116 = (VENDOR / "platform-aws.cpp@v1.16.0").read_text().splitlines()
    assert (v116[145].strip(), v116[146].strip()) == (
        '{ "NCCL_BUFFSIZE", "8388608" },',
        '{ "NCCL_P2P_NET_CHUNKSIZE", "524288" },',
    )
    assert job_env["NCCL_BUFFSIZE"] == "8388608"
    assert job_env["NCCL_P2P_NET_CHUNKSIZE"] == "524288"
    assert "NCCL_BUFFSIZE" not in _nccl_conf(files["nccl/p5.conf"])  # per job, not system description


def test_a_plugin_that_sets_them_itself_gets_neither(tmp_path: Path) -> None:
    # aws-ofi-nccl 1.16.3 (EFA installer 1.43.2) sets both itself (platform-aws.cpp from v1.16.0).
    data = example_data("aws-burst.yaml")
    provider = next(g for g in data["nodes"] if g.get("burst"))["burst"]["provider"]
    provider.update(aws_ofi_nccl="1.16.3", efa_installer="1.43.2", efa_installer_checksum="sha256:" + "1" * 64)
    shutil.copy(EXAMPLES / "aws-burst-machines.csv", tmp_path)
    plan = load_and_validate(write_spec(tmp_path, data)).plan
    burst = {f.path: f.text for f in render_files(plan)}
    assert "NCCL_BUFFSIZE" not in burst["nccl/p5.env"]
    assert "NCCL_P2P_NET_CHUNKSIZE" not in burst["nccl/p5.env"]


# --- The EFA installer and aws-ofi-nccl (roles/efa) -------------------------------------------------


def test_installer_comes_from_aws_with_a_checksum() -> None:
    # ParallelCluster resources/efa/partial/_common.rb@f75d84c: remote_file
    # https://efa-installer.amazonaws.com/aws-efa-installer-<ver>.tar.gz with `checksum`.
    url = _default("efa", "efa_installer_url", efa_installer_version="1.41.0")
    assert url == "https://efa-installer.amazonaws.com/aws-efa-installer-1.41.0.tar.gz"
    (download,) = _tasks(ROLES / "efa" / "tasks" / "install.yml", "ansible.builtin.get_url")
    assert download["checksum"] == "{{ efa_installer_checksum }}"


def test_the_example_pins_parallelclusters_checksum(plan) -> None:  # type: ignore[no-untyped-def]
    # aws/aws-parallelcluster-cookbook PR #2953, attributes/environment.rb: installer 1.41.0 sha256 3506354c...
    gv = group_vars(plan)
    assert gv["clusterctl_versions"]["efa_installer"] == "1.41.0"
    assert gv["clusterctl_efa"]["installer_checksum"] == (
        "sha256:3506354cdfbe31ff552fe75f5d0d9bb7efd29cf79bd99457347d29c751c38f9f"
    )


def test_installer_runs_with_parallelclusters_flags() -> None:
    # ParallelCluster _common.rb@f75d84c: installer_options = "-y" (plus -k only where the kmod is unsupported);
    # `cd aws-efa-installer && ./efa_installer.sh #{installer_options}`.
    assert _yaml(ROLES / "efa" / "defaults" / "main.yml")["efa_installer_flags"] == ["-y"]  # type: ignore[index]
    text = (ROLES / "efa" / "tasks" / "install.yml").read_text()
    assert "argv: \"{{ ['./efa_installer.sh'] + efa_installer_flags }}\"" in text
    assert (
        '__efa_installer_dir: "{{ efa_work_dir }}/{{ efa_installer_version }}/aws-efa-installer"'
        in (ROLES / "efa" / "vars" / "main.yml").read_text()
    )


def test_install_is_keyed_on_the_installers_record() -> None:
    # ParallelCluster test/controls/efa_spec.rb@f75d84c: /opt/amazon/efa_installed_packages must match
    # "EFA installer version: <version>" (the record efa_installer.sh write_package_file writes).
    variables = (ROLES / "efa" / "vars" / "main.yml").read_text()
    assert "__efa_installed_packages: /opt/amazon/efa_installed_packages" in variables
    tasks = (ROLES / "efa" / "tasks" / "install.yml").read_text()
    assert "'(?m)^# EFA installer version: (\\S+)'" in tasks
    assert "when: __efa_installed_release != efa_installer_version" in tasks


def test_the_plugin_is_the_one_the_installer_ships(plan) -> None:  # type: ignore[no-untyped-def]
    # EFA release notes (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-changelog.html): 1.40.0 "Upgrade to
    # libnccl-ofi 1.14.2", 1.41.0 only rdma-core: installer 1.41.0 ships aws-ofi-nccl 1.14.2.
    stack = plan.nccl[0].efa
    assert (stack.aws_ofi_nccl, stack.ofi_nccl_from_installer) == ("1.14.2", True)
    # Its library names (aws/aws-ofi-nccl src/Makefile.am@v1.14.2: libnccl-net.la, libnccl-ofi-tuner.la).
    assert group_vars(plan)["clusterctl_efa"]["ofi_nccl_files"] == ["libnccl-net.so", "libnccl-ofi-tuner.so"]


def test_efa_nodes_get_the_role_after_cuda() -> None:
    # Without the installer and plugin NCCL falls back to TCP sockets (targets.md §1); the plugin built from
    # source needs CUDA (awsome roles/aws_efa_ofi: --with-cuda=/usr/local/cuda).
    site = (ROLES / "site.yml").read_text()
    assert (
        "['rdma', 'nvidia_driver', 'cuda']\n           + (['efa'] if __site_fabric == 'efa' else []) + ['nccl'," in site
    )


def test_ptrace_is_allowed_on_efa_compute_nodes() -> None:
    # ParallelCluster resources/efa/partial/_disable_ptrace_debian.rb@f75d84c: sysctl kernel.yama.ptrace_scope 0
    # on compute nodes with EFA.
    (task,) = _tasks(ROLES / "efa" / "tasks" / "configure.yml", "clusterctl.node.sync_files")
    (entry,) = [f for f in task["files"] if f.get("state") != "directory"]
    assert entry["dest"] == "{{ __efa_sysctl_file }}"
    assert "sysctl.conf.j2" in entry["content"]
    template = (ROLES / "efa" / "templates" / "sysctl.conf.j2").read_text()
    assert "kernel.yama.ptrace_scope = {{ efa_ptrace_scope }}" in template
    assert _yaml(ROLES / "efa" / "defaults" / "main.yml")["efa_ptrace_scope"] == 0  # type: ignore[index]


# --- Containers ------------------------------------------------------------------------------------


def test_containers_keep_the_hosts_dev_on_efa() -> None:
    # ParallelCluster cookbooks/aws-parallelcluster-platform/templates/enroot/enroot.conf.erb@f75d84c and awsome
    # roles/nvidia_enroot_pyxis/templates/enroot.conf@7217859: "ENROOT_RESTRICT_DEV no" (enroot's 99-mellanox.sh
    # only binds mlx uverbs devices; without /dev/infiniband fi_info -p efa fails, aws/aws-ofi-nccl#1020).
    defaults = _yaml(ROLES / "container_runtime" / "defaults" / "main.yml")  # type: ignore[assignment]
    defaults = defaults["container_runtime_enroot_config_defaults"]  # type: ignore[index]
    expr = jinja2.Environment().from_string(defaults["ENROOT_RESTRICT_DEV"])
    assert expr.render(clusterctl_fabric_kind="efa") == "n"
    assert expr.render(clusterctl_fabric_kind="infiniband") == "y"


# --- FSx for Lustre ---------------------------------------------------------------------------------


def test_fsx_units_mount_the_stacks_file_system(files: dict[str, str]) -> None:
    # ParallelCluster resources/lustre/partial/_mount_unmount.rb@f75d84c: device "<dns_name>@tcp:/<mount_name>"
    # (the stack outputs it; roles/storage_clients writes it in), options defaults _netdev flock user_xattr noatime.
    unit = files["storage/units/p5/fsx-datasets.mount"]
    assert "\nWhat=clusterctl-managed-lustre:datasets\n" in unit
    assert "\nOptions=_netdev,flock,user_xattr,noatime\n" in unit
    assert "Requires=lnet.service" not in unit


def test_fsx_client_comes_from_the_fsx_repository() -> None:
    # ParallelCluster resources/lustre/partial/_install_lustre_debian.rb@f75d84c: apt repository
    # https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu (key fsx-ubuntu-public-key.asc), packages
    # lustre-client-modules-<kernel>, lustre-client-modules-aws, initramfs-tools.
    aws = _yaml(ROLES / "storage_clients" / "vars" / "main.yml")["__storage_clients_cloud_lustre"]["aws"]  # type: ignore[index]
    assert aws["repo"]["uris"] == "https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu"
    assert aws["repo"]["signed_by"].endswith("/fsx-ubuntu-public-key.asc")
    assert aws["packages"][1:] == ["lustre-client-modules-aws", "initramfs-tools"]
    assert aws["packages"][0].startswith("lustre-client-modules-{{ ansible_facts['kernel']")


# --- The health check: every EFA device of the instance type ----------------------------------------


def _efa_sysfs(root: Path, count: int) -> Path:
    """A /sys/bus/pci/devices with ``count`` EFA functions (Amazon 0x1d0f:0xefa1) and an ENA NIC."""
    pci = root / "pci"
    for i in range(count):
        dev = pci / f"0000:{0x40 + i:02x}:00.0"
        dev.mkdir(parents=True)
        (dev / "vendor").write_text("0x1d0f\n")
        (dev / "device").write_text("0xefa1\n")
    ena = pci / "0000:00:05.0"
    ena.mkdir(parents=True)
    (ena / "vendor").write_text("0x1d0f\n")
    (ena / "device").write_text("0xec20\n")
    return pci


@pytest.mark.parametrize(("found", "drained"), [(32, False), (31, True)])
def test_the_health_check_counts_the_efa_devices(
    files: dict[str, str], tmp_path: Path, found: int, drained: bool
) -> None:
    # awsome 4.validation_and_observability/2.gpu-cluster-healthcheck/checks/2-efa-enumeration.sh@7217859
    # line 24 counts the EFA PCI functions (`lspci | grep -ci EFA`) against instance-profiles.conf line 15
    # (p5.48xlarge|8|32|true|efa) and fails the node on a mismatch (lines 46-49).
    assert "lspci | grep -ci" in (VENDOR / "2-efa-enumeration.sh").read_text().splitlines()[23]
    assert (VENDOR / "instance-profiles.conf").read_text().splitlines()[14] == "p5.48xlarge|8|32|true|efa"
    assert "efa gpu001 32" in files["health/health.conf"].splitlines()
    script = tmp_path / "clusterctl-healthcheck"
    script.write_text(files["health/clusterctl-healthcheck"])
    conf = tmp_path / "health.conf"
    conf.write_text(files["health/health.conf"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scontrol-calls"
    stubs = {
        "scontrol": f'echo "$*" >> {calls}\n',
        "nvidia-smi": "for i in 0 1 2 3 4 5 6 7; do echo $i; done\n",
        "logger": "exit 0\n",
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    driver = tmp_path / "version"
    driver.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20\n")
    mounts = tmp_path / "mounts"
    mounts.write_text("".join(f"fsx {m} lustre rw 0 0\n" for m in ("/fsx/datasets", "/fsx/ckpt", "/home")))
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CLUSTERCTL_HEALTH_CONF": str(conf),
        "CLUSTERCTL_HEALTH_HOST": "gpu001",
        "CLUSTERCTL_HEALTH_SYSFS_PCI": str(_efa_sysfs(tmp_path, found)),
        "CLUSTERCTL_HEALTH_DRIVER": str(driver),
        "CLUSTERCTL_HEALTH_MOUNTS": str(mounts),
        # clusterctl's Slurm module as shipped, driving the scontrol stub.
        "CLUSTERCTL_SLURM_TOOL": str(slurm_tool(tmp_path)),
    }
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False)
    drains = [c for c in (calls.read_text().splitlines() if calls.exists() else []) if "state=drain" in c]
    if drained:
        assert done.returncode == 1
        (drain,) = drains
        assert "reason=clusterctl-health: efa: 31 of 32 EFA devices" in drain
    else:
        assert done.returncode == 0, done.stderr
        assert drains == []


# --- What every container gets (pyxis/enroot) -------------------------------------------------------


def test_containers_get_libfabric_and_the_plugin_from_the_node(files: dict[str, str]) -> None:
    # awsome nccl-tests-container.sbatch@7217859 line 48 names the plugin's tuner at
    # /opt/amazon/ofi-nccl/lib/$(uname -m)-linux-gnu inside the container (an image built with the EFA
    # installer); a stock image has neither it nor libfabric, so the node's are mounted at those paths.
    assert (
        f"export NCCL_TUNER_PLUGIN={MULTIARCH.replace('x86_64', '$(uname -m)')}/libnccl-ofi-tuner.so"
        in ((VENDOR / "nccl-tests-container.sbatch").read_text().splitlines()[47])
    )
    fstab = [line.split() for line in files["enroot/mounts.d/p5.fstab"].splitlines() if not line.startswith("#")]
    mounted = {fields[0]: fields[3] for fields in fstab}
    assert mounted["/opt/amazon/efa"].startswith("x-create=dir,bind,ro")
    assert mounted[MULTIARCH].startswith("x-create=dir,bind,ro")
    assert "/etc/nccl.conf" in mounted


def test_a_stock_image_gets_the_plugin_first_and_the_jobs_settings_stay(files: dict[str, str], tmp_path: Path) -> None:
    # The TaskProlog's environment inside the container (awsome's sbatch exports, the plugin first on
    # LD_LIBRARY_PATH), through the rendered enroot hook and enroot's own environment code; what the
    # job or the image sets is kept (NGC images set LD_LIBRARY_PATH).
    env = container_environment(
        tmp_path,
        hook=files["enroot/hooks.d/50-clusterctl-nccl.sh"],
        task_prolog=files["slurm/task_prolog.d/nccl-p5.sh"],
        image_environment="LD_LIBRARY_PATH=/usr/local/cuda/lib64\nNCCL_VERSION=2.22.3\n",
        job_env={"SLURM_JOB_NUM_NODES": "2", "NCCL_P2P_NET_CHUNKSIZE": "131072"},
    )
    assert env["LD_LIBRARY_PATH"].split(":") == [
        "/opt/amazon/efa/lib",
        "/opt/amazon/openmpi/lib",
        MULTIARCH,
        "/usr/local/cuda/lib64",
    ]
    assert env["NCCL_TUNER_PLUGIN"] == f"{MULTIARCH}/libnccl-ofi-tuner.so"
    assert env["NCCL_BUFFSIZE"] == "8388608"
    assert env["NCCL_P2P_NET_CHUNKSIZE"] == "131072"  # the job's own


# --- GDRCopy (ParallelCluster's gdrcopy resource, awsome's nvidia_gdrcopy role) --------------------


def test_gdrcopy_is_parallelclusters_release_with_its_checksum(files: dict[str, str]) -> None:
    # aws/aws-parallelcluster-cookbook resources/gdrcopy/partial/_gdrcopy_common.rb@f75d84c lines 15-21.
    common = (VENDOR / "_gdrcopy_common.rb").read_text().splitlines()
    version = common[15].strip().strip("'")
    checksum = common[19].strip().strip("'")
    assert (common[14], common[18]) == ("def gdrcopy_version", "def gdrcopy_checksum")
    group = yaml.safe_load(files["ansible/inventory/group_vars/all.yml"].replace("!unsafe ", ""))
    assert group["clusterctl_versions"]["gdrcopy"] == version == "2.4"
    assert group["clusterctl_efa"]["gdrcopy_checksum"] == f"sha256:{checksum}"
    assert "{{ efa_gdrcopy_checksum }}" in str(
        _tasks(ROLES / "efa" / "tasks" / "gdrcopy.yml", "ansible.builtin.get_url")
    )


def test_gdrcopy_is_built_and_installed_as_parallelcluster_does() -> None:
    # gdrcopy_ubuntu20+.rb@f75d84c line 22 (build dependencies), lines 31-35 (`CUDA=/usr/local/cuda
    # ./build-deb-packages.sh`, then gdrdrv-dkms, libgdrapi, gdrcopy-tests, gdrcopy); awsome's
    # roles/nvidia_gdrcopy/tasks/main.yml@7217859 lines 26-30 build the same sources with CUDA=/usr/local/cuda.
    ubuntu = (VENDOR / "gdrcopy_ubuntu20+.rb").read_text().splitlines()
    deps = ubuntu[21].split("%w(")[1].rstrip(")").split()
    installed = [re.search(r"dpkg -i (\S+?)_", line)[1] for line in ubuntu[31:35]]  # type: ignore[index]
    assert ubuntu[30].strip() == "CUDA=/usr/local/cuda ./build-deb-packages.sh"
    defaults = _yaml(ROLES / "efa" / "defaults" / "main.yml")
    assert defaults["efa_gdrcopy_build_packages"] == deps  # type: ignore[index]
    assert defaults["efa_gdrcopy_packages"] == installed == ["gdrdrv-dkms", "libgdrapi", "gdrcopy-tests", "gdrcopy"]  # type: ignore[index]
    (build,) = [
        t
        for t in _yaml(ROLES / "efa" / "tasks" / "gdrcopy.yml")[1]["block"]
        if "ansible.builtin.command" in t  # type: ignore[index]
    ]
    assert build["ansible.builtin.command"]["argv"] == ["./build-deb-packages.sh"]
    assert build["ansible.builtin.command"]["chdir"].endswith("/packages")
    assert build["environment"] == {"CUDA": "{{ efa_aws_ofi_nccl_cuda_home }}"}
    assert defaults["efa_aws_ofi_nccl_cuda_home"] == "/usr/local/cuda"  # type: ignore[index]
    awsome = (VENDOR / "nvidia_gdrcopy-tasks-main.yml").read_text().splitlines()
    assert "make CUDA=/usr/local/cuda" in awsome[28]


def test_gdrdrv_is_started_at_configure() -> None:
    # _gdrcopy_common.rb@f75d84c lines 97-106: on GPU instances the configure step enables and starts
    # the gdrcopy service, gdrdrv on Ubuntu (gdrcopy_ubuntu20+.rb line 44).
    ubuntu = (VENDOR / "gdrcopy_ubuntu20+.rb").read_text().splitlines()
    assert ubuntu[43].strip() == "'gdrdrv'"
    (service,) = _tasks(ROLES / "efa" / "tasks" / "configure.yml", "ansible.builtin.systemd_service")
    assert service["name"] == "{{ efa_gdrcopy_service }}"
    assert service["enabled"] is True
    assert _yaml(ROLES / "efa" / "defaults" / "main.yml")["efa_gdrcopy_service"] == "gdrdrv"  # type: ignore[index]
