"""Parquet part writers bounded by bytes as well as rows, for tables whose rows vary widely in size.

Inputs: ``(table, row)`` pairs of a dump reader (dict rows or ``RowBlock``s). Outputs: one Parquet part per
table, written by ``storage.parquet_io.PartWriter`` (schema-enforced, atomic publish), row groups flushed when
either ``batch_rows`` rows or about ``batch_bytes`` bytes of string values are buffered.

Why: a row-count bound alone makes memory grow with the rows' size. A Wikipedia ``articles`` row carries the
whole plain text of a page (1 KB to 1 MB; ~30 KB on average for enwiki), so 20,000 buffered rows are ~0.6 GB of
Python strings plus their Arrow copy; on the 205 MB bench input the staging writer peaked at 616 MiB and grew
with the input until the row bound was reached. Counting the characters of the string columns (``len`` of
each value: chars, an estimate of UTF-8 bytes that is exact for ASCII) keeps every table's buffer at about
``batch_bytes`` whatever its rows look like.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from storage.parquet_io import PartWriter
from tasks.dumps.base import RowBlock, TableRow

#: Default byte budget of one table's buffer (string characters) before a row group is written.
BATCH_BYTES = 8 << 20
#: Default row bound (the staging writer's).
BATCH_ROWS = 20_000


class BoundedPartWriter(PartWriter):
    """A ``PartWriter`` that also flushes when its buffered string values reach ``batch_bytes`` characters.

    Example:
        >>> w = BoundedPartWriter("articles", Path("/tmp/x/articles.parquet"), batch_bytes=1 << 20)  # doctest: +SKIP
    """

    def __init__(self, table: str, path: Path, batch_rows: int = BATCH_ROWS, batch_bytes: int = BATCH_BYTES):
        super().__init__(table, path, batch_rows=batch_rows)
        self.batch_bytes = batch_bytes
        self.flushes = 0
        self._bytes = 0
        self._sized = tuple(i for i, f in enumerate(self.schema)
                            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type))

    def add(self, row: dict[str, Any]) -> None:
        """Buffer one row; flushes a row group when the buffer is full by rows or by bytes."""
        if row.keys() != self._keys:
            raise self._mismatch(row)
        values = self._get(row)
        self._buf.append(values)
        for i in self._sized:
            v = values[i]
            if v is not None:
                self._bytes += len(v)
        if self._bytes >= self.batch_bytes or len(self._buf) >= self.batch_rows:
            self.flush()

    def add_columns(self, columns: Mapping[str, Sequence[Any]]) -> None:
        """Bulk ``add`` of equal-length columns (bytes counted over the string columns)."""
        names = self._names
        for i in self._sized:
            col = columns.get(names[i]) or ()
            self._bytes += sum(len(v) for v in col if v is not None)
        super().add_columns(columns)
        if self._bytes >= self.batch_bytes:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one row group and reset the byte count."""
        if self._buf:
            self.flushes += 1
        super().flush()
        self._bytes = 0


def write_parts(rows: Iterable[TableRow], out: Path, batch_rows: int = BATCH_ROWS,
                batch_bytes: int = BATCH_BYTES) -> dict[str, int]:
    """Write a reader's rows to ``out/<table>.parquet`` through byte-bounded writers (all or nothing).

    Args:
        rows: ``(table, row)`` pairs (dicts or ``RowBlock``s).
        out: Folder of the parts.
        batch_rows: Row bound per row group.
        batch_bytes: Byte (string character) bound per row group.

    Returns:
        Rows written per table.
    """
    writers: dict[str, BoundedPartWriter] = {}
    try:
        for table, row in rows:
            w = writers.get(table)
            if w is None:
                w = writers[table] = BoundedPartWriter(table, out / f"{table}.parquet", batch_rows, batch_bytes)
            if type(row) is RowBlock:
                w.add_columns(row.columns)
            else:
                w.add(row)
        return {t: w.close() for t, w in writers.items()}
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
