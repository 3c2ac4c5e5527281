"""KG access: DuckDB store vs an independent pyarrow computation, N-Triples export, a real Oxigraph server queried
through SparqlKG (same facts), SPARQL injection, invalid ids, endpoint down and slow.

The KB is built from real LitWD1K data (train triples + numeric literals, entity labels and aliases, relation
labels, Wikidata properties.json.gz) with the library (no Prefect), once for the module.
"""

from __future__ import annotations

import collections
import gzip
import http.server
import json
import threading
import time
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyoxigraph
import pytest
from kbkit import build_litwd1k_kb

from storage import layout
from storage.catalog import register_parquet_view
from storage.done import DONE
from storage.parquet_io import part_files, read_table
from tasks.kg.base import Fact, KGClient, KGError, KGTimeout, fact_sort_key
from tasks.kg.duckdb_store import (
    ART_BYTES_PER_ROW,
    ART_KEYS,
    TABLES,
    DuckDBKG,
    art_plan,
    build_index,
    index_folder,
    read_index_meta,
)
from tasks.kg.export_nt import export_ntriples, literal_term, nt_string
from tasks.kg.oxigraph_server import OxigraphServer
from tasks.kg.sparql import Ids, SparqlKG, Texts, render, sparql_string
from tasks.kg.truthy import create_truthy_claims

INJECTIONS = ['x" } ; DROP ALL ; #', "}", "a\nb", "'", "x' } DELETE WHERE { ?s ?p ?o } #", '\\" } #',
              "\\u0022 } ; DROP ALL ; #", "\r\n\t{ }", '"""', "\\"]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, data_root: Path):
    root = tmp_path_factory.mktemp("kg") / "warehouse"
    mp = pytest.MonkeyPatch()
    mp.setenv("LINKEDQA_HOME", str(root))
    version = build_litwd1k_kb(root, data_root, "kgtest")
    yield root, version
    mp.undo()


@pytest.fixture(scope="module")
def duck(kb) -> DuckDBKG:
    root, version = kb
    kg = DuckDBKG(version, root=root)
    yield kg
    kg.close()


@pytest.fixture(scope="module")
def expected(kb):
    """Independent computation over the published claims Parquet (pyarrow + dicts, no SQL)."""
    root, version = kb
    claims = read_table(layout.kb_table_dir(version, "claims", root), "claims")
    assert set(pc.unique(claims["rank"]).to_pylist()) <= {"truthy", "normal"}  # best-rank rule is trivial here
    ents = read_table(layout.kb_table_dir(version, "entities", root), "entities", ["qid", "label"]).to_pylist()
    props = read_table(layout.kb_table_dir(version, "properties", root), "properties", ["pid", "label"]).to_pylist()
    names = {r["qid"]: r["label"] for r in ents if r["label"]}
    names.update({r["pid"]: r["label"] for r in props if r["label"]})
    out, inc = collections.defaultdict(list), collections.defaultdict(list)
    for r in claims.to_pylist():
        if r["object_qid"] is None and r["object_value"] in (None, "<somevalue>", "<novalue>"):
            continue
        f = Fact(r["subject"], r["property"], names.get(r["property"]), r["object_qid"],
                 r["object_value"] if r["object_qid"] is None else None,
                 names.get(r["object_qid"]) if r["object_qid"] else None, r["datatype"], names.get(r["subject"]))
        out[r["subject"]].append(f)
        if r["object_qid"]:
            inc[r["object_qid"]].append(f)
    for d in (out, inc):
        for v in d.values():
            v.sort(key=fact_sort_key)
    return {"out": out, "in": inc, "names": names}


def _entities(expected) -> list[str]:
    """A few real entities: literal-rich, hub (many incoming), and plain ones."""
    out, inc = expected["out"], expected["in"]
    hub = max(inc, key=lambda q: len(inc[q]))
    literal = next(q for q in sorted(out) if any(f.object_value for f in out[q]) and q in inc)
    plain = sorted(q for q in out if q in inc and q not in (hub, literal))[:3]
    return [hub, literal, *plain, "Q999999999"]  # the last one is absent from the KB


