"""parse_ibstat on outputs written in the documented ibstat format (no real fixture exists).

The layout follows infiniband-diags ibstat.c (ca_dump/port_dump): a CA line, tab-indented
CA fields, "Port N:" and doubly indented port fields.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterctl.verify.parsers.ibstat import parse_ibstat
from clusterctl.verify.result import ParseError


def _ca(name: str, state: str = "Active", phys: str = "LinkUp", rate: str = "400", layer: str = "InfiniBand") -> str:
    index = int(name.rsplit("_", 1)[1]) if name[-1].isdigit() else 9
    guid = f"0xa088c20300{index:02x}5f2e"
    return (
        f"CA '{name}'\n"
        "\tCA type: MT4129\n"
        "\tNumber of ports: 1\n"
        "\tFirmware version: 28.39.1002\n"
        "\tHardware version: 0\n"
        f"\tNode GUID: {guid}\n"
        f"\tSystem image GUID: {guid}\n"
        "\tPort 1:\n"
        f"\t\tState: {state}\n"
        f"\t\tPhysical state: {phys}\n"
        f"\t\tRate: {rate}\n"
        f"\t\tBase lid: {0 if state == 'Down' else 100 + index}\n"
        "\t\tLMC: 0\n"
        f"\t\tSM lid: {0 if state == 'Down' else 1}\n"
        "\t\tCapability mask: 0xa651e848\n"
        f"\t\tPort GUID: {guid}\n"
        f"\t\tLink layer: {layer}\n"
    )


# An 8-rail NDR node: mlx5_3 is down (cable pulled on the switch side), mlx5_5 trained at
# HDR speed, and a RoCE bond for storage.
NODE = "".join(
    [
        *(_ca(f"mlx5_{i}") for i in (0, 1, 2)),
        _ca("mlx5_3", state="Down", phys="Disabled", rate="10"),
        _ca("mlx5_4"),
        _ca("mlx5_5", rate="200"),
        *(_ca(f"mlx5_{i}") for i in (6, 7)),
        _ca("mlx5_bond_0", rate="100", layer="Ethernet"),
    ]
)


def test_cas_and_ports() -> None:
    ibstat = parse_ibstat(NODE)

    assert [ca.name for ca in ibstat.cas] == [*(f"mlx5_{i}" for i in range(8)), "mlx5_bond_0"]
    ca = ibstat.ca("mlx5_0")
    assert ca is not None
    assert (ca.ca_type, ca.number_of_ports, ca.firmware_version) == ("MT4129", 1, "28.39.1002")
    assert ca.node_guid == "0xa088c20300005f2e"
    (port,) = ca.ports
    assert (port.number, port.state, port.physical_state, port.rate_gbps) == (1, "Active", "LinkUp", 400.0)
    assert (port.base_lid, port.sm_lid, port.link_layer) == (100, 1, "InfiniBand")
    assert port.fields["Capability mask"] == "0xa651e848"
    assert port.line_no == 8


def test_down_port_and_lower_rate() -> None:
    ibstat = parse_ibstat(NODE)
    port = {ca.name: ca.ports[0] for ca in ibstat.cas}

    assert (port["mlx5_3"].state, port["mlx5_3"].physical_state, port["mlx5_3"].base_lid) == ("Down", "Disabled", 0)
    assert port["mlx5_5"].rate_gbps == 200.0
    assert (port["mlx5_bond_0"].link_layer, port["mlx5_bond_0"].rate_gbps) == ("Ethernet", 100.0)
    assert ibstat.ca("mlx5_9") is None


def test_copy_without_indentation_and_with_srun_labels() -> None:
    flat = "\n".join(line.strip() for line in NODE.splitlines())
    labelled = "\n".join(f"3: {line}" for line in NODE.splitlines())

    assert parse_ibstat(flat).cas == parse_ibstat(NODE).cas
    assert parse_ibstat(labelled).cas == parse_ibstat(NODE).cas


def test_rate_variants_and_empty_ca_type() -> None:
    text = _ca("mlx4_0", rate="40 (FDR10)").replace("CA type: MT4129", "CA type:")
    text += _ca("rxe_0", rate="2.5", layer="Ethernet")

    ibstat = parse_ibstat("$ ibstat\n" + text)

    fdr10, soft_roce = ibstat.cas
    assert fdr10.ca_type is None
    assert (fdr10.ports[0].rate_gbps, fdr10.ports[0].rate_note) == (40.0, "FDR10")
    assert soft_roce.ports[0].rate_gbps == 2.5


def test_bad_rate_reports_its_line() -> None:
    text = NODE.replace("Rate: 200", "Rate: fast")
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if "Rate: fast" in line)

    with pytest.raises(ParseError) as caught:
        parse_ibstat(text)

    assert caught.value.line_no == line_no == 5 * 17 + 11
    assert caught.value.line == "\t\tRate: fast"


def test_port_without_state() -> None:
    text = _ca("mlx5_0").replace("\t\tState: Active\n", "")

    with pytest.raises(ParseError) as caught:
        parse_ibstat(text)

    assert caught.value.line_no == 8
    assert "no State line" in caught.value.message


def test_ibstat_failure_and_empty_output() -> None:
    with pytest.raises(ParseError) as failure:
        parse_ibstat("ibpanic: [2137592] main: stat of IB device 'mthca0' failed: No such file or directory\n")
    with pytest.raises(ParseError) as empty:
        parse_ibstat("")

    assert failure.value.line_no == 1
    assert "ibstat failed" in failure.value.message
    assert empty.value.line_no == 0


def test_shell_prompt_after_the_output_is_ignored() -> None:
    text = "[root@gpu001 ~]# ibstat\n" + NODE + "[root@gpu001 ~]# \n"

    cas = parse_ibstat(text).cas

    assert cas == tuple(
        replace(ca, line_no=ca.line_no + 1, ports=tuple(replace(p, line_no=p.line_no + 1) for p in ca.ports))
        for ca in parse_ibstat(NODE).cas
    )


def test_unknown_indented_line_inside_a_ca() -> None:
    text = _ca("mlx5_0").replace("\t\tLMC: 0\n", "\t\t<garbled>\n")

    with pytest.raises(ParseError) as caught:
        parse_ibstat(text)

    assert caught.value.line_no == 13
