"""Property: whatever the spec file holds, validate, plan and render answer, never crash.

Complements ``test_property_mutations.py`` (edits of the on-prem example as data, through the
library's validation only): here documents also come from the local example, from edits of
the YAML *text*, from YAML's own syntax (anchors, tags, directives) and from random bytes,
and each goes through the CLI (``validate``, ``plan``, ``render``) as a user runs it and
through the library down to the files on disk. For every document:

- no traceback and no internal error (exit 70): the CLI exits 0 or 1 only;
- the CLI and the library agree on whether the spec is valid;
- a rejection carries findings, each with a message and a place (file, and a line unless it
  concerns the whole document);
- a valid spec plans and renders, and its build directory is written.

The seed is fixed (``derandomize``): the same documents every run. A few hundred under CI
(``CI=true``), fewer locally. No timing here: ``benchmarks/property_pipeline.py`` runs the
same documents and prints the slowest.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from clusterctl.commands import cli
from clusterctl.pipeline import load_and_validate, render
from clusterctl.spec import Finding, SpecError
from tests.property_specs import Document, documents

EXAMPLES_CI = 300
EXAMPLES_LOCAL = 40
MAX_EXAMPLES = EXAMPLES_CI if os.environ.get("CI", "").lower() == "true" else EXAMPLES_LOCAL

PIPELINE_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _assert_clean(code: int, out: str, err: str, what: str) -> None:
    assert code in (0, 1), f"{what}: exit {code}\n{err[-2000:]}"
    assert "Traceback" not in out + err, f"{what}: traceback\n{err[-2000:]}"
    assert "internal error" not in err, f"{what}: internal error\n{err[-2000:]}"


def _assert_located(finding: Finding, spec: Path) -> None:
    assert finding.message.strip(), f"finding without a message: {finding}"
    assert finding.file, f"finding without a file: {finding}"
    if finding.file == str(spec) and finding.path:
        assert finding.line > 0, f"finding on a field without a line: {finding}"


def check_document(doc: Document, folder: Path) -> None:
    """Run one document through the CLI and the library; assert the properties above."""
    spec = doc.write(folder)

    code, out, err = _invoke("validate", str(spec), "--output", "json")
    _assert_clean(code, out, err, "validate")
    verdict = json.loads(out)
    assert verdict["ok"] is (code == 0), f"validate says ok={verdict['ok']} with exit {code}"
    if code == 1:
        assert verdict["findings"], "a rejected spec has findings"
        assert all(f["message"] for f in verdict["findings"])

    code_plan, out, err = _invoke("plan", str(spec), "--output", "json")
    _assert_clean(code_plan, out, err, "plan")
    assert code_plan == code, f"validate exits {code}, plan {code_plan}"

    code_render, out, err = _invoke("render", str(spec), "--out", str(folder / "cli-build"))
    _assert_clean(code_render, out, err, "render")
    assert code_render == code, f"validate exits {code}, render {code_render}"

    try:
        validated = load_and_validate(spec)
    except SpecError as exc:
        rejection: SpecError | None = exc
    else:
        rejection = None
    if rejection is not None:
        assert code == 1, "the library rejects what the CLI accepted"
        assert rejection.findings, "a SpecError carries findings"
        for finding in rejection.findings:
            _assert_located(finding, spec)
        return
    assert code == 0, "the library accepts what the CLI rejected"
    out_dir, changed = render(validated, folder / "lib-build")
    assert changed, "a first render writes files"
    assert (out_dir / "slurm" / "slurm.conf").is_file()


@PIPELINE_SETTINGS
@given(documents())
def test_any_spec_document_is_answered_without_a_crash(doc: Document) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_document(doc, Path(tmp))
