"""Time how fast hostile specs are refused, and the peak memory each costs.

Target (issue 18): every hostile spec fails in under 2 s with a located error and bounded
memory. Each case is a document built to hit one cap at its worst (an alias bomb, a document
just over the size cap, a list just over the YAML-node cap, deep nesting, huge numbers and
node counts, a hostlist of a hundred million names); the table gives the seconds and the
peak traced Python memory of ``clusterctl validate``'s front half (load + rules), and the
finding each got.
Run: python benchmarks/hostile_specs.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "cli"))

from clusterctl.hostlist import HostlistError, expand  # noqa: E402
from clusterctl.pipeline import load_and_validate  # noqa: E402
from clusterctl.spec import SpecError  # noqa: E402
from clusterctl.spec.limits import MAX_DOCUMENT_BYTES, MAX_YAML_NODES  # noqa: E402

LOCAL = (REPO / "examples" / "local.yaml").read_text()


def _bomb() -> str:
    lines = ["version: 1", "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


CASES: dict[str, Callable[[], str]] = {
    "valid examples/local.yaml (reference)": lambda: LOCAL,
    "alias bomb (10 levels of 10 aliases)": _bomb,
    "document just over the size cap": lambda: LOCAL + "# pad\n" * (MAX_DOCUMENT_BYTES // 6 + 1),
    "flow list just over the node cap": lambda: "k: [" + ", ".join(["a"] * (MAX_YAML_NODES + 1)) + "]\n",
    "block list just over the node cap": lambda: "k:\n" + "  - a\n" * (MAX_YAML_NODES + 1),
    "10,000 open brackets": lambda: "version: 1\nname: " + "[" * 10_000 + "\n",
    "flow nesting of [x, 10,000 deep": lambda: "version: 1\nname: " + "[x, " * 10_000 + "\n",
    "mapping nested 200 deep": lambda: "".join("  " * i + f"k{i}:\n" for i in range(200)),
    "number of 4,000 digits": lambda: LOCAL.replace("memory_gib: 1\n", "memory_gib: 1" + "0" * 4000 + "\n", 1),
    "node count 99,999,999": lambda: LOCAL.replace("count: 4}", "count: 99999999}"),
    "three groups of 16,384 nodes": lambda: LOCAL.replace("count: 4}", "count: 16384}").replace(
        "small, count: 1}", "small, count: 16384}"
    ),
    "Jinja in every mount, 300 tiers": lambda: (
        LOCAL
        + "storage:\n"
        + "".join(
            f"  - {{name: t{i}, kind: nfs, mount: \"/m{i}/{{{{ lookup('pipe','id') }}}}\", server: s, export: /e}}\n"
            for i in range(300)
        )
    ),
}


def _run(path: Path) -> str:
    try:
        load_and_validate(path)
    except SpecError as exc:
        first = exc.findings[0]
        return f"{first.code} at {first.line}:{first.column} {first.dotted_path[:24]}"
    return "valid"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        _run(REPO / "examples" / "local.yaml")  # imports
        print(f"{'case':<40} {'bytes':>8} {'median s':>9} {'peak MiB':>9}  finding")
        for name, make in CASES.items():
            path = tmp / "spec.yaml"
            text = make()
            path.write_text(text)
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                outcome = _run(path)
                times.append(time.perf_counter() - t0)
            tracemalloc.start()
            _run(path)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            print(f"{name:<40} {len(text.encode()):>8} {statistics.median(times):>9.3f} {peak:>9.1f}  {outcome}")
        for expr in ("node[0-99999999]", "a[0-9999]b[0-9999]"):
            t0 = time.perf_counter()
            try:
                expand(expr)
                outcome = "expanded"
            except HostlistError as exc:
                outcome = str(exc)[:60]
            print(f"{'hostlist ' + expr:<40} {len(expr):>8} {time.perf_counter() - t0:>9.3f} {'':>9}  {outcome}")


if __name__ == "__main__":
    main()
