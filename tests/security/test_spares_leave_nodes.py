"""A group whose spares are all its nodes is refused: Slurm would get a partition without nodes.

Spares are the last ``spares`` nodes of a group, registered but in no partition; with
``spares >= count`` nothing is left in service and the rendered slurm.conf would carry
``PartitionName=... Nodes=`` with an empty list (slurmctld refuses such a partition, so the
whole cluster's scheduler would not start).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate
from clusterctl.spec import SpecError
from tests.specs import group, mutated


@pytest.mark.parametrize("spares", [4, 5])
def test_spares_not_fewer_than_count_are_refused_at_their_line(tmp_path: Path, spares: int) -> None:
    path = mutated(tmp_path, lambda d: group(d, "gpu").update(count=4, spares=spares), base="local.yaml")
    with pytest.raises(SpecError) as info:
        load_and_validate(path)
    finding = next(f for f in info.value.findings if f.dotted_path.endswith(".spares"))
    assert finding.file == str(path)
    assert finding.line == next(n for n, line in enumerate(path.read_text().splitlines(), 1) if "spares:" in line)
    assert "leave none in service" in finding.message


def test_one_node_left_in_service_keeps_the_partition(tmp_path: Path) -> None:
    path = mutated(tmp_path, lambda d: group(d, "gpu").update(count=4, spares=3), base="local.yaml")
    validated = load_and_validate(path)
    conf = next(f.text for f in validated.files if f.path == "slurm/slurm.conf")
    partition = next(line for line in conf.splitlines() if line.startswith("PartitionName=gpu "))
    assert " Nodes=gpu001 " in partition
