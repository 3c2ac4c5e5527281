"""Official locations of the benchmarks and of the Wikimedia dumps, and how to fetch them.

Inputs: a dataset name registered in ``tasks.datasets.registry.REGISTRY``, or a Wikimedia dump date
(``latest`` or ``YYYYMMDD``); optionally a mirror base URL (``--mirror`` / ``LINKEDQA_MIRROR``).
Outputs: files under a data root, byte-identical to ``../shared/data`` (benchmarks), or under
``<dir>/dumps/<YYYYMMDD>/`` (dumps), each with a ``<file>.meta.json`` sidecar (see ``tasks.fetch.http``).

Benchmarks (``FILES``, ``DATASET_FILES``): every file a loader reads, with the public GitHub repository, the
commit and the path it was collected from (``../shared/data/SOURCES.md``) and the sha256 of the file as it must be
on disk, which pins the exact version. Files the collector gzip'd (``gzip -9``, original name and mtime in the
header) carry ``post=Gzip(...)``: the upstream file is downloaded, checked against the sha256 of the uncompressed
content, and compressed again with GNU ``gzip -9`` under the same name and mtime, which reproduces the collector's
bytes. Without GNU gzip, Python's zlib is used: same content (verified), different compressed bytes.
``post=HeadLines(n)`` keeps the first ``n`` lines of the upstream file (how the collector cut it).

The sample KB (``SAMPLE_KB_FILES``): every file ``linkedqa kb build --sample`` reads, pinned the same way; those that
no benchmark loader reads are listed in ``kb_sample.tsv`` beside this module (``linkedqa data fetch --kb-sample``).

Wikimedia dumps: ``wikidata_dump_urls`` / ``wikipedia_dump_urls`` build the official URLs; ``latest`` is resolved
to a concrete date through the dumps index page (the newest dated folder whose published sums list the file), so
the downloaded file name carries the date and ``linkedqa kb build`` pins the KB version by it
(``tasks.kb.plan.make_plan``: default KB name = the date in the file name; version hash = name, size and
head/tail sha256 of every input).

Mirrors: ``mirror_url`` replaces the scheme, host and prefix (``https://raw.githubusercontent.com`` and
``https://dumps.wikimedia.org``) by the mirror base, keeping the official path layout below it: a Wikimedia
mirror such as ``https://mirror.accum.se/mirror/wikimedia.org/dumps`` works as is for the dumps; for the
benchmarks the mirror serves ``<base>/<owner>/<repo>/<commit>/<path>``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlsplit

from storage.done import sweep_temps, temp_path
from storage.manifest import write_json_atomic
from tasks.datasets.registry import get_spec
from tasks.fetch.http import (
    ChecksumMismatch,
    DownloadError,
    DownloadResult,
    download,
    file_digest,
    get_text,
    meta_path,
)

__all__ = [
    "DATASET_FILES",
    "DUMPS_BASE",
    "FILES",
    "NOT_FETCHABLE",
    "RAW_GITHUB",
    "SAMPLE_KB",
    "SAMPLE_KB_FILES",
    "BenchmarkFile",
    "DumpNotFound",
    "DumpUrls",
    "FetchedFile",
    "Gzip",
    "HeadLines",
    "NotFetchable",
    "Repo",
    "dataset_files",
    "download_wikidata_dump",
    "download_wikipedia_dump",
    "fetch_benchmark_file",
    "fetch_datasets",
    "fetch_groups",
    "file_groups",
    "file_is_fetched",
    "missing_files",
    "mirror_url",
    "parse_sums",
    "resolve_latest",
    "wikidata_dump_urls",
    "wikipedia_dump_urls",
]

RAW_GITHUB = "https://raw.githubusercontent.com"
DUMPS_BASE = "https://dumps.wikimedia.org"
MIRROR_ENV = "LINKEDQA_MIRROR"


class NotFetchable(ValueError):
    """A registered dataset with no public location to download it from (the reason is in the message)."""


class DumpNotFound(DownloadError):
    """No Wikimedia dump for the requested date (HTTP 404 on its sums file, or the file is not listed)."""


# ------------------------------------------------------------------------------------------------ mirrors
def mirror_url(url: str, mirror: str | None = None) -> str:
    """The URL to request: ``url`` itself, or the same path below a mirror base.

    Args:
        url: An official URL (``https://raw.githubusercontent.com/...`` or ``https://dumps.wikimedia.org/...``).
        mirror: Mirror base URL; ``None`` reads ``LINKEDQA_MIRROR`` (unset or empty = no mirror).

    Returns:
        E.g. ``http://127.0.0.1:8000/wikidatawiki/entities/`` for ``https://dumps.wikimedia.org/wikidatawiki/
        entities/`` with mirror ``http://127.0.0.1:8000``.

    Raises:
        ValueError: When the mirror is not an http(s) URL.
    """
    base = mirror if mirror is not None else os.environ.get(MIRROR_ENV, "")
    if not base:
        return url
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"mirror must be an http(s) URL, got {base!r}")
    src = urlsplit(url)
    return base.rstrip("/") + src.path + (f"?{src.query}" if src.query else "")


# ------------------------------------------------------------------------------------------ benchmarks
@dataclass(frozen=True)
class Repo:
    """A public GitHub repository at a fixed commit."""

    name: str
    commit: str


@dataclass(frozen=True)
class Gzip:
    """The collector gzip'd the upstream file with ``gzip -9`` (header: original ``name``, ``mtime``).

    Attributes:
        name: File name stored in the gzip header (``""``: none, i.e. ``gzip -n``).
        mtime: Modification time stored in the header.
        content_sha256: sha256 of the uncompressed bytes = of the upstream file.
    """

    name: str
    mtime: int
    content_sha256: str

    def __str__(self) -> str:
        return "gzip"


@dataclass(frozen=True)
class HeadLines:
    """The collector kept the first ``n`` lines of the upstream file."""

    n: int

    def __str__(self) -> str:
        return f"head:{self.n}"


@dataclass(frozen=True)
class BenchmarkFile:
    """One file of a benchmark: where it is under the data root and where it comes from.

    Attributes:
        path: Relative path under the data root (``LINKEDQA_DATA``).
        repo: Source repository and commit.
        repo_path: Path of the upstream file in the repository.
        sha256: sha256 of the file as it must be on disk (pins the version).
        post: ``None`` (stored as downloaded), ``Gzip`` or ``HeadLines``.
    """

    path: str
    repo: Repo
    repo_path: str
    sha256: str
    post: Gzip | HeadLines | None = None

    @property
    def url(self) -> str:
        """The official raw URL: ``https://raw.githubusercontent.com/<repo>/<commit>/<path>``."""
        return f"{RAW_GITHUB}/{self.repo.name}/{self.repo.commit}/{quote(self.repo_path)}"


@dataclass(frozen=True)
class FetchedFile:
    """Outcome of one benchmark file: ``present`` (already verified on disk) or ``downloaded``."""

    file: BenchmarkFile
    path: Path
    action: str
    size: int
    note: str = ""


def dataset_files(name: str) -> list[BenchmarkFile]:
    """The files ``linkedqa data fetch NAME`` downloads (every file the dataset's loader reads).

    Raises:
        tasks.datasets.registry.UnknownDataset: When ``name`` is not registered.
        NotFetchable: When the dataset has no public source (``NOT_FETCHABLE`` says why).
    """
    get_spec(name)
    if name in NOT_FETCHABLE:
        raise NotFetchable(f"dataset {name!r} cannot be fetched: {NOT_FETCHABLE[name]}")
    if name not in DATASET_FILES:
        raise NotFetchable(f"dataset {name!r} has no entry in tasks/fetch/sources.py")
    return [FILES[p] for p in DATASET_FILES[name]]


def file_is_fetched(bf: BenchmarkFile, root: Path) -> bool:
    """True when ``root/bf.path`` exists with the pinned sha256 (or, for a re-gzip'd file, the pinned content)."""
    dest = Path(root) / bf.path
    if not dest.is_file():
        return False
    if file_digest(dest) == bf.sha256:
        return True
    return isinstance(bf.post, Gzip) and _gunzip_sha256(dest) == bf.post.content_sha256


def _gunzip_sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    except (OSError, EOFError):
        return None
    return h.hexdigest()


def _gzip_like_collector(src: Path, out: Path, gz: Gzip) -> str:
    """Compress ``src`` into ``out`` as the collector did; returns the tool used."""
    os.utime(src, (gz.mtime, gz.mtime))
    gzip_bin = shutil.which("gzip")
    if gzip_bin:
        args = [gzip_bin, "-9", "-c", *([] if gz.name else ["-n"]), src.name]
        with open(out, "wb") as fh:
            subprocess.run(args, cwd=src.parent, stdout=fh, check=True)
        return "gzip -9"
    with open(src, "rb") as fin, open(out, "wb") as raw, \
            gzip.GzipFile(filename=gz.name, mode="wb", compresslevel=9, fileobj=raw, mtime=gz.mtime) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return "python gzip"


def fetch_benchmark_file(bf: BenchmarkFile, root: Path, *, mirror: str | None = None, progress: bool = True,
                         retries: int = 3, timeout: float = 30) -> FetchedFile:
    """Make ``root/bf.path`` exist with the pinned content, downloading it when missing or different.

    Args:
        bf: The registry entry.
        root: Data root to write into.
        mirror: Mirror base URL (``None``: ``LINKEDQA_MIRROR`` or the official location).
        progress: Progress bar on a terminal.
        retries: Download retries (each resumes).
        timeout: Seconds per connect / read.

    Returns:
        What was done.

    Raises:
        tasks.fetch.http.DownloadError: The download failed (a ``.part`` is kept for the next run).
        tasks.fetch.http.ChecksumMismatch: The bytes do not match the pin (nothing is left behind).
    """
    root = Path(root)
    dest = root / bf.path
    if file_is_fetched(bf, root):
        return FetchedFile(bf, dest, "present", dest.stat().st_size)
    url = mirror_url(bf.url, mirror)
    source = {"repository": bf.repo.name, "commit": bf.repo.commit, "path": bf.repo_path, "official_url": bf.url}
    if bf.post is None:
        res = download(url, dest, expected_sha256=bf.sha256, progress=progress, retries=retries, timeout=timeout,
                       skip_existing=False, extra_meta={"source": source})
        return FetchedFile(bf, dest, "downloaded", res.size, _resumed(res))

    # Upstream bytes go to a hidden work folder next to dest, under the upstream file name (GNU gzip stores it).
    work = dest.parent / f".{dest.name}.fetch"
    upstream_name = (bf.post.name if isinstance(bf.post, Gzip) else "") or Path(bf.repo_path).name
    raw = work / upstream_name
    expected = bf.post.content_sha256 if isinstance(bf.post, Gzip) else None
    try:
        res = download(url, raw, expected_sha256=expected, progress=progress, retries=retries, timeout=timeout,
                       skip_existing=expected is not None)
    except ChecksumMismatch:
        shutil.rmtree(work, ignore_errors=True)
        raise
    sweep_temps(dest.parent, (f"{dest.name}.tmp-*",), recursive=False)  # what a killed fetch of dest left
    tmp = temp_path(dest)  # <name>.tmp-<pid>: two fetches of one file never share a temp
    note = _resumed(res)
    if isinstance(bf.post, Gzip):
        tool = _gzip_like_collector(raw, tmp, bf.post)
        got = file_digest(tmp)
        if got != bf.sha256:
            if _gunzip_sha256(tmp) != bf.post.content_sha256:
                tmp.unlink(missing_ok=True)
                raise ChecksumMismatch(url, dest, "sha256", bf.sha256, got)
            note = f"content verified; compressed bytes differ from the pin ({tool} instead of GNU gzip -9)"
    else:
        with open(raw, "rb") as fin, open(tmp, "wb") as fout:
            for i, line in enumerate(fin):
                if i >= bf.post.n:
                    break
                fout.write(line)
        got = file_digest(tmp)
        if got != bf.sha256:
            tmp.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)
            raise ChecksumMismatch(url, dest, "sha256", bf.sha256, got)
    os.replace(tmp, dest)
    write_json_atomic(meta_path(dest), {
        **res.meta, "path": dest.name, "size": dest.stat().st_size, "checksums": {"sha256": got},
        "verified": ["sha256"], "source": source, "post": str(bf.post),
        "upstream": {"size": res.size, "checksums": res.checksums},
    })
    shutil.rmtree(work, ignore_errors=True)
    return FetchedFile(bf, dest, "downloaded", dest.stat().st_size, note)


