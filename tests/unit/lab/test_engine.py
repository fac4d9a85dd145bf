"""The lab's stand-in for the Pulumi engine does with the bare-metal stack what the engine would.

Its inputs come from the stack program's own functions (one RedfishNode per machine, with the
program's arguments); the dynamic provider's ``create``, ``diff``, ``update`` and ``delete`` are
called as the engine calls them, and what was created is kept. Here the provider is a recorder, so
no BMC is needed; the real provider against real BMCs is what ``tests/e2e/test_baremetal_lab.py`` runs.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from lab.engine import LabStack
from pulumi.dynamic import CreateResult, UpdateResult

from clusterctl.pipeline import load_and_validate
from clusterctl.run.pulumi import PulumiError
from clusterctl.run.redfish import NodeNotReadyError
from clusterctl.run.redfish_provider import RedfishNodeProvider
from clusterctl.run.sshkeys import KeyPair, generate_ed25519
from tests.conftest import EXAMPLES

PLAN = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan
KEYS = {m.hostname: KeyPair(private="", public=generate_ed25519(m.hostname).public) for m in PLAN.baremetal.machines}


class Recorder(RedfishNodeProvider):
    """The dynamic provider's decisions (diff) with its side effects recorded instead of done."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def create(self, props: dict[str, Any]) -> CreateResult:
        with self.lock:
            self.calls.append(("create", props["hostname"]))
        if props["hostname"] in self.fail:
            raise NodeNotReadyError(f"{props['hostname']}: {props['address']}:22 did not answer (powered off again)")
        outs = {**props, "power_state": "On", "host_key": props["host_key"]}
        return CreateResult(id_=f"{props['hostname']}@{props['bmc']}", outs=outs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        with self.lock:
            self.calls.append(("update", news["hostname"]))
        return super().update(id_, olds, news)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append(("delete", props["hostname"]))


def _stack(tmp_path: Path, plan=PLAN, provider: Recorder | None = None) -> LabStack:
    stack = LabStack(plan, tmp_path, tmp_path / "state", host_keys=KEYS)
    stack.provider = provider or Recorder()
    return stack


def test_every_machine_is_created_once_with_the_programs_inputs(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    assert stack.preview().changes == {"create": 35}
    result = stack.up()
    assert sorted(host for op, host in stack.provider.calls) == sorted(KEYS)
    assert {op for op, _ in stack.provider.calls} == {"create"}
    assert result.outputs["nodes"] == {m.hostname: m.address for m in PLAN.baremetal.machines}
    assert result.outputs["hostKeys"] == {name: pair.public for name, pair in KEYS.items()}
    assert result.outputs["sshUser"] == "ubuntu"
    assert "bmc_password" not in (tmp_path / "state" / "lab-stack.json").read_text()
    again = _stack(tmp_path)
    assert again.preview().changes == {"same": 35}
    again.up()
    assert again.provider.calls == []


def test_a_machine_that_fails_is_named_and_not_recorded_the_others_are(tmp_path: Path) -> None:
    stack = _stack(tmp_path, provider=Recorder(fail=frozenset({"gpu003"})))
    with pytest.raises(PulumiError) as info:
        stack.up()
    assert "\n  gpu003: 10.20.0.15:22 did not answer (powered off again)" in str(info.value)
    assert "gpu003" not in stack.outputs().values["nodes"]
    assert len(stack.outputs().values["nodes"]) == 34
    retry = _stack(tmp_path)
    assert retry.preview().changes == {"create": 1, "same": 34}
    retry.up()
    assert retry.provider.calls == [("create", "gpu003")]


def test_another_mac_replaces_the_machine_transport_changes_update_it_and_dropped_ones_go(tmp_path: Path) -> None:
    _stack(tmp_path).up()
    first, second, third, *rest = PLAN.baremetal.machines
    bm = PLAN.baremetal.model_copy(
        update={
            "machines": [first.model_copy(update={"mac": "3c:ec:ef:99:00:01"}), second, *rest],
            "bmc": PLAN.baremetal.bmc.model_copy(update={"verify_tls": False}),
        }
    )
    changed = PLAN.model_copy(update={"baremetal": bm})
    stack = _stack(tmp_path, plan=changed)
    assert stack.preview().changes == {"replace": 1, "update": 33, "delete": 1}
    stack.up()
    calls = stack.provider.calls
    assert calls.index(("delete", first.hostname)) < calls.index(("create", first.hostname))
    assert calls[-1] == ("delete", third.hostname)  # dropped machines go after the others are up
    assert third.hostname not in stack.outputs().values["nodes"]


def test_destroy_powers_every_machine_off_and_forgets_the_stack(tmp_path: Path) -> None:
    _stack(tmp_path).up()
    stack = _stack(tmp_path)
    assert stack.destroy().changes == {"delete": 35}
    assert sorted(host for _, host in stack.provider.calls) == sorted(KEYS)
    assert not (tmp_path / "state" / "lab-stack.json").exists()
    assert stack.outputs().values["nodes"] == {}
