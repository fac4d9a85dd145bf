"""The lab's stand-in for the Pulumi engine: the bare-metal stack's own resources, created as the engine would.

The engine cannot be installed here. What it would do with ``stacks/baremetal`` is small: the
program registers one ``RedfishNode`` per machine (inputs from :func:`clusterctl_baremetal.machine_args`
and :func:`clusterctl.run.redfish_provider.node_props`, the same code the program runs), and the
engine calls that dynamic provider's ``diff``, ``create``, ``update`` and ``delete`` for each, in
parallel, keeping what it created (id, inputs, outputs) in the stack's state. :class:`LabStack` does
exactly that, with the provider code ``up`` uses, and keeps its state in the cluster's state
directory (``lab-stack.json``). It has :class:`~clusterctl.run.pulumi.PulumiStack`'s operations;
``lab/clusterctl.py`` hands it to the bare-metal provider.

Like the engine: a resource whose create fails is not recorded (the provider's create already
powered the machine off again), the others are; resources the plan dropped are deleted after the
creates; a replace deletes first (the provider asks for ``delete_before_replace``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clusterctl.plan.models import Plan
from clusterctl.run.events import Event, EventBus
from clusterctl.run.pulumi import (
    PHASE,
    DestroySummary,
    PreviewSummary,
    PulumiError,
    StackOutputs,
    UpSummary,
    load_stack_module,
)
from clusterctl.run.redfish import RedfishError
from clusterctl.run.redfish_provider import RedfishNodeProvider, node_props
from clusterctl.run.sshkeys import KeyPair
from clusterctl.run.state import write_atomic

STATE_FILE = "lab-stack.json"
TYPE = "clusterctl:index:RedfishNode"
OUT_NODES, OUT_HOST_KEYS, OUT_SSH_USER = "nodes", "hostKeys", "sshUser"


class LabStack:
    """The bare-metal stack of one cluster, run without the engine (see the module docstring)."""

    def __init__(
        self,
        plan: Plan,
        build_dir: Path,
        state_dir: Path,
        *,
        ssh_public_key: str = "",
        host_keys: dict[str, KeyPair] | None = None,
        events: EventBus | None = None,
    ) -> None:
        self.plan = plan
        self.state_dir = state_dir
        self.ssh_public_key = ssh_public_key
        self.host_keys = host_keys or {}
        self.events = events
        self.provider = RedfishNodeProvider()
        self.name = f"organization/clusterctl-baremetal/{plan.cluster.name} (lab engine)"
        self._lock = threading.Lock()

    # --- the stack's state ------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The stack's state file."""
        return self.state_dir / STATE_FILE

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise PulumiError(f"the lab stack's state {self.path} cannot be read ({exc}); remove it") from None
        resources = data.get("resources") if isinstance(data, dict) else None
        return resources if isinstance(resources, dict) else {}

    def _write(self, resources: dict[str, dict[str, Any]]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"resources": resources}, indent=2, sort_keys=True) + "\n"
        write_atomic(self.path, text.encode(), 0o600)

    def _desired(self) -> dict[str, dict[str, Any]]:
        """resource name -> inputs, from the stack program's own functions."""
        module = load_stack_module("baremetal")
        from clusterctl_stack import HostKey, StackInputs

        inputs = StackInputs(
            plan=self.plan,
            ssh_public_key=self.ssh_public_key,
            host_keys={name: HostKey(private="", public=k.public) for name, k in self.host_keys.items()},
        )
        name = self.plan.cluster.name
        args = module.machine_args(name, module.cluster_args(inputs))
        return {f"{name}-{hostname}": node_props(node) for hostname, node in args.items()}

    # --- events -------------------------------------------------------------------------------------

    def _event(self, op: str, name: str, status: str, message: str = "") -> None:
        if self.events is None:
            return
        with self._lock:
            self.events.emit(
                Event(
                    "resource",
                    phase=PHASE,
                    status=status,  # type: ignore[arg-type]
                    message=f"{op} {TYPE} {name}" + (f": {message}" if message else ""),
                    data={"op": op, "type": TYPE, "urn": name},
                )
            )

    # --- operations ---------------------------------------------------------------------------------

    def _plan_ops(self) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """(resource -> op, desired inputs, recorded resources)."""
        desired = self._desired()
        recorded = self._read()
        ops: dict[str, str] = {}
        for name, props in desired.items():
            old = recorded.get(name)
            if old is None:
                ops[name] = "create"
                continue
            diff = self.provider.diff(old["id"], old["inputs"], props)
            ops[name] = "replace" if diff.replaces else ("update" if diff.changes else "same")
        for name in recorded:
            if name not in desired:
                ops[name] = "delete"
        return ops, desired, recorded

    def preview(self) -> PreviewSummary:
        """What :meth:`up` would do, counted per operation."""
        ops, _, _ = self._plan_ops()
        counts: dict[str, int] = {}
        for op in ops.values():
            counts[op] = counts.get(op, 0) + 1
        return PreviewSummary(changes=counts)

    def up(self) -> UpSummary:
        """Create, replace, update and delete as the program says; every machine in parallel."""
        started = time.monotonic()
        ops, desired, recorded = self._plan_ops()
        state = dict(recorded)
        failures: list[str] = []

        def save() -> None:
            with self._lock:
                self._write(state)

        def one(name: str, op: str) -> None:
            self._event(op, name, "running")
            try:
                if op in ("replace", "delete"):
                    self.provider.delete(recorded[name]["id"], recorded[name]["inputs"])
                    with self._lock:
                        state.pop(name, None)
                    save()
                if op in ("create", "replace"):
                    begun = time.time()
                    result = self.provider.create(desired[name])
                    with self._lock:
                        state[name] = {
                            "id": result.id,
                            "inputs": _public(desired[name]),
                            "outputs": _public(result.outs or {}),
                            # When the BMC was told to boot it and when it answered with its host key
                            # (the README's power-on figures).
                            "created": {"began": round(begun, 1), "answered": round(time.time(), 1)},
                        }
                    save()
                elif op == "update":
                    old = recorded[name]
                    updated = self.provider.update(old["id"], old["outputs"], desired[name])
                    with self._lock:
                        state[name] = {
                            "id": old["id"],
                            "inputs": _public(desired[name]),
                            "outputs": _public(updated.outs or {}),
                        }
                    save()
            except (RedfishError, OSError) as exc:
                with self._lock:
                    failures.append(str(exc) if name.endswith(_host(exc)) else f"{name}: {exc}")
                self._event(op, name, "failed", str(exc).splitlines()[0])
                return
            self._event(op, name, "ok")

        changing = [(n, op) for n, op in ops.items() if op in ("create", "replace", "update")]
        _parallel(one, changing)
        # As the engine: the resources the program dropped go after the new ones are up.
        _parallel(one, [(n, op) for n, op in ops.items() if op == "delete"])
        if failures:
            raise PulumiError(f"up of {self.name} failed:\n" + "\n".join(f"  {line}" for line in sorted(failures)))
        counts: dict[str, int] = {}
        for op in ops.values():
            counts[op] = counts.get(op, 0) + 1
        return UpSummary(changes=counts, seconds=time.monotonic() - started, outputs=self._outputs(state))

    def destroy(self) -> DestroySummary:
        """Delete (power off) every machine, then forget the stack."""
        started = time.monotonic()
        recorded = self._read()
        state = dict(recorded)
        failures: list[str] = []

        def one(name: str, _op: str) -> None:
            self._event("delete", name, "running")
            try:
                self.provider.delete(recorded[name]["id"], recorded[name]["inputs"])
            except (RedfishError, OSError) as exc:
                with self._lock:
                    failures.append(f"{name}: {exc}")
                self._event("delete", name, "failed", str(exc).splitlines()[0])
                return
            with self._lock:
                state.pop(name, None)
                self._write(state)
            self._event("delete", name, "ok")

        _parallel(one, [(name, "delete") for name in recorded])
        if failures:
            raise PulumiError(f"destroy of {self.name} failed:\n" + "\n".join(f"  {line}" for line in failures))
        self.path.unlink(missing_ok=True)
        return DestroySummary(changes={"delete": len(recorded)} if recorded else {}, seconds=time.monotonic() - started)

    def outputs(self) -> StackOutputs:
        """The stack's outputs (machines created so far)."""
        return StackOutputs(values=self._outputs(self._read()))

    def _outputs(self, state: dict[str, dict[str, Any]]) -> dict[str, Any]:
        nodes: dict[str, str] = {}
        keys: dict[str, str] = {}
        for resource in state.values():
            outs = resource.get("outputs") or {}
            hostname, address = outs.get("hostname"), outs.get("address")
            if isinstance(hostname, str) and isinstance(address, str):
                nodes[hostname] = address
                if isinstance(outs.get("host_key"), str):
                    keys[hostname] = outs["host_key"]
        assert self.plan.baremetal is not None
        return {OUT_NODES: nodes, OUT_HOST_KEYS: keys, OUT_SSH_USER: self.plan.baremetal.ssh_user}


def _public(props: dict[str, Any]) -> dict[str, Any]:
    """Inputs as the state keeps them: never the BMC credentials (they come from the environment)."""
    return {k: v for k, v in props.items() if k not in ("bmc_username", "bmc_password")}


def _host(exc: BaseException) -> str:
    """The machine an error of the provider names first (``<hostname>: ...``)."""
    return str(exc).split(":", 1)[0]


def _parallel(work: Callable[[str, str], None], items: list[tuple[str, str]]) -> None:
    if not items:
        return
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        for future in [pool.submit(work, name, op) for name, op in items]:
            future.result()
