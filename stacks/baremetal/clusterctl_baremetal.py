"""The bare-metal cluster as a Pulumi component, built only from ``plan.baremetal``.

One :class:`~clusterctl.run.redfish_provider.RedfishNode` per machine of machines.csv: a
one-time PXE boot through its BMC, power on, a wait until the installed node answers on its
ready port, and a check that it presents the SSH host key clusterctl generated for it. What the
PXE boot serves (dnsmasq, GRUB, autoinstall) is rendered into the build directory's ``pxe/``;
the PXE server must serve it before ``up`` runs this program. The host keys themselves are
served by ``clusterctl up`` while this program runs (run/hostkey_server.py); only their
public halves reach the program (``hostKeys`` config), and the ``hostKeys`` output is exactly
those, so known_hosts is written from keys clusterctl made, never from keys read off the network.

Credentials for the BMCs: ``CLUSTERCTL_BMC_USERNAME``/``CLUSTERCTL_BMC_PASSWORD`` in the
environment of ``clusterctl up``, or the Pulumi secrets ``clusterctl:bmcUsername`` and
``clusterctl:bmcPassword``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
from clusterctl_stack import OUT_HOST_KEYS, OUT_NODES, OUT_SSH_USER, StackInputs

from clusterctl.plan.models import Plan
from clusterctl.run.redfish_provider import RedfishNode, RedfishNodeArgs


@dataclass
class BaremetalClusterArgs:
    """Inputs of :class:`BaremetalCluster`."""

    plan: Plan
    bmc_username: pulumi.Input[str] | None = None
    bmc_password: pulumi.Input[str] | None = None
    poll_s: float = 10.0
    # hostname -> public host key line clusterctl generated (its installer fetches the pair from `up`).
    host_keys: dict[str, str] = field(default_factory=dict)


def machine_args(name: str, args: BaremetalClusterArgs) -> dict[str, RedfishNodeArgs]:
    """hostname -> the inputs of its :class:`RedfishNode` (resource ``<name>-<hostname>``).

    A machine that boots the baked image stateless keeps network boot afterwards (it PXE-boots at
    every boot); every other one, installed, keeps its disk.
    """
    bm = args.plan.baremetal
    if bm is None:
        raise ValueError("the plan is not a bare-metal plan (plan.baremetal is empty)")
    out: dict[str, RedfishNodeArgs] = {}
    for machine in bm.machines:
        image = bm.images.get(machine.group)
        out[machine.hostname] = RedfishNodeArgs(
            hostname=machine.hostname,
            bmc=machine.bmc,
            mac=machine.mac,
            address=machine.address,
            ready_port=bm.ready_port,
            ready_timeout_s=bm.ready_timeout_s,
            verify_tls=bm.bmc.verify_tls,
            ca_bundle=bm.bmc.ca_bundle,
            insecure_http=bm.bmc.insecure_http,
            boot_mode=machine.boot_mode,
            boot_after="Pxe" if image is not None and image.default == "stateless" else "Hdd",
            host_key=args.host_keys.get(machine.hostname),
            poll_s=args.poll_s,
            bmc_username=args.bmc_username,
            bmc_password=args.bmc_password,
        )
    return out


class BaremetalCluster(pulumi.ComponentResource):
    """Every machine of the plan, PXE-installed and answering."""

    nodes: pulumi.Output[dict[str, str]]
    host_keys: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BaremetalClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:baremetal:Cluster", name, None, opts)
        addresses: dict[str, pulumi.Output[str]] = {}
        keys: dict[str, pulumi.Output[str]] = {}
        for hostname, node_args in machine_args(name, args).items():
            node = RedfishNode(f"{name}-{hostname}", node_args, opts=pulumi.ResourceOptions(parent=self))
            addresses[hostname] = node.address
            keys[hostname] = node.host_key
        self.nodes = pulumi.Output.all(**addresses)
        self.host_keys = pulumi.Output.all(**keys)
        self.register_outputs({OUT_NODES: self.nodes, OUT_HOST_KEYS: self.host_keys})


def cluster_args(inputs: StackInputs) -> BaremetalClusterArgs:
    """The cluster component's inputs from the program's."""
    return BaremetalClusterArgs(
        plan=inputs.plan,
        bmc_username=inputs.bmc_username,
        bmc_password=inputs.bmc_password,
        # Public halves only: the private keys never reach the stack's config or state.
        host_keys={name: key.public for name, key in inputs.host_keys.items()},
    )


def deploy(inputs: StackInputs) -> BaremetalCluster:
    """The program: one BaremetalCluster from the plan, and the stack outputs clusterctl reads."""
    plan = inputs.plan
    cluster = BaremetalCluster(plan.cluster.name, cluster_args(inputs))
    assert plan.baremetal is not None
    pulumi.export(OUT_NODES, cluster.nodes)
    pulumi.export(OUT_HOST_KEYS, cluster.host_keys)
    pulumi.export(OUT_SSH_USER, plan.baremetal.ssh_user)
    return cluster
