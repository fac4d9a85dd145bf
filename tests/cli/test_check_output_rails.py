"""``clusterctl check-output nvidia-smi-topo|ibstat --spec`` when the spec names rails by PCI address.

The output names devices, never PCI addresses: the node's rails file (``--rails-file``, what the
rdma role wrote there) says which device is which rail; without it the rails are not judged,
and the notes say how to give them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from tests.specs import mutated
from tests.unit.verify.test_rails import RAILS_PCI
from tests.verify_testkit import ibstat, rails_conf

TOPO = "nvidia-smi/nvsmi_topo_m_8xH100_8nic_sglang30401.txt"
# The real matrix's NICs: GPU i is next to mlx5_i (its NIC legend).
DEVICES = [f"mlx5_{i}" for i in range(8)]


def _json(*args: str | Path) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["check-output", *map(str, args), "--output", "json"], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout) if result.exit_code != 2 else {"stderr": result.stderr}


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    def by_pci(data: dict) -> None:
        data["hardware"]["dgx-h100"]["rails"] = list(RAILS_PCI)
        data["hardware"]["dgx-h100"]["storage_nics"] = ["0000:29:00.0", "0000:aa:00.0"]

    return mutated(tmp_path, by_pci)


def test_topo_judged_by_the_rails_file(spec: Path, tmp_path: Path, fixtures_dir: Path) -> None:
    rails = tmp_path / "rdma-rails.conf"
    rails.write_text(rails_conf(RAILS_PCI, DEVICES))
    swapped = tmp_path / "swapped.conf"
    swapped.write_text(rails_conf(RAILS_PCI, [DEVICES[1], DEVICES[0], *DEVICES[2:]]))

    code, data = _json("nvidia-smi-topo", fixtures_dir / TOPO, "--spec", spec, "--rails-file", rails)
    bad_code, bad = _json("nvidia-smi-topo", fixtures_dir / TOPO, "--spec", spec, "--rails-file", swapped)

    assert (code, data["verdict"]) == (0, "pass")
    assert f"rails: the node's devices from {rails} (rail 0 0000:18:00.0 = mlx5_0, " in " ".join(data["notes"])
    assert (bad_code, bad["verdict"]) == (1, "fail")
    assert bad["findings"][0]["message"].startswith("GPU0 reaches mlx5_1 at NODE; GPU1 reaches mlx5_0 at NODE")


def test_pci_rails_without_the_file_are_not_judged(spec: Path, tmp_path: Path, fixtures_dir: Path) -> None:
    code, data = _json("nvidia-smi-topo", fixtures_dir / TOPO, "--spec", spec)
    down = tmp_path / "ibstat.txt"
    down.write_text(ibstat(DEVICES, down=("mlx5_3",)))
    ib_code, ib = _json("ibstat", down, "--spec", spec)

    assert (code, data["verdict"]) == (0, "skipped")
    assert any(note.startswith("the spec names the rails by PCI address") for note in data["notes"])
    # Without rails every CA of the output is checked.
    assert (ib_code, ib["findings"][0]["message"]) == (1, "mlx5_3/1 is Down (Polling).")


def test_a_rails_file_of_other_rails_is_refused(spec: Path, tmp_path: Path, fixtures_dir: Path) -> None:
    stale = tmp_path / "stale.conf"
    stale.write_text(rails_conf(DEVICES))

    code, data = _json("nvidia-smi-topo", fixtures_dir / TOPO, "--spec", spec, "--rails-file", stale)

    assert code == 2
    assert f"{stale} on the node was written for other rails than the plan's: rail 0 is mlx5_0 there" in " ".join(
        data["stderr"].split()
    )
