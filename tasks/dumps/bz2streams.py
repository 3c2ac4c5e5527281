"""Shards of a multistream ``.bz2`` file cut at its bzip2 stream boundaries, found without decompressing it.

Inputs: a ``.bz2`` file made of many concatenated bzip2 streams: Wikimedia's
``pages-articles-multistream.xml.bz2`` (the enwiki download Wikimedia recommends: a first stream holding the
``<siteinfo>`` header, then one stream per 100 pages), or what ``pbzip2`` writes (one stream per block).
Outputs: the compressed offsets where shards start (:func:`stream_cuts`) and a binary stream of one shard's
decompressed bytes (:func:`open_streams`).

Why: a byte-range shard of the decompressed bytes needs to know where each decompressed byte lies, so the whole
file is decompressed once before staging (``tasks.dumps.seekable``: 413 s of the 2,952 s ``kb build`` at 10 M
entities on 2 cores, for a 3.6 GB ``.xml.bz2``). A multistream file needs none of it: every stream starts on a
byte boundary with the stream header ``BZh`` + level digit followed by the block magic ``1AY&SY``
(0x314159265359), so :func:`stream_cuts` seeks to ``i * size / n``, searches forward for those ten bytes, and
checks the candidate by decoding its first block. A file with no second stream in its first :data:`PROBE` bytes
is single-stream (the Wikidata dumps, ``bzip2``, ``lbzip2``) and keeps the seek index.

Shard ``[start, end)`` is a range of *compressed* bytes, both ends stream starts. Its reader decodes the streams
from ``start`` (decompressed offsets count from there) and learns where its range ends in decompressed bytes
(:attr:`_StreamsRaw.boundary`) when the decoder reaches ``end``; it may then decode on into the next stream, to
finish the record that crosses the boundary. Records are owned by position, so shards tile the file exactly:
a line belongs to the shard whose decompressed range ``(b_prev, b]`` holds its first byte (``iter_lines``: every
shard but the first drops its first line, and reads lines that start at or before its boundary); a page to the
shard whose ``[b_prev, b)`` holds its ``<page>`` tag (``tasks.dumps.wikipedia_xml``).

Prefect-free.
"""

from __future__ import annotations

import bz2
import io
import re
from pathlib import Path
from typing import Any

import indexed_bzip2

from tasks.dumps.seekable import DecompressError

#: A bzip2 stream's first ten bytes: "BZh", the block-size digit, the first block's magic (pi's digits in BCD).
STREAM_START = re.compile(rb"BZh[1-9]1AY&SY")
#: Compressed bytes searched for a second stream before a file is taken for single-stream (a Wikimedia
#: multistream's second stream starts after its few-kB header stream, a pbzip2 one after one ~900 kB block).
PROBE = 16 << 20
_SCAN = 4 << 20  # compressed bytes read per search step
_CHECK = 2 << 20  # compressed bytes decoded at most to check a candidate stream start


def _valid_start(fh: Any, pos: int) -> bool:
    """Whether a bzip2 stream decodes from compressed offset ``pos`` (its first block, or to its end)."""
    fh.seek(pos)
    dec = bz2.BZ2Decompressor()
    left = _CHECK
    try:
        while left > 0 and not dec.eof:
            chunk = fh.read(min(_SCAN, left))
            if not chunk:
                return dec.eof
            left -= len(chunk)
            if dec.decompress(chunk, max_length=1):  # one output byte: the first block decoded
                return True
    except (OSError, EOFError, ValueError):
        return False
    return False  # 2 MiB without one output byte: no bzip2 block (at most 900 kB of input) compresses to that


def _next_start(fh: Any, pos: int, stop: int) -> int | None:
    """The first verified stream start at or after ``pos`` and before ``stop`` (compressed offsets)."""
    keep = 9  # a match may straddle two reads
    while pos < stop:
        fh.seek(pos)
        buf = fh.read(min(_SCAN, stop - pos) + keep)
        if not buf:
            return None
        for m in STREAM_START.finditer(buf):
            at = pos + m.start()
            if at >= stop:
                return None
            if _valid_start(fh, at):
                return at
        pos += max(1, len(buf) - keep)
    return None


