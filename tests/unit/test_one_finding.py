"""One Finding type and one Level in the whole package, and no markup written in Python.

Validation, rules, verify, check-output, fabric check and fabric lint all report through
`clusterctl.spec.findings.Finding` with its `Level`: this imports every module of the package
and looks for any other finding or level type, then runs each producer and checks what it
returns. Text for people (HTML, CSS) comes from templates/, so no .py file writes markup.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Literal, get_origin

import pytest

import clusterctl
from clusterctl.catalog.tools import RAILS_PATH
from clusterctl.fabric.compare import compare_fabric
from clusterctl.fabric.expected import expected_fabric
from clusterctl.fabric.lint import lint_topology_conf
from clusterctl.fabric.parsers import parse_ibnetdiscover
from clusterctl.pipeline import load_and_validate
from clusterctl.report import unreadable
from clusterctl.spec import SpecError
from clusterctl.spec.findings import Finding, Level
from clusterctl.verify.fabric import judge_ibstat
from clusterctl.verify.gpu import judge_dcgm
from clusterctl.verify.nccl import judge_nccl
from clusterctl.verify.offline import DEFAULT_GPU_MODEL, Marks, judge_output
from clusterctl.verify.parsers.dcgmi_diag import parse_dcgmi_diag
from clusterctl.verify.parsers.ibstat import parse_ibstat
from clusterctl.verify.parsers.nccl_tests import parse_nccl_tests
from clusterctl.verify.thresholds import defaults_for
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.verify_testkit import ibstat

# Names an old finding type had; none may come back under another module.
RETIRED = {"CheckResult", "Outcome", "LintFinding", "CablingFinding"}


def _modules() -> list[ModuleType]:
    names = [m.name for m in pkgutil.walk_packages(clusterctl.__path__, "clusterctl.")]
    return [importlib.import_module(name) for name in sorted(names)]


MODULES = _modules()


def test_every_module_imports() -> None:
    assert len(MODULES) > 100
    assert "clusterctl.verify.gpu" in {m.__name__ for m in MODULES}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_no_other_finding_or_level_type(module: ModuleType) -> None:
    for name, value in vars(module).items():
        assert name not in RETIRED, f"{module.__name__}.{name}"
        if inspect.isclass(value) and value.__module__ == module.__name__:
            assert not (name.endswith("Finding") and value is not Finding), f"{module.__name__}.{name}"
            assert not (name == "Level" and value is not Level), f"{module.__name__}.{name}"
            # No other severity scale either: an enum with an error/warning member.
            if issubclass(value, enum.Enum) and value is not Level:
                members = {m.name.lower() for m in value}
                assert not {"error", "warning"} <= members, f"{module.__name__}.{name} is another Level"
        if name == "Level":
            assert value is Level, f"{module.__name__}.Level is not the one Level"
        if get_origin(value) is Literal and "level" in name.lower():
            pytest.fail(f"{module.__name__}.{name} is a Literal level")


def _assert_findings(findings: list[Finding]) -> None:
    assert findings
    for finding in findings:
        assert type(finding) is Finding
        assert type(finding.level) is Level
        assert finding.to_dict()["level"] in {"error", "warning", "info"}


def test_spec_and_rules_produce_findings(tmp_path: Path) -> None:
    _assert_findings(load_and_validate(EXAMPLES / "onprem-h100-256.yaml").findings)
    bad = tmp_path / "bad.yaml"
    bad.write_text((EXAMPLES / "onprem-h100-256.yaml").read_text().replace('cuda: "12.8"', "cuda: 12.8"))
    with pytest.raises(SpecError) as info:
        load_and_validate(bad)
    _assert_findings(info.value.findings)


def test_fabric_produces_findings(fixtures_dir: Path, tmp_path: Path) -> None:
    superpod = (fixtures_dir / "slurm" / "topology_conf_nvidia_circe_superpod.conf").read_text()
    _assert_findings(lint_topology_conf(superpod, {"nobody"}, file="topology.conf"))
    from tests.cli.test_fabric_cli import write_fabric

    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    text = Path(write_fabric(tmp_path, move_gpu002_rail7=True)).read_text()
    report = compare_fabric(parse_ibnetdiscover(text), expected_fabric(plan))
    _assert_findings(list(report.findings))
    assert report.findings[0].rule == "node-on-two-leaves"
    assert report.findings[0].cable.startswith("gpu002 mlx5_7 -> ")


def test_verify_and_check_output_produce_findings(fixtures_dir: Path) -> None:
    nccl = parse_nccl_tests(
        (fixtures_dir / "nccl" / "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt").read_text()
    )
    dcgm = parse_dcgmi_diag((fixtures_dir / "dcgm" / "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt").read_text())
    _assert_findings(
        [
            judge_nccl(nccl, 338.4),
            judge_dcgm(dcgm, min_level=3),
            judge_ibstat(parse_ibstat(ibstat(["mlx5_0"], down=("mlx5_0",))), 400.0),
            unreadable("x.txt", "no rows", line_no=3, line="junk"),
        ]
    )
    marks = Marks(source="defaults", thresholds=defaults_for(DEFAULT_GPU_MODEL, 8, 8, 400, None))
    result, _notes = judge_output(
        "nccl-tests", (fixtures_dir / "nccl" / "nccl_allreduce_2x_p5_awsome.txt").read_text(), marks
    )
    _assert_findings([result])


def test_verify_checks_run_on_a_cluster_produce_findings(tmp_path: Path, fixtures_dir: Path) -> None:
    from clusterctl.verify.acceptance import thresholds_by_hardware
    from clusterctl.verify.base import VerifyOptions
    from clusterctl.verify.runner import run_verify
    from tests.unit.verify.test_runner import Cluster
    from tests.verify_testkit import ReplayExecutor, real_gpu_plan

    plan = real_gpu_plan(tmp_path)
    executor = ReplayExecutor(Cluster(plan, fixtures_dir))
    report = run_verify(plan, thresholds_by_hardware(plan, None), executor, VerifyOptions())
    _assert_findings(report.findings)
    # Every check that ran said something (packages runs only with a clusterctl.lock).
    assert {f.rule for f in report.findings} == set(report.checks) - {"packages"}


# --- no markup in Python -------------------------------------------------------------------------

# Built from pieces so this file does not match itself.
_MARKUP = re.compile("<" + "(?:html|table|div|style)\\b", re.IGNORECASE)
# A CSS declaration: a property with a value only CSS gives it (a colour, a length, a layout word).
_CSS = re.compile(
    r"\b(?:background(?:-color)?|color|font-(?:family|size|weight)|border(?:-[a-z]+)?|margin|padding|display|"
    r"grid-template-columns)\s*:\s*(?:#[0-9a-fA-F]{3,8}\b|-?\d+(?:\.\d+)?(?:px|em|rem|%)|(?:hsl|rgb)a?\(|"
    r"(?:flex|grid|none|solid|inline-block)\b)"
)


def _python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [REPO_ROOT / name for name in listed if (REPO_ROOT / name).is_file()]


def test_no_html_or_css_in_python() -> None:
    files = _python_files()
    assert any(f.name == "report.py" for f in files)
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:80]}"
        for path in files
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if _MARKUP.search(line) or _CSS.search(line)
    ]
    assert found == []


def test_the_markup_check_can_fail() -> None:
    assert _MARKUP.search('page = "<' + 'table id=x>"')
    assert _CSS.search("css = 'body{" + "background:" + "#fff}'")
    assert _CSS.search(".tile{" + "display:" + "flex;" + "border-radius:" + "4px}")
    assert not _CSS.search("margin = 3  # the margin: how far above the mark")


# --- the judges import without the CLI's dependencies (tests/gpu runs them on a bare python3) -----


def test_judges_import_without_pydantic_jinja_click_or_rich() -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pydantic', 'jinja2', 'click', 'rich', 'ruamel', 'yaml'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"sys.path.insert(0, {str(REPO_ROOT / 'cli')!r})\n"
        "import clusterctl.verify.checks, clusterctl.verify.offline, clusterctl.verify.transport\n"
        "print('pure')\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "pure"), done.stderr[-2000:]
    assert RAILS_PATH.startswith("/etc/clusterctl/")
