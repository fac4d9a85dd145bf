"""The click command tree; each command lives in its own module."""

from __future__ import annotations

import click

from clusterctl import __version__
from clusterctl.app import App
from clusterctl.commands.burst import burst_group
from clusterctl.commands.check_output import check_output_cmd
from clusterctl.commands.diff import diff_cmd
from clusterctl.commands.down import down_cmd
from clusterctl.commands.fabric import fabric_group
from clusterctl.commands.heal import heal_cmd
from clusterctl.commands.image import image_group
from clusterctl.commands.node import node_group
from clusterctl.commands.plan import plan_cmd
from clusterctl.commands.render import render_cmd
from clusterctl.commands.rules import rules_cmd
from clusterctl.commands.schema import schema_cmd
from clusterctl.commands.status import status_cmd
from clusterctl.commands.up import up_cmd
from clusterctl.commands.validate import validate_cmd
from clusterctl.commands.verify import verify_cmd


@click.group(context_settings={"auto_envvar_prefix": "CLUSTERCTL", "help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="clusterctl")
@click.option("-v", "--verbose", count=True, help="More output (repeatable).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: bool) -> None:
    """Bring up GPU clusters for LLM training from one declarative spec.

    Every command takes --output json (one report envelope on stdout) and lists its exit
    statuses in its --help; 70 is always an internal error (a bug).
    """
    ctx.obj = App(verbosity=-1 if quiet else verbose)


for command in (validate_cmd, plan_cmd, render_cmd, schema_cmd, rules_cmd, up_cmd, status_cmd, down_cmd):
    cli.add_command(command)
cli.add_command(fabric_group)
cli.add_command(burst_group)
cli.add_command(check_output_cmd)
cli.add_command(verify_cmd)
cli.add_command(image_group)
cli.add_command(heal_cmd)
cli.add_command(diff_cmd)
cli.add_command(node_group)
