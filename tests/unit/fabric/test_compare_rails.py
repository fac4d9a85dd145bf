"""The cabling check when the fabric's HCA names are not the spec's: rails by PCI address,
rdma-core's NAME_FALLBACK names (``gpu001 ibp24s0``) and OFED's ``gpu001 HCA-1`` descriptions.

Each host's rail map is what ``fabric check --from-nodes`` builds: the rails command's output
(the rails file the rdma role writes, roles/rdma/templates/rdma-rails.conf.j2, from its sysfs
lookup on the fixture trees of tests/fixtures/sysfs, plus the devices' GUIDs) parsed and turned
into a `HostHcas`. The fabrics are the 2-SU fabric of test_compare.py with the descriptions
and GUIDs of each scheme, and the real EDR fat tree of ../shared/fixtures, whose hosts say
``gpu001 HCA-1``.
"""

from __future__ import annotations

import copy
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fabric_testkit import Cable
from test_compare import RAILS, RailFabric, rail_fabric_2su
from tests.specs import example_data, group, write_spec
from tests.unit.verify.test_rails import RAILS_IBP, RAILS_PCI, SYSFS, rails_file

from clusterctl.commands.fabric.common import host_hcas_of
from clusterctl.fabric.compare import CablingReport, compare_fabric
from clusterctl.fabric.expected import ExpectedFabric, expected_fabric
from clusterctl.fabric.host_hcas import HostHcas
from clusterctl.fabric.model import normalize_guid
from clusterctl.fabric.parsers import parse_ibnetdiscover
from clusterctl.pipeline import load_and_validate
from clusterctl.spec.findings import Level
from clusterctl.verify.parsers.rdma_rails import parse_node_rails
from clusterctl.verify.rails import rails_command

EDR = "infiniband/ibnetdiscover_edr_fattree_6sw.txt"


def spec_data(rails: list[str], nodes: int = 64) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(example_data())
    data["provider"] = {"kind": "local"}
    group(data, "gpu").update(count=nodes, spares=0)
    data["hardware"]["dgx-h100"]["rails"] = list(rails)
    data["hardware"]["dgx-h100"]["storage_nics"] = ["0000:29:00.0", "0000:aa:00.0"]
    return data


@pytest.fixture(scope="module")
def by_pci(tmp_path_factory: pytest.TempPathFactory) -> ExpectedFabric:
    """The 2-SU plan of test_compare.py with the rails named by PCI address."""
    plan = load_and_validate(write_spec(tmp_path_factory.mktemp("spec"), spec_data(RAILS_PCI))).plan
    return expected_fabric(plan)


@pytest.fixture(scope="module")
def answer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What the rails command prints on a DGX H100 under rdma-core's names, rails by PCI address."""
    tmp = tmp_path_factory.mktemp("node")
    path = tmp / "rdma-rails.conf"
    path.write_text(rails_file("dgx-h100-rdma-core", RAILS_PCI))
    command = rails_command(str(path), str(SYSFS / "dgx-h100-rdma-core"))
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout


def described(fab: RailFabric, names: list[str]) -> RailFabric:
    """The same cables with rail r of each host described as ``<host> names[r]``."""
    for (host, hca), guid in fab.ca.items():
        fab.cas[guid] = f"{host} {names[RAILS.index(hca)]}"
    return fab


def maps(fab: RailFabric, answer: str) -> dict[str, HostHcas]:
    """Each host's rail map from the node's answer, with that host's own GUIDs in the guid lines."""
    out: dict[str, HostHcas] = {}
    for host in sorted({h for h, _ in fab.ca}):
        lines = []
        for line in answer.splitlines():
            if line.startswith("guid ") and line.split()[1] in RAILS_IBP:
                guid = fab.ca[(host, RAILS[RAILS_IBP.index(line.split()[1])])]
                sysfs = ":".join(guid[i : i + 4] for i in range(0, 16, 4))
                line = f"guid {line.split()[1]} {sysfs} fe80:0000:0000:0000:{sysfs}"
            lines.append(line)
        out[host] = host_hcas_of(host, RAILS_PCI, parse_node_rails("\n".join(lines)), f"{host}:rails")
    return out


