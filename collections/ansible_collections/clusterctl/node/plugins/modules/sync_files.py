#!/usr/bin/python
"""Write a declared list of files to a node in one call, touching only what differs.

The action plugin of the same name (plugins/action/sync_files.py) reads every ``src`` on the
control machine and sends all contents in one module call; this module, on the node, compares each
entry with what is there and writes only the entries that differ (atomically: a temporary file in
the same directory, fsync, rename), fixes mode and ownership in place when only they differ, and
reports which destinations changed. The functions below hold the logic without Ansible, so
tests/unit/collection/ runs them directly.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sync_files
short_description: Write a declared list of files, directories, links and blocks in one call
version_added: "1.0.0"
description:
  - Takes a role's declared list of files (content from a file on the control machine or inline),
    directories, symbolic links, removed paths and marked blocks, and applies them in one remote call,
    in the order given. Only what differs is written; the result names every destination that changed,
    and the handler topics of the changed entries, so a task after it can notify handlers per file.
  - Files are written atomically (a temporary file in the destination's directory, fsync, rename) with
    their mode and ownership set before the rename; when only mode or ownership differ they are fixed
    in place and the content is not rewritten.
  - A symbolic link found at a destination is never followed unless C(follow=true); a file entry replaces
    the link itself, a directory entry fails.
  - Supports check mode and diff mode. With C(no_log) on the task (secrets) no content reaches a diff.
author: clusterctl
options:
  files:
    description:
      - The entries, applied in order (list a directory before the files in it).
      - Each entry has C(dest) and one of C(src), C(content), C(block), or C(state=directory),
        C(state=absent), C(state=link) (with C(target)).
    type: list
    elements: dict
    required: true
    suboptions:
      dest:
        description: Absolute path on the node.
        type: path
        required: true
      state:
        description:
          - C(file) (the default with C(src) or C(content)), C(directory), C(absent), C(link),
            or C(block) (the default with C(block)).
        type: str
        choices: [file, directory, absent, link, block]
      src:
        description:
          - Path of the content on the control machine (absolute, or found like the copy module's src
            in the role's files/). Read by the action plugin, never on the node.
        type: path
      content:
        description: The content as a string.
        type: str
      content_b64:
        description: Internal, set by the action plugin from C(src) or C(content).
        type: str
      block:
        description: Text kept between two marker lines in C(dest), which may hold other text.
        type: str
      marker:
        description: Marker line of a block; C({mark}) becomes BEGIN and END.
        type: str
        default: "# {mark} ANSIBLE MANAGED BLOCK"
      insertafter:
        description:
          - Where a new block goes, C(EOF) or a regular expression (after its last matching line; EOF when
            none matches).
        type: str
        default: EOF
      target:
        description: What a C(state=link) entry points to.
        type: str
      mode:
        description:
          - Octal mode as a string (C("0644")). Unset, an existing path keeps its mode and a new one gets
            0644 (files) or 0755 (directories).
        type: str
      owner:
        description: Owner (name or numeric ID). Unset, an existing path keeps its owner.
        type: str
      group:
        description: Group (name or numeric ID). Unset, an existing path keeps its group.
        type: str
      validate:
        description: Command run on the new content before it replaces C(dest); C(%s) is the temporary file.
        type: str
      notify:
        description: Handler topics to report in the result's C(notify) when this entry changed.
        type: list
        elements: str
      follow:
        description: Follow a symbolic link at C(dest) (write where it points).
        type: bool
      unsafe_writes:
        description:
          - Write in place when the rename fails because C(dest) is a mount point (Docker bind-mounts
            /etc/hosts and /etc/hostname into containers).
        type: bool
      diff:
        description: Internal, set by the action plugin; false keeps this entry's content out of diffs.
        type: bool
  owner:
    description: Owner of entries that name none.
    type: str
  group:
    description: Group of entries that name none.
    type: str
  mode:
    description: Mode of file and block entries that name none.
    type: str
  directory_mode:
    description: Mode of directory entries that name none.
    type: str
  follow:
    description: Default of the entries' C(follow).
    type: bool
    default: false
  unsafe_writes:
    description: Default of the entries' C(unsafe_writes).
    type: bool
    default: false
notes:
  - The action plugin sends every content in the one module call; keep it to configuration-sized files.
  - Notify handlers per file with a second, controller-only task; see EXAMPLES.
"""