def _resumed(res: DownloadResult) -> str:
    return f"resumed at byte {res.resumed_from:,}" if res.resumed_from else ""


def fetch_datasets(names: Iterable[str], root: Path, *, mirror: str | None = None, progress: bool = True,
                   on_file: Callable[[FetchedFile], None] | None = None,
                   kb_sample: bool = False) -> dict[str, list[FetchedFile]]:
    """Fetch every file of the given datasets (and of the sample KB) into ``root``.

    Args:
        names: Registered dataset names (validated before anything is downloaded).
        root: Data root to write into (created).
        mirror: Mirror base URL (``None``: ``LINKEDQA_MIRROR`` or the official locations).
        progress: Progress bars on a terminal.
        on_file: Called after each file (for progress lines).
        kb_sample: Also fetch ``SAMPLE_KB_FILES`` (reported under ``SAMPLE_KB``).

    Returns:
        Dataset name (or ``SAMPLE_KB``) -> outcome per file.

    Raises:
        tasks.datasets.registry.UnknownDataset, NotFetchable: Before any download.
        tasks.fetch.http.FetchError: On the first file that fails (files already done stay; a re-run skips them).
    """
    return fetch_groups(file_groups(names, kb_sample), root, mirror=mirror, progress=progress, on_file=on_file)


