"""Bring-up from baked images against the plain base image, side by side in one run.

Figures (issue: baked node images and a lockfile), all on copies of examples/local.yaml, each with
its own cluster name, network, state and lock:

* ``image build`` of every hardware profile (``--rebuild``: built, not reused), then again
  unchanged (reused: the hash printed, nothing built);
* cold ``up --no-image`` (both stages on the plain base image) against cold ``up --locked`` (nodes
  from the baked images, configure stage only); target: baked at most 0.3 x plain;
* cold ``up --locked`` with 2, 4 and 8 GPU nodes (plus a controller and a login node); target:
  8 nodes at most 1.3 x 2 nodes;
* a no-change ``up`` of the 4-GPU-node cluster (6 nodes) from the baked images; target: 10 s
  (every node as the last converge left it: the configure stage is checked, not run), and the same
  with ``--converge`` (the roles run and find nothing to change);
* cold ``up --no-image`` of the smallest cluster (1 GPU node, a controller and a login node): the
  first converge of a node today, beside the image build.

Run on an otherwise idle machine: python benchmarks/bringup.py [--sizes 2,4,8]
Figures go to stdout and test-artifacts/benchmark/bringup.json. Timing is never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from up_local import REPO, changed_tasks, make_spec, timed

TARGET_BAKED_VS_PLAIN = 0.3
TARGET_8_VS_2 = 1.3
TARGET_NOOP_S = 10.0


def _ok(label: str, result: tuple[float, str, int]) -> float:
    seconds, output, rc = result
    if rc != 0:
        print(output[-4000:], file=sys.stderr)
        raise SystemExit(f"{label} failed (exit {rc})")
    print(f"  {label}: {seconds:.1f} s", flush=True)
    return seconds


def _cluster(tmp: Path, nodes: int, tag: str) -> tuple[Path, list[str], list[str]]:
    """A spec copy with ``nodes`` GPU nodes, and its up and image-build options."""
    (tmp / tag).mkdir(parents=True)
    spec = make_spec(tmp / tag, nodes)
    state = ["--state-dir", str(tmp / tag / "state")]
    lock = ["--lock", str(tmp / tag / "clusterctl.lock")]  # a lock belongs to one cluster
    up = ["up", str(spec), "--yes", "--output", "json", "--out", str(tmp / tag / "build"), *state]
    image = ["image", "build", str(spec), "--out", str(tmp / "image"), *state, *lock]
    return spec, up + lock, image


def _down(spec: Path, tmp: Path, tag: str) -> None:
    _ok(f"down {tag}", timed("down", str(spec), "--yes", "--state-dir", str(tmp / tag / "state")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="2,4,8")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    figures: dict[str, object] = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        spec, up, image = _cluster(tmp, 4, "plain")
        figures["image_build_s"] = _ok("image build (--rebuild)", timed(*image, "--rebuild"))
        figures["image_reuse_s"] = _ok("image build (unchanged: reused)", timed(*image))
        figures["plain_cold_up_s"] = _ok("cold up, plain base image", timed(*up, "--no-image"))
        _down(spec, tmp, "plain")
        spec, up, _ = _cluster(tmp, 1, "plain1")
        figures["plain_cold_up_1_s"] = _ok("cold up, plain base image, 1 GPU node", timed(*up, "--no-image"))
        _down(spec, tmp, "plain1")

        growth: dict[int, float] = {}
        for size in sizes:
            spec, up, image = _cluster(tmp, size, f"baked{size}")
            _ok(f"image build for {size} GPU nodes (reused)", timed(*image))
            growth[size] = _ok(f"cold up, baked, {size} GPU nodes", timed(*up, "--locked"))
            if size == 4:
                seconds, output, rc = timed(*up, "--locked")
                figures["noop_up_s"] = _ok("no-change up, baked, 4 GPU nodes", (seconds, output, rc))
                figures["noop_changed"] = changed_tasks(output)
                seconds, output, rc = timed(*up, "--locked", "--converge")
                figures["noop_converge_up_s"] = _ok("no-change up --converge (roles run)", (seconds, output, rc))
                figures["noop_converge_changed"] = changed_tasks(output)
            _down(spec, tmp, f"baked{size}")
        figures["baked_cold_up_s"] = {str(k): v for k, v in growth.items()}

    plain = float(figures["plain_cold_up_s"])  # type: ignore[arg-type]
    print()
    print(f"{'figure':<44}{'seconds':>9}  {'ratio / target':>16}")
    print(f"{'image build (every profile)':<44}{figures['image_build_s']:>9.1f}")
    print(f"{'image build again (reused)':<44}{figures['image_reuse_s']:>9.1f}")
    print(f"{'cold up, plain base image (4 GPU nodes)':<44}{plain:>9.1f}")
    print(f"{'cold up, plain base image (1 GPU node)':<44}{figures['plain_cold_up_1_s']:>9.1f}")
    if 4 in growth:
        print(
            f"{'cold up, baked (4 GPU nodes)':<44}{growth[4]:>9.1f}"
            f"  {growth[4] / plain:>8.2f} <= {TARGET_BAKED_VS_PLAIN}"
        )
    for size in sizes:
        print(f"{f'cold up, baked ({size} GPU nodes)':<44}{growth[size]:>9.1f}")
    if 2 in growth and 8 in growth:
        print(f"{'8 nodes / 2 nodes':<44}{'':>9}  {growth[8] / growth[2]:>8.2f} <= {TARGET_8_VS_2}")
    if "noop_up_s" in figures:
        noop = float(figures["noop_up_s"])  # type: ignore[arg-type]
        print(f"{'no-change up, baked (6 nodes)':<44}{noop:>9.1f}  {'':>8} <= {TARGET_NOOP_S} s")
        print(f"{'no-change up --converge (6 nodes)':<44}{figures['noop_converge_up_s']:>9.1f}")
    out_dir = REPO / "test-artifacts" / "benchmark"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bringup.json").write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
