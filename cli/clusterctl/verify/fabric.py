"""The fabric as the GPUs see it: GPU-NIC locality from ``nvidia-smi topo -m`` and the InfiniBand
ports from ``ibstat``, each judged by the node's own RDMA device of every rail.

The judges are pure (no plan, no pydantic) so the GPU-machine script in ``tests/gpu/`` uses them as is.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from typing import TYPE_CHECKING

from clusterctl.remote import UNREACHABLE_RC
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import EMULATED, NodeCheck, VerifyContext, last_line, parse_failure, transport_problem
from clusterctl.verify.gpu import GpuInventoryCheck
from clusterctl.verify.parsers.ibstat import IbStat, parse_ibstat
from clusterctl.verify.parsers.nvidia_smi_topo import NEAR, NvidiaSmiTopo, nics_near_gpus, parse_nvidia_smi_topo
from clusterctl.verify.parsers.rdma_rails import parse_node_rails
from clusterctl.verify.rails import RAILS_COMMAND, RAILS_PATH, RailDevices, rail_devices
from clusterctl.verify.result import ParseError, Verdict, failed, passed, sentence, skipped, with_figures

if TYPE_CHECKING:
    from clusterctl.plan.models import PlanNode

# Fabrics whose NICs are InfiniBand (or RoCE) ports that ibstat lists.
IB_FABRICS = ("infiniband", "roce")


def judge_topo(topo: NvidiaSmiTopo, expected_rails: list[str], *, target: str = "") -> Finding:
    """Judge GPU-NIC locality: GPU i must reach ``expected_rails[i]`` at PIX or PXB.

    Args:
        topo: The parsed ``nvidia-smi topo -m`` matrix.
        expected_rails: The rail NIC of each GPU in GPU order, as RDMA names
            (``mlx5_0``) or matrix columns (``NIC0``).
        target: The host the matrix was taken on.

    Returns:
        Fail naming every GPU whose rail NIC is farther (with the distance found) or
        missing; skipped when no rails are given.
    """
    figures: dict[str, float | int | str] = {"gpus": len(topo.gpus), "nics": len(topo.nics)}
    if not expected_rails:
        return skipped("topo.gpu_nic", target, "No rails were given, so GPU-NIC locality was not checked.", "", figures)
    figures["rails"] = len(expected_rails)
    problems: list[str] = []
    for index, rail in enumerate(expected_rails):
        gpu = f"GPU{index}"
        column = topo.nic_column(rail)
        if gpu not in topo.gpus:
            problems.append(f"{gpu} is not in the matrix")
            figures[gpu] = "absent"
        elif column is None:
            problems.append(f"{rail} (rail of {gpu}) is not in the matrix")
            figures[gpu] = f"{rail} absent"
        else:
            link = topo.link(gpu, column)
            figures[gpu] = f"{topo.nic_name(column)} {link}"
            if link not in NEAR:
                problems.append(f"{gpu} reaches {rail} at {link}")
    if problems:
        near = nics_near_gpus(topo)
        pairing = ", ".join(f"{gpu}: {'/'.join(nics) or 'none'}" for gpu, nics in near.items())
        return failed(
            "topo.gpu_nic",
            target,
            sentence(problems)[:-1] + f" (needs {' or '.join(NEAR)}).",
            f"The NICs at PIX/PXB of each GPU are {pairing}; fix the rail order in the spec or the NIC slots.",
            **figures,
        )
    return passed(
        "topo.gpu_nic",
        target,
        f"Each of {len(expected_rails)} GPUs reaches its rail NIC at {' or '.join(NEAR)}.",
        figures,
    )


def judge_ibstat(
    ibstat: IbStat,
    expected_rate_gbps: float | None,
    hcas: list[str] | None = None,
    *,
    target: str = "",
) -> Finding:
    """Judge InfiniBand/RoCE ports: Active, LinkUp, and at the fabric's rate.

    Args:
        ibstat: The parsed ``ibstat`` output.
        expected_rate_gbps: The rate every checked port must run at (400 for NDR); None
            checks the port states only.
        hcas: The CAs to check (the rails); every CA in the output when None.
        target: The host the output was taken on.

    Returns:
        Fail naming each missing CA and each port that is not Active/LinkUp or runs at
        another rate; skipped when there is nothing to check.
    """
    names = [ca.name for ca in ibstat.cas] if hcas is None else list(hcas)
    problems: list[str] = []
    hints: list[str] = []
    ports = active = 0
    figures: dict[str, float | int | str] = {}
    if expected_rate_gbps is not None:
        figures["expected_rate_gbps"] = expected_rate_gbps
    for name in names:
        ca = ibstat.ca(name)
        if ca is None:
            problems.append(f"{name} is not in the ibstat output")
            figures[name] = "absent"
            continue
        for port in ca.ports:
            ports += 1
            key = f"{name}/{port.number}"
            rate = f"{port.rate_gbps:g}" if port.rate_gbps is not None else "?"
            figures[key] = f"{port.state} {port.physical_state} {rate}"
            if port.state != "Active" or port.physical_state != "LinkUp":
                problems.append(f"{key} is {port.state} ({port.physical_state})")
                hints.append(
                    "check the cable and the switch port (Polling: no peer seen; Disabled: shut down) and, "
                    "for Initializing, that a subnet manager runs"
                )
                continue
            active += 1
            if expected_rate_gbps is None:
                continue
            if port.rate_gbps is None or abs(port.rate_gbps - expected_rate_gbps) > 0.01:
                problems.append(f"{key} runs at {rate} Gb/s, expected {expected_rate_gbps:g}")
                hints.append("a lower rate points at a cable, transceiver or port speed setting; check with mlxlink")
    figures.update(cas=len(names), ports=ports, ports_active=active)
    if problems:
        return failed(
            "ib.ports",
            target,
            sentence(problems),
            sentence(list(dict.fromkeys(hints))) if hints else "Check the rail names in the spec.",
            **figures,
        )
    if ports == 0:
        return skipped("ib.ports", target, "No InfiniBand port to check.", "", figures)
    rate = f" at {expected_rate_gbps:g} Gb/s" if expected_rate_gbps is not None else ""
    return passed("ib.ports", target, f"All {ports} ports are Active, LinkUp{rate}.", figures)


# --- the checks -----------------------------------------------------------------------------


class RailCheck(NodeCheck):
    """A node check about the rails, judged by the node's own RDMA device names.

    Why: the spec names a rail by PCI address or device name, the tools by the node's device
    name, which depends on the image (`clusterctl.verify.rails`). Before the check's command
    runs, each node's rails file is read once (shared by every rail check of the run).
    """

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Skipped on emulated GPUs and on nodes without rails in the spec."""
        if node.emulated:
            return EMULATED
        return None if node.rails else "skipped: no rails in the spec"

    @abstractmethod
    def judge_rails(self, ctx: VerifyContext, node: PlanNode, output: str, devices: list[str]) -> Finding:
        """The verdict on the command's stdout, given the node's device of each rail in rail order."""

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> Finding:
        """`judge_rails` by the node's own devices, which the result names when it failed."""
        devices = self.rail_devices(ctx, node)
        if isinstance(devices, Finding):
            return devices
        return self.by_device(node, devices, self.judge_rails(ctx, node, output, list(devices.devices)))

    def prepare(self, ctx: VerifyContext, nodes: list[PlanNode]) -> None:
        """Read the rails file of the nodes whose answer is not in ``ctx.node_rails`` yet."""
        todo = [n for n in nodes if n.hostname not in ctx.node_rails]
        jobs = [(n.hostname, RAILS_COMMAND, ctx.options.command_timeout_s) for n in todo]
        for node, answer in zip(todo, ctx.run(jobs), strict=True):
            ctx.node_rails[node.hostname] = answer

    def rail_devices(self, ctx: VerifyContext, node: PlanNode) -> RailDevices | Finding:
        """The node's device of each rail, or the failed result saying why they are unknown."""
        host = node.hostname
        rc, out, err = ctx.node_rails.get(host, (UNREACHABLE_RC, "", "the rails file was not read"))
        problem = transport_problem(self.result_name, host, "cat", rc, err)
        if problem is not None:
            return problem
        if rc != 0:
            why = last_line(err) or last_line(out) or "no message"
            return failed(
                self.result_name,
                host,
                f"The rails file on {host} could not be read (exit {rc}): {why}",
                f"Check {RAILS_PATH} on {host} (the rdma role writes it at converge).",
                rc=rc,
            )
        try:
            rails = parse_node_rails(out)
        except ParseError as exc:
            return parse_failure(self.result_name, host, RAILS_PATH, exc, rc, err)
        devices = rail_devices(host, list(node.rails), rails)
        if devices.problem:
            return failed(self.result_name, host, devices.problem, devices.hint, rails_file=devices.path)
        return devices

    def by_device(self, node: PlanNode, devices: RailDevices, result: Finding) -> Finding:
        """``result`` with the rail-to-device map in its figures, and in its hint when it failed."""
        if not devices.renamed:
            return result
        hint = result.hint
        if Verdict.of(result) is Verdict.FAIL:
            where = f"The rails on {node.hostname} ({devices.path}): {devices.mapping(list(node.rails))}."
            hint = f"{hint} {where}" if hint else where
        return dataclasses.replace(with_figures(result, rail_devices=",".join(devices.devices)), hint=hint)


