"""Flow ``build_indexes``: the indexes of a KB version as an explicit, resumable step (``linkedqa kb index``).

Runs call it before their shards for the index kinds their method reads (``flows.run_method``); an index that is
built is left as it is (``tasks.index_tasks.build_kb_index`` says what "built" means per kind), so a second call
is a no-op.
"""

from __future__ import annotations

from prefect import flow

from storage import layout
from tasks.index_tasks import build_index_task
from tasks.runs.config import resolve_kb


@flow(name="build_indexes")
def build_indexes(kb: str | None = None, kinds: list[str] | None = None, workers: int = 1) -> list[dict]:
    """Build the requested index kinds (default: every kind of ``storage.layout.INDEX_KINDS``) of a KB version.

    Args:
        kb: KB name or version (default: the newest).
        kinds: ``INDEX_KINDS`` keys, built in the given order.
        workers: kg-oxigraph's N-Triples parts, written and bulk-loaded in parallel (``tasks.kg.oxigraph_store``),
            and tantivy's indexing threads plus the processes building documents for the ``*-bm25`` kinds
            (``tasks.search.kb_indexes.ensure_index``).

    Returns:
        One ``{"kind", "folder", "built", "seconds"}`` per kind.

    Raises:
        LookupError: No KB built yet, or no KB of that name.
        storage.layout.LayoutError: An unknown kind (before anything is built).
    """
    kinds = list(kinds or layout.INDEX_KINDS)
    unknown = [k for k in kinds if k not in layout.INDEX_KINDS]
    if unknown:
        raise layout.LayoutError(f"unknown index kind(s) {unknown}; known: {', '.join(layout.INDEX_KINDS)}")
    version = resolve_kb(kb)
    if version is None:
        raise LookupError("no KB built yet: run `linkedqa kb build --sample` first")
    print(f"indexes of KB {version}: {', '.join(kinds)}", flush=True)
    root = str(layout.home())
    return [build_index_task(version, k, root, workers) for k in kinds]
