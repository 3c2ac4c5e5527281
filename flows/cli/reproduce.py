"""``linkedqa reproduce``: the papers' table rows as runs, and their figures beside the measured ones.

``--list`` lists every paper's conditions (runnable or not, with the reason); ``PAPER --dry-run`` prints the exact
``linkedqa run`` commands; ``PAPER`` runs them as ordinary runs (run ids, resume, the response cache) and then
stores one row per (condition, metric) in ``LINKEDQA_HOME/reproductions/`` (``tasks.reproduce.matrix``; catalog
view ``reproduction_matrix``, ``linkedqa report --reproductions``).
"""

from __future__ import annotations

import argparse
import json
import shlex

from flows.cli.errors import EXIT_OTHER
from flows.cli.run_command import execute_run
from storage.catalog import refresh_catalog

#: ``linkedqa run`` options that ``reproduce`` passes on to every run (dest -> option).
RUN_OPTIONS = {"model": "--model", "backend": "--backend", "base_url": "--base-url", "api": "--api",
               "concurrency": "--concurrency", "timeout": "--timeout", "retries": "--retries", "kb": "--kb",
               "shards": "--shards", "dtype": "--dtype"}


def selected(a: argparse.Namespace):
    """``(paper, conditions)`` pairs the arguments select (every paper's with ``--list`` and no PAPER).

    Raises:
        tasks.reproduce.conditions.ConditionError: An unknown paper or condition id.
    """
    from tasks.reproduce.conditions import ConditionError, get_paper, load_papers  # heavy: pydantic, yaml

    if a.paper is None:
        if not a.list:
            raise ConditionError("give a PAPER (see `linkedqa reproduce --list`)")
        if a.condition:
            raise ConditionError("--condition needs a PAPER")
        return [(p, p.conditions) for p in load_papers().values()]
    paper = get_paper(a.paper)
    return [(paper, [paper.condition(c) for c in a.condition] if a.condition else paper.conditions)]


def run_args(a: argparse.Namespace) -> tuple[str, ...]:
    """The ``linkedqa run`` options given to ``reproduce`` (they are passed on as given)."""
    out: list[str] = []
    for dest, opt in RUN_OPTIONS.items():
        value = getattr(a, dest, None)
        if value is not None:
            out += [opt, str(value)]
    if a.no_cache:
        out.append("--no-cache")
    return tuple(out)


def check_reproduce(a: argparse.Namespace) -> None:
    """Refuse an unknown paper, condition or ``--kb`` before a Prefect server starts.

    Raises:
        tasks.reproduce.conditions.ConditionError: An unknown paper or condition id.
        LookupError: No published KB of the ``--kb`` name.
    """
    selected(a)
    _check_kb(a)


def _check_kb(a: argparse.Namespace) -> None:
    """Refuse a ``--kb`` that names no published KB (the printed commands too would fail)."""
    if a.kb is not None:
        from tasks.runs.config import resolve_kb  # heavy: the run machinery

        resolve_kb(a.kb)


def record(paper, condition) -> dict:
    """The ``--list --json`` record of one condition."""
    from tasks.reproduce.conditions import needs_llm  # heavy: every method's module

    return {
        "id": condition.id, "paper": paper.id, "table": condition.table, "row": condition.row,
        "paper_model": condition.paper_model, "method": condition.method, "dataset": condition.dataset,
        "split": condition.split,
        "paper_metrics": [{"metric": f.metric, "printed": f.printed, "value": f.value} for f in condition.figures],
        "linkedqa_metrics": [f.linkedqa for f in condition.metrics()],
        "runnable": condition.runnable, "reason": condition.reason,
        "needs_llm": needs_llm(condition) if condition.runnable else None,
        "command": condition.shell() if condition.runnable else None,
        "differs": condition.differs,
    }


def cmd_reproduce(a: argparse.Namespace) -> int:
    """``linkedqa reproduce``: list, print or run the conditions of a paper, then store its matrix rows."""
    pairs = selected(a)
    _check_kb(a)
    if a.list:
        for paper, conditions in pairs:
            if not a.json:
                print(f"{paper.id}: {paper.title}")
            for c in conditions:
                if a.json:
                    print(json.dumps(record(paper, c), ensure_ascii=False))
                else:
                    what = (f"{c.method} on {c.dataset}/{c.split or '-'}" if c.runnable
                            else f"not runnable: {c.reason}")
                    print(f"  {c.id:<40} {c.table:<9} {c.row[:38]:<38} {what}")
        return 0
    (paper, conditions), = pairs
    runnable = [c for c in conditions if c.runnable]
    for c in conditions:
        if not c.runnable:
            print(f"# {c.id}: not runnable: {c.reason}")
    if a.dry_run:
        for c in runnable:
            print(c.shell(limit=a.limit, run_args=run_args(a)))
        return 0
    return run_conditions(a, paper, runnable)


def run_conditions(a: argparse.Namespace, paper, conditions) -> int:
    """Run each condition as ``linkedqa run`` (one after the other), then store and print the matrix rows."""
    from tasks.reproduce.matrix import write_rows  # heavy: the run machinery's storage
    from tasks.runs.engine_pool import close_backends  # heavy: the LLM backends

    parser = a.build_parser()
    rows, failed = [], []
    try:
        _run_each(parser, a, paper, conditions, rows, failed)
    finally:
        close_backends()  # one engine served every condition that asked for the same one
    path = write_rows(paper.id, rows)

    refresh_catalog()
    print(f"\n{paper.id}: the paper's figures beside the measured ones ({len(rows)} rows"
          + (f", stored in {path}" if path else "") + ")")
    print(f"  {'condition':<36} {'metric':<22} {'paper':>9} {'measured':>9} {'diff':>9} {'n':>6}")
    for r in rows:
        print(f"  {r['condition']:<36} {r['metric']:<22} {_num(r['paper_value'])} {_num(r['measured'])} "
              f"{_num(r['difference'])} {r['n'] if r['n'] is not None else '-':>6}")
    if failed:
        print(f"error: {len(failed)} condition(s) failed: {', '.join(failed)} (re-run the same command: finished "
              "runs are reused)")
        return EXIT_OTHER
    return 0


def _run_each(parser, a, paper, conditions, rows: list, failed: list) -> None:
    from tasks.reproduce.matrix import measured_rows  # heavy: the run machinery's storage

    for n, c in enumerate(conditions, 1):
        print(f"\n== {n}/{len(conditions)} {paper.id} {c.table}, {c.row} ({c.id})", flush=True)
        try:
            first = c.before_command(limit=a.limit, run_args=run_args(a))
            run_id = "$RUN"
            if first is not None:
                print(f"   $ linkedqa {shlex.join(first)}", flush=True)
                run_id = execute_run(parser.parse_args(first), close=False)
            argv = c.command(limit=a.limit, run_args=run_args(a), run_id=run_id)
            print(f"   $ linkedqa {shlex.join(argv)}", flush=True)
            run_id = execute_run(parser.parse_args(argv), close=False)
            rows += measured_rows(paper, c, run_id)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - one condition's failure must not lose the others
            failed.append(c.id)
            print(f"error: {c.id}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", flush=True)


def _num(v: float | None) -> str:
    return f"{'-':>9}" if v is None else f"{v:>9.4f}"
