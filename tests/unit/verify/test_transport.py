"""The transport verdict per fabric on real NCCL_DEBUG=INFO logs (data/nccl_debug/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.catalog.transports import FABRIC_TRANSPORTS
from clusterctl.verify.parsers.nccl_debug import parse_nccl_debug
from clusterctl.verify.result import Verdict, figures_of
from clusterctl.verify.transport import judge_transport

DATA = Path(__file__).parent / "data" / "nccl_debug"


def _judge(name: str, fabric: str | None, **kwargs: object):  # type: ignore[no-untyped-def]
    return judge_transport(parse_nccl_debug((DATA / name).read_text()), fabric, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "fabric"),
    [
        ("ib_roce_2node_nccltests185.log", "roce"),
        ("roce_gdr_disabled_nccl1537.log", "roce"),
        ("ib_old_format_nvpeermem56.log", "infiniband"),
        ("ib_gdrdma_channels_nccl707.log", "infiniband"),
        ("ibext_sharp_nccl1357.log", "infiniband"),
        ("ibext_v8_2node_nccl1291.log", "infiniband"),
        ("ibext_v8_roce_bond_nccl1814.log", "roce"),
        ("ofi_aws_libfabric_p4d_nccl527.log", "efa"),
        ("ofi_libfabric_p5en_nccl1597.log", "efa"),
        ("ofi_cloudwatch_prefix_awsofinccl715.log", "efa"),
        ("fastrak_2node_a3mega.log", "gpudirect-tcpxo"),
        ("gib_vendor_sample.log", "gcp-rdma"),
    ],
)
def test_the_fabrics_own_transport_passes(name: str, fabric: str) -> None:
    judgement = _judge(name, fabric)

    assert Verdict.of(judgement.result) is Verdict.PASS, judgement.result.message
    assert judgement.failing_hosts == ()


def test_pass_message_and_figures() -> None:
    result = _judge("ofi_libfabric_p5en_nccl1597.log", "efa").result

    assert result.message == (
        "NCCL used Libfabric on 2 hosts (the aws-ofi-nccl plugin (Libfabric) on libfabric's efa provider, "
        "as efa needs)."
    )
    assert figures_of(result)["networks"] == "Libfabric x2"
    assert figures_of(result)["libfabric_provider"] == "efa"


def test_ib_log_names_hosts_that_logged_nothing() -> None:
    result = _judge("ibext_sharp_nccl1357.log", "infiniband").result

    assert result.message.endswith("; qh100-gpu20 logged no transport line.")


@pytest.mark.parametrize("fabric", ["infiniband", "roce", "efa", "gpudirect-tcpxo", None])
def test_socket_fallback_fails_on_every_fabric_and_quotes_the_line(fabric: str | None) -> None:
    judgement = _judge("socket_ib_disabled_nccl1053.log", fabric)

    assert Verdict.of(judgement.result) is Verdict.FAIL
    assert judgement.failing_hosts == ("axa",)
    assert judgement.result.message.startswith("axa (pid 3048391): NCCL fell back to sockets")
    assert "(line 10: axa:3048391:3048566 [0] NCCL INFO Using network Socket)" in judgement.result.message


def test_socket_fallback_of_old_nccl_fails() -> None:
    result = _judge("socket_lo_no_ib_nccl352.log", "infiniband").result

    assert Verdict.of(result) is Verdict.FAIL
    assert (
        "ds-ml-01-0 (pid 17754 and 1 more process): NCCL fell back to sockets, "
        "not NET/IB over InfiniBand (IB or IBext) "
        "(line 12: ds-ml-01-0:17754:17754 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>)"
    ) in result.message


def test_socket_channels_on_an_ib_cluster_fail() -> None:
    result = _judge("socket_channels_hpcx_nccl952.log", "infiniband").result

    assert Verdict.of(result) is Verdict.FAIL
    assert "via NET/Socket/0" in result.message
    assert figures_of(result)["net_channels"] == 4


def test_only_the_socket_processes_of_a_mixed_run_fail() -> None:
    result = _judge("socket_and_ib_mixed_nccltests188.log", "infiniband").result

    assert Verdict.of(result) is Verdict.FAIL
    # Both socket processes are on "user": the first is quoted, the other counted; the IB ones pass.
    assert result.message.startswith("user (pid 16902 and 1 more process): NCCL fell back to sockets")
    assert "695836" not in result.message
    assert figures_of(result)["networks"] == "Socket x2, IB x2"


def test_ec2_without_efa_fails_on_efa_naming_three_hosts_and_counting_the_rest() -> None:
    judgement = _judge("socket_ec2_no_efa_nccl226.log", "efa")

    assert Verdict.of(judgement.result) is Verdict.FAIL
    assert len(judgement.failing_hosts) == 15
    assert judgement.result.message.startswith(
        "ip-172-31-12-21 (pid 45361): NCCL found no IB device, so no RDMA network, not the aws-ofi-nccl plugin"
    )
    assert judgement.result.message.endswith("; and 12 more hosts.")
    assert "EFA installer and aws-ofi-nccl" in judgement.result.hint


def test_wrong_libfabric_provider_fails_on_efa() -> None:
    judgement = _judge("ofi_provider_tcp_awsofinccl803.log", "efa")

    assert Verdict.of(judgement.result) is Verdict.FAIL
    assert judgement.failing_hosts == ("6f2d8a82d208",)
    assert judgement.result.message == (
        "6f2d8a82d208 (pid 1287): aws-ofi-nccl selected libfabric provider tcp, not efa "
        "(line 14: 6f2d8a82d208:1287:1328 [0] NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics))."
    )


def test_wrong_fabric_transport_fails() -> None:
    # NCCL used the IB verbs transport where TCPXO's FasTrak plugin was expected, and vice versa.
    ib_on_tcpxo = _judge("ib_roce_2node_nccltests185.log", "gpudirect-tcpxo").result
    fastrak_on_efa = _judge("fastrak_2node_a3mega.log", "efa").result

    assert Verdict.of(ib_on_tcpxo) is Verdict.FAIL
    assert "NCCL used network IB, not the GPUDirect-TCPXO plugin (FasTrak)" in ib_on_tcpxo.message
    assert Verdict.of(fastrak_on_efa) is Verdict.FAIL
    assert "NCCL used network FasTrak, not the aws-ofi-nccl plugin" in fastrak_on_efa.message


def test_roce_hcas_on_an_infiniband_fabric_fail() -> None:
    result = _judge("ib_roce_2node_nccltests185.log", "infiniband").result

    assert Verdict.of(result) is Verdict.FAIL
    assert "NCCL's HCAs run RoCE, not IB as the fabric does" in result.message


def test_missing_gib_plugin_fails_with_the_warning() -> None:
    result = _judge("gib_not_found_gpurecipes5.log", "gcp-rdma").result

    assert Verdict.of(result) is Verdict.FAIL
    assert "NCCL found no network to use" in result.message
    assert "NCCL WARN Error: network gIB not found." in result.message


def test_plugin_warnings_alone_do_not_say_which_network() -> None:
    result = _judge("fastrak_warnings_megatron4660.log", "gpudirect-tcpxo").result

    assert Verdict.of(result) is Verdict.SKIPPED
    assert result.message == "No line of the log says which network NCCL used."


def test_without_a_fabric_only_sockets_fail() -> None:
    assert Verdict.of(_judge("fastrak_2node_a3mega.log", None).result) is Verdict.PASS
    assert Verdict.of(_judge("ofi_provider_tcp_awsofinccl803.log", None).result) is Verdict.PASS
    assert Verdict.of(_judge("socket_lo_no_ib_nccl352.log", None).result) is Verdict.FAIL


def test_single_node_run_is_intra_node_only() -> None:
    # A one-node run of a machine without RDMA NICs: NCCL picks sockets for inter-node traffic
    # but connects its GPUs through P2P; the lines are those of NVIDIA/nccl#1053 and #952.
    text = (DATA / "socket_ib_disabled_nccl1053.log").read_text() + (
        "axa:3048391:3048566 [0] NCCL INFO Channel 04/0 : 9[1] -> 10[2] via P2P/IPC/read\n"
    )
    log = parse_nccl_debug(text)

    told = judge_transport(log, "infiniband", nodes=1).result
    seen = judge_transport(log, "infiniband").result

    for result in (told, seen):
        assert Verdict.of(result) is Verdict.SKIPPED
        assert result.message == (
            "Intra-node only: NCCL connected the GPUs through P2P and used no network "
            "(it picked Socket for traffic between nodes)."
        )
        assert figures_of(result)["network_if_multinode"] == "Socket"


def test_expected_hosts_must_each_show_a_transport() -> None:
    judgement = _judge("ibext_v8_2node_nccl1291.log", "infiniband", hosts=("gh1", "gh2"))

    assert Verdict.of(judgement.result) is Verdict.FAIL
    assert judgement.failing_hosts == ("gh2",)
    assert judgement.result.message == "gh2 printed no line that says which network NCCL used."


def test_task_labels_name_the_node() -> None:
    lines = "\n".join(
        [
            " 0: dgxh100-4:460770:460842 [0] NCCL INFO Using network IB",
            " 1: ip-172-31-12-210:45305:45305 [0] NCCL INFO NET/Socket : Using [0]ens3:172.31.12.210<0>",
        ]
    )
    judgement = judge_transport(parse_nccl_debug(lines), "infiniband", task_hosts={0: "gpu001", 1: "gpu002"})

    assert judgement.failing_hosts == ("gpu002",)
    assert judgement.result.message.startswith("gpu002 (task 1): NCCL fell back to sockets")


def test_every_fabric_kind_of_the_spec_has_an_expectation() -> None:
    from typing import get_args

    from clusterctl.spec.models import Fabric

    kinds = get_args(Fabric.model_fields["kind"].annotation)
    assert set(kinds) <= set(FABRIC_TRANSPORTS)


def test_real_single_node_runs_are_intra_node_only() -> None:
    socket = _judge("single_node_socket_nccl428.log", "infiniband", nodes=1).result
    p2p = _judge("single_node_p2p_nccl1773.log", "infiniband").result

    assert Verdict.of(socket) is Verdict.SKIPPED
    assert socket.message == (
        "Intra-node only: the run stayed on one node and used no network (it picked Socket for traffic between nodes)."
    )
    assert Verdict.of(p2p) is Verdict.SKIPPED
    assert p2p.message == (
        "Intra-node only: NCCL connected the GPUs through P2P and used no network "
        "(the log does not say which network it would use between nodes)."
    )
    # Without being told it ran on one node, the socket choice of the first log is a failure.
    assert Verdict.of(_judge("single_node_socket_nccl428.log", "infiniband").result) is Verdict.FAIL