EXAMPLES = r"""
- name: Install the rendered Slurm configuration
  clusterctl.node.sync_files:
    owner: root
    group: root
    mode: "0644"
    files:
      - {dest: /etc/slurm/plugstack.conf.d, state: directory, mode: "0755"}
      - {src: "{{ render }}/slurm/slurm.conf", dest: /etc/slurm/slurm.conf, notify: [slurm config changed]}
      - {src: "{{ render }}/slurm/gres.conf", dest: /etc/slurm/gres.conf, notify: [restart slurmd]}
      - {content: "{{ lookup('ansible.builtin.template', 'access.conf.j2') }}", dest: /etc/security/access.conf}
      - dest: /etc/hosts
        block: "{{ lookup('ansible.builtin.file', hosts) }}"
        marker: "# {mark} cluster nodes"
        unsafe_writes: true
      - {dest: /etc/slurm/plugstack.conf.d/pyxis.conf, state: absent}
  register: __slurm_files

# Handlers per file: a controller-only task whose notify is the topics of the changed entries.
- name: Notify the handlers of the changed files
  ansible.builtin.debug:
    msg: "changed: {{ __slurm_files.changed_files }}"
  changed_when: true
  notify: "{{ __slurm_files.notify }}"
  when: __slurm_files.notify | length > 0

- name: Install the cluster's key (a secret, so nothing of it is logged or diffed)
  clusterctl.node.sync_files:
    files:
      - src: "{{ munge_key_file }}"
        dest: /etc/munge/munge.key
        owner: munge
        group: munge
        mode: "0400"
        notify: [restart munge]
  no_log: true
  register: __munge_files
"""

RETURN = r"""
changed_files:
  description: Destinations that changed (or would change in check mode), in entry order.
  returned: always
  type: list
  elements: str
notify:
  description: Handler topics of the changed entries, each once, in entry order.
  returned: always
  type: list
  elements: str
states:
  description: >-
    What happened to each destination - created, updated (content), attributes (mode or owner
    only), removed, or ok.
  returned: always
  type: dict
"""

import base64
import errno
import grp
import os
import pwd
import re
import shlex
import stat
import subprocess
import tempfile

DEFAULT_FILE_MODE = 0o644
DEFAULT_DIR_MODE = 0o755
# Beyond this a diff is left out (the files this syncs are configuration, not data).
MAX_DIFF_BYTES = 64 * 1024


class SyncError(Exception):
    """An entry cannot be applied; the message names the destination and what to do."""


def parse_mode(value, dest):
    """An octal mode string ("0644", "644") as an int; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = str(value)
    if not re.match(r"^0?[0-7]{3,4}$", text):
        raise SyncError(f'{dest}: mode {text!r} is not an octal mode such as "0644"')
    return int(text, 8)


def resolve_uid(value, dest):
    """A user name or numeric ID as a uid; None stays None."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise SyncError(f"{dest}: user {text!r} does not exist on this node (install its package first)") from None


