"""Random access to ``.gz`` and ``.bz2`` line files by decompressed byte offset (compressed dumps shard like plain).

Inputs: a ``.gz`` file (one or more gzip members) or a ``.bz2`` file (one or more bzip2 streams).
Outputs: a :class:`SeekIndex` (the decompressed size and a seek-point file, built once per file and persisted)
and binary streams that ``seek()`` to any decompressed offset (:func:`open_at`).

Index step (:func:`seek_index`): the whole file is decompressed once, in parallel on every core (rapidgzip for
gzip, indexed_bzip2 for bzip2), which learns its decompressed size and its seek points: rapidgzip's gzip
index (GZTOOL format, 32 KiB windows zlib-compressed), thinned to one point per :func:`gzip_spacing`
decompressed bytes (rapidgzip keeps one per ~2 MB: ~1 GB of index for the 1.3 TB dump, loaded by every
shard), or the bzip2 block map (``{compressed bit offset: decompressed byte offset}``, 16 bytes per 900 kB
block). A corrupt or truncated file fails here, with the file named. The index lives in
``<LINKEDQA_HOME>/cache/dump-index/<name>.<hash>/``, keyed by the file's fingerprint (name, size, sha256 of
its first and last MiB) and :data:`INDEX_FORMAT`, and is marked done last (``storage.done``), so a re-planned
or resumed build reuses it.

Shards then read ``[start, end)`` of the decompressed stream exactly as shards of a plain file do
(``tasks.dumps.base.iter_lines``): each opens the file with one decoder thread, imports the index, seeks to
its start and decodes only its range. ``.xz`` has no such index here and stays one single-stream shard.

Prefect-free.
"""

from __future__ import annotations

import array
import io
import os
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import indexed_bzip2
import rapidgzip

from storage import layout
from storage.done import mark_done, read_done, sweep_temps, temp_path
from storage.manifest import config_hash, file_fingerprint
from tasks.dumps.errors import DumpError

#: Bump when the index files change shape (old ones are rebuilt under a new folder).
INDEX_FORMAT = 1
#: Suffixes whose files can be indexed and sharded by decompressed byte range.
SEEKABLE_SUFFIXES = (".gz", ".bz2")
_DRAIN = 4 << 20  # bytes per read while indexing
_GZ_CHUNK = 4 << 20  # rapidgzip chunk size (compressed bytes per parallel work unit)


class DecompressError(OSError):
    """A compressed stream could not be decoded (corrupt, truncated, CRC mismatch)."""


@dataclass(frozen=True)
class SeekIndex:
    """The seek index of one compressed file.

    Attributes:
        path: Index file (GZTOOL gzip index, or the bzip2 block map).
        size: Decompressed size of the whole file in bytes.
    """

    path: Path
    size: int


def seekable(path: Path | str) -> bool:
    """Whether the file is a ``.gz`` or ``.bz2`` stream that :func:`seek_index` can index."""
    return Path(path).name.lower().endswith(SEEKABLE_SUFFIXES)


def _is_gzip(path: Path) -> bool:
    return path.name.lower().endswith(".gz")


