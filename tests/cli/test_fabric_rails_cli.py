"""``clusterctl fabric check`` on a spec whose rails are PCI addresses: unmapped HCAs, then the
nodes' rail maps from saved files (--node-rails) or read from the nodes (--from-nodes).

The fabric is the rack-leaf one of test_fabric_cli.py (examples/local.yaml: four 8-rail nodes,
two per rack) with the HCAs described as rdma-core names them (``gpu001 ibp24s0``); the rails
files are what the rdma role writes on a DGX H100 with those names (tests/unit/verify/test_rails.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.verify.rails import RAILS_COMMAND
from tests.cli.test_fabric_cli import rack_cables
from tests.specs import example_data, write_spec
from tests.unit.fabric.fabric_testkit import write_ibnetdiscover
from tests.unit.verify.test_rails import RAILS_IBP, RAILS_PCI, rails_file
from tests.verify_testkit import ReplayExecutor


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def spec(tmp_path: Path) -> str:
    data = example_data("local.yaml")
    data["hardware"]["emu-h100"]["rails"] = list(RAILS_PCI)
    return str(write_spec(tmp_path, data))


@pytest.fixture
def fabric(tmp_path: Path) -> str:
    switches, cas, cables = rack_cables()
    renamed = {guid: f"{desc.split()[0]} {RAILS_IBP[int(desc.split('_')[1])]}" for guid, desc in cas.items()}
    path = tmp_path / "fabric.txt"
    path.write_text(write_ibnetdiscover(switches, renamed, cables))
    return str(path)


def test_pci_rails_without_maps_are_reported_unmapped(spec: str, fabric: str) -> None:
    code, out, err = invoke("fabric", "check", spec, "--ibnetdiscover", fabric)

    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith(
        "error FAB-C009 unmapped-hca: gpu001: expected the rails of gpu001 (0000:18:00.0, 0000:40:00.0, "
    )
    assert "; found ibp24s0 (0x0000cc0000001000) on rack1-leaf port 1, " in lines[0]
    assert err == f"error: The fabric does not match {spec}: 4 error(s), 0 warning(s).\n"


def test_saved_rails_files_map_the_hcas(spec: str, fabric: str, tmp_path: Path) -> None:
    saved = tmp_path / "rails"
    saved.mkdir()
    for n in range(1, 5):
        (saved / f"gpu{n:03d}.conf").write_text(rails_file("dgx-h100-rdma-core", RAILS_PCI))

    code, out, err = invoke("fabric", "check", spec, "--ibnetdiscover", fabric, "--node-rails", str(saved))

    assert (code, err) == (0, "")
    assert out == f"The fabric matches {spec}: 4 hosts, 32 HCAs on 2 leaves (1:1).\n"


def test_a_missing_saved_file_is_named(spec: str, fabric: str, tmp_path: Path) -> None:
    saved = tmp_path / "rails"
    saved.mkdir()
    for n in range(1, 4):
        (saved / f"gpu{n:03d}").write_text(rails_file("dgx-h100-rdma-core", RAILS_PCI))

    code, out, _ = invoke("fabric", "check", spec, "--ibnetdiscover", fabric, "--node-rails", str(saved), "-o", "json")

    data = json.loads(out)
    assert code == 1
    assert data["summary"]["hcas_unmapped"] == 8
    (finding,) = data["findings"]
    assert (finding["code"], finding["node"], finding["data"]["host"]) == ("FAB-C009", "gpu004", "gpu004")
    assert finding["message"].startswith(
        f"8 HCA(s) of gpu004 on the fabric could not be matched to its rails: {saved} has no rails file of gpu004; "
    )


def test_from_nodes_reads_each_node_through_the_executor(
    spec: str, fabric: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = rails_file("dgx-h100-rdma-core", RAILS_PCI)

    def node(host: str, command: str) -> tuple[int, str, str] | None:
        assert command == RAILS_COMMAND
        if host == "gpu003":
            return 0, "absent /etc/clusterctl/rdma-rails.conf\n", ""
        return 0, text, ""

    executor = ReplayExecutor(node)
    monkeypatch.setattr("clusterctl.commands.fabric.common.executor_for", lambda plan, state: executor)

    code, out, err = invoke("fabric", "check", spec, "--ibnetdiscover", fabric, "--from-nodes")

    assert sorted(h for h, _ in executor.calls) == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert code == 1
    (line,) = out.splitlines()
    assert line.startswith("error FAB-C009 unmapped-hca: gpu003: ")
    assert (
        "gpu003 has no /etc/clusterctl/rdma-rails.conf, so its rails' RDMA device names are unknown: the rdma "
        "role has not run there (the node is not converged)"
    ) in line
    assert err.startswith("Reading the rails of 4 node(s) (/etc/clusterctl/rdma-rails.conf) ...\n")


def test_from_nodes_and_node_rails_exclude_each_other(spec: str, fabric: str, tmp_path: Path) -> None:
    code, _, err = invoke(
        "fabric", "check", spec, "--ibnetdiscover", fabric, "--from-nodes", "--node-rails", str(tmp_path)
    )

    assert code == 2
    assert "Give --from-nodes or --node-rails, not both." in err
