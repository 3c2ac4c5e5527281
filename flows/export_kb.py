"""Flow ``export_kb_ntriples``: a KB version as Wikidata-style N-Triples (``linkedqa kb export-nt``)."""

from __future__ import annotations

from prefect import flow

from storage import layout
from tasks.kg_tasks import export_ntriples_task
from tasks.runs.config import resolve_kb


@flow(name="export_kb_ntriples")
def export_kb_ntriples(out: str, kb: str | None = None, workers: int = 1) -> dict:
    """Write KB ``kb`` (name or version; default the newest) to ``out`` (``.nt`` or ``.nt.gz``).

    Args:
        out: Output file (an explicit path: the one write outside ``LINKEDQA_HOME`` allowed).
        kb: KB name or version.
        workers: Processes writing parts of the export in parallel (``tasks.kg.export_nt``).

    Returns:
        ``{"kb_version": ..., "counts": {claims, labels, descriptions, aliases, properties, skipped_ids, triples}}``.

    Raises:
        LookupError: No KB built yet, or no KB of that name.
    """
    version = resolve_kb(kb)
    if version is None:
        raise LookupError("no KB built yet: run `linkedqa kb build --sample` first")
    counts = export_ntriples_task(version, out, str(layout.home()), workers)
    return {"kb_version": version, "counts": counts}
