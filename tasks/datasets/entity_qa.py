"""Entity-centric QA benchmarks of the Entity Retrieval paper (../shared/papers/entity-retrieval-for-qa.md).

Inputs (under the data root) and what each loader makes of them:

* ``entityquestions``: ``entityquestions/test/P*.test.jsonl`` (24 relation files, ``{question, answers}``)
  -> split ``test`` (22,075 rows, id ``<PID>-<line>``); ``entityquestions/DisambEntityQA.csv.gz`` (the
  LongTailQA subset with the subject's QID and Wikipedia title) -> split ``longtail`` (2,882 rows, id
  ``lt-<row>``) and, where a test question has the same text and relation, its ``gold_entities`` too.
  The subject mention is recovered from the relation's template (``relation_query_templates.json``,
  e.g. ``Where was [X] born?``) and stored as a ``gold_mentions`` span.
* ``popqa``: ``popqa/DisambPopQA.csv.gz`` (long-tail PopQA, 1,399 rows) -> split ``longtail`` (id = PopQA
  id); subject QID from ``s_uri``, object QID from ``o_uri``, answers from ``possible_answers`` (JSON list).
* ``factoidqa``: CMU Question/Answer Dataset v1.2 ``S08|S09|S10/question_answer_pairs.txt`` -> split ``test``.
  Quirks handled: the same question answered by several students (rows grouped per article and question,
  their answers become aliases; difficulty ratings kept per answer in ``meta``); ``NULL`` answers (dropped,
  and a question with only ``NULL`` answers is a reject); a record broken across two lines by a stray
  newline inside the answer (re-joined); exact repeated rows. The article (``ArticleFile``) is the gold
  document: ``meta.wikipedia_title``; its QID comes from the Wikipedia title map (case-insensitive title
  match) when the map knows it. The article texts themselves become KB articles and passages
  (``tasks.dumps.cmu_articles``).
* ``strategyqa``: BIG-bench-format ``strategyqa/{dev,test}.jsonl`` (``answer`` boolean) -> splits ``dev``,
  ``test``; ``gold_answers`` = ``["yes"]`` or ``["no"]`` (task ``yesno``).
* ``2wiki``: ``2wikimultihopqa/dev.json`` (1,000 dev questions; answer string or list of aliases) -> split
  ``dev``. This copy has no context paragraphs, so there are no 2Wiki passages to add to the KB.
* ``triviaqa``: ``triviaqa/test.first100.jsonl`` (``{question, answer}``) -> split ``test``; the official
  format sample ``triviaqa/triviaqa_sample.json`` (with answer aliases) -> split ``sample``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasks.datasets.base import (
    DatasetBuilder,
    DatasetError,
    LoadedDataset,
    clean_text,
    dedupe,
    normalize_question,
    question_row,
    read_json,
    require_file,
    wikidata_id,
)
from tasks.dumps.cmu_articles import cmu_records

ENTITYQUESTIONS = "entityquestions"
POPQA = "popqa"
FACTOIDQA = "factoidqa"
STRATEGYQA = "strategyqa"
TWOWIKI = "2wiki"
TRIVIAQA = "triviaqa"

DESCRIPTIONS = {
    ENTITYQUESTIONS: "EntityQuestions: 24 relation templates (test 22,075) + LongTailQA subset with subject QIDs",
    POPQA: "PopQA long-tail subset (1,399) with subject/object QIDs and popularity",
    FACTOIDQA: "CMU FactoidQA v1.2 (S08-S10): questions grouped with their answers; articles go to the KB",
    STRATEGYQA: "StrategyQA (BIG-bench format) yes/no questions: dev 500, test 2,290",
    TWOWIKI: "2WikiMultihopQA dev subset (1,000 questions with answer aliases; no context in this copy)",
    TRIVIAQA: "TriviaQA: 100 test questions + the official 1-question sample with aliases",
}

_NULL_ANSWERS = {"", "null", "none"}
_CMU_YEARS = ("S08", "S09", "S10")


# --------------------------------------------------------------------------------------------- helpers
def _open_text(path: Path) -> io.TextIOBase:
    require_file(path)
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _jsonl(b: DatasetBuilder, path: Path) -> Iterator[tuple[int, int, dict[str, Any], bytes]]:
    """``(line_no, offset, record, raw)`` for each JSON object line; other lines become rejects."""
    require_file(path)
    with open(path, "rb") as fh:
        offset = 0
        for n, raw in enumerate(fh, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                b.reject(path, f"line {n}: not a JSON object ({exc})", raw, line=n, offset=start)
                continue
            if not isinstance(rec, dict):
                b.reject(path, f"line {n}: expected a JSON object, got {type(rec).__name__}", raw, line=n,
                         offset=start)
                continue
            yield n, start, rec, raw


def _answers(value: Any) -> list[str]:
    """Answer strings from a string, a list of strings, or a JSON-encoded list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                return [clean_text(text)]
        else:
            return [clean_text(text)] if text else []
    if isinstance(value, list):
        return dedupe(clean_text(v) for v in value if v is not None and clean_text(v))
    return []


