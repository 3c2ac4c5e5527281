"""ToG-format KGQA benchmarks over Freebase used by AnchorRAG: ``cwq``, ``webqsp``, ``grailqa``, ``webquestions``.

Inputs (under the data root; provenance in ``SOURCES.md``):

* ``cwq``: ``tog-kgqa/cwq.json.gz``, ComplexWebQuestions test (3,531): ``[{ID, question, answer (str),
  topic_entity {mid: name}, qid_topic_entity {QID: name}, sparql (Freebase), compositionality_type, webqsp_ID,
  webqsp_question, machine_question, created}]``.
* ``webqsp``: ``webqsp/WebQSP.json.gz``, WebQSP test (1,639) in a compact form: ``[{QuestionId, RawQuestion,
  answer [names or null], topic_entity}]``, plus ``webqsp/sample100/WebQSP.json`` (100 of the same questions in
  ToG's full form with ``Parses`` and ``qid_topic_entity``). A record that carries ``Parses`` itself (ToG's
  full ``WebQSP.json``) is read the same way as a sample100 record.
* ``grailqa``: ``tog-kgqa/graliqa.json.gz`` (file name misspelt in the source), ToG's 1,000-question GrailQA
  sample: ``[{qid (int), question, answer [{answer_type, answer_argument, entity_name?}], topic_entity,
  sparql_query, s_expression, level, domains, function, num_node, num_edge, hops?}]``.
* ``webquestions``: ``tog-kgqa/WebQuestions.json.gz``, WebQuestions test (2,032): ``[{url, question,
  answers [str], topic_entity, qid_topic_entity}]``.
* For the ``test-open`` split: TriviaQA (``tasks.datasets.entity_qa.load_triviaqa``, 101 questions) and
  2WikiMultihopQA (``load_2wiki``, 1,000 questions; stands in for AnchorRAG's HotpotQA multi-hop questions).

Outputs: ``questions`` rows in three splits per dataset:

* ``test``: the benchmark. ``question_id``: ``ID`` (cwq), ``QuestionId`` (webqsp), ``str(qid)`` (grailqa), and
  for webquestions, which has no id, the 0-based position of the record in the file as a string (``"0"`` is
  "what does jamaican people speak?"). ``gold_answers``: cwq ``[answer]``; webqsp the union over ``Parses`` of
  each answer's ``EntityName`` (``AnswerArgument`` when the name is null), which is how ToG's evaluation aligns
  WebQSP answers, or, for questions without parses, the compact ``answer`` list with its nulls dropped (nulls
  stand for value answers such as dates that the compact file lost; counted in ``meta.null_answers``); grailqa
  each answer's ``entity_name`` (else ``answer_argument``); webquestions ``answers``. Answers are stripped and
  deduplicated; a blank one (empty or whitespace only) is kept as ``""``, as both reference scripts keep it
  (their substring test finds it in every answer): 17 WebQuestions and 11 WebQSP questions have one, CWQ and
  GrailQA none. A question without any gold answer is kept with ``gold_answers`` = [] and
  ``meta.no_gold_answers`` = true. ``gold_answer_qids`` is
  always [] (the answers are Freebase names, not annotated with QIDs: QALD-style metrics then fall back to
  ``gold_answers``). ``gold_entities``: the Wikidata topic entities, i.e. the ``qid_topic_entity`` keys (cwq,
  webquestions, webqsp sample100) that are real QIDs (ToG's ``UnknownQID`` placeholder is dropped); for webqsp
  questions without them and for grailqa, the topic-entity MIDs mapped through ``mid_qid_pairs`` (MIDs without a
  QID are listed in ``meta.unmapped_mids``); else []. ``meta.gold_entities_source`` says which
  (``qid_topic_entity`` | ``mid_qid_table`` | ``none``). The ``sparql`` column stays empty: the gold queries are
  Freebase queries, kept in ``meta.freebase_sparql``. Other ``meta`` fields: ``topic_entity`` ({mid: name}),
  ``topic_names`` ({QID: name}); cwq ``compositionality_type``, ``webqsp_id``, ``webqsp_question``,
  ``machine_question``; webqsp ``answer_source`` (``parses`` | ``compact``), ``n_parses``; grailqa ``level``,
  ``domains``, ``function``, ``num_node``, ``num_edge``, ``hops``, ``s_expression``, ``answer_mids``,
  ``answer_types``; webquestions ``url``; ``raw_question`` when whitespace was normalised.
* ``test-noisy``: every ``test`` question with typos in its topic-entity mentions (``tasks.datasets.noise``,
  seed ``NOISE_SEED``; names = ``topic_entity`` and ``qid_topic_entity`` values), same ``question_id`` and gold.
* ``test-open``: ``test-noisy`` (``meta.out_of_kb`` = false) plus out-of-KB questions, 10% of ``len(test)``
  rounded half up (WebQSP 1,639 -> +164 = 1,803 and GrailQA 1,000 -> +100 = 1,100, as in AnchorRAG's Table 5):
  half (rounded down) from TriviaQA, the rest from 2Wiki; when one source has fewer questions than its half, all
  of them are taken and the other source fills the gap. The sample is drawn with
  ``random.Random(f"{NOISE_SEED}:{dataset}:open")`` and the out-of-KB rows are inserted at seeded positions
  among the in-KB rows (which keep their order), so a ``--limit`` run still sees some. Their ``question_id`` is
  ``triviaqa:<id>`` / ``2wiki:<id>``, ``gold_entities`` = [], ``gold_answers`` = the source answers with
  aliases, ``meta`` = ``{out_of_kb: true, source, source_split, source_id}``.

Bad records (not an object, no id, missing / non-text / empty question, topic maps that are not objects,
answers of the wrong type, repeated ids) become rejects with the record index; a file that is not a JSON list
or a truncated gzip raises ``DatasetError`` naming the file.

Example row (``cwq``, split ``test``)::

    {"question_id": "WebQTrn-241_dfb6c97ac9bf2f0ac07f27dd80f9edc2",
     "question": "What country bordering France contains an airport that serves Nijmegen?",
     "gold_entities": ["Q142", "Q47887"], "gold_answers": ["Germany"], "gold_answer_qids": [], "sparql": None,
     "meta": {"compositionality_type": "conjunction", "freebase_sparql": "PREFIX ns: ...",
              "topic_entity": {"m.0f8l9c": "France", "m.05g2b": "Nijmegen"},
              "topic_names": {"Q142": "France", "Q47887": "Nijmegen"}, "webqsp_id": "WebQTrn-241", ...}}
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tasks.datasets import entity_qa
from tasks.datasets.base import (
    DatasetBuilder,
    LoadedDataset,
    Row,
    clean_text,
    dedupe,
    dump_meta,
    is_qid,
    normalize_question,
    question_row,
    read_json_list,
)
from tasks.datasets.noise import NOISE_SEED, NOISY_SPLIT, noisy_rows

CWQ = "cwq"
WEBQSP = "webqsp"
GRAILQA = "grailqa"
WEBQUESTIONS = "webquestions"
DATASETS = (CWQ, WEBQSP, GRAILQA, WEBQUESTIONS)

TEST, OPEN_SPLIT = "test", "test-open"
SPLITS = (TEST, NOISY_SPLIT, OPEN_SPLIT)

CWQ_FILE = Path("tog-kgqa") / "cwq.json.gz"
WEBQSP_FILE = Path("webqsp") / "WebQSP.json.gz"
WEBQSP_SAMPLE_FILE = Path("webqsp") / "sample100" / "WebQSP.json"
GRAILQA_FILE = Path("tog-kgqa") / "graliqa.json.gz"
WEBQUESTIONS_FILE = Path("tog-kgqa") / "WebQuestions.json.gz"

DESCRIPTIONS = {
    CWQ: "ComplexWebQuestions test (3,531, ToG format, Freebase answers) + test-noisy / test-open splits",
    WEBQSP: "WebQSP test (1,639, ToG format, Freebase answers) + test-noisy / test-open (1,803) splits",
    GRAILQA: "GrailQA 1,000-question ToG sample (Freebase answers) + test-noisy / test-open (1,100) splits",
    WEBQUESTIONS: "WebQuestions test (2,032, ToG format, Freebase answers) + test-noisy / test-open splits",
}

_TABLE_FILES = (WEBQSP_SAMPLE_FILE, CWQ_FILE, WEBQUESTIONS_FILE)
_MID = re.compile(r"^[mg]\.[0-9a-z_]+$")


class _Bad(ValueError):
    """A record field of the wrong type (becomes a reject)."""


# --------------------------------------------------------------------------------------------- helpers
def _name_map(rec: dict[str, Any], key: str) -> dict[str, str]:
    """A ``{id: name}`` field; absent or null is ``{}``, anything but an object is a ``_Bad`` record."""
    value = rec.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad(f"{key} is not an object ({type(value).__name__})")
    return {str(k): clean_text(v) for k, v in value.items()}


def _question(rec: dict[str, Any], key: str) -> tuple[str, dict[str, Any]]:
    """Normalised question text and the ``raw_question`` meta entry when normalising changed it."""
    if key not in rec or rec[key] is None:
        raise _Bad(f"missing question ({key!r})")
    if not isinstance(rec[key], str):
        raise _Bad(f"question {key!r} is not text ({type(rec[key]).__name__})")
    question = normalize_question(rec[key])
    return question, ({"raw_question": rec[key]} if question != rec[key].strip() else {})


def _aliases(values: Iterable[Any]) -> list[str]:
    """Gold answer strings, stripped, repeats dropped (first kept), ``None`` dropped, a blank one kept as ``""``.

    Both reference scripts keep a blank alias, and their substring test finds it in every answer.
    """
    return list(dict.fromkeys(clean_text(v) for v in values if v is not None))


def _texts(value: Any, key: str) -> tuple[list[str], int]:
    """Answer strings from a string or a list of strings; returns ``(answers, number of nulls dropped)``."""
    if value is None:
        return [], 0
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return _aliases([value]), 0
    if not isinstance(value, list):
        raise _Bad(f"{key} is neither text nor a list ({type(value).__name__})")
    if any(isinstance(v, dict | list) for v in value):
        raise _Bad(f"{key} holds non-text values")
    return _aliases(value), sum(1 for v in value if v is None)


def _test_row(dataset: str, question_id: str, question: str, answers: list[str], **fields: Any) -> Row:
    """A ``test`` row whose ``gold_answers`` are ``answers`` as given, a blank alias included."""
    row = question_row(dataset, TEST, question_id, question, gold_answers=answers, **fields)
    row["gold_answers"] = list(answers)  # question_row drops blank strings
    return row


def _record_id(rec: dict[str, Any], key: str) -> str:
    value = rec.get(key)
    if value is None or isinstance(value, dict | list | bool) or not str(value).strip():
        raise _Bad(f"missing id ({key!r})")
    return str(value).strip()


def _gold_qids(names: dict[str, str]) -> list[str]:
    return [k for k in names if is_qid(k)]


def _topic_names(*maps: dict[str, str]) -> list[str]:
    return dedupe(n for m in maps for n in m.values() if n)


def _mapped(topic: dict[str, str], table: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """``({QID: name}, unmapped MIDs)`` for the topic MIDs, through the MID -> QID table."""
    qids: dict[str, str] = {}
    unmapped: list[str] = []
    for mid, name in topic.items():
        if mid in table:
            qids.setdefault(table[mid], name)
        else:
            unmapped.append(mid)
    return qids, unmapped


def _records(b: DatasetBuilder, path: Path) -> list[Any]:
    b.source(path)
    return read_json_list(path)


# ---------------------------------------------------------------------------------------- MID <-> QID
def mid_qid_pairs(data_root: Path | str) -> dict[str, str]:
    """Freebase MID -> Wikidata QID, derived from ToG's topic-entity annotations.

    Records of ``cwq``, ``webquestions`` and the WebQSP sample100 whose ``topic_entity`` and
    ``qid_topic_entity`` both hold exactly one entry give one pair (ToG's ``UnknownMID`` / ``UnknownQID``
    placeholders are skipped). A MID paired with two different QIDs is dropped. Several MIDs may map to the same
    QID. Malformed records are skipped here (the dataset loaders report them). Cached per data root.

    Args:
        data_root: The shared data folder.

    Returns:
        A new dict (about 1,900 pairs on the shared data), e.g. ``"m.0f8l9c" -> "Q142"`` (France).
    """
    return dict(_mid_qid_pairs(str(Path(data_root).resolve())))


def _table_files(data_root: Path) -> tuple[Path, ...]:
    """Files the MID -> QID table is derived from (sources of the loaders that use it)."""
    return tuple(data_root / rel for rel in _TABLE_FILES)


@functools.cache
def _mid_qid_pairs(root: str) -> dict[str, str]:
    seen: dict[str, set[str]] = {}
    for rel in _TABLE_FILES:
        for rec in read_json_list(Path(root) / rel):
            if not isinstance(rec, dict):
                continue
            topic, qids = rec.get("topic_entity"), rec.get("qid_topic_entity")
            if not (isinstance(topic, dict) and isinstance(qids, dict) and len(topic) == 1 and len(qids) == 1):
                continue
            (mid,), (qid,) = topic, qids
            if isinstance(mid, str) and _MID.match(mid) and is_qid(qid):
                seen.setdefault(mid, set()).add(qid)
    return {mid: next(iter(q)) for mid, q in seen.items() if len(q) == 1}


# ------------------------------------------------------------------------------------ open-world split
def open_split_size(n_test: int) -> int:
    """Number of out-of-KB questions added to ``test-open``: 10% of ``n_test``, rounded half up."""
    return (n_test + 5) // 10


def out_of_kb_pool(data_root: Path) -> tuple[dict[str, list[Row]], list[Path]]:
    """Candidate out-of-KB questions: ``{"triviaqa": rows, "2wiki": rows}`` (rows with answers) and their files."""
    pools: dict[str, list[Row]] = {}
    sources: list[Path] = []
    for name, loader in ((entity_qa.TRIVIAQA, entity_qa.load_triviaqa), (entity_qa.TWOWIKI, entity_qa.load_2wiki)):
        ds = loader(data_root)
        pools[name] = [r for r in ds.rows() if r["gold_answers"]]
        sources.extend(ds.sources)
    return pools, sources


def open_rows(dataset: str, noisy: list[Row], pools: dict[str, list[Row]], *, seed: int = NOISE_SEED) -> list[Row]:
    """The ``test-open`` split: the noisy rows plus ``open_split_size(len(noisy))`` out-of-KB questions.

    Args:
        dataset: Dataset name (``dataset`` column and part of the RNG seed string).
        noisy: Rows of the ``test-noisy`` split (one per ``test`` question).
        pools: ``out_of_kb_pool`` result.
        seed: Seed of ``random.Random(f"{seed}:{dataset}:open")``.

    Returns:
        In-KB rows (copies with ``meta.out_of_kb`` = false, in their order) with the sampled out-of-KB rows
        inserted at seeded positions.
    """
    need = open_split_size(len(noisy))
    trivia, wiki = pools.get(entity_qa.TRIVIAQA, []), pools.get(entity_qa.TWOWIKI, [])
    n_trivia = min(need // 2, len(trivia))
    n_wiki = min(need - n_trivia, len(wiki))
    n_trivia = min(need - n_wiki, len(trivia))
    rng = random.Random(f"{seed}:{dataset}:open")
    picked = [(entity_qa.TRIVIAQA, r) for r in rng.sample(trivia, n_trivia)]
    picked += [(entity_qa.TWOWIKI, r) for r in rng.sample(wiki, n_wiki)]
    extra = [
        question_row(dataset, OPEN_SPLIT, f"{source}:{r['question_id']}", r["question"],
                     gold_answers=r["gold_answers"],
                     meta={"out_of_kb": True, "source": source, "source_split": r["split"],
                           "source_id": r["question_id"]})
        for source, r in picked
    ]
    in_kb = []
    for row in noisy:
        new = {k: list(v) if isinstance(v, list) else v for k, v in row.items()}
        new.update(split=OPEN_SPLIT, meta=dump_meta({**json.loads(row["meta"]), "out_of_kb": False}))
        in_kb.append(new)
    total = len(in_kb) + len(extra)
    slots = set(rng.sample(range(total), len(extra)))
    out: list[Row] = []
    it_in, it_extra = iter(in_kb), iter(extra)
    for i in range(total):
        out.append(next(it_extra) if i in slots else next(it_in))
    return out


def _finish(b: DatasetBuilder, dataset: str, data_root: Path, source: Path, test: list[Row],
            names: dict[str, list[str]]) -> LoadedDataset:
    """Add the ``test-noisy`` and ``test-open`` splits derived from the kept ``test`` rows."""
    noisy = noisy_rows(dataset, test, names)
    for row in noisy:
        b.add(row, source_file=source, where=f"{NOISY_SPLIT} {row['question_id']}")
    pools, sources = out_of_kb_pool(data_root)
    for path in sources:
        b.source(path)
    for row in open_rows(dataset, noisy, pools):
        b.add(row, source_file=source, where=f"{OPEN_SPLIT} {row['question_id']}")
    return b.result()


def _load(dataset: str, data_root: Path, path: Path,
          parse: Callable[[dict[str, Any], int], tuple[Row, list[str]]], extra: tuple[Path, ...] = ()) -> LoadedDataset:
    """Shared record loop: ``parse(record, index) -> (test row, topic names)`` or ``_Bad`` (a reject)."""
    b = DatasetBuilder(dataset, SPLITS)
    for p in extra:
        b.source(p)
    test: list[Row] = []
    names: dict[str, list[str]] = {}
    for i, rec in enumerate(_records(b, path)):
        if not isinstance(rec, dict):
            b.reject(path, f"record {i}: not an object ({type(rec).__name__})", rec)
            continue
        try:
            row, topic_names = parse(rec, i)
        except _Bad as exc:
            b.reject(path, f"record {i}: {exc}", rec)
            continue
        if b.add(row, source_file=path, where=f"record {i}", snippet=rec):
            test.append(row)
            names[row["question_id"]] = topic_names
    return _finish(b, dataset, data_root, path, test, names)


def _answer_meta(answers: list[str]) -> dict[str, Any]:
    return {} if answers else {"no_gold_answers": True}


# ---------------------------------------------------------------------------------------------- loaders
def load_cwq(data_root: Path) -> LoadedDataset:
    """ComplexWebQuestions test (ToG ``cwq.json``) with ``test-noisy`` and ``test-open`` splits."""

    def parse(rec: dict[str, Any], _i: int) -> tuple[Row, list[str]]:
        qid = _record_id(rec, "ID")
        question, meta = _question(rec, "question")
        topic, topic_qids = _name_map(rec, "topic_entity"), _name_map(rec, "qid_topic_entity")
        answers, _ = _texts(rec.get("answer"), "answer")
        gold = _gold_qids(topic_qids)
        meta.update(topic_entity=topic, topic_names=topic_qids, freebase_sparql=rec.get("sparql"),
                    compositionality_type=rec.get("compositionality_type"), webqsp_id=rec.get("webqsp_ID"),
                    webqsp_question=rec.get("webqsp_question"), machine_question=rec.get("machine_question"),
                    gold_entities_source="qid_topic_entity" if gold else "none", **_answer_meta(answers))
        row = _test_row(CWQ, qid, question, answers, gold_entities=gold, meta=meta)
        return row, _topic_names(topic, topic_qids)

    return _load(CWQ, data_root, data_root / CWQ_FILE, parse)


def _parse_answers(parses: Any) -> list[str]:
    """Union over WebQSP ``Parses`` of ``EntityName`` (``AnswerArgument`` when the name is null), as ToG aligns."""
    if not isinstance(parses, list):
        raise _Bad("Parses is not a list")
    out: list[Any] = []
    for parse in parses:
        answers = parse.get("Answers") if isinstance(parse, dict) else None
        if not isinstance(answers, list):
            raise _Bad("a parse has no Answers list")
        for ans in answers:
            if not isinstance(ans, dict):
                raise _Bad("an answer is not an object")
            name = ans.get("EntityName")
            out.append(name if name is not None else ans.get("AnswerArgument"))
    return _aliases(out)


def load_webqsp(data_root: Path) -> LoadedDataset:
    """WebQSP test (compact ToG/AoG ``WebQSP.json`` + the 100-question full sample) with open-world splits."""
    table = mid_qid_pairs(data_root)
    sample_path = data_root / WEBQSP_SAMPLE_FILE
    sample: dict[str, dict[str, Any]] = {}
    for rec in read_json_list(sample_path):
        if isinstance(rec, dict) and rec.get("QuestionId") is not None:
            sample.setdefault(str(rec["QuestionId"]).strip(), rec)

    def parse(rec: dict[str, Any], _i: int) -> tuple[Row, list[str]]:
        qid = _record_id(rec, "QuestionId")
        question, meta = _question(rec, "RawQuestion")
        full = rec if "Parses" in rec else sample.get(qid)
        topic = _name_map(rec, "topic_entity")
        topic_qids = _name_map(rec, "qid_topic_entity") or (_name_map(full, "qid_topic_entity") if full else {})
        answers = None
        if full is not None:
            try:
                answers = _parse_answers(full.get("Parses"))
            except _Bad:
                if full is rec:
                    raise
        if full is not None and answers is not None:
            meta.update(answer_source="parses", n_parses=len(full["Parses"]))
            sparqls = [p.get("Sparql") for p in full["Parses"] if isinstance(p, dict) and p.get("Sparql")]
            if sparqls:
                meta["freebase_sparql"] = sparqls[0]
            if not topic:
                topic = _name_map(full, "topic_entity")
        else:
            answers, nulls = _texts(rec.get("answer"), "answer")
            meta["answer_source"] = "compact"
            if nulls:
                meta["null_answers"] = nulls
        gold = _gold_qids(topic_qids)
        if gold:
            meta["gold_entities_source"] = "qid_topic_entity"
            names = topic_qids
        else:
            names, unmapped = _mapped(topic, table)
            gold = list(names)
            meta["gold_entities_source"] = "mid_qid_table" if gold else "none"
            if unmapped:
                meta["unmapped_mids"] = unmapped
        meta.update(topic_entity=topic, topic_names=names, **_answer_meta(answers))
        row = _test_row(WEBQSP, qid, question, answers, gold_entities=gold, meta=meta)
        return row, _topic_names(topic, topic_qids)

    return _load(WEBQSP, data_root, data_root / WEBQSP_FILE, parse, _table_files(data_root))


def load_grailqa(data_root: Path) -> LoadedDataset:
    """GrailQA 1,000-question ToG sample (``graliqa.json``) with open-world splits."""
    table = mid_qid_pairs(data_root)

    def parse(rec: dict[str, Any], _i: int) -> tuple[Row, list[str]]:
        qid = _record_id(rec, "qid")
        question, meta = _question(rec, "question")
        topic = _name_map(rec, "topic_entity")
        raw_answers = rec.get("answer") or []
        if not isinstance(raw_answers, list) or not all(isinstance(a, dict) for a in raw_answers):
            raise _Bad("answer is not a list of objects")
        answers = _aliases(a.get("entity_name") if a.get("entity_name") is not None else a.get("answer_argument")
                           for a in raw_answers)
        names, unmapped = _mapped(topic, table)
        meta.update(topic_entity=topic, topic_names=names, freebase_sparql=rec.get("sparql_query"),
                    s_expression=rec.get("s_expression"), level=rec.get("level"), domains=rec.get("domains"),
                    function=rec.get("function"), num_node=rec.get("num_node"), num_edge=rec.get("num_edge"),
                    hops=rec.get("hops"),
                    answer_mids=dedupe(a.get("answer_argument") for a in raw_answers
                                       if a.get("answer_type") == "Entity"),
                    answer_types=dedupe(a.get("answer_type") for a in raw_answers),
                    gold_entities_source="mid_qid_table" if names else "none", **_answer_meta(answers))
        if unmapped:
            meta["unmapped_mids"] = unmapped
        row = _test_row(GRAILQA, qid, question, answers, gold_entities=list(names), meta=meta)
        return row, _topic_names(topic)

    return _load(GRAILQA, data_root, data_root / GRAILQA_FILE, parse, _table_files(data_root))


def load_webquestions(data_root: Path) -> LoadedDataset:
    """WebQuestions test (ToG ``WebQuestions.json``); ``question_id`` is the 0-based record position."""

    def parse(rec: dict[str, Any], i: int) -> tuple[Row, list[str]]:
        question, meta = _question(rec, "question")
        topic, topic_qids = _name_map(rec, "topic_entity"), _name_map(rec, "qid_topic_entity")
        answers, _ = _texts(rec.get("answers"), "answers")
        gold = _gold_qids(topic_qids)
        meta.update(url=rec.get("url"), topic_entity=topic, topic_names=topic_qids,
                    gold_entities_source="qid_topic_entity" if gold else "none", **_answer_meta(answers))
        row = _test_row(WEBQUESTIONS, str(i), question, answers, gold_entities=gold, meta=meta)
        return row, _topic_names(topic, topic_qids)

    return _load(WEBQUESTIONS, data_root, data_root / WEBQUESTIONS_FILE, parse)


LOADERS: dict[str, Callable[[Path], LoadedDataset]] = {
    CWQ: load_cwq,
    WEBQSP: load_webqsp,
    GRAILQA: load_grailqa,
    WEBQUESTIONS: load_webquestions,
}
