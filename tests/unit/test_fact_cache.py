"""The fact cache of a cluster's state directory forgets machines that were replaced."""

from pathlib import Path

import yaml

from clusterctl.paths import roles_dir
from clusterctl.run.ansible import forget_facts


def test_forget_facts_drops_only_the_named_hosts(tmp_path: Path) -> None:
    facts = tmp_path / "facts"
    facts.mkdir()
    # ansible-core 2.19+ names the files s<schema>_<host>; older versions <host>.
    for name in ("s1_gpu001", "gpu001", "s1_gpu0010", "s1_gpu002", "ctl001"):
        (facts / name).write_text('{"clusterctl_base_packages_installed": true}')
    forget_facts(tmp_path, ["gpu001", "gpu003"])  # gpu003 has no cache entry: not an error
    assert sorted(p.name for p in facts.iterdir()) == ["ctl001", "s1_gpu0010", "s1_gpu002"]


def test_forget_facts_without_a_cache_directory(tmp_path: Path) -> None:
    forget_facts(tmp_path, ["gpu001"])
    assert not (tmp_path / "facts").exists()


def _package_block(plays: list[dict]) -> dict:
    return next(t for t in plays[0]["tasks"] if "block" in t)


def test_site_package_step_is_the_install_stage_and_reads_packages_each_run() -> None:
    """The one-transaction package step runs where the install stage runs (per host), and decides what
    to install from the packages read on the node in this run (dpkg-query, shared with the roles as a
    fact that is not cached), not from a flag cached by an earlier run."""
    plays = yaml.safe_load((roles_dir() / "site.yml").read_text())
    block = _package_block(plays)
    assert "clusterctl_stage" in block["when"]
    assert "install" in block["when"]
    read = next(t for t in block["block"] if "ansible.builtin.command" in t)
    assert read["ansible.builtin.command"]["argv"][0] == "dpkg-query"
    assert read["when"] == "clusterctl_packages is not defined"
    assert any("ansible.builtin.apt" in t and t["when"] == "__site_missing | length > 0" for t in block["block"])
    assert "clusterctl_packages" in plays[0]["vars"]["__site_missing"]
    assert "cacheable" not in str(block)


def test_site_keeps_the_package_step_out_of_plays_with_handlers() -> None:
    """Handlers of a role included under a `when` inherit it: with the package step in the play that
    applies munge, munge's restart after a new key was skipped and slurmctld rejected every node."""
    plays = yaml.safe_load((roles_dir() / "site.yml").read_text())
    package_play = plays[0]
    assert "roles" not in package_play
    assert all(not p.get("pre_tasks") for p in plays[1:] if p.get("roles"))


def test_site_treats_a_node_with_a_new_machine_id_as_new() -> None:
    """The machine-ID check must compare against the ID it caches, so a reinstalled machine's facts are
    gathered again."""
    plays = yaml.safe_load((roles_dir() / "site.yml").read_text())
    pre = plays[0]["pre_tasks"]
    gather = next(t for t in pre if "ansible.builtin.setup" in t)
    remember = next(t for t in pre if "ansible.builtin.set_fact" in t)["ansible.builtin.set_fact"]
    assert remember["cacheable"] is True
    machine_id = next(k for k in remember if k.endswith("machine_id"))
    assert machine_id in gather["when"]
