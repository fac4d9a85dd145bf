"""On-prem InfiniBand (ConnectX-7, NDR; inbox rdma-core or DOCA/MOFED) against the vendors' own files.

examples/onprem-h100-256.yaml as written (rails by mlx5 name, the switches' subnet manager) and a
variant of it with the rails by PCI address, opensm on two controllers and IPoIB on two rails. One
test per piece the references require, each naming the file it checks against (copies in vendor/,
SOURCES.md there): rdma-core's udev naming rule, NCCL's NCCL_IB_HCA syntax and DMA-BUF check,
nvidia-peermem's dependency on MLNX_OFED, DeepOps' peer-memory gating, opensm's -g/-p and Debian's
opensm units. The nodes' side runs for real where it can: the rdma role's sysfs lookup and the
health check against the fixture sysfs trees (tests/fixtures/sysfs), the nvidia_driver role's
GPUDirect choice through ansible-playbook on this machine (facts and a stat only).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from tests.conftest import EXAMPLES, RDMA_RAILS_MODULE, REPO_ROOT
from tests.shipped_slurm import slurm_tool
from tests.specs import mutated

from clusterctl.pipeline import load_and_validate
from clusterctl.render import render_files

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
SYSFS = REPO_ROOT / "tests" / "fixtures" / "sysfs"
ROLES = REPO_ROOT / "roles"
MODULE = RDMA_RAILS_MODULE
HW = "dgx-h100"
# DGX H100/H200 User Guide, "Network Modules": GPU i's ConnectX-7 (tests/fixtures/sysfs/README.md).
RAILS_PCI = [
    "0000:18:00.0",
    "0000:40:00.0",
    "0000:4f:00.0",
    "0000:5e:00.0",
    "0000:9a:00.0",
    "0000:c0:00.0",
    "0000:ce:00.0",
    "0000:dc:00.0",
]
RAILS_MLX5 = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
RAILS_IBP = ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ibp154s0", "ibp192s0", "ibp206s0", "ibp220s0"]


def _files(spec: Path) -> dict[str, str]:
    plan = load_and_validate(spec).plan
    assert plan is not None
    return {f.path: f.text for f in render_files(plan)}


def _variant(data: dict[str, Any]) -> None:
    data["hardware"][HW]["rails"] = list(RAILS_PCI)
    data["hardware"][HW]["storage_nics"] = ["0000:29:00.0", "0000:aa:00.0"]
    data["fabric"].update(
        subnet_manager="opensm",
        opensm_hosts=[
            {"host": "ctl001", "priority": 15, "port": "0000:17:00.0"},
            {"host": "ctl002", "priority": 14, "port": "0000:17:00.0"},
        ],
        ipoib={"networks": ["10.40.0.0/16", "10.41.0.0/16"]},
    )


@pytest.fixture(scope="module")
def example() -> dict[str, str]:
    return _files(EXAMPLES / "onprem-h100-256.yaml")


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _files(mutated(tmp_path_factory.mktemp("variant"), _variant))


def _inventory(files: dict[str, str]) -> dict[str, Any]:
    return yaml.safe_load(files["ansible/inventory/hosts.yml"].replace("!unsafe ", ""))["all"]


def _rdma_rails() -> ModuleType:
    assert MODULE.is_file(), "the collection has no sysfs lookup (clusterctl.node.rdma_rails)"
    spec = importlib.util.spec_from_file_location("rdma_rails", MODULE)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _role_text(*parts: str) -> str:
    path = ROLES.joinpath(*parts)
    return path.read_text() if path.is_file() else ""


# --- RDMA device names: discovered on the node, never assumed -------------------------------------


def test_nccl_conf_names_no_hca_the_node_may_not_have(example: dict[str, str]) -> None:
    # linux-rdma/rdma-core kernel-boot/rdma-persistent-naming.rules@691953d: where this rule is
    # installed (Debian's rdma-core, inbox) the HCAs are ibp24s0..., not mlx5_N; DOCA/MOFED keep mlx5_N.
    # So the rendered file must not fix the names: it leaves the line to the node.
    rules = (VENDOR / "rdma-persistent-naming.rules").read_text()
    assert 'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"' in rules
    conf = example[f"nccl/{HW}.conf"]
    assert not re.search(r"^NCCL_IB_HCA=", conf, re.M), conf
    assert "#NCCL_IB_HCA=<per node>" in conf.splitlines()


def test_nccl_role_writes_the_nodes_names_in_place_of_the_marker(example: dict[str, str]) -> None:
    # NVIDIA/nccl docs/userguide/source/env.rst@5067397 NCCL_IB_HCA: the role replaces the rendered
    # marker with the value the rdma role computed from sysfs.
    nccl_vars = yaml.safe_load(_role_text("nccl", "vars", "main.yml") or "{}") or {}
    marker = nccl_vars.get("__nccl_ib_hca_marker", "")
    assert marker
    assert re.search(marker, example[f"nccl/{HW}.conf"])
    assert "rdma_sysfs" in nccl_vars.get("__nccl_ib_hca", "")
    assert "regex_replace(__nccl_ib_hca_marker" in nccl_vars.get("__nccl_conf_content", "")


@pytest.mark.parametrize(
    ("tree", "rails", "names"),
    [
        ("dgx-h100-rdma-core", RAILS_PCI, RAILS_IBP),  # inbox rdma-core, rails by PCI address
        ("dgx-h100-mlx5", RAILS_PCI, RAILS_MLX5),  # DOCA/MOFED, rails by PCI address
        ("dgx-h100-mlx5", RAILS_MLX5, RAILS_MLX5),  # DOCA/MOFED, rails by the names the image fixes
    ],
)
def test_node_value_is_exact_names_with_port_1(tree: str, rails: list[str], names: list[str]) -> None:
    # NVIDIA/nccl env.rst@5067397 NCCL_IB_HCA: "=" makes the tokens exact ("mlx5_1" alone also
    # selects mlx5_10..mlx5_19), each entry <hca>:<port>.
    doc = (VENDOR / "nccl-env-NCCL_IB_HCA.rst").read_text()
    assert "always recommended to add the ``=`` prefix" in doc
    fact = _rdma_rails().rails_fact(rails, [], "", str(SYSFS / tree))
    assert fact["nccl_ib_hca"] == "=" + ",".join(f"{n}:1" for n in names)


def test_mlx5_names_on_an_inbox_image_stop_the_converge() -> None:
    # rdma-persistent-naming.rules@691953d: the names the example assumes are not there on inbox
    # rdma-core; the lookup reports it (with the PCI address to use) instead of writing an
    # NCCL_IB_HCA that matches nothing (NCCL then falls back to sockets).
    fact = _rdma_rails().rails_fact(RAILS_MLX5, [], "", str(SYSFS / "dgx-h100-rdma-core"))
    assert fact["nccl_ib_hca"] == ""
    assert "ibp24s0 (0000:18:00.0)" in fact["missing"][0]["why"]


def _rdma_rename_by_pci(pci: str, link_layer: str, functions_on_slot: int) -> str:
    """rdma_rename.c by_pci() (linux-rdma/rdma-core kernel-boot/rdma_rename.c@691953d), for PFs."""
    domain, bus, rest = pci.split(":")
    slot, func = rest.split(".")
    name = "ib" if link_layer == "InfiniBand" else "roce"
    name += f"P{int(domain, 16)}" if int(domain, 16) else ""
    name += f"p{int(bus, 16)}s{int(slot, 16)}"
    if int(func) or functions_on_slot > 1:
        name += f"f{int(func)}"
    return name


@pytest.mark.parametrize("tree", ["dgx-h100-rdma-core", "dgx-h100-roce-rdma-core"])
def test_fixture_names_are_what_rdma_rename_gives(tree: str) -> None:
    # rdma-persistent-naming.rules@691953d NAME_FALLBACK = onboard, then PCI (rdma_rename.c
    # str2policy); the fixture devices have no onboard index, so every name is by_pci's.
    devices = _rdma_rails().scan(str(SYSFS / tree))
    slots: dict[str, int] = {}
    for d in devices.values():
        slots[d["pci"][:-2]] = slots.get(d["pci"][:-2], 0) + 1
    for name, d in devices.items():
        assert name == _rdma_rename_by_pci(d["pci"], d["link_layer"], slots[d["pci"][:-2]]), d


def _health(files: dict[str, str], tmp_path: Path, tree: str) -> tuple[int, str]:
    (tmp_path / "bin").mkdir()
    stubs = {"scontrol": f'[ "$1" = show ] && exit 0\necho "$*" >> {tmp_path}/scontrol.log', "logger": "exit 0"}
    for name, body in stubs.items():
        (tmp_path / "bin" / name).write_text(f"#!/bin/bash\n{body}\n")
        (tmp_path / "bin" / name).chmod(0o755)
    (tmp_path / "bin" / "nvidia-smi").write_text("#!/bin/bash\nseq 0 7\n")
    (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    (tmp_path / "health.conf").write_text(files["health/health.conf"])
    (tmp_path / "check").write_text(files["health/clusterctl-healthcheck"])
    (tmp_path / "driver").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20\n")
    (tmp_path / "mounts").write_text(
        "a /lustre/datasets lustre rw 0 0\nb /mnt/ckpt wekafs rw 0 0\nc /home nfs4 rw 0 0\n"
    )
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "CLUSTERCTL_HEALTH_CONF": str(tmp_path / "health.conf"),
        # clusterctl's Slurm module as shipped, driving the scontrol stub.
        "CLUSTERCTL_SLURM_TOOL": str(slurm_tool(tmp_path)),
        "CLUSTERCTL_HEALTH_HOST": "gpu001",
        "CLUSTERCTL_HEALTH_SYSFS_IB": str(SYSFS / tree / "class" / "infiniband"),
        "CLUSTERCTL_HEALTH_SYSFS_PCI": str(SYSFS / tree / "bus" / "pci" / "devices"),
        "CLUSTERCTL_HEALTH_RAILS": str(tmp_path / "none"),
        "CLUSTERCTL_HEALTH_MOUNTS": str(tmp_path / "mounts"),
        "CLUSTERCTL_HEALTH_DRIVER": str(tmp_path / "driver"),
    }
    done = subprocess.run(["bash", str(tmp_path / "check")], env=env, capture_output=True, text=True, check=False)
    log = tmp_path / "scontrol.log"
    return done.returncode, log.read_text() if log.exists() else ""


@pytest.mark.parametrize("tree", ["dgx-h100-rdma-core", "dgx-h100-mlx5"])
def test_health_check_finds_rails_by_pci_address_on_either_image(
    variant: dict[str, str], tmp_path: Path, tree: str
) -> None:
    # Kernel sysfs ABI (Documentation/ABI/stable/sysfs-class-infiniband, tests/fixtures/sysfs/README.md):
    # /sys/bus/pci/devices/<addr>/infiniband/<dev>; a node with rdma-core's names is not drained.
    assert _health(variant, tmp_path, tree) == (0, "")


# --- GPUDirect RDMA: DMA-BUF where it works, nvidia-peermem only with DOCA/MOFED -------------------


def test_rendered_conf_says_which_gpudirect_path_and_why(example: dict[str, str]) -> None:
    # NVIDIA/nccl src/init.cc@5067397 dmaBufSupported(): driver API >= 11.7 and the GPU's
    # DMA_BUF_SUPPORTED attribute (open kernel modules); the example pins 570 (open), CUDA 12.8, NCCL 2.26.2.
    assert "cudaDriverVersion < 11070" in (VENDOR / "nccl-init.cc-dmaBufSupported").read_text()
    conf = example[f"nccl/{HW}.conf"]
    assert re.search(
        r"^# GPUDirect RDMA: DMA-BUF expected \(open kernel modules .*CUDA 12\.8 >= 11\.7; NCCL 2\.26\.2", conf, re.M
    )
    assert "nvidia-peermem is not loaded" in conf


def test_mofed_detection_looks_where_nvidias_build_does() -> None:
    # NVIDIA/open-gpu-kernel-modules kernel-open/conftest.sh@df1c9a3 ib_peer_memory_symbols: the
    # peer-memory symbols come from MLNX_OFED's tree; nvidia-peermem.c nv_mem_client_init() returns
    # -EINVAL without them, so inbox rdma-core cannot load the module.
    conftest = (VENDOR / "conftest.sh-ib_peer_memory_symbols").read_text()
    assert "return -EINVAL;" in (VENDOR / "nvidia-peermem.c-nv_mem_client_init").read_text()
    defaults = yaml.safe_load(_role_text("nvidia_driver", "defaults", "main.yml"))
    paths = defaults.get("nvidia_driver_mofed_paths") or []
    assert paths
    assert all(p in conftest for p in ("MLNX_OFED_KERNEL_DIR=/usr/src/ofa_kernel", "/var/lib/dkms/mlnx-ofed-kernel"))
    assert paths == ["/usr/src/ofa_kernel", "/var/lib/dkms/mlnx-ofed-kernel"]


def _gpudirect(tmp_path: Path, open_modules: bool, mofed: bool) -> dict[str, str]:
    """The nvidia_driver role's choice on this machine (its kernel), through ansible-playbook."""
    assert (ROLES / "nvidia_driver" / "tasks" / "gpudirect.yml").is_file(), "nvidia_driver has no gpudirect entry point"
    mofed_dir = tmp_path / "ofa_kernel"
    if mofed:
        mofed_dir.mkdir()
    out = tmp_path / "choice.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": True,
                    "gather_subset": ["min"],
                    "vars": {
                        "clusterctl_fabric_kind": "infiniband",
                        "clusterctl_versions": {"nvidia_driver": "570.133.20", "cuda": "12.8", "nccl": "2.26.2"},
                        "nvidia_driver_open_kernel_modules": open_modules,
                        "nvidia_driver_mofed_paths": [str(mofed_dir)],
                    },
                    "tasks": [
                        {"ansible.builtin.include_role": {"name": "nvidia_driver", "tasks_from": "gpudirect"}},
                        {
                            "ansible.builtin.copy": {
                                "content": "{{ nvidia_driver_gpudirect_path | to_json }}",
                                "dest": str(out),
                                "mode": "0644",
                            }
                        },
                    ],
                }
            ]
        )
    )
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0"}
    playbook_bin = Path(sys.executable).parent / "ansible-playbook"
    done = subprocess.run(
        [str(playbook_bin), "-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    return json.loads(out.read_text())


def test_dmabuf_with_open_modules_and_no_peermem(tmp_path: Path) -> None:
    # NVIDIA/nccl src/init.cc@5067397 dmaBufSupported(); DeepOps roles/nvidia-peer-memory/tasks/main.yml
    # @3957a42 loads the peer-memory module only on DGX OS (/etc/dgx-release), never everywhere.
    assert "/etc/dgx-release" in (VENDOR / "deepops-nvidia-peer-memory-tasks.yml").read_text()
    choice = _gpudirect(tmp_path, open_modules=True, mofed=True)
    assert choice["method"] == "dmabuf", choice
    assert "nvidia-peermem is not loaded" in choice["reason"]


def test_peermem_only_where_mofed_is_installed(tmp_path: Path) -> None:
    # nvidia-peermem.c@df1c9a3 nv_mem_client_init(): needs MLNX_OFED's ib_register_peer_memory_client.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with_mofed = _gpudirect(tmp_path / "a", open_modules=False, mofed=True)
    inbox = _gpudirect(tmp_path / "b", open_modules=False, mofed=False)
    assert with_mofed["method"] == "peermem", with_mofed
    assert "DOCA/MOFED is installed" in with_mofed["reason"]
    assert inbox["method"] == "none", inbox
    assert "inbox rdma-core lacks" in inbox["reason"]


def test_peermem_boot_entry_follows_the_choice() -> None:
    # The boot entry exists only where the path is peermem (not on every InfiniBand node).
    defaults = yaml.safe_load(_role_text("nvidia_driver", "defaults", "main.yml"))
    assert "peermem" in str(defaults.get("nvidia_driver_peermem_enabled"))
    assert "fabric_kind" not in str(defaults.get("nvidia_driver_peermem_enabled"))


# --- Subnet manager: the switches', or opensm on the named hosts only -------------------------------


def test_no_opensm_anywhere_with_the_switch_sm(example: dict[str, str]) -> None:
    # Debian opensm package (opensm_3.3.23-2+b1) /etc/default/opensm: PORTS=ALL, so an installed
    # opensm starts on every port; the example's switches run the SM, so no host may get it.
    assert "PORTS=ALL" in (VENDOR / "opensm.default").read_text()
    inventory = _inventory(example)
    assert inventory["children"]["opensm"] == {"hosts": {}}
    defaults = yaml.safe_load(_role_text("rdma", "defaults", "main.yml"))
    assert "groups['opensm']" in str(defaults.get("rdma_opensm_enabled"))


def test_opensm_on_two_named_hosts_with_distinct_priorities(variant: dict[str, str]) -> None:
    # linux-rdma/opensm man/opensm.8.in@fa74b98 -p: priority 0..15, "master is chosen by priority
    # and GUID": two hosts, distinct priorities, nowhere else.
    assert "master is chosen by priority and GUID" in " ".join(
        (VENDOR / "opensm.8.in-guid-priority").read_text().split()
    )
    inventory = _inventory(variant)
    assert sorted(inventory["children"]["opensm"]["hosts"]) == ["ctl001", "ctl002"]
    priorities = [inventory["hosts"][h]["clusterctl_opensm_priority"] for h in ("ctl001", "ctl002")]
    assert priorities == [15, 14]
    assert "sm_priority {{ rdma_opensm_priority }}" in _role_text("rdma", "templates", "opensm.conf.j2")
    assert "'opensm.conf.j2'" in _role_text("rdma", "tasks", "configure.yml")


def test_opensm_binds_the_port_guid_it_is_given(variant: dict[str, str]) -> None:
    # opensm.8.in@fa74b98 -g: "OpenSM may be bound to 1 port at a time"; Debian opensm@.service:
    # ExecStart=/usr/sbin/opensm --guid %I, one unit per GUID in PORTS.
    assert "--guid %I" in (VENDOR / "opensm@.service").read_text()
    inventory = _inventory(variant)
    assert inventory["hosts"]["ctl001"]["clusterctl_opensm_port"] == "0000:17:00.0"
    template = _role_text("rdma", "templates", "opensm.default.j2")
    assert "__rdma_opensm_guids" in template
    assert "'ALL'" not in template
    port = _rdma_rails().rails_fact([], [], "0000:18:00.0", str(SYSFS / "dgx-h100-rdma-core"))["opensm_port"]
    assert port["port_guid"] == "0xa088c20300101800"


def test_opensm_stopped_where_it_is_not_placed() -> None:
    # Debian /etc/default/opensm: "NONE: Do no start opensm"; earlier converges started it on every
    # GPU node, so those nodes get PORTS=NONE and the unit stopped and disabled.
    assert "# NONE: Do no start opensm" in (VENDOR / "opensm.default").read_text()
    service = yaml.safe_load(_role_text("rdma", "tasks", "service.yml") or "[]") or []
    stop = [t for t in service if t.get("ansible.builtin.systemd_service", {}).get("state") == "stopped"]
    assert stop
    assert stop[0]["ansible.builtin.systemd_service"]["enabled"] is False
    # configure.yml writes PORTS=NONE where opensm is installed but not placed; install.yml writes it
    # before a fresh install on a placed host, so no opensm binds every port before configure places it.
    assert "opensm-disabled.default.j2" in _role_text("rdma", "tasks", "configure.yml")
    assert "opensm-disabled.default.j2" in _role_text("rdma", "tasks", "install.yml")
    assert 'PORTS="NONE"' in _role_text("rdma", "templates", "opensm-disabled.default.j2")


def test_opensm_hosts_without_the_gpu_stack_get_it_too() -> None:
    # The controllers the variant names carry no GPU stack: site.yml applies the rdma role's
    # subnet_manager entry point to them.
    plays = yaml.safe_load((ROLES / "site.yml").read_text())
    sm = [p for p in plays if p.get("hosts") == "opensm:!gpu"]
    assert sm
    assert sm[0]["tasks"][0]["ansible.builtin.include_role"] == {"name": "rdma", "tasks_from": "subnet_manager"}


# --- IPoIB per rail -----------------------------------------------------------------------------------


def test_ipoib_per_rail_is_rendered_and_named_after_the_rails_netdev(variant: dict[str, str]) -> None:
    # The rdma role writes rdma_ipoib_interfaces (ifupdown or networkd); the render gives each rail
    # its address, the node names the interface after the rail's netdev in sysfs.
    host = _inventory(variant)["hosts"]["gpu001"]
    offset = host["clusterctl_address"].split(".", 2)[2]
    assert host["clusterctl_ipoib_interfaces"] == [
        {"rail": 0, "address": f"10.40.{offset}/16", "mode": "datagram"},
        {"rail": 1, "address": f"10.41.{offset}/16", "mode": "datagram"},
    ]
    for tree in ("dgx-h100-rdma-core", "dgx-h100-mlx5"):
        fact = _rdma_rails().rails_fact(
            RAILS_PCI, [], "", str(SYSFS / tree), ipoib_interfaces=host["clusterctl_ipoib_interfaces"]
        )
        assert [i["name"] for i in fact["ipoib"]] == ["ibp24s0", "ibp64s0"], tree
