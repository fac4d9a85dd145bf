"""The bare-metal program under Pulumi's mocks: each machine's pinned host key is an input of its
RedfishNode (public half only) and the ``hostKeys`` output is exactly the generated keys, so
known_hosts is written from keys clusterctl made -- never from a key read off the network."""

from __future__ import annotations

from typing import Any

import pulumi

from clusterctl.run.providers.ssh_inventory import hosts_from_outputs
from clusterctl.run.sshkeys import generate_ed25519
from tests.stacks.conftest import example_plan, run

from clusterctl_baremetal import deploy as baremetal_deploy  # isort: skip
from clusterctl_stack import HostKey, StackInputs  # isort: skip


def test_nodes_get_the_public_key_and_the_outputs_pin_it() -> None:
    plan = example_plan("onprem-h100-256.yaml")
    pairs = {m.hostname: generate_ed25519(f"root@{m.hostname}") for m in plan.baremetal.machines}
    # Even were a private key in the stack's config, the program hands the nodes the public half only.
    keys = {name: HostKey(private=pair.private, public=pair.public) for name, pair in pairs.items()}
    exported: dict[str, Any] = {}
    recorded: dict[str, str] = {}

    def program() -> Any:
        original = pulumi.export
        try:
            pulumi.export = lambda key, value: exported.__setitem__(key, value)  # type: ignore[assignment]
            baremetal_deploy(StackInputs(plan=plan, ssh_public_key="", host_keys=keys))
        finally:
            pulumi.export = original
        return exported["hostKeys"].apply(recorded.update)

    mocks = run(program)
    nodes = {r.inputs["hostname"]: r.inputs for r in mocks.resources if r.typ.endswith(":RedfishNode")}
    assert {name: props["host_key"] for name, props in nodes.items()} == {n: p.public for n, p in pairs.items()}
    for resource in mocks.resources:
        assert "PRIVATE KEY" not in repr(resource.inputs), resource.name
    assert recorded == {name: pair.public for name, pair in pairs.items()}
    outputs = {"nodes": {n.hostname: n.address for n in plan.nodes}, "hostKeys": recorded}
    hosts, _ = hosts_from_outputs(plan, outputs, user="ubuntu", host_keys={n: p.public for n, p in pairs.items()})
    assert [h.host_key for h in hosts] == [pairs[n.hostname].public for n in plan.nodes]
