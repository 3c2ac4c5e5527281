"""End-to-end: the sample KB from every real file, through the real Prefect flow, queried via the catalog."""

from __future__ import annotations

import gzip
import time

import duckdb
import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import part_files


@pytest.fixture()
def con(kb_home: str):
    c = duckdb.connect(str(layout.catalog_path()), read_only=True)
    yield c
    c.close()


def q1(con, sql: str, *params):
    return con.execute(sql, list(params)).fetchall()[0][0]


def test_sample_kb_meets_the_measured_expectations(kb_home: str, con):
    assert q1(con, "select count(*) from latest_entities where label is not null") > 110_000
    assert q1(con, "select count(*) from latest_claims where object_qid is not null") > 400_000
    assert q1(con, "select count(*) from latest_articles where n_words > 0") > 100
    assert q1(con, "select count(*) from latest_redirects") > 90
    assert q1(con, "select count(*) from latest_properties where label is not null") > 11_000
    assert q1(con, "select count(*) from latest_passages") > 1_000
    # one row per qid, as the merge promises
    assert q1(con, "select count(*) - count(distinct qid) from latest_entities") == 0
    # every table of the version has complete part files and the manifest was written last
    m = read_manifest(layout.kb_dir(kb_home))
    assert m["kb_version"] == kb_home
    for table in m["row_counts"]:
        files = part_files(layout.kb_table_dir(kb_home, table))
        assert files, table
    assert not (layout.kb_dir(kb_home) / "_staging").exists()


def test_known_entities_are_merged_from_their_richest_source(kb_home: str, con):
    row = con.execute("select label, description, enwiki_title, sitelinks, instance_of, source "
                      "from latest_entities where qid = 'Q42'").fetchone()
    assert row[0] == "Douglas Adams" and row[2] == "Douglas Adams" and row[3] > 50
    assert "Q5" in row[4] and row[5] in ("wikidata-json", "entity-file")
    # Arnold Schwarzenegger comes from the KGTK subgraph
    assert q1(con, "select label from latest_entities where qid = 'Q2685'") == "Arnold Schwarzenegger"
    # other languages' labels are kept for entity alignment
    assert q1(con, "select count(distinct lang) from latest_labels where qid = 'Q42'") > 20
    assert q1(con, "select label from latest_properties where pid = 'P31'") == "instance of"


def test_codex_negatives_are_never_claims(kb_home: str, con, data_root):
    positives = set()
    for size in ("codex-s",):
        for split in ("train.txt", "valid.txt", "test.txt"):
            with open(data_root / "codex/triples" / size / split) as fh:
                positives |= {tuple(line.split()) for line in fh if line.strip()}
    with open(data_root / "codex/triples/codex-s/test_negatives.txt") as fh:
        negatives = [tuple(line.split()) for line in fh if line.strip()]
    only_negative = [t for t in negatives if t not in positives][:200]
    assert only_negative
    con.execute("create temp table neg(s varchar, p varchar, o varchar)")
    con.executemany("insert into neg values (?, ?, ?)", only_negative)
    hits = q1(con, "select count(*) from latest_claims c join neg on c.subject = neg.s and c.property = neg.p "
                   "and c.object_qid = neg.o where c.source = 'codex'")
    assert hits == 0


def test_articles_have_clean_text_and_qids(kb_home: str, con):
    n, with_qid = con.execute("select count(*), count(qid) from latest_articles").fetchone()
    assert n >= 110 and with_qid > 50
    # wikitext-derived articles only: FactoidQA ships its own "cleaned" texts as they are (one keeps a {{cite web)
    leftovers = q1(con, "select count(*) from latest_articles where page_id > 0 and (text like '%{{%' "
                        "or text like '%<ref%' or text like '%[[Category:%')")
    assert leftovers == 0
    assert q1(con, "select max(len(string_split(text, ' '))) from latest_passages") <= 100
    assert q1(con, "select qid from latest_articles where title = 'Anarchism'") == "Q6199"
    # FactoidQA's 150 article texts (synthetic negative page ids), linked through the title maps
    cmu, cmu_qid = con.execute("select count(*), count(qid) from latest_articles "
                               "where source like 'factoidqa-cmu/%' and page_id < 0").fetchall()[0]
    assert cmu == 150 and cmu_qid >= 140
    # the vital-articles title map (2019) gives Kangaroo -> Q5070208
    assert q1(con, "select qid from latest_articles where source = 'factoidqa-cmu/S08/data/set1/a1'") == "Q5070208"


def test_rebuild_of_a_finished_version_is_a_noop(kb_home: str, data_root):
    from flows.build_kb import build_kb
    from tasks.kb.plan import make_plan, sample_inputs

    t0 = time.perf_counter()
    ref = build_kb(make_plan("sample", sample_inputs(data_root)), workers=1)
    assert ref.version == kb_home and time.perf_counter() - t0 < 30


def test_independent_count_of_the_dump_sample(kb_home: str, con, data_root):
    """Entities of the 49-line real dump sample are all present, parsed independently here."""
    import json

    qids = []
    with gzip.open(data_root / "wikidata-entities/wikibase-dump-filter/entities.gz", "rt") as fh:
        for line in fh:
            line = line.strip().rstrip(",")
            if line.startswith("{"):
                qids.append(json.loads(line)["id"])
    assert len(qids) == 49
    con.execute("create temp table d(qid varchar)")
    con.executemany("insert into d values (?)", [(q,) for q in qids])
    assert q1(con, "select count(*) from d join latest_entities using (qid)") == len([q for q in qids if q[0] == "Q"])


def test_export_nt_of_the_sample_kb(kb_home: str, tmp_path, capsys):
    from flows.cli import main

    out = tmp_path / "kb.nt.gz"
    assert main(["kb", "export-nt", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    with gzip.open(out, "rt", encoding="utf-8") as fh:
        head = [next(fh) for _ in range(2000)]
    assert all(line.rstrip().endswith(" .") for line in head)
    assert any("<http://www.wikidata.org/prop/direct/P31>" in line for line in head) or out.stat().st_size > 1e6
