"""Multistream ``.bz2`` files shard at their bzip2 stream starts, with no decompression before staging.

Real data only: the real Wikidata dump samples and enwiki pages of ``LINKEDQA_DATA`` are decompressed and
recompressed in a temp folder as many bzip2 streams: the XML as Wikimedia writes
``pages-articles-multistream.xml.bz2`` (the ``<siteinfo>`` header alone in the first stream, then whole pages per
stream), the JSON lines as ``pbzip2`` does (fixed-size pieces, so streams end mid-line, or at a line start).
Sharded reads must give exactly the rows of one single-stream read.
"""

from __future__ import annotations

import bz2
import json
from pathlib import Path

import pytest

from storage.done import DONE, read_done
from storage.parquet_io import read_table
from tasks.dumps.base import DumpError, Shard, byte_shards, iter_lines
from tasks.dumps.bz2streams import STREAM_START, _next_start, open_streams, stream_cuts
from tasks.dumps.wikidata_json import read_wikidata_json
from tasks.dumps.wikipedia_xml import read_wikipedia_xml
from tasks.kb.plan import _spec, make_plan
from tasks.kb.stage import shard_bytes, shard_dir, stage_shard
from tasks.progress import count_reads

JSON_SAMPLE = "wikidata-entities/opentapioca/sample_wikidata_items.json.bz2"
XML_SAMPLE = "wikipedia-xml-dump/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
PAGE = b"  <page>"


def _multistream(pieces: list[bytes], path: Path) -> Path:
    path.write_bytes(b"".join(bz2.compress(p, 9) for p in pieces if p))
    return path


def _fixed_pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def _line_pieces(data: bytes, lines: int) -> list[bytes]:
    rows = data.splitlines(keepends=True)
    return [b"".join(rows[i:i + lines]) for i in range(0, len(rows), lines)]


def _xml_pieces(xml: bytes, per_stream: int) -> list[bytes]:
    """Wikimedia's multistream layout: the header (to the first page), ``per_stream`` pages per stream, the
    closing ``</mediawiki>`` in the last."""
    head, rest = xml[:xml.index(PAGE)], xml[xml.index(PAGE):]
    pages = [PAGE + p for p in rest.split(PAGE)[1:]]
    return [head] + [b"".join(pages[i:i + per_stream]) for i in range(0, len(pages), per_stream)]


def _rows(rows) -> list[str]:
    """Rows (and RowBlocks' rows) as sorted JSON, reject offsets dropped (a stream shard counts them from its
    first stream)."""
    out = []
    for table, row in rows:
        for r in (row.rows() if hasattr(row, "rows") else [row]):
            r = dict(r)
            if table == "rejects":
                r.pop("offset")
            out.append(json.dumps([table, r], sort_keys=True, default=str))
    return sorted(out)


@pytest.fixture
def plain_json(data_root: Path) -> bytes:
    return bz2.open(data_root / JSON_SAMPLE).read()


@pytest.fixture
def plain_xml(data_root: Path) -> bytes:
    return bz2.open(data_root / XML_SAMPLE).read()


@pytest.mark.parametrize("layout", ["fixed-50k", "fixed-7777", "whole-lines"])
def test_line_file_stream_shards_read_the_single_stream_rows(plain_json: bytes, tmp_path: Path, layout: str):
    pieces = (_line_pieces(plain_json, 3) if layout == "whole-lines"
              else _fixed_pieces(plain_json, int(layout.split("-")[1].replace("k", "000"))))
    packed = _multistream(pieces, tmp_path / "items.json.bz2")
    whole = _rows(read_wikidata_json(packed, Shard(by_lines=True), source="s"))
    assert sum(1 for r in whole if r.startswith('["entities"')) == 100
    for n in (2, 5, 40):
        shards = byte_shards(packed, n, tmp_path / "idx")
        assert all(s.streams for s in shards) and 2 <= len(shards) <= n
        assert [s.index for s in shards] == list(range(len(shards))) and {s.count for s in shards} == {len(shards)}
        assert shards[0].start == 0 and shards[-1].end is None
        assert all(a.end == b.start for a, b in zip(shards, shards[1:], strict=False))
        got = _rows(row for sh in shards for row in read_wikidata_json(packed, sh, source="s"))
        assert got == whole, (layout, n)
        # every line once, in order, with offsets that count from each shard's first stream
        lines = [line for sh in shards for _, _, line in iter_lines(packed, sh)]
        assert b"".join(lines) == plain_json
    assert not (tmp_path / "idx").exists()  # no seek index: nothing was decompressed to plan


