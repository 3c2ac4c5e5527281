"""Flow ``load_benchmarks``: load known benchmark datasets into the warehouse -> catalog (``linkedqa data load``)."""

from __future__ import annotations

from prefect import flow

from storage import layout
from storage.artifacts import ArtifactRef
from tasks.dataset_tasks import load_dataset_task
from tasks.kb_tasks import refresh_catalog_task


@flow(name="load_benchmarks")
def load_benchmarks(names: list[str]) -> list[ArtifactRef]:
    """Load each named dataset from ``LINKEDQA_DATA`` (a no-op for a version already stored), then the catalog.

    Args:
        names: Registered dataset names (``linkedqa data list``).

    Returns:
        One reference per dataset (``extra``: ``splits``, ``n_rejects``), in the order given.
    """
    for name in names:
        layout.safe_name(name, "dataset name")  # before anything is loaded
    root, data = str(layout.home()), str(layout.data_root())
    refs = []
    for name in names:
        ref = load_dataset_task(name, data)
        print(f"{name}: {ref.extra['splits']} ({ref.extra['n_rejects']} rejected) version {ref.version}", flush=True)
        refs.append(ref)
    refresh_catalog_task(root)
    return refs
