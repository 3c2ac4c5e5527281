"""Shared test helpers: small real KBs built in-process (LitWD1K for the KG/KGQA tests, ``build_tog_kb`` for the
open-world KGQA tests and, through the ``tog_kb_template`` fixture, for the dense-index tests).

LitWD1K: triples + labels/aliases + Wikidata properties.

Used by the KG and KGQA unit tests (module-scoped fixtures), so both exercise the same real subgraph.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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


#: The ``build_tog_kb`` name of the KB the ``tog_kb_template`` fixture builds (tests/conftest.py).
TOG_KB_NAME = "togkb"


def build_tog_template(root: Path, data_root: Path) -> str:
    """``build_tog_kb`` under ``root`` with its dense entity and entity BM25 indexes (flat dense index, whatever
    ``LINKEDQA_DENSE_INDEX`` says: ``test_dense_ann`` reads its vectors back); returns the KB version.

    Built once per pytest run by the ``tog_kb_template`` fixture (tests/conftest.py): encoding the 6,388 entity
    texts is ~30 s on 2 cores, and the AnchorRAG unit tests, the AnchorRAG end-to-end tests and the dense-index
    tests all need them. Tests never write to it: they copy it (:func:`copy_tog_kb`) or only read its files.
    """
    from tasks.search import dense_ann
    from tasks.search.kb_indexes import ensure_index

    version = build_tog_kb(root, data_root, TOG_KB_NAME)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(dense_ann.ENV, raising=False)
        for kind in ("entity-dense", "entity-bm25"):
            ensure_index(version, kind, root)
    return version


def copy_tog_kb(template: tuple[Path, str], root: Path) -> str:
    """Copy the template warehouse (:func:`build_tog_template`) to ``root`` (a warehouse of the test's own, so
    its runs and catalog stay apart), without the KB's staging; returns the KB version. The template holds no
    catalog and no file in it names its folder, so the copy is a KB of its own."""
    shutil.copytree(template[0], root, ignore=shutil.ignore_patterns("_staging"))
    return template[1]