def stream_cuts(path: Path | str, n: int, probe: int = PROBE) -> list[int] | None:
    """Compressed offsets of the stream starts where ``n`` shards of a multistream ``.bz2`` file begin.

    Cut ``i`` is the first stream that starts at or after ``i * size / n`` (and before cut ``i + 1``'s target; a
    cut with no stream there is dropped, so fewer shards come back when streams are larger than ``size / n``).

    Args:
        path: The ``.bz2`` file.
        n: Shards wanted (``n >= 2``).
        probe: Compressed bytes searched for a second stream before the file is taken for single-stream.

    Returns:
        ``[0, c1, ...]`` (at least two cuts), or ``None`` when the file is single-stream, has no stream start at
        offset 0 (not bzip2), or yields a single shard: the caller then uses the seek index.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if not STREAM_START.match(fh.read(10)):
            return None
        if _next_start(fh, 1, min(size, probe)) is None:
            return None  # single-stream, or streams too large to cut by
        cuts = [0]
        targets = [i * size // n for i in range(1, n)] + [size]
        for i, target in enumerate(targets[:-1]):
            at = _next_start(fh, max(target, cuts[-1] + 1), targets[i + 1])
            if at is not None:
                cuts.append(at)
    return cuts if len(cuts) > 1 else None


class _RangeFile(io.RawIOBase):
    """Compressed bytes ``[start, end)`` of a file as a file of their own (offset 0 = ``start``).

    Optionally adds the bytes it reads to a ``tasks.progress.ByteCounter``.
    """

    def __init__(self, path: Path, start: int, end: int | None, counter: Any = None):
        self._f = io.FileIO(path, "rb")
        self._start = start
        self._size = (end if end is not None else self._f.seek(0, io.SEEK_END)) - start
        self._pos = 0
        self._counter = counter

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        want = min(len(b), self._size - self._pos)
        if want <= 0:
            return 0
        self._f.seek(self._start + self._pos)
        n = self._f.readinto(memoryview(b)[:want])
        self._pos += n
        if n and self._counter is not None:
            self._counter.bytes += n
        return n

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                self._f.close()
            finally:
                super().close()


class _StreamsRaw(io.RawIOBase):
    """The decompressed bytes of the bzip2 streams from compressed offset ``start`` to the end of the file.

    Decodes ``[start, end)`` first (one indexed_bzip2 decoder thread); when that range is spent,
    :attr:`boundary` is set to the decompressed bytes it held, and reading goes on into ``[end, EOF)`` (a second
    decoder, opened only if the caller reads on). Decoding errors surface as ``tasks.dumps.seekable.DecompressError``.

    Attributes:
        boundary: Decompressed length of ``[start, end)``; ``None`` until the decoder reaches ``end`` (and for
            the last shard, ``end is None``, always).
    """

    def __init__(self, path: Path, start: int, end: int | None, counter: Any = None):
        self._path = path
        self._end = end
        self._counter = counter
        self._file: _RangeFile | None = None
        self._dec: Any = None
        self._tail = False  # decoding [end, EOF)
        self._pos = 0
        self.boundary: int | None = None
        self._open(start, end)

    def _open(self, start: int, end: int | None) -> None:
        """Decode ``[start, end)`` from now on, closing the range before it.

        indexed_bzip2 never closes the file object it is given and keeps it alive: without this, each shard would
        leak a descriptor per range.
        """
        self._drop()
        self._file = _RangeFile(self._path, start, end, self._counter)
        try:
            self._dec = indexed_bzip2.open(self._file, parallelization=1)
        except (RuntimeError, ValueError) as exc:
            self._drop()
            raise DecompressError(str(exc)) from exc

    def _drop(self) -> None:
        dec, f, self._dec, self._file = self._dec, self._file, None, None
        try:
            if dec is not None:
                dec.close()
        finally:
            if f is not None:
                f.close()

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            n = self._dec.readinto(b)
            if not n and not self._tail and self._end is not None:
                self.boundary = self._pos
                self._tail = True
                self._open(self._end, None)
                n = self._dec.readinto(b)
        except (RuntimeError, ValueError) as exc:
            raise DecompressError(str(exc)) from exc
        self._pos += n
        return n

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                self._drop()
            finally:
                super().close()


def open_streams(path: Path | str, start: int, end: int | None, counter: Any = None) -> io.BufferedReader:
    """Open one stream-boundary shard: a buffered binary stream of its decompressed bytes (see :class:`_StreamsRaw`).

    The raw stream (``.raw``) carries :attr:`_StreamsRaw.boundary`; :func:`boundary` reads it.
    """
    return io.BufferedReader(_StreamsRaw(Path(path), start, end, counter), buffer_size=1 << 20)


def boundary(fh: io.BufferedReader) -> int | None:
    """The decompressed end of a shard opened by :func:`open_streams` (``None``: not reached yet, or the last)."""
    return fh.raw.boundary