def report(fab: RailFabric, expected: ExpectedFabric, host_hcas: dict[str, HostHcas] | None = None) -> CablingReport:
    return compare_fabric(parse_ibnetdiscover(fab.text()), expected, host_hcas=host_hcas)


# --- with the nodes' rail maps ------------------------------------------------------------


@pytest.mark.parametrize("names", [RAILS_IBP, [f"HCA-{r + 1}" for r in range(8)]], ids=["rdma-core", "ofed"])
def test_pci_rails_match_by_device_name_or_guid(by_pci: ExpectedFabric, answer: str, names: list[str]) -> None:
    fab = described(rail_fabric_2su(), names)

    result = report(fab, by_pci, maps(fab, answer))

    assert result.findings == ()
    assert (result.hosts_found, result.hcas_found, result.hcas_unmapped) == (64, 512, 0)


def test_miscabled_rail_names_the_device_and_the_pci_address(by_pci: ExpectedFabric, answer: str) -> None:
    fab = described(rail_fabric_2su(), RAILS_IBP)
    old = fab.host_cable("gpu005", "mlx5_3")
    # Port 65: a full leaf has no free port, so exactly one cable differs (as in test_compare.py).
    fab.replace_cable(old, replace(old, a=fab.leaf[(1, 2)], a_port=65))

    (error,) = report(fab, by_pci, maps(fab, answer)).errors()

    assert (error.code, error.data["host"], error.data["hca"]) == ("FAB-C001", "gpu005", "ibp64s0 (0000:40:00.0)")
    assert error.message.startswith("Rail 1 HCA ibp64s0 (0000:40:00.0) of gpu005 is not on the leaf shared by rail 1")


def test_down_hca_found_by_its_guid(by_pci: ExpectedFabric, answer: str) -> None:
    fab = described(rail_fabric_2su(), [f"HCA-{r + 1}" for r in range(8)])
    fab.replace_cable(fab.host_cable("gpu007", "mlx5_5"), None)
    del fab.cas[fab.ca[("gpu007", "mlx5_5")]]

    (error,) = report(fab, by_pci, maps(fab, answer)).errors()

    assert error.code == "FAB-C003"
    assert error.message == "HCA 0000:5e:00.0 of gpu007 is not on the fabric; check its cable and that the HCA is up."


def test_storage_hca_of_a_mapped_host_is_unknown_not_unmapped(by_pci: ExpectedFabric, answer: str) -> None:
    fab = described(rail_fabric_2su(), RAILS_IBP)
    guid = "946dae0300000199"
    fab.cas[guid] = "gpu001 ibp41s0f0"
    fab.cables.append(Cable(fab.leaf[(1, 0)], 65, guid, 1, "4xNDR"))

    result = report(fab, by_pci, maps(fab, answer))

    assert result.errors() == []
    (warning,) = result.warnings()
    assert (warning.code, warning.data["host"], warning.data["hca"]) == ("FAB-C004", "gpu001", "ibp41s0f0")


# --- without them -------------------------------------------------------------------------


def test_pci_rails_without_maps_are_unmapped_not_missing(by_pci: ExpectedFabric) -> None:
    fab = described(rail_fabric_2su(), RAILS_IBP)

    result = report(fab, by_pci)

    assert {f.code for f in result.findings} == {"FAB-C009"}
    assert len(result.findings) == 64
    assert result.hcas_unmapped == 512
    first = result.findings[0]
    assert (first.rule, first.level, first.data["host"]) == ("unmapped-hca", Level.ERROR, "gpu001")
    assert first.message.startswith(
        "8 HCA(s) of gpu001 on the fabric could not be matched to its rails: the spec names its rails by PCI "
        "address, which node descriptions do not carry. Its cabling is not checked; give the nodes' rail maps "
        "(clusterctl fabric check --from-nodes"
    )
    assert first.data["found"].startswith(
        "ibp24s0 (0x946dae0300000100) on ib-l01 port 1, ibp64s0 (0x946dae0300000101) on "
    )
    assert not result.matches()


