"""The demo's last screen: the runs' main metrics, where the results are, and how to look at them.

Everything shown is read back from what the runs stored (their metrics parts and manifests, the dataset's
manifest), never from values held in memory, so the screen shows exactly what SQL and the reports will show.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from storage import layout
from storage.catalog import done_dataset_versions
from storage.run_store import RunStore
from tasks.metrics.stages import stage_counts
from tasks.runs.failure_stages import read_stages
from tasks.runs.finalize import EFFICIENCY_METRICS


def _bin(name: str) -> str:
    """The venv's executable ``name`` as a user types it from here (relative when under the current folder)."""
    path = Path(sys.executable).parent / name
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _split_size(dataset: str, split: str, root: Path | None = None) -> int | None:

    sizes = [m.get("splits", {}).get(split) for d, _, m in done_dataset_versions(root) if d == dataset]
    return sizes[-1] if sizes and sizes[-1] else None


def run_summary(run_id: str, root: Path | None = None) -> dict:
    """What the demo shows of one stored run: method, dataset, split, metrics, and the time per question.

    Returns:
        ``{"run_id", "method", "dataset", "split", "n", "metrics": {name: (value, n)}, "wall_s", "llm_s",
        "setup_s", "n_errors", "engine_dtype", "split_size"}`` read from the run's manifest and metrics part;
        ``setup_s`` is the longest shard set-up (engine start), paid once per shard, not per question.
    """
    store = RunStore(run_id, root)
    man = store.read_manifest()
    if man is None:
        raise LookupError(f"run {run_id} is not finished (no manifest)")
    rows = store.read_table("metrics").to_pylist()
    cfg = man.config
    n = man.row_counts["predictions"]
    split = rows[0]["split"] if rows else cfg.get("split")
    return {
        "run_id": run_id, "method": cfg["method"], "dataset": cfg["dataset"], "split": split, "n": n,
        "metrics": {r["metric"]: (r["value"], r["n"]) for r in rows},
        "wall_s": man.wall_s,
        "llm_s": sum(s.llm_seconds for s in man.shards),
        "setup_s": max((s.setup_s for s in man.shards), default=0.0),
        "n_errors": man.n_errors,
        "engine_dtype": next((s.engine_dtype for s in man.shards if s.engine_dtype), None),
        "split_size": _split_size(cfg["dataset"], split),
    }


def stage_shares(run_id: str, root: Path | None = None) -> str:
    """A run's items per failure stage as ``stage n (share)``, in its family's order (empty without stages)."""
    rows = read_stages(run_id, root)
    if not rows:
        return ""
    counts = stage_counts(rows[0]["family"], [r["stage"] for r in rows])
    return ", ".join(f"{s} {n} ({n / len(rows):.0%})" for s, n in counts.items() if n)


def print_demo_summary(run_ids: list[str], wall_s: float, root: Path | None = None) -> None:
    """Print the demo's closing screen for the given runs (the last one is the main, LLM, run)."""
    console = Console(highlight=False, soft_wrap=True)
    sums = [run_summary(r, root) for r in run_ids]
    table = Table(title="demo results (read back from the stored metrics)", title_justify="left")
    for col, just in (("method", "left"), ("dataset/split", "left"), ("metric", "left"), ("value", "right"),
                      ("n", "right")):
        table.add_column(col, justify=just)
    for s in sums:
        quality = [(m, v) for m, v in s["metrics"].items() if m not in EFFICIENCY_METRICS]
        for j, (m, (v, n)) in enumerate(sorted(quality)):
            table.add_row(s["method"] if j == 0 else "", f"{s['dataset']}/{s['split']}" if j == 0 else "",
                          m, "-" if v is None else f"{v:.4f}", str(n))
        table.add_section()
    console.print()
    console.print(table)
    main = sums[-1]
    if main["n"]:
        # the engine start is paid once, not per question: leave it out of the rate, add it once to the estimate
        setup = min(main["setup_s"], main["wall_s"])
        per_q = (main["wall_s"] - setup) / main["n"]
        dtype = f", engine dtype {main['engine_dtype']}" if main["engine_dtype"] else ""
        start = f" after a {setup:.0f} s engine start" if setup >= 0.5 else ""
        console.print(f"{main['method']}: {main['n']} questions in {main['wall_s']:.0f} s "
                      f"({per_q:.1f} s per question{start}, {main['llm_s']:.0f} s in the LLM{dtype}), "
                      f"{main['n_errors']} item error(s)")
        if main["split_size"]:
            full = setup + per_q * main["split_size"]
            console.print(f"the whole {main['dataset']} {main['split']} split ({main['split_size']:,} questions) "
                          f"would take about {full / 60:.0f} min on this machine at that rate "
                          f"(`linkedqa run {main['method']} --dataset {main['dataset']} --split {main['split']}`)")
        stage_line = stage_shares(main["run_id"], root)
        if stage_line:
            console.print(f"where its items failed: {stage_line}  (`linkedqa report --stages`)")
    home = layout.home() if root is None else root
    catalog = layout.catalog_path(root)
    console.print(f"\ndemo finished in {wall_s / 60:.1f} min ({wall_s:.0f} s)")
    console.print(f"results: catalog {catalog}\n         run ids {', '.join(run_ids)}\n"
                  f"         run folders {layout.runs_root(root)}/<run id>/ (predictions, metrics, manifest.json)")
    sql = ("select method, metric, round(value, 4) as value, n from latest_metrics "
           f"where run_id = '{main['run_id']}' order by metric")
    env = "" if os.environ.get("LINKEDQA_HOME") is None else f"LINKEDQA_HOME={home} "
    console.print("\nlook at them:")
    console.print(f"  {_bin('duckdb')} {catalog} \"{sql}\"")
    console.print(f"  {env}{_bin('linkedqa')} report")
    console.print(f"  {env}{_bin('linkedqa')} report --notebooks   # executed notebooks as HTML under {home}/reports")