def resolve_gid(value, dest):
    """A group name or numeric ID as a gid; None stays None."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.isdigit():
        return int(text)
    try:
        return grp.getgrnam(text).gr_gid
    except KeyError:
        raise SyncError(f"{dest}: group {text!r} does not exist on this node (install its package first)") from None


def _lstat(path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _read(path, follow):
    """Bytes of the regular file at ``path``, never through a link unless ``follow``."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def block_content(current, block, marker, insertafter):
    """``current`` (text) with ``block`` between the BEGIN and END lines of ``marker``.

    An existing block is replaced where it is; a new one goes after the last line matching
    ``insertafter`` (a regular expression) or at the end (``EOF``, or no line matches).
    """
    begin = marker.replace("{mark}", "BEGIN")
    end = marker.replace("{mark}", "END")
    lines = current.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    body = [line + "\n" for line in block.rstrip("\n").split("\n")] if block.strip("\n") else []
    new = [begin + "\n", *body, end + "\n"]
    stripped = [line.rstrip("\r\n") for line in lines]
    if begin in stripped and end in stripped[stripped.index(begin) :]:
        first = stripped.index(begin)
        last = stripped.index(end, first)
        return "".join(lines[:first] + new + lines[last + 1 :])
    at = len(lines)
    if insertafter and insertafter != "EOF":
        pattern = re.compile(insertafter)
        matches = [i for i, line in enumerate(stripped) if pattern.search(line)]
        if matches:
            at = matches[-1] + 1
    return "".join(lines[:at] + new + lines[at:])


