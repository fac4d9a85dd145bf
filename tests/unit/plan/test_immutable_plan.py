"""The plan is built once and never changed; its provider block is typed per provider."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.plan.models import ClusterInfo
from clusterctl.render.tree import render_files
from clusterctl.spec.providers import AwsProvider, AzureProvider, BaremetalProvider, GcpProvider, LocalProvider
from tests.conftest import EXAMPLES
from tests.plan_edits import replaced

# Each example's provider: the typed model the plan carries and the SSH user clusterctl logs in as.
PROVIDERS: dict[str, tuple[type[BaseModel], str]] = {
    "local.yaml": (LocalProvider, "root"),
    "onprem-h100-256.yaml": (BaremetalProvider, "ubuntu"),
    "aws-p5.yaml": (AwsProvider, "ubuntu"),
    "gcp-a3mega.yaml": (GcpProvider, "ubuntu"),
    "azure-ndv5.yaml": (AzureProvider, "azureuser"),
}


def _plan(example: str) -> Plan:
    return load_and_validate(EXAMPLES / example).plan


def _models(value: Any) -> list[BaseModel]:
    """Every model in ``value``, nested ones included."""
    if isinstance(value, BaseModel):
        return [value, *(m for name in type(value).model_fields for m in _models(getattr(value, name)))]
    if isinstance(value, list | tuple):
        return [m for item in value for m in _models(item)]
    if isinstance(value, dict):
        return [m for item in value.values() for m in _models(item)]
    return []


@pytest.mark.parametrize("example", ["onprem-h100-256.yaml", "gcp-a3ultra.yaml", "aws-burst.yaml"])
def test_no_part_of_a_plan_can_be_assigned(example: str) -> None:
    plan = _plan(example)
    models = _models(plan)
    assert len({type(m) for m in models}) > 15
    for model in models:
        name = next(iter(type(model).model_fields))
        with pytest.raises(ValidationError, match="frozen"):
            setattr(model, name, getattr(model, name))


def test_findings_come_with_a_new_plan_built_after_the_rules() -> None:
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    assert validated.findings
    assert validated.plan.findings == [f.to_dict() for f in validated.findings]


@pytest.mark.parametrize("example", sorted(PROVIDERS))
def test_provider_config_is_the_provider_s_typed_model(example: str) -> None:
    plan = _plan(example)
    kind, user = PROVIDERS[example]
    assert type(plan.cluster.provider_config) is kind
    assert plan.cluster.provider_config.kind == plan.cluster.provider
    assert plan.cluster.ssh_user == user
    assert (plan.cluster.local_image is not None) == (kind is LocalProvider)


@pytest.mark.parametrize("example", sorted(PROVIDERS))
def test_plan_json_reads_back_into_the_same_plan(example: str) -> None:
    plan = _plan(example)
    (text,) = [f.text for f in render_files(plan) if f.path == "plan.json"]
    again = Plan.model_validate_json(text)
    assert again == plan
    assert type(again.cluster.provider_config) is PROVIDERS[example][0]


def test_provider_config_is_checked_like_the_spec() -> None:
    data = _plan("onprem-h100-256.yaml").model_dump(mode="json")
    data["cluster"]["provider_config"]["ssh_user"] = "Not A User"
    with pytest.raises(ValidationError) as caught:
        Plan.model_validate(data)
    (error,) = caught.value.errors()
    assert error["loc"] == ("cluster", "provider_config", "baremetal", "ssh_user")
    data["cluster"]["provider_config"] = {"kind": "vmware"}
    with pytest.raises(ValidationError, match=r"does not match any of the expected tags"):
        Plan.model_validate(data)


def test_provider_and_its_config_must_agree() -> None:
    cluster = _plan("local.yaml").cluster.model_dump(mode="json")
    with pytest.raises(ValidationError, match="provider is 'aws' but provider_config is for 'local'"):
        ClusterInfo.model_validate({**cluster, "provider": "aws"})


def test_plan_edits_leave_the_original_alone() -> None:
    plan = _plan("aws-p5.yaml")
    before = json.dumps(plan.model_dump(mode="json"), sort_keys=True)
    assert plan.cloud is not None
    assert plan.cloud.bastion is not None
    opened = replaced(plan, {"cloud.bastion.allowed_cidrs": ["0.0.0.0/0"], "nodes.0.spare": True})
    assert opened.cloud is not None
    assert opened.cloud.bastion is not None
    assert opened.cloud.bastion.allowed_cidrs == ["0.0.0.0/0"]
    assert opened.nodes[0].spare
    assert json.dumps(plan.model_dump(mode="json"), sort_keys=True) == before