def _template_regex(template: str) -> re.Pattern[str]:
    head, _, tail = template.partition("[X]")
    return re.compile("^" + re.escape(head) + "(?P<x>.+)" + re.escape(tail) + "$")


def subject_mention(question: str, pattern: re.Pattern[str] | None) -> dict[str, Any] | None:
    """The ``[X]`` span of a templated question as a gold mention (``qid`` filled by the caller)."""
    m = pattern.match(question) if pattern else None
    if not m:
        return None
    return {"text": m.group("x"), "start": m.start("x"), "end": m.end("x"), "qid": None}


def title_map(data_root: Path) -> dict[str, str]:
    """Case-folded Wikipedia title (underscores as spaces) -> QID, from the vital-articles title map."""
    path = data_root / "wikipedia-vital-articles" / "vital_articles_entities_2019.csv.gz"
    out: dict[str, str] = {}
    with _open_text(path) as fh:
        for line in fh:
            parts = line.rstrip("\r\n").split(";")
            if len(parts) >= 2 and parts[0].startswith("Q"):
                out.setdefault(parts[1].replace("_", " ").casefold(), parts[0])
    return out


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    with _open_text(path) as fh:
        yield from enumerate(csv.DictReader(fh), start=2)


# ------------------------------------------------------------------------------------- EntityQuestions
def load_entityquestions(data_root: Path) -> LoadedDataset:
    """EntityQuestions test split (24 relations) and the LongTailQA subset with gold subject QIDs."""
    folder = data_root / "entityquestions"
    b = DatasetBuilder(ENTITYQUESTIONS, ("test", "longtail"))
    templates = read_json(b.source(folder / "relation_query_templates.json"))
    patterns = {pid: _template_regex(t) for pid, t in templates.items()}
    disamb = b.source(folder / "DisambEntityQA.csv.gz")
    by_question: dict[tuple[str, str], dict[str, str]] = {}
    lt_rows: list[tuple[int, dict[str, str]]] = []
    for n, row in _csv_rows(disamb):
        lt_rows.append((n, row))
        by_question.setdefault((row["relation"], normalize_question(row["question"])), row)
    files = sorted((folder / "test").glob("P*.test.jsonl"))
    if not files:
        raise FileNotFoundError(f"{folder / 'test'}: no P*.test.jsonl relation files")
    for path in files:
        pid = path.name.split(".", 1)[0]
        b.source(path)
        for n, offset, rec, raw in _jsonl(b, path):
            question = normalize_question(rec.get("question"))
            answers = _answers(rec.get("answers"))
            if not answers:
                b.reject(path, f"line {n}: no answers", raw, line=n, offset=offset)
                continue
            mention = subject_mention(question, patterns.get(pid))
            linked = by_question.get((pid, question))
            meta: dict[str, Any] = {"relation": pid, "template": templates.get(pid)}
            gold = []
            if linked and wikidata_id(f"http://www.wikidata.org/entity/{linked['wikidata_id']}"):
                gold = [linked["wikidata_id"]]
                meta["wikipedia_title"] = linked["wikipedia_title"]
            if mention:
                mention["qid"] = gold[0] if gold else None
                meta["subject"] = mention["text"]
            row = question_row(ENTITYQUESTIONS, "test", f"{pid}-{n}", question, gold_answers=answers,
                               gold_entities=gold, gold_mentions=[mention] if mention else [], meta=meta)
            b.add(row, source_file=path, where=f"line {n}", snippet=raw, line=n, offset=offset)
    for n, row in lt_rows:
        question = normalize_question(row.get("question"))
        qid = clean_text(row.get("wikidata_id"))
        if not qid.startswith("Q") or not qid[1:].isdigit():
            b.reject(disamb, f"row {n}: malformed wikidata_id {qid!r}", json.dumps(row), line=n)
            continue
        mention = subject_mention(question, patterns.get(row.get("relation", "")))
        if mention is None and row.get("subject") and row["subject"] in question:
            start = question.index(row["subject"])
            mention = {"text": row["subject"], "start": start, "end": start + len(row["subject"]), "qid": None}
        if mention:
            mention["qid"] = qid
        meta = {"relation": row.get("relation"), "relation_name": row.get("relation_name"),
                "subject": row.get("subject"), "wikipedia_title": row.get("wikipedia_title")}
        out = question_row(ENTITYQUESTIONS, "longtail", f"lt-{n - 1}", question, gold_entities=[qid],
                           gold_answers=_answers(row.get("answer")), gold_mentions=[mention] if mention else [],
                           meta=meta)
        b.add(out, source_file=disamb, where=f"row {n}", snippet=json.dumps(row), line=n)
    return b.result()


