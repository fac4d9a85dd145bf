"""``clusterctl fabric``: the cabled InfiniBand fabric against the spec, and Slurm's topology.conf."""

from __future__ import annotations

import click

from clusterctl.commands.fabric.check import check_cmd
from clusterctl.commands.fabric.lint import lint_cmd
from clusterctl.commands.fabric.topology import topology_cmd


@click.group("fabric")
def fabric_group() -> None:
    """Check the cabled fabric against a spec; derive and lint topology.conf."""


for command in (check_cmd, topology_cmd, lint_cmd):
    fabric_group.add_command(command)