class TopoCheck(RailCheck):
    """GPU-NIC locality from ``nvidia-smi topo -m``: each GPU's rail NIC at PIX or PXB."""

    name = "topo"
    title = "GPU-NIC locality"
    result_name = "topo.gpu_nic"
    tool = "nvidia-smi"
    install_hint = GpuInventoryCheck.install_hint

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``nvidia-smi topo -m``."""
        return "nvidia-smi topo -m"

    def judge_rails(self, ctx: VerifyContext, node: PlanNode, output: str, devices: list[str]) -> Finding:
        """Each GPU reaches its rail NIC (the node's device for the rail) at PIX or PXB."""
        return judge_topo(parse_nvidia_smi_topo(output), devices, target=node.hostname)


class IbCheck(RailCheck):
    """InfiniBand ports from ``ibstat``: Active, LinkUp, at the fabric's speed."""

    name = "ib"
    title = "InfiniBand ports"
    result_name = "ib.ports"
    tool = "ibstat"
    install_hint = "Install infiniband-diags (and the OFED/MOFED driver stack)."

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Skipped also on fabrics without InfiniBand ports."""
        if not node.emulated and ctx.plan.fabric.kind not in IB_FABRICS:
            return f"skipped: the fabric is {ctx.plan.fabric.kind}, which has no InfiniBand ports"
        return super().skip_reason(ctx, node)

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``ibstat``."""
        return "ibstat"

    def judge_rails(self, ctx: VerifyContext, node: PlanNode, output: str, devices: list[str]) -> Finding:
        """Every rail HCA's ports Active/LinkUp at ``fabric.speed_gbps`` (or the spec's mark)."""
        thresholds = ctx.thresholds_for(node)
        rate: float | None = ctx.plan.fabric.speed_gbps
        if thresholds is not None and thresholds.ib_rate_gbps is not None:
            rate = thresholds.ib_rate_gbps
        return judge_ibstat(parse_ibstat(output), rate, devices, target=node.hostname)
