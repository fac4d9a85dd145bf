"""``clusterctl`` and ``python -m clusterctl``."""

from __future__ import annotations

import sys

from clusterctl.commands import cli


def main() -> None:
    """Entry point."""
    sys.exit(cli.main(prog_name="clusterctl", standalone_mode=True))


if __name__ == "__main__":
    main()
