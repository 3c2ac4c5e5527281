"""Shared test helper: a small real KB (LitWD1K triples + labels/aliases + Wikidata properties) built in-process.

Used by the KG and KGQA unit tests (module-scoped fixtures), so both exercise the same real subgraph.
"""

from __future__ import annotations

from pathlib import Path

from tasks.kb.merge import merge_and_publish
from tasks.kb.plan import _spec, make_plan
from tasks.kb.stage import stage_shard


def build_litwd1k_kb(root: Path, data_root: Path, name: str) -> str:
    """Stage and merge the LitWD1K KB under ``root``; returns its version."""
    lw = data_root / "literallywikidata"
    specs = [
        _spec("triples", lw / "LitWD1K/train.txt", "literallywikidata", 1),
        _spec("triples", lw / "LitWD1K/numeric_literals.txt", "literallywikidata", 1),
        _spec("litwd-labels", lw / "Entities/entity_labels_en.txt", "literallywikidata", 1),
        _spec("litwd-aliases", lw / "Entities/entity_aliases_en.txt", "literallywikidata", 1),
        _spec("litwd-labels", lw / "Relations/relation_labels_en.txt", "literallywikidata", 1),
        _spec("properties-json", data_root / "wikidata-properties/properties.json.gz", "properties-json", 1),
    ]
    plan = make_plan(name, specs)
    for spec in specs:
        for shard in spec.shards:
            stage_shard(plan.version, spec, shard, root=root)
    merge_and_publish(plan, root=root, threads=2, log=lambda m: None)
    return plan.version
