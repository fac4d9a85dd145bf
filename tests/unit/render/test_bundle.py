"""The bundles pulling nodes apply: what is in them, what is never in them, and that they do not grow."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render.bundle import INDEX, agent_files_raw, kinds, roles_layer
from clusterctl.render.tree import bundle_files, render_files
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES
from tests.specs import example_data, group, write_spec


def _bundles(plan: Plan) -> dict[str, bytes]:
    return {f.path: f.content() for f in bundle_files(plan, render_files(plan))}


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def _files_layer(plan: Plan) -> dict[str, bytes]:
    (kind,) = kinds(plan)
    built = _bundles(plan)
    roles = roles_layer().path
    (path,) = [p for p in built if p.startswith("bundles/layers/") and p != roles]
    assert kind.nodes
    return _members(built[path])


def test_the_local_examples_gpu_nodes_share_one_bundle_and_the_others_are_pushed() -> None:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    (kind,) = kinds(plan)
    assert kind.nodes == ("gpu001", "gpu002", "gpu003", "gpu004")
    assert "compute" in kind.groups
    assert "emulated_gpu" in kind.groups
    assert not any(g.startswith("rack_") for g in kind.groups)
    files = _files_layer(plan)
    assert files["render/health/health.conf"].endswith(b"node * 8 devices - -\n")
    assert b"gpu001" not in files["render/hosts"]
    assert b"ctl001" in files["render/hosts"]
    assert "render/slurm/slurm.conf" not in files, "slurmd takes slurm.conf from slurmctld (configless)"
    assert b"SlurmctldParameters=enable_configless" in files["render/slurm/configless.conf"]
    # Clouds push their compute nodes until their provider delivers the agent; bare metal pulls.
    assert kinds(load_and_validate(EXAMPLES / "aws-p5.yaml").plan) == []
    assert kinds(load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan)


def test_bundles_are_the_same_bytes_every_time() -> None:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    assert _bundles(plan) == _bundles(plan)


def test_a_bundle_does_not_grow_with_the_node_count(tmp_path: Path) -> None:
    """4 or 512 GPU nodes: the same files layer, byte for byte (the spec at the same path)."""
    digests = []
    for count in (4, 512):
        data = example_data("local.yaml")
        group(data, "gpu")["count"] = count
        data["network"]["management_cidr"] = "172.30.0.0/22"
        plan = load_and_validate(write_spec(tmp_path, data)).plan
        built = _bundles(plan)
        digests.append(sorted(p for p in built if p.startswith("bundles/layers/")))
        assert len(kinds(plan)[0].nodes) == count
    assert digests[0] == digests[1]


def test_a_partition_change_and_another_folder_leave_the_layers_as_they_were(tmp_path: Path) -> None:
    """Configless: partitions live in slurm.conf, which slurmd takes from slurmctld; and the files name
    the spec by its file name, so the same spec in another checkout changes no node."""
    data = example_data("local.yaml")
    (tmp_path / "a").mkdir()
    plan = load_and_validate(write_spec(tmp_path / "a", data)).plan
    data["slurm"]["partitions"].append({"name": "debug", "groups": ["gpu"], "max_time": "00:30:00"})
    (tmp_path / "elsewhere").mkdir()
    moved = load_and_validate(write_spec(tmp_path / "elsewhere", data)).plan
    assert {p for p in _bundles(plan) if p.startswith("bundles/layers/")} == {
        p for p in _bundles(moved) if p.startswith("bundles/layers/")
    }
    assert "PartitionName=debug" in {f.path: f.text for f in render_files(moved)}["slurm/slurm.conf"]


def test_no_secret_is_in_any_layer(tmp_path: Path) -> None:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    state = StateDir(tmp_path, plan.cluster.name)
    munge = state.munge_key().read_bytes()
    for path, data in _bundles(plan).items():
        if not path.endswith(".tar.gz"):
            continue
        for name, content in _members(data).items():
            assert munge[:32] not in content, name
            assert b"PRIVATE KEY" not in content, name
            assert not name.startswith("secrets/"), name
            assert not name.endswith((".key", "password")), name


def test_the_roles_layer_carries_the_agent_as_its_nodes_run_it() -> None:
    members = _members(roles_layer().data)
    for name, data, _mode in agent_files_raw():
        assert members[f"agent/{name}"] == data
    assert "roles/site.yml" in members
    assert "collections/ansible_collections/clusterctl/node/plugins/callback/agent_report.py" in members
    assert not any("/molecule/" in name for name in members)


def test_the_index_names_each_kind_and_its_nodes() -> None:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    text = _bundles(plan)[INDEX].decode()
    assert '"nodes": "gpu[001-004]"' in text
