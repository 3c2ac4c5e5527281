"""Shared contract of the streaming dump readers.

Inputs: a file path and a ``Shard`` (which byte range or line range of it to read).
Outputs: an iterator of ``(table, row)`` pairs, where ``table`` is a name from ``storage.schemas`` (``entities``,
``aliases``, ``labels``, ``claims``, ``properties``, ``articles``, ``redirects``, ``passages``, ``rejects``) and
``row`` a dict with exactly that table's columns. Readers never hold a whole file in memory. On request
(``blocks=True``) a reader may yield a ``RowBlock`` instead of a dict: many rows of one table as equal-length
columns, the bulk form used on the KB build's hot path (one object per entity instead of one dict per label).

Bad records become ``rejects`` rows (source_file, offset, line, reason, first 200 bytes); a truncated compressed
stream or unreadable file raises ``DumpError`` naming the file and offset, so nothing partial is published.

Sharding: a plain line file is split into byte ranges; a multistream ``.bz2`` file at its bzip2 stream starts,
found without decompressing it (``tasks.dumps.bz2streams``); any other ``.gz``/``.bz2`` line file is split like
a plain one over its decompressed bytes, read through a persisted seek index (``tasks.dumps.seekable``); a
``.xz`` file is one single-stream shard.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.dumps.bz2streams import boundary, open_streams, stream_cuts
from tasks.dumps.errors import DumpError
from tasks.dumps.seekable import open_at, seek_index, seekable
from tasks.progress import active_byte_counter

Row = dict[str, Any]
TableRow = tuple[str, Row]


@dataclass(frozen=True, slots=True)
class RowBlock:
    """Rows of one table as equal-length columns (``{column: [values...]}``, exactly the table's columns).

    Example:
        >>> list(RowBlock({"qid": ["Q1", "Q1"], "lang": ["en", "fr"], "label": ["x", "y"]}).rows())[1]
        {'qid': 'Q1', 'lang': 'fr', 'label': 'y'}
    """

    columns: dict[str, list]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), ()))

    def rows(self) -> Iterator[Row]:
        """The block as row dicts, in order."""
        names = list(self.columns)
        for values in zip(*self.columns.values(), strict=True):
            yield dict(zip(names, values, strict=True))


@dataclass(frozen=True)
class Shard:
    """A contiguous slice of one input file.

    For plain (uncompressed) line files it is a byte range ``[start, end)``: the reader skips the partial first
    line (unless start == 0) and reads the line that crosses ``end``, so shards tile the file exactly.
    A ``.gz``/``.bz2`` file is sharded the same way over its decompressed bytes when ``seek_index`` names its
    seek index (``tasks.dumps.seekable``; ``end`` is then the decompressed size for the last shard). Without
    an index a compressed stream is read from its start, by line number ``[start, end)`` (``by_lines=True``;
    each shard decompresses and skips up to its start): the single-stream path, and the only one for ``.xz``.
    A multistream ``.bz2`` file is cut at its bzip2 stream boundaries instead, with no seek index
    (``streams=True``, ``tasks.dumps.bz2streams``): ``start``/``end`` are then compressed offsets of stream
    starts, and the reader learns where ``end`` falls in decompressed bytes as it gets there.

    Attributes:
        index: Shard number, 0-based.
        count: Number of shards of this file.
        start: First byte (or line) of the shard.
        end: End byte (or line), exclusive; ``None`` means end of file.
        by_lines: Whether start/end count lines instead of bytes.
        seek_index: Seek index file of a compressed file sharded by decompressed byte range.
        streams: ``start``/``end`` are compressed offsets of bzip2 stream starts (a multistream ``.bz2``).
    """

    index: int = 0
    count: int = 1
    start: int = 0
    end: int | None = None
    by_lines: bool = False
    seek_index: str | None = None
    streams: bool = False


_COUNTED_BUFFER = 64 << 10  # bytes per buffer fill (= per counter update) of a counted file


class _CountingRaw(io.RawIOBase):
    """A raw file that adds every byte it reads from disk to a :class:`tasks.progress.ByteCounter`.

    Sits under the ``BufferedReader`` (and decompressor), so it runs once per buffer fill, never per line.
    """

    def __init__(self, path: Path, counter: Any):
        self._raw = io.FileIO(path, "rb")
        self._counter = counter

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._raw.seekable()

    def readinto(self, b: Any) -> int | None:
        n = self._raw.readinto(b)
        if n:
            self._counter.bytes += n
        return n

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        return self._raw.seek(pos, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        self._raw.close()
        super().close()


class _ClosesOwned:
    """Mixin of the decompressing readers below: closing the reader also closes the file it was opened on."""

    _owned: io.BufferedReader

    def close(self) -> None:
        try:
            super().close()  # type: ignore[misc]
        finally:
            self._owned.close()


class _OwningGzip(_ClosesOwned, gzip.GzipFile):
    def __init__(self, fh: io.BufferedReader):
        super().__init__(fileobj=fh, mode="rb")
        self._owned = fh


class _OwningBZ2(_ClosesOwned, bz2.BZ2File):
    def __init__(self, fh: io.BufferedReader):
        super().__init__(fh, "rb")
        self._owned = fh


class _OwningLZMA(_ClosesOwned, lzma.LZMAFile):
    def __init__(self, fh: io.BufferedReader):
        super().__init__(fh, "rb")
        self._owned = fh


def open_text_stream(path: Path) -> io.BufferedIOBase:
    """Open plain, .gz, .bz2 or .xz files as a binary stream of the decompressed bytes.

    While :func:`tasks.progress.count_reads` is active in the calling thread, the bytes read from disk
    (compressed bytes for compressed files) are added to its counter (once per 64 KiB buffer fill).
    """
    counter = active_byte_counter()
    if counter is not None:
        return _open_counted(Path(path), counter)
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".bz2"):
        return bz2.open(path, "rb")
    if name.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def read_whole(path: Path) -> bytes:
    """The decompressed bytes of a whole file (plain, .gz, .bz2, .xz) read through :func:`open_text_stream`.

    For the inputs that are one JSON document rather than lines (a property list, a labels map, one entity).

    Raises:
        DumpError: When the file cannot be read or decompressed (the file named, with the cause).
    """
    try:
        with open_text_stream(path) as fh:
            return fh.read()
    except (EOFError, OSError) as exc:
        raise DumpError(f"{path}: unreadable: {exc}") from exc


def _open_counted(path: Path, counter: Any) -> io.BufferedIOBase:
    fh = io.BufferedReader(_CountingRaw(path, counter), buffer_size=_COUNTED_BUFFER)
    name = path.name.lower()
    try:
        if name.endswith(".gz"):
            return _OwningGzip(fh)
        if name.endswith(".bz2"):
            return _OwningBZ2(fh)
        if name.endswith(".xz"):
            return _OwningLZMA(fh)
    except BaseException:
        fh.close()
        raise
    return fh


def is_compressed(path: Path) -> bool:
    """Whether the file is a compressed stream (sharded by lines, not bytes)."""
    return path.name.lower().endswith((".gz", ".bz2", ".xz"))


def reject(source_file: Path | str, reason: str, raw: bytes | str | None, offset: int | None = None,
           line: int | None = None, stage: str = "") -> TableRow:
    """Build a ``rejects`` row (first 200 bytes of the record, decoded leniently)."""
    if isinstance(raw, bytes):
        snippet = raw[:200].decode("utf-8", errors="replace")
    else:
        snippet = (raw or "")[:200]
    return (
        "rejects",
        {"source_file": str(source_file), "offset": offset, "line": line, "reason": reason,
         "snippet": snippet, "stage": stage},
    )


def open_shard(path: Path, shard: Shard) -> io.BufferedIOBase:
    """Open the stream a shard reads: the decompressed bytes, seekable to ``shard.start`` where it is a byte range.

    A byte range of a ``.gz``/``.bz2`` file reads through the file's seek index (``shard.seek_index``); a shard cut
    at bzip2 stream boundaries (``shard.streams``) decodes from its first stream, its offsets counting from there
    (:func:`range_end` gives its end); any other compressed shard reads the stream from its start
    (:func:`open_text_stream`).

    Raises:
        ValueError: A byte range of a compressed file without its seek index (``.xz`` is never indexed).
    """
    if shard.streams:
        return open_streams(path, shard.start, shard.end, active_byte_counter())
    compressed = is_compressed(path)
    indexed = compressed and shard.seek_index is not None and not shard.by_lines
    if compressed and not shard.by_lines and not indexed and (shard.start or shard.end is not None):
        raise ValueError(f"{path}: a byte range of a compressed file needs its seek index "
                         "(tasks.dumps.base.byte_shards); .xz files are sharded by lines")
    return open_at(path, shard.seek_index, active_byte_counter()) if indexed else open_text_stream(path)


def iter_lines(path: Path, shard: Shard = Shard()) -> Iterator[tuple[int | None, int, bytes]]:
    """Yield ``(line_number, byte_offset, line_bytes)`` for the lines of one shard.

    Byte offsets are in the decompressed stream (of a stream-boundary shard: from its first stream); line numbers
    are ``None`` in byte-range shards. Compressed-stream errors (truncation, CRC) raise ``DumpError`` with the file
    and the offset reached.

    Ownership, so that shards tile the file: a byte-range shard reads the lines that start in ``[start, end)``
    (it skips a partial first line, found by the byte before ``start``); a stream-boundary shard, which cannot
    see the byte before its first stream, reads the lines that start in ``(start, end]``: every shard but the
    first drops its first line, which the shard before reads as the one starting at its ``end``, or crossing it.

    Args:
        path: Input file (plain, .gz, .bz2, .xz).
        shard: Slice to read (a byte range of a compressed file needs its ``seek_index``).
    """
    path = Path(path)
    offset = 0
    lineno = 0
    by_range = not shard.by_lines
    try:
        with open_shard(path, shard) as fh:
            if shard.streams:
                lineno = -1
                if shard.start > 0:
                    offset = len(fh.readline())
            elif by_range and shard.start > 0:
                fh.seek(shard.start - 1)
                # if the byte before start is a newline, the shard starts on a line boundary
                prev = fh.read(1)
                offset = shard.start
                if prev != b"\n":
                    skipped = fh.readline()
                    offset += len(skipped)
                lineno = -1  # unknown absolute line numbers in byte shards
            while True:
                if shard.streams:
                    end = boundary(fh)  # known once the reader gets there
                    if end is not None and offset > end:
                        break
                elif by_range and shard.end is not None and offset >= shard.end:
                    break
                line = fh.readline()
                if not line:
                    break
                if shard.by_lines:
                    if lineno >= shard.start and (shard.end is None or lineno < shard.end):
                        yield lineno + 1, offset, line
                    elif shard.end is not None and lineno >= shard.end:
                        break
                    lineno += 1
                else:
                    yield (lineno + 1 if lineno >= 0 else None), offset, line
                    if lineno >= 0:
                        lineno += 1
                offset += len(line)
    except (EOFError, OSError, lzma.LZMAError, gzip.BadGzipFile) as exc:  # DecompressError is an OSError
        raise DumpError(f"{path}: unreadable after byte offset {offset} ({decompressed(shard)}): {exc}") from exc


def decompressed(shard: Shard) -> str:
    """What a shard's offsets count in, for error messages.

    ``decompressed``; for a stream-boundary shard also from which bzip2 stream (its offsets count from its first).
    """
    return f"decompressed of the bzip2 streams from compressed byte {shard.start}" if shard.streams else "decompressed"


def range_end(fh: io.BufferedIOBase, shard: Shard) -> int | None:
    """Where a shard opened by :func:`open_shard` ends, in the decompressed offsets it reads.

    ``None``: the end of the file, or, for a stream-boundary shard, not reached yet (its reader is still before it).
    """
    return boundary(fh) if shard.streams else shard.end


def byte_shardable(path: Path) -> bool:
    """Whether :func:`byte_shards` can cut the file into byte ranges: plain files, ``.gz`` and ``.bz2``."""
    path = Path(path)
    return not is_compressed(path) or seekable(path)


def byte_shards(path: Path, n: int, cache: Path | None = None) -> list[Shard]:
    """Split a line file into ``n`` byte-range shards that tile it (``.gz``/``.bz2``: its decompressed bytes).

    A multistream ``.bz2`` file with ``n > 1`` is cut at the stream starts nearest ``i * size / n`` of its
    compressed bytes (``tasks.dumps.bz2streams.stream_cuts``: no decompression; fewer shards when its streams
    are larger than that); any other compressed file with ``n > 1`` gets its seek index first
    (``tasks.dumps.seekable.seek_index``: one full parallel decompression, persisted under ``cache`` and
    reused); ``.xz`` files, and compressed files with ``n <= 1``, are one single-stream shard (``by_lines=True``).

    Args:
        path: The file.
        n: Shards wanted.
        cache: Folder of seek indexes (default ``<LINKEDQA_HOME>/cache/dump-index``).

    Raises:
        DumpError: A compressed file that is corrupt or truncated (found while indexing).
    """
    path = Path(path)
    compressed = is_compressed(path)
    if n <= 1 or not byte_shardable(path):
        return [Shard(0, 1, 0, None, by_lines=compressed)]
    if compressed and path.name.lower().endswith(".bz2"):
        cuts = stream_cuts(path, n)
        if cuts is not None:
            k = len(cuts)
            return [Shard(i, k, cuts[i], cuts[i + 1] if i + 1 < k else None, streams=True) for i in range(k)]
    if compressed:
        index = seek_index(path, cache)
        size, last, name = index.size, index.size, str(index.path)
    else:
        size, last, name = path.stat().st_size, None, None
    step = max(1, size // n)
    bounds = [i * step for i in range(n)] + [last]
    return [Shard(i, n, bounds[i], bounds[i + 1], seek_index=name) for i in range(n)]
