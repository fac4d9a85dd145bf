"""clusterctl's own collection (clusterctl.node) is on the collections path wherever the roles run."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from clusterctl.paths import collections_dir
from clusterctl.run.ansible import collections_path

ROOT = Path(__file__).resolve().parents[3]
MODULE = Path("ansible_collections/clusterctl/node/plugins/modules/sync_files.py")
ACTION = Path("ansible_collections/clusterctl/node/plugins/action/sync_files.py")


def test_clusterctl_runs_put_the_collection_first() -> None:
    first = Path(collections_path().split(":")[0])
    assert first == collections_dir()
    assert (first / MODULE).is_file()
    assert (first / ACTION).is_file()


def test_the_wheel_carries_the_collection() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert "collections" in wheel["only-include"]
    assert wheel["sources"]["collections"] == "clusterctl/_data/collections"


def test_molecule_make_and_scripts_put_the_collection_first() -> None:
    molecule = yaml.safe_load((ROOT / ".config" / "molecule" / "config.yml").read_text())
    path = molecule["ansible"]["env"]["ANSIBLE_COLLECTIONS_PATH"].split(":")
    assert path[0] == "${MOLECULE_PROJECT_DIRECTORY}/../../collections"
    assert "export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/collections:" in (ROOT / "Makefile").read_text()
    assert 'export ANSIBLE_COLLECTIONS_PATH="$ROOT/collections:' in (ROOT / "scripts" / "molecule-all.sh").read_text()
    assert "COLLECTIONS = f\"{REPO / 'collections'}:" in (ROOT / "benchmarks" / "converge.py").read_text()


def test_galaxy_metadata_names_the_collection() -> None:
    galaxy = yaml.safe_load(
        (collections_dir() / "ansible_collections" / "clusterctl" / "node" / "galaxy.yml").read_text()
    )
    assert (galaxy["namespace"], galaxy["name"]) == ("clusterctl", "node")
