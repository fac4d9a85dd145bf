"""Write what a run did to a JSON file: the agent of a pulling node reports it to Slurm.

Enabled by clusterctl's agent only (``ANSIBLE_CALLBACKS_ENABLED``), with the file named by
``CLUSTERCTL_AGENT_REPORT``. The file holds the number of tasks run, changed and failed, and for
each failure what ``clusterctl.agent.cause`` needs to find its cause on the node: the task, the
module, the unit a service task named, the message and the task's output (cut). Tasks marked
``no_log`` leave only their name.
"""

from __future__ import annotations

DOCUMENTATION = """
name: agent_report
type: aggregate
short_description: the run's outcome as JSON, for clusterctl's pull agent
description:
  - Writes the tasks run, changed and failed, and each failure's task, module, unit and message, to the
    file named by the CLUSTERCTL_AGENT_REPORT environment variable.
requirements:
  - CLUSTERCTL_AGENT_REPORT set to a writable path
"""

import json
import os

from ansible.plugins.callback import CallbackBase

MAX_DETAIL = 8000
MAX_FAILURES = 16


class CallbackModule(CallbackBase):
    """See the module docstring."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "clusterctl.node.agent_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.report = {"tasks": 0, "ok": 0, "changed": 0, "skipped": 0, "failures": []}

    def v2_runner_on_ok(self, result) -> None:
        self.report["tasks"] += 1
        self.report["ok"] += 1
        if result._result.get("changed"):
            self.report["changed"] += 1

    def v2_runner_on_skipped(self, result) -> None:
        self.report["tasks"] += 1
        self.report["skipped"] += 1

    def v2_runner_on_failed(self, result, ignore_errors: bool = False) -> None:
        self.report["tasks"] += 1
        if ignore_errors or len(self.report["failures"]) >= MAX_FAILURES:
            return
        res = result._result
        hidden = bool(res.get("_ansible_no_log"))
        args = (res.get("invocation") or {}).get("module_args") or {}
        message = ""
        for key in ("msg", "stderr", "module_stderr", "reason"):
            if res.get(key):
                message = str(res[key])
                break
        task = result._task
        self.report["failures"].append(
            {
                "task": task.get_name(),
                "action": str(getattr(task, "resolved_action", "") or task.action or ""),
                "unit": "" if hidden else str(res.get("name") or args.get("name") or ""),
                "message": "the output of this task is not logged (no_log)" if hidden else message[:2000],
                "detail": ""
                if hidden
                else "\n".join(str(res.get(k) or "") for k in ("stderr", "stdout"))[-MAX_DETAIL:],
            }
        )

    def v2_runner_on_unreachable(self, result) -> None:
        self.v2_runner_on_failed(result)

    def v2_playbook_on_stats(self, stats) -> None:
        path = os.environ.get("CLUSTERCTL_AGENT_REPORT", "")
        if not path:
            return
        temporary = f"{path}.tmp"
        with open(temporary, "w", encoding="utf-8") as out:
            json.dump(self.report, out)
        os.replace(temporary, path)
