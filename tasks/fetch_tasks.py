"""Prefect tasks of downloads: thin wrappers over ``tasks.fetch`` (benchmarks, Wikimedia dumps).

Progress goes to stdout (one line per file), as ``linkedqa data fetch`` has always printed it.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks.fetch.http import DownloadResult
from tasks.fetch.sources import FetchedFile, download_wikidata_dump, download_wikipedia_dump, fetch_datasets
from tasks.progress import say


def _print_file(f: FetchedFile) -> None:
    note = f"  ({f.note})" if f.note else ""
    say(f"  {f.action:<10} {f.file.path}  {f.size:,} bytes, sha256 ok{note}")


@task(name="fetch_datasets")
def fetch_datasets_task(names: list[str], root: str, mirror: str | None = None) -> dict[str, list[FetchedFile]]:
    """Fetch every file of the named benchmarks into ``root`` (verified ones are skipped, partial ones resume)."""
    return fetch_datasets(names, Path(root), mirror=mirror, on_file=_print_file)


@task(name="download_dump", task_run_name="download {dump}")
def download_dump_task(dump: str, spec: str, to: str, mirror: str | None = None) -> DownloadResult:
    """Download one Wikimedia dump into ``<to>/dumps/<date>/``.

    ``dump="wikidata"`` takes ``spec`` = a date or ``latest``; ``dump="wikipedia"`` takes ``spec="WIKI:DATE"``.
    """
    if dump == "wikidata":
        return download_wikidata_dump(spec, Path(to), mirror=mirror)
    wiki, _, date = spec.partition(":")
    return download_wikipedia_dump(wiki, date, Path(to), mirror=mirror)
