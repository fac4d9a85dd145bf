"""Every judging command's --output json follows docs/schemas/report.schema.json.

One test per command (validate, verify, fabric check, fabric lint, check-output), each on a
passing and a failing run and on a run that stops early (invalid spec, unreadable input), so
the schema is held to what the commands print, and they to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.report import SCHEMA_VERSION
from tests.cli.test_fabric_cli import write_fabric
from tests.cli.test_verify_cli import _local_cluster, _verify
from tests.conftest import EXAMPLES, REPO_ROOT

SCHEMA = json.loads((REPO_ROOT / "docs" / "schemas" / "report.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
ONPREM = EXAMPLES / "onprem-h100-256.yaml"
LOCAL = EXAMPLES / "local.yaml"


def _conforms(text: str, command: str) -> dict[str, Any]:
    data = json.loads(text)
    errors = sorted(VALIDATOR.iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    assert (data["schema_version"], data["command"]) == (SCHEMA_VERSION, command)
    counts = {level: sum(1 for f in data["findings"] if f["level"] == level) for level in ("error", "warning", "info")}
    assert data["counts"] == counts
    return data


def _invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*map(str, args), "--output", "json"], catch_exceptions=False)
    return result.exit_code, result.stdout


def _bad_spec(tmp_path: Path) -> Path:
    bad = tmp_path / "bad.yaml"
    bad.write_text(ONPREM.read_text().replace("count: 32, spares: 2", "count: 32, spare: 2"))
    return bad


def test_the_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"] == {"const": SCHEMA_VERSION}


def test_validate(tmp_path: Path) -> None:
    code, out = _invoke("validate", ONPREM)
    data = _conforms(out, "validate")
    assert (code, data["ok"], data["counts"]["info"]) == (0, True, 1)

    code, out = _invoke("validate", _bad_spec(tmp_path))
    data = _conforms(out, "validate")
    assert (code, data["ok"], data["stopped"]) == (1, False, "spec")
    assert [f["path"] for f in data["findings"]] == ["nodes[2].spare"]


def test_verify(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = _verify(monkeypatch, _local_cluster(), "--out", str(tmp_path), "--output", "json")
    data = _conforms(result.stdout, "verify")
    assert (result.exit_code, data["ok"]) == (0, True)
    assert _conforms((tmp_path / "verify" / "report.json").read_text(), "verify")["ok"] is True

    result = _verify(monkeypatch, _local_cluster(dead="gpu004"), "--out", str(tmp_path), "--output", "json")
    data = _conforms(result.stdout, "verify")
    assert (result.exit_code, data["ok"], data["failing_nodes"]) == (1, False, ["gpu004"])
    (dead,) = [f for f in data["findings"] if f["code"] == "slurm.slurmd" and f["node"] == "gpu004"]
    assert (dead["level"], dead["rule"], dead["data"]["blame"]) == ("error", "slurm", ["gpu004"])

    code, out = _invoke("verify", _bad_spec(tmp_path))
    assert (code, _conforms(out, "verify")["stopped"]) == (1, "spec")


def test_verify_report_with_every_kind_of_result(tmp_path: Path, fixtures_dir: Path) -> None:
    """The runner's report over a 64-node plan: NCCL phases, storage tiers, drains, failures."""
    from clusterctl.verify.acceptance import thresholds_by_hardware
    from clusterctl.verify.base import VerifyOptions
    from clusterctl.verify.runner import drain_failures, run_verify
    from tests.unit.verify.test_runner import Cluster
    from tests.verify_testkit import ReplayExecutor, real_gpu_plan

    plan = real_gpu_plan(tmp_path)
    executor = ReplayExecutor(Cluster(plan, fixtures_dir))
    report = drain_failures(
        run_verify(plan, thresholds_by_hardware(plan, None), executor, VerifyOptions()), plan, executor
    )
    data = _conforms(json.dumps(report.to_dict(), default=str), "verify")
    phases = {f["data"].get("phase") for f in data["findings"] if f["rule"] == "nccl"}
    assert phases == {"single", "pairs", "group", "cross", "full"}
    assert {f["data"].get("tier") for f in data["findings"] if f["rule"] == "storage"} >= {"datasets", "ckpt"}


