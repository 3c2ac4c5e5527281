"""Benchmark loaders on the real files in LINKEDQA_DATA (tasks.datasets)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from storage.layout import LayoutError
from storage.parquet_io import conform
from tasks.datasets import registry
from tasks.datasets.base import QUESTION_COLUMNS, REJECT_COLUMNS, parse_sparql_results, qids_in_sparql
from tasks.datasets.registry import UnknownDataset, dataset_task, import_jsonl, known_datasets, load_dataset

_CACHE: dict[str, registry.LoadedDataset] = {}


def _load(name: str, data_root: Path) -> registry.LoadedDataset:
    if name not in _CACHE:
        _CACHE[name] = load_dataset(name, data_root)
    return _CACHE[name]


def _by_id(ds, split: str) -> dict[str, dict]:
    return {r["question_id"]: r for r in ds.questions[split]}


def _meta(row: dict) -> dict:
    return json.loads(row["meta"])


def _squash(text: str) -> str:
    return " ".join(text.replace("\u200b", "").split())


def _nonblank_lines(path: Path) -> int:
    raw = gzip.open(path).read() if path.name.endswith(".gz") else path.read_bytes()
    return sum(1 for line in raw.split(b"\n") if line.strip())


# -------------------- registry


def test_registry_lists_every_loader_with_a_description():
    names = known_datasets()
    assert list(names) == ["webqsp-el", "qald-10", "qald-9-plus", "simplequestions-wd", "lcquad2-sample",
                           "entityquestions", "popqa", "factoidqa", "strategyqa", "2wiki", "triviaqa",
                           "cwq", "webqsp", "grailqa", "webquestions", "dbp15k-fr-en", "dbp15k-ja-en", "dbp15k-zh-en"]
    assert all(isinstance(d, str) and d and "\n" not in d for d in names.values())


def test_unknown_dataset_is_a_keyerror_listing_valid_names(data_root):
    with pytest.raises(KeyError) as info:
        load_dataset("no-such-set", data_root)
    assert isinstance(info.value, UnknownDataset)
    msg = str(info.value)
    assert "no-such-set" in msg and "webqsp-el" in msg and "lcquad2-sample" in msg


def test_missing_input_file_fails_loudly(tmp_path):
    with pytest.raises(FileNotFoundError, match="webqsp"):
        load_dataset("webqsp-el", tmp_path)


@pytest.mark.parametrize("name", list(registry.REGISTRY))
def test_every_row_conforms_and_ids_are_unique_strings(name, data_root):
    ds = _load(name, data_root)
    assert ds.name == name
    if name == "factoidqa":  # the CMU files' NULL-only and empty questions (counted in test_entity_qa)
        assert all("only NULL answers" in r["reason"] or "empty question" in r["reason"] for r in ds.rejects)
    else:
        assert ds.rejects == []
    entity_id = r"[a-z]{2}:\d+" if dataset_task(name) == "ea" else r"Q\d+"  # DBP15K: KG-local entity ids
    assert ds.sources and all(p.is_file() for p in ds.sources)
    for split, rows in ds.questions.items():
        assert rows, f"{name}/{split} is empty"
        assert all(tuple(r) == QUESTION_COLUMNS for r in rows)
        ids = [r["question_id"] for r in rows]
        assert all(isinstance(i, str) and i for i in ids)
        assert len(set(ids)) == len(ids)
        assert all(r["dataset"] == name and r["split"] == split for r in rows)
        assert all(r["question"] == r["question"].strip() and r["question"] for r in rows)
        assert all(None not in r["gold_entities"] + r["gold_answer_qids"] for r in rows)
        assert all(re.fullmatch(entity_id, q) for r in rows for q in r["gold_entities"] + r["gold_answer_qids"])
        for r in rows:
            meta = json.loads(r["meta"])
            assert r["meta"] == json.dumps(meta, sort_keys=True, ensure_ascii=False)
        table = conform(rows, "questions")
        assert table.num_rows == len(rows)


# -------------------- webqsp-el


def test_webqsp_el_counts_match_an_independent_parse(data_root):
    folder = data_root / "webqsp-el"
    test = json.loads((folder / "webqsp.test.entities.with_classes.json").read_text())
    train = json.loads((folder / "webqsp.train.entities.json").read_text())
    dev_ids = set(json.loads((folder / "webqsp.dev.ids.json").read_text()))
    train_ids = set(json.loads((folder / "webqsp.train.ids.json").read_text()))
    ds = _load("webqsp-el", data_root)
    assert ds.counts() == {
        "train": sum(1 for r in train if r["question_id"] in train_ids),
        "dev": sum(1 for r in train if r["question_id"] in dev_ids),
        "test": len(test),
    }
    assert ds.counts() == {"train": 2479, "dev": 619, "test": 1639}
    assert set(_by_id(ds, "dev")) == dev_ids


def test_webqsp_el_gold_entities_are_the_non_null_qids(data_root):
    folder = data_root / "webqsp-el"
    raw = {r["question_id"]: r for r in json.loads((folder / "webqsp.train.entities.json").read_text())}
    ds = _load("webqsp-el", data_root)
    for row in ds.questions["train"] + ds.questions["dev"]:
        expected = []
        for q in raw[row["question_id"]]["entities"]:
            if q and q not in expected:
                expected.append(q)
        assert row["gold_entities"] == expected
    test = _by_id(ds, "test")
    assert test["WebQTest-3"]["gold_entities"] == ["Q945030"]  # raw entities [null, "Q945030"]
    assert _meta(test["WebQTest-3"])["entities_wd"] == [None, "Q945030"]
    assert _meta(test["WebQTest-0"])["entity_classes"] == ["location"]


def test_webqsp_el_mention_spans_index_the_question(data_root):
    ds = _load("webqsp-el", data_root)
    statuses: dict[str, int] = {}
    for row in ds.rows():
        meta = _meta(row)
        statuses[meta["mention_span"]] = statuses.get(meta["mention_span"], 0) + 1
        for m in row["gold_mentions"]:
            assert 0 <= m["start"] < m["end"] <= len(row["question"])
            assert row["question"][m["start"]:m["end"]] == m["text"]
            assert m["qid"] == meta["main_entity"]
        if meta["mention_span"] == "exact":
            # the raw span covers main_entity_tokens (the surface form), not main_entity_text (the label)
            m = row["gold_mentions"][0]
            assert [m["start"], m["end"]] == meta["main_entity_pos"]
            assert m["text"].lower() == meta["main_entity_tokens"].lower()
    assert statuses == {"exact": 4560, "recovered": 33, "no_qid": 143, "none": 1}
    test = _by_id(ds, "test")
    assert test["WebQTest-0"]["gold_mentions"] == [
        {"text": "jamaican", "start": 10, "end": 18, "qid": "Q766"}
    ]
    # raw main_entity_pos is [-1, 14] with tokens "george w . bush": recovered from the tokens
    assert test["WebQTest-38"]["gold_mentions"] == [
        {"text": "george w. bush", "start": 8, "end": 22, "qid": "Q207"}
    ]
    assert _by_id(ds, "train")["WebQTrn-1071"]["gold_mentions"][0]["text"] == "facebook"


# -------------------- QALD-10


def test_qald10_counts_and_tog_topic_entities(data_root):
    official = json.loads((data_root / "qald-10/qald_10.json").read_text())["questions"]
    tog = json.loads((data_root / "tog-kgqa/qald_10-en.json").read_text())
    ds = _load("qald-10", data_root)
    assert ds.counts() == {"test": len(official)} == {"test": 394}
    rows = list(ds.rows())
    english = {
        str(q["id"]): next(s["string"] for s in q["question"] if s["language"] == "en") for q in official
    }
    assert {r["question_id"]: r["question"] for r in rows} == {k: _squash(v) for k, v in english.items()}
    # id 299 has two zero-width spaces in "South Africa (\u200b\u200bQ258)": dropped, raw text kept in meta
    assert _meta(_by_id(ds, "test")["299"])["raw_question"] == english["299"]
    tog_by_text = {_squash(t["question"]): t for t in tog}
    n_tog = 0
    for r in rows:
        meta = _meta(r)
        t = tog_by_text.get(r["question"])
        if t is not None:
            n_tog += 1
            assert meta["gold_entities_source"] == "tog-topic-entities"
            assert r["gold_entities"] == list(t["qid_topic_entity"])
        else:
            assert meta["gold_entities_source"] == "sparql-query"
            assert r["gold_entities"] == qids_in_sparql(r["sparql"])
    assert n_tog == len(tog) == 333


def test_qald10_gold_answers_hand_checked(data_root):
    q = _by_id(_load("qald-10", data_root), "test")
    # id 0: SELECT ?result { wd:Q761383 wdt:P138 ?result } -> one uri binding Q42299 (Bernhard Riemann)
    assert q["0"]["question"] == "After whom is the Riemannian geometry named?"
    assert q["0"]["gold_answer_qids"] == ["Q42299"]
    assert q["0"]["gold_entities"] == ["Q761383"]
    assert q["0"]["gold_answers"][0] == "Bernhard Riemann"
    assert _meta(q["0"])["gold_literals"] == []
    # id 7: ASK, {"boolean": true}; not in ToG's file, so entities come from the query
    assert q["7"]["gold_answers"] == ["true"] and q["7"]["gold_answer_qids"] == []
    assert _meta(q["7"])["answer_type"] == "boolean"
    assert q["7"]["gold_entities"] == ["Q2926117", "Q87192979", "Q35657"]
    # id 8: boiling point of water, decimal literal "+100"
    assert q["8"]["gold_answers"] == ["+100"] and q["8"]["gold_answer_qids"] == []
    # id 204: a geosparql wktLiteral
    assert q["204"]["gold_answers"] == ["Point(114.054 22.535)"]
    assert _meta(q["204"])["literal_datatypes"] == ["http://www.opengis.net/ont/geosparql#wktLiteral"]
    # id 237: dateTime literal kept as written
    assert q["237"]["gold_answers"] == ["-3600000-01-01T00:00:00Z"]
    # id 330: one uri (Q26702597) and two plain literals
    assert q["330"]["gold_answer_qids"] == ["Q26702597"]
    assert _meta(q["330"])["gold_literals"] == ["Jake Snell", "Kevin Swersky"]
    assert _meta(q["330"])["answer_type"] == "mixed"
    assert "Richard S. Zemel" in q["330"]["gold_answers"]
    # id 345: a non-Wikidata URI is a literal answer
    assert q["345"]["gold_answers"] == ["https://www.npr.org/series/tiny-desk-concerts/"]
    # id 25: a lexeme uri binding keeps its IRI (QALD-10's only non-item Wikidata answer)
    assert _meta(q["25"])["gold_literals"] == ["http://www.wikidata.org/entity/L30607"]
    assert q["25"]["gold_answer_qids"] == []


def test_sparql_results_parser_covers_every_kind():
    gold = parse_sparql_results([{
        "head": {"vars": ["x"]},
        "results": {"bindings": [
            {"x": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"}},
            {"x": {"type": "uri", "value": "http://www.wikidata.org/entity/L30607"}},
            {"x": {"type": "literal", "value": "3", "datatype": "http://www.w3.org/2001/XMLSchema#integer"}},
            {"x": {"type": "literal", "value": "chat", "xml:lang": "fr"}},
            {"x": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"}},
        ]},
    }])
    # a lexeme (not an item) stays an IRI: the QALD metrics count it as an entity, as GERBIL does
    assert gold.qids == ["Q1"] and gold.literals == ["http://www.wikidata.org/entity/L30607", "3", "chat"]
    assert gold.answer_type == "mixed"
    assert gold.datatypes == ["http://www.w3.org/2001/XMLSchema#integer", "lang:fr"]
    assert parse_sparql_results([{"head": {}, "boolean": False}]).literals == ["false"]
    assert parse_sparql_results([{"head": {"vars": []}, "results": {"bindings": []}}]).answer_type == "empty"
    query = "ASK { wd:Q1 wdt:P31 <http://www.wikidata.org/entity/Q5> . wd:Q1 p:P2 ?s . ?s wds:Q9-x ?o }"
    assert qids_in_sparql(query) == ["Q1", "Q5"]


# -------------------- QALD-9-plus


def test_qald9_plus_counts_and_answers(data_root):
    test_raw = json.loads(gzip.open(data_root / "qald-9-plus/qald_9_pp_test_wikidata_new.json.gz").read())
    train_raw = json.loads((data_root / "qald-9-plus/qald_9_plus_train_final.json").read_text())
    ds = _load("qald-9-plus", data_root)
    assert ds.counts() == {"train": len(train_raw), "test": len(test_raw["questions"])}
    assert ds.counts() == {"train": 347, "test": 136}
    train, test = _by_id(ds, "train"), _by_id(ds, "test")
    # train uid 1: two URIs, labels from solved_answer
    assert train["1"]["gold_answer_qids"] == ["Q2212", "Q3134980"]
    assert train["1"]["gold_entities"] == ["Q23337"]
    assert "Mountain Time Zone" in train["1"]["gold_answers"] and "UTC−07:00" in train["1"]["gold_answers"]
    assert _meta(train["1"])["answer_labels"]["Q3134980"][0] == "Mountain Time Zone"
    # uid 6: a single number literal
    assert train["6"]["gold_answers"] == ["+50431"] and train["6"]["gold_answer_qids"] == []
    # uid 215: answer ['34', Q198644] but solved_answer [['Paul Bourget'], '34']: paired by kind, not by index
    assert _meta(train["215"])["answer_labels"] == {"Q198644": ["Paul Bourget"]}
    assert train["215"]["gold_answers"] == ["34", "Paul Bourget"]
    # test id 99: SPARQL-JSON with two uri bindings
    assert test["99"]["question"] == "What is the time zone of Salt Lake City?"
    assert test["99"]["gold_answer_qids"] == ["Q3134980", "Q2212"]
    # test id 117: an ASK whose stored answer is an empty result set in this copy
    assert test["117"]["gold_answers"] == [] and _meta(test["117"])["answer_type"] == "empty"
    assert sum(_meta(r)["answer_type"] == "empty" for r in test.values()) == 101


# -------------------- SimpleQuestions


def test_simplequestions_counts_match_line_counts(data_root):
    folder = data_root / "wikidata-simplequestions"
    ds = _load("simplequestions-wd", data_root)
    expected = {}
    for split in ("train", "valid", "test", "train_answerable", "valid_answerable", "test_answerable"):
        path = folder / f"annotated_wd_data_{split}.txt"
        expected[split] = _nonblank_lines(path if path.exists() else path.with_name(path.name + ".gz"))
    assert ds.counts() == expected
    assert expected == {"train": 34374, "valid": 4867, "test": 9961, "train_answerable": 19481,
                        "valid_answerable": 2821, "test_answerable": 5622}


def test_simplequestions_rows(data_root):
    ds = _load("simplequestions-wd", data_root)
    first = ds.questions["valid"][0]  # Q3541144 P138 Q22686 "Who was the trump ocean club ... named after"
    assert first["question_id"] == "valid-1"
    assert first["question"] == "Who was the trump ocean club international hotel and tower named after"
    assert first["gold_entities"] == ["Q3541144"] and first["gold_answer_qids"] == ["Q22686"]
    assert _meta(first) == {"property": "P138", "pid": "P138", "inverse": False}
    inverse = ds.questions["valid"][2]  # Q2568216 R57 Q14949730
    assert _meta(inverse) == {"property": "R57", "pid": "P57", "inverse": True}
    assert _meta(ds.questions["test_answerable"][0])["full_split_id"].startswith("test-")
    doubled = _by_id(ds, "train")["train-8"]  # raw text has a double space and a trailing space
    assert doubled["question"] == "what is the position that mike twellman plays"
    assert _meta(doubled)["raw_question"].startswith("what is the position that  mike")


def test_simplequestions_malformed_lines_become_rejects(tmp_path, data_root):
    src = data_root / "wikidata-simplequestions"
    folder = tmp_path / "wikidata-simplequestions"
    folder.mkdir()
    real = (src / "annotated_wd_data_valid.txt").read_bytes().split(b"\n")[:3]
    for split in ("train", "test", "train_answerable", "valid_answerable", "test_answerable"):
        (folder / f"annotated_wd_data_{split}.txt").write_bytes(b"\n".join(real) + b"\n")
    bad = [real[0], b"Q1\tP31\tonly three", b"", b"X1\tP31\tQ5\tbad subject", real[1],
           b"Q1\tP31\tQ5\t\xff\xfe", b"Q1\tP31\tQ5\t   ", real[1]]
    (folder / "annotated_wd_data_valid.txt").write_bytes(b"\n".join(bad) + b"\n")
    ds = load_dataset("simplequestions-wd", tmp_path)
    assert [r["question_id"] for r in ds.questions["valid"]] == ["valid-1", "valid-5", "valid-8"]
    rejects = {r["line"]: r["reason"] for r in ds.rejects}
    assert sorted(rejects) == [2, 4, 6, 7]
    assert "4 tab-separated fields" in rejects[2]
    assert "malformed ids" in rejects[4]
    assert "invalid UTF-8" in rejects[6]
    assert "empty question" in rejects[7]
    assert all(r["source_file"].endswith("annotated_wd_data_valid.txt") for r in ds.rejects)
    offsets = {r["line"]: r["offset"] for r in ds.rejects}
    assert offsets[2] == len(real[0]) + 1
    conform(ds.rejects, "rejects")


# -------------------- LC-QuAD 2


def test_lcquad2_counts_placeholders_and_answers(data_root):
    raw = json.loads(gzip.open(data_root / "lcquad2-sample/train_lcquad2_final_1k.json.gz").read())
    ds = _load("lcquad2-sample", data_root)
    assert ds.counts() == {"train": len(raw)} == {"train": 1312}
    rows = _by_id(ds, "train")
    fallback = {k: r for k, r in rows.items() if _meta(r)["question_source"] == "NNQT_question"}
    assert sorted(fallback) == ["10210", "15553", "20952", "22857"]
    assert fallback["22857"]["question"] == "What is the human settlement for patron saint of Joseph"
    assert _meta(fallback["15553"])["original_question"] == "EDITION"
    first = rows["19719"]
    assert first["gold_entities"] == ["Q188920", "Q1002697"]
    assert first["gold_answer_qids"] == ["Q3486420"] and first["gold_answers"] == ["Sky"]
    assert rows["454"]["gold_answers"] == ["true"] and _meta(rows["454"])["answer_type"] == "boolean"
    # uid 13671: four paraphrases separated by blank lines; the first is the question
    several = rows["13671"]
    assert several["question"] == "Which family member of Luca Signorelli is a writer by profession?"
    assert len(_meta(several)["question_paraphrases"]) == 3


# -------------------- JSONL import


def _real_webqsp_questions(data_root: Path, n: int) -> list[dict]:
    recs = json.loads((data_root / "webqsp-el/webqsp.test.entities.with_classes.json").read_text())
    out = []
    for r in recs:
        if len(out) == n:
            break
        s, e = r["main_entity_pos"]
        if r["main_entity"] and s >= 0:
            out.append({"id": r["question_id"], "question": r["utterance"],
                        "gold_entities": [r["main_entity"]],
                        "gold_mentions": [{"text": r["utterance"][s:e], "start": s, "end": e,
                                           "qid": r["main_entity"]}],
                        "entities_fb": r["entities_fb"]})
    return out


def test_import_jsonl_keeps_good_lines_and_rejects_bad_ones(tmp_path, data_root):
    good = _real_webqsp_questions(data_root, 4)
    lines = [
        json.dumps(good[0]).encode(),                                                   # 1 ok
        b"{not json",                                                                   # 2 invalid JSON
        json.dumps({"question": "who is it?"}).encode(),                                # 3 missing id
        json.dumps({"id": "x3", "gold_entities": ["Q1"]}).encode(),                     # 4 missing question
        json.dumps({"id": "x4", "question": "q?", "gold_entities": "Q1"}).encode(),     # 5 wrong type
        json.dumps(dict(good[0], question=good[0]["question"])).encode(),              # 6 duplicate id
        b"",                                                                            # 7 blank: skipped
        b'{"id": "x6", "question": "caf\xe9?"}',                                        # 8 non-UTF-8 byte
        json.dumps({"id": "x7", "question": "short",
                    "gold_mentions": [{"text": "x", "start": 3, "end": 40, "qid": "Q1"}]}).encode(),  # 9 span
        json.dumps(dict(good[1], split="dev", sparql="ASK {}",                          # 10 ok, split dev
                        gold_answers=[1990, True, "x"])).encode(),
        json.dumps(["a", "list"]).encode(),                                             # 11 not an object
        json.dumps(dict(good[2], id=17, question="  " + good[2]["question"] + " ",  # 12 ok: int id, padded
                        gold_mentions=[dict(good[2]["gold_mentions"][0],
                                            start=good[2]["gold_mentions"][0]["start"] + 2,
                                            end=good[2]["gold_mentions"][0]["end"] + 2)])).encode(),
        json.dumps({"id": "x9", "question": "who?",                                     # 13 text != span
                    "gold_mentions": [{"text": "wh", "start": 0, "end": 3}]}).encode(),
        json.dumps({"id": "x10", "question": "who?", "split": "../etc"}).encode(),      # 14 unsafe split
        b'{"id": "x11", "question": "who?", "score": NaN}',                             # 15 NaN is not JSON
    ]
    path = tmp_path / "mine.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    ds = import_jsonl(path, "my-set")
    assert ds.name == "my-set" and ds.sources == [path]
    assert ds.counts() == {"test": 2, "dev": 1}
    assert [r["question_id"] for r in ds.questions["test"]] == [good[0]["id"], "17"]
    reasons = {r["line"]: r["reason"] for r in ds.rejects}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 8, 9, 11, 13, 14, 15]
    assert "invalid JSON" in reasons[2]
    assert "missing 'id'" in reasons[3]
    assert "missing 'question'" in reasons[4]
    assert "'gold_entities' must be a list" in reasons[5]
    assert "duplicate id" in reasons[6] and "line 1" in reasons[6]
    assert "invalid UTF-8" in reasons[8]
    assert "outside the question" in reasons[9]
    assert "not an object" in reasons[11]
    assert "does not match" in reasons[13]
    assert "invalid split" in reasons[14]
    assert "NaN" in reasons[15]
    assert all(r["reason"].startswith(f"line {r['line']}:") for r in ds.rejects)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    assert all(r["offset"] == offsets[r["line"] - 1] for r in ds.rejects)

    first = ds.questions["test"][0]
    assert first["question"] == good[0]["question"]
    assert first["gold_mentions"] == good[0]["gold_mentions"]
    assert json.loads(first["meta"]) == {"entities_fb": good[0]["entities_fb"]}
    dev = ds.questions["dev"][0]
    assert dev["gold_answers"] == ["1990", "true", "x"] and dev["sparql"] == "ASK {}"
    shifted = ds.questions["test"][1]
    assert shifted["question"] == good[2]["question"]
    assert shifted["gold_mentions"] == good[2]["gold_mentions"]
    m = shifted["gold_mentions"][0]
    assert shifted["question"][m["start"]:m["end"]] == m["text"]
    for rows in ds.questions.values():
        conform(rows, "questions")
    conform(ds.rejects, "rejects")
    assert all(tuple(r) == REJECT_COLUMNS for r in ds.rejects)


def test_import_jsonl_validates_the_name(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": 1, "question": "who?"}\n')
    with pytest.raises(LayoutError):
        import_jsonl(path, "../escape")
    with pytest.raises(ValueError, match="built-in"):
        import_jsonl(path, "qald-10")
    with pytest.raises(FileNotFoundError):
        import_jsonl(tmp_path / "absent.jsonl", "ok-name")
    assert import_jsonl(path, "ok-name").counts() == {"test": 1}


def test_datasets_package_never_imports_prefect():
    folder = Path(registry.__file__).parent
    for py in folder.glob("*.py"):
        assert not re.search(r"^\s*(import|from)\s+prefect\b", py.read_text(), flags=re.M), py


def test_json_loader_keeps_first_of_duplicate_ids_and_rejects_bad_records(tmp_path, data_root):
    src = data_root / "webqsp-el"
    folder = tmp_path / "webqsp-el"
    folder.mkdir()
    test = json.loads((src / "webqsp.test.entities.with_classes.json").read_text())[:3]
    train = json.loads((src / "webqsp.train.entities.json").read_text())[:2]
    records = [test[0], test[1], dict(test[0], utterance="a different text"), {"utterance": 5}, test[2]]
    (folder / "webqsp.test.entities.with_classes.json").write_text(json.dumps(records))
    orphan = dict(train[0], question_id="WebQTrn-x")  # in neither id list
    (folder / "webqsp.train.entities.json").write_text(json.dumps([*train, orphan]))
    (folder / "webqsp.train.ids.json").write_text(json.dumps([train[0]["question_id"]]))
    (folder / "webqsp.dev.ids.json").write_text(json.dumps([train[1]["question_id"]]))
    ds = load_dataset("webqsp-el", tmp_path)
    assert ds.counts() == {"train": 1, "dev": 1, "test": 3}
    assert ds.questions["test"][0]["question"] == test[0]["utterance"]
    reasons = sorted(r["reason"] for r in ds.rejects)
    assert len(reasons) == 3
    dup = [r for r in reasons if r.startswith("record 2: duplicate id 'WebQTest-0'")]
    assert len(dup) == 1 and "first at record 0" in dup[0]
    assert any(r.startswith("record 3: not an object") for r in reasons)
    assert any("'WebQTrn-x' is in neither" in r for r in reasons)
    conform(ds.rejects, "rejects")
