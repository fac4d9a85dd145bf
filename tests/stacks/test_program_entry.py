"""Each cloud program as Pulumi runs it: its ``__main__.py`` reads the rendered plan and makes the cluster.

The programs share their entry point, arguments and outputs (``clusterctl_stack.run_program`` and
``deploy_cloud``); this runs each ``__main__.py`` under the mocks with the plan clusterctl renders.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pulumi
import pytest

from clusterctl_stack import PLAN_ENV  # isort: skip

from tests.stacks.conftest import STACKS, example_plan, run

PROGRAMS = [("aws", "aws-p5.yaml"), ("gcp", "gcp-a3mega.yaml"), ("azure", "azure-ndv5.yaml")]


@pytest.mark.parametrize(("program", "example"), PROGRAMS)
def test_main_makes_the_cluster_of_the_rendered_plan(
    program: str, example: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = example_plan(example)
    path = tmp_path / "plan.json"
    path.write_text(plan.model_dump_json())
    monkeypatch.setenv(PLAN_ENV, str(path))
    pulumi.runtime.set_all_config({"clusterctl:sshPublicKey": "ssh-ed25519 AAAAentry clusterctl"})
    try:
        mocks = run(lambda: runpy.run_path(str(STACKS / program / "__main__.py"), run_name="__main__"))
    finally:
        pulumi.runtime.set_all_config({})

    (cluster,) = mocks.of_type(f"clusterctl:{program}:Cluster")
    assert cluster.name == plan.cluster.name
    made = {r.name for r in mocks.resources}
    assert {f"{plan.cluster.name}-{group.group}" for group in plan.cloud.groups} <= made  # type: ignore[union-attr]


def test_a_missing_plan_is_named() -> None:
    path = "/nonexistent/plan.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PLAN_ENV, path)
        with pytest.raises(Exception, match="does not exist; run `clusterctl render` first"):
            run(lambda: runpy.run_path(str(STACKS / "aws" / "__main__.py"), run_name="__main__"))