# ------------------------------------------------------------------------------------------------ PopQA
def load_popqa(data_root: Path) -> LoadedDataset:
    """PopQA long-tail subset with subject/object QIDs, aliases and popularity."""
    path = data_root / "popqa" / "DisambPopQA.csv.gz"
    b = DatasetBuilder(POPQA, ("longtail",))
    b.source(path)
    for n, row in _csv_rows(path):
        question = normalize_question(row.get("question"))
        subj = wikidata_id(clean_text(row.get("s_uri")))
        obj = wikidata_id(clean_text(row.get("o_uri")))
        answers = _answers(row.get("possible_answers"))
        if not subj or not answers:
            b.reject(path, f"row {n}: missing subject URI or answers", json.dumps(row), line=n)
            continue
        subject = clean_text(row.get("subj"))
        mentions = []
        if subject and subject in question:
            start = question.index(subject)
            mentions = [{"text": subject, "start": start, "end": start + len(subject), "qid": subj}]
        meta = {"prop": row.get("prop"), "subj": subject, "obj": row.get("obj"),
                "s_wiki_title": row.get("s_wiki_title"), "wikipedia_title": row.get("s_wiki_title"),
                "o_wiki_title": row.get("o_wiki_title"), "s_pop": _int(row.get("s_pop")),
                "o_pop": _int(row.get("o_pop")), "s_aliases": _answers(row.get("s_aliases"))}
        out = question_row(POPQA, "longtail", clean_text(row.get("id")) or f"row-{n}", question,
                           gold_entities=[subj], gold_answers=answers, gold_answer_qids=[obj] if obj else [],
                           gold_mentions=mentions, meta=meta)
        b.add(out, source_file=path, where=f"row {n}", snippet=json.dumps(row), line=n)
    return b.result()


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# -------------------------------------------------------------------------------------------- FactoidQA
def clean_cmu_answer(answer: str) -> str:
    r"""A CMU answer as text: literal ``\\n`` sequences and surrounding quotes removed, spaces collapsed."""
    text = answer.replace("\\n", " ").strip().strip('"').strip()
    return " ".join(text.split())


def load_factoidqa(data_root: Path) -> LoadedDataset:
    """CMU FactoidQA v1.2: one row per (article, question), all students' answers as gold aliases."""
    folder = data_root / "factoidqa-cmu"
    b = DatasetBuilder(FACTOIDQA, ("test",))
    titles = title_map(data_root)
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for year in _CMU_YEARS:
        path = b.source(folder / year / "question_answer_pairs.txt")
        for n, (title, question_raw, answer, d_q, d_a, article_file) in cmu_records(path, b):
            question = normalize_question(question_raw)
            if not question:
                b.reject(path, f"line {n}: empty question", question_raw, line=n)
                continue
            key = (year, article_file, question.casefold())
            g = groups.setdefault(key, {"year": year, "line": n, "path": path, "title": title,
                                        "question": question, "article_file": article_file, "answers": [],
                                        "difficulty": []})
            ans = clean_cmu_answer(answer)
            if ans.casefold() not in _NULL_ANSWERS:
                g["answers"].append(ans)
            g["difficulty"].append({"questioner": None if d_q.upper() in ("", "NULL") else d_q,
                                    "answerer": None if d_a.upper() in ("", "NULL") else d_a})
    per_article: dict[tuple[str, str], int] = {}
    for (year, article_file, _), g in groups.items():
        k = per_article.get((year, article_file), 0)
        per_article[(year, article_file)] = k + 1
        set_name, _, art = article_file.removeprefix("data/").partition("/")
        qid_ = f"{year}-{set_name}-{art}-{k}"
        if not g["answers"]:
            b.reject(g["path"], f"line {g['line']}: question has only NULL answers", g["question"], line=g["line"])
            continue
        wiki_title = g["title"].replace("_", " ")
        qid = titles.get(wiki_title.casefold())
        answers = dedupe(g["answers"])
        meta = {"wikipedia_title": wiki_title, "article_file": f"{year}/{article_file}",
                "difficulty": g["difficulty"], "n_answers": len(g["answers"]),
                "yes_no": all(a.rstrip(".").casefold() in ("yes", "no") for a in answers)}
        row = question_row(FACTOIDQA, "test", qid_, g["question"], gold_answers=answers,
                           gold_entities=[qid] if qid else [], meta=meta)
        b.add(row, source_file=g["path"], where=f"line {g['line']}", line=g["line"])
    return b.result()


