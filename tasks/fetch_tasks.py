"""Prefect tasks of downloads: thin wrappers over ``tasks.fetch`` (benchmarks, Wikimedia dumps).

Progress goes to stdout (one line per file), as ``linkedqa data fetch`` has always printed it.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks.fetch.http import DownloadResult
from tasks.fetch.sources import (
    FetchedFile,
    download_wikidata_dump,
    download_wikipedia_dump,
    fetch_groups,
    file_groups,
)
from tasks.progress import progress, say


@task(name="fetch_datasets")
def fetch_datasets_task(names: list[str], root: str, mirror: str | None = None,
                        kb_sample: bool = False) -> dict[str, list[FetchedFile]]:
    """Fetch every file of the named benchmarks (and of the sample KB) into ``root``.

    Verified files are skipped, partial ones resume. Each dataset's files are one progress reporter (files done,
    bytes downloaded); a file whose fetch has something to say (a resumed download, recompressed bytes) gets a line.
    """
    out: dict[str, list[FetchedFile]] = {}
    for name, files in file_groups(names, kb_sample).items():
        with progress(f"fetch {name}", total=len(files), unit="file") as p:
            got = 0

            def on_file(f: FetchedFile) -> None:
                nonlocal got
                got += f.size if f.action == "downloaded" else 0
                p.update(1, downloaded=f"{got / 2**20:.1f} MiB")
                if f.note:
                    say(f"  {f.action} {f.file.path}: {f.note}")

            out.update(fetch_groups({name: files}, Path(root), mirror=mirror, progress=False, on_file=on_file))
    return out


@task(name="download_dump", task_run_name="download {dump}")
def download_dump_task(dump: str, spec: str, to: str, mirror: str | None = None) -> DownloadResult:
    """Download one Wikimedia dump into ``<to>/dumps/<date>/``.

    ``dump="wikidata"`` takes ``spec`` = a date or ``latest``; ``dump="wikipedia"`` takes ``spec="WIKI:DATE"``.
    """
    if dump == "wikidata":
        return download_wikidata_dump(spec, Path(to), mirror=mirror)
    wiki, _, date = spec.partition(":")
    return download_wikipedia_dump(wiki, date, Path(to), mirror=mirror)