def test_a_node_that_is_not_converged_says_so(by_pci: ExpectedFabric, answer: str) -> None:
    fab = described(rail_fabric_2su(), RAILS_IBP)
    host_hcas = maps(fab, answer)
    host_hcas["gpu002"] = host_hcas_of(
        "gpu002", RAILS_PCI, parse_node_rails("absent /etc/clusterctl/rdma-rails.conf\n"), "gpu002:rails"
    )

    (error,) = report(fab, by_pci, host_hcas).errors()

    assert (error.code, error.data["host"]) == ("FAB-C009", "gpu002")
    assert (
        "gpu002 has no /etc/clusterctl/rdma-rails.conf, so its rails' RDMA device names are unknown: the rdma role "
        "has not run there (the node is not converged); the spec names its rails by PCI address"
    ) in error.message


def test_ofed_descriptions_with_device_named_rails_are_unmapped(tmp_path: Path) -> None:
    # The spec's mlx5 names and "HCA-<n>" descriptions cannot be compared either.
    expected = expected_fabric(load_and_validate(write_spec(tmp_path, spec_data(RAILS))).plan)
    fab = described(rail_fabric_2su(), [f"HCA-{r + 1}" for r in range(8)])

    result = report(fab, expected)

    assert {f.code for f in result.findings} == {"FAB-C009"}
    assert result.findings[0].message.startswith(
        "8 HCA(s) of gpu001 on the fabric could not be matched to its rails: its node descriptions name no "
        "RDMA device (OFED's '<host> HCA-<n>', or the host alone). "
    )


# --- the real EDR fat tree: hosts described "gpu001 HCA-1" ----------------------------------


def test_real_fabric_hosts_described_hca_1_map_by_guid(tmp_path: Path, fixtures_dir: Path) -> None:
    fabric = parse_ibnetdiscover((fixtures_dir / EDR).read_text())
    guids = {ca.description.split()[0]: ca.guid for ca in fabric.cas() if ca.description.startswith("gpu")}
    assert len(guids) == 45
    data = spec_data(["0000:18:00.0"], nodes=45)
    data["hardware"]["dgx-h100"]["gpus"] = {"model": "H100-SXM-80GB", "count": 1, "numa": [0]}
    data["fabric"]["speed_gbps"] = 100
    expected = expected_fabric(load_and_validate(write_spec(tmp_path, data)).plan)

    before = compare_fabric(fabric, expected)
    host_hcas = {}
    for host, guid in guids.items():
        sysfs = ":".join(guid[2:][i : i + 4] for i in range(0, 16, 4))
        text = f"rail 0 0000:18:00.0 ibp24s0 ibp24s0 InfiniBand 0\nguid ibp24s0 {sysfs} -\n"
        host_hcas[host] = host_hcas_of(host, ["0000:18:00.0"], parse_node_rails(text), f"{host}:rails")
    after = compare_fabric(fabric, expected, host_hcas=host_hcas)

    assert sorted(f.data["host"] for f in before.findings if f.code == "FAB-C009") == sorted(guids)
    assert before.hosts_found == 0
    assert not [f for f in after.findings if f.code in ("FAB-C009", "FAB-C003")]
    assert (after.hosts_found, after.hcas_found, after.hcas_unmapped) == (45, 45, 0)
    # The fat tree is not the plan's rail-optimized SU: what remains are cabling findings, by GUID.
    assert {f.code for f in after.errors()} <= {"FAB-C001", "FAB-C005", "FAB-C007"}
    assert normalize_guid(guids["gpu001"][2:]) == guids["gpu001"]