# ------------------------------------------------------------------------------------------- StrategyQA
def load_strategyqa(data_root: Path) -> LoadedDataset:
    """StrategyQA yes/no questions (BIG-bench format): ``dev`` and ``test``."""
    folder = data_root / "strategyqa"
    b = DatasetBuilder(STRATEGYQA, ("dev", "test"))
    for split in ("dev", "test"):
        path = b.source(folder / f"{split}.jsonl")
        for n, offset, rec, raw in _jsonl(b, path):
            ans = rec.get("answer")
            if not isinstance(ans, bool):
                b.reject(path, f"line {n}: answer is not a boolean ({ans!r})", raw, line=n, offset=offset)
                continue
            meta = {k: rec[k] for k in ("explanation", "term", "description", "facts", "decomposition") if k in rec}
            row = question_row(STRATEGYQA, split, str(rec.get("id", n)), normalize_question(rec.get("question")),
                               gold_answers=["yes" if ans else "no"], meta=meta)
            b.add(row, source_file=path, where=f"line {n}", snippet=raw, line=n, offset=offset)
    return b.result()


# ------------------------------------------------------------------------------------------------ 2Wiki
def load_2wiki(data_root: Path) -> LoadedDataset:
    """2WikiMultihopQA dev subset (answer aliases; this copy has no context paragraphs)."""
    path = data_root / "2wikimultihopqa" / "dev.json"
    b = DatasetBuilder(TWOWIKI, ("dev",))
    b.source(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of questions")
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            b.reject(path, f"record {i}: not an object", rec)
            continue
        answers = _answers(rec.get("answer"))
        if not answers:
            b.reject(path, f"record {i}: no answer", rec)
            continue
        row = question_row(TWOWIKI, "dev", str(rec.get("test_id", rec.get("_id", i))),
                           normalize_question(rec.get("question")), gold_answers=answers)
        b.add(row, source_file=path, where=f"record {i}", snippet=rec)
    return b.result()


# --------------------------------------------------------------------------------------------- TriviaQA
def load_triviaqa(data_root: Path) -> LoadedDataset:
    """TriviaQA: ``test`` (100 questions, one answer each) and ``sample`` (official format, with aliases)."""
    folder = data_root / "triviaqa"
    b = DatasetBuilder(TRIVIAQA, ("test", "sample"))
    path = b.source(folder / "test.first100.jsonl")
    for n, offset, rec, raw in _jsonl(b, path):
        answers = _answers(rec.get("answer"))
        if not answers:
            b.reject(path, f"line {n}: no answer", raw, line=n, offset=offset)
            continue
        row = question_row(TRIVIAQA, "test", f"test-{n}", normalize_question(rec.get("question")),
                           gold_answers=answers)
        b.add(row, source_file=path, where=f"line {n}", snippet=raw, line=n, offset=offset)
    sample = folder / "triviaqa_sample.json"
    if sample.is_file():
        b.source(sample)
        for i, rec in enumerate(read_json(sample).get("Data", [])):
            ans = rec.get("Answer") or {}
            answers = dedupe([ans.get("Value"), *(ans.get("Aliases") or [])])
            meta = {"matched_wiki_entity": ans.get("MatchedWikiEntityName"), "answer_type": ans.get("Type")}
            row = question_row(TRIVIAQA, "sample", str(rec.get("QuestionId", i)),
                               normalize_question(rec.get("Question")), gold_answers=[a for a in answers if a],
                               meta=meta)
            b.add(row, source_file=sample, where=f"record {i}", snippet=rec)
    return b.result()