def file_groups(names: Iterable[str], kb_sample: bool = False) -> dict[str, list[BenchmarkFile]]:
    """Dataset name (and ``SAMPLE_KB``) -> its registered files.

    Raises:
        tasks.datasets.registry.UnknownDataset, NotFetchable: For a name that cannot be fetched.
    """
    groups = {name: dataset_files(name) for name in names}
    if kb_sample:
        groups[SAMPLE_KB] = [FILES[p] for p in SAMPLE_KB_FILES]
    return groups


def fetch_groups(groups: dict[str, list[BenchmarkFile]], root: Path, *, mirror: str | None = None,
                 progress: bool = True, on_file: Callable[[FetchedFile], None] | None = None
                 ) -> dict[str, list[FetchedFile]]:
    """Fetch every file of every group into ``root``; a file shared by groups is fetched once."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    done: dict[str, FetchedFile] = {}
    out: dict[str, list[FetchedFile]] = {}
    for name, files in groups.items():
        out[name] = []
        for bf in files:
            if bf.path not in done:
                done[bf.path] = fetch_benchmark_file(bf, root, mirror=mirror, progress=progress)
                if on_file:
                    on_file(done[bf.path])
            out[name].append(done[bf.path])
    return out


def missing_files(paths: Iterable[str], root: Path) -> list[str]:
    """The registered files among ``paths`` that are not under ``root`` (existence only; a fetch verifies)."""
    return [p for p in paths if not (Path(root) / p).is_file()]


# ------------------------------------------------------------------------------------- Wikimedia dumps
_DATE = re.compile(r"^\d{8}$")
_WIKI = re.compile(r"^[a-z][a-z0-9_]*wiki$")
_INDEX_DATE = re.compile(r'href="(?:\./)?(\d{8})/?"')
_SUMS_LINE = re.compile(r"^([0-9a-fA-F]{32}|[0-9a-fA-F]{40}|[0-9a-fA-F]{64})\s+\*?(\S.*?)\s*$")


@dataclass(frozen=True)
class DumpUrls:
    """Official URLs of one dated dump file.

    Attributes:
        kind: ``wikidata`` or the wiki name (``enwiki``).
        date: ``YYYYMMDD``.
        file_name: The dump file's name (carries the date).
        dump: URL of the dump file.
        sha1sums: URL of the published sha1 sums of that date.
        md5sums: URL of the published md5 sums of that date.
        index: URL of the listing of dated folders (used to resolve ``latest``).
        latest_alias: Wikimedia's undated ``latest`` URL of the same dump (never downloaded: not pinned).
    """

    kind: str
    date: str
    file_name: str
    dump: str
    sha1sums: str
    md5sums: str
    index: str
    latest_alias: str


def check_date(date: str) -> str:
    """Validate a ``YYYYMMDD`` dump date.

    Raises:
        ValueError: When it is not a real calendar date in that form.
    """
    if not _DATE.match(date or ""):
        raise ValueError(f"dump date must be 'latest' or YYYYMMDD, got {date!r}")
    try:
        datetime.strptime(date, "%Y%m%d")
    except ValueError:
        raise ValueError(f"dump date {date!r} is not a calendar date (YYYYMMDD)") from None
    return date


def wikidata_dump_urls(date: str) -> DumpUrls:
    """URLs of the Wikidata JSON dump of ``date``.

    Example: ``wikidata_dump_urls("20250101").dump`` is
    ``https://dumps.wikimedia.org/wikidatawiki/entities/20250101/wikidata-20250101-all.json.gz``.
    """
    check_date(date)
    folder = f"{DUMPS_BASE}/wikidatawiki/entities"
    return DumpUrls(
        kind="wikidata",
        date=date,
        file_name=f"wikidata-{date}-all.json.gz",
        dump=f"{folder}/{date}/wikidata-{date}-all.json.gz",
        sha1sums=f"{folder}/{date}/wikidata-{date}-sha1sums.txt",
        md5sums=f"{folder}/{date}/wikidata-{date}-md5sums.txt",
        index=f"{folder}/",
        latest_alias=f"{folder}/latest-all.json.gz",
    )


def wikipedia_dump_urls(wiki: str, date: str) -> DumpUrls:
    """URLs of a Wikipedia ``pages-articles-multistream.xml.bz2`` dump.

    Example: ``wikipedia_dump_urls("enwiki", "20250101").dump`` is
    ``https://dumps.wikimedia.org/enwiki/20250101/enwiki-20250101-pages-articles-multistream.xml.bz2``.
    """
    if not _WIKI.match(wiki or ""):
        raise ValueError(f"wiki must look like 'enwiki' (language code + 'wiki'), got {wiki!r}")
    check_date(date)
    folder = f"{DUMPS_BASE}/{wiki}"
    name = f"{wiki}-{date}-pages-articles-multistream.xml.bz2"
    return DumpUrls(
        kind=wiki,
        date=date,
        file_name=name,
        dump=f"{folder}/{date}/{name}",
        sha1sums=f"{folder}/{date}/{wiki}-{date}-sha1sums.txt",
        md5sums=f"{folder}/{date}/{wiki}-{date}-md5sums.txt",
        index=f"{folder}/",
        latest_alias=f"{folder}/latest/{wiki}-latest-pages-articles-multistream.xml.bz2",
    )


def parse_sums(text: str) -> dict[str, str]:
    """Parse a Wikimedia ``*-md5sums.txt`` / ``*-sha1sums.txt`` file (``<hex>  <filename>`` per line).

    Returns:
        File name -> lower-case hex digest; blank and malformed lines are ignored.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _SUMS_LINE.match(line.strip())
        if m:
            out[m.group(2)] = m.group(1).lower()
    return out


def _urls(kind: str, date: str) -> DumpUrls:
    return wikidata_dump_urls(date) if kind == "wikidata" else wikipedia_dump_urls(kind, date)


def _published_checksum(urls: DumpUrls, mirror: str | None) -> tuple[str, str, str] | None:
    """(algorithm, hex digest, sums URL) published for the dump file, or ``None`` when no sums file lists it.

    Raises:
        DumpNotFound: When neither sums file exists (no dump folder of that date).
    """
    missing = 0
    for algo, sums_url in (("sha1", urls.sha1sums), ("md5", urls.md5sums)):
        url = mirror_url(sums_url, mirror)
        try:
            sums = parse_sums(get_text(url))
        except DownloadError as exc:
            if exc.status == 404:
                missing += 1
                continue
            raise
        if urls.file_name in sums:
            return algo, sums[urls.file_name], url
    if missing == 2:
        raise DumpNotFound(mirror_url(urls.sha1sums, mirror), 404,
                           f"no {urls.kind} dump dated {urls.date} (see {mirror_url(urls.index, mirror)})")
    return None


