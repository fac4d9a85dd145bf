"""parse_nccl_debug on real NCCL_DEBUG=INFO lines from public threads (data/nccl_debug/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.verify.parsers.nccl_debug import IbDevice, network_family, parse_nccl_debug
from clusterctl.verify.result import ParseError

DATA = Path(__file__).parent / "data" / "nccl_debug"


def _log(name: str) -> str:
    return (DATA / name).read_text()


def _used(name: str) -> list[tuple[str, str | None, str | None]]:
    """(host, network, how) per process."""
    out = []
    for p in parse_nccl_debug(_log(name)).processes:
        used = p.used_network()
        out.append((p.host, used[0] if used else None, used[2] if used else None))
    return out


def test_every_data_file_has_its_source_in_its_header_and_in_sources_md() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    logs = sorted(DATA.glob("*.log"))

    assert len(logs) >= 20
    for path in logs:
        header = path.read_text().splitlines()[0]
        assert header.startswith("# Source: "), path.name
        assert f"`{path.name}`" in sources, path.name


def test_roce_two_nodes_use_network_ib() -> None:
    log = parse_nccl_debug(_log("ib_roce_2node_nccltests185.log"))

    assert log.nccl_version == "2.19.3"
    assert log.hosts == ("dgxh100-4", "dgxh100-3")
    first = log.processes[0]
    # The bootstrap thread (tid 460770) and the init thread (tid 460842) are one process.
    assert (first.host, first.pid, first.network) == ("dgxh100-4", 460770, "IB")
    assert first.ib_devices == (IbDevice(0, "mlx5_10", 1, "RoCE"), IbDevice(1, "mlx5_11", 1, "RoCE"))
    assert first.network_line is not None
    assert first.network_line.line_no == 11
    assert first.network_line.text == "dgxh100-4:460770:460842 [0] NCCL INFO Using network IB"


def test_rank_and_gdr_disabled_are_read() -> None:
    (process,) = parse_nccl_debug(_log("roce_gdr_disabled_nccl1537.log")).processes

    assert (process.rank, process.nranks, process.nnodes) == (0, 16, None)
    assert process.gdr_disabled == ("mlx5_0", "mlx5_1")


def test_old_format_without_using_network_is_inferred_from_net_ib() -> None:
    used = _used("ib_old_format_nvpeermem56.log")

    assert used[0] == ("master_node", "IB", "inferred")
    # The other processes only logged plugin lines: nothing says their network.
    assert {u[1] for u in used[1:]} == {None}
    assert parse_nccl_debug(_log("ib_old_format_nvpeermem56.log")).nccl_version == "2.5.6"


def test_channels_give_the_network_and_gdr() -> None:
    (process,) = parse_nccl_debug(_log("ib_gdrdma_channels_nccl707.log")).processes

    assert len(process.channels) == 12
    assert all(c.net == "IB" and c.gdr and c.inter_node for c in process.channels)
    assert process.channels[0].via == "NET/IB/5/GDRDMA"
    assert process.used_network() is not None
    assert process.used_network()[2] == "channels"  # type: ignore[index]


def test_hpcx_plugin_names_and_sharp_devices() -> None:
    log = parse_nccl_debug(_log("ibext_sharp_nccl1357.log"))

    assert [p.network for p in log.processes[:4]] == ["IBext"] * 4
    assert log.processes[1].ib_devices[0] == IbDevice(0, "mlx5_0", 1, "IB", ("SHARP",))
    assert network_family("IBext") == network_family("IBext_v8") == network_family("IB") == "ib"


def test_nnodes_from_the_comm_line() -> None:
    log = parse_nccl_debug(_log("ibext_v8_2node_nccl1291.log"))

    assert log.nnodes == 2
    assert [(p.host, p.rank, p.nranks) for p in log.processes] == [("gh1", 0, 2), ("gh2", 1, 2)]
    assert log.processes[0].network == "IBext_v8"


def test_versioned_plugin_channels() -> None:
    used = _used("ibext_v8_roce_bond_nccl1814.log")

    assert {u[1] for u in used} == {"IBext_v8"}
    assert ("hostname-test", "IBext_v8", "channels") in used


def test_socket_fallback_of_nccl_2_4_is_inferred() -> None:
    log = parse_nccl_debug(_log("socket_lo_no_ib_nccl352.log"))

    assert log.nccl_version == "2.4.8"
    for process in log.processes:
        assert process.ib_missing is not None
        assert process.socket_ifs == ("lo",)
        used = process.used_network()
        assert used is not None
        assert (used[0], used[2]) == ("Socket", "inferred")
        assert used[1].message == "NET/Socket : Using [0]lo:127.0.0.1<0>"


def test_no_device_found_alone_means_no_rdma_network() -> None:
    used = dict((h, (n, how)) for h, n, how in _used("socket_ec2_no_efa_nccl226.log"))

    assert used["ip-172-31-12-21"] == ("Socket", "inferred")
    assert used["ip-172-31-12-210"] == ("Socket", "inferred")
    assert used["ip-172-31-8-153"] == (None, None)  # only a plugin line


def test_socket_channels_behind_a_loaded_plugin() -> None:
    log = parse_nccl_debug(_log("socket_channels_hpcx_nccl952.log"))
    by_pid = {p.pid: p for p in log.processes}

    assert log.hosts == ("<cluster_name>",)
    assert [c.net for c in by_pid[919].channels] == ["Socket"] * 4
    assert [c.via for c in by_pid[920].channels] == ["P2P/IPC/read"] * 3
    assert not any(c.inter_node for c in by_pid[920].channels)
    assert by_pid[922].warnings[0].level == "WARN"


def test_mixed_socket_and_ib_processes() -> None:
    used = _used("socket_and_ib_mixed_nccltests188.log")

    assert [n for _, n, _ in used] == ["Socket", "Socket", "IB", "IB"]


def test_aws_libfabric_old_name_provider_and_channels() -> None:
    log = parse_nccl_debug(_log("ofi_aws_libfabric_p4d_nccl527.log"))
    named = [p for p in log.processes if p.network]

    assert {p.network for p in named} == {"AWS Libfabric"}
    assert {p.ofi_provider for p in named} == {"efa"}
    assert log.plugins == ("aws-ofi-nccl 1.4.0aws",)
    gdr = [c for c in log.channels if c.inter_node]
    assert {c.net for c in gdr} == {"AWS Libfabric"}
    assert all(c.gdr for c in gdr)
    assert network_family("AWS Libfabric") == network_family("Libfabric") == network_family("OFI") == "ofi"


def test_renamed_libfabric_and_nic_count() -> None:
    a, b = parse_nccl_debug(_log("ofi_libfabric_p5en_nccl1597.log")).processes

    assert a.network == "Libfabric"
    assert (b.ofi_provider, b.ofi_fabric, b.ofi_nics) == ("efa", None, 16)
    assert b.used_network() is not None
    assert b.used_network()[0] == "Libfabric"  # type: ignore[index]


def test_wrong_provider_is_read() -> None:
    (process,) = parse_nccl_debug(_log("ofi_provider_tcp_awsofinccl803.log")).processes

    assert (process.ofi_provider, process.ofi_nics) == ("tcp", 1)
    assert process.plugin == "aws-ofi-nccl 1.12.1-aws"


def test_current_provider_wording_with_fabric() -> None:
    # aws-ofi-nccl src/nccl_ofi_net.cpp today: "Selected provider is %s, fabric is %s (found %d nics)";
    # the prefix is the one of the real p5en line of NVIDIA/nccl#1597.
    line = "8h200-3:6310:6318 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)"
    (process,) = parse_nccl_debug(line).processes

    assert (process.ofi_provider, process.ofi_fabric, process.ofi_nics) == ("efa", "efa-direct", 16)


def test_log_collector_columns_are_skipped() -> None:
    log = parse_nccl_debug(_log("ofi_cloudwatch_prefix_awsofinccl715.log"))

    assert log.hosts == ("algo-1",)
    assert log.plugins == ("aws-ofi-nccl 1.11.0-aws",)
    assert [c.via for c in log.channels] == [
        "NET/AWS Libfabric/3/GDRDMA",
        "NET/AWS Libfabric/0/GDRDMA",
        "NET/AWS Libfabric/1/GDRDMA",
    ]


def test_fastrak_two_nodes() -> None:
    log = parse_nccl_debug(_log("fastrak_2node_a3mega.log"))

    assert log.hosts == ("tcpxo-wb-0", "tcpxo-wb-1")
    assert len(log.processes) == 16
    assert {p.network for p in log.processes} == {"FasTrak"}
    assert log.plugins == ("FasTrak 1.0.17",)
    assert network_family("FasTrak") == "fastrak"


def test_lines_without_prefix_still_count() -> None:
    log = parse_nccl_debug(_log("fastrak_warnings_megatron4660.log"))
    (process,) = log.processes

    assert (process.host, process.pid) == ("", 0)
    assert [w.message for w in process.warnings] == [
        "NET/FasTrak ...: INVALID_ARGUMENT: Buffer registration request does not have a valid fd set.",
        "NET/FasTrak ...: FAILED_PRECONDITION: receive() error: 32: Broken pipe",
    ]
    assert process.used_network() is None


def test_gib_sample_and_missing_gib() -> None:
    (sample,) = parse_nccl_debug(_log("gib_vendor_sample.log")).processes
    missing = parse_nccl_debug(_log("gib_not_found_gpurecipes5.log")).processes

    assert (sample.network, sample.plugin) == ("gIB", "gIB 1.0.5")
    assert network_family("gIB") == "gib"
    assert missing[0].warnings[0].message == "Error: network gIB not found."
    assert missing[0].used_network() is None


@pytest.mark.parametrize(
    ("prefix", "task"),
    [(" 9: ", 9), ("[1,9]<stdout>:", 9), ("", None)],
)
def test_launcher_labels_give_the_task(prefix: str, task: int | None) -> None:
    # A real line of NVIDIA/nccl-tests#185 as srun --label / mpirun --tag-output would print it.
    line = prefix + "dgxh100-3:2152176:2152299 [0] NCCL INFO Using network IB"
    (process,) = parse_nccl_debug(line).processes

    assert (process.host, process.task, process.network) == ("dgxh100-3", task, "IB")


def test_proxy_rank_channel_form() -> None:
    # NCCL src/transport/net.cc prints "NET/%s/%d(%d)" when another rank's proxy sends.
    line = "gpu001:10:20 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0(1)/GDRDMA/Shared"
    (channel,) = parse_nccl_debug(line).channels

    assert (channel.net, channel.gdr) == ("IB", True)


def test_output_without_nccl_lines_is_an_error() -> None:
    with pytest.raises(ParseError, match="no NCCL debug lines found") as err:
        parse_nccl_debug("# nThread 1 nGpus 8\n#  Rank  0 Group  0 Pid 1 on gpu001 device 0\n")

    assert err.value.line_no == 2
