"""How `kb build --shards N --workers W` cuts its inputs: line files and Wikipedia XML (plain, .bz2, .gz) into N
byte ranges of their (decompressed) bytes; an .xz XML file, which has no seek index, into at most W page-ordinal
shards (each of those decompresses and scans the whole file, so more of them than workers only repeat that work:
``make bench-scale`` measured 265 of 392 core-seconds in decompression with 7 such shards of a 1 GB XML).
Shards are not part of the KB version."""

from __future__ import annotations

import bz2
import lzma
from pathlib import Path

from tasks.kb.plan import plan_from_inputs

WD = "wikidata-entities/wikibase-dump-filter/entities.gz"
XML = "wikipedia-xml-dump/enwiki-pages-articles-sample.xml.bz2"


def _shards(plan) -> dict[str, int]:
    return {s.kind: len(s.shards) for s in plan.inputs}


def test_xml_takes_byte_range_shards_like_line_files(data_root: Path, home: Path) -> None:  # home: index cache
    inputs = {"wikidata": [str(data_root / WD)], "wikipedia": [str(data_root / XML)]}
    plan = plan_from_inputs(shards_per_file=7, workers=2, **inputs)
    assert _shards(plan) == {"wikidata-json": 7, "wikipedia": 7}
    (xml,) = [s for s in plan.inputs if s.kind == "wikipedia"]
    assert all(sh.seek_index for sh in xml.shards) and xml.shards[0].start == 0 and xml.shards[-1].end > 0
    assert [sh.end for sh in xml.shards[:-1]] == [sh.start for sh in xml.shards[1:]]  # they tile the stream
    assert plan.version == plan_from_inputs(shards_per_file=1, **inputs).version  # the same KB, however cut


def test_xz_xml_gets_at_most_one_ordinal_shard_per_worker(data_root: Path, home: Path, tmp_path: Path) -> None:
    xz = tmp_path / "enwiki-sample.xml.xz"
    xz.write_bytes(lzma.compress(bz2.decompress((data_root / XML).read_bytes())))
    inputs = {"wikidata": [str(data_root / WD)], "wikipedia": [str(xz)]}
    capped = plan_from_inputs(shards_per_file=7, workers=2, **inputs)
    assert _shards(capped) == {"wikidata-json": 7, "wikipedia": 2}
    (xml,) = [s for s in capped.inputs if s.kind == "wikipedia"]
    assert [(sh.index, sh.count, sh.seek_index) for sh in xml.shards] == [(0, 2, None), (1, 2, None)]
    assert _shards(plan_from_inputs(shards_per_file=3, workers=8, **inputs)) == {"wikidata-json": 3, "wikipedia": 3}
    assert _shards(plan_from_inputs(shards_per_file=4, workers=1, **inputs)) == {"wikidata-json": 4, "wikipedia": 1}
    # without a worker count (a caller that passes none) the XML takes --shards uncapped
    uncapped = plan_from_inputs(shards_per_file=7, **inputs)
    assert _shards(uncapped) == {"wikidata-json": 7, "wikipedia": 7}
    assert capped.version == uncapped.version
