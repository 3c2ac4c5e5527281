"""The KB says what the dump says about ranks: a statement stated twice with two ranks keeps the stronger, the
truthy claims follow Wikidata's own truthy rule, and ``instance_of`` leaves deprecated P31 values out.

The reference is computed here from the raw JSON lines of a real dump (``wikibase-dump-filter/entities.gz``: 50
entities, 61 (subject, property) pairs with mixed ranks, 5 values stated twice with two ranks), the way Wikidata's
truthy dump (``wdt:``) is defined: for each (subject, property), the values of its best-rank statements, where the
best rank is ``preferred`` when the pair has a preferred statement, else ``normal``; deprecated statements are
never truthy. The KB side is the real build (stage, merge) and the real truthy SQL (``tasks.kg.truthy``).
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from storage import layout
from storage.catalog import register_parquet_view
from storage.parquet_io import part_files
from tasks.kb.merge import merge_and_publish
from tasks.kb.plan import _spec, make_plan
from tasks.kb.stage import stage_shard
from tasks.kg.truthy import create_truthy_claims

DUMP = "wikidata-entities/wikibase-dump-filter/entities.gz"
RANK_ORDER = {"preferred": 0, "normal": 1, "deprecated": 2}


def _item_statements(path: Path) -> list[tuple[str, str, str, str]]:
    """``(subject, property, object QID, rank)`` of every item-valued statement of the dump's lines."""
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            entity = json.loads(line)
            for prop, statements in entity.get("claims", {}).items():
                for st in statements:
                    value = (st["mainsnak"].get("datavalue") or {}).get("value")
                    if isinstance(value, dict) and value.get("entity-type") == "item" and value.get("id"):
                        out.append((entity["id"], prop, value["id"], st.get("rank", "normal")))
    return out


def truthy_reference(statements: list[tuple[str, str, str, str]]) -> set[tuple[str, str, str]]:
    """Wikidata's truthy rule over raw statements: per (subject, property), the values of the best-rank statements."""
    by_pair: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for s, p, o, rank in statements:
        by_pair[(s, p)].append((o, rank))
    out = set()
    for (s, p), values in by_pair.items():
        ranks = {r for _, r in values} - {"deprecated"}
        if not ranks:
            continue
        best = min(ranks, key=RANK_ORDER.__getitem__)
        out |= {(s, p, o) for o, r in values if r == best}
    return out


@pytest.fixture(scope="module")
def rank_kb(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> tuple[Path, str]:
    """The real build of the dump file alone (stage, merge, publish): ``(root, version)``."""
    root = tmp_path_factory.mktemp("ranks") / "warehouse"
    spec = _spec("wikidata-json", data_root / DUMP, "wikidata-json", 1)
    plan = make_plan("ranks", [spec])
    for shard in spec.shards:
        stage_shard(plan.version, spec, shard, root=root)
    merge_and_publish(plan, root=root, threads=2, log=lambda m: None)
    return root, plan.version


def _con(root: Path, version: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for table in ("claims", "entities"):
        files = [(f, {}) for f in part_files(layout.kb_table_dir(version, table, root))]
        register_parquet_view(con, f"kb_{table}", files, table, root)
    return con


def test_a_value_stated_with_two_ranks_keeps_the_stronger(rank_kb, data_root: Path) -> None:
    statements = _item_statements(data_root / DUMP)
    ranks: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for s, p, o, r in statements:
        ranks[(s, p, o)].add(r)
    twice = {k: min(v, key=RANK_ORDER.__getitem__) for k, v in ranks.items() if len(v) > 1}
    assert twice, "the dump file has no value stated with two ranks: the test data changed"
    with _con(*rank_kb) as con:
        stored = {(s, p, o): r for s, p, o, r in con.execute(
            'SELECT subject, property, object_qid, "rank" FROM kb_claims WHERE object_qid IS NOT NULL').fetchall()}
    assert {k: stored[k] for k in twice} == twice


def test_truthy_claims_follow_wikidatas_truthy_rule_on_mixed_ranks(rank_kb, data_root: Path) -> None:
    statements = _item_statements(data_root / DUMP)
    reference = truthy_reference(statements)
    mixed = {(s, p) for s, p, _, r in statements} & {(s, p) for s, p, _, r in statements if r != "normal"}
    assert len(mixed) >= 10, "too few (subject, property) pairs with another rank than normal: the data changed"
    with _con(*rank_kb) as con:
        create_truthy_claims(con)
        kb = set(con.execute("SELECT subject, property, object_qid FROM kg_claims "
                             "WHERE object_qid IS NOT NULL").fetchall())
    subjects = {s for s, _, _, _ in statements}
    kb = {t for t in kb if t[0] in subjects}
    assert kb == reference, (sorted(kb - reference)[:10], sorted(reference - kb)[:10])


def test_instance_of_leaves_deprecated_p31_out(rank_kb, data_root: Path) -> None:
    statements = _item_statements(data_root / DUMP)
    expected: dict[str, set[str]] = defaultdict(set)
    for s, p, o, r in statements:
        if p == "P31" and r != "deprecated":
            expected[s].add(o)
    with _con(*rank_kb) as con:
        got = {q: set(v) for q, v in con.execute("SELECT qid, instance_of FROM kb_entities").fetchall()
               if q in {s for s, _, _, _ in statements}}
    assert {q: v for q, v in got.items() if v} == dict(expected)
