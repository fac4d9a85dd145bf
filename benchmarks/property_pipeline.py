"""Time validate, plan and render (CLI and library) over the property test's spec documents.

The documents are those of ``tests/unit/test_property_pipeline.py`` (same strategy, same fixed
seed, same checks); this prints how long each took and the slowest ones.
Target: every document answered in under 5 s.
Run: python benchmarks/property_pipeline.py [--examples 300] [--top 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from tests.property_specs import BASES, TEXT, Document, documents  # noqa: E402
from tests.unit.test_property_pipeline import check_document  # noqa: E402

TARGET_S = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    runs: list[tuple[float, str, str, bool]] = []

    @settings(
        max_examples=args.examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(documents())
    def one(doc: Document) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            t0 = time.perf_counter()
            check_document(doc, folder)
            seconds = time.perf_counter() - t0
            valid = (folder / "lib-build").exists()
        runs.append((seconds, doc.family, doc.base, valid))

    # Warm up (Jinja compiles the templates on the first render), then time the documents.
    with tempfile.TemporaryDirectory() as tmp:
        check_document(Document("text", BASES[0], TEXT[BASES[0]].encode()), Path(tmp))
    one()
    times = [r[0] for r in runs]
    families = Counter(r[1] for r in runs)
    print(f"documents: {len(runs)} ({', '.join(f'{k} {v}' for k, v in sorted(families.items()))})")
    print(f"valid (planned and rendered): {sum(r[3] for r in runs)}")
    print(f"seconds per document: median {statistics.median(times):.2f}, mean {statistics.mean(times):.2f}")
    print(f"{'seconds':>8} {'family':>7} {'base':<22} valid")
    for seconds, family, base, valid in sorted(runs, reverse=True)[: args.top]:
        print(f"{seconds:8.2f} {family:>7} {base:<22} {valid}")
    slowest = max(times)
    print(f"slowest: {slowest:.2f} s (target < {TARGET_S:.0f} s): {'met' if slowest < TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
