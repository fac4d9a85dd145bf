"""How long the worst hostile node output takes each parser, and how much time a whole run of them takes.

Target (issue 30): every input answered in under 1 s. The inputs are tests/node_outputs.py's:
each parser's real outputs mutated (numbers of 5,000 digits or 1e400, runs of 60,000 blanks or
brackets, record separators, terminal sequences), random text, and real lines with huge
fragments, as the property test in tests/security/test_node_outputs.py feeds them.
Run: python benchmarks/hostile_outputs.py [--inputs N]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "cli"))
sys.path.insert(0, str(REPO))

from tests.node_outputs import hostile_inputs, parsers  # noqa: E402


def main() -> int:
    """Print one row per parser: inputs, the slowest input's CPU seconds and size, the median."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=10_000, help="inputs per parser (default 10,000)")
    args = parser.parse_args()
    print("| parser | inputs | slowest input (CPU s) | its size (chars) | median (ms) | all inputs (CPU s) |")
    print("|---|---:|---:|---:|---:|---:|")
    worst_overall = 0.0
    for p in parsers():
        times: list[float] = []
        slowest = (0.0, 0)
        for text in hostile_inputs(p, args.inputs):
            start = time.process_time()
            with contextlib.suppress(*p.error):
                p.parse(text)
            took = time.process_time() - start
            times.append(took)
            slowest = max(slowest, (took, len(text)))
        worst_overall = max(worst_overall, slowest[0])
        print(
            f"| {p.name} | {len(times)} | {slowest[0]:.3f} | {slowest[1]} | {statistics.median(times) * 1000:.2f} "
            f"| {sum(times):.1f} |"
        )
    print(f"\nslowest input of all: {worst_overall:.3f} s (target: under 1 s)")
    return 0 if worst_overall < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
