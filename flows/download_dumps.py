"""Flow ``download_dumps``: Wikimedia dumps, resumable, checked against the published sums (``kb download``)."""

from __future__ import annotations

from prefect import flow

from storage import layout
from tasks.fetch.http import DownloadResult
from tasks.fetch_tasks import download_dump_task


@flow(name="download_dumps")
def download_dumps(wikidata: str | None = None, wikipedia: str | None = None, to: str | None = None,
                   mirror: str | None = None) -> list[tuple[str, DownloadResult]]:
    """Download a Wikidata JSON dump and/or a Wikipedia pages-articles dump into ``<to>/dumps/<date>/``.

    Args:
        wikidata: ``latest`` or ``YYYYMMDD``.
        wikipedia: ``WIKI:latest`` or ``WIKI:YYYYMMDD`` (e.g. ``enwiki:latest``).
        to: Folder (default ``LINKEDQA_HOME``).
        mirror: Mirror base replacing https://dumps.wikimedia.org (default ``$LINKEDQA_MIRROR``).

    Returns:
        ``[(kb build flag, result)]``: ``("--wikidata", ...)`` and/or ``("--wikipedia", ...)``.
    """
    if not wikidata and not wikipedia:
        raise ValueError("give --wikidata latest|YYYYMMDD and/or --wikipedia enwiki:latest|enwiki:YYYYMMDD")
    dest = str(to or layout.home())
    done = []
    if wikidata:
        done.append(("--wikidata", download_dump_task("wikidata", wikidata, dest, mirror)))
    if wikipedia:
        done.append(("--wikipedia", download_dump_task("wikipedia", wikipedia, dest, mirror)))
    return done
