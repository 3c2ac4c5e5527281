"""How the merge streams a table out of DuckDB (``tasks.kb.merge.write_query_parts``).

At 3 M entities (``make bench-scale``) 100,000 article texts make one Arrow batch of more than 2 GiB of strings,
which DuckDB cannot export with 32-bit string offsets ("Arrow Appender: The maximum total string size for regular
string buffers is 2147483647"). So the export uses 64-bit offsets, articles come in smaller batches, and each batch
is conformed to the table's 32-bit ``string`` schema in slices. Reproducing the failure itself needs more than
2 GiB of text in memory, too much for the suite: these tests pin each of those parts, on the real sample's staged
article pages.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.parquet_io import part_files, read_table
from tasks.kb import merge
from tasks.kb.plan import make_plan, sample_inputs
from tasks.kb.stage import stage_shard


@pytest.fixture(scope="module")
def staged_articles(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> duckdb.DuckDBPyConnection:
    """A connection with ``stg_articles`` over the real sample's Wikipedia pages, staged as ``kb build`` does."""
    root = tmp_path_factory.mktemp("merge-batches")
    plan = make_plan("merge-batches", [s for s in sample_inputs(data_root) if s.kind == "wikipedia"])
    assert plan.inputs, "the sample has Wikipedia pages"
    for spec in plan.inputs:
        for shard in spec.shards:
            stage_shard(plan.version, spec, shard, root=root)
    con = duckdb.connect()
    files = merge._staged_files(plan, root)
    merge._register_staging(con, {"articles": files["articles"]}, root)
    return con


def test_slices_cut_a_batch_into_equal_row_slices_under_the_byte_bound() -> None:
    batch = pa.record_batch({"text": pa.array(["x" * 1000] * 100, pa.large_string())})
    assert merge._slices(batch, 10**9) == [batch]
    pieces = merge._slices(batch, 20_000)
    assert sum(p.num_rows for p in pieces) == 100 and len(pieces) >= 5
    assert all(p.nbytes <= 20_000 + 2_000 for p in pieces)
    assert pa.Table.from_batches(pieces).equals(pa.Table.from_batches([batch]))
    assert all(p.column(0).offset == 0 for p in pieces)  # copied: buffers of their own (see the next test)
    one = pa.record_batch({"text": pa.array(["x" * 10_000], pa.large_string())})
    assert merge._slices(one, 100) == [one]  # a row is never cut


def test_a_slice_past_2_gib_of_its_parents_strings_is_copied_before_the_32_bit_cast() -> None:
    """A slice keeps its parent's 64-bit offsets: its row 3e9 bytes into the parent's buffer cannot be cast to
    ``string`` until :func:`merge._compact` copies it (the 3 GB buffer is zero pages, never touched)."""
    data = pa.py_buffer(np.zeros(3 * 10**9 + 2, dtype=np.uint8))
    offsets = pa.py_buffer(np.array([0, 3 * 10**9, 3 * 10**9 + 2], dtype=np.int64))
    parent = pa.record_batch({"text": pa.LargeStringArray.from_buffers(2, offsets, data)})
    tail = parent.slice(1, 1)
    with pytest.raises(pa.ArrowInvalid):
        tail.column(0).cast(pa.string())
    copied = merge._compact(tail)
    assert copied.column(0).cast(pa.string()).to_pylist() == ["\x00\x00"]
    assert copied.nbytes < 100


def test_articles_are_written_in_small_batches_of_large_strings_and_in_slices(
        staged_articles: duckdb.DuckDBPyConnection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real articles pass through slices of ~64 kB (the texts of the sample's pages are ~30 kB each) and are
    written with exactly the rows and the declared 32-bit ``string`` schema of the query; DuckDB was asked for
    64-bit string offsets and articles come in ``TABLE_BATCH_ROWS`` batches (50 here)."""
    con = staged_articles
    sql = "SELECT page_id, title, qid, lead, text, n_words, source FROM stg_articles"
    seen: list[int] = []
    real = merge._slices

    batch_rows: list[int] = []

    def spy(batch: pa.RecordBatch, max_bytes: int | None = None) -> list[pa.RecordBatch]:
        assert pa.types.is_large_string(batch.schema.field("text").type)
        batch_rows.append(batch.num_rows)
        pieces = real(batch, 64_000)
        seen.append(len(pieces))
        return pieces

    monkeypatch.setattr(merge, "_slices", spy)
    monkeypatch.setattr(merge, "TABLE_BATCH_ROWS", {"articles": 50})  # the sample has ~110: 100,000 is one batch
    n = merge.write_query_parts(con, sql, "articles", tmp_path / "articles")
    want = con.sql(sql).to_arrow_table()
    assert n == want.num_rows > 100
    assert max(batch_rows) == 50 and len(batch_rows) >= -(-n // 50), "articles come in TABLE_BATCH_ROWS batches"
    assert max(seen) > 1, "the sample's texts should need more than one slice per batch at 64 kB"
    got = read_table(tmp_path / "articles")
    assert got.schema.field("text").type == pa.string()
    key = [("page_id", "ascending"), ("source", "ascending")]
    assert got.sort_by(key).column("text").to_pylist() == want.sort_by(key).column("text").to_pylist()
    assert pq.ParquetFile(part_files(tmp_path / "articles")[0]).metadata.num_row_groups == sum(seen)
