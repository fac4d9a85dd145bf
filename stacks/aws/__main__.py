"""Pulumi entry point of the clusterctl aws program: the cluster from the rendered plan."""

import sys
from pathlib import Path

# Pulumi runs the program from its folder; it and ../common (clusterctl_stack) are not packages.
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "common")]
from clusterctl_stack import run_program  # noqa: E402

run_program("clusterctl_aws")