def _is_text(data):
    if len(data) > MAX_DIFF_BYTES or b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class Syncer:
    """Applies entries one by one; ``check`` only reports what would change."""

    def __init__(self, check=False, want_diff=False, run_command=None):
        self.check = check
        self.want_diff = want_diff
        self.run_command = run_command or _run_command
        self.states = {}
        self.changed_files = []
        self.notify = []
        self.diffs = []
        # Directories created in this call (or that would be, in check mode).
        self.planned_dirs = set()

    # --- public entry point -------------------------------------------------------------------

    def apply(self, entry):
        """Apply one normalized entry (see ``normalize``); record what changed."""
        dest = entry["dest"]
        handler = {
            "file": self._file,
            "block": self._block,
            "directory": self._directory,
            "absent": self._absent,
            "link": self._link,
        }[entry["state"]]
        state = handler(entry)
        self.states[dest] = state
        if state != "ok":
            if dest not in self.changed_files:
                self.changed_files.append(dest)
            for topic in entry.get("notify") or []:
                if topic not in self.notify:
                    self.notify.append(topic)
        return state

    def result(self):
        out = {
            "changed": bool(self.changed_files),
            "changed_files": self.changed_files,
            "notify": self.notify,
            "states": self.states,
        }
        if self.want_diff and self.diffs:
            out["diff"] = self.diffs
        return out

    # --- helpers --------------------------------------------------------------------------------

    def _target(self, entry):
        """The path written: ``dest``, or where a link at it points when the entry follows links."""
        dest = entry["dest"]
        if entry.get("follow") and os.path.islink(dest):
            return os.path.realpath(dest)
        return dest

    def _check_parent(self, path):
        parent = os.path.dirname(path) or "/"
        if os.path.isdir(parent) or parent in self.planned_dirs:
            return
        raise SyncError(f"{path}: its directory {parent} does not exist; list it as a directory entry before the file")

    def _diff(self, entry, before, after):
        if self.want_diff and entry.get("diff", True):
            self.diffs.append(
                {"before_header": entry["dest"], "after_header": entry["dest"], "before": before, "after": after}
            )

    def _attr_diff(self, entry, st, mode, uid, gid):
        if not (self.want_diff and entry.get("diff", True)):
            return
        before, after = {"path": entry["dest"]}, {"path": entry["dest"]}
        if mode is not None and stat.S_IMODE(st.st_mode) != mode:
            before["mode"], after["mode"] = f"{stat.S_IMODE(st.st_mode):04o}", f"{mode:04o}"
        if uid is not None and st.st_uid != uid:
            before["owner"], after["owner"] = st.st_uid, uid
        if gid is not None and st.st_gid != gid:
            before["group"], after["group"] = st.st_gid, gid
        self.diffs.append({"before": before, "after": after})

    @staticmethod
    def _attrs_differ(st, mode, uid, gid):
        return (
            (mode is not None and stat.S_IMODE(st.st_mode) != mode)
            or (uid is not None and st.st_uid != uid)
            or (gid is not None and st.st_gid != gid)
        )

    def _write(self, entry, path, data, st):
        """Write ``data`` to ``path`` atomically with the entry's mode and ownership."""
        mode = entry["mode"]
        if mode is None:
            mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else DEFAULT_FILE_MODE
        uid = entry["uid"] if entry["uid"] is not None else (st.st_uid if st is not None else -1)
        gid = entry["gid"] if entry["gid"] is not None else (st.st_gid if st is not None else -1)
        directory = os.path.dirname(path) or "/"
        fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".sync")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                if uid != -1 or gid != -1:
                    os.fchown(handle.fileno(), uid, gid)
                os.fsync(handle.fileno())
            if entry.get("validate"):
                self._validate(entry, tmp)
            try:
                os.rename(tmp, path)
            except OSError as error:
                # A bind-mounted file (Docker's /etc/hosts) cannot be replaced by a rename.
                if not entry.get("unsafe_writes") or error.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM):
                    raise SyncError(f"{entry['dest']}: cannot replace it: {error.strerror}") from None
                self._write_in_place(entry, path, data, mode, uid, gid)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)

    @staticmethod
    def _write_in_place(entry, path, data, mode, uid, gid):
        flags = os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
        if not entry.get("follow"):
            flags |= getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if uid != -1 or gid != -1:
                os.fchown(handle.fileno(), uid, gid)
            os.fsync(handle.fileno())

    def _validate(self, entry, tmp):
        command = entry["validate"]
        if "%s" not in command:
            raise SyncError(f"{entry['dest']}: validate must contain %s (the file to check): {command!r}")
        argv = shlex.split(command.replace("%s", shlex.quote(tmp)))
        rc, out, err = self.run_command(argv)
        if rc != 0:
            raise SyncError(f"{entry['dest']}: the new content failed `{command}` (rc {rc}): {(err or out).strip()}")

    def _content_entry(self, entry, data):
        """Shared by file and block entries: bring ``dest`` to ``data`` with the entry's attributes."""
        path = self._target(entry)
        st = _lstat(path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise SyncError(f"{entry['dest']}: is a directory, expected a file")
        current = None
        if st is not None and stat.S_ISREG(st.st_mode):
            current = _read(path, entry.get("follow"))
        if current == data:
            if not self._attrs_differ(st, entry["mode"], entry["uid"], entry["gid"]):
                return "ok"
            self._attr_diff(entry, st, entry["mode"], entry["uid"], entry["gid"])
            if not self.check:
                if entry["mode"] is not None:
                    os.chmod(path, entry["mode"])
                if entry["uid"] is not None or entry["gid"] is not None:
                    os.chown(
                        path, -1 if entry["uid"] is None else entry["uid"], -1 if entry["gid"] is None else entry["gid"]
                    )
            return "attributes"
        self._check_parent(path)
        if entry.get("diff", True) and self.want_diff:
            before = current if current is not None else b""
            if _is_text(before) and _is_text(data):
                self._diff(entry, before.decode("utf-8"), data.decode("utf-8"))
        if not self.check:
            # A link at dest (not followed) is replaced by the file; its target is not read or written.
            self._write(entry, path, data, st if (st is not None and stat.S_ISREG(st.st_mode)) else None)
        return "created" if st is None else "updated"

    # --- the kinds of entry ---------------------------------------------------------------------

    def _file(self, entry):
        return self._content_entry(entry, entry["data"])

    def _block(self, entry):
        path = self._target(entry)
        st = _lstat(path)
        current = b""
        if st is not None and stat.S_ISREG(st.st_mode):
            current = _read(path, entry.get("follow"))
        elif st is not None and stat.S_ISLNK(st.st_mode):
            raise SyncError(f"{entry['dest']}: is a symbolic link; set follow: true to edit the file it points to")
        try:
            text = current.decode("utf-8")
        except UnicodeDecodeError:
            raise SyncError(f"{entry['dest']}: is not UTF-8 text, a block cannot be kept in it") from None
        new = block_content(text, entry["block"], entry["marker"], entry["insertafter"])
        return self._content_entry(entry, new.encode("utf-8"))

    def _directory(self, entry):
        path = self._target(entry)
        st = _lstat(path)
        mode = entry["mode"]
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise SyncError(
                f"{entry['dest']}: is a symbolic link; set follow: true to accept the directory it points to"
            )
        if st is not None and not stat.S_ISDIR(st.st_mode):
            raise SyncError(f"{entry['dest']}: exists and is not a directory")
        if st is None:
            self.planned_dirs.add(path)
            if not self.check:
                missing = []
                parent = path
                while not os.path.isdir(parent):
                    missing.append(parent)
                    parent = os.path.dirname(parent)
                for new in reversed(missing):
                    os.mkdir(new, DEFAULT_DIR_MODE)
                    # mkdir's mode is cut by the umask; parents get 0755, the directory its own mode.
                    os.chmod(new, DEFAULT_DIR_MODE if new != path or mode is None else mode)
                if entry["uid"] is not None or entry["gid"] is not None:
                    os.chown(
                        path, -1 if entry["uid"] is None else entry["uid"], -1 if entry["gid"] is None else entry["gid"]
                    )
            self._diff(entry, {"path": entry["dest"], "state": "absent"}, {"path": entry["dest"], "state": "directory"})
            return "created"
        if not self._attrs_differ(st, mode, entry["uid"], entry["gid"]):
            return "ok"
        self._attr_diff(entry, st, mode, entry["uid"], entry["gid"])
        if not self.check:
            if mode is not None:
                os.chmod(path, mode)
            if entry["uid"] is not None or entry["gid"] is not None:
                os.chown(
                    path, -1 if entry["uid"] is None else entry["uid"], -1 if entry["gid"] is None else entry["gid"]
                )
        return "attributes"

    def _absent(self, entry):
        dest = entry["dest"]
        st = _lstat(dest)
        if st is None:
            return "ok"
        if stat.S_ISDIR(st.st_mode):
            raise SyncError(f"{dest}: is a directory; state=absent removes files and links only")
        self._diff(entry, {"path": dest, "state": "file"}, {"path": dest, "state": "absent"})
        if not self.check:
            os.unlink(dest)
        return "removed"

    def _link(self, entry):
        dest, target = entry["dest"], entry["target"]
        st = _lstat(dest)
        if st is not None and stat.S_ISLNK(st.st_mode) and os.readlink(dest) == target:
            return "ok"
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise SyncError(f"{dest}: is a directory, expected a link to {target}")
        self._check_parent(dest)
        self._diff(
            entry,
            {"path": dest, "target": os.readlink(dest) if st is not None and stat.S_ISLNK(st.st_mode) else None},
            {"path": dest, "target": target},
        )
        if not self.check:
            tmp = os.path.join(os.path.dirname(dest), "." + os.path.basename(dest) + ".sync-link")
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(target, tmp)
            os.rename(tmp, dest)
        return "created" if st is None else "updated"


def _run_command(argv):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    return result.returncode, result.stdout.decode("utf-8", "replace"), result.stderr.decode("utf-8", "replace")


def normalize(raw, defaults):
    """One entry of the module's arguments, checked and with its defaults applied."""
    if not isinstance(raw, dict) or not raw.get("dest"):
        raise SyncError(f"every entry needs a dest: {raw!r}")
    dest = str(raw["dest"])
    if not os.path.isabs(dest):
        raise SyncError(f"{dest}: dest must be an absolute path")
    dest = os.path.normpath(dest)
    state = raw.get("state")
    has_content = raw.get("content_b64") is not None or raw.get("content") is not None
    if state is None:
        state = "block" if raw.get("block") is not None else "file"
    if state == "file" and not has_content:
        raise SyncError(f"{dest}: a file entry needs src or content")
    if state == "block" and raw.get("block") is None:
        raise SyncError(f"{dest}: a block entry needs block")
    if state == "link" and not raw.get("target"):
        raise SyncError(f"{dest}: a link entry needs target")
    entry = {
        "dest": dest,
        "state": state,
        "mode": parse_mode(
            raw.get("mode")
            if raw.get("mode") is not None
            else (defaults.get("directory_mode") if state == "directory" else defaults.get("mode")),
            dest,
        ),
        "uid": resolve_uid(raw.get("owner") if raw.get("owner") is not None else defaults.get("owner"), dest),
        "gid": resolve_gid(raw.get("group") if raw.get("group") is not None else defaults.get("group"), dest),
        "follow": raw.get("follow") if raw.get("follow") is not None else bool(defaults.get("follow")),
        "unsafe_writes": raw.get("unsafe_writes")
        if raw.get("unsafe_writes") is not None
        else bool(defaults.get("unsafe_writes")),
        "validate": raw.get("validate"),
        "notify": list(raw.get("notify") or []),
        "diff": raw.get("diff") if raw.get("diff") is not None else True,
        "target": raw.get("target"),
        "block": raw.get("block"),
        "marker": raw.get("marker") or "# {mark} ANSIBLE MANAGED BLOCK",
        "insertafter": raw.get("insertafter") or "EOF",
    }
    if state == "file":
        if raw.get("content_b64") is not None:
            entry["data"] = base64.b64decode(raw["content_b64"])
        else:
            entry["data"] = str(raw["content"]).encode("utf-8")
    return entry


def sync(files, defaults=None, check=False, want_diff=False, run_command=None):
    """Apply ``files`` in order; returns the result dict (raises SyncError with what was done so far)."""
    defaults = defaults or {}
    entries = [normalize(raw, defaults) for raw in files]
    seen = set()
    for entry in entries:
        if entry["dest"] in seen and entry["state"] != "block":
            raise SyncError(f"{entry['dest']}: listed twice")
        seen.add(entry["dest"])
    syncer = Syncer(check=check, want_diff=want_diff, run_command=run_command)
    for entry in entries:
        try:
            syncer.apply(entry)
        except SyncError as error:
            error.partial = syncer.result()
            raise
        except OSError as error:
            failure = SyncError(f"{entry['dest']}: {error.strerror or error}")
            failure.partial = syncer.result()
            raise failure from None
    return syncer.result()


ENTRY_OPTIONS = dict(
    dest=dict(type="path", required=True),
    state=dict(type="str", choices=["file", "directory", "absent", "link", "block"]),
    src=dict(type="path"),
    content=dict(type="str"),
    content_b64=dict(type="str"),
    block=dict(type="str"),
    marker=dict(type="str", default="# {mark} ANSIBLE MANAGED BLOCK"),
    insertafter=dict(type="str", default="EOF"),
    target=dict(type="str"),
    mode=dict(type="str"),
    owner=dict(type="str"),
    group=dict(type="str"),
    validate=dict(type="str"),
    notify=dict(type="list", elements="str"),
    follow=dict(type="bool"),
    unsafe_writes=dict(type="bool"),
    diff=dict(type="bool"),
)


def main():
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="dict", required=True, options=ENTRY_OPTIONS),
            owner=dict(type="str"),
            group=dict(type="str"),
            mode=dict(type="str"),
            directory_mode=dict(type="str"),
            follow=dict(type="bool", default=False),
            unsafe_writes=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for entry in params["files"]:
        if entry.get("src") is not None and entry.get("content_b64") is None:
            module.fail_json(
                msg=f"{entry['dest']}: src is read on the control machine; run the module through its action plugin"
            )
    defaults = {key: params[key] for key in ("owner", "group", "mode", "directory_mode", "follow", "unsafe_writes")}

    def run_command(argv):
        return module.run_command(argv)

    try:
        result = sync(
            params["files"], defaults, check=module.check_mode, want_diff=module._diff, run_command=run_command
        )
    except SyncError as error:
        partial = getattr(error, "partial", {}) or {}
        module.fail_json(
            msg=str(error), changed=bool(partial.get("changed_files")), changed_files=partial.get("changed_files", [])
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