def test_cuts_are_verified_stream_starts_near_equal_fractions(plain_json: bytes, tmp_path: Path):
    pieces = _fixed_pieces(plain_json, 20_000)
    packed = _multistream(pieces, tmp_path / "items.json.bz2")
    starts, pos = [], 0
    for p in pieces:
        starts.append(pos)
        pos += len(bz2.compress(p, 9))
    size = packed.stat().st_size
    for n in (2, 3, 8):
        cuts = stream_cuts(packed, n)
        assert cuts[0] == 0 and set(cuts) <= set(starts) and cuts == sorted(set(cuts))
        for i, c in enumerate(cuts[1:], 1):  # the first stream start at or after its target
            target = i * size // n
            assert c == min(s for s in starts if s >= target)
    # a streams shard is read to the end of the file, its boundary learnt on the way
    with open_streams(packed, cuts[1], cuts[2]) as fh:
        assert fh.raw.boundary is None
        data = fh.read()
        assert fh.raw.boundary is not None and 0 < fh.raw.boundary < len(data)
    assert plain_json.endswith(data)


def test_single_stream_gzip_and_junk_keep_the_seek_index(plain_json: bytes, tmp_path: Path):
    one = tmp_path / "one.json.bz2"
    one.write_bytes(bz2.compress(plain_json, 9))
    assert stream_cuts(one, 4) is None
    shards = byte_shards(one, 4, tmp_path / "idx")
    assert all(s.seek_index and not s.streams for s in shards)  # no stream cuts: the seek index path
    junk = tmp_path / "junk.bz2"
    junk.write_bytes(b"not bzip2 " + bz2.compress(b"x" * 100))
    assert stream_cuts(junk, 2) is None
    # one stream bigger than the probe window: single-stream as far as cutting goes
    two = _multistream(_fixed_pieces(plain_json, len(plain_json) // 2 + 1), tmp_path / "two.json.bz2")
    assert stream_cuts(two, 2, probe=1000) is None and stream_cuts(two, 2) is not None


def test_a_fake_stream_header_inside_data_is_skipped(tmp_path: Path):
    """The ten header bytes where no stream starts (here stored data; in compressed data a 2**-80 chance) do not
    become a cut: a candidate must decode."""
    real = bz2.compress(b"payload " * 1000, 9)
    fake = b"BZh91AY&SY" + bytes(range(256)) * 8
    f = tmp_path / "f.bin"
    f.write_bytes(fake + real)
    assert STREAM_START.match(fake)
    with open(f, "rb") as fh:
        assert _next_start(fh, 0, f.stat().st_size) == len(fake)


@pytest.mark.parametrize("per_stream", [100, 7, 1])
def test_wikipedia_multistream_shards_read_the_single_stream_pages(plain_xml: bytes, tmp_path: Path, per_stream):
    packed = _multistream(_xml_pieces(plain_xml, per_stream), tmp_path / "enwiki-multistream.xml.bz2")
    whole = _rows(read_wikipedia_xml(packed, Shard(by_lines=True), source="w"))
    assert sum(1 for r in whole if r.startswith('["articles"')) > 100
    for n in (2, 3, 9):
        shards = byte_shards(packed, n, tmp_path / "idx")
        assert all(s.streams for s in shards), (per_stream, n)
        got = _rows(row for sh in shards for row in read_wikipedia_xml(packed, sh, source="w"))
        assert got == whole, (per_stream, n)
    assert not (tmp_path / "idx").exists()


def test_staging_stream_shards_equals_single_stream(home: Path, plain_xml: bytes, tmp_path: Path):
    packed = _multistream(_xml_pieces(plain_xml, 20), tmp_path / "enwiki-multistream.xml.bz2")
    single = _spec("wikipedia", packed, "wikipedia", 1)
    spec = _spec("wikipedia", packed, "wikipedia", 4)
    assert single.shards == (Shard(0, 1, 0, None, by_lines=True),) and len(spec.shards) == 4
    assert all(s.streams for s in spec.shards)
    v1, v4 = make_plan("one", [single]).version, make_plan("four", [spec]).version

    def staged(version, sp):
        out: dict[str, list[str]] = {}
        for sh in sp.shards:
            for part in sorted(shard_dir(version, sp, sh, home).glob("*.parquet")):
                out.setdefault(part.stem, []).extend(
                    json.dumps(r, sort_keys=True, default=str) for r in read_table(part).to_pylist())
        return {t: sorted(v) for t, v in out.items()}

    stage_shard(v1, single, single.shards[0])
    recs = [stage_shard(v4, spec, sh) for sh in spec.shards]
    for sh in spec.shards:  # progress counts the compressed bytes a shard reads: its range, then the next stream
        with count_reads() as c:
            sum(1 for _ in iter_lines(packed, sh))
        assert shard_bytes(spec, sh) <= c.bytes < shard_bytes(spec, sh) + (4 << 20)  # + a read-ahead past end
    assert sum(shard_bytes(spec, sh) for sh in spec.shards) == packed.stat().st_size
    assert staged(v4, spec) == staged(v1, single)
    assert [r["compressed_range"] for r in recs] == [[s.start, s.end] for s in spec.shards]
    assert all(shard_dir(v4, spec, sh, home).name.endswith(".streams") for sh in spec.shards)
    assert all(read_done(shard_dir(v4, spec, sh, home), DONE) for sh in spec.shards)
    assert all(stage_shard(v4, spec, sh)["skipped"] for sh in spec.shards)  # resumed: not redone
    assert not (home / "cache" / "dump-index").exists()


def test_truncated_or_corrupt_multistream_fails_the_shard_naming_the_file(plain_json: bytes, tmp_path: Path):
    packed = _multistream(_fixed_pieces(plain_json, 30_000), tmp_path / "items.json.bz2")
    shards = byte_shards(packed, 3, tmp_path / "idx")
    data = packed.read_bytes()
    cut = tmp_path / "cut.json.bz2"
    cut.write_bytes(data[: shards[2].start + (len(data) - shards[2].start) // 2])
    with pytest.raises(DumpError, match=r"cut\.json\.bz2: unreadable after byte offset \d+ \(decompressed of the "
                                        r"bzip2 streams from compressed byte \d+\)"):
        for sh in byte_shards(cut, 3, tmp_path / "idx"):
            list(read_wikidata_json(cut, sh))
    bad = bytearray(data)
    mid = shards[1].start + 500
    bad[mid:mid + 64] = bytes(64)
    packed.write_bytes(bytes(bad))
    with pytest.raises(DumpError, match=r"items\.json\.bz2: unreadable after byte offset"):
        for sh in shards:
            list(read_wikidata_json(packed, sh))


def test_a_reject_in_a_stream_shard_names_where_its_offset_counts_from(home: Path, plain_json: bytes, tmp_path: Path):
    """A malformed line (a real line cut short) in a later shard: its reject's offset counts from the shard's first
    stream, the reason names that stream's compressed offset, and the two find the line again."""
    lines = plain_json.splitlines(keepends=True)
    bad = len(lines) * 3 // 4
    lines[bad] = lines[bad][: len(lines[bad]) // 2] + b"\n"
    packed = _multistream(_fixed_pieces(b"".join(lines), 50_000), tmp_path / "items.json.bz2")
    spec = _spec("wikidata-json", packed, "wikidata-json", 3)
    version = make_plan("r", [spec]).version
    rejects = []
    for sh in spec.shards:
        stage_shard(version, spec, sh)
        part = shard_dir(version, spec, sh, home) / "rejects.parquet"
        rejects += [(sh, r) for r in read_table(part).to_pylist()] if part.is_file() else []
    assert len(rejects) == 1
    sh, rej = rejects[0]
    assert sh.index > 0 and rej["reason"].endswith(f"[offset in the bzip2 streams from compressed byte {sh.start}]")
    with open_streams(packed, sh.start, None) as fh:
        fh.read(rej["offset"])
        assert fh.readline() == lines[bad]


def test_reading_stream_shards_leaks_no_file_descriptors(plain_json: bytes, tmp_path: Path):
    """indexed_bzip2 keeps the file object it decodes from alive and never closes it: the shard reader must."""
    packed = _multistream(_fixed_pieces(plain_json, 50_000), tmp_path / "items.json.bz2")
    shards = byte_shards(packed, 3, tmp_path / "idx")
    proc = Path("/proc/self/fd")
    before = len(list(proc.iterdir())) if proc.is_dir() else None
    for _ in range(30):
        for sh in shards:
            with open_streams(packed, sh.start, sh.end) as fh:
                fh.read(100_000)  # past the first range's end for the short shards: the tail is opened too
        gen = iter_lines(packed, shards[0])
        next(gen)
        gen.close()  # a reader stopped early
    if before is not None:
        assert len(list(proc.iterdir())) <= before + 2