def test_duckdb_matches_independent_computation(duck, expected, kb):
    qids = _entities(expected)
    assert isinstance(duck, KGClient)
    got_out, got_in = duck.outgoing(qids), duck.incoming(qids)
    for q in qids:
        assert got_out[q] == expected["out"].get(q, []), q
        assert got_in[q] == expected["in"].get(q, []), q
    assert got_out["Q999999999"] == [] and got_in["Q999999999"] == []
    assert any(f.datatype == "quantity" and f.object_value for f in got_out[qids[1]])

    rels = duck.relations(qids)
    for q in qids:
        want = collections.Counter((f.property, "out") for f in expected["out"].get(q, []))
        want.update((f.property, "in") for f in expected["in"].get(q, []))
        assert {(r.pid, r.direction): r.count for r in rels[q]} == dict(want)
        assert all(r.label == expected["names"].get(r.pid) for r in rels[q])
        assert [r.direction for r in rels[q]] == sorted((r.direction for r in rels[q]), key=lambda d: d != "out")

    hub, lit = qids[0], qids[1]
    p_in = expected["in"][hub][0].property
    p_out = expected["out"][lit][0].property
    pairs = [(hub, p_in, "in"), (lit, p_out, "out"), (lit, "P999999", "out"), (hub, p_in, "in")]
    got = duck.neighbours(pairs)
    assert got[0] == [f for f in expected["in"][hub] if f.property == p_in] == got[3]
    assert got[1] == [f for f in expected["out"][lit] if f.property == p_out]
    assert got[2] == []

    limited = duck.outgoing([lit, hub], limit_per_entity=3)
    assert limited[lit] == expected["out"][lit][:3]
    assert duck.incoming([hub], limit_per_entity=2)[hub] == expected["in"][hub][:2]

    labels = duck.labels([hub, p_in, "Q999999999"])
    assert labels == {hub: expected["names"][hub], p_in: expected["names"][p_in], "Q999999999": None}
    label = expected["names"][lit]
    hits = duck.search_label([label.upper(), label, "no such label at all", ""])
    assert lit in hits[0] and hits[0] == hits[1] and hits[2] == [] and hits[3] == []

    meta = index_folder(kb[1], kb[0]) / DONE
    assert meta.is_file()
    mtime = meta.stat().st_mtime_ns
    assert build_index(kb[1], kb[0]) == meta.parent and meta.stat().st_mtime_ns == mtime  # built once


def test_parquet_layout_gives_same_answers_and_is_sorted(duck, expected, kb):
    qids = _entities(expected)
    with DuckDBKG(kb[1], root=kb[0], layout_name="parquet") as other:
        assert other.outgoing(qids) == duck.outgoing(qids)
        assert other.incoming(qids, limit_per_entity=5) == duck.incoming(qids, limit_per_entity=5)
        assert other.relations(qids) == duck.relations(qids)
        assert other.search_label(["Gabon", "gabon"]) == duck.search_label(["Gabon", "gabon"])
    pf = pq.ParquetFile(index_folder(kb[1], kb[0], "parquet") / "kg_by_subject.parquet")
    col = pf.schema_arrow.get_field_index("subject")
    stats = [pf.metadata.row_group(i).column(col).statistics for i in range(pf.metadata.num_row_groups)]
    assert len(stats) > 1 and all(a.max <= b.min for a, b in zip(stats, stats[1:], strict=False))


def test_art_indexes_are_planned_by_their_build_memory():
    full = {"kg_by_subject": 1_600_000_000, "kg_by_object": 1_200_000_000, "kg_labels": 115_000_000,
            "kg_names": 150_000_000}
    plan = art_plan(full, "16GB")  # the full dump at auto on 64 GB: the subject index alone would need ~31 GB
    assert plan["kg_by_subject"] == int(1_600_000_000 * 19.4) and plan["kg_labels"] is None
    at_3m = {"kg_by_subject": 41_000_000, "kg_by_object": 30_000_000, "kg_labels": 3_000_000, "kg_names": 9_000_000}
    assert all(v is None for v in art_plan(at_3m, "6300MB").values())


