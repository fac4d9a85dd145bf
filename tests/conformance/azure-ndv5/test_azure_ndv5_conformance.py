"""examples/azure-ndv5.yaml against Azure's own HPC image for ND H100 v5: one test per piece it needs.

The reference: Azure/azhpc-images @ 8e9d055 (read with git, not copied here):
components/customizations/ndv5.sh, components/setup_sku_customizations.sh, topology/ndv5-topo.xml,
components/install_azure_persistent_rdma_naming{,_monitor}.sh, components/add-udev-rules.sh,
components/install_lustre_client.sh and versions.json. The image's /etc/nccl.conf and topology file
are the shared fixtures nccl/azure_ndv5_etc_nccl.conf and nccl/azure_ndv5-topo.xml.

Before this work the topology was rendered as nccl/ndv5-topo.xml, the nccl role looked for
nccl/ndv5.topo.xml and installed to /etc/nccl/topo.xml, and NCCL_TOPO_FILE named
/etc/clusterctl/nccl/ndv5-topo.xml: NCCL read no topology. Nothing renamed the RDMA devices
mlx5_ib*, and the managed Lustre unit mounted `:/lustrefs`. Every test here failed then.
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import jinja2
import pytest
import yaml
from tests.conftest import EXAMPLES, REPO_ROOT

from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from clusterctl.render.tree import render_files

ROLES = REPO_ROOT / "roles"
NAMING = ROLES / "azure_rdma_naming"


@pytest.fixture(scope="module")
def plan():  # type: ignore[no-untyped-def]
    return load_and_validate(EXAMPLES / "azure-ndv5.yaml").plan


@pytest.fixture(scope="module")
def files(plan) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f.path: f.text for f in render_files(plan)}


def _conf(text: str) -> list[tuple[str, str]]:
    return [tuple(line.split("=", 1)) for line in text.splitlines() if line and not line.startswith("#")]  # type: ignore[misc]


def _template(path: Path, **variables: object) -> str:
    env = jinja2.Environment(keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "# " + str(text)
    return env.from_string(path.read_text()).render(ansible_managed="managed", **variables)


def _defaults(role: str) -> dict:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


# --- /etc/nccl.conf and the topology file -------------------------------------------------------------


def test_nccl_conf_is_the_images(files: dict[str, str], fixtures_dir: Path) -> None:
    # azhpc-images components/customizations/ndv5.sh@8e9d055 writes exactly these lines, in this order.
    azure = [
        tuple(line.split("=", 1)) for line in (fixtures_dir / "nccl" / "azure_ndv5_etc_nccl.conf").read_text().split()
    ]
    assert _conf(files["nccl/ndv5.conf"]) == azure


def test_topology_file_has_the_images_name_and_pairs(files: dict[str, str], fixtures_dir: Path) -> None:
    # azhpc-images topology/ndv5-topo.xml@8e9d055: GPU i with HCA i by PCI bus id, per NUMA node.
    ours = ET.fromstring(files["nccl/ndv5-topo.xml"])
    azure = ET.parse(fixtures_dir / "nccl" / "azure_ndv5-topo.xml").getroot()

    def pairs(root: ET.Element) -> list[tuple[str | None, ...]]:
        return [
            tuple(p.get("busid") for p in switch.findall("pci")) for switch in root.iter("pci") if switch.findall("pci")
        ]

    assert pairs(ours) == pairs(azure)


def test_topology_is_installed_where_the_image_has_it(plan) -> None:  # type: ignore[no-untyped-def]
    # setup_sku_customizations.sh@8e9d055 copies topology/* to /opt/microsoft; ndv5.sh@8e9d055 links
    # /opt/microsoft/ndv5/topo.xml to /opt/microsoft/ndv5-topo.xml and names the link in NCCL_TOPO_FILE.
    assert group_vars(plan)["clusterctl_nccl_topologies"] == {
        "ndv5": {
            "src": "nccl/ndv5-topo.xml",
            "dest": "/opt/microsoft/ndv5-topo.xml",
            "link": "/opt/microsoft/ndv5/topo.xml",
        }
    }


def test_the_nccl_role_installs_the_rendered_file_and_the_link() -> None:
    # The same three paths, as roles/nccl resolves its defaults from the render's table (ndv5.sh@8e9d055).
    defaults = _defaults("nccl")
    table = {
        "ndv5": {
            "src": "nccl/ndv5-topo.xml",
            "dest": "/opt/microsoft/ndv5-topo.xml",
            "link": "/opt/microsoft/ndv5/topo.xml",
        }
    }
    env = jinja2.Environment()
    topology = table["ndv5"]
    values = {
        name: env.from_string(defaults[name]).render(
            clusterctl_render_dir="/build", __nccl_topology=topology, clusterctl_hardware="ndv5"
        )
        for name in ("nccl_topology_src", "nccl_topology_dest", "nccl_topology_link")
    }
    assert values == {
        "nccl_topology_src": "/build/nccl/ndv5-topo.xml",
        "nccl_topology_dest": "/opt/microsoft/ndv5-topo.xml",
        "nccl_topology_link": "/opt/microsoft/ndv5/topo.xml",
    }
    tasks = yaml.safe_load((ROLES / "nccl" / "tasks" / "configure.yml").read_text())
    (sync,) = [t for t in tasks if "clusterctl.node.sync_files" in t]
    files = sync["vars"]["__nccl_configure_files"]
    assert "{'dest': nccl_topology_link, 'state': 'link', 'target': nccl_topology_dest}" in files


# --- RDMA device names ------------------------------------------------------------------------------


def test_nd_nodes_get_the_naming_before_the_rdma_role() -> None:
    # The image names devices at boot (install_azure_persistent_rdma_naming.sh@8e9d055); here the role runs
    # before the rdma role's sysfs discovery.
    site = (ROLES / "site.yml").read_text()
    assert "(['azure_rdma_naming'] if __site_azure_ib else []) + ['rdma'," in site


def test_naming_service_is_the_images(tmp_path: Path) -> None:
    # install_azure_persistent_rdma_naming.sh@8e9d055: azure_persistent_rdma_naming.service, oneshot,
    # After=network.target, RemainAfterExit, WantedBy=multi-user.target.
    unit = _template(NAMING / "templates" / "azure_persistent_rdma_naming.service.j2")
    for line in ("After=network.target", "Type=oneshot", "RemainAfterExit=true", "WantedBy=multi-user.target"):
        assert f"\n{line}\n" in unit


def test_devices_are_named_mlx5_ib_and_mlx5_an_in_pci_order(tmp_path: Path) -> None:
    # install_azure_persistent_rdma_naming.sh@8e9d055: `ibdev2netdev -v | sort -n` (PCI order), InfiniBand ->
    # mlx5_ib<i>, Ethernet -> mlx5_an<i> (the names azurehpc-health-checks' nd96isr_h100_v5.conf checks).
    script = tmp_path / "naming.sh"
    script.write_text(
        _template(NAMING / "templates" / "azure_persistent_rdma_naming.sh.j2", **_defaults("azure_rdma_naming"))
    )
    root = tmp_path / "sys"
    (root / "bus/pci/drivers/mlx5_core").mkdir(parents=True)
    for name, pci, layer in (
        ("mlx5_0", "0102:00:00.0", "InfiniBand"),
        ("mlx5_1", "0101:00:00.0", "InfiniBand"),
        ("mlx5_2", "c4d7:00:02.0", "Ethernet"),
    ):
        dev = root / "devices/pci" / pci
        dev.mkdir(parents=True)
        (dev / "driver").symlink_to(root / "bus/pci/drivers/mlx5_core")
        (root / "class/infiniband" / name / "ports/1").mkdir(parents=True)
        (root / "class/infiniband" / name / "device").symlink_to(dev)
        (root / "class/infiniband" / name / "ports/1/link_layer").write_text(layer + "\n")
    out = subprocess.run(
        ["bash", str(script)],
        env={**os.environ, "RDMA_SYSFS": str(root), "RDMA_RENAME": "echo"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == ["mlx5_1 name mlx5_ib0", "mlx5_0 name mlx5_ib1", "mlx5_2 name mlx5_an0"]


def test_names_are_checked_again_every_minute() -> None:
    # install_azure_persistent_rdma_naming_monitor.sh@8e9d055: every 60 s, rename when a device lacks its name.
    assert _defaults("azure_rdma_naming")["azure_rdma_naming_check_interval_s"] == 60
    timer = _template(
        NAMING / "templates" / "azure_persistent_rdma_naming_monitor.timer.j2", azure_rdma_naming_check_interval_s=60
    )
    assert "\nOnUnitActiveSec=60\n" in timer


def test_rdma_cores_udev_rule_keeps_kernel_names() -> None:
    # add-udev-rules.sh@8e9d055 appends this rule to /etc/udev/rules.d/60-rdma-persistent-naming.rules.
    rule = _template(NAMING / "templates" / "60-rdma-persistent-naming.rules.j2")
    assert '\nACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_KERNEL"\n' in rule


# --- Azure Managed Lustre ---------------------------------------------------------------------------


def test_managed_lustre_mounts_the_stacks_file_system(files: dict[str, str]) -> None:
    # Azure docs ("Connect clients to an Azure Managed Lustre file system"): mount -t lustre -o noatime,flock
    # <MGS>@tcp:/lustrefs; the address comes from the stack outputs (roles/storage_clients puts it in).
    unit = files["storage/units/ndv5/lustre.mount"]
    assert "\nWhat=clusterctl-managed-lustre:datasets\n" in unit
    assert "\nOptions=_netdev,flock,noatime\n" in unit


def test_lustre_client_is_the_images() -> None:
    # install_lustre_client.sh@8e9d055: amlfs-<codename> repository, lustre-client-<ver> then
    # amlfs-lustre-client-dkms-<ver> built --with-o2ib=no; versions.json@8e9d055 ubuntu24.04: 2.17.0-24-gf517bc4.
    variables = yaml.safe_load((ROLES / "storage_clients" / "vars" / "main.yml").read_text())
    azure = variables["__storage_clients_cloud_lustre"]["azure"]
    assert azure["repo"]["uris"] == "https://packages.microsoft.com/repos/amlfs-{{ __storage_clients_codename }}/"
    assert azure["packages"] == ["lustre-client-2.17.0-24-gf517bc4", "amlfs-lustre-client-dkms-2.17.0-24-gf517bc4"]
    assert 'LUSTRE_DKMS_CONFIGURE_EXTRA="--with-o2ib=no"' in azure["dkms_config"]


# --- DOCA-OFED and nvidia-peermem, as Azure's image --------------------------------------------------

AZ_VENDOR = Path(__file__).resolve().parent / "vendor"


def test_nd_nodes_get_azures_doca_release(plan) -> None:  # type: ignore[no-untyped-def]
    # Azure/azhpc-images versions.json@8e9d055 lines 41-46: doca.ubuntu24.04.x86_64 version, sha256, url.
    vendor = json.loads((AZ_VENDOR / "versions.json").read_text())["doca"]["ubuntu24.04"]["x86_64"]
    group = group_vars(plan)
    assert group["clusterctl_doca"] == {
        "ndv5": {"version": vendor["version"], "url": vendor["url"], "checksum": f"sha256:{vendor['sha256']}"}
    }


def test_doca_is_installed_as_install_doca_sh_does() -> None:
    # Azure/azhpc-images components/install_doca.sh@8e9d055: `dpkg -i $DOCA_FILE` (line 39), the dkms pin
    # (lines 42-46), `apt-get -y install doca-ofed` (line 107); the repository package checked by sha256
    # (download_and_verify, line 16).
    script = (AZ_VENDOR / "install_doca.sh").read_text().splitlines()
    assert script[38].strip() == "dpkg -i $DOCA_FILE"
    assert script[106].strip() == "apt-get -y install doca-ofed"
    vendor_pin = "\n".join(line.strip() for line in script[42:45]) + "\n"
    tasks = yaml.safe_load((REPO_ROOT / "roles" / "rdma" / "tasks" / "doca.yml").read_text())[0]["block"]
    by_module = {m: t for t in tasks for m in t if m.startswith(("ansible.builtin.", "clusterctl.node."))}
    get_url = by_module["ansible.builtin.get_url"]["ansible.builtin.get_url"]
    assert get_url["checksum"] == "{{ rdma_doca_checksum }}"
    debs = [t["ansible.builtin.apt"] for t in tasks if "ansible.builtin.apt" in t]
    assert debs[0]["deb"].endswith("{{ rdma_doca_url | basename }}")
    assert debs[1]["name"] == "doca-ofed"
    (pin,) = by_module["clusterctl.node.sync_files"]["clusterctl.node.sync_files"]["files"]
    assert pin["dest"] == "/etc/apt/preferences.d/doca-dkms-pin"
    assert pin["content"] == vendor_pin


def test_gpudirect_is_nvidia_peermem_as_ndv5_sh_loads_it(plan) -> None:  # type: ignore[no-untyped-def]
    # components/customizations/ndv5.sh@8e9d055 line 31: `modprobe nvidia-peermem` (DOCA's ib_core has the
    # peer-memory API); the nvidia_driver role then takes peermem on these nodes, not DMA-BUF.
    assert (AZ_VENDOR / "ndv5.sh").read_text().splitlines()[30] == "modprobe nvidia-peermem"
    assert group_vars(plan)["clusterctl_gpudirect"] == {"ndv5": "peermem"}
    default = _defaults("nvidia_driver")["nvidia_driver_gpudirect"]
    env = jinja2.Environment()
    assert env.from_string(default).render(clusterctl_gpudirect={"ndv5": "peermem"}, clusterctl_hardware="ndv5") == (
        "peermem"
    )
    assert env.from_string(default).render(clusterctl_hardware="dgx-h100") == "auto"


def test_containers_get_the_topology_file(plan) -> None:  # type: ignore[no-untyped-def]
    # ndv5.sh@8e9d055 lines 8-15: NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml in /etc/nccl.conf; a container
    # started through pyxis gets both from the node (enroot mounts.d), or NCCL inside would not pair GPU and HCA.
    files = {f.path: f.text for f in render_files(plan)}
    fstab = [ln.split() for ln in files["enroot/mounts.d/ndv5.fstab"].splitlines() if not ln.startswith("#")]
    assert {fields[0] for fields in fstab} >= {"/etc/nccl.conf", "/opt/microsoft"}
