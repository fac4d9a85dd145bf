"""verify runs all_reduce_perf where roles/nccl installs it, not by a name that is not on PATH.

roles/nccl builds nccl-tests under ``nccl_tests_install_dir`` and links the build at ``bin``
(tasks/nccl_tests.yml); nothing puts that on PATH, so ``srun all_reduce_perf`` would find no
program. One constant (clusterctl.catalog.tools) names the place for verify; this test keeps
it equal to the role's default and to where the role links the binaries.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml
from click.testing import CliRunner

from clusterctl.catalog.tools import ALL_REDUCE_PERF, NCCL_TESTS_BIN_DIR, NCCL_TESTS_INSTALL_DIR
from clusterctl.commands import cli
from clusterctl.commands.verify import verify_cmd
from clusterctl.verify.testplan import NcclOptions, NcclRun, srun_command

ROLE = Path(__file__).resolve().parents[3] / "roles" / "nccl"


def test_the_constant_is_the_role_s_default_and_link() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    layout = next(t for t in tasks if "clusterctl.node.sync_files" in t and "nccl-tests" in t["name"])
    files = layout["vars"]["__nccl_install_files"]

    assert defaults["nccl_tests_install_dir"] == NCCL_TESTS_INSTALL_DIR
    assert "{'dest': nccl_tests_install_dir ~ '/bin', 'state': 'link', 'target': __nccl_tests_src ~ '/build'}" in files
    assert ALL_REDUCE_PERF == f"{NCCL_TESTS_BIN_DIR}/all_reduce_perf" == "/opt/nccl-tests/bin/all_reduce_perf"


def test_srun_runs_the_installed_program_unless_told_otherwise() -> None:
    run = NcclRun(phase="pairs", hosts=("gpu001", "gpu002"), groups=("su1",), gpus_per_node=8)

    default = shlex.split(srun_command(run))
    given = shlex.split(srun_command(run, NcclOptions(binary="/scratch/nccl-tests/build/all_reduce_perf")))

    assert default[default.index("-b") - 1] == "/opt/nccl-tests/bin/all_reduce_perf"
    assert given[given.index("-b") - 1] == "/scratch/nccl-tests/build/all_reduce_perf"


def test_the_cli_default_is_the_installed_program() -> None:
    option = next(p for p in verify_cmd.params if p.name == "nccl_binary")
    help_text = CliRunner().invoke(cli, ["verify", "--help"], terminal_width=200).stdout

    assert option.default == ALL_REDUCE_PERF
    assert "[default: /opt/nccl-tests/bin/all_reduce_perf]" in " ".join(help_text.split())
