"""The bare-metal cluster as a Pulumi component, built only from ``plan.baremetal``.

One :class:`~clusterctl.run.redfish_provider.RedfishNode` per machine of machines.csv: a
one-time PXE boot through its BMC, power on, and a wait until the installed node answers on
its ready port. What the PXE boot serves (dnsmasq, GRUB, autoinstall) is rendered into the
build directory's ``pxe/``; the PXE server must serve it before ``up`` runs this program.

Credentials for the BMCs: ``CLUSTERCTL_BMC_USERNAME``/``CLUSTERCTL_BMC_PASSWORD`` in the
environment of ``clusterctl up``, or the Pulumi secrets ``clusterctl:bmcUsername`` and
``clusterctl:bmcPassword``.
"""

from __future__ import annotations

from dataclasses import dataclass

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


class BaremetalCluster(pulumi.ComponentResource):
    """Every machine of the plan, PXE-installed and answering."""

    nodes: pulumi.Output[dict[str, str]]
    host_keys: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BaremetalClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:baremetal:Cluster", name, None, opts)
        bm = args.plan.baremetal
        if bm is None:
            raise ValueError("the plan is not a bare-metal plan (plan.baremetal is empty)")
        addresses: dict[str, pulumi.Output[str]] = {}
        keys: dict[str, pulumi.Output[str]] = {}
        for machine in bm.machines:
            node = RedfishNode(
                f"{name}-{machine.hostname}",
                RedfishNodeArgs(
                    hostname=machine.hostname,
                    bmc=machine.bmc,
                    mac=machine.mac,
                    address=machine.address,
                    ready_port=bm.ready_port,
                    ready_timeout_s=bm.ready_timeout_s,
                    verify_tls=bm.bmc.verify_tls,
                    ca_bundle=bm.bmc.ca_bundle,
                    insecure_http=bm.bmc.insecure_http,
                    boot_mode=bm.boot_mode,
                    poll_s=args.poll_s,
                    bmc_username=args.bmc_username,
                    bmc_password=args.bmc_password,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            addresses[machine.hostname] = node.address
            keys[machine.hostname] = node.host_key
        self.nodes = pulumi.Output.all(**addresses)
        self.host_keys = pulumi.Output.all(**keys)
        self.register_outputs({OUT_NODES: self.nodes, OUT_HOST_KEYS: self.host_keys})


def deploy(inputs: StackInputs) -> BaremetalCluster:
    """The program: one BaremetalCluster from the plan, and the stack outputs clusterctl reads."""
    plan = inputs.plan
    cluster = BaremetalCluster(
        plan.cluster.name,
        BaremetalClusterArgs(plan=plan, bmc_username=inputs.bmc_username, bmc_password=inputs.bmc_password),
    )
    assert plan.baremetal is not None
    pulumi.export(OUT_NODES, cluster.nodes)
    pulumi.export(OUT_HOST_KEYS, cluster.host_keys)
    pulumi.export(OUT_SSH_USER, plan.baremetal.ssh_user)
    return cluster
