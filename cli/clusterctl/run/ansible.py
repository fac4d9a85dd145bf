"""Configure nodes with ansible-runner over the rendered build directory.

The build dir's ``ansible/`` is the runner's private data dir (inventory, env); the roles
and ``site.yml`` come from clusterctl's data. Events feed the bus; the full Ansible output
goes to ``<build>/logs/ansible.log`` (tasks touching secrets are no_log), appended through the
build-dir writer; ansible-runner's artifacts go to the state directory. Host keys are always
checked (``SSH_ENV``; the inventory carries the options of ``run.sshopts``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.paths import roles_dir
from clusterctl.render import ansible_yaml
from clusterctl.render.builddir import open_run_log
from clusterctl.run.collections import REQUIRED_COLLECTIONS, AnsibleSetupError, collections_path, ensure_collections
from clusterctl.run.events import EventBus
from clusterctl.run.sshopts import STRICT_SSH_ARGS, control_path_dir

PHASE = "configure"
__all__ = ["REQUIRED_COLLECTIONS", "AnsibleSetupError", "collections_path", "ensure_collections", "run_playbook"]
LOG_FILE = "logs/ansible.log"
# Host keys are always checked, whatever the operator's environment says: host key checking turned
# off there would make Ansible put an option that disables it before the inventory's options, and
# ssh keeps the first value it reads. The rendered env/envvars says the same (and wins when present); the inventory
# adds known_hosts, key and bastion per host (run.sshopts).
SSH_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "True",
    "ANSIBLE_SSH_ARGS": f"{STRICT_SSH_ARGS} -o ControlMaster=auto -o ControlPersist=300s -o ServerAliveInterval=30",
}


@dataclass(frozen=True)
class HostFailure:
    """A task that failed on a host."""

    host: str
    task: str
    message: str
    unreachable: bool = False
    # The module that failed (its resolved name), the unit a service task was about, the task's
    # stderr, and what the node says caused it (`clusterctl.run.failure_cause`).
    action: str = ""
    unit: str = ""
    detail: str = ""
    cause: tuple[str, ...] = ()


@dataclass
class ConfigureResult:
    """What a configure run did."""

    status: str
    rc: int
    changed: dict[str, int] = field(default_factory=dict)
    ok: dict[str, int] = field(default_factory=dict)
    failures: list[HostFailure] = field(default_factory=list)
    seconds: float = 0.0
    log: Path | None = None

    @property
    def changed_total(self) -> int:
        """Changed tasks over all hosts."""
        return sum(self.changed.values())

    @property
    def succeeded(self) -> bool:
        """No failures and a zero exit."""
        return self.rc == 0 and not self.failures


def merged(runs: Sequence[ConfigureResult]) -> ConfigureResult:
    """Several runs of one configure stage (a rolling upgrade's batches) as one result."""
    changed: dict[str, int] = {}
    ok: dict[str, int] = {}
    for run in runs:
        for host, n in run.changed.items():
            changed[host] = changed.get(host, 0) + n
        for host, n in run.ok.items():
            ok[host] = ok.get(host, 0) + n
    last = runs[-1]
    return ConfigureResult(
        status=last.status,
        rc=next((r.rc for r in runs if r.rc != 0), 0),
        changed=changed,
        ok=ok,
        failures=[f for r in runs for f in r.failures],
        seconds=sum(r.seconds for r in runs),
        log=last.log,
    )


def _message(result: dict[str, Any]) -> str:
    for key in ("msg", "stderr", "module_stderr", "reason"):
        value = result.get(key)
        if value:
            return str(value).strip().splitlines()[-1][:400] if key != "msg" else str(value)[:600]
    return "failed"


def failure_from_event(host: str, task: str, data: dict[str, Any]) -> HostFailure:
    """A ``runner_on_failed`` event's failure, with what `failure_cause` needs to find its cause."""
    res = data.get("res", {})
    message = _message(res)
    action = str(data.get("resolved_action") or data.get("task_action") or "")
    args = (res.get("invocation") or {}).get("module_args") or {}
    unit = res.get("name") or args.get("name") or ""
    detail = "\n".join(str(res.get(key) or "") for key in ("stderr", "stdout"))
    return HostFailure(host, task, message, action=action, unit=str(unit), detail=detail[-8000:])


def _path_with_interpreter_bin() -> str:
    """PATH with this interpreter's bin/ first: ansible-runner runs `ansible-playbook` by name, and a
    venv's bin/ need not be on PATH (`.venv/bin/clusterctl up` without activating it)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])


_FACT_FILE = re.compile(r"(?:s\d+_)?(?P<host>.+)")


def _artifacts(state_dir: Path) -> Path:
    """ansible-runner's artifacts (job events, stdout) of the cluster's runs, in its state directory."""
    return state_dir / "ansible-artifacts"


def _fact_cache(state_dir: Path) -> Path:
    """The cluster's Ansible fact cache (jsonfile), kept across runs in its state directory."""
    return state_dir / "facts"


def forget_facts(state_dir: Path, hostnames: Iterable[str]) -> None:
    """Drop the facts cached for ``hostnames``: they describe machines that no longer exist
    (a removed burst node, a container created anew), and so do the flags the roles cache with them."""
    wanted = set(hostnames)
    cache = _fact_cache(state_dir)
    if not cache.is_dir():
        return
    for entry in cache.iterdir():
        # ansible-core 2.19+ prefixes each key with its cache schema ("s1_<host>"); older ones do not.
        match = _FACT_FILE.fullmatch(entry.name)
        if match and match.group("host") in wanted:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()


@contextlib.contextmanager
def _extravars_file(state_dir: Path, extravars: dict[str, Any]) -> Iterator[str | None]:
    """The extra variables as an ``!unsafe`` YAML file for ``-e @file``, removed after the run.

    Why not ansible-runner's ``extravars``: it passes them as JSON on the command line, and
    Ansible templates those strings (a state directory named after a cluster whose name holds
    ``{{ }}`` would run it). The file is created 0600 under a name nobody can predict.
    """
    if not extravars:
        yield None
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=".extravars-", suffix=".yml", dir=state_dir)
    path = Path(name).resolve()
    try:
        with os.fdopen(handle, "w") as out:
            out.write(ansible_yaml.dump(extravars, "extra variables of one clusterctl run"))
        yield str(path)
    finally:
        path.unlink(missing_ok=True)