def default_threads() -> int:
    """Decoder threads of the index step: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _decoder(path: Path, threads: int) -> Any:
    """The C decoder object (``readinto``/``seek``/``tell``/``size``/``close``) of one file."""
    if _is_gzip(path):
        return rapidgzip._RapidgzipFile(str(path), parallelization=threads, chunk_size=_GZ_CHUNK)
    if threads <= 1:
        return indexed_bzip2._IndexedBzip2File(str(path))
    return indexed_bzip2._IndexedBzip2FileParallel(str(path), threads)


def index_folder(path: Path, cache: Path | None = None) -> Path:
    """Where the seek index of ``path`` is kept (``cache`` default: ``<LINKEDQA_HOME>/cache/dump-index``)."""
    fp = {k: v for k, v in file_fingerprint(path).items() if k != "path"}
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.name)[:80]
    key = config_hash({"format": INDEX_FORMAT, "name": path.name, "fp": fp}, 12)
    return (cache or layout.cache_dir("dump-index")) / f"{stem}.{key}"


def gzip_spacing(size: int) -> int:
    """Decompressed bytes between two kept gzip seek points: at least 64 MiB, at most ~4,096 points per file.

    A shard's first read decodes at most this much before its start (~1 s per 300 MB on one core).
    """
    return max(64 << 20, size // 4096)


_GZTOOL_MAGIC = b"\0" * 8 + b"gzipindx"


def thin_gztool_index(src: Path, dst: Path, spacing: int) -> int:
    """Copy a GZTOOL gzip index keeping the first point and then one point per ``spacing`` decompressed bytes.

    Format (gztool ``gzipindx``, big-endian): 16-byte magic, point count twice (u64), then per point the
    decompressed offset (u64), compressed offset (u64), bit offset (u32), window length (u32) and the
    zlib-compressed 32 KiB window, then the decompressed file size (u64).

    Returns:
        The number of points kept.
    """
    data = src.read_bytes()
    if data[:16] != _GZTOOL_MAGIC:
        raise ValueError(f"{src}: not a GZTOOL index")
    have, size = struct.unpack_from(">QQ", data, 16)
    if have != size:
        raise ValueError(f"{src}: incomplete GZTOOL index ({have} of {size} points)")
    pos = 32
    kept: list[bytes] = []
    last = None
    for _ in range(have):
        out, _in, _bits, wlen = struct.unpack_from(">QQII", data, pos)
        end = pos + 24 + wlen
        if last is None or out - last >= spacing:
            kept.append(data[pos:end])
            last = out
        pos = end
    trailer = data[pos:]
    if len(trailer) != 8:
        raise ValueError(f"{src}: GZTOOL index has {len(trailer)} trailing bytes, expected 8")
    with open(dst, "wb") as fh:
        fh.write(_GZTOOL_MAGIC + struct.pack(">QQ", len(kept), len(kept)))
        fh.writelines(kept)
        fh.write(trailer)
    return len(kept)


def _write_index(dec: Any, path: Path, out: Path, size: int) -> None:
    tmp = temp_path(out)
    full = out.with_name(f"{out.name}.full.tmp-{os.getpid()}")
    try:
        if _is_gzip(path):
            dec.export_index(str(full), rapidgzip.IndexFormat.GZTOOL)
            thin_gztool_index(full, tmp, gzip_spacing(size))
            full.unlink()
        else:
            flat = array.array("q")
            for bit, byte in sorted(dec.block_offsets().items()):
                flat.extend((bit, byte))
            with open(tmp, "wb") as fh:
                flat.tofile(fh)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        full.unlink(missing_ok=True)
        raise


def seek_index(path: Path | str, cache: Path | None = None, threads: int | None = None) -> SeekIndex:
    """The seek index of a ``.gz``/``.bz2`` file: built once (full parallel decompression), then reused.

    Args:
        path: The compressed file.
        cache: Folder of the indexes (default ``<LINKEDQA_HOME>/cache/dump-index``).
        threads: Decoder threads while indexing (default: every core of this process).

    Returns:
        The index file and the decompressed size.

    Raises:
        tasks.dumps.base.DumpError: Corrupt or truncated file (names the file and the decompressed offset
            reached); nothing is marked done.
        ValueError: Not a ``.gz``/``.bz2`` file.
    """
    path = Path(path)
    if not seekable(path):
        raise ValueError(f"{path}: only .gz and .bz2 files have a seek index (.xz is read as one stream)")
    folder = index_folder(path, cache)
    name = "seek.gztool" if _is_gzip(path) else "seek.bz2blocks"
    done = read_done(folder)
    if done is not None and (folder / name).is_file():
        return SeekIndex(folder / name, int(done["size"]))
    sweep_temps(folder)
    folder.mkdir(parents=True, exist_ok=True)
    threads = threads or default_threads()
    t0 = time.perf_counter()
    size = 0
    buf = bytearray(_DRAIN)
    dec = _decoder(path, threads)
    try:
        try:
            while True:
                n = dec.readinto(buf)
                if not n:
                    break
                size += n
            # rapidgzip ends quietly where a gzip file is cut inside a deflate block: it must reach the last bit
            if _is_gzip(path) and dec.tell_compressed() != 8 * path.stat().st_size:
                raise EOFError(f"compressed stream ended at bit {dec.tell_compressed()} of {8 * path.stat().st_size}"
                               " (truncated?)")
        except (RuntimeError, ValueError, OSError, EOFError) as exc:
            raise DumpError(f"{path}: unreadable after byte offset {size} (decompressed): {exc}") from exc
        _write_index(dec, path, folder / name, size)
    finally:
        dec.close()
    mark_done(folder, {"input": str(path), "size": size, "index": name, "index_bytes": (folder / name).stat().st_size,
                       "threads": threads, "seconds": round(time.perf_counter() - t0, 3),
                       "index_format": INDEX_FORMAT})
    return SeekIndex(folder / name, size)


class _IndexedRaw(io.RawIOBase):
    """A decoder with its seek index loaded, as a raw stream; optionally counts the bytes it decodes."""

    def __init__(self, path: Path, index: Path, counter: Any = None):
        self._path = path
        self._dec = _decoder(path, 1)
        self._counter = counter
        try:
            if _is_gzip(path):
                self._dec.import_index(str(index))
            else:
                flat = array.array("q")
                with open(index, "rb") as fh:
                    flat.frombytes(fh.read())
                self._dec.set_block_offsets(dict(zip(flat[0::2], flat[1::2], strict=True)))
        except BaseException:
            self._dec.close()
            raise

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            n = self._dec.readinto(b)
        except (RuntimeError, ValueError) as exc:
            raise DecompressError(str(exc)) from exc
        if n and self._counter is not None:
            self._counter.bytes += n
        return n

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        return self._dec.seek(pos, whence)

    def tell(self) -> int:
        return self._dec.tell()

    def close(self) -> None:
        if not self.closed:
            try:
                self._dec.close()
            finally:
                super().close()


def open_at(path: Path | str, index: Path | str, counter: Any = None) -> io.BufferedReader:
    """Open a ``.gz``/``.bz2`` file with its seek index: a binary stream seekable in decompressed offsets.

    Args:
        path: The compressed file.
        index: Its index file (:attr:`SeekIndex.path`).
        counter: Optional ``tasks.progress.ByteCounter``: decompressed bytes decoded are added to it.

    Returns:
        A buffered reader (one decoder thread); decoding errors surface as :class:`DecompressError`.
    """
    return io.BufferedReader(_IndexedRaw(Path(path), Path(index), counter), buffer_size=1 << 20)
