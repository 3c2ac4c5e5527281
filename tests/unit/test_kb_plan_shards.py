"""How `kb build --shards N --workers W` cuts its inputs: line files into N byte ranges, a Wikipedia XML file into at
most W page shards (each XML shard decompresses and scans the whole file, so more shards than workers only repeat
that work: ``make bench-scale`` measured 265 of 392 core-seconds in decompression with 7 shards of a 1 GB XML).
Shards are not part of the KB version."""

from __future__ import annotations

from pathlib import Path

from tasks.kb.plan import plan_from_inputs

WD = "wikidata-entities/wikibase-dump-filter/entities.gz"
XML = "wikipedia-xml-dump/enwiki-pages-articles-sample.xml.bz2"


def _shards(plan) -> dict[str, int]:
    return {s.kind: len(s.shards) for s in plan.inputs}


def test_xml_gets_at_most_one_shard_per_worker(data_root: Path, home: Path) -> None:  # home: the seek-index cache
    inputs = {"wikidata": [str(data_root / WD)], "wikipedia": [str(data_root / XML)]}
    capped = plan_from_inputs(shards_per_file=7, workers=2, **inputs)
    assert _shards(capped) == {"wikidata-json": 7, "wikipedia": 2}
    assert _shards(plan_from_inputs(shards_per_file=3, workers=8, **inputs)) == {"wikidata-json": 3, "wikipedia": 3}
    assert _shards(plan_from_inputs(shards_per_file=4, workers=1, **inputs)) == {"wikidata-json": 4, "wikipedia": 1}
    # without a worker count (the API's old call) the XML takes --shards as before
    uncapped = plan_from_inputs(shards_per_file=7, **inputs)
    assert _shards(uncapped) == {"wikidata-json": 7, "wikipedia": 7}
    assert capped.version == uncapped.version  # the same KB, however it is cut