def resolve_latest(kind: str, mirror: str | None = None, max_tries: int = 10) -> tuple[str, tuple[str, str, str]]:
    """The newest date whose published sums list the dump file (an unfinished dump run is skipped).

    Args:
        kind: ``wikidata`` or a wiki name (``enwiki``).
        mirror: Mirror base URL.
        max_tries: Dated folders to look into, newest first.

    Returns:
        ``(YYYYMMDD, (algorithm, hex digest, sums URL))``.

    Raises:
        DumpNotFound: When no recent folder has a complete dump.
    """
    index = mirror_url(_urls(kind, "20000101").index, mirror)
    dates = sorted({d for d in _INDEX_DATE.findall(get_text(index)) if _valid_date(d)}, reverse=True)
    for date in dates[:max_tries]:
        try:
            found = _published_checksum(_urls(kind, date), mirror)
        except DumpNotFound:
            continue
        if found:
            return date, found
    raise DumpNotFound(index, None, f"no complete {kind} dump among the {min(len(dates), max_tries)} newest dated "
                                    "folders of the index")


def _valid_date(d: str) -> bool:
    try:
        check_date(d)
    except ValueError:
        return False
    return True


def _download_dump(kind: str, date: str, to: Path, mirror: str | None, progress: bool) -> DownloadResult:
    requested = date
    if date == "latest":
        date, found = resolve_latest(kind, mirror)
    else:
        check_date(date)
        found = _published_checksum(_urls(kind, date), mirror)
    urls = _urls(kind, date)
    if found is None:
        raise DumpNotFound(mirror_url(urls.dump, mirror), None,
                           f"the {date} sums files do not list {urls.file_name} (dump unfinished or not produced)")
    algo, digest, sums_url = found
    dest = Path(to) / "dumps" / date / urls.file_name
    info = {"dump": kind, "date": date, "requested": requested, "sums_url": sums_url, "official_url": urls.dump}
    res = download(mirror_url(urls.dump, mirror), dest, progress=progress, **{f"expected_{algo}": digest},
                   extra_meta=info)
    # already present and verified: describe this request (the sidecar keeps the first download's details)
    return replace(res, meta={**res.meta, **info}) if res.skipped else res


def download_wikidata_dump(date: str, to: Path, *, mirror: str | None = None, progress: bool = True
                           ) -> DownloadResult:
    """Download and verify ``wikidata-<date>-all.json.gz`` into ``<to>/dumps/<date>/``.

    Args:
        date: ``latest`` (resolved to the newest complete dump) or ``YYYYMMDD``.
        to: Base folder.
        mirror: Mirror base URL.
        progress: Progress bar on a terminal.

    Returns:
        The download result (``.path`` carries the date; ``.meta['date']``).

    Raises:
        ValueError: Malformed date.
        DumpNotFound: No dump of that date.
        tasks.fetch.http.DownloadError, tasks.fetch.http.ChecksumMismatch: Download failures.
    """
    return _download_dump("wikidata", date, to, mirror, progress)


def download_wikipedia_dump(wiki: str, date: str, to: Path, *, mirror: str | None = None, progress: bool = True
                            ) -> DownloadResult:
    """Download and verify ``<wiki>-<date>-pages-articles-multistream.xml.bz2`` into ``<to>/dumps/<date>/``.

    Args:
        wiki: Wiki name, e.g. ``enwiki``.
        date: ``latest`` or ``YYYYMMDD``.
        to: Base folder.
        mirror: Mirror base URL.
        progress: Progress bar on a terminal.

    Returns:
        The download result.

    Raises:
        ValueError: Malformed wiki name or date.
        DumpNotFound: No dump of that date.
        tasks.fetch.http.DownloadError, tasks.fetch.http.ChecksumMismatch: Download failures.
    """
    if not _WIKI.match(wiki or ""):
        raise ValueError(f"wiki must look like 'enwiki' (language code + 'wiki'), got {wiki!r}")
    return _download_dump(wiki, date, to, mirror, progress)


# ------------------------------------------------------------------------------------------- registry
# Generated from ../shared/data/SOURCES.md (repository, commit, path) and the files in ../shared/data (sha256);
# tests/flows/test_fetch.py checks both against the current files.
_TRUSTMARGIN = Repo("mojixu/TrustMargin", "c32b1143e6a9a7e9eac7e885dd32da51b345702a")
_GCN_ALIGN = Repo("1049451037/GCN-Align", "4fc90c438e5a609b96df03daff170fbcf03fde94")
_LONGTAILQA_BENCHMARK = Repo("williamx854/LongTailQA-Benchmark", "c5c5eb1be458bf749626fa0467cd4ccfa28f5858")
_ENTITYQUESTIONS = Repo("princeton-nlp/EntityQuestions", "e55d22150ccf324692de329e4e8efcbe7f767f75")
_ENTITYQUESTIONS_2 = Repo("princeton-nlp/EntityQuestions", "409520a32b03cab0cb3bb013a5885c89d174a631")
_CHATBOT = Repo("aanchal0431/chatbot", "8a0ab07dfdd7520322bdb6e9d979962556445feb")
_IFT6759 = Repo("marca116/IFT6759", "88d46cc0c48b1adf456e60dea15a32be28d0e5a8")
_QALD_10 = Repo("KGQA/QALD-10", "89caa86371c7a65c6c87a64e0eeaa0e247ff5fe5")
_MST5 = Repo("dice-group/MST5", "e966a09f73e736ab4275cb6b7ff9af36e211e802")
_FAITHFUL_COT = Repo("veronica320/Faithful-COT", "301784317c99cf348cfad92a1b3e8810900e095b")
_TOG = Repo("IDEA-FinAI/ToG", "7ccbb92e17579f934bb778386230de47eca0ab67")
_BENCHDRIFT = Repo("IBM/BenchDrift", "bcf34da77f7a224a89a3cd5720b32c15fc0bb601")
_TRIVIAQA = Repo("mandarjoshi90/triviaqa", "b2c0046463fa1fec6105071739bdb62ef16f4ea7")
_PNEL = Repo("debayan/pnel", "ccd491789c8f5a48acbd56f0cb82c7f3ef0f6e5b")
_AOG = Repo("xuduyinuo/AoG", "ef6b7ffd8bf3f57ead6f7edf65e0b829d2c58f34")
_GRASP = Repo("Wangshuaiia/GraSP", "0b7d63cddc1afba9df440ac4741b589bb77cdfc9")
_WIKIDATA_SIMPLEQUESTIONS = Repo("askplatypus/wikidata-simplequestions", "df69267f1db4f85a71325e7e8c06e192bcaf0b0e")

