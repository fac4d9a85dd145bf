"""Time validate + plan + render for 64, 512 and 2048 compute nodes (8 GPUs each).

In-process (the pipeline's own cost) and as the command a user runs (`clusterctl render SPEC
--out DIR` in a new process: interpreter start and imports included), with the command's peak
memory (the whole process). The specs use the local provider, so their compute nodes pull: the
render includes their bundles (the roles layer and each kind's files layer).
Targets: 2048 nodes (16,384 GPUs) in under 2 s in-process on a 2-core machine, growing linearly;
the command with the bundles in at most 3 s and 1 GiB.
Run: python benchmarks/render_scale.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from clusterctl.pipeline import load_and_validate, render  # noqa: E402


def make_spec(tmp: Path, nodes: int) -> Path:
    """The on-prem example scaled to ``nodes`` GPU nodes (local provider: no machines.csv)."""
    yaml = YAML(typ="safe")
    data = yaml.load((REPO / "examples" / "onprem-h100-256.yaml").read_text())
    data["provider"] = {"kind": "local"}
    data["network"]["management_cidr"] = "10.0.0.0/16"
    gpu = next(g for g in data["nodes"] if g["group"] == "gpu")
    gpu["count"] = nodes
    gpu["spares"] = max(1, nodes // 20)
    path = tmp / f"scale-{nodes}.yaml"
    with path.open("w") as handle:
        yaml.dump(data, handle)
    return path


def one_run(spec: Path, out: Path) -> dict[str, float]:
    """Seconds for validate+plan and for render of one spec."""
    t0 = time.perf_counter()
    validated = load_and_validate(spec)
    t1 = time.perf_counter()
    render(validated, out)
    t2 = time.perf_counter()
    return {"validate_plan": t1 - t0, "render": t2 - t1, "total": t2 - t0}


def command_run(spec: Path, out: Path) -> tuple[float, float]:
    """Wall seconds and peak memory (MiB) of `clusterctl render SPEC --out OUT` in a new process."""
    t0 = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, "-m", "clusterctl", "-q", "render", str(spec), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        _, usage = os.wait4(proc.pid, 0)[1:]
        proc.returncode = 0
    seconds = time.perf_counter() - t0
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="64,512,2048")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        one_run(make_spec(tmp, 8), tmp / "warm")  # imports, template compilation
        print(
            f"{'nodes':>6} {'GPUs':>7} {'validate+plan s':>16} {'render s':>9} {'total s':>8} {'us/node':>8}"
            f" {'command s':>10} {'command MiB':>12}"
        )
        results = []
        for size in sizes:
            spec = make_spec(tmp, size)
            runs = [one_run(spec, tmp / f"out-{size}-{i}") for i in range(args.repeat)]
            best = {k: min(r[k] for r in runs) for k in runs[0]}
            med = statistics.median(r["total"] for r in runs)
            measured = [command_run(spec, tmp / f"cmd-{size}-{i}") for i in range(args.repeat)]
            command = [m[0] for m in measured]
            memory = max(m[1] for m in measured)
            results.append((size, best["total"]))
            print(
                f"{size:>6} {size * 8:>7} {best['validate_plan']:>16.3f} {best['render']:>9.3f} "
                f"{best['total']:>8.3f} {1e6 * best['total'] / size:>8.0f} {min(command):>10.2f} {memory:>12.0f}"
                f"   (median {med:.3f} s in-process, {statistics.median(command):.2f} s command)"
            )
        (small, t_small), (big, t_big) = results[0], results[-1]
        print(
            f"growth {small}->{big} nodes: x{t_big / t_small:.1f} time for x{big / small:.0f} nodes; "
            f"target 2048 nodes < 2 s: {'met' if dict(results).get(2048, 0) < 2 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
