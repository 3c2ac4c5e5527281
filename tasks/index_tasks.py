"""Prefect tasks of the index step: build the indexes of a KB version before anything searches them.

Every index kind and its folder is one row of ``storage.layout.INDEX_KINDS``. The search indexes are built by
``tasks.search.kb_indexes.ensure_index``, the KG stores by ``tasks.kg.duckdb_store.ensure_built`` and
``tasks.kg.oxigraph_store.ensure_built``, each the one place its kinds are decided built; each build is atomic
(temporary folder renamed, its done-marker last), so a built index is not rebuilt (a dense one of another structure
than ``$LINKEDQA_DENSE_INDEX`` asks for counts as not built) and an interrupted build is redone from scratch.
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger, task

from storage import layout
from tasks.kg import duckdb_store, oxigraph_store
from tasks.progress import say
from tasks.runs.config import RunPlan
from tasks.runs.resolve import resolve_run
from tasks.search.kb_indexes import SEARCH_KINDS, ensure_index


def build_kb_index(kb_version: str, kind: str, root: Path, workers: int = 1) -> dict:
    """Build one index kind of a KB version unless it is built.

    ``workers``: kg-oxigraph's N-Triples parts and loading threads, and tantivy's indexing threads and the
    processes building documents for the ``*-bm25`` kinds (``kb_indexes._writer``); the other kinds ignore it.

    Returns:
        ``{"kind", "folder", "built": bool (False: it already existed), "seconds"}``.

    Raises:
        storage.layout.LayoutError: An unknown kind.
    """
    if kind in SEARCH_KINDS:
        return ensure_index(kb_version, kind, root, threads=workers)
    t0 = time.perf_counter()
    if kind == "kg-duckdb":
        folder, built = duckdb_store.ensure_built(kb_version, root)
    elif kind == "kg-oxigraph":
        folder, built = oxigraph_store.ensure_built(kb_version, root, workers=workers)
    else:
        raise layout.LayoutError(f"unknown index kind {kind!r}; known: {', '.join(layout.INDEX_KINDS)}")
    return {"kind": kind, "folder": str(folder), "built": built,
            "seconds": round(time.perf_counter() - t0, 3) if built else 0.0}


def index_kinds_of(paths: list[Path] | None, root: Path) -> list[str]:
    """The index kinds among a method's ``index_paths`` (other paths, e.g. KB tables, are ignored)."""
    kinds = [layout.index_kind_of(Path(p), root) for p in paths or []]
    return [k for k in layout.INDEX_KINDS if k in kinds]


@task(name="build_kb_index", task_run_name="index {kind} of {kb_version}")
def build_index_task(kb_version: str, kind: str, root: str, workers: int = 1) -> dict:
    """Build one index of a KB version (a no-op when it exists); prints one progress line.

    kg-duckdb's build also prints one line per table and ART index (``duckdb_store.build_index``).
    """
    res = build_kb_index(kb_version, kind, Path(root), workers)
    state = f"built in {res['seconds']:.1f}s" if res["built"] else "already built"
    line = f"  index {kind:<14} {state}  ({res['folder']})"
    say(line)
    get_run_logger().debug(line)
    return res


@task(name="run_index_kinds")
def run_index_kinds_task(plan: RunPlan, root: str) -> list[str]:
    """The index kinds a run's method reads (``Method.index_paths`` mapped onto ``INDEX_KINDS``).

    A method that does not say (``index_paths`` is ``None``) gets none built here: its shards build what they
    open.
    """
    if not plan.kb_version:
        return []
    run = resolve_run(plan, Path(root))
    return index_kinds_of(run.index_paths(), Path(root))
