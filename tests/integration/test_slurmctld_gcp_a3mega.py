"""Debian's real slurmctld (22.05) loads the GCP A3 Mega render with Google's partition and prolog settings.

The settings come from GoogleCloudPlatform/cluster-toolkit@1047080
(examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml partition_conf, and
community/modules/scheduler/schedmd-slurm-gcp-v6-controller/etc/long-prolog-slurm.conf.tpl);
tests/conformance/gcp-a3mega checks the rendered text, this that Slurm reads it as meant.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate, render
from tests.integration.slurmctld import parse_scontrol_records, running_slurmctld
from tests.specs import example_data, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def test_slurmctld_reads_the_a3mega_partitions_and_timeouts(docker_ready: None, tmp_path: Path) -> None:
    data = copy.deepcopy(example_data("gcp-a3mega.yaml"))
    data["versions"]["slurm"] = "22.05"  # the Slurm the test image runs (Debian 12's)
    data["os"] = "debian-12"
    validated = load_and_validate(write_spec(tmp_path, data))
    build, _ = render(validated, tmp_path / "build")
    with running_slurmctld(build / "slurm", validated.plan.slurm.controllers[0]) as ctld:
        partitions = {r["PartitionName"]: r for r in parse_scontrol_records(ctld.scontrol("show", "partition"))}
        for name in ("a3mega", "debug"):
            part = partitions[name]
            assert part["OverSubscribe"] == "EXCLUSIVE", part
            assert part["ResumeTimeout"] == "900", part
            assert part["SuspendTimeout"] == "600", part
        config = ctld.scontrol("show", "config")
        for key in ("MessageTimeout", "BatchStartTimeout", "PrologEpilogTimeout"):
            line = next(ln for ln in config.splitlines() if ln.startswith(key))
            assert line.split("=", 1)[1].strip().startswith("600"), line
        assert "Contain" in next(ln for ln in config.splitlines() if ln.startswith("PrologFlags"))
