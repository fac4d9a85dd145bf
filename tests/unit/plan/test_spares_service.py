"""Hot spares in the plan: a recorded swap moves a spare into the failed node's partitions and back out of none."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clusterctl.ops.readiness import Readiness, check_slurm
from clusterctl.pipeline import load_and_validate
from clusterctl.plan.service import Swap, SwapError, applied, choose_spare, place, read_swaps, spec_roles
from clusterctl.render import render_files
from clusterctl.run.state import SWAPS_KEY, StateDir
from tests.conftest import EXAMPLES
from tests.verify_testkit import ReplayExecutor, scontrol_node


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    """examples/local.yaml with five GPU nodes, two of them spares: gpu004 (leaf-r02) and gpu005 (leaf-r03)."""
    data = yaml.safe_load((EXAMPLES / "local.yaml").read_text())
    gpu = next(g for g in data["nodes"] if g["group"] == "gpu")
    gpu.update(count=5, spares=2)
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _plan(spec: Path, tmp_path: Path, *swaps: Swap):
    state = StateDir(tmp_path / "state", "local")
    state.write({SWAPS_KEY: [s.to_dict() for s in swaps]})
    return load_and_validate(spec, state_root=tmp_path / "state").plan


def _partition(plan) -> str:
    return next(p.hosts for p in plan.slurm.partitions if p.name == "gpu")


def test_without_swaps_the_last_nodes_are_free_spares(spec: Path, tmp_path: Path) -> None:
    plan = _plan(spec, tmp_path)
    assert [n.hostname for n in plan.nodes if n.spare] == ["gpu004", "gpu005"]
    assert _partition(plan) == "gpu[001-003]"
    assert plan.slurm.spares == "gpu[004-005]"
    assert plan.slurm.replaced is None


def test_a_swap_puts_the_spare_in_the_partition_and_the_failed_node_out(spec: Path, tmp_path: Path) -> None:
    plan = _plan(spec, tmp_path, Swap("gpu002", "gpu005"))
    assert _partition(plan) == "gpu[001,003,005]"
    assert plan.node("gpu005").replaces == "gpu002"
    assert plan.node("gpu005").in_service
    assert plan.node("gpu002").replaced_by == "gpu005"
    assert not plan.node("gpu002").in_service
    assert plan.slurm.spares == "gpu004"
    assert plan.slurm.replaced == "gpu002"
    assert plan.gpus.active == 3 * 8
    conf = next(f.text for f in render_files(plan) if f.path == "slurm/slurm.conf")
    assert "PartitionName=gpu Nodes=gpu[001,003,005]" in conf
    assert "# Replaced by a spare (clusterctl node replace) gpu002" in conf
    # Every node stays defined: the replaced one keeps its NodeName line (and its drain) while out of service.
    assert "NodeName=gpu[001-005]" in conf


def test_a_returned_node_is_a_free_spare_and_its_spare_stays_in_service(spec: Path, tmp_path: Path) -> None:
    plan = _plan(spec, tmp_path, Swap("gpu002", "gpu005", returned=True))
    assert _partition(plan) == "gpu[001,003,005]"
    assert [n.hostname for n in plan.nodes if n.spare] == ["gpu002", "gpu004"]
    assert plan.slurm.replaced is None


def test_swaps_apply_in_order_so_a_returned_node_can_replace_its_own_spare(spec: Path, tmp_path: Path) -> None:
    swaps = (Swap("gpu002", "gpu005", returned=True), Swap("gpu005", "gpu002"))
    plan = _plan(spec, tmp_path, *swaps)
    assert _partition(plan) == "gpu[001-003]"
    assert plan.node("gpu005").replaced_by == "gpu002"
    assert plan.node("gpu002").replaces == "gpu005"


def test_a_swap_the_spec_no_longer_allows_is_skipped(spec: Path, tmp_path: Path) -> None:
    profiles = {"gpu001": ("h", False), "gpu002": ("h", False), "gpu003": ("h", True), "cpu001": ("c", True)}
    swaps = [
        Swap("gpu001", "gpu009"),  # no such spare (removed from the spec)
        Swap("gpu001", "gpu002"),  # gpu002 is not a spare
        Swap("gpu001", "cpu001"),  # another hardware profile
        Swap("gpu001", "gpu003"),
        Swap("gpu002", "gpu003"),  # gpu003 is in service by now
    ]
    placed = place(profiles, swaps)
    assert placed["gpu001"].replaced_by == "gpu003"
    assert placed["gpu002"].role == "active"
    assert applied(profiles, swaps) == [Swap("gpu001", "gpu003")]


def test_the_spare_on_the_failed_nodes_leaf_is_chosen_first(spec: Path, tmp_path: Path) -> None:
    plan = _plan(spec, tmp_path)
    assert choose_spare(plan, "gpu003").hostname == "gpu004"  # leaf-r02, like gpu003
    assert choose_spare(plan, "gpu001").hostname == "gpu004"  # no spare on leaf-r01: the first free one
    assert choose_spare(plan, "gpu003", {"gpu004": "Slurm state DOWN"}).hostname == "gpu005"


@pytest.mark.parametrize(
    ("node", "unusable", "says"),
    [
        ("gpu009", {}, "is not a node of cluster local"),
        ("login001", {}, "is a login node"),
        ("gpu004", {}, "is a free spare"),
        ("gpu001", {"gpu004": "Slurm state DOWN", "gpu005": "Slurm state IDLE+DRAIN"}, "gpu004: Slurm state DOWN"),
    ],
)
def test_what_cannot_be_replaced_says_why(spec: Path, tmp_path: Path, node: str, unusable: dict, says: str) -> None:
    with pytest.raises(SwapError, match=says):
        choose_spare(_plan(spec, tmp_path), node, unusable)


def test_a_replaced_node_cannot_be_replaced_again(spec: Path, tmp_path: Path) -> None:
    with pytest.raises(SwapError, match="already replaced by gpu005"):
        choose_spare(_plan(spec, tmp_path, Swap("gpu002", "gpu005")), "gpu002")


def test_without_spares_the_error_says_how_to_have_them(tmp_path: Path) -> None:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    with pytest.raises(SwapError, match="give a group of that profile `spares:`"):
        choose_spare(plan, "gpu001")


@pytest.mark.parametrize("records", [{"failed": "gpu001"}, ["gpu001"], [{"failed": "gpu001", "spare": 3}]])
def test_a_record_clusterctl_did_not_write_is_refused(records: object) -> None:
    with pytest.raises(SwapError, match=r"not a swap record|is not a list"):
        read_swaps(records)


def test_the_spec_roles_are_what_the_plan_starts_from_whatever_the_swaps(spec: Path, tmp_path: Path) -> None:
    plan = _plan(spec, tmp_path, Swap("gpu002", "gpu005"))
    roles = spec_roles(plan)
    assert {h for h, (_, spare) in roles.items() if spare} == {"gpu004", "gpu005"}
    assert applied(roles, [Swap("gpu002", "gpu005")]) == [Swap("gpu002", "gpu005")]


def test_a_spec_without_the_spare_drops_its_swap(tmp_path: Path) -> None:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    assert applied(spec_roles(plan), [Swap("gpu002", "gpu005", returned=True)]) == []


def test_readiness_notes_a_drained_free_spare_and_skips_a_replaced_node(spec: Path, tmp_path: Path) -> None:
    plan = _plan(spec, tmp_path, Swap("gpu002", "gpu005"))
    listing = "".join(
        scontrol_node(h, state=s, reason=r)
        for h, s, r in [
            ("gpu001", "IDLE", ""),
            ("gpu002", "DOWN*", "Not responding"),
            ("gpu003", "MIXED", ""),
            ("gpu004", "IDLE+DRAIN", "bad fan"),
            ("gpu005", "IDLE", ""),
        ]
    )
    result = Readiness()
    check_slurm(plan, ReplayExecutor(lambda host, command: (0, listing, "")), result, timeout=0)
    assert result.problems == []
    assert result.notes == [
        "spare gpu004 is drained (bad fan); `clusterctl node replace` does not take it until resumed"
    ]
    assert "gpu002" not in result.node_states
    assert result.node_states == {"gpu001": "idle", "gpu003": "mixed", "gpu004": "drained", "gpu005": "idle"}