def test_an_art_index_over_the_budget_is_left_out_and_lookups_stay_the_same(duck, expected, kb, tmp_path):
    root, version = kb
    other = tmp_path / "warehouse"
    (other / "kb").mkdir(parents=True)
    (other / "kb" / version).symlink_to(layout.kb_dir(version, root))  # the same KB tables, another index folder
    build_index(version, root)  # the default build (the duck fixture builds it lazily, maybe not yet)
    counts = read_index_meta(version, root)["row_counts"]
    budget = int(counts["kg_by_object"] * ART_BYTES_PER_ROW["kg_by_object"])  # the subject index needs more
    lines: list[str] = []
    folder = build_index(version, other, art_budget=budget, log=lines.append)
    meta = read_index_meta(version, other)
    fits = [t for t in ART_KEYS if counts[t] * ART_BYTES_PER_ROW[t] <= budget]
    assert "kg_by_subject" not in fits and "kg_by_object" in fits
    assert meta["art"] == fits and set(meta["art_skipped"]) == set(ART_KEYS) - set(fits)
    assert meta["row_counts"] == counts
    assert any("no ART index on kg_by_subject.subject" in line for line in lines)
    # each table and each ART index built is one progress line with its rows and seconds, kept in the marker
    assert set(meta["step_seconds"]) == {"kg_preferred", *TABLES} | {f"art {t}" for t in fits}
    for t in TABLES:
        assert any(line.startswith(f"  kg-duckdb: {t} {counts[t]:,} rows in ") for line in lines), t
    with duckdb.connect(str(folder / "kg.duckdb"), read_only=True) as con:
        built = {r[0] for r in con.execute("SELECT table_name FROM duckdb_indexes()").fetchall()}
    assert built == set(fits)
    qids = _entities(expected)
    with DuckDBKG(version, root=other) as kg:
        assert kg.outgoing(qids) == duck.outgoing(qids)
        assert kg.incoming(qids, limit_per_entity=5) == duck.incoming(qids, limit_per_entity=5)
        assert kg.relations(qids) == duck.relations(qids)
        assert kg.labels(qids) == duck.labels(qids)
        assert kg.search_label(["Gabon", "gabon"]) == duck.search_label(["Gabon", "gabon"])


def test_kg_by_object_holds_every_item_valued_truthy_claim(kb):
    root, version = kb
    folder = build_index(version, root)
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{folder / 'kg.duckdb'}' AS kg (READ_ONLY)")
        for table in ("claims", "entities", "properties"):
            files = [(f, {}) for f in part_files(layout.kb_table_dir(version, table, root))]
            register_parquet_view(con, f"kb_{table}", files, table, root)
        create_truthy_claims(con)
        item = "SELECT * FROM kg_claims WHERE object_qid IS NOT NULL"
        assert con.execute(f"SELECT count(*) FROM ({item})").fetchone()[0] > 0
        for a, b in ((item, "SELECT * FROM kg.kg_by_object"), ("SELECT * FROM kg.kg_by_object", item)):
            assert con.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b})").fetchone()[0] == 0