FILES: dict[str, BenchmarkFile] = {f.path: f for f in (
    # path under the data root, source, path in the source repository, sha256 on disk[, post-processing]
    BenchmarkFile("2wikimultihopqa/dev.json", _TRUSTMARGIN,
                  "data/2wikimultihopqa/dev.json",
                  "ecfa6ab37e092281fe672dec973f08aee6a588de81a9c4675a392cf87f001e5b"),
    BenchmarkFile("dbp15k/fr_en/ent_ids_1.gz", _GCN_ALIGN,
                  "data/fr_en/ent_ids_1",
                  "c98a5df2692acca21de0111d92e37f69f32989f1acbb65d9c080ea18f236f328",
                  post=Gzip("ent_ids_1", 1795325418,
                            "8c5c96ba6ef3b3a7791f2ee33e0a779049e4fee36aac77c813814964a23b4401")),
    BenchmarkFile("dbp15k/fr_en/ent_ids_2.gz", _GCN_ALIGN,
                  "data/fr_en/ent_ids_2",
                  "7570d22047a9f6bc613930d5d5ba9518f7ee0367254fc8f816b62e9543c523bc",
                  post=Gzip("ent_ids_2", 1795325418,
                            "9e14e2ae75c45d18fc1fd310657dfd2b84925e625ceb89f96b7775f6218e042c")),
    BenchmarkFile("dbp15k/fr_en/ref_ent_ids.gz", _GCN_ALIGN,
                  "data/fr_en/ref_ent_ids",
                  "5b96bc0732ea12bbf970671635ca92ffee5f22a8458d540f680b9d666b28096b",
                  post=Gzip("ref_ent_ids", 1795325418,
                            "ba1c4b07e67ab2581d6ca11038e9f527b08666fe5bedad3a95cb7f61579a3c64")),
    BenchmarkFile("dbp15k/fr_en/triples_1.gz", _GCN_ALIGN,
                  "data/fr_en/triples_1",
                  "11da03dd576b73625ef28b338c815a07e03c10be39bc561edee8bb6bfe08b7b8",
                  post=Gzip("triples_1", 1795325418,
                            "318c50b356055ccfdbb98d6733ecb8213b3f0ee8f2222cd9733e2d6ef04f5718")),
    BenchmarkFile("dbp15k/fr_en/triples_2.gz", _GCN_ALIGN,
                  "data/fr_en/triples_2",
                  "e2c1902b845f9a9d95f22e93fac03e326058a7f42dd59ea6859040649c5743a6",
                  post=Gzip("triples_2", 1795325418,
                            "38508926b2e93dae9bb9b066e308cbb11545e62fa93239b574b53f496aeb2f1c")),
    BenchmarkFile("dbp15k/ja_en/ent_ids_1.gz", _GCN_ALIGN,
                  "data/ja_en/ent_ids_1",
                  "46a23f4d49f194ac88b4b7d6383d81ca4192b31c11b245056c3f6a36a2e0ebbc",
                  post=Gzip("ent_ids_1", 1795325418,
                            "c0163c3e4d1a1173fde4941c6c3752e659ff54c50149fbe8776e10c78077f1ad")),
    BenchmarkFile("dbp15k/ja_en/ent_ids_2.gz", _GCN_ALIGN,
                  "data/ja_en/ent_ids_2",
                  "121df3e7925da4592e652e2b2a4cef85eb33b3a5d8eac10f65da837e72b1e5ed",
                  post=Gzip("ent_ids_2", 1795325418,
                            "b6e8aa468861daa932f5bbb50c4743273418331839543de8889b13cc267a84a2")),
    BenchmarkFile("dbp15k/ja_en/ref_ent_ids.gz", _GCN_ALIGN,
                  "data/ja_en/ref_ent_ids",
                  "d69da6f0726e96a212b73f96f4e203933af272804b14555fd23223fb6296f232",
                  post=Gzip("ref_ent_ids", 1795325418,
                            "60edbd1d05d65e80cc81957eb6efa06fa53901a2a3042cfb0a115abccb2dff91")),
    BenchmarkFile("dbp15k/ja_en/triples_1.gz", _GCN_ALIGN,
                  "data/ja_en/triples_1",
                  "0baf6b87b5963d096c8cb24b674dcb756ef23dd21e75a4001301990bd932cb68",
                  post=Gzip("triples_1", 1795325418,
                            "5c9396f4bc18f62f395bdea897228285be85f3590d89c336739877d7fc0eeae5")),
    BenchmarkFile("dbp15k/ja_en/triples_2.gz", _GCN_ALIGN,
                  "data/ja_en/triples_2",
                  "a2a676488b2aa129ffc3475af07d0d73b961fa8383c6630151b2c1c622661fa0",
                  post=Gzip("triples_2", 1795325419,
                            "aeb66ed5e3dd1588f4d7e2cae50bc930794dbc29063f71365242c924ae27c2d6")),
    BenchmarkFile("dbp15k/zh_en/ent_ids_1.gz", _GCN_ALIGN,
                  "data/zh_en/ent_ids_1",
                  "04c239f4d6f01461a22374985b9a6d175898204440d95ebbb278f0f38793135f",
                  post=Gzip("ent_ids_1", 1795325419,
                            "6d230db7922b58f6fe31fb75b478d5edcbb3cc7d3f76763b5af8232ff1940082")),
    BenchmarkFile("dbp15k/zh_en/ent_ids_2.gz", _GCN_ALIGN,
                  "data/zh_en/ent_ids_2",
                  "efce0498eb83936eb12fe85136e1c32af168ff0c0929dd1ed4bbd7f63bfcdec9",
                  post=Gzip("ent_ids_2", 1795325419,
                            "68d7cccc5334881d386094df3e4f9af479eedf3161ed00ec4d06e0685d510f69")),
    BenchmarkFile("dbp15k/zh_en/ref_ent_ids.gz", _GCN_ALIGN,
                  "data/zh_en/ref_ent_ids",
                  "cacb6832ed5694029e5e5243ca6ce01a0d250c5bb89aac7f88e395ec295bab5d",
                  post=Gzip("ref_ent_ids", 1795325419,
                            "f6fc5f4b4c162eb21119697561b38686c48935222c11d07f08edc6efc5414507")),
    BenchmarkFile("dbp15k/zh_en/triples_1.gz", _GCN_ALIGN,
                  "data/zh_en/triples_1",
                  "98538422df9ca4e50493fe1f201558e2117f19e6fe7618f47cdd1a2b9c791595",
                  post=Gzip("triples_1", 1795325419,
                            "5bd1df6af7b51a0bc1111809c980364455e42f2cc27946cd664861f0d95aafcb")),
    BenchmarkFile("dbp15k/zh_en/triples_2.gz", _GCN_ALIGN,
                  "data/zh_en/triples_2",
                  "5d773cdef2faecfde20b88843a4c6b9a0130de11e04ea819c48d62f8bf86bd0d",
                  post=Gzip("triples_2", 1795325419,
                            "bbab07e5d97247221d742a7ab4e14c20ffdb3125667b2bac2b317a714a07bc48")),
    BenchmarkFile("entityquestions/DisambEntityQA.csv.gz", _LONGTAILQA_BENCHMARK,
                  "Disambiguated_Datasets/DisambEntityQA.csv",
                  "67b72537439e8890bb1f899b76f29215472346562977baba11dca871174a3e3a",
                  post=Gzip("DisambEntityQA.csv", 1795325662,
                            "f4f9aaa727e0f360c8e1c759c1ad186e2086ff46b3f869f1a7bfa22d6d977d3e")),
    BenchmarkFile("entityquestions/relation_query_templates.json", _ENTITYQUESTIONS,
                  "relation_query_templates.json",
                  "15bd4638204cbd4edc740999af42041ccb00f2ccb56944ca38bd4e0daff9179f"),
    BenchmarkFile("entityquestions/test/P106.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P106.test.jsonl",
                  "eeac49087b33b01f9e542447bbe1a066f0bbda51ad9701657a6f7cadb2f89cfe"),
    BenchmarkFile("entityquestions/test/P112.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P112.test.jsonl",
                  "4e3ca739a3e542d8f0a1778c75cb3d0e362fb0312642eb56b0234bb9290efd9a"),
    BenchmarkFile("entityquestions/test/P127.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P127.test.jsonl",
                  "f90e1a898472d15fd98448f6bcbab56a7c90053888962c326a147fd033f8f544"),
    BenchmarkFile("entityquestions/test/P131.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P131.test.jsonl",
                  "6fd031132e863fd6de349ad63a2322cad8b6651f85188107b6f734806106a656"),
    BenchmarkFile("entityquestions/test/P136.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P136.test.jsonl",
                  "a48396c95311ba608e61ab824be0f00aaa46f9adf9c7054716f6742cf1747a68"),
    BenchmarkFile("entityquestions/test/P159.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P159.test.jsonl",
                  "00338b88a87ef85d8dba255c0a8ad5b462808d766d662b4b70695c03b15a15df"),
    BenchmarkFile("entityquestions/test/P17.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P17.test.jsonl",
                  "a78d24e2f6ca22bd36d40a4ece402bef82a38e77f06595455ca261b9cf4969b1"),
    BenchmarkFile("entityquestions/test/P170.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P170.test.jsonl",
                  "2c83a0150c573dfd3434e078e642b178fdfce1ed2e248dc354d2b5073c4314e8"),
    BenchmarkFile("entityquestions/test/P175.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P175.test.jsonl",
                  "240e717a8005a4e7c62145dcc0e218c3e6143d480f10250e57572c270c5a4991"),
    BenchmarkFile("entityquestions/test/P176.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P176.test.jsonl",
                  "7058ffb6388d614e4c99dff4675857c3493bc65f015b3a70b400295372766ecd"),
    BenchmarkFile("entityquestions/test/P19.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P19.test.jsonl",
                  "bc45a8b700e862ce3f2631b200766aebf5b30793e184f3df8d1718f79f04f804"),
    BenchmarkFile("entityquestions/test/P20.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P20.test.jsonl",
                  "1354b67c17f1250f11266fdbf5ebbb9d0b33fee7fd17a5d9125747a3fe3aa331"),
    BenchmarkFile("entityquestions/test/P26.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P26.test.jsonl",
                  "1e7884dfbc5dd6e0cc8bed11f3c0f2fc89ab2c1561be3ae30bb8e723ac839b52"),
    BenchmarkFile("entityquestions/test/P264.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P264.test.jsonl",
                  "c32cccbcd3d646cbb7f3d6c6ffe026eb246383ba5e16e084ed83a37c6c93c519"),
    BenchmarkFile("entityquestions/test/P276.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P276.test.jsonl",
                  "52dc149ff300443634756ba6040ad08ed7533013a5664e2953e655aba3a05652"),
    BenchmarkFile("entityquestions/test/P36.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P36.test.jsonl",
                  "029d9938a127c10f5c47a90f630d1e44911bfbaac15c9e858580d4bfc45c5525"),
    BenchmarkFile("entityquestions/test/P40.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P40.test.jsonl",
                  "a0d7ad45c2e837fdfdc3169064ece0de73152a337f788b3e2bde59b5b60aecaa"),
    BenchmarkFile("entityquestions/test/P407.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P407.test.jsonl",
                  "7489e767e586051c2fda0b1dc6d0f519b32bf400bc86547e90cd270b3ffe59ec"),
    BenchmarkFile("entityquestions/test/P413.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P413.test.jsonl",
                  "f61b1d8c4a8c9977cc0229a94f9d316393d50653cc5acaf31c12f29532e22b6c"),
    BenchmarkFile("entityquestions/test/P495.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P495.test.jsonl",
                  "7c6506093cbb26e7af8d0a1f3ca6bb7724e77c72528aeead65bc8ff84e3bc4f6"),
    BenchmarkFile("entityquestions/test/P50.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P50.test.jsonl",
                  "dceab0534ad612257fbdf4d03eda80ad1286714c904275d9a5d13c99b638edd7"),
    BenchmarkFile("entityquestions/test/P69.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P69.test.jsonl",
                  "3d8b64de22e7a0af3a88212964734aafe37b288abd81e64b093c9747d4350d58"),
    BenchmarkFile("entityquestions/test/P740.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P740.test.jsonl",
                  "50c011a70d980fa051c15c63689374c171ba36b39c99d476df08a1f843fd42b4"),
    BenchmarkFile("entityquestions/test/P800.test.jsonl", _ENTITYQUESTIONS_2,
                  "dataset/test/P800.test.jsonl",
                  "3c61e4b8c9c408ab002d36455934abee67094b65334b7993b92c2427971287a1"),
    BenchmarkFile("factoidqa-cmu/S08/question_answer_pairs.txt", _CHATBOT,
                  "Data/Question_Answer_Dataset_v1.2/S08/question_answer_pairs.txt",
                  "2c0ac34c20e7602aae1420785586ef5c66e01d731257da4c482079b5245511e6"),
    BenchmarkFile("factoidqa-cmu/S09/question_answer_pairs.txt", _CHATBOT,
                  "Data/Question_Answer_Dataset_v1.2/S09/question_answer_pairs.txt",
                  "d2072c2f64af6041bca612f12d21b4e5134e2a342d0e219f0f515d9ac33496cc"),
    BenchmarkFile("factoidqa-cmu/S10/question_answer_pairs.txt", _CHATBOT,
                  "Data/Question_Answer_Dataset_v1.2/S10/question_answer_pairs.txt",
                  "6866a14094b3046e8109d00a0f6606318fb394324a2bcee0a45b08af9ec6fae0"),
    BenchmarkFile("lcquad2-sample/train_lcquad2_final_1k.json.gz", _IFT6759,
                  "datasets/train_lcquad2_final_1k.json",
                  "ee7c43dff721f19fc9c9cd84ad7543b81b9885772af8b4fe66f36c3bb7168859",
                  post=Gzip("train_lcquad2_final_1k.json", 1795325160,
                            "d9c030899ec5c8ea0479ee3ffc4ced17a8b1f3c2a0c95b202cefecd6fb88724f")),
    BenchmarkFile("popqa/DisambPopQA.csv.gz", _LONGTAILQA_BENCHMARK,
                  "Disambiguated_Datasets/DisambPopQA.csv",
                  "af73926e6ade991988eee971922e75dcafbece6d71b0e4362d8444322fa1f873",
                  post=Gzip("DisambPopQA.csv", 1795325662,
                            "4ebbc53819310279f8bab48c00b0c1324f6defdd8f3d434e867e00069493ec03")),
    BenchmarkFile("qald-10/non_updated_answers/qald_10_test_final.json", _IFT6759,
                  "datasets/non_updated_answers/qald_10_test_final.json",
                  "70f696fbc9bacc31db3456dd457d971461005270f0e166ccd13b5f3130cceec5"),
    BenchmarkFile("qald-10/qald_10.json", _QALD_10,
                  "data/qald_10/qald_10.json",
                  "55720cbc9effb250f4b814a9c27ce5f5d61d863d5943bc8aa93773f6f761c6cc"),
    BenchmarkFile("qald-9-plus/qald_9_plus_train_final.json", _IFT6759,
                  "datasets/non_updated_answers/qald_9_plus_train_final.json",
                  "b051addddfa7080810c5d04bf67ed4e4d487bcbf43de01d7fba0a6c97972038c"),
    BenchmarkFile("qald-9-plus/qald_9_pp_test_wikidata_new.json.gz", _MST5,
                  "datasets/qald9plus/qald_9_pp_test_wikidata_new.json",
                  "1417d58ca048b42ed16866b10bedceadd79ff0323eaf21c01321079ab30f27ee",
                  post=Gzip("qald_9_pp_test_wikidata_new.json", 1795325151,
                            "1e1cc9396966bb7f23542234773d512d0c4613e09473590923263f7f93401941")),
    BenchmarkFile("strategyqa/dev.jsonl", _FAITHFUL_COT,
                  "data/StrategyQA/dev.jsonl",
                  "d2c542efad227d83bbb9195efd363cdac5ece515968ce5ea2e53b7ffe67bc87c"),
    BenchmarkFile("strategyqa/test.jsonl", _FAITHFUL_COT,
                  "data/StrategyQA/test.jsonl",
                  "eedbb008b5ab992985a08fff1b4dee2ee7e8c5c0f1e9cf57f6f179a5e629547f"),
    BenchmarkFile("tog-kgqa/WebQuestions.json.gz", _TOG,
                  "data/WebQuestions.json",
                  "c3595a9ea168b951b56b8901aa4f42208ad6caa8b02864de73c8cdf216e13d3d",
                  post=Gzip("WebQuestions.json", 1795325300,
                            "129c8b0e8a8fe09944fcf84f4623d89d5ebdcf7e3b0db562258e126a3bc2b495")),
    BenchmarkFile("tog-kgqa/cwq.json.gz", _TOG,
                  "data/cwq.json",
                  "06ce1f6f19bc45f09f91b3bc6604efeabb3af498bfd0276a11f84dd9bde98fc9",
                  post=Gzip("cwq.json", 1795325300,
                            "147e7e1ee5f73c1d9ceba7a031c23b27a1ecddd57c55efff4541f74da41e97df")),
    BenchmarkFile("tog-kgqa/graliqa.json.gz", _TOG,
                  "data/graliqa.json",
                  "0387df3acf5cd217a57dc5d53fd87b151da2aa9d9094d6baae73e1468eb33eae",
                  post=Gzip("graliqa.json", 1795325300,
                            "7233dd92c6ff93cf4e095ae1866ba23b2056dab029e5bd30636d81e997cbb940")),
    BenchmarkFile("tog-kgqa/qald_10-en.json", _TOG,
                  "data/qald_10-en.json",
                  "c75f4e7479c071285a427c17188bfd5457cc228e57ed5f4ec5430fe98ea22bdf"),
    BenchmarkFile("triviaqa/test.first100.jsonl", _BENCHDRIFT,
                  "data/triviaqa/test.jsonl",
                  "47ca07ef26f34af7dcac9b2ad701ba620d681745c52154882baa8df0b84890ce",
                  post=HeadLines(100)),
    BenchmarkFile("triviaqa/triviaqa_sample.json", _TRIVIAQA,
                  "samples/triviaqa_sample.json",
                  "2f46278e1f4f02ad57c9df690f5facec5e28972f9d15a5300cf8c84af3d201b1"),
    BenchmarkFile("webqsp-el/webqsp.dev.ids.json", _PNEL,
                  "eval/webqsp/input/webqsp.dev.ids.json",
                  "02f4b61a550209bfad94af9e32b993304ba600af1b7caa03ada8704f329c3d9f"),
    BenchmarkFile("webqsp-el/webqsp.test.entities.with_classes.json", _PNEL,
                  "eval/webqsp/input/webqsp.test.entities.with_classes.json",
                  "599a6de067b331d414ddab2fc85d705021f06b342d219b477687b284b3a4429c"),
    BenchmarkFile("webqsp-el/webqsp.train.entities.json", _PNEL,
                  "eval/webqsp/input/webqsp.train.entities.json",
                  "5d072321498b257f0b415acd46adc4aa7083d46e5272e57f978868146086a53b"),
    BenchmarkFile("webqsp-el/webqsp.train.ids.json", _PNEL,
                  "eval/webqsp/input/webqsp.train.ids.json",
                  "64cb83f721dff3f60688be1671ea6b0c994c125cb6311873ae539513773500a9"),
    BenchmarkFile("webqsp/WebQSP.json.gz", _AOG,
                  "data/WebQSP.json",
                  "3ddeed12120ea3be576c80aa499d7fc67c9ad8cb1a6544e19aa13ee28eaf2618",
                  post=Gzip("WebQSP.json", 1795325591,
                            "1bbf479f9f8fcddd2c67ce95b1d5166a53f68fa6c5c762154385023938510976")),
    BenchmarkFile("webqsp/sample100/WebQSP.json", _GRASP,
                  "data/WebQSP.json",
                  "8c14bd79c75e09f10067786efc00f73737d9562b1427f458c343dca9c3d9376e"),
    BenchmarkFile("wikidata-simplequestions/annotated_wd_data_test.txt", _WIKIDATA_SIMPLEQUESTIONS,
                  "annotated_wd_data_test.txt",
                  "61f3ebfce22390238aca34dee0788ccc70d66a16c8378a0193a4acb5e9f65e17"),
    BenchmarkFile("wikidata-simplequestions/annotated_wd_data_test_answerable.txt", _WIKIDATA_SIMPLEQUESTIONS,
                  "annotated_wd_data_test_answerable.txt",
                  "ed7e6ae299fa5cc170cc7b96411af6b66e2fbbfff068babee336474b7ce36666"),
    BenchmarkFile("wikidata-simplequestions/annotated_wd_data_train.txt.gz", _WIKIDATA_SIMPLEQUESTIONS,
                  "annotated_wd_data_train.txt",
                  "ef974a9ff7c2c60e55ce45114ae701de1df48381d28c64d0b1a9d57c78c09084",
                  post=Gzip("", 0,
                            "3a4f9f8d710deaa1777dc2b7c5fb4582136fe54b7b9e2b347c6fd91bf993d3f3")),
    BenchmarkFile("wikidata-simplequestions/annotated_wd_data_train_answerable.txt", _WIKIDATA_SIMPLEQUESTIONS,
                  "annotated_wd_data_train_answerable.txt",
                  "25c5994c4e3a4dad39bacf3c457b3ff4cf7b199630eb78045a0b478e4fda145b"),
    BenchmarkFile("wikidata-simplequestions/annotated_wd_data_valid.txt", _WIKIDATA_SIMPLEQUESTIONS,
                  "annotated_wd_data_valid.txt",
                  "38ba7ebcefbf7ec1712c52d2ace6c6b66f25fbfe86e2444aaedcfa05b8f22a05"),
    BenchmarkFile("wikidata-simplequestions/annotated_wd_data_valid_answerable.txt", _WIKIDATA_SIMPLEQUESTIONS,
                  "annotated_wd_data_valid_answerable.txt",
                  "1dffa967f15f2cb73ba7a50d3545f9585ef76b8722322e569cf54c9f9a1a9a48"),
    BenchmarkFile("wikipedia-vital-articles/vital_articles_entities_2019.csv.gz", _IFT6759,
                  "create_qald_dataset/vital_articles_entities_2019.csv",
                  "01d7114353ff08f7a76600309157cd5980b94b6988cfaf7f874b88e1f4733d06",
                  post=Gzip("vital_articles_entities_2019.csv", 1795325159,
                            "79b950bbbdb48ba1d8b3269a7773b2f7df50184f3064d56e31273b9c971562f8")),
)}

