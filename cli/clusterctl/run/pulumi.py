"""The one adapter between clusterctl and Pulumi's Automation API.

- State lives in a local file backend under ``.clusterctl/<cluster>/pulumi`` (no Pulumi Cloud
  account); the passphrase that encrypts its secrets is generated once and kept 0600 under
  ``.clusterctl/<cluster>/secrets/``.
- The program is ``stacks/<provider>/`` -- run inline (imported into this process, the default)
  or as the local Pulumi project -- and is fed only by the rendered plan.
- Stack names are fully qualified (``organization/clusterctl-<provider>/<cluster>``); provider
  plugin versions are pinned here, in :data:`PLUGIN_VERSIONS`, and nowhere else.
- preview/up/destroy/outputs return typed summaries built from the engine's own counts;
  progress goes to a callback (the event bus), never to print.
- Secrets (host keys) are set as secret config; outputs marked secret stay masked.

Without the ``pulumi`` CLI on PATH nothing here can run: :func:`require_pulumi_cli` says so
(and how to install it) before anything is touched.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from clusterctl.paths import stacks_dir
from clusterctl.plan.models import Plan
from clusterctl.run.state import ensure_secret, ensure_secrets_dir

if TYPE_CHECKING:
    from pulumi import automation as auto

    from clusterctl.run.events import EventBus
    from clusterctl.run.sshkeys import KeyPair

# Provider plugins per stack, pinned (the stacks' requirements.txt pin the same; a test checks).
PLUGIN_VERSIONS: dict[str, dict[str, str]] = {
    "aws": {"aws": "7.51.1"},
    "gcp": {"gcp": "10.2.0"},
    "azure": {"azure-native": "3.29.0"},
    "baremetal": {},
}
PULUMI_SDK_VERSION = "3.272.0"
ORGANIZATION = "organization"  # what the file backend calls the (only) organization
PASSPHRASE_FILE = "pulumi-passphrase"
PHASE = "provision"
INSTALL_HINT = (
    "The Pulumi CLI (`pulumi`) is not on PATH; clusterctl runs the cloud and bare-metal stacks through it. "
    "Install it with `curl -fsSL https://get.pulumi.com | sh` "
    "(or see https://www.pulumi.com/docs/iac/download-install/), check that `pulumi version` works, and run again. "
    "`clusterctl validate`, `plan` and `render` work without it."
)


class PulumiError(Exception):
    """A stack operation failed; the message says what to do."""


class PulumiCliMissingError(PulumiError):
    """The Pulumi CLI is not installed (or not on PATH)."""


def require_pulumi_cli() -> str:
    """The path of the ``pulumi`` CLI.

    Raises:
        PulumiCliMissingError: it is not on PATH; the message names the Pulumi CLI and how to install it.

    Why first: the Automation API shells out to the CLI for everything; checking before any state,
    key or file is created means a missing CLI leaves nothing behind.
    """
    path = shutil.which("pulumi")
    if path is None:
        raise PulumiCliMissingError(INSTALL_HINT)
    return path


def project_name(provider: str) -> str:
    """The Pulumi project of a provider's program."""
    return f"clusterctl-{provider}"


def stack_name(plan: Plan) -> str:
    """The fully-qualified stack name of a cluster (one stack per cluster)."""
    return f"{ORGANIZATION}/{project_name(plan.cluster.provider)}/{plan.cluster.name}"


@dataclass(frozen=True)
class StackTarget:
    """Which program a :class:`PulumiStack` runs, under which project and stack name.

    The default (:func:`cluster_target`) is the cluster's own stack. Why a target at all: a
    cloud burst group is a second program (``stacks/burst``) with one stack per cluster and
    group, kept in the same file backend under the same passphrase.

    Attributes:
        program: folder under ``stacks/`` (its ``clusterctl_<program>.py`` has ``deploy``).
        project: the Pulumi project name.
        stack: the fully-qualified stack name.
        plugins: provider plugins to install (name -> version, from :data:`PLUGIN_VERSIONS`).
        config: extra (non-secret) stack configuration, e.g. ``clusterctl:group``.
        workspace: sub-folder of the workspace directory; stacks of different projects must not
            share one, since the workspace holds the project's ``Pulumi.yaml``.
    """

    program: str
    project: str
    stack: str
    plugins: dict[str, str] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    workspace: str = ""


def cluster_target(plan: Plan) -> StackTarget:
    """The cluster's own stack: ``stacks/<provider>``, ``organization/clusterctl-<provider>/<cluster>``."""
    provider = plan.cluster.provider
    return StackTarget(
        program=provider,
        project=project_name(provider),
        stack=stack_name(plan),
        plugins=dict(PLUGIN_VERSIONS.get(provider, {})),
    )


