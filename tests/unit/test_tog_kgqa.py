"""ToG-format KGQA loaders (cwq, webqsp, grailqa, webquestions) and their open-world splits, on the real files."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest

from tasks.datasets import noise, tog_kgqa
from tasks.datasets.base import DatasetError
from tasks.datasets.registry import dataset_task, load_dataset

_CACHE: dict[str, tog_kgqa.LoadedDataset] = {}
_FILES = {
    "cwq": tog_kgqa.CWQ_FILE,
    "webqsp": tog_kgqa.WEBQSP_FILE,
    "grailqa": tog_kgqa.GRAILQA_FILE,
    "webquestions": tog_kgqa.WEBQUESTIONS_FILE,
}
_WORD = re.compile(r"[^\W\d_]+")


def _load(name: str, data_root: Path):
    if name not in _CACHE:
        _CACHE[name] = load_dataset(name, data_root)
    return _CACHE[name]


def _meta(row: dict) -> dict:
    return json.loads(row["meta"])


def _by_id(ds, split: str) -> dict[str, dict]:
    return {r["question_id"]: r for r in ds.questions[split]}


def _raw(path: Path):
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return json.loads(fh.read())


def _levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _topic_names(test_row: dict) -> list[str]:
    meta = _meta(test_row)
    return [n for n in [*meta["topic_entity"].values(), *meta["topic_names"].values()] if n]


# -------------------- counts


@pytest.mark.parametrize("name", tog_kgqa.DATASETS)
def test_split_counts_match_an_independent_parse(name, data_root):
    records = _raw(data_root / _FILES[name])
    n = len(records)
    assert n == {"cwq": 3531, "webqsp": 1639, "grailqa": 1000, "webquestions": 2032}[name]
    ds = _load(name, data_root)
    assert ds.rejects == []  # every record of the real files is usable
    assert ds.counts() == {"test": n, "test-noisy": n, "test-open": n + (n + 5) // 10}
    assert ds.counts()["test-open"] == {"cwq": 3884, "webqsp": 1803, "grailqa": 1100, "webquestions": 2235}[name]
    assert dataset_task(name) == "kgqa-open"


@pytest.mark.parametrize(("name", "n_trivia", "n_2wiki"), [
    ("cwq", 101, 252),  # wants 176 TriviaQA questions, only 101 exist: 2Wiki fills the gap
    ("webqsp", 82, 82),
    ("grailqa", 50, 50),
    ("webquestions", 101, 102),
])
def test_open_split_mixes_triviaqa_and_2wiki(name, n_trivia, n_2wiki, data_root):
    ds = _load(name, data_root)
    sources: dict[str, int] = {}
    for row in ds.questions["test-open"]:
        meta = _meta(row)
        if not meta["out_of_kb"]:
            continue
        sources[meta["source"]] = sources.get(meta["source"], 0) + 1
    assert sources == {"triviaqa": n_trivia, "2wiki": n_2wiki}


# -------------------- hand-checked rows


def test_cwq_row(data_root):
    test = _by_id(_load("cwq", data_root), "test")
    row = test["WebQTrn-241_dfb6c97ac9bf2f0ac07f27dd80f9edc2"]
    assert row["question"] == "What country bordering France contains an airport that serves Nijmegen?"
    assert row["gold_answers"] == ["Germany"]
    assert row["gold_entities"] == ["Q142", "Q47887"]
    assert row["gold_answer_qids"] == [] and row["sparql"] is None
    meta = _meta(row)
    assert "ns:m.0f8l9c ns:location.location.adjoin_s ?y" in meta["freebase_sparql"]
    assert meta["topic_entity"] == {"m.0f8l9c": "France", "m.05g2b": "Nijmegen"}
    assert meta["topic_names"] == {"Q142": "France", "Q47887": "Nijmegen"}
    assert (meta["compositionality_type"], meta["webqsp_id"]) == ("conjunction", "WebQTrn-241")
    # first record: qid_topic_entity is {} -> no gold entities (the MID stays in meta)
    first = test["WebQTest-832_c334509bb5e02cacae1ba2e80c176499"]
    assert first["gold_entities"] == [] and first["gold_answers"] == ["2014 World Series"]
    assert _meta(first)["gold_entities_source"] == "none"
    assert _meta(first)["topic_entity"] == {"m.03_dwn": "Lou Seal"}


def test_cwq_double_spaces_are_normalised(data_root):
    test = _by_id(_load("cwq", data_root), "test")
    raw = {r["ID"]: r["question"] for r in _raw(data_root / tog_kgqa.CWQ_FILE)}
    changed = [qid for qid, q in raw.items() if q != " ".join(q.split())]
    assert len(changed) == 46
    for qid in changed:
        assert test[qid]["question"] == " ".join(raw[qid].split())
        assert _meta(test[qid])["raw_question"] == raw[qid]


def test_webquestions_row_ids_are_positions(data_root):
    ds = _load("webquestions", data_root)
    test = ds.questions["test"]
    assert [r["question_id"] for r in test] == [str(i) for i in range(2032)]
    row = test[0]
    assert row["question"] == "what does jamaican people speak?"
    assert row["gold_answers"] == ["Jamaican Creole English Language", "Jamaican English"]
    assert row["gold_entities"] == ["Q766"]
    assert _meta(row)["url"] == "http://www.freebase.com/view/en/jamaica"
    # ToG's "UnknownQID" placeholder never becomes a gold entity
    grey = next(r for r in test if r["question"] == "who will play mr gray in the film?")
    assert grey["gold_entities"] == [] and _meta(grey)["topic_names"] == {"UnknownQID": "Christian Grey"}


def test_webqsp_answers_from_parses_or_compact_list(data_root):
    test = _by_id(_load("webqsp", data_root), "test")
    # compact file only (not in sample100): topic QID through the MID table
    row = test["WebQTest-1198"]
    assert row["question"] == "who influenced samuel taylor coleridge?"
    assert len(row["gold_answers"]) == 10 and row["gold_answers"][:2] == ["Giambattista Vico", "Baruch Spinoza"]
    assert row["gold_entities"] == ["Q82409"]
    meta = _meta(row)
    assert (meta["answer_source"], meta["gold_entities_source"]) == ("compact", "mid_qid_table")
    # sample100: the compact file has [null] (a date answer); the parse's AnswerArgument recovers it
    row = test["WebQTest-1472"]
    assert row["gold_answers"] == ["2003-01-02"] and _meta(row)["answer_source"] == "parses"
    assert _meta(row)["gold_entities_source"] == "qid_topic_entity"
    # sample100: union over the two parses (the compact file only has parse 0's answers)
    row = test["WebQTest-1840"]
    assert row["gold_answers"] == ["Saami, South Language", "Saami, North Language", "Norwegian Language",
                                   "Saami, Lule Language", "Finnish, Kven Language", "Bokmål", "Nynorsk"]
    assert row["gold_entities"] == ["Q20"] and _meta(row)["n_parses"] == 2
    # no answer in the compact file: kept, flagged
    row = test["WebQTest-238"]
    assert row["gold_answers"] == [] and _meta(row)["no_gold_answers"] is True


def test_webqsp_unanswered_questions_are_counted(data_root):
    records = _raw(data_root / tog_kgqa.WEBQSP_FILE)
    sample = {r["QuestionId"] for r in _raw(data_root / tog_kgqa.WEBQSP_SAMPLE_FILE)}
    empty = {r["QuestionId"] for r in records if not [a for a in r["answer"] if a is not None]}
    recovered = {q for q in empty & sample}
    assert (len(empty), len(recovered)) == (58, 3)
    test = _by_id(_load("webqsp", data_root), "test")
    assert {q for q, r in test.items() if not r["gold_answers"]} == empty - recovered


@pytest.mark.parametrize(("name", "key", "n"), [("webquestions", "answers", 17), ("webqsp", "answer", 11)])
def test_blank_gold_aliases_are_kept(name, key, n, data_root):
    """A blank alias is kept once as "" (the reference scripts keep it and it matches every answer), beside the
    others; every split carries it."""
    records = _raw(data_root / _FILES[name])
    ids = [str(i) if name == "webquestions" else r["QuestionId"] for i, r in enumerate(records)]
    blank = {q for q, r in zip(ids, records, strict=True)
             if any(isinstance(a, str) and not a.strip() for a in r[key] or [])}
    assert len(blank) == n
    ds = _load(name, data_root)
    for split in ("test", "test-noisy", "test-open"):
        assert {r["question_id"] for r in ds.questions[split] if "" in r["gold_answers"]} == blank, split
    row = _by_id(ds, "test")["1366" if name == "webquestions" else "WebQTest-76"]
    assert row["gold_answers"].count("") == 1 and len(row["gold_answers"]) > 1
    if name == "webquestions":  # "' '" twice in the file: one blank alias
        assert row["gold_answers"] == ["As She's Walking Away", 's Walking Away"', "", "Chicken Fried"]


def test_grailqa_rows(data_root):
    test = _by_id(_load("grailqa", data_root), "test")
    row = test["2101960008000"]
    assert row["question"] == "which play is produced by the illusion?"
    assert row["gold_answers"] == ["The Illusion"] and row["gold_entities"] == []
    meta = _meta(row)
    assert meta["unmapped_mids"] == ["m.0yrlqjm"] and meta["answer_mids"] == ["m.0yrltsn"]
    assert meta["level"] == "i.i.d." and meta["s_expression"].startswith("(AND theater.play")
    # a value answer (no entity_name): the answer_argument
    assert test["2105436005000"]["gold_answers"] == ["1"]
    # a topic MID known to the MID table
    row = test["4301746002000"]
    assert row["gold_entities"] == ["Q17"] and _meta(row)["gold_entities_source"] == "mid_qid_table"
    assert sum(1 for r in test.values() if r["gold_entities"]) == 29


# -------------------- MID <-> QID


def test_mid_qid_table(data_root):
    table = tog_kgqa.mid_qid_pairs(data_root)
    assert 1800 <= len(table) <= 2000
    assert len(table) == 1871
    assert table["m.0f8l9c"] == "Q142"  # France
    assert table["m.03_r3"] == "Q766"  # Jamaica
    assert "UnknownMID" not in table and "m.0nfjvrm" not in table  # paired with ToG's UnknownQID
    assert all(re.fullmatch(r"[mg]\.[0-9a-z_]+", m) for m in table)
    assert all(re.fullmatch(r"Q\d+", q) for q in table.values())
    table["m.0f8l9c"] = "changed"  # callers get a copy of the cached table
    assert tog_kgqa.mid_qid_pairs(data_root)["m.0f8l9c"] == "Q142"


# -------------------- noise


@pytest.mark.parametrize("name", tog_kgqa.DATASETS)
def test_noisy_split_is_deterministic(name, data_root):
    again = tog_kgqa.LOADERS[name](data_root)
    assert again.questions["test-noisy"] == _load(name, data_root).questions["test-noisy"]
    assert again.questions["test-open"] == _load(name, data_root).questions["test-open"]


def test_noise_is_pinned():
    noisy = noise.noisy_rows(
        "cwq",
        [{"question_id": "WebQTrn-241_dfb6c97ac9bf2f0ac07f27dd80f9edc2",
          "question": "What country bordering France contains an airport that serves Nijmegen?", "meta": "{}",
          "gold_mentions": []}],
        {"WebQTrn-241_dfb6c97ac9bf2f0ac07f27dd80f9edc2": ["France", "Nijmegen"]},
    )
    # byte-identical across runs and machines: string seeds are hashed with SHA-512
    assert noisy[0]["question"] == "What country bordering Fance contains an airport that serves Nimmegen?"


@pytest.mark.parametrize(("name", "gone", "had"), [
    ("cwq", 3018, 3019),  # left: a name of digits only ("800")
    ("webqsp", 1221, 1221),
    ("grailqa", 799, 809),  # left: digit or one-letter names ("7", "V", "B. D.")
    ("webquestions", 1476, 1476),
])
def test_noisy_questions_hide_topic_names(name, gone, had, data_root):
    ds = _load(name, data_root)
    test = _by_id(ds, "test")
    noisy = ds.questions["test-noisy"]
    assert [r["question_id"] for r in noisy] == [r["question_id"] for r in ds.questions["test"]]
    n_had = n_gone = 0
    for row in noisy:
        clean = test[row["question_id"]]
        meta = _meta(row)
        assert meta["original_question"] == clean["question"] and meta["noise_seed"] == noise.NOISE_SEED
        for key in ("gold_entities", "gold_answers", "gold_answer_qids", "sparql"):
            assert row[key] == clean[key]
        spans = meta["noised_spans"]
        assert meta["noise"] == (spans[0]["target"] if spans else "none")
        assert (row["question"] != clean["question"]) == bool(spans)
        for span in spans:
            assert span["original"].casefold() != span["noisy"].casefold()
            assert span["noisy"] in row["question"] and span["original"] in clean["question"]
            before, after = _WORD.findall(span["original"]), _WORD.findall(span["noisy"])
            assert len(before) == len(after)
            assert all(_levenshtein(a, b) <= 2 for a, b in zip(before, after, strict=True))
        names = _topic_names(clean)
        if noise.find_mentions(clean["question"], names):
            n_had += 1
            n_gone += not noise.find_mentions(row["question"], names)
    assert (n_gone, n_had) == (gone, had)
    assert n_gone / n_had >= 0.95


def test_add_typos_on_literal_strings():
    rng = random.Random("0:t:1")
    text, spans = noise.add_typos("Who founded the Acme Corporation in 1900?", ["acme corporation"], rng)
    assert [s["target"] for s in spans] == ["topic"] and spans[0]["original"] == "Acme Corporation"
    assert "acme corporation" not in text.casefold()
    assert text.startswith("Who founded the A") and text.endswith(" in 1900?")
    # no topic name in the text: longest capitalised word not starting the sentence
    text, spans = noise.add_typos("Where is Springfield located?", ["Shelbyville"], random.Random("x"))
    assert spans[0] == {"original": "Springfield", "noisy": spans[0]["noisy"], "target": "fallback"}
    assert text == "Where is " + spans[0]["noisy"] + " located?"
    # lower-case question: the longest word of >= 5 letters (the first one on ties)
    _, spans = noise.add_typos("where did barack obama live?", [], random.Random("x"))
    assert spans[0]["original"] == "barack"
    _, spans = noise.add_typos("where was obama born?", [], random.Random("x"))
    assert spans[0]["original"] == "where"
    # nothing to change
    assert noise.add_typos("who is he?", ["Jo"], random.Random("x")) == ("who is he?", [])
    # short names get one typo in their longest word
    text, spans = noise.add_typos("what is the capital of the usa?", ["USA"], random.Random("x"))
    assert spans and "usa" not in _WORD.findall(text.casefold())
    # same seed string, same output
    a = noise.add_typos("Lou Seal is the mascot of which team?", ["Lou Seal"], random.Random("s"))
    assert a == noise.add_typos("Lou Seal is the mascot of which team?", ["Lou Seal"], random.Random("s"))


def test_typo_always_changes_the_word():
    for word in ("Mississippi", "aaaa", "Bokmål", "Zürich", "tree", "USA", "go"):
        for i in range(200):
            out = noise.typo(word, random.Random(i))
            assert out.casefold() != word.casefold()
            assert out[0] == word[0]
            assert _levenshtein(word, out) <= 2


# -------------------- open world


@pytest.mark.parametrize("name", tog_kgqa.DATASETS)
def test_open_split_rows(name, data_root):
    ds = _load(name, data_root)
    noisy = ds.questions["test-noisy"]
    rows = ds.questions["test-open"]
    in_kb = [r for r in rows if not _meta(r)["out_of_kb"]]
    out = [r for r in rows if _meta(r)["out_of_kb"]]
    assert len(out) == (len(noisy) + 5) // 10
    assert [r["question_id"] for r in in_kb] == [r["question_id"] for r in noisy]
    for a, b in zip(in_kb, noisy, strict=True):
        assert a["question"] == b["question"]
        assert {k: v for k, v in _meta(a).items() if k != "out_of_kb"} == _meta(b)
    for r in out:
        meta = _meta(r)
        assert meta["source"] in ("triviaqa", "2wiki")
        assert r["question_id"] == f"{meta['source']}:{meta['source_id']}"
        assert r["gold_answers"] and r["gold_entities"] == []
    positions = [i for i, r in enumerate(rows) if _meta(r)["out_of_kb"]]
    assert positions[0] < len(rows) // 4  # mixed in, not appended
    assert len({r["question_id"] for r in rows}) == len(rows)


# -------------------- bad inputs


def _data_root_with(tmp_path: Path, data_root: Path, rel: Path, payload: bytes) -> Path:
    for folder in ("triviaqa", "2wikimultihopqa"):
        (tmp_path / folder).symlink_to(data_root / folder, target_is_directory=True)
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_bytes(payload)
    return tmp_path


def test_malformed_records_become_rejects(tmp_path, data_root):
    good = [{"ID": f"g{i}", "question": f"Who  founded   Acme Works {i}?", "answer": "Jane Doe",
             "topic_entity": {"m.0abc": f"Acme Works {i}"}, "qid_topic_entity": {"Q1": f"Acme Works {i}"}}
            for i in range(5)]
    records = [good[0], "not a record", {"ID": "x2"}, {"ID": "x3", "question": "   "}, dict(good[0]),
               {"question": "no id?"}, {"ID": "x6", "question": "Where?", "topic_entity": ["m.1"]},
               {"ID": "x7", "question": "Why?", "answer": {"a": 1}}, *good[1:]]
    root = _data_root_with(tmp_path, data_root, tog_kgqa.CWQ_FILE, gzip.compress(json.dumps(records).encode()))
    ds = tog_kgqa.load_cwq(root)
    assert [r["question_id"] for r in ds.questions["test"]] == ["g0", "g1", "g2", "g3", "g4"]
    assert ds.questions["test"][0]["question"] == "Who founded Acme Works 0?"
    assert ds.questions["test"][0]["gold_entities"] == ["Q1"]
    assert ds.counts() == {"test": 5, "test-noisy": 5, "test-open": 6}
    reasons = [r["reason"] for r in ds.rejects]
    assert reasons == [
        "record 1: not an object (str)",
        "record 2: missing question ('question')",
        "record 3: empty question (id 'x3')",
        "record 4: duplicate id 'g0' in split 'test' (first at record 0)",
        "record 5: missing id ('ID')",
        "record 6: topic_entity is not an object (list)",
        "record 7: answer is neither text nor a list (dict)",
    ]
    assert all(r["stage"] == "datasets.cwq" and r["source_file"].endswith("cwq.json.gz") for r in ds.rejects)


def test_top_level_not_a_list_is_a_dataset_error(tmp_path, data_root):
    root = _data_root_with(tmp_path, data_root, tog_kgqa.WEBQUESTIONS_FILE,
                           gzip.compress(b'{"questions": []}'))
    with pytest.raises(DatasetError, match="WebQuestions.json.gz: expected a JSON list"):
        tog_kgqa.load_webquestions(root)


def test_truncated_gzip_is_a_dataset_error_naming_the_file(tmp_path, data_root):
    payload = (data_root / tog_kgqa.CWQ_FILE).read_bytes()[:5000]
    root = _data_root_with(tmp_path, data_root, tog_kgqa.CWQ_FILE, payload)
    with pytest.raises(DatasetError, match=r"cwq\.json\.gz"):
        tog_kgqa.load_cwq(root)


def test_missing_file_fails_loudly(tmp_path):
    with pytest.raises(FileNotFoundError, match="WebQuestions.json.gz"):
        tog_kgqa.load_webquestions(tmp_path)
