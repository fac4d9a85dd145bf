"""verify judges the rails by the node's own RDMA device names, read from its rails file.

The rails file is what the rdma role writes (roles/rdma/templates/rdma-rails.conf.j2) from its
sysfs lookup (clusterctl.node.rdma_rails) run here on the fixture sysfs trees of one DGX
H100 under both naming schemes (tests/fixtures/sysfs: the kernel's mlx5_N, rdma-core's
NAME_FALLBACK ibp24s0 ...). The rails command itself runs with bash against those trees.
``nvidia-smi topo -m`` is the real 8xH100 matrix of ../shared/fixtures with its NIC legend
naming rail i's device, as nvidia-smi does on that box (GPU i sits next to rail i).
"""

from __future__ import annotations

import copy
import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import jinja2
import pytest
from tests.conftest import RDMA_RAILS_MODULE
from tests.specs import example_data, group, write_spec
from tests.verify_testkit import ReplayExecutor, ibstat, with_real_gpus

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.run.executor import UNREACHABLE_RC
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import VerifyContext
from clusterctl.verify.fabric import IbCheck, TopoCheck
from clusterctl.verify.parsers.rdma_rails import parse_node_rails, port_guid_of_gid, sysfs_guid
from clusterctl.verify.rails import RAILS_COMMAND, rail_devices, rails_command
from clusterctl.verify.result import ParseError, Verdict, blame_of, figures_of

ROOT = Path(__file__).resolve().parents[3]
SYSFS = ROOT / "tests" / "fixtures" / "sysfs"
TEMPLATE = ROOT / "roles" / "rdma" / "templates" / "rdma-rails.conf.j2"
MODULE = RDMA_RAILS_MODULE
TOPO = "nvidia-smi/nvsmi_topo_m_8xH100_8nic_sglang30401.txt"
# DGX H100/H200 User Guide, "Network Modules": GPU i's ConnectX-7 by bus, and its names per scheme
# (tests/fixtures/sysfs/README.md).
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
SCHEMES = [("dgx-h100-mlx5", RAILS_MLX5), ("dgx-h100-rdma-core", RAILS_IBP)]
RAILS_PATH_ON_NODE = "/etc/clusterctl/rdma-rails.conf"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rdma_rails", MODULE)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rdma_rails = _module()


def rails_file(tree: str, rails: list[str]) -> str:
    """The rails file the rdma role writes on the node whose /sys is ``tree``."""
    fact = rdma_rails.rails_fact(rails, [], "", str(SYSFS / tree))
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["comment"] = lambda text: f"# {text}"
    template = env.from_string(TEMPLATE.read_text())
    return template.render(ansible_managed="Ansible managed", rdma_sysfs=fact)


def node_answer(tree: str, rails: list[str], tmp_path: Path) -> str:
    """What the rails command prints on that node (bash, the fixture sysfs for /sys)."""
    path = tmp_path / "rdma-rails.conf"
    path.write_text(rails_file(tree, rails))
    command = rails_command(str(path), str(SYSFS / tree))
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout


def topo_naming(fixtures_dir: Path, devices: list[str]) -> str:
    """The real matrix with NIC i named as the node names rail i's device."""
    text = (fixtures_dir / TOPO).read_text()
    for index in reversed(range(8)):
        text = text.replace(f"NIC{index}: mlx5_{index}", f"NIC{index}: {devices[index]}")
    return text


def plan_with(tmp_path: Path, rails: list[str], nodes: int = 2) -> Plan:
    """The on-prem example with ``nodes`` real GPU nodes whose rails are ``rails``."""
    data = copy.deepcopy(example_data())
    data["provider"] = {"kind": "local"}
    gpu = group(data, "gpu")
    gpu["count"] = nodes
    gpu["spares"] = 0
    data["hardware"]["dgx-h100"]["rails"] = list(rails)
    data["hardware"]["dgx-h100"]["storage_nics"] = ["0000:29:00.0", "0000:aa:00.0"]
    return with_real_gpus(load_and_validate(write_spec(tmp_path, data)).plan)


def run_check(
    check: TopoCheck | IbCheck, plan: Plan, answers: dict[str, str], outputs: dict[str, str]
) -> list[Finding]:
    """Run ``check`` with ``answers`` to the rails command and ``outputs`` to the tool, per host."""

    def handler(host: str, command: str) -> tuple[int, str, str] | None:
        if command == RAILS_COMMAND:
            return (0, answers[host], "") if host in answers else (0, f"absent {RAILS_PATH_ON_NODE}\n", "")
        return 0, outputs[host], ""

    ctx = VerifyContext(plan=plan, thresholds={}, executor=ReplayExecutor(handler))
    return check.run(ctx)


# --- the file and the command ------------------------------------------------------------


