"""Resumable, checksum-verified HTTP downloads.

Inputs: a URL, a destination path and (optionally) the expected sha1 / md5 / sha256 of the file.
Outputs: the verified file at ``dest`` (atomic rename from ``dest.part``), a sidecar ``dest.meta.json``
(url, size, checksums, fetched_at, etag / last-modified) and a ``DownloadResult``.

How a download proceeds:

* Bytes go to ``<dest>.part``. An existing ``.part`` (an earlier, interrupted run) is re-hashed and the rest is
  asked for with ``Range: bytes=N-`` (plus ``If-Range`` with the ETag / Last-Modified seen when the ``.part``
  was started, so a file changed upstream restarts from zero). ``206`` appends; a ``200`` to a range request
  means the server ignored the range, so the ``.part`` is truncated and the body written from byte 0;
  ``416`` with a complete ``.part`` goes straight to verification.
* Connection errors, timeouts, short bodies and 5xx / 408 / 429 answers are retried (``retries`` times, with
  backoff), each retry resuming from the bytes already on disk. Other HTTP errors fail at once.
* Checksums are computed while streaming. On a mismatch the ``.part`` is deleted (the next run starts over)
  and ``ChecksumMismatch`` is raised; ``dest`` is never touched before verification succeeded.
* The sidecar is the download's done marker (``storage.done``, under the name ``<dest>.meta.json``): written
  last, atomically, after ``dest`` is in place. Whether to skip is still decided by the checksums
  (``skip_existing``: ``dest`` matches every expected checksum); the ``.part`` is resume state, never swept, but
  the temp file of an interrupted sidecar write is.
* A progress bar (tqdm, on stderr) is shown only when stderr is a terminal and ``progress`` is true.

No Prefect here (library code): ``linkedqa data fetch`` / ``linkedqa kb download`` call it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
import urllib3
from tqdm import tqdm

from storage.done import mark_done, read_done, sweep_temps, write_json_atomic

__all__ = [
    "ChecksumMismatch",
    "DownloadError",
    "DownloadResult",
    "FetchError",
    "download",
    "file_digest",
    "get_text",
    "meta_path",
    "part_path",
]

USER_AGENT = "linkedqa-fetch/1 (https://github.com/; research benchmark downloader)"
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)")


class FetchError(Exception):
    """Base class of download failures (the CLI maps them to exit code 3)."""


class DownloadError(FetchError):
    """The file could not be downloaded (HTTP error status, connection failure, body shorter than announced).

    Attributes:
        url: The URL asked for.
        status: HTTP status of the last answer, or ``None`` when no answer came (connection failure).
    """

    def __init__(self, url: str, status: int | None, reason: str):
        self.url = url
        self.status = status
        self.reason = reason
        prefix = f"HTTP {status}" if status is not None else "download failed"
        super().__init__(f"{prefix} for {url}: {reason}" if reason else f"{prefix} for {url}")


class ChecksumMismatch(FetchError):
    """The downloaded bytes do not have the expected checksum (the ``.part`` has been deleted).

    Attributes:
        url: Where the bytes came from.
        path: The destination that was NOT written.
        algorithm: ``sha1``, ``md5`` or ``sha256``.
        expected: Expected hex digest.
        actual: Digest of what was received.
    """

    def __init__(self, url: str, path: Path, algorithm: str, expected: str, actual: str):
        self.url, self.path, self.algorithm, self.expected, self.actual = url, path, algorithm, expected, actual
        super().__init__(f"checksum mismatch for {path.name} from {url}: {algorithm} is {actual}, expected "
                         f"{expected}; the partial file was deleted, re-run to download it again")


@dataclass(frozen=True)
class DownloadResult:
    """What ``download`` did.

    Attributes:
        path: The verified file.
        url: The URL it came from.
        size: Bytes on disk.
        checksums: Hex digests by algorithm (always ``sha256``, plus those that were verified).
        verified: Algorithms checked against an expected value.
        resumed_from: Bytes already in the ``.part`` (from an earlier, interrupted run) when this call started.
        requests: Number of HTTP requests made (0 when the file was already present and verified).
        skipped: True when ``dest`` already existed with the expected checksum and nothing was downloaded.
        meta: The sidecar ``<dest>.meta.json`` content.
    """

    path: Path
    url: str
    size: int
    checksums: dict[str, str]
    verified: tuple[str, ...] = ()
    resumed_from: int = 0
    requests: int = 0
    skipped: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


def part_path(dest: Path) -> Path:
    """The in-progress file of ``dest``: ``<dest>.part``."""
    return dest.with_name(dest.name + ".part")


def meta_path(dest: Path) -> Path:
    """The sidecar metadata file of ``dest``: ``<dest>.meta.json``."""
    return dest.with_name(dest.name + ".meta.json")


def _state_path(dest: Path) -> Path:
    # validators (ETag / Last-Modified) of the response that started the .part, for If-Range on resume
    return dest.with_name(dest.name + ".part.json")


def file_digest(path: Path, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    """Hex digest of a whole file, streamed.

    Args:
        path: File to hash.
        algorithm: Any ``hashlib`` algorithm name.
        chunk: Read size in bytes.

    Returns:
        The hex digest.
    """
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def get_text(url: str, *, timeout: float = 30, retries: int = 3) -> str:
    """GET a small text resource (a checksum file, an index page).

    Args:
        url: The URL.
        timeout: Seconds per connect / read.
        retries: Extra attempts on connection errors and 5xx / 408 / 429.

    Returns:
        The decoded body.

    Raises:
        DownloadError: On an HTTP error status (after retries for the transient ones) or no connection.
    """
    last: DownloadError | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(min(2.0 ** (attempt - 1), 30.0) * 0.5)
        try:
            r = requests.get(url, timeout=timeout, headers={"User-Agent": USER_AGENT})
        except requests.RequestException as exc:
            last = DownloadError(url, None, _short(exc))
            continue
        if r.status_code == 200:
            return r.text
        last = DownloadError(url, r.status_code, r.reason or "")
        if r.status_code not in _RETRY_STATUS:
            raise last
    assert last is not None
    raise last


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]


def _expected(sha1: str | None, md5: str | None, sha256: str | None) -> dict[str, str]:
    out = {}
    for algo, value in (("sha1", sha1), ("md5", md5), ("sha256", sha256)):
        if value:
            value = value.strip().lower()
            if not re.fullmatch(r"[0-9a-f]+", value) or len(value) != hashlib.new(algo).digest_size * 2:
                raise ValueError(f"expected_{algo} is not a {algo} hex digest: {value!r}")
            out[algo] = value
    return out


def _hashers(expected: dict[str, str]) -> dict[str, Any]:
    return {algo: hashlib.new(algo) for algo in sorted({"sha256", *expected})}


def _rehash(path: Path, hashers: dict[str, Any], chunk: int) -> int:
    n = 0
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            for h in hashers.values():
                h.update(block)
            n += len(block)
    return n


def _fetched_digests(dest: Path, expected: dict[str, str], chunk: int) -> dict[str, str] | None:
    """Digests of ``dest`` when it exists and matches every expected checksum, else ``None``."""
    if not expected or not dest.is_file():
        return None
    hashers = _hashers(expected)
    _rehash(dest, hashers, chunk)
    digests = {a: h.hexdigest() for a, h in hashers.items()}
    return digests if all(digests[a] == v for a, v in expected.items()) else None


def _if_range(validators: dict[str, str]) -> str | None:
    # RFC 9110: If-Range takes a strong ETag or a date; a weak ETag would make every resume a full download
    etag = validators.get("etag") or ""
    if etag and not etag.startswith("W/"):
        return etag
    return validators.get("last_modified") or None


def _progress_bar(enabled: bool, total: int | None, initial: int, desc: str):

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024, desc=desc,
                file=sys.stderr, leave=False, disable=not (enabled and sys.stderr.isatty()))


def download(
    url: str,
    dest: Path | str,
    *,
    expected_sha1: str | None = None,
    expected_md5: str | None = None,
    expected_sha256: str | None = None,
    chunk: int = 1 << 20,
    retries: int = 3,
    timeout: float = 30,
    progress: bool = True,
    skip_existing: bool = True,
    extra_meta: dict[str, Any] | None = None,
) -> DownloadResult:
    """Download ``url`` to ``dest``, resuming a ``.part`` left by an earlier run, and verify it.

    Args:
        url: HTTP(S) URL.
        dest: Final path; parent folders are created.
        expected_sha1: Expected sha1 hex digest (Wikimedia ``*-sha1sums.txt``).
        expected_md5: Expected md5 hex digest (Wikimedia ``*-md5sums.txt``).
        expected_sha256: Expected sha256 hex digest (the benchmark registry's pins).
        chunk: Bytes per read / write.
        retries: Extra attempts after a transient failure; each resumes from the bytes on disk.
        timeout: Seconds per connect / read (not for the whole transfer).
        progress: Show a tqdm bar on stderr (only when stderr is a terminal).
        skip_existing: When ``dest`` exists and matches every expected checksum, return without a request.
        extra_meta: More keys for the sidecar ``<dest>.meta.json`` (e.g. the dump date).

    Returns:
        A ``DownloadResult``; the file is at ``dest``, ``<dest>.meta.json`` describes it.

    Raises:
        DownloadError: HTTP error status, connection failure or short body after all retries (the ``.part`` is
            kept, so the next call resumes).
        ChecksumMismatch: The received bytes do not match an expected checksum (the ``.part`` is deleted).
        ValueError: An expected checksum is not a hex digest of the right length.
    """
    dest = Path(dest)
    expected = _expected(expected_sha1, expected_md5, expected_sha256)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part, state = part_path(dest), _state_path(dest)

    if skip_existing and (digests := _fetched_digests(dest, expected, chunk)) is not None:
        meta = read_done(dest.parent, meta_path(dest).name) or {}
        return DownloadResult(dest, url, dest.stat().st_size, digests, tuple(sorted(expected)), skipped=True,
                              meta=meta)

    sweep_temps(dest.parent, (f"{meta_path(dest).name}.tmp-*",), recursive=False)  # a killed sidecar write
    hashers = _hashers(expected)
    have = _rehash(part, hashers, chunk) if part.is_file() else 0
    resumed_from = have
    validators: dict[str, str] = {}
    if have and state.is_file():
        try:
            validators = json.loads(state.read_text())
        except ValueError:
            validators = {}
    session = requests.Session()
    session.headers.update({"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
    n_requests, attempt, restarts = 0, 0, 0
    try:
        while True:
            headers = {}
            if have:
                headers["Range"] = f"bytes={have}-"
                if_range = _if_range(validators)
                if if_range:
                    headers["If-Range"] = if_range
            n_requests += 1
            error: DownloadError | None = None
            try:
                outcome = _fetch_once(session, url, part, state, hashers, have, headers, chunk, timeout, progress,
                                      dest.name, validators)
            except DownloadError as exc:
                error = exc
                outcome = "retry" if exc.status is None or exc.status in _RETRY_STATUS else "fail"
            # hashers always cover exactly the bytes in the .part (a network error happens between writes)
            have = part.stat().st_size if part.is_file() else 0
            if outcome == "done":
                break
            if outcome == "restart" and restarts < 2:
                restarts += 1  # the .part was discarded (range ignored / not satisfiable): not a retry
                hashers, have = _hashers(expected), 0
                continue
            if error is None:
                error = DownloadError(url, None, "the server did not honour the range request")
            if outcome != "retry" or attempt >= retries:
                raise error
            attempt += 1
            time.sleep(min(2.0 ** (attempt - 1), 30.0) * 0.25)
    finally:
        session.close()

    digests = {algo: h.hexdigest() for algo, h in hashers.items()}
    for algo, value in expected.items():
        if digests[algo] != value:
            part.unlink(missing_ok=True)
            state.unlink(missing_ok=True)
            raise ChecksumMismatch(url, dest, algo, value, digests[algo])
    size = part.stat().st_size
    os.replace(part, dest)
    state.unlink(missing_ok=True)
    meta = {
        "url": url,
        "path": dest.name,
        "size": size,
        "checksums": digests,
        "verified": sorted(expected),
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **({"etag": validators["etag"]} if validators.get("etag") else {}),
        **({"last_modified": validators["last_modified"]} if validators.get("last_modified") else {}),
        **(extra_meta or {}),
    }
    mark_done(dest.parent, meta, meta_path(dest).name)  # last: the download is complete
    return DownloadResult(dest, url, size, digests, tuple(sorted(expected)), resumed_from, n_requests, meta=meta)


def _fetch_once(session: requests.Session, url: str, part: Path, state: Path, hashers: dict[str, Any], have: int,
                headers: dict[str, str], chunk: int, timeout: float, progress: bool, desc: str,
                validators: dict[str, str]) -> str:
    """One HTTP request; returns ``done``, ``restart`` (the .part was discarded) or ``retry``.

    Raises:
        DownloadError: HTTP error status or no answer (the caller decides whether to retry).
    """
    try:
        r = session.get(url, headers=headers, stream=True, timeout=timeout)
    except requests.RequestException as exc:
        raise DownloadError(url, None, _short(exc)) from exc
    with r:
        if r.status_code == 416 and have:
            m = _UNSATISFIED_RANGE.search(r.headers.get("Content-Range", ""))
            if m and int(m.group(1)) == have:
                return "done"  # the .part already holds the whole file: verify it
            part.unlink(missing_ok=True)  # longer than the remote file: start over
            state.unlink(missing_ok=True)
            return "restart"
        if r.status_code not in (200, 206):
            raise DownloadError(url, r.status_code, r.reason or "")
        offset, total = 0, None
        if r.status_code == 206:
            m = _CONTENT_RANGE.search(r.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != have:
                part.unlink(missing_ok=True)  # a range we did not ask for: do not splice it in
                state.unlink(missing_ok=True)
                return "restart"
            offset = have
            total = int(m.group(3)) if m.group(3) != "*" else None
        else:
            length = r.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            if have:
                # The server ignored the Range header (or the file changed: If-Range): rewrite from byte 0.
                for algo in list(hashers):
                    hashers[algo] = hashlib.new(algo)
        if offset == 0:
            validators.clear()
            if r.headers.get("ETag"):
                validators["etag"] = r.headers["ETag"]
            if r.headers.get("Last-Modified"):
                validators["last_modified"] = r.headers["Last-Modified"]
            write_json_atomic(state, dict(validators))
        written = offset
        try:
            with open(part, "r+b" if offset else "wb") as fh, _progress_bar(progress, total, offset, desc) as bar:
                fh.seek(offset)
                fh.truncate()
                for block in _body(r, chunk):
                    fh.write(block)
                    for h in hashers.values():
                        h.update(block)
                    written += len(block)
                    bar.update(len(block))
        except (requests.RequestException, urllib3.exceptions.HTTPError, ConnectionError, TimeoutError) as exc:
            raise DownloadError(url, None, f"connection lost after {written:,} bytes ({_short(exc)})") from exc
        if total is not None and written < total:
            raise DownloadError(url, None, f"body ended after {written:,} of {total:,} bytes")
        return "done"


def _body(r: requests.Response, chunk: int) -> Iterator[bytes]:
    """The response body in blocks, as sent.

    Read from the raw stream so that the bytes received before a connection drop are handed out (and written to
    the ``.part``) before the error is raised; ``iter_content`` would buffer up to a full chunk and lose them.
    A body the server compressed despite ``Accept-Encoding: identity`` is decoded.
    """
    if r.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity"):
        yield from (b for b in r.iter_content(chunk_size=chunk) if b)
        return
    while block := r.raw.read(chunk, decode_content=False):
        yield block
