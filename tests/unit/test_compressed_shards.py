"""Compressed dumps shard like plain ones: byte ranges of the decompressed stream through a persisted seek index.

The real Wikidata dump samples (``wikidata-entities``) and a real KGTK file are decompressed and recompressed in a
temp folder as Wikimedia does (gzip -6, bzip2 -9); N-shard staging of the compressed file must give exactly the
rows of single-stream staging of the plain file.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path

import pytest
import rapidgzip

from storage.done import DONE, read_done
from storage.parquet_io import read_table
from tasks.dumps.base import DumpError, Shard, byte_shards, iter_lines
from tasks.dumps.seekable import _decoder, index_folder, open_at, seek_index, thin_gztool_index
from tasks.dumps.triples import read_kgtk
from tasks.dumps.wikidata_json import read_wikidata_json
from tasks.kb.plan import _spec, make_plan
from tasks.kb.stage import shard_bytes, shard_dir, stage_shard
from tasks.progress import count_reads

SAMPLES = [
    "wikidata-entities/wikibase-dump-filter/entities.gz",
    "wikidata-entities/opentapioca/sample_wikidata_items.json.bz2",
    "wikidata-entities/opentapioca/short_stream.json.bz2",
]


def _plain(data_root: Path, rel: str, tmp: Path) -> Path:
    src = data_root / rel
    opener = gzip.open if src.name.endswith(".gz") else bz2.open
    out = tmp / (src.name.split(".")[0] + ".json")
    with opener(src, "rb") as fh:
        out.write_bytes(fh.read())
    return out


def _compressed(plain: Path, suffix: str) -> Path:
    data = plain.read_bytes()
    out = plain.with_name(plain.name + suffix)
    out.write_bytes(gzip.compress(data, 6, mtime=0) if suffix == ".gz" else bz2.compress(data, 9))
    return out


def _staged(version: str, spec, root: Path) -> dict[str, list[str]]:
    """Every staged table of an input, as sorted JSON rows (order-independent, source column dropped)."""
    tables: dict[str, list[str]] = {}
    for shard in spec.shards:
        folder = shard_dir(version, spec, shard, root)
        for part in sorted(folder.glob("*.parquet")):
            rows = read_table(part).to_pylist()
            for r in rows:
                r.pop("source", None)
                r.pop("source_file", None)
            tables.setdefault(part.stem, []).extend(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return {t: sorted(rows) for t, rows in tables.items()}


@pytest.mark.parametrize("rel", SAMPLES)
@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_compressed_byte_shards_read_the_plain_rows(data_root: Path, tmp_path: Path, rel: str, suffix: str):
    plain = _plain(data_root, rel, tmp_path)
    packed = _compressed(plain, suffix)
    whole = list(read_wikidata_json(plain, source="s"))
    assert sum(1 for t, _ in whole if t == "entities") > 40
    cache = tmp_path / "idx"
    for n in (2, 5, 13):
        shards = byte_shards(packed, n, cache)
        assert [s.index for s in shards] == list(range(n)) and all(s.seek_index for s in shards)
        assert shards[0].start == 0 and shards[-1].end == plain.stat().st_size  # decompressed bytes
        assert all(a.end == b.start for a, b in zip(shards, shards[1:], strict=False))
        parts = [row for sh in shards for row in read_wikidata_json(packed, sh, source="s")]
        assert parts == whole, n
        # the same byte ranges of the plain file give the same lines at the same (decompressed) offsets
        plain_shards = [Shard(s.index, s.count, s.start, s.end) for s in shards]
        for a, b in zip(shards, plain_shards, strict=True):
            assert list(iter_lines(packed, a)) == list(iter_lines(plain, b))


def test_kgtk_gz_byte_shards(data_root: Path, tmp_path: Path):
    src = data_root / "kgtk-arnold/labels.en.tsv.gz"
    plain = tmp_path / "labels.en.tsv"
    plain.write_bytes(gzip.open(src).read())
    whole = list(read_kgtk(plain, source="k"))
    for packed in (src, _compressed(plain, ".bz2")):
        shards = byte_shards(packed, 4, tmp_path / "idx")
        assert len(shards) == 4
        assert [row for sh in shards for row in read_kgtk(packed, sh, source="k")] == whole


def test_staging_n_compressed_shards_equals_single_stream_plain(home: Path, data_root: Path, tmp_path: Path):
    plain = _plain(data_root, SAMPLES[1], tmp_path)
    single = _spec("wikidata-json", plain, "wikidata-json", 1)
    assert single.shards == (Shard(),)
    version = make_plan("p", [single]).version
    stage_shard(version, single, single.shards[0])
    ref = _staged(version, single, home)
    assert len(ref["entities"]) == 100 and len(ref["labels"]) > 1000
    for suffix in (".gz", ".bz2"):
        packed = _compressed(plain, suffix)
        spec = _spec("wikidata-json", packed, "wikidata-json", 3)
        assert len(spec.shards) == 3 and all(not s.by_lines for s in spec.shards)
        # the seek index is persisted under LINKEDQA_HOME, done-marked, and reused by the next plan
        folder = index_folder(packed)
        assert folder.parent == home / "cache" / "dump-index"
        done = read_done(folder, DONE)
        assert done["size"] == plain.stat().st_size
        assert _spec("wikidata-json", packed, "wikidata-json", 3).shards == spec.shards
        assert read_done(folder, DONE) == done  # not rebuilt
        v = make_plan("c", [spec]).version
        recs = [stage_shard(v, spec, sh) for sh in spec.shards]
        assert not any(r["skipped"] for r in recs)
        # progress: a shard's total is its decompressed range, and the bytes it decodes are counted
        assert sum(shard_bytes(spec, sh) for sh in spec.shards) == plain.stat().st_size
        for sh in spec.shards:
            with count_reads() as c:
                n = sum(len(line) for _, _, line in iter_lines(packed, sh))
            assert c.bytes >= n > 0.9 * shard_bytes(spec, sh)
        assert _staged(v, spec, home) == ref, suffix
        # resumed: finished shards are skipped, not redone
        assert all(stage_shard(v, spec, sh)["skipped"] for sh in spec.shards)


def test_one_shard_and_xz_stay_single_stream(data_root: Path, tmp_path: Path):
    plain = _plain(data_root, SAMPLES[0], tmp_path)
    packed = _compressed(plain, ".gz")
    assert byte_shards(packed, 1, tmp_path / "idx") == [Shard(0, 1, 0, None, by_lines=True)]
    assert not (tmp_path / "idx").exists()  # no index for a single stream
    xz = plain.with_name(plain.name + ".xz")
    xz.write_bytes(lzma.compress(plain.read_bytes()))
    assert byte_shards(xz, 4, tmp_path / "idx") == [Shard(0, 1, 0, None, by_lines=True)]
    with pytest.raises(ValueError, match="seek index"):
        list(iter_lines(packed, Shard(0, 2, 0, 100)))


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_truncated_compressed_file_fails_indexing_naming_the_file(data_root: Path, tmp_path: Path, suffix: str):
    plain = _plain(data_root, SAMPLES[1], tmp_path)
    data = _compressed(plain, suffix).read_bytes()
    cut = tmp_path / f"cut.json{suffix}"
    cut.write_bytes(data[: len(data) // 2])
    cache = tmp_path / "idx"
    with pytest.raises(DumpError, match=rf"cut\.json\{suffix}: unreadable after byte offset \d+"):
        byte_shards(cut, 3, cache)
    assert read_done(index_folder(cut, cache), DONE) is None  # nothing marked done
    with pytest.raises(DumpError, match=r"cut\.json"):
        _spec("wikidata-json", cut, "wikidata-json", 3)


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_corruption_after_indexing_fails_the_shard_naming_the_file(data_root: Path, tmp_path: Path, suffix: str):
    """Bytes changed in the middle keep the fingerprint (size, first and last MiB): the shard read fails loudly."""
    plain = _plain(data_root, SAMPLES[1], tmp_path)
    packed = _compressed(plain, suffix)
    shards = byte_shards(packed, 3, tmp_path / "idx")
    data = bytearray(packed.read_bytes())
    mid = len(data) * 2 // 3
    data[mid:mid + 64] = bytes(64)
    packed.write_bytes(bytes(data))
    with pytest.raises(DumpError, match=rf"\.json\{suffix}: unreadable after byte offset \d+"):
        for sh in shards:
            for _ in read_wikidata_json(packed, sh):
                pass


def test_open_at_seeks_in_decompressed_offsets(data_root: Path, tmp_path: Path):
    plain = _plain(data_root, SAMPLES[1], tmp_path)
    raw = plain.read_bytes()
    for suffix in (".gz", ".bz2"):
        packed = _compressed(plain, suffix)
        index = seek_index(packed, tmp_path / "idx", threads=2)
        assert index.size == len(raw)
        with open_at(packed, index.path) as fh:
            for pos in (len(raw) - 10, 0, len(raw) // 3, 1_000_003):
                fh.seek(pos)
                assert fh.read(5000) == raw[pos:pos + 5000]


def test_thinned_gzip_index_seeks_right(data_root: Path, tmp_path: Path):
    """rapidgzip's GZTOOL index thinned to fewer points (what every default index is) still seeks exactly."""
    plain = _plain(data_root, SAMPLES[1], tmp_path)
    raw = plain.read_bytes()
    packed = _compressed(plain, ".gz")
    full = tmp_path / "full.gztool"
    dec = _decoder(packed, 2)
    try:
        while dec.readinto(bytearray(1 << 22)):
            pass
        native = len(dec.block_offsets())
        dec.export_index(str(full), rapidgzip.IndexFormat.GZTOOL)
    finally:
        dec.close()
    assert native >= 4
    for spacing, want in ((1, None), (3_000_000, None), (1 << 40, 1)):
        thin = tmp_path / f"thin{spacing}.gztool"
        kept = thin_gztool_index(full, thin, spacing)
        assert (want or 2) <= kept <= native and (want is None or kept == want)
        with open_at(packed, thin) as fh:
            for pos in (len(raw) - 7, 9_000_001, 12, 4_567_891, 0):
                fh.seek(pos)
                assert fh.read(70_000) == raw[pos:pos + 70_000], (spacing, pos)
    with pytest.raises(ValueError, match="not a GZTOOL index"):
        thin_gztool_index(plain, tmp_path / "x", 1)
