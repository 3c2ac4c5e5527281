"""``make bench``: every benchmark script in turn (each prints ratios against a same-run baseline)."""

from __future__ import annotations

import subprocess
import sys

SCRIPTS = ["tests.bench.bench_ingest", "tests.bench.bench_build", "tests.bench.bench_wikipedia", "tests.bench.bench_kg",
           "tests.bench.bench_retrieval", "tests.bench.bench_ea", "tests.bench.bench_search",
           "tests.bench.bench_bm25_build", "tests.bench.bench_ela",
           "tests.bench.bench_anchorrag", "tests.bench.bench_dtype", "tests.bench.bench_dense"]

if __name__ == "__main__":
    code = 0
    for mod in SCRIPTS:
        print(f"\n=== {mod}", flush=True)
        code |= subprocess.call([sys.executable, "-m", mod, *sys.argv[1:]])
    sys.exit(code)
