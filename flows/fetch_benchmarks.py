"""Flow ``fetch_benchmarks``: benchmarks from their official locations, sha256-pinned (``linkedqa data fetch``)."""

from __future__ import annotations

from prefect import flow

from storage import layout
from tasks.fetch.sources import DATASET_FILES, NOT_FETCHABLE, FetchedFile
from tasks.fetch_tasks import fetch_datasets_task


@flow(name="fetch_benchmarks")
def fetch_benchmarks(names: list[str] | None = None, all_datasets: bool = False, to: str | None = None,
                     mirror: str | None = None, kb_sample: bool = False) -> dict[str, list[FetchedFile]]:
    """Fetch the named datasets (or every fetchable one) and the sample KB's inputs into ``to``.

    Args:
        names: Dataset names (``linkedqa data list``).
        all_datasets: Add every dataset with a public source (the others are listed as skipped).
        to: Data root to fill (default: ``storage.layout.data_root``).
        mirror: Mirror base replacing https://raw.githubusercontent.com (default ``$LINKEDQA_MIRROR``).
        kb_sample: Also fetch every input of ``linkedqa kb build --sample`` (reported as ``kb-sample``).

    Returns:
        Dataset name (or ``kb-sample``) -> outcome per file.

    Raises:
        ValueError: No names, not ``all_datasets`` and not ``kb_sample``.
    """
    names = list(names or [])
    if all_datasets:
        names += [n for n in DATASET_FILES if n not in names]
        for name, why in NOT_FETCHABLE.items():
            print(f"{name}: skipped ({why})")
    if not names and not kb_sample:
        raise ValueError("give dataset names, --all or --kb-sample (see `linkedqa data list`)")
    root = str(layout.data_root(required=False) if to is None else to)
    return fetch_datasets_task(names, root, mirror, kb_sample)
