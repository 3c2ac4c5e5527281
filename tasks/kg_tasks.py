"""Prefect tasks over the KB as a graph: thin wrappers over ``tasks.kg`` (N-Triples export)."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks.kg.export_nt import export_ntriples


@task(name="export_ntriples", task_run_name="export {kb_version} -> {out}")
def export_ntriples_task(kb_version: str, out: str, root: str, workers: int = 1) -> dict[str, int]:
    """Write a KB version as Wikidata-style N-Triples (``.nt`` or ``.nt.gz``) with ``workers`` processes; counts."""
    return export_ntriples(kb_version, Path(out), Path(root), workers=workers)
