"""An InfiniBand node description is set on the node itself: one that is not a host name never reaches topology.conf.

The finding: `"gpu001,evil001 mlx5_0"` gave `Nodes=gpu001,evil001,gpu002`, `"gpu[001-999] mlx5_0"`
put other nodes under that leaf, and `fabric topology` exited 0 even with --spec. Now such a CA
is left out with a warning, and with --spec (every CA must be a node of the cluster) the command
fails and writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_fabric_cli import LOCAL, invoke, rack_cables
from tests.unit.fabric.fabric_testkit import write_ibnetdiscover

FORGED = ["gpu001,evil001", "gpu[001-999]", "gpu#001", "-oProxyCommand=x", "gpu\x1b]8;;https://evil/\x07x"]


def _fabric(tmp_path: Path, name: str) -> str:
    switches, cas, cables = rack_cables()
    guid = next(g for g, d in cas.items() if d == "gpu001 mlx5_0")
    cas[guid] = f"{name} mlx5_0"
    path = tmp_path / "forged.txt"
    path.write_text(write_ibnetdiscover(switches, cas, cables))
    return str(path)


@pytest.mark.parametrize("name", FORGED)
def test_a_description_that_names_no_host_is_left_out(tmp_path: Path, name: str) -> None:
    code, out, err = invoke("fabric", "topology", "--ibnetdiscover", _fabric(tmp_path, name))
    assert code == 0, err
    for forged in ("evil001", "999", "#001", "ProxyCommand", "\x1b"):
        assert forged not in out
    assert "\x1b" not in err


@pytest.mark.parametrize("name", ["gpu001,evil001", "gpu[001-999]", "gpu#001"])
def test_with_the_spec_it_is_an_error_and_nothing_is_written(tmp_path: Path, name: str) -> None:
    out_file = tmp_path / "topology.conf"
    code, out, err = invoke(
        "fabric", "topology", "--ibnetdiscover", _fabric(tmp_path, name), "--spec", LOCAL, "--out", str(out_file)
    )
    assert code == 1, out + err
    assert "not a host name" in err
    assert not out_file.exists()
