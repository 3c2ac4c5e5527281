"""KB build steps are skip-if-done and resumable (library level, real small inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import part_files, read_table
from tasks.kb.merge import merge_and_publish
from tasks.kb.plan import _spec, make_plan
from tasks.kb.stage import DONE, shard_dir, stage_shard


def test_stage_skip_resume_and_merge_idempotence(home: Path, data_root: Path, monkeypatch):
    specs = [
        _spec("codex-json", data_root / "codex/relations/en/relations.json", "codex", 1),
        _spec("litwd-labels", data_root / "literallywikidata/Relations/relation_labels_en.txt", "literallywikidata", 1),
        _spec("triples", data_root / "codex/triples/codex-s/valid.txt", "codex", 1),
    ]
    plan = make_plan("t", specs)
    first = stage_shard(plan.version, specs[0], specs[0].shards[0])
    assert not first["skipped"] and first["rows"]["properties"] == 71
    assert stage_shard(plan.version, specs[0], specs[0].shards[0])["skipped"]

    # a shard that dies mid-read leaves no marker and no visible part; the next attempt recomputes it
    import tasks.kb.stage as stage_mod

    real = stage_mod._reader

    def dying(spec, shard):
        for i, item in enumerate(real(spec, shard)):
            if i == 100:
                raise KeyboardInterrupt("killed")
            yield item

    monkeypatch.setattr(stage_mod, "_reader", dying)
    with pytest.raises(KeyboardInterrupt):
        stage_shard(plan.version, specs[2], specs[2].shards[0])
    d = shard_dir(plan.version, specs[2], specs[2].shards[0])
    assert not (d / DONE).exists() and not list(d.glob("*.parquet"))
    monkeypatch.setattr(stage_mod, "_reader", real)
    again = stage_shard(plan.version, specs[2], specs[2].shards[0])
    assert not again["skipped"] and again["rows"]["claims"] == sum(1 for _ in open(specs[2].path))

    with pytest.raises(RuntimeError, match="shard not staged"):
        merge_and_publish(plan)  # specs[1] was never staged
    stage_shard(plan.version, specs[1], specs[1].shards[0])
    counts = merge_and_publish(plan, log=lambda m: None)
    assert read_manifest(layout.kb_dir(plan.version))["row_counts"] == counts
    claims = part_files(layout.kb_table_dir(plan.version, "claims"))
    mtimes = [p.stat().st_mtime_ns for p in claims]
    assert merge_and_publish(plan, log=lambda m: None) == counts  # finished tables are not rewritten
    assert [p.stat().st_mtime_ns for p in claims] == mtimes
    props = read_table(layout.kb_table_dir(plan.version, "properties"), "properties").to_pylist()
    assert len({p["pid"] for p in props}) == len(props)  # one row per property after merging two sources