def test_truthy_claims_equal_the_rule_as_a_correlated_not_exists(sample_kb, session_home):
    """kg_claims (a left join against the kg_preferred temp table, tasks.kg.truthy) holds the same rows, with
    the same multiplicity, as the plain statement of the best-rank rule: a claim is dropped when deprecated, or
    when normal and a preferred claim of its (subject, property) exists (the form used before, which DuckDB
    planned as a hash table over every claim)."""
    root, version = session_home, sample_kb
    rule = """
        SELECT c.subject, c.property, c.object_qid,
               CASE WHEN c.object_qid IS NULL THEN c.object_value END AS object_value, c.datatype
        FROM kb_claims AS c
        WHERE coalesce(c."rank", 'normal') <> 'deprecated'
          AND regexp_full_match(c.subject, '[QP][1-9][0-9]*') AND regexp_full_match(c.property, 'P[1-9][0-9]*')
          AND CASE WHEN c.object_qid IS NOT NULL THEN regexp_full_match(c.object_qid, '[QP][1-9][0-9]*')
                   ELSE c.object_value IS NOT NULL AND c.object_value NOT IN ('<somevalue>', '<novalue>') END
          AND (c."rank" IN ('preferred', 'truthy') OR NOT EXISTS (
              SELECT 1 FROM kb_claims AS p
              WHERE p."rank" = 'preferred' AND p.subject = c.subject AND p.property = c.property))"""
    with duckdb.connect() as con:
        files = [(f, {}) for f in part_files(layout.kb_table_dir(version, "claims", root))]
        register_parquet_view(con, "kb_claims", files, "claims", root)
        create_truthy_claims(con)
        hidden = con.execute("SELECT count(*) FROM kb_claims AS c JOIN kg_preferred AS p USING (subject, property) "
                             "WHERE c.\"rank\" = 'normal'").fetchone()[0]
        assert hidden > 0  # the sample KB (real dump lines) has normal claims that a preferred one hides
        n = con.execute("SELECT count(*) FROM kg_claims").fetchone()[0]
        assert n == con.execute(f"SELECT count(*) FROM ({rule})").fetchone()[0] > 0
        for a, b in (("SELECT * FROM kg_claims", rule), (rule, "SELECT * FROM kg_claims")):
            assert con.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b})").fetchone()[0] == 0


def test_an_art_index_that_runs_out_of_memory_is_left_out(kb, tmp_path):
    from tasks.kg.duckdb_store import _create_art

    root, version = kb
    built = build_index(version, root) / "kg.duckdb"
    with duckdb.connect(str(built), read_only=True) as con:
        rows = con.execute("SELECT count(*) FROM kg_by_subject").fetchone()[0]
    db = tmp_path / "kg.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"ATTACH '{built}' AS src (READ_ONLY)")
        con.execute("CREATE TABLE kg_by_subject AS SELECT * FROM src.kg_by_subject")
    lines: list[str] = []
    with duckdb.connect(str(db)) as con:
        con.execute("SET threads = 1")
        con.execute("SET memory_limit = '1MB'")  # the estimate said it fits; DuckDB cannot hold it
        assert not _create_art(con, "kg_by_subject", {"kg_by_subject": None}, lines.append)
        assert con.execute("SELECT count(*) FROM duckdb_indexes()").fetchone()[0] == 0
        con.execute("SET memory_limit = '1GB'")
        assert con.execute("SELECT count(*) FROM kg_by_subject").fetchone()[0] == rows  # the table is intact
    assert lines and "ran out of memory" in lines[0]


def test_invalid_ids_raise(duck):
    for bad in (["Q1 } DROP ALL"], ["X12"], ["Q0"], ["q42"], [42], ["Q1\n"]):
        with pytest.raises(KGError):
            duck.outgoing(bad)
    with pytest.raises(KGError):
        duck.neighbours([("Q1", "P17", "sideways")])
    with pytest.raises(KGError):
        duck.neighbours([("Q1", "Q17", "out")])
    with pytest.raises(KGError):
        duck.outgoing(["Q1"], limit_per_entity=0)
    with pytest.raises(KGError):
        render("outgoing", items=Ids(['Q1" } ; DROP ALL ; #']), limit=5)
    with pytest.raises(KGError):
        render("outgoing", items="Q1", limit=5)  # bare strings are never pasted
    with pytest.raises(KGError):
        render("outgoing", items=Ids(["Q1"]))  # missing placeholder value


