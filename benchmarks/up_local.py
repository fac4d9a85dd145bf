"""Time `clusterctl up` (cold, image present), a no-op `up`, and `down` for 2, 4 and 8 compute nodes.

Each size is a copy of examples/local.yaml with its own cluster name and network, so the
growth with node count is visible. Run: python benchmarks/up_local.py [--sizes 2,4,8]
Figures go to stdout and test-artifacts/benchmark/up_local.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]


def make_spec(tmp: Path, nodes: int) -> Path:
    """examples/local.yaml with ``nodes`` GPU nodes, named bench<nodes> on its own /24."""
    yaml = YAML(typ="safe")
    data = yaml.load((REPO / "examples" / "local.yaml").read_text())
    data["name"] = f"bench{nodes}"
    data["network"]["management_cidr"] = f"172.31.{nodes}.0/24"
    data["network"]["domain"] = f"bench{nodes}.internal"
    next(g for g in data["nodes"] if g["group"] == "gpu")["count"] = nodes
    path = tmp / f"bench{nodes}.yaml"
    with path.open("w") as handle:
        yaml.dump(data, handle)
    return path


def timed(*args: str) -> tuple[float, str, int]:
    """Seconds, combined output and exit code of ``clusterctl ARGS``."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "clusterctl", *args], capture_output=True, text=True, cwd=REPO, check=False
    )
    return time.monotonic() - started, result.stdout + result.stderr, result.returncode


def changed_tasks(output: str) -> int | None:
    """Changed tasks from the JSON summary event."""
    for line in output.splitlines():
        if '"summary"' in line:
            return int(json.loads(line)["data"]["changed_tasks"] or 0)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="2,4,8")
    args = parser.parse_args()
    print(
        f"{'compute':>7} {'nodes':>5} {'cold up s':>10} {'no-op up s':>11} {'no-op/cold':>10} "
        f"{'changed':>7} {'down s':>7}"
    )
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for size in (int(s) for s in args.sizes.split(",")):
            spec = make_spec(tmp, size)
            common = ["--state-dir", str(tmp / "state"), "--out", str(tmp / f"build{size}")]
            timed("down", str(spec), "--yes", "--state-dir", str(tmp / "state"))
            cold, out, rc = timed("up", str(spec), "--yes", "--output", "json", *common)
            if rc != 0:
                print(out[-4000:], file=sys.stderr)
                raise SystemExit(f"cold up of {size} nodes failed")
            noop, out, rc = timed("up", str(spec), "--yes", "--output", "json", *common)
            if rc != 0:
                print(out[-4000:], file=sys.stderr)
                raise SystemExit(f"no-op up of {size} nodes failed")
            down, _, rc = timed("down", str(spec), "--yes", "--state-dir", str(tmp / "state"))
            if rc != 0:
                raise SystemExit(f"down of {size} nodes failed")
            rows.append(
                {"compute": size, "cold_up_s": round(cold, 1), "noop_up_s": round(noop, 1),
                 "noop_changed": changed_tasks(out), "down_s": round(down, 1)}
            )  # fmt: skip
            print(
                f"{size:>7} {size + 2:>5} {cold:>10.0f} {noop:>11.0f} {noop / cold:>10.2f} "
                f"{changed_tasks(out)!s:>7} {down:>7.0f}"
            )

    out_dir = REPO / "test-artifacts" / "benchmark"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "up_local.json").write_text(json.dumps({"runs": rows, "cpus": os.cpu_count()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