def backend_dir(state_dir: Path) -> Path:
    """Where the file backend keeps the stack's state."""
    return state_dir / "pulumi"


def ensure_passphrase(state_dir: Path) -> Path:
    """The passphrase file of the cluster's stacks, generated once (0600 in a 0700 directory).

    Created atomically and checked when reused like every secret (``run.state``).

    Raises:
        StateDirError: the state directory or the file is a link, another user's, or open to others.
    """
    folder = ensure_secrets_dir(state_dir, state_dir / "secrets")
    return ensure_secret(folder / PASSPHRASE_FILE, secrets.token_urlsafe(32).encode(), 0o600)


@dataclass(frozen=True)
class ChangeSummary:
    """What an operation did or would do: count per operation (create, update, delete, same, ...)."""

    changes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def has_changes(self) -> bool:
        """Anything other than ``same``."""
        return any(count for op, count in self.changes.items() if op != "same")

    def describe(self) -> str:
        """``3 to create, 1 to update, 10 unchanged``."""
        words = {"create": "to create", "update": "to update", "delete": "to delete", "replace": "to replace"}
        parts = [f"{n} {words.get(op, op)}" for op, n in sorted(self.changes.items()) if n and op != "same"]
        if self.changes.get("same"):
            parts.append(f"{self.changes['same']} unchanged")
        return ", ".join(parts) or "no changes"


@dataclass(frozen=True)
class PreviewSummary(ChangeSummary):
    """A preview's counts."""


@dataclass(frozen=True)
class UpSummary(ChangeSummary):
    """An update's counts and the stack outputs afterwards."""

    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DestroySummary(ChangeSummary):
    """A destroy's counts."""


@dataclass(frozen=True)
class StackOutputs:
    """Stack outputs; values of secret outputs are kept but listed, so callers can mask them."""

    values: dict[str, Any]
    secret: frozenset[str] = frozenset()

    def masked(self) -> dict[str, Any]:
        """The outputs with secret values replaced by ``[secret]`` (for display and logs)."""
        return {k: ("[secret]" if k in self.secret else v) for k, v in self.values.items()}


