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
    gv = group_vars(load_and_validate(EXAMPLES / "local.yaml").plan)
    assert "common_dns_servers" not in gv
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    gv = group_vars(validated.plan)
    assert gv["common_chrony_servers"] == ["10.20.0.4", "10.20.0.5"]
    # The PXE server's DHCP hands out the site's servers (not the gateway).
    dnsmasq = next(f.text for f in validated.files if f.path == "pxe/dnsmasq.conf").splitlines()
    assert "dhcp-option=option:dns-server,10.20.0.2,10.20.0.3" in dnsmasq


def test_on_bare_metal_the_controllers_serve_the_names_the_pulling_nodes_hosts_file_lacks() -> None:
    """Compute nodes' /etc/hosts lists only the controllers and login nodes; the controllers answer the rest
    over DNS, every node asks them first (resolv.conf keeps three), and they ask the site's servers for
    every other name, never themselves."""
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    gv = group_vars(validated.plan)
    assert gv["clusterctl_serve_names"] is True
    assert gv["common_dns_servers"] == ["10.20.0.10", "10.20.0.11", "10.20.0.2"]
    assert gv["common_dns_search"] == ["atlas.internal"]
    assert gv["clusterctl_names_upstream"] == ["10.20.0.2", "10.20.0.3"]
    served = next(f.text for f in validated.files if f.path == "hosts")
    assert "10.20.0.44 gpu032.atlas.internal gpu032" in served.splitlines()


def test_a_controller_named_as_a_site_server_is_not_its_own_upstream(tmp_path: Path) -> None:
    def own(data: dict[str, Any]) -> None:
        data["site"]["dns_servers"] = ["10.20.0.10", "10.20.0.3"]

    gv = group_vars(load_and_validate(mutated(tmp_path, own)).plan)
    assert gv["clusterctl_names_upstream"] == ["10.20.0.3"]
    assert gv["common_dns_servers"] == ["10.20.0.10", "10.20.0.11", "10.20.0.3"]


def test_where_the_provider_resolves_names_the_controllers_serve_none() -> None:
    for example in ("local.yaml", "local-burst.yaml"):
        gv = group_vars(load_and_validate(EXAMPLES / example).plan)
        assert "clusterctl_serve_names" not in gv, example


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
