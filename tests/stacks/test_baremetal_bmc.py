"""The bare-metal program hands the plan's BMC transport settings to every RedfishNode."""

from __future__ import annotations

import pulumi

from clusterctl.plan.models import BmcPlan
from tests.plan_edits import replaced
from tests.stacks.conftest import example_plan, run

from clusterctl_baremetal import BaremetalCluster, BaremetalClusterArgs  # isort: skip

PEM = "-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n"


def _nodes_inputs(bmc: BmcPlan) -> list[dict[str, object]]:
    plan = replaced(example_plan("onprem-h100-256.yaml"), {"baremetal.bmc": bmc})

    def program() -> pulumi.Output:
        return BaremetalCluster(plan.cluster.name, BaremetalClusterArgs(plan=plan)).nodes

    return [r.inputs for r in run(program).resources if r.typ.endswith(":RedfishNode")]


def test_strict_by_default() -> None:
    inputs = _nodes_inputs(BmcPlan())
    assert inputs
    assert {(i["verify_tls"], i.get("ca_bundle"), i["insecure_http"]) for i in inputs} == {(True, None, False)}


def test_ca_bundle_and_insecure_http_reach_every_node() -> None:
    inputs = _nodes_inputs(BmcPlan(insecure_http=True, ca_bundle_file="bmc-ca.pem", ca_bundle=PEM))
    assert {(i["verify_tls"], i["ca_bundle"], i["insecure_http"]) for i in inputs} == {(True, PEM, True)}