def load_stack_module(provider: str) -> ModuleType:
    """Import ``stacks/<provider>/clusterctl_<provider>.py`` (the program's components)."""
    folder = stacks_dir() / provider
    common = stacks_dir() / "common"
    for path in (common, folder):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    name = f"clusterctl_{provider}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    if spec is None or spec.loader is None:
        raise PulumiError(f"no Pulumi program for provider {provider} in {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _rendered_config(build_dir: Path, plan: Plan) -> dict[str, str]:
    """The stack configuration ``render`` wrote (``build/<cluster>/pulumi/Pulumi.<cluster>.yaml``)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    path = build_dir / "pulumi" / f"Pulumi.{plan.cluster.name}.yaml"
    if not path.exists():
        return {}
    try:
        data = YAML(typ="safe").load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        raise PulumiError(f"cannot read {path} ({type(exc).__name__}); run `clusterctl render` again") from None
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict | None):
        raise PulumiError(f"{path} has no `config:` mapping; run `clusterctl render` again")
    return {str(k): str(v) for k, v in (config or {}).items()}


class PulumiStack:
    """One cluster's stack: configure it, preview, update, destroy, read outputs.

    Args:
        plan: the resolved plan (the only input of the program).
        build_dir: the rendered build directory (``plan.json``, ``pulumi/``).
        state_dir: ``.clusterctl/<cluster>`` (backend, passphrase, workspace).
        ssh_public_key: clusterctl's public key, authorized on the nodes.
        host_keys: hostname -> host key pair to inject (secret config).
        events: where progress goes (resource events, engine output lines).
        program: ``inline`` runs the program in this process; ``local`` runs ``stacks/<provider>`` as
            a Pulumi project with its own virtualenv.
        target: the program and stack to drive (default: the cluster's stack).
    """

    def __init__(
        self,
        plan: Plan,
        build_dir: Path,
        state_dir: Path,
        *,
        ssh_public_key: str = "",
        host_keys: dict[str, KeyPair] | None = None,
        events: EventBus | None = None,
        program: Literal["inline", "local"] = "inline",
        target: StackTarget | None = None,
    ) -> None:
        self.plan = plan
        self.build_dir = build_dir.resolve()
        self.state_dir = state_dir.resolve()
        self.ssh_public_key = ssh_public_key
        self.host_keys = host_keys or {}
        self.events = events
        self.program = program
        self.target = target or cluster_target(plan)
        self.provider = self.target.program
        self._stack: auto.Stack | None = None

    # --- setup ---------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        passphrase = ensure_passphrase(self.state_dir)
        backend = backend_dir(self.state_dir)
        backend.mkdir(parents=True, exist_ok=True)
        return {
            "PULUMI_BACKEND_URL": backend.as_uri(),
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            # The program reads the plan from here when it runs as a local project.
            "CLUSTERCTL_PLAN": str(self.build_dir / "plan.json"),
            "CLUSTERCTL_PULUMI_DIR": str(self.build_dir / "pulumi"),
        }

    def _inline_program(self) -> Callable[[], None]:
        module = load_stack_module(self.provider)
        from clusterctl_stack import HostKey, StackInputs

        inputs = StackInputs(
            plan=self.plan,
            ssh_public_key=self.ssh_public_key,
            host_keys={name: HostKey(private=k.private, public=k.public) for name, k in self.host_keys.items()},
            bmc_username=None,
            bmc_password=None,
        )

        def program() -> None:
            import pulumi

            config = pulumi.Config("clusterctl")
            inputs.bmc_username = config.get_secret("bmcUsername")
            inputs.bmc_password = config.get_secret("bmcPassword")
            module.deploy(inputs)

        return program

    def stack(self, *, configure: bool = True) -> auto.Stack:
        """Create or select the stack; pin its plugins and set its configuration unless ``configure`` is off.

        Reading outputs needs no configuration; everything that runs the program does.
        """
        if self._stack is not None:
            return self._stack
        require_pulumi_cli()
        from pulumi import automation as auto

        workspace = backend_dir(self.state_dir) / "workspace" / self.target.workspace
        workspace.mkdir(parents=True, exist_ok=True)
        env = self._env()
        project = self.target.project
        settings = auto.ProjectSettings(
            name=project,
            runtime="python",
            backend=auto.ProjectBackend(url=env["PULUMI_BACKEND_URL"]),
            main=str(stacks_dir() / self.provider) if self.program == "local" else None,
        )
        opts = auto.LocalWorkspaceOptions(
            work_dir=str(workspace), env_vars=env, project_settings=settings, secrets_provider="passphrase"
        )
        try:
            if self.program == "inline":
                stack = auto.create_or_select_stack(
                    self.target.stack, project_name=project, program=self._inline_program(), opts=opts
                )
            else:
                stack = auto.create_or_select_stack(self.target.stack, work_dir=str(workspace), opts=opts)
            if not configure:
                return stack
            for plugin, version in self.target.plugins.items():
                stack.workspace.install_plugin(plugin, f"v{version}")
            config = {
                key: auto.ConfigValue(value) for key, value in _rendered_config(self.build_dir, self.plan).items()
            }
            config["clusterctl:plan"] = auto.ConfigValue(str(self.build_dir / "plan.json"))
            config["clusterctl:sshPublicKey"] = auto.ConfigValue(self.ssh_public_key)
            config.update({key: auto.ConfigValue(value) for key, value in self.target.config.items()})
            if self.host_keys:
                keys = {name: {"private": k.private, "public": k.public} for name, k in self.host_keys.items()}
                config["clusterctl:hostKeys"] = auto.ConfigValue(json.dumps(keys, sort_keys=True), secret=True)
            stack.set_all_config(config)
        except auto.CommandError as exc:
            raise PulumiError(f"pulumi could not prepare stack {self.target.stack}: {_last_lines(exc)}") from None
        self._stack = stack
        return stack

    # --- operations ---------------------------------------------------------------------------

    def _on_output(self, line: str) -> None:
        if self.events is not None and line.strip():
            from clusterctl.run.events import Event

            self.events.emit(Event("message", phase=PHASE, message=line.rstrip()))

    def _on_event(self, event: Any) -> None:
        if self.events is None:
            return
        from clusterctl.run.events import Event

        pre = getattr(event, "resource_pre_event", None)
        done = getattr(event, "res_outputs_event", None)
        failed = getattr(event, "res_op_failed_event", None)
        for item, status in ((pre, "running"), (done, "ok"), (failed, "failed")):
            if item is None:
                continue
            meta = item.metadata
            op = str(getattr(meta.op, "value", meta.op))
            if op == "same":
                continue
            self.events.emit(
                Event(
                    "resource",
                    phase=PHASE,
                    status=status,  # type: ignore[arg-type]
                    message=f"{op} {meta.type} {meta.urn.rsplit('::', 1)[-1]}",
                    data={"op": op, "type": meta.type, "urn": meta.urn},
                )
            )

    def preview(self) -> PreviewSummary:
        """What an update would change."""
        from pulumi import automation as auto

        started = time.monotonic()
        try:
            result = self.stack().preview(on_output=self._on_output, on_event=self._on_event)
        except auto.CommandError as exc:
            raise PulumiError(f"pulumi preview of {self.target.stack} failed: {_last_lines(exc)}") from None
        changes = _counts(result.change_summary)
        return PreviewSummary(changes=changes, seconds=time.monotonic() - started)

    def up(self) -> UpSummary:
        """Create or update everything the plan says; return the counts and the outputs."""
        from pulumi import automation as auto

        started = time.monotonic()
        try:
            result = self.stack().up(on_output=self._on_output, on_event=self._on_event)
        except auto.CommandError as exc:
            raise PulumiError(
                f"pulumi up of {self.target.stack} failed: {_last_lines(exc)}\nWhat was created is recorded in "
                f"{backend_dir(self.state_dir)}; run `clusterctl up` again after fixing this or `clusterctl down`."
            ) from None
        changes = _counts(result.summary.resource_changes)
        return UpSummary(changes=changes, seconds=time.monotonic() - started, outputs=_plain(dict(result.outputs)))

    def destroy(self) -> DestroySummary:
        """Delete every resource of the stack, then the stack itself."""
        from pulumi import automation as auto

        started = time.monotonic()
        stack = self.stack()
        try:
            result = stack.destroy(on_output=self._on_output, on_event=self._on_event)
            stack.workspace.remove_stack(self.target.stack)
        except auto.CommandError as exc:
            raise PulumiError(f"pulumi destroy of {self.target.stack} failed: {_last_lines(exc)}") from None
        changes = _counts(result.summary.resource_changes)
        return DestroySummary(changes=changes, seconds=time.monotonic() - started)

    def outputs(self) -> StackOutputs:
        """The stack's current outputs.

        Raises:
            PulumiError: the stack cannot be read.
        """
        from pulumi import automation as auto

        try:
            raw = self.stack(configure=False).outputs()
        except auto.CommandError as exc:
            raise PulumiError(f"pulumi could not read the outputs of {self.target.stack}: {_last_lines(exc)}") from None
        return StackOutputs(
            values={k: v.value for k, v in raw.items()}, secret=frozenset(k for k, v in raw.items() if v.secret)
        )


# A stack output clusterctl reads is a small mapping (host name -> address or host key).
MAX_OUTPUT_ENTRIES = 100_000
MAX_OUTPUT_VALUE_CHARS = 16_384


def output_mapping(outputs: dict[str, Any], key: str, stack: str) -> dict[str, str]:
    """The stack output ``key`` as host name -> text, checked (absent or null: empty).

    Why: outputs come back from the engine and the cloud; a program bug or a provider answer of
    the wrong shape must be a clear error naming the stack and output, not a traceback later.

    Raises:
        PulumiError: the output is not a mapping of short texts.
    """
    value = outputs.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PulumiError(
            f"stack {stack}: output `{key}` is a {type(value).__name__}, not a mapping of host names to values; "
            "the stack program and this clusterctl do not match (run `clusterctl render` and `clusterctl up` again)"
        )
    if len(value) > MAX_OUTPUT_ENTRIES:
        raise PulumiError(f"stack {stack}: output `{key}` has {len(value)} entries; at most {MAX_OUTPUT_ENTRIES}")
    out: dict[str, str] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not isinstance(item, str | None) or len(item or "") > MAX_OUTPUT_VALUE_CHARS:
            what = f"{len(item)} characters long" if isinstance(item, str) else f"a {type(item).__name__}"
            raise PulumiError(
                f"stack {stack}: output `{key}` has an entry {str(name)[:60]!a} whose value is {what}, not a short "
                "text; the stack program and this clusterctl do not match"
            )
        if item is not None:
            out[name] = item
    return out


def _counts(ops: Any) -> dict[str, int]:
    """The engine's per-operation counts with plain string keys (``create``, ``same``, ...)."""
    return {str(getattr(op, "value", op)): int(count) for op, count in dict(ops or {}).items()}


def _plain(outputs: dict[str, Any]) -> dict[str, Any]:
    return {k: getattr(v, "value", v) for k, v in outputs.items()}


def _last_lines(exc: Exception, lines: int = 8) -> str:
    text = str(getattr(exc, "stderr", "") or exc).strip().splitlines()
    return "\n".join(text[-lines:])
