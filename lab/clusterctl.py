"""``python -m lab.clusterctl ARGS``: clusterctl, with the lab's stand-in for the Pulumi engine.

The same command line, code and output as ``clusterctl ARGS``; only the bare-metal stack runs on
:class:`lab.engine.LabStack` (the engine cannot be installed here). The emulated BMCs' credentials
come from the lab (``<state root>/<cluster>.lab/bmc-password``) unless ``CLUSTERCTL_BMC_USERNAME`` and
``CLUSTERCTL_BMC_PASSWORD`` are set.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from clusterctl.commands import cli
from clusterctl.commands.common import default_state_root
from clusterctl.environ import Env
from clusterctl.run.providers.baremetal import drive_stack_with
from clusterctl.spec.findings import SpecError
from clusterctl.spec.loader import load_spec
from lab.config import BMC_USER
from lab.engine import LabStack


def _lab_credentials(argv: list[str]) -> dict[str, str]:
    """The emulated BMCs' user and password for the spec named in ``argv`` (empty when none is found)."""
    if os.environ.get(Env.BMC_USER) and os.environ.get(Env.BMC_PASSWORD):
        return {}
    for arg in argv:
        if arg.endswith((".yaml", ".yml")) and Path(arg).is_file():
            root = Path(os.environ.get(Env.STATE_DIR) or default_state_root(arg))
            if "--state-dir" in argv[:-1]:
                root = Path(argv[argv.index("--state-dir") + 1])
            try:
                name = load_spec(arg).spec.name
            except SpecError:  # clusterctl itself reports it
                return {}
            secret = root / f"{name}.lab" / "bmc-password"
            if secret.is_file():
                return {Env.BMC_USER: BMC_USER, Env.BMC_PASSWORD: secret.read_text().strip()}
            return {}
    return {}


def main(argv: list[str] | None = None) -> None:
    """Run clusterctl with ``argv`` (default: the command line) on the lab's engine."""
    args = list(sys.argv[1:] if argv is None else argv)
    os.environ.update(_lab_credentials(args))
    drive_stack_with(LabStack)
    sys.exit(cli.main(args=args, prog_name="clusterctl", standalone_mode=True))


if __name__ == "__main__":
    main()