#: The pseudo-dataset name of the sample KB's inputs in ``linkedqa data fetch`` output.
SAMPLE_KB = "kb-sample"


def _sample_kb_pins() -> dict[str, BenchmarkFile]:
    """The sample KB's files that no benchmark loader reads, from ``kb_sample.tsv``."""
    out = {}
    for line in (Path(__file__).with_name("kb_sample.tsv")).read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        path, repo, commit, repo_path, sha, post = line.split("\t")
        gz = None
        if post:
            kind, name, mtime, content = post.split(":")
            if kind != "gzip":
                raise ValueError(f"kb_sample.tsv: {path}: unknown post-processing {post!r}")
            gz = Gzip(name, int(mtime), content)
        out[path] = BenchmarkFile(path, Repo(repo, commit), repo_path, sha, gz)
    return out


_SAMPLE_ONLY = _sample_kb_pins()
FILES.update(_SAMPLE_ONLY)

#: Every file ``linkedqa kb build --sample`` reads (``tasks.kb.plan.sample_inputs`` and the CMU articles it reads
#: through the FactoidQA question files), benchmark files included.
SAMPLE_KB_FILES: tuple[str, ...] = (
    *_SAMPLE_ONLY,
    "wikipedia-vital-articles/vital_articles_entities_2019.csv.gz",
    *(f"factoidqa-cmu/{y}/question_answer_pairs.txt" for y in ("S08", "S09", "S10")),
)

