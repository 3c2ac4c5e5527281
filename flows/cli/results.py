"""``linkedqa eval``, ``report`` and ``catalog``: reading stored results back, comparing and printing them."""

from __future__ import annotations

import argparse
import sys

from flows.cli.command_env import start_prefect
from flows.cli.errors import EXIT_OTHER
from storage import layout
from storage.catalog import connect, refresh_catalog
from storage.run_store import RunStore


def num(value: float | None) -> str:
    """A metric value for the terminal (``-`` for a metric with nothing to score)."""
    return "-" if value is None else f"{value:.4f}"


def print_metrics(run_id: str) -> None:
    """Print a finished run's stored metrics."""
    rows = RunStore(run_id).read_table("metrics").to_pylist()
    print(f"\nmetrics of {run_id}:")
    for r in rows:
        print(f"  {r['metric']:<24} {num(r['value']):>12}   (n={r['n']})")


def cmd_eval(a: argparse.Namespace) -> int:
    """``linkedqa eval RUN_ID|--all [--write]``: recompute metrics from stored predictions, compare, store.

    Values stored under an older version of the metric rules (manifest ``metrics_format``) are expected to
    differ: they are listed, and ``--write`` stores the recomputed ones. Under the same version any difference
    is an error (exit 1). ``--write`` and ``--all`` run the ``evaluate_run`` flow; one run without ``--write``
    writes nothing and is compared directly (no Prefect server to start).
    """
    if bool(a.run_id) == bool(a.all):
        raise ValueError("give one RUN_ID or --all")
    if a.write or a.all:
        from flows.evaluate_run import evaluate_run  # heavy: pulls prefect

        if a.run_id:
            layout.safe_name(a.run_id, "run id")
        start_prefect()
        reports = evaluate_run(run_ids=[a.run_id] if a.run_id else None, all_runs=a.all, write=a.write)
    else:
        from tasks.runs.evaluate import compare_run_metrics  # heavy: the run machinery and method registry

        reports = [{**compare_run_metrics(layout.safe_name(a.run_id, "run id")), "written": False}]
    bad = 0
    for rep in reports:
        run_id, fmt, current = rep["run_id"], rep["stored_format"], rep["current_format"]
        print(f"{run_id}: stored with metrics format {fmt}, current format {current}")
        print(f"  {'metric':<26} {'recomputed':>12} {'stored':>12}")
        for r in rep["rows"]:
            flag = {"same": "", "changed": "   changed", "mismatch": "   MISMATCH"}[r["status"]]
            print(f"  {r['metric']:<26} {num(r['recomputed']):>12} {num(r['stored']):>12}{flag}")
        for g in rep["gone"]:
            print(f"  {g['metric']:<26} {'-':>12} {num(g['stored']):>12}   no longer computed")
        state = rep.get("stages")
        if state not in (None, "none"):
            line = {"current": "current", "missing": "missing", "stale": "stale (other rules or stages)"}[state]
            if state != "current":
                line += ("; stored the recomputed ones" if rep["written"]
                         else f"; `linkedqa eval {run_id} --write` stores them")
            print(f"  failure stages: {line}")
        if fmt == current:
            bad += rep["differ"]
        elif rep["written"]:
            print(f"  stored the recomputed values (metrics format {fmt} -> {current})")
        elif rep["differ"]:
            print(f"  these values were computed with metrics format {fmt}; `linkedqa eval {run_id} --write` "
                  "stores the recomputed ones")
    if bad:
        print(f"error: {bad} metric(s) differ from the values stored under the same rules", file=sys.stderr)
        return EXIT_OTHER
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    """``linkedqa report``: metrics across runs from the catalog."""
    if a.notebooks:
        from tasks.reports.notebooks import _ANSI, execute_notebooks  # heavy: nbclient, nbformat, jinja2

        failed = 0
        for name, res in execute_notebooks().items():
            if isinstance(res, Exception):
                failed += 1
                last = _ANSI.sub("", str(res)).strip().splitlines()[-1][:200]
                print(f"error: notebook {name} failed (see its HTML): {last}", file=sys.stderr)
            else:
                print(f"{name:<10} {res}")
        return EXIT_OTHER if failed else 0
    if a.run and not RunStore(a.run).is_planned():  # checked before the catalog is opened:
        raise LookupError(f"unknown run {a.run!r}: no run folder under {layout.runs_root()}")  # it writes
    if a.stages:
        a.views = ["stage_summary"]
    if a.views:
        from tasks.reports.views import check_view_names  # heavy: the report views (rich, the catalog's SQL)

        check_view_names(a.views)
    con = connect()
    if a.reproductions:
        return print_reproductions(con)
    if a.run and a.stages:
        rows = con.execute("SELECT stage, items, share FROM stage_summary WHERE run_id = ? ORDER BY stage_rank",
                           [a.run]).fetchall()
        if not rows:
            raise LookupError(f"no failure stages for run {a.run!r} (`linkedqa eval {a.run} --write` adds them)")
        for stage, items, share in rows:
            print(f"{stage:<24} {items:>8} {share:>8.1%}")
        return 0
    if a.run:
        rows = con.execute("SELECT metric, value, n FROM metrics WHERE run_id = ? ORDER BY metric", [a.run]).fetchall()
        if not rows:
            raise LookupError(f"no metrics for run {a.run!r}")
        for m, v, n in rows:
            print(f"{m:<24} {num(v):>12} (n={n})")
        return 0

    from tasks.reports.views import print_report  # heavy: the report views (rich, the catalog's SQL)

    print_report(con, a.views or None)
    return 0


def print_reproductions(con) -> int:
    """``linkedqa report --reproductions``: each condition's paper figure beside the newest measured one."""
    rows = con.execute(
        "SELECT paper, condition, metric, paper_printed, paper_value, measured, difference, n, model, question_limit "
        "FROM reproduction_matrix").fetchall()
    if not rows:
        raise LookupError("no reproductions stored yet: run `linkedqa reproduce PAPER` (see `linkedqa reproduce "
                          "--list`)")
    print(f"{'paper':<11} {'condition':<36} {'metric':<22} {'printed':>8} {'paper':>8} {'measured':>8} {'diff':>8} "
          f"{'n':>6}  model")
    for paper, cond, metric, printed, pv, mv, diff, n, model, limit in rows:
        print(f"{paper:<11} {cond:<36} {metric:<22} {printed:>8} {num(pv):>8} {num(mv):>8} {num(diff):>8} "
              f"{n if n is not None else '-':>6}  {model}" + (f" (--limit {limit})" if limit else ""))
    return 0


def cmd_catalog(a: argparse.Namespace) -> int:
    """``linkedqa catalog refresh``."""
    print(refresh_catalog())
    return 0
