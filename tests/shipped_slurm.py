"""clusterctl's Slurm module as the render ships it (health/lib/), run against stub scontrol and ssh.

The module runs under ``python3 -I -S``: the standard library and nothing else, as on a node or a
controller without clusterctl. Heal timer tests give scontrol a node list and ssh an exit code per
address, then read which nodes scontrol was asked to resume and where ssh connected; scripts that
drain their own node run :func:`slurm_tool` in place of /usr/local/sbin/clusterctl-slurm.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render import render_files
from tests.conftest import EXAMPLES

LOCAL = load_and_validate(EXAMPLES / "local.yaml").plan
ADDRESS = {n.hostname: n.address for n in LOCAL.nodes}
STAMP = "[root@2026-12-03T10:00:00]"


def node_line(name: str, state: str, reason: str = "", partitions: str = "gpu", addr: str = "") -> str:
    """One ``scontrol show node -o`` record, in the fields the timer reads."""
    line = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=1 Gres=gpu:h100:8 NodeAddr={addr or name} "
        f"NodeHostName={name} State={state} Partitions={partitions}"
    )
    return f"{line} Reason={reason} {STAMP}" if reason else line


def health_files(plan: Plan = LOCAL) -> dict[str, str]:
    """The rendered health/ files of ``plan``."""
    return {f.path: f.text for f in render_files(plan) if f.path.startswith("health/")}


def ship(tmp_path: Path, plan: Plan = LOCAL) -> Path:
    """The rendered health/ files written under ``tmp_path``; returns the health/ folder."""
    for path, text in health_files(plan).items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return tmp_path / "health"


def stubs(tmp_path: Path, nodes: str, ssh_rc: dict[str, int], scontrol_rc: int = 0) -> dict[str, str]:
    """scontrol and ssh stubs on PATH; scontrol's updates go to updates.log, ssh's argv (one per line) to ssh.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "nodes.txt").write_text(nodes)
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n"
        f'[ "$1" = show ] && {{ cat "{tmp_path}/nodes.txt"; exit {scontrol_rc}; }}\n'
        f'echo "$*" >> "{tmp_path}/updates.log"\n'
    )
    cases = "".join(f"        {address}) exit {rc} ;;\n" for address, rc in ssh_rc.items())
    (bin_dir / "ssh").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$*" >> "{tmp_path}/ssh.log"\n'
        # The address comes before the command, the last argument.
        'host="${@: -2:1}"\n'
        'case "$host" in\n' + cases + "        *) echo unexpected host >&2; exit 99 ;;\nesac\n"
    )
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


def heal_round(shipped: Path, env: dict[str, str], **config: Any) -> subprocess.CompletedProcess[str]:
    """One round as clusterctl-heal.service runs it, on the shipped module alone (no site-packages)."""
    settings = json.loads((shipped / "heal.json").read_text()) | {"key": str(shipped / "key")} | config
    (shipped / "heal.json").write_text(json.dumps(settings))
    code = (
        f"import sys; sys.path.insert(0, {str(shipped / 'lib')!r}); "
        "from clusterctl.slurm.__main__ import main; "
        f"sys.exit(main(['heal-round', {str(shipped / 'heal.json')!r}]))"
    )
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def ssh_lines(tmp_path: Path) -> list[str]:
    """What ssh was run with, one argv per line."""
    log = tmp_path / "ssh.log"
    return log.read_text().splitlines() if log.exists() else []


def slurm_tool(root: Path, plan: Plan = LOCAL) -> Path:
    """The shipped module and a command that runs it, under ``root``: what CLUSTERCTL_SLURM_TOOL names in tests."""
    lib = root / "clusterctl-lib"
    for path, text in health_files(plan).items():
        if path.startswith("health/lib/"):
            target = lib / path.removeprefix("health/lib/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    code = (
        f"import sys; sys.path.insert(0, {str(lib)!r}); "
        "from clusterctl.slurm.__main__ import main; sys.exit(main(sys.argv[1:]))"
    )
    tool = root / "clusterctl-slurm"
    tool.write_text(f'#!/bin/bash\nexec {sys.executable} -I -S -c "{code}" "$@"\n')
    tool.chmod(0o755)
    return tool
