"""The CLI as a user meets it: exit codes, JSON output, messages, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from tests.conftest import EXAMPLES
from tests.specs import mutated

ONPREM = str(EXAMPLES / "onprem-h100-256.yaml")
LOCAL = str(EXAMPLES / "local.yaml")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("spec", [ONPREM, LOCAL])
def test_validate_examples(spec: str) -> None:
    code, out, _err = invoke("validate", spec)
    assert code == 0
    assert "is valid" in out


def test_validate_json_is_alone_on_stdout() -> None:
    code, out, _ = invoke("validate", ONPREM, "--output", "json")
    data = json.loads(out)
    assert code == 0
    assert (data["command"], data["ok"]) == ("validate", True)
    assert [f["code"] for f in data["findings"]] == ["GPU004"]


def test_invalid_spec_exit_1_with_located_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (EXAMPLES / "onprem-h100-256.yaml")
        .read_text()
        .replace('cuda: "12.8"', "cuda: 12.8")
        .replace("count: 32, spares: 2", "count: 32, spare: 2")
    )
    code, out, err = invoke("validate", str(bad))
    assert code == 1
    cuda_line = next(i for i, line in enumerate(bad.read_text().splitlines(), 1) if "cuda: 12.8" in line)
    assert f"{bad}:{cuda_line}:" in err
    assert "Did you mean `spares`?" in err
    assert "^" in err
    assert "Traceback" not in err + out
    code, out, _ = invoke("validate", str(bad), "-o", "json")
    findings = json.loads(out)["findings"]
    assert code == 1
    assert {f["path"] for f in findings} == {"versions.cuda", "nodes[2].spare"}
    assert all(f["line"] > 0 for f in findings)


def test_schema_errors_say_the_rules_run_once_they_are_fixed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((EXAMPLES / "local.yaml").read_text().replace('cuda: "12.8"', "cuda: 12.10"))
    code, _, err = invoke("validate", str(bad))
    assert code == 1
    assert 'write it as "12.10"' in err
    assert "The rules (references, names, network, versions, fabric, storage, sizing) run once" in err


def test_strict_fails_on_warnings(tmp_path: Path) -> None:
    def one_spare(data: dict) -> None:
        data["nodes"][2]["spares"] = 1

    spec = str(mutated(tmp_path, one_spare))
    assert invoke("validate", spec)[0] == 0
    code, _, err = invoke("validate", spec, "--strict")
    assert code == 1
    assert "HW002" in err
    assert invoke("validate", spec, "--strict", "--skip-rule", "spares")[0] == 0


def test_unknown_skip_rule_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["validate", ONPREM, "--skip-rule", "nope"])
    assert result.exit_code == 2
    assert "unknown rule" in result.output


def test_plan_json_has_the_sizing_keys() -> None:
    code, out, _ = invoke("plan", ONPREM, "--output", "json")
    data = json.loads(out)
    assert code == 0
    assert data["nodes"]["total"] == 35
    assert data["gpus"]["total"] == 256
    assert data["fabric"]["leaf_switches"] == 8
    assert data["fabric"]["spine_switches"] == 4
    for key in ("tiers", "core_switches", "node_links", "leaf_spine_links", "oversubscription"):
        assert key in data["fabric"]
    assert data["power"]["it_kw"] > 0
    assert data["power"]["max_rack_kw"] > 0
    assert next(s for s in data["storage"] if s["name"] == "ckpt")["checkpoint_write_s"] > 0
    assert set(data["workload"]) >= {"model_state_tib", "min_gpus_for_state", "train_days"}
    assert isinstance(data["findings"], list)


def test_plan_table() -> None:
    code, out, _ = invoke("plan", ONPREM)
    assert code == 0
    assert "leaf switches" in out
    assert "training time" in out


def test_render_writes_tree(tmp_path: Path) -> None:
    code, out, _ = invoke("render", LOCAL, "--out", str(tmp_path / "b"))
    assert code == 0
    assert (tmp_path / "b" / "slurm" / "slurm.conf").is_file()
    assert "rendered" in out
    # The marker's command writes the same tree again: --out included.
    rerender = (tmp_path / "b" / "DO_NOT_EDIT").read_text().splitlines()[-1]
    assert rerender == f"Re-render with: clusterctl render {LOCAL} --out {tmp_path / 'b'}"


def test_schema_is_json_schema() -> None:
    code, out, _ = invoke("schema")
    schema = json.loads(out)
    assert code == 0
    assert schema["additionalProperties"] is False
    assert "provider" in schema["properties"]


def test_missing_spec_file() -> None:
    code, _, err = invoke("validate", "no/such/spec.yaml")
    assert code == 1
    assert "Cannot read the spec" in err


def test_python_dash_m_entry_point() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "clusterctl", "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "clusterctl" in result.stdout


def test_error_location_is_printed_verbatim(tmp_path: Path) -> None:
    # rich reads ":100:" as an emoji code unless emoji output is off; a finding on line 100 must
    # still print as "file:100:col".
    bad = tmp_path / "bad.yaml"
    text = (EXAMPLES / "local.yaml").read_text().replace('cuda: "', "cuda: 1", 1)
    at = next(i for i, line in enumerate(text.splitlines(), 1) if "cuda: 1" in line)
    bad.write_text("# padding\n" * (100 - at) + text)
    cuda_line = next(i for i, line in enumerate(bad.read_text().splitlines(), 1) if "cuda: 1" in line)
    assert cuda_line == 100
    code, _out, err = invoke("validate", str(bad))
    assert code == 1
    assert f"{bad}:{cuda_line}:" in err


def test_cloud_up_without_the_pulumi_cli_stops_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    state = tmp_path / "state"
    code, _out, err = invoke("up", str(EXAMPLES / "aws-p5.yaml"), "--yes", "--state-dir", str(state))
    assert code == 1
    assert "Pulumi" in err
    assert "Nothing was created." in err
    assert not state.exists()