@pytest.mark.parametrize(("tree", "devices"), SCHEMES)
def test_rails_by_pci_address_read_back_as_the_node_names_them(tree: str, devices: list[str], tmp_path: Path) -> None:
    rails = parse_node_rails(node_answer(tree, RAILS_PCI, tmp_path))

    assert rails.present
    assert [(r.index, r.hca, r.ibdev) for r in rails.rails] == list(zip(range(8), RAILS_PCI, devices, strict=True))
    assert [r.netdev for r in rails.rails] == RAILS_IBP  # udev names netdevs the same under both schemes
    assert {r.link_layer for r in rails.rails} == {"InfiniBand"}
    assert [r.numa_node for r in rails.rails] == [0, 0, 0, 0, 1, 1, 1, 1]
    # GUIDs of every RDMA device (storage cards too), from node_guid and GID 0.
    first = rails.guids[devices[0]]
    assert (first.node_guid, first.port_guid) == ("0xa088c20300101800", "0xa088c20300101800")
    assert len(rails.guids) == 12
    mapped = rail_devices("gpu001", RAILS_PCI, rails)
    assert (mapped.devices, mapped.renamed, mapped.problem) == (tuple(devices), True, "")


def test_node_without_the_file_says_absent(tmp_path: Path) -> None:
    command = rails_command(str(tmp_path / "none.conf"), str(SYSFS / "dgx-h100-mlx5"))
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout

    rails = parse_node_rails(out)

    assert not rails.present
    assert rails.path == str(tmp_path / "none.conf")
    assert rails.rails == ()
    assert len(rails.guids) == 12


def test_rail_not_found_at_converge_is_recorded_with_dashes() -> None:
    # mlx5_N names on an rdma-core image: the lookup finds none of them.
    rails = parse_node_rails(rails_file("dgx-h100-rdma-core", RAILS_MLX5))

    assert [(r.hca, r.ibdev, r.netdev) for r in rails.rails] == [(name, None, None) for name in RAILS_MLX5]


def test_parser_refuses_what_is_not_a_rails_file() -> None:
    with pytest.raises(ParseError) as short:
        parse_node_rails("# header\nrail 0 0000:18:00.0 ibp24s0\n")
    assert (short.value.line_no, short.value.line) == (2, "rail 0 0000:18:00.0 ibp24s0")
    with pytest.raises(ParseError, match=r"not a line of /etc/clusterctl/rdma-rails\.conf"):
        parse_node_rails("cat: /etc/clusterctl/rdma-rails.conf: Permission denied\n")


def test_guid_forms() -> None:
    assert sysfs_guid("a088:c203:0030:5E00") == "0xa088c20300305e00"
    assert sysfs_guid("-") is None
    assert port_guid_of_gid("fe80:0000:0000:0000:a088:c203:0030:5e00") == "0xa088c20300305e00"
    assert port_guid_of_gid("a088:c203:0030:5e00") is None


# --- what the mapping refuses ------------------------------------------------------------


def test_file_of_other_rails_is_stale() -> None:
    rails = parse_node_rails(rails_file("dgx-h100-mlx5", RAILS_MLX5))

    result = rail_devices("gpu001", RAILS_PCI, rails)

    assert result.devices == ()
    assert result.problem.startswith(
        "/etc/clusterctl/rdma-rails.conf on gpu001 was written for other rails than the plan's: "
        "rail 0 is mlx5_0 there, 0000:18:00.0 in the plan; "
    )
    assert "Converge again" in result.hint


def test_spec_names_that_are_the_node_names_are_not_renamed() -> None:
    rails = parse_node_rails(rails_file("dgx-h100-mlx5", RAILS_MLX5))

    result = rail_devices("gpu001", RAILS_MLX5, rails)

    assert (result.devices, result.renamed) == (tuple(RAILS_MLX5), False)


# --- the checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(("tree", "devices"), SCHEMES)
def test_topo_and_ib_pass_on_pci_rails_under_both_naming_schemes(
    tree: str, devices: list[str], tmp_path: Path, fixtures_dir: Path
) -> None:
    plan = plan_with(tmp_path, RAILS_PCI)
    answer = node_answer(tree, RAILS_PCI, tmp_path)
    hosts = ("gpu001", "gpu002")
    answers = dict.fromkeys(hosts, answer)

    topo = run_check(TopoCheck(), plan, answers, dict.fromkeys(hosts, topo_naming(fixtures_dir, devices)))
    ib = run_check(IbCheck(), plan, answers, dict.fromkeys(hosts, ibstat(devices)))

    assert [Verdict.of(o) for o in topo + ib] == [Verdict.PASS] * 4
    assert figures_of(topo[0])["GPU1"] == f"{devices[1]} PIX"
    assert figures_of(topo[0])["rail_devices"] == ",".join(devices)
    assert figures_of(ib[0])[f"{devices[7]}/1"] == "Active LinkUp 400"