def test_escaping_round_trips_through_a_real_parser():
    """Every nasty text survives N-Triples writing and SPARQL quoting: the exact label is found, nothing else."""
    evil = [*INJECTIONS, "plain", "tab\there", "ünïcödé ☃", "back\\slash\\u0041"]
    nt = "".join(f"<http://www.wikidata.org/entity/Q{i + 1}> <http://www.w3.org/2000/01/rdf-schema#label> "
                 f"{nt_string(t)}@en .\n" for i, t in enumerate(evil))
    store = pyoxigraph.Store()
    store.load(nt.encode(), format=pyoxigraph.RdfFormat.N_TRIPLES)
    assert len(store) == len(evil)
    for i, t in enumerate(evil):
        rows = list(store.query(render("search_label", names=Texts([t]))))
        assert [r["item"].value for r in rows] == [f"http://www.wikidata.org/entity/Q{i + 1}"], t
        assert rows[0]["name"].value == t
    assert sparql_string('a"b') == '"a\\"b"'
    assert literal_term("1960-05-01", "time") == '"1960-05-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>'
    assert literal_term("1960", "time").endswith("#gYear>")
    assert literal_term("0.5", "quantity").endswith("#decimal>")
    assert literal_term("+0.50", "quantity") == '"+0.50"'  # non-canonical numbers stay strings (lossless)


def test_sparql_over_oxigraph_returns_the_same_facts(duck, expected, kb, tmp_path):
    root, version = kb
    nt = tmp_path / "kb.nt.gz"
    counts = export_ntriples(version, nt, root=root)
    meta = json.loads((build_index(version, root) / DONE).read_text())
    assert counts["claims"] == meta["row_counts"]["kg_by_subject"]
    with gzip.open(nt, "rt", encoding="utf-8") as fh:
        lines = sum(1 for _ in fh)
    assert lines == counts["triples"] > counts["claims"] > 0

    qids = _entities(expected)
    with OxigraphServer() as srv:
        srv.load_ntriples(nt)
        kg = SparqlKG(srv.query_url, timeout_s=10, retries=1)
        assert isinstance(kg, KGClient)
        n_before = int(kg.select(render("count_triples"))[0]["n"]["value"])
        assert n_before == counts["triples"]

        assert kg.outgoing(qids) == duck.outgoing(qids)
        assert kg.incoming(qids) == duck.incoming(qids)
        assert kg.relations(qids) == duck.relations(qids)
        assert kg.outgoing(qids, limit_per_entity=4) == duck.outgoing(qids, limit_per_entity=4)
        assert kg.incoming(qids[:2], limit_per_entity=3) == duck.incoming(qids[:2], limit_per_entity=3)
        hub, lit = qids[0], qids[1]
        pairs = [(hub, expected["in"][hub][0].property, "in"), (lit, expected["out"][lit][-1].property, "out")]
        assert kg.neighbours(pairs) == duck.neighbours(pairs)
        ids = [hub, lit, expected["in"][hub][0].property, "Q999999999"]
        assert kg.labels(ids) == duck.labels(ids)
        label = expected["names"][lit]
        texts = [label, label.lower(), "no such label at all"]
        assert kg.search_label(texts) == duck.search_label(texts)

        assert kg.search_label(INJECTIONS) == [[] for _ in INJECTIONS]
        assert duck.search_label(INJECTIONS) == [[] for _ in INJECTIONS]
        assert int(kg.select(render("count_triples"))[0]["n"]["value"]) == n_before
        with pytest.raises(KGError):
            kg.outgoing(['Q1" } ; DROP ALL ; #'])

        srv.stop()  # endpoint down: a clear error, quickly, bounded by timeout * attempts
        down = SparqlKG(srv.query_url, timeout_s=2, retries=2, backoff_s=0.05)
        t0 = time.perf_counter()
        with pytest.raises(KGError, match="failed after 3 attempt"):
            down.outgoing([hub])
        assert time.perf_counter() - t0 < 3


class _Sleepy(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - stdlib handler name
        time.sleep(10)  # far beyond the client's timeout, so a slow machine cannot blur the bound
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_slow_endpoint_times_out():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sleepy)  # bound now: no port race
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kg = SparqlKG(f"http://127.0.0.1:{server.server_address[1]}/query", timeout_s=0.4, retries=1,
                      backoff_s=0.05)
        t0 = time.perf_counter()
        with pytest.raises(KGTimeout, match="no answer within 0.4s"):
            kg.labels(["Q42"])
        assert time.perf_counter() - t0 < 6  # 2 attempts of 0.4 s; an answer would take 10 s
    finally:
        server.shutdown()
        server.server_close()


