"""The spec's `site:` and `slurm.state_save_location` as rendered: slurm.conf lines, the common role's
resolver and NTP variables, and the storage tier the controllers mount before Slurm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from tests.conftest import EXAMPLES
from tests.specs import mutated


def _conf(validated: Any) -> list[str]:
    return next(f.text for f in validated.files if f.path == "slurm/slurm.conf").splitlines()


def test_site_parameters_come_after_clusterctls_own_and_before_the_nodes(tmp_path: Path) -> None:
    def site(data: dict[str, Any]) -> None:
        data["site"]["slurm_conf"] = {"UsePAM": True, "MaxJobCount": 5000, "PreemptExemptTime": "00:05:00"}

    lines = _conf(load_and_validate(mutated(tmp_path, site)))
    start = lines.index("# --- site settings (spec site.slurm_conf) ---")
    assert lines[start + 1 : start + 4] == ["MaxJobCount=5000", "PreemptExemptTime=00:05:00", "UsePAM=YES"]
    assert start > lines.index("JobCompType=jobcomp/none")
    assert start < next(i for i, line in enumerate(lines) if line.startswith("NodeName="))


def test_state_save_location_and_the_tier_mounted_first() -> None:
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    assert "StateSaveLocation=/home/slurm/state" in _conf(validated)
    assert group_vars(validated.plan)["clusterctl_slurm_state_tier"] == "home"


def test_resolvers_and_time_servers_go_to_the_common_role() -> None:
    gv = group_vars(load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan)
    assert gv["common_dns_servers"] == ["10.20.0.2", "10.20.0.3"]
    assert gv["common_dns_search"] == ["atlas.internal"]
    assert gv["common_chrony_servers"] == ["10.20.0.4", "10.20.0.5"]


def test_without_site_nothing_changes_on_the_nodes() -> None:
    validated = load_and_validate(EXAMPLES / "local.yaml")
    gv = group_vars(validated.plan)
    site_vars = {"common_dns_servers", "common_dns_search", "common_chrony_servers", "clusterctl_slurm_state_tier"}
    assert not site_vars & set(gv)
    assert "StateSaveLocation=/var/spool/slurmctld" in _conf(validated)
    assert not [line for line in _conf(validated) if "site settings" in line]


def test_a_parameter_name_slurm_does_not_know_never_reaches_slurm_conf(tmp_path: Path) -> None:
    """With SLU005 skipped, the render still refuses the name, located at its key: no free text in slurm.conf."""
    import pytest

    from clusterctl.spec import SpecError

    def unknown(data: dict[str, Any]) -> None:
        data["site"]["slurm_conf"] = {"MaxJobCnt": 10}

    with pytest.raises(SpecError) as info:
        load_and_validate(mutated(tmp_path, unknown), skip=["slurm-conf-parameters"])
    (finding,) = [f for f in info.value.findings if f.code == "CC-R001"]
    assert finding.dotted_path == "site.slurm_conf.MaxJobCnt"
    assert "not a slurm.conf parameter" in finding.message