def test_fabric_check(tmp_path: Path) -> None:
    code, out = _invoke("fabric", "check", LOCAL, "--ibnetdiscover", write_fabric(tmp_path))
    assert (code, _conforms(out, "fabric check")["ok"]) == (0, True)

    fabric = write_fabric(tmp_path, "moved.txt", move_gpu002_rail7=True)
    code, out = _invoke("fabric", "check", LOCAL, "--ibnetdiscover", fabric)
    data = _conforms(out, "fabric check")
    assert (code, data["ok"], [f["code"] for f in data["findings"]]) == (1, False, ["FAB-C002"])

    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not a fabric\n")
    code, out = _invoke("fabric", "check", LOCAL, "--ibnetdiscover", garbage)
    data = _conforms(out, "fabric check")
    assert (code, data["stopped"], data["findings"][0]["code"]) == (2, "input", "INPUT-unreadable")


def test_fabric_lint(tmp_path: Path, fixtures_dir: Path) -> None:
    clean = fixtures_dir / "slurm" / "azslurm_topo_slurm_topology.txt"
    code, out = _invoke("fabric", "lint", clean)
    assert (code, _conforms(out, "fabric lint")["findings"]) == (0, [])

    superpod = fixtures_dir / "slurm" / "topology_conf_nvidia_circe_superpod.conf"
    code, out = _invoke("fabric", "lint", superpod, "--spec", LOCAL)
    data = _conforms(out, "fabric lint")
    assert (code, data["ok"]) == (1, False)
    assert {f["code"] for f in data["findings"]} >= {"FAB-L001", "FAB-L002", "FAB-L003"}

    code, out = _invoke("fabric", "lint", superpod, "--spec", _bad_spec(tmp_path))
    assert (code, _conforms(out, "fabric lint")["stopped"]) == (1, "spec")


def test_check_output(tmp_path: Path, fixtures_dir: Path) -> None:
    degraded = fixtures_dir / "nccl" / "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt"
    code, out = _invoke("check-output", "nccl-tests", degraded, "--spec", ONPREM)
    data = _conforms(out, "check-output")
    assert (code, data["ok"], data["verdict"], data["findings"][0]["level"]) == (1, False, "fail", "error")

    healthy = fixtures_dir / "nccl" / "nccl_allreduce_2x_p5_awsome.txt"
    code, out = _invoke("check-output", "nccl-tests", healthy, "--spec", EXAMPLES / "aws-p5.yaml", "--nodes", "2")
    assert (code, _conforms(out, "check-output")["verdict"]) == (0, "pass")

    log = Path(__file__).resolve().parents[1] / "unit" / "verify" / "data" / "nccl_debug" / "fastrak_2node_a3mega.log"
    code, out = _invoke("check-output", "nccl-debug", log, "--spec", EXAMPLES / "gcp-a3mega.yaml")
    data = _conforms(out, "check-output")
    assert (code, data["expected"]["fabric"]) == (0, "gpudirect-tcpxo")

    garbage = tmp_path / "garbage.txt"
    garbage.write_text("this is not\nan nccl-tests output\n")
    code, out = _invoke("check-output", "nccl-tests", garbage)
    data = _conforms(out, "check-output")
    assert (code, data["stopped"], data["verdict"]) == (2, "input", "unreadable")

    code, out = _invoke("check-output", "nccl-tests", degraded, "--spec", _bad_spec(tmp_path))
    assert (code, _conforms(out, "check-output")["stopped"]) == (1, "spec")


def test_a_document_that_breaks_the_schema_is_caught() -> None:
    """The schema can fail: a finding without its data, a count of the wrong type, a stray key."""
    _, out = _invoke("validate", ONPREM)
    good = json.loads(out)
    broken = [
        {**good, "findings": [{k: v for k, v in good["findings"][0].items() if k != "data"}]},
        {**good, "counts": {**good["counts"], "error": "0"}},
        {**good, "findings": [{**good["findings"][0], "level": "fatal"}]},
        {**good, "schema_version": 2},
        {**good, "findings": [{**good["findings"][0], "severity": "info"}]},
    ]
    for document in broken:
        assert not VALIDATOR.is_valid(document)