def test_truthy_rule_best_rank_and_placeholders(tmp_path: Path):
    """kg_claims.sql: preferred hides normal, deprecated dropped, truthy kept, placeholders and bad ids dropped."""
    from storage.parquet_io import write_table

    root, version = tmp_path / "w", "synthetic"
    rows = [
        ("Q1", "P1082", None, "100", "quantity", "normal"),
        ("Q1", "P1082", None, "200", "quantity", "preferred"),
        ("Q1", "P1082", None, "50", "quantity", "deprecated"),
        ("Q1", "P17", "Q2", None, "wikibase-item", "normal"),
        ("Q1", "P17", "Q3", None, "wikibase-item", "deprecated"),
        ("Q1", "P40", None, "<novalue>", "wikibase-item", "normal"),
        ("Q1", "P26", None, "<somevalue>", "wikibase-item", "normal"),
        ("Q1", "P31", "Q5", None, "wikibase-item", "truthy"),
        ("Q1", "P31", "Q6", None, "wikibase-item", "preferred"),
        ("Q1", "P1", "L12", None, "wikibase-lexeme", "normal"),
        ("Q2", "P17", "Q2", None, "wikibase-item", "normal"),
        ("Q1", "P1082", None, "300", "quantity", None),  # no rank: as normal, so hidden by the preferred 200
        ("Q2", "P31", "Q5", None, "wikibase-item", None),  # no rank, no preferred claim of (Q2, P31): kept
    ]
    cols = ("subject", "property", "object_qid", "object_value", "datatype", "rank")
    write_table([{**dict(zip(cols, r, strict=True)), "source": "test"} for r in rows], "claims",
                layout.kb_table_dir(version, "claims", root) / "part-00000-of-00001.parquet")
    with DuckDBKG(version, root=root) as kg:
        got = {(f.property, f.object_qid or f.object_value) for f in kg.outgoing(["Q1"])["Q1"]}
        assert got == {("P1082", "200"), ("P17", "Q2"), ("P31", "Q5"), ("P31", "Q6")}
        assert [f.subject for f in kg.incoming(["Q2"])["Q2"]] == ["Q1", "Q2"]
        assert kg.labels(["Q1"]) == {"Q1": None}
        assert [(f.property, f.object_qid) for f in kg.outgoing(["Q2"])["Q2"]] == [("P17", "Q2"), ("P31", "Q5")]
    counts = export_ntriples(version, tmp_path / "s.nt", root=root)
    assert counts["claims"] == 6 and counts["triples"] == 6
    text = (tmp_path / "s.nt").read_text()
    assert '"200"^^<http://www.w3.org/2001/XMLSchema#decimal>' in text and "L12" not in text


def test_oxigraph_store_from_parallel_parts_holds_the_one_file_triples(kb, tmp_path, monkeypatch):
    """``kb index --kind kg-oxigraph --workers 3``: three processes' N-Triples parts bulk-loaded at once into one
    store hold exactly the triples of the one-file export."""
    import tasks.kg.oxigraph_store as store_mod

    root, version = kb
    monkeypatch.setattr(store_mod, "_OPEN", {})
    folder = store_mod.store_folder(version, root)
    assert not folder.exists()
    store = store_mod.open_store(version, root, workers=3)
    meta = store_mod.read_store_meta(version, root)
    assert len(store) == meta["export"]["triples"] > 0
    assert not (folder / "parts").exists() and not list(folder.parent.glob(f"{folder.name}.tmp-*"))
    nt = tmp_path / "one.nt"
    assert export_ntriples(version, nt, root=root) == meta["export"]
    one = pyoxigraph.Store()
    one.bulk_load(path=str(nt), format=pyoxigraph.RdfFormat.N_TRIPLES)
    assert {str(q) for q in store} == {str(q) for q in one}
