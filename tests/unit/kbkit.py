"""Shared test helpers: small real KBs built in-process (LitWD1K for the KG/KGQA tests, ``build_tog_kb`` for the
open-world KGQA tests).

LitWD1K: triples + labels/aliases + Wikidata properties.

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


def build_tog_kb(root: Path, data_root: Path, name: str) -> str:
    """Stage and merge a small real KB for the open-world KGQA tests under ``root``; returns its version.

    The sample KB's real Wikidata entity documents (735 entities with all their claims: countries, cities, people
    that many CWQ/WebQuestions topic entities are), the Wikidata property labels, the Wikipedia title map, and
    KGTK's English labels/aliases/descriptions so that their neighbours have names. Its KG has ~3.2k named nodes,
    so AnchorRAG's dense entity index builds in seconds (the full sample KB has ~117k).
    """
    from tasks.kb.plan import sample_inputs

    keep_kgtk = ("labels.en", "aliases.en", "descriptions.en")
    specs = [s for s in sample_inputs(data_root)
             if s.kind in ("wikidata-json", "entity-file", "properties-json", "title-map")
             or (s.kind == "kgtk" and any(k in Path(s.path).name for k in keep_kgtk))]
    plan = make_plan(name, specs)
    for spec in specs:
        for shard in spec.shards:
            stage_shard(plan.version, spec, shard, root=root)
    merge_and_publish(plan, root=root, threads=2, log=lambda m: None)
    return plan.version