_EQ_RELATIONS = ("P106", "P112", "P127", "P131", "P136", "P159", "P17", "P170", "P175", "P176", "P19", "P20", "P26",
                 "P264", "P276", "P36", "P40", "P407", "P413", "P495", "P50", "P69", "P740", "P800")
# ToG-format loaders add out-of-KB questions from TriviaQA and 2Wiki (test-open split) ...
_OPEN_POOL = ("2wikimultihopqa/dev.json", "triviaqa/test.first100.jsonl", "triviaqa/triviaqa_sample.json")
# ... and webqsp / grailqa map Freebase MIDs to QIDs through ToG's topic-entity annotations.
_MID_QID = ("tog-kgqa/cwq.json.gz", "tog-kgqa/WebQuestions.json.gz", "webqsp/sample100/WebQSP.json")
_SQ = "wikidata-simplequestions/annotated_wd_data_"

DATASET_FILES: dict[str, tuple[str, ...]] = {
    "webqsp-el": ("webqsp-el/webqsp.test.entities.with_classes.json", "webqsp-el/webqsp.train.entities.json",
                  "webqsp-el/webqsp.dev.ids.json", "webqsp-el/webqsp.train.ids.json"),
    "qald-10": ("qald-10/qald_10.json", "qald-10/non_updated_answers/qald_10_test_final.json",
                "tog-kgqa/qald_10-en.json"),
    "qald-9-plus": ("qald-9-plus/qald_9_plus_train_final.json", "qald-9-plus/qald_9_pp_test_wikidata_new.json.gz"),
    "simplequestions-wd": tuple(f"{_SQ}{s}" for s in ("train.txt.gz", "valid.txt", "test.txt", "train_answerable.txt",
                                                        "valid_answerable.txt", "test_answerable.txt")),
    "lcquad2-sample": ("lcquad2-sample/train_lcquad2_final_1k.json.gz",),
    "entityquestions": ("entityquestions/relation_query_templates.json", "entityquestions/DisambEntityQA.csv.gz",
                        *(f"entityquestions/test/{p}.test.jsonl" for p in _EQ_RELATIONS)),
    "popqa": ("popqa/DisambPopQA.csv.gz",),
    "factoidqa": (*(f"factoidqa-cmu/{y}/question_answer_pairs.txt" for y in ("S08", "S09", "S10")),
                  "wikipedia-vital-articles/vital_articles_entities_2019.csv.gz"),
    "strategyqa": ("strategyqa/test.jsonl", "strategyqa/dev.jsonl"),
    "2wiki": ("2wikimultihopqa/dev.json",),
    "triviaqa": ("triviaqa/test.first100.jsonl", "triviaqa/triviaqa_sample.json"),
    "cwq": ("tog-kgqa/cwq.json.gz", *_OPEN_POOL),
    "webqsp": ("webqsp/WebQSP.json.gz", *_MID_QID, *_OPEN_POOL),
    "grailqa": ("tog-kgqa/graliqa.json.gz", *_MID_QID, *_OPEN_POOL),
    "webquestions": ("tog-kgqa/WebQuestions.json.gz", *_OPEN_POOL),
    **{f"dbp15k-{pair.replace('_', '-')}": tuple(f"dbp15k/{pair}/{f}.gz" for f in (
        "ent_ids_1", "ent_ids_2", "ref_ent_ids", "triples_1", "triples_2")) for pair in ("fr_en", "ja_en", "zh_en")},
}

#: Registered datasets without a public source to download (every registered dataset has one today).
NOT_FETCHABLE: dict[str, str] = {}
