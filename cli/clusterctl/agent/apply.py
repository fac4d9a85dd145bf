"""Apply a bundle on this node: the roles' playbook with ``ansible-playbook -c local``.

The bundle's three layers, unpacked by digest (``layers.py``):

- ``engine``: ansible-core and the libraries it needs (``python/``), the third-party collections
  the roles use (``collections/``); the same for every node of a cluster, baked into images.
- ``roles``: the roles and ``site.yml`` (``roles/``), clusterctl's collection (``collections/``).
- ``files``: what this kind of node needs of the render (``render/``), its group variables
  (``inventory/group_vars/``) and ``bundle.json``: the inventory groups it is in and the hosts of
  the groups the roles look up (controllers, login nodes), none of them ever connected to.

The inventory names this node alone as a host that is reached (``--limit``), with the pointer's
facts. Ansible's output goes to a log file of the run; what the run did comes back through the
collection's ``agent_report`` callback.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bounded import BoundsError, json_document
from .pointer import STAGES

PYTHON = "/usr/bin/python3"
STATE_DIR = "/var/lib/clusterctl/agent"
# The output of the node's last apply (the journal has the agent's summary of it).
APPLY_LOG = f"{STATE_DIR}/last-apply.log"
APPLY_TIMEOUT_S = 4 * 3600.0
MAX_REPORT_BYTES = 4 * 1024 * 1024
REPORT_CALLBACK = "clusterctl.node.agent_report"


@dataclass(frozen=True)
class Failure:
    """A task that failed (what the callback wrote)."""

    task: str
    action: str = ""
    unit: str = ""
    message: str = ""
    detail: str = ""


@dataclass
class ApplyResult:
    """What one apply did."""

    rc: int
    tasks: int = 0
    changed: int = 0
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        """The playbook ran to its end with no failure."""
        return self.rc == 0 and not self.failures and not self.error


@dataclass(frozen=True)
class Layout:
    """Where an apply finds its layers and writes its run files."""

    engine: Path
    roles: Path
    files: Path
    run: Path

    def bundle(self) -> dict[str, Any]:
        """``files/bundle.json``.

        Raises:
            ValueError: It is not a bundle description.
        """
        try:
            data = json_document((self.files / "bundle.json").read_text(encoding="utf-8"), "bundle.json")
        except (OSError, UnicodeDecodeError, BoundsError) as exc:
            raise ValueError(f"the bundle's bundle.json cannot be read: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
            raise ValueError("the bundle's bundle.json names no groups")
        return data


def inventory(
    node: str, stage: str, facts: Mapping[str, Any], bundle: Mapping[str, Any], layout: Layout
) -> dict[str, Any]:
    """The run's inventory: this node with its facts, in its groups; the hosts the roles look up, unreached."""
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r}")
    host: dict[str, Any] = {
        "ansible_connection": "local",
        "ansible_python_interpreter": PYTHON,
        "clusterctl_stage": stage,
        "clusterctl_render_dir": str(layout.files / "render"),
        "clusterctl_pull": True,
        **facts,
    }
    hosts: dict[str, Any] = {node: host}
    children: dict[str, Any] = {}
    for group in [*bundle["groups"], "bundle"]:
        children.setdefault(str(group), {"hosts": {}})["hosts"][node] = None
    for group, members in sorted((bundle.get("others") or {}).items()):
        for member in members:
            if member != node:
                hosts.setdefault(str(member), {"ansible_connection": "local"})
                children.setdefault(str(group), {"hosts": {}})["hosts"][str(member)] = None
    for group in bundle.get("empty_groups") or []:
        children.setdefault(str(group), {"hosts": {}})
    return {"all": {"hosts": hosts, "children": children}}


ANSIBLE_CFG = """\
# Written by clusterctl's agent for one apply of the configure stage on this node.
[defaults]
roles_path = {roles}
collections_path = {collections}
interpreter_python = {python}
forks = 1
nocolor = True
retry_files_enabled = False
callbacks_enabled = {callback}
local_tmp = {tmp}
remote_tmp = {tmp}
deprecation_warnings = False
# How often Ansible's main process polls its worker: the default 1 ms costs the node about 5 % of a
# core for the whole apply (most of it in package installs); 20 ms adds at most 20 ms a task.
internal_poll_interval = 0.02
# Modules log their arguments to the journal otherwise (file contents, for sync_files): the apply's
# own log and the agent's summary say what ran.
no_target_syslog = True
"""


def prepare(node: str, stage: str, facts: Mapping[str, Any], layout: Layout) -> Path:
    """Write the run's ansible.cfg and inventory; returns the run directory."""
    run = layout.run
    (run / "inventory" / "group_vars").mkdir(parents=True, exist_ok=True)
    (run / "tmp").mkdir(exist_ok=True, mode=0o700)
    for source in sorted((layout.files / "inventory" / "group_vars").glob("*.yml")):
        (run / "inventory" / "group_vars" / source.name).write_bytes(source.read_bytes())
    data = inventory(node, stage, facts, layout.bundle(), layout)
    (run / "inventory" / "hosts.json").write_text(json.dumps(data, indent=1, sort_keys=True))
    collections = f"{layout.roles / 'collections'}:{layout.engine / 'collections'}"
    (run / "ansible.cfg").write_text(
        ANSIBLE_CFG.format(
            roles=layout.roles / "roles",
            collections=collections,
            python=PYTHON,
            callback=REPORT_CALLBACK,
            tmp=run / "tmp",
        )
    )
    return run


def _failures(items: Any) -> list[Failure]:
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            out.append(
                Failure(**{k: str(item.get(k) or "")[:8000] for k in ("task", "action", "unit", "message", "detail")})
            )
    return out


def run_playbook(node: str, layout: Layout, log: Path, timeout: float = APPLY_TIMEOUT_S) -> ApplyResult:
    """Run site.yml for this node; Ansible's output goes to ``log``."""
    run = layout.run
    report = run / "report.json"
    report.unlink(missing_ok=True)
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(layout.engine / "python"),
        "ANSIBLE_CONFIG": str(run / "ansible.cfg"),
        "CLUSTERCTL_AGENT_REPORT": str(report),
    }
    argv = [
        PYTHON,
        "-S",  # only the engine's libraries, never the distribution's
        "-m",
        "ansible.cli.playbook",
        "-i",
        str(run / "inventory"),
        "--limit",
        node,
        str(layout.roles / "roles" / "site.yml"),
    ]
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log, "wb") as out:
            done = subprocess.run(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=run, timeout=timeout, check=False
            )
        rc = done.returncode
        error = ""
    except subprocess.TimeoutExpired:
        rc, error = 124, f"the playbook ran longer than {timeout:.0f} s"
    except OSError as exc:
        rc, error = 127, f"cannot run the playbook: {exc}"
    outcome = ApplyResult(rc=rc, seconds=time.monotonic() - started, error=error)
    try:
        raw = report.read_bytes()[:MAX_REPORT_BYTES]
        data = json_document(raw.decode("utf-8"), "run report")
    except (OSError, UnicodeDecodeError, BoundsError):
        data = None
    if isinstance(data, dict):
        outcome.tasks = int(data.get("tasks") or 0)
        outcome.changed = int(data.get("changed") or 0)
        outcome.failures = _failures(data.get("failures"))
    elif not outcome.error:
        outcome.error = f"the playbook ended (exit {rc}) without its report; see {log}"
    if rc != 0 and not outcome.failures and not outcome.error:
        outcome.error = f"the playbook failed (exit {rc}) outside any task; see {log}"
    return outcome
