"""``scontrol show node -o`` and ``show partition -o`` read the way Slurm writes them.

Records end at ``\\n`` only (Slurm writes a reason's line breaks as spaces in one-line output,
src/api/node_info.c); free text ends only at a key Slurm prints; a key that identifies a record
twice makes it ambiguous.
"""

from __future__ import annotations

import pytest

from clusterctl.slurm.nodes import by_name, parse_nodes, parse_partitions
from clusterctl.slurm.records import MAX_RECORD_CHARS, RecordError, strip_stamp
from tests.verify_testkit import scontrol_node, scontrol_partition


def test_scontrol_nodes_states_gres_and_reasons() -> None:
    text = (
        scontrol_node("gpu001")
        + scontrol_node("gpu002", state="IDLE*")
        + scontrol_node("gpu003", state="IDLE+DRAIN", reason="clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)")
        + scontrol_node("gpu004", state="DOWN+NOT_RESPONDING", reason="Not responding")
        + scontrol_node("gpu005", state="MIXED", gres="gpu:h100:8(S:0-1)")
        + scontrol_node("gpu006", state="IDLE+CLOUD+POWERED_DOWN", gres="gpu:h100:4,nic:2")
    )

    nodes = {n.name: n for n in parse_nodes(text)}

    assert (nodes["gpu001"].state, nodes["gpu001"].flags) == ("IDLE", ())
    assert nodes["gpu001"].gres_count() == 8
    assert nodes["gpu001"].gres_types() == ("h100",)
    assert nodes["gpu001"].fields["OS"] == "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1"
    assert nodes["gpu001"].partitions == ("train",)
    assert nodes["gpu002"].not_responding
    assert nodes["gpu002"].state == "IDLE"
    assert nodes["gpu003"].drained
    assert nodes["gpu003"].reason == "clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)"
    assert (nodes["gpu004"].state, nodes["gpu004"].not_responding) == ("DOWN", True)
    assert nodes["gpu005"].gres_count() == 8
    assert nodes["gpu006"].flags == ("CLOUD", "POWERED_DOWN")
    assert nodes["gpu006"].gres_count("gpu") == 4
    assert nodes["gpu006"].gres_count("nic") == 2


def test_scontrol_nodes_without_gres() -> None:
    (node,) = parse_nodes(scontrol_node("cpu001", gres="(null)"))

    assert node.gres == ()
    assert node.gres_count() == 0


def test_scontrol_controller_unreachable() -> None:
    text = "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"

    with pytest.raises(RecordError) as err:
        parse_nodes(text)

    assert (err.value.line_no, err.value.line) == (1, text.rstrip("\n"))


def test_scontrol_bad_gres() -> None:
    with pytest.raises(RecordError, match="Gres entry"):
        parse_nodes(scontrol_node("gpu001", gres="gpu:h100:eight"))


def test_scontrol_partitions() -> None:
    text = scontrol_partition("train", "gpu[001-030]") + scontrol_partition("debug", "gpu[001-030]", state="DOWN")

    parts = {p.name: p for p in parse_partitions(text)}

    assert parts["train"].nodes == "gpu[001-030]"
    assert (parts["train"].state, parts["debug"].state) == ("UP", "DOWN")
    with pytest.raises(RecordError, match="PartitionName"):
        parse_partitions("garbage\n")


@pytest.mark.parametrize("separator", ["\x1e", "\x1c", "\x1d", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\r"])
def test_a_record_separator_in_a_reason_does_not_start_a_record(separator: str) -> None:
    forged = f"keep out{separator}NodeName=gpu002 State=IDLE+DRAIN Partitions=train Reason=clusterctl-health: y"
    text = scontrol_node("gpu001") + scontrol_node("gpu002", state="IDLE+DRAIN", reason=forged)

    nodes = by_name(parse_nodes(text))

    assert sorted(nodes) == ["gpu001", "gpu002"]
    # The forged State= and Reason= inside the admin's reason make the record ambiguous: never acted on.
    assert nodes["gpu002"].ambiguous
    assert nodes["gpu002"].reason.startswith("keep out")


def test_a_forged_second_record_for_a_node_makes_both_ambiguous() -> None:
    text = (
        scontrol_node("gpu002", state="IDLE+DRAIN", reason="keep out")
        + "NodeName=gpu002 State=IDLE+DRAIN Partitions=train Reason=clusterctl-health: y\n"
    )

    nodes = parse_nodes(text)

    assert [n.ambiguous for n in nodes] == [True, True]
    assert by_name(nodes)["gpu002"].reason == "keep out"


def test_free_text_holds_key_value_words_that_are_not_slurm_keys() -> None:
    (node,) = parse_nodes(scontrol_node("gpu001", state="IDLE+DRAIN", reason="bios=2.1 fan=3 ticket 4711"))

    assert node.reason == "bios=2.1 fan=3 ticket 4711"
    assert not node.ambiguous


def test_the_reason_ends_at_the_fields_slurm_prints_after_it() -> None:
    line = scontrol_node("gpu001", state="IDLE+DRAIN", reason="keep out").rstrip("\n")

    (node,) = parse_nodes(line + " Comment=rack B Extra={json} ReservationName=maint\n")

    assert node.reason == "keep out"
    assert (node.fields["Comment"], node.fields["ReservationName"]) == ("rack B", "maint")


def test_a_reason_in_a_comment_cannot_stand_in_for_the_real_one() -> None:
    line = scontrol_node("gpu001", state="IDLE+DRAIN", reason="keep out").rstrip("\n")

    (node,) = parse_nodes(line + " Comment=x Reason=clusterctl-health: y\n")

    assert node.ambiguous
    assert node.reason == "keep out"


def test_a_node_name_that_is_not_one_is_never_trusted() -> None:
    (node,) = parse_nodes(scontrol_node("-oProxyCommand=touch", state="IDLE+DRAIN", reason="clusterctl-health: x"))

    assert node.ambiguous


def test_the_stamp_slurm_appends_is_removed_and_a_forged_stamp_stays_text() -> None:
    assert strip_stamp("fan broken [root@2026-11-30T04:00:00]") == "fan broken"
    assert strip_stamp("a [x@y] b [slurm@2026-11-30T04:00:00] c") == "a [x@y] b c"


def test_huge_counts_and_records_are_errors_not_crashes() -> None:
    with pytest.raises(RecordError, match="Gres entry"):
        parse_nodes(scontrol_node("gpu001", gres="gpu:h100:" + "9" * 5000))
    with pytest.raises(RecordError, match="more than"):
        parse_nodes("NodeName=x Reason=" + "a" * (MAX_RECORD_CHARS + 1))


def test_unreadable_states_read_as_unknown() -> None:
    (node,) = parse_nodes(scontrol_node("gpu001", state="IDLE+DRA\x1bIN"))

    assert (node.state, node.flags) == ("UNKNOWN", ())