def test_the_same_outputs_judged_by_the_spec_names_would_fail(tmp_path: Path, fixtures_dir: Path) -> None:
    # What verify did before it read the rails file: the spec's mlx5 names on an rdma-core node.
    plan = plan_with(tmp_path, RAILS_MLX5)
    answer = node_answer("dgx-h100-rdma-core", RAILS_MLX5, tmp_path)
    hosts = ("gpu001", "gpu002")

    (topo, _) = run_check(TopoCheck(), plan, dict.fromkeys(hosts, answer), dict.fromkeys(hosts, ""))

    assert Verdict.of(topo) is Verdict.FAIL
    assert blame_of(topo) == ("gpu001",)
    assert topo.message.startswith(
        "rail 0 (mlx5_0), rail 1 (mlx5_3), rail 2 (mlx5_4), rail 3 (mlx5_5), rail 4 (mlx5_6), rail 5 (mlx5_9), "
        "rail 6 (mlx5_10), rail 7 (mlx5_11) had no RDMA device on gpu001 when the rdma role ran "
    )


def test_a_down_port_names_its_rail_and_device(tmp_path: Path) -> None:
    plan = plan_with(tmp_path, RAILS_PCI)
    answer = node_answer("dgx-h100-rdma-core", RAILS_PCI, tmp_path)

    (ib, _) = run_check(
        IbCheck(),
        plan,
        {"gpu001": answer, "gpu002": answer},
        {"gpu001": ibstat(RAILS_IBP, down=("ibp64s0",)), "gpu002": ibstat(RAILS_IBP)},
    )

    assert Verdict.of(ib) is Verdict.FAIL
    assert ib.message == "ibp64s0/1 is Down (Polling)."
    assert ib.hint.endswith(
        "The rails on gpu001 (/etc/clusterctl/rdma-rails.conf): rail 0 0000:18:00.0 = ibp24s0, "
        "rail 1 0000:40:00.0 = ibp64s0, rail 2 0000:4f:00.0 = ibp79s0, rail 3 0000:5e:00.0 = ibp94s0, "
        "rail 4 0000:9a:00.0 = ibp154s0, rail 5 0000:c0:00.0 = ibp192s0, rail 6 0000:ce:00.0 = ibp206s0, "
        "rail 7 0000:dc:00.0 = ibp220s0."
    )


def test_node_that_is_not_converged_is_reported(tmp_path: Path, fixtures_dir: Path) -> None:
    plan = plan_with(tmp_path, RAILS_PCI)
    answer = node_answer("dgx-h100-rdma-core", RAILS_PCI, tmp_path)
    topo_text = topo_naming(fixtures_dir, RAILS_IBP)

    outcomes = run_check(TopoCheck(), plan, {"gpu002": answer}, dict.fromkeys(("gpu001", "gpu002"), topo_text))

    first, second = outcomes
    assert Verdict.of(first) is Verdict.FAIL
    assert blame_of(first) == ("gpu001",)
    assert first.message == (
        "gpu001 has no /etc/clusterctl/rdma-rails.conf, so its rails' RDMA device names are unknown: "
        "the rdma role has not run there (the node is not converged)."
    )
    assert first.hint.startswith("Converge the node (clusterctl up SPEC)")
    assert Verdict.of(second) is Verdict.PASS


def test_rails_file_read_once_for_both_checks_and_transport_failures(tmp_path: Path) -> None:
    plan = plan_with(tmp_path, RAILS_PCI)
    answer = node_answer("dgx-h100-mlx5", RAILS_PCI, tmp_path)

    def handler(host: str, command: str) -> tuple[int, str, str] | None:
        if command == RAILS_COMMAND:
            if host == "gpu002":
                return UNREACHABLE_RC, "", "ssh: connect to host gpu002 port 22: No route to host\n"
            return 0, answer, ""
        return (0, ibstat(RAILS_MLX5), "") if command == "ibstat" else None

    executor = ReplayExecutor(handler)
    ctx = VerifyContext(plan=plan, thresholds={}, executor=executor)
    ib = IbCheck().run(ctx)
    topo = TopoCheck().run(ctx)

    assert len(executor.commands(RAILS_COMMAND)) == 2
    assert Verdict.of(ib[0]) is Verdict.PASS
    assert ib[1].message == "gpu002 could not be reached: ssh: connect to host gpu002 port 22: No route to host"
    # nvidia-smi is missing on gpu001 here: that is the check's own failure, after the rails.
    assert topo[0].message == "nvidia-smi is not installed on gpu001."
