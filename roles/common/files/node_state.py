"""Report which of a role's expectations a node already meets, in one remote call.

Why: a no-change run of the roles is dominated by per-task round trips (one module run per file,
package or service per host). The role sends everything it is about to enforce in one JSON
argument and runs only the tasks whose expectation is not met yet. The tasks themselves stay the
ordinary modules; this only decides which of them need to run.

Argument (JSON): {"files": [[PATH, "file"|"directory", SHA1, MODE, OWNER, GROUP], ...],
"blocks": {PATH: TEXT}, "absent": {PATH: REGEX}, "hostname": NAME, "exists": [PATH],
"packages": [NAME], "services": [NAME]}; every key is optional, and a file's null fields are not
checked. Prints JSON: {"stale": [PATH or "hostname"], "existing": [PATH], "installed": [NAME],
"held": [NAME], "services": {NAME: {"active": bool, "enabled": bool}}}. The other roles read this
one copy (lookup of role_path/../common/files/node_state.py); tests/unit/test_role_files.py tests it.
"""

import grp
import hashlib
import json
import os
import pwd
import re
import socket
import subprocess
import sys


def _name(lookup, ident):
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def _file_ok(path, want):
    try:
        st = os.stat(path)
    except OSError:
        return False
    state = "directory" if os.path.isdir(path) else "file"
    have = {
        "state": state,
        "mode": "%04o" % (st.st_mode & 0o7777),
        "owner": _name(pwd.getpwuid, st.st_uid),
        "group": _name(grp.getgrgid, st.st_gid),
    }
    if "checksum" in want and state == "file":
        digest = hashlib.sha1()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        have["checksum"] = digest.hexdigest()
    return all(have.get(key) == value for key, value in want.items())


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def main():
    query = json.loads(sys.argv[1])
    keys = ("state", "checksum", "mode", "owner", "group")
    stale = []
    for path, *values in query.get("files", []):
        if not _file_ok(path, {key: value for key, value in zip(keys, values) if value is not None}):
            stale.append(path)
    stale += [path for path, text in sorted(query.get("blocks", {}).items()) if text not in (_read(path) or "")]
    stale += [
        path for path, regex in sorted(query.get("absent", {}).items()) if re.search(regex, _read(path) or "", re.M)
    ]
    if "hostname" in query and socket.gethostname() != query["hostname"]:
        stale.append("hostname")

    installed, held = [], []
    if query.get("packages"):
        fmt = "${Package} ${db:Status-Want} ${db:Status-Status}\n"
        result = subprocess.run(
            ["dpkg-query", "--show", "--showformat=" + fmt] + query["packages"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False,
        )
        for line in result.stdout.splitlines():
            name, want, status = (line.split() + ["", "", ""])[:3]
            if status == "installed":
                installed.append(name)
            if want == "hold":
                held.append(name)

    services = {}
    if query.get("services"):
        units = [s if "." in s else s + ".service" for s in query["services"]]
        result = subprocess.run(
            ["systemctl", "show", "--property=Id,ActiveState,UnitFileState"] + units,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False,
        )
        shown = [dict(line.split("=", 1) for line in block.splitlines() if "=" in line) for block in result.stdout.split("\n\n")]
        for name, unit in zip(query["services"], units):
            props = next((p for p in shown if p.get("Id") == unit), {})
            services[name] = {
                "active": props.get("ActiveState") == "active",
                "enabled": props.get("UnitFileState") in ("enabled", "enabled-runtime", "static", "alias"),
            }

    existing = [path for path in query.get("exists", []) if os.path.lexists(path)]
    result = {"stale": stale, "existing": existing, "installed": installed, "held": held, "services": services}
    json.dump(result, sys.stdout)


main()