def run_playbook(
    build_dir: Path,
    state_dir: Path,
    events: EventBus,
    *,
    extravars: dict[str, Any] | None = None,
    limit: Sequence[str] | None = None,
    playbook: Path | None = None,
    ident: str | None = None,
    stream: bool = False,
) -> ConfigureResult:
    """Run ``site.yml`` (or ``playbook``) over the build directory's inventory.

    Ansible's output goes to ``logs/ansible.log`` in the build directory; ``stream`` shows it on
    stdout as well (``--verbose``).
    """
    import ansible_runner

    private = (build_dir / "ansible").resolve()
    log_path = build_dir / LOG_FILE
    facts = _fact_cache(state_dir)
    facts.mkdir(parents=True, exist_ok=True)
    envvars = {
        **SSH_ENV,
        # Shared SSH connections per cluster: one checked against another known_hosts is never reused.
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_path_dir(state_dir)),
        "ANSIBLE_ROLES_PATH": str(roles_dir()),
        # Fetched once into the user's cache when they are nowhere (an installed clusterctl's first run).
        "ANSIBLE_COLLECTIONS_PATH": ensure_collections(lambda line: events.info(line, phase=PHASE)),
        "PATH": _path_with_interpreter_bin(),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_LOCAL_TEMP": str((state_dir / "tmp").resolve()),
        # The rendered settings, not a user's ANSIBLE_CONFIG or ./ansible.cfg.
        "ANSIBLE_CONFIG": str(private / "ansible.cfg"),
    }
    failures: list[HostFailure] = []
    started = time.monotonic()

    # Appended through the build-dir writer: a link planted at logs/ or ansible.log is refused, not followed.
    with open_run_log(build_dir, LOG_FILE) as log:
        log.write(f"\n===== clusterctl configure {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")

        def on_event(event: dict[str, Any]) -> bool:
            stdout = event.get("stdout")
            if stdout:
                log.write(stdout + "\n")
            name = event.get("event", "")
            data = event.get("event_data", {})
            host = data.get("host", "")
            task = data.get("task", "")
            if name == "runner_on_ok":
                changed = bool(data.get("res", {}).get("changed"))
                events.host(PHASE, host, "changed" if changed else "ok", task=task)
            elif name == "runner_on_failed" and not data.get("ignore_errors"):
                failure = failure_from_event(host, task, data)
                failures.append(failure)
                message = failure.message
                events.host(PHASE, host, "failed", message, task=task)
            elif name == "runner_on_unreachable":
                message = _message(data.get("res", {}))
                failures.append(HostFailure(host, task, message, unreachable=True))
                events.host(PHASE, host, "unreachable", message, task=task)
            elif name == "runner_on_start":
                events.host(PHASE, host, "running", task=task)
            return True

        with _extravars_file(state_dir, extravars or {}) as extravars_path:
            runner = ansible_runner.run(
                private_data_dir=str(private),
                playbook=str(playbook or roles_dir() / "site.yml"),
                envvars=envvars,
                cmdline=shlex.join(["-e", f"@{extravars_path}"]) if extravars_path else None,
                limit=",".join(limit) if limit else None,
                event_handler=on_event,
                quiet=not stream,
                ident=ident,
                rotate_artifacts=3,
                # Job events hold every task's output: they go to the private state directory,
                # not into the build directory (which holds nothing secret).
                artifact_dir=str(_artifacts(state_dir).resolve()),
                # ansible-runner sets ANSIBLE_CACHE_PLUGIN_CONNECTION itself (to each run's artifact
                # directory unless told otherwise, overriding envvars): an absolute path keeps one
                # cache per cluster.
                fact_cache=str(facts.resolve()),
            )
    stats = runner.stats or {}
    return ConfigureResult(
        status=runner.status,
        rc=runner.rc,
        changed=dict(stats.get("changed", {})),
        ok=dict(stats.get("ok", {})),
        failures=failures,
        seconds=time.monotonic() - started,
        log=log_path,
    )
