"""Controller side of clusterctl.node.sync_files: read every source here, send all in one module call.

Why an action plugin: the copy module makes a round trip per file (stat, then transfer, then the
module), so a role with ten rendered files paid thirty. Here the sources are read on the control
machine, their contents go base64-encoded in the arguments of one module run, and the module on the
node compares and writes only what differs (see plugins/modules/sync_files.py).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase

MODULE = "clusterctl.node.sync_files"
KINDS = ("src", "content", "block")
NODE_STATES = ("directory", "absent", "link")


def _content_bytes(value):
    """Inline content as bytes: strings as UTF-8, structured data as JSON (like the copy module)."""
    if isinstance(value, (dict, list)):
        return to_bytes(json.dumps(value, indent=2, sort_keys=True) + "\n")
    if isinstance(value, bytes):
        return value
    return to_bytes(to_text(value), errors="surrogate_or_strict")


def _is_text(data):
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class ActionModule(ActionBase):
    """Packs the declared files for the module: sources read on the controller, one transfer."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("files", "owner", "group", "mode", "directory_mode", "follow", "unsafe_writes"))

    def _read_src(self, src):
        """Bytes of ``src``: an absolute path, or one found like the copy module's (the role's files/)."""
        try:
            path = self._find_needle("files", src)
        except AnsibleError as error:
            raise AnsibleActionFail(f"sync_files: source {src} not found: {error}") from None
        if Path(path).is_dir():
            raise AnsibleActionFail(f"sync_files: source {src} is a directory; list its files one by one")
        real = self._loader.get_real_file(path, decrypt=True)
        try:
            with open(real, "rb") as handle:
                return handle.read()
        finally:
            self._loader.cleanup_tmp_file(real)

    def _pack(self, index, raw, secret):
        """One entry as the module takes it: content base64-encoded, diff allowed only for text."""
        if not isinstance(raw, dict):
            raise AnsibleActionFail(f"sync_files: files[{index}] is not a dict: {raw!r}")
        dest = raw.get("dest")
        if not dest or not isinstance(dest, str):
            raise AnsibleActionFail(f"sync_files: files[{index}] has no dest")
        kinds = [kind for kind in KINDS if raw.get(kind) is not None]
        state = raw.get("state")
        if state in NODE_STATES:
            if kinds:
                raise AnsibleActionFail(f"sync_files: {dest}: state={state} takes no {', '.join(kinds)}")
        elif len(kinds) != 1:
            raise AnsibleActionFail(
                f"sync_files: {dest}: give exactly one of src, content or block"
                f" (or state: directory, absent or link); got {', '.join(kinds) or 'none'}"
            )
        entry = {key: value for key, value in raw.items() if key not in ("src", "content")}
        if raw.get("src") is not None or raw.get("content") is not None:
            data = self._read_src(raw["src"]) if raw.get("src") is not None else _content_bytes(raw["content"])
            entry["content_b64"] = to_text(base64.b64encode(data))
            entry["diff"] = bool(raw.get("diff", True)) and not secret and _is_text(data)
        else:
            entry["diff"] = bool(raw.get("diff", True)) and not secret
        return entry

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        self._supports_async = False
        result = super().run(tmp, task_vars)
        del tmp

        args = dict(self._task.args)
        files = args.get("files")
        if not isinstance(files, list):
            raise AnsibleActionFail(
                "sync_files: files must be a list of entries (dest plus src, content, block or state)"
            )
        # With no_log on the task the content never goes into a diff (secrets: keys, passwords).
        secret = bool(self._task.no_log)
        args["files"] = [self._pack(index, raw, secret) for index, raw in enumerate(files)]

        module_result = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
        # The module's echo of its arguments holds every content: it never leaves the action.
        module_result.pop("invocation", None)
        result.update(module_result)
        return result
