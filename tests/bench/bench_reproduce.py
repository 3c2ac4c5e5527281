"""``make reproduce``: every runnable condition of the five papers with the embedded model, on this machine.

Not a speed benchmark and not in ``make bench``: it measures the embedded model's column of the reproduction pages
(``docs/reproductions/<paper>.md``). Each paper's runnable conditions run through the real command line,
``linkedqa reproduce PAPER --condition ID... --limit N``, on the sample KB in ``LINKEDQA_HOME``, with ``N`` chosen
per method to fit the budget (:data:`LIMITS`; a condition whose run asks no LLM runs its whole split). Conditions whose
commands are equal share one run (the run id is the same), so the rows of two paper models cost one run. Then the
newest rows of the embedded model are written to ``docs/reproductions/embedded-model.json`` with the machine, the
commit and each run's n; ``python -m tests.readme_sections --write`` puts them on the pages.

Usage: ``python -m tests.bench.bench_reproduce [--papers ela er ...] [--scale 0.5] [--out FILE]``; ``--scale``
multiplies every limit (a quicker, smaller pass).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from storage import layout
from storage.manifest import git_sha, read_manifest
from tasks.llm.models import EMBEDDED_MODEL
from tasks.methods.registry import METHODS
from tasks.reproduce.conditions import load_papers, needs_llm
from tasks.reproduce.pages import MEASURED_FILE

#: Questions per condition, by method (None: the whole split). Chosen so that every runnable condition of the
#: five papers fits about two hours on a 2-core CPU with the embedded model: the agents that ask the engine tens of
#: times per question (anchorrag, tog) get the fewest (docs/reproductions/index.md).
LIMITS: dict[str, int | None] = {
    "search-recall": None, "ea-embed": None,
    "closed-book": 40, "cot": 40, "bm25-rag": 20, "dense-rag": 20, "er": 20, "ela": 20,
    "kg-1hop": 10, "react-kg": 5, "ea-agent": 5, "tog": 3, "anchorrag": 2,
}


def _lscpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
    cores = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("CPU(s)")), "?")
    isa = "AVX-512" if "avx512f" in out else "AVX2 only"
    return f"{model}, {cores} cores with {isa}"


def limit_for(method: str, scale: float, llm: bool = True) -> int | None:
    """The ``--limit`` of a method's conditions (None: the whole split, as for every run that asks no LLM)."""
    base = LIMITS[method] if llm else None
    return None if base is None else max(1, round(base * scale))


def run_paper(pid: str, scale: float) -> tuple[float, list[str]]:
    """Run a paper's runnable conditions, grouped by their limit; (wall seconds, the commands that failed)."""
    groups: dict[int | None, list[str]] = {}
    for c in load_papers()[pid].conditions:
        if c.runnable:
            groups.setdefault(limit_for(str(c.method), scale, needs_llm(c)), []).append(c.id)
    t0, failed = time.perf_counter(), []
    for limit, ids in groups.items():
        cmd = [sys.executable, "-m", "flows.cli", "reproduce", pid, *[x for i in ids for x in ("--condition", i)]]
        cmd += ["--limit", str(limit)] if limit is not None else []
        print(f"\n$ linkedqa {' '.join(cmd[3:])}", flush=True)
        if subprocess.call(cmd, cwd=layout.REPO_ROOT) != 0:
            failed.append(" ".join(cmd[3:]))
    return time.perf_counter() - t0, failed


def export(out: Path, scale: float) -> int:
    """Write the embedded model's newest rows of every paper to ``out``; the number of rows."""
    con = duckdb.connect(str(layout.catalog_path()), read_only=True)
    cols = ["paper", "condition", "metric", "paper_value", "measured", "difference", "n", "question_limit", "run_id",
            "kb_version", "git_sha"]
    rows = [dict(zip(cols, r, strict=True)) for r in con.execute(
        f"SELECT {', '.join(cols)} FROM reproduction_matrix WHERE model = ? OR model IS NULL "
        "ORDER BY paper, condition, metric", [EMBEDDED_MODEL]).fetchall()]
    con.close()
    run_wall: dict[str, float] = {}  # each paper's distinct runs' wall time (a run two papers share counts twice)
    for paper, run_id in {(r["paper"], r["run_id"]) for r in rows}:
        run_wall[paper] = run_wall.get(paper, 0.0) + (read_manifest(layout.run_dir(run_id)) or {}).get("wall_s", 0.0)
    out.write_text(json.dumps({
        "machine": _lscpu(), "commit": git_sha(), "model": EMBEDDED_MODEL, "scale": scale,
        "limits": {m: limit_for(m, scale) for m in LIMITS}, "runs_wall_s": {p: round(s) for p, s in sorted(
            run_wall.items())}, "rows": rows}, indent=1) + "\n")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    """Run the papers' conditions, export the rows; exit 1 when a command failed."""
    ap = argparse.ArgumentParser(prog="python -m tests.bench.bench_reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("--papers", nargs="*", default=None, help="paper ids (default: all)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every limit (default 1)")
    ap.add_argument("--out", type=Path, default=MEASURED_FILE)
    a = ap.parse_args(argv)
    missing = sorted({str(c.method) for p in load_papers().values() for c in p.conditions if c.runnable}
                     - set(LIMITS))
    if missing:
        raise SystemExit(f"no limit for method(s) {missing} in LIMITS")
    assert set(LIMITS) <= set(METHODS)
    walls, failed = {}, []
    for pid in a.papers or list(load_papers()):
        walls[pid], bad = run_paper(pid, a.scale)
        failed += bad
    n = export(a.out, a.scale)
    print(f"\n{n} rows of {EMBEDDED_MODEL} written to {a.out}; wall per paper: "
          + ", ".join(f"{p} {s / 60:.0f} min" for p, s in walls.items()))
    for f in failed:
        print(f"error: failed: linkedqa {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
