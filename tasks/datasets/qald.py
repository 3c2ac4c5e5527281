"""QALD loaders over Wikidata: ``qald-10`` and ``qald-9-plus``.

Inputs (under the data root):

* ``qald-10/qald_10.json``: official QALD-10 test (394 questions, QALD JSON: multilingual ``question``,
  ``query.sparql``, ``answers`` = SPARQL-JSON results). Enrichments, read when present:
  ``tog-kgqa/qald_10-en.json`` (ToG's 333 English questions with ``qid_topic_entity``) and
  ``qald-10/non_updated_answers/qald_10_test_final.json`` (marca116's copy with the *original* gold answers
  and their labels/aliases in ``solved_answer``).
* ``qald-9-plus/qald_9_pp_test_wikidata_new.json.gz`` (136 test questions, QALD JSON) and
  ``qald-9-plus/qald_9_plus_train_final.json`` (347 train questions, marca116 flat format: ``uid``,
  ``question``, ``sparql_wikidata``, ``answer`` [entity URIs or literals], ``solved_answer`` [labels per
  answer]).

Outputs: ``questions`` rows. Gold answers:

* ``gold_answer_qids``: Wikidata items among the answers.
* ``gold_answers``: the literal answers (numbers, ISO dates, strings, ``true``/``false`` for ASK, non-item
  URIs; a Wikidata lexeme or property as its IRI ``http://www.wikidata.org/entity/L..``, so the QALD metrics
  count it as an entity, as GERBIL does) followed by the labels and aliases of the entity answers where a label
  source exists. ``meta.gold_literals`` holds the literal answers alone and ``meta.answer_labels`` the labels
  per QID, so QALD set metrics can use ``gold_answer_qids`` + ``meta.gold_literals`` without the aliases.
* ``gold_entities``: for QALD-10, ToG's topic entities (``qid_topic_entity`` keys) when the English question
  text matches a ToG question, otherwise the *entities in the query* (every ``wd:Q..`` in the SPARQL, which
  also includes classes such as ``wd:Q5``); ``meta.gold_entities_source`` says which
  (``tog-topic-entities`` or ``sparql-query``). QALD-9-plus has no topic-entity annotation: always
  ``sparql-query``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.datasets.base import (
    WIKIDATA_ENTITY,
    DatasetBuilder,
    DatasetError,
    LoadedDataset,
    clean_text,
    dedupe,
    literal_text,
    normalize_question,
    pair_answer_labels,
    parse_sparql_results,
    qids_in_sparql,
    question_row,
    read_json_list,
    wikidata_id,
)

QALD10 = "qald-10"
QALD10_DESCRIPTION = "QALD-10 over Wikidata: official test set (394 Qs, SPARQL + answers; ToG topic entities)"
QALD9P = "qald-9-plus"
QALD9P_DESCRIPTION = "QALD-9-plus over Wikidata: test 136 Qs (QALD JSON), train 347 Qs (answers with labels)"

QALD10_FILE = Path("qald-10/qald_10.json")
TOG_QALD10_FILE = Path("tog-kgqa/qald_10-en.json")
QALD10_LABELS_FILE = Path("qald-10/non_updated_answers/qald_10_test_final.json")
QALD9P_TEST_FILE = Path("qald-9-plus/qald_9_pp_test_wikidata_new.json.gz")
QALD9P_TRAIN_FILE = Path("qald-9-plus/qald_9_plus_train_final.json")


def _norm(text: str) -> str:
    return normalize_question(text).casefold()


def english_question(rec: dict[str, Any]) -> tuple[str, dict[str, str], str]:
    """English question text and every language's text of a QALD JSON record.

    Returns:
        ``(english_text_or_empty, {lang: text}, raw_english_text)``; texts are normalised
        (``normalize_question``).
    """
    raw: dict[str, str] = {}
    for q in rec.get("question") or []:
        if isinstance(q, dict) and isinstance(q.get("string"), str) and q.get("language"):
            raw.setdefault(str(q["language"]), q["string"])
    texts = {lang: normalize_question(text) for lang, text in raw.items()}
    return texts.get("en", ""), texts, raw.get("en", "")


def flat_answers(answers: list[Any], solved: list[Any] | None) -> dict[str, Any]:
    """Split a marca116 flat ``answer`` list into QIDs and literals and attach ``solved_answer`` labels.

    Returns:
        ``{"qids", "literals", "labels_by_id", "unpaired_labels", "aligned"}``.
    """
    qids: list[str] = []
    literals: list[str] = []
    for a in answers or []:
        wid = wikidata_id(a) if isinstance(a, str) else None
        if wid and wid.startswith("Q"):
            qids.append(wid)
        elif wid:
            literals.append(WIKIDATA_ENTITY + wid)
        elif a is not None:
            literals.append(literal_text(a))
    by_id, unpaired, aligned = pair_answer_labels(list(answers or []), list(solved or []))
    return {"qids": dedupe(qids), "literals": dedupe(literals), "labels_by_id": by_id,
            "unpaired_labels": unpaired, "aligned": aligned}


def _answer_type(qids: list[str], literals: list[str], boolean: bool) -> str:
    if boolean:
        return "boolean"
    if qids and literals:
        return "mixed"
    return "resource" if qids else "literal" if literals else "empty"


def _labels_for(qids: list[str], by_id: dict[str, list[str]], unpaired: list[str]) -> list[str]:
    out: list[str] = []
    for q in qids:
        out.extend(by_id.get(q, []))
    for eid, labels in by_id.items():  # lexemes etc. that are not among the QIDs
        if eid not in qids:
            out.extend(labels)
    return out + unpaired


def _load_qald_json(b: DatasetBuilder, path: Path, split: str, extra: Any = None) -> None:
    """Add the rows of one official-format QALD file to ``b``.

    ``extra(rec, english, gold, meta, query_entities) -> (gold_entities, answer_labels)`` may replace the gold
    entities, add labels to the gold answers and fill ``meta``.
    """
    for i, rec in enumerate(read_json_list(b.source(path), key="questions")):
        where = f"record {i}"
        if not isinstance(rec, dict) or rec.get("id") is None:
            b.reject(path, f"{where}: not a question object with an id", rec)
            continue
        english, texts, raw_english = english_question(rec)
        if not english:
            b.reject(path, f"{where}: no English question string (id {rec['id']!r})", rec)
            continue
        sparql = clean_text((rec.get("query") or {}).get("sparql")) or None
        try:
            gold = parse_sparql_results(rec.get("answers"))
        except DatasetError as exc:
            b.reject(path, f"{where}: {exc}", rec)
            continue
        meta: dict[str, Any] = {
            "answer_type": gold.answer_type,
            "answer_vars": gold.variables,
            "gold_literals": gold.literals,
            "literal_datatypes": gold.datatypes,
            "questions_i18n": texts,
        }
        if raw_english.strip() != english:
            meta["raw_question"] = raw_english
        for key in ("aggregation", "answertype", "onlydbo", "hybrid"):
            if key in rec:
                meta[key] = rec[key]
        gold_entities, labels = qids_in_sparql(sparql), []
        meta["gold_entities_source"] = "sparql-query"
        if extra is not None:
            gold_entities, labels = extra(rec, english, gold, meta, gold_entities)
        row = question_row(
            b.name, split, clean_text(rec["id"]), english,
            gold_entities=gold_entities,
            gold_answers=gold.literals + labels,
            gold_answer_qids=gold.qids,
            sparql=sparql,
            meta=meta,
        )
        b.add(row, source_file=path, where=where, snippet=rec)


def load_qald10(data_root: Path) -> LoadedDataset:
    """Load QALD-10 (split ``test``), enriched with ToG topic entities and answer labels when available.

    Args:
        data_root: The shared data folder.

    Returns:
        The dataset. ``meta.answer_labels_source`` names the label file for questions whose official answer
        set equals marca116's non-updated copy (labels are never taken when the answer sets differ).
    """
    b = DatasetBuilder(QALD10, ["test"])
    tog: dict[str, dict[str, Any]] = {}
    tog_path = data_root / TOG_QALD10_FILE
    if tog_path.is_file():
        for rec in read_json_list(b.source(tog_path)):
            if isinstance(rec, dict) and isinstance(rec.get("question"), str):
                tog.setdefault(_norm(rec["question"]), rec)
    labelled: dict[str, dict[str, Any]] = {}
    labels_path = data_root / QALD10_LABELS_FILE
    if labels_path.is_file():
        for rec in read_json_list(b.source(labels_path)):
            if isinstance(rec, dict) and rec.get("uid") is not None:
                labelled[str(rec["uid"])] = rec

    def extra(rec: dict[str, Any], english: str, gold: Any, meta: dict[str, Any],
              query_entities: list[str]) -> tuple[list[str], list[str]]:
        entities = query_entities
        meta["query_entities"] = query_entities
        t = tog.get(_norm(english))
        topic = (t or {}).get("qid_topic_entity")
        if isinstance(topic, dict) and topic:
            entities = [k for k in topic if isinstance(k, str) and k.startswith("Q")]
            meta["gold_entities_source"] = "tog-topic-entities"
            meta["topic_entity_labels"] = topic
        labels: list[str] = []
        lab = labelled.get(str(rec["id"]))
        if lab is not None and _norm(str(lab.get("question", ""))) == _norm(english):
            flat = flat_answers(lab.get("answer") or [], lab.get("solved_answer"))
            official = set(gold.qids) | set(gold.literals)
            if set(flat["qids"]) | set(flat["literals"]) == official:
                meta["answer_labels"] = flat["labels_by_id"]
                meta["answer_labels_source"] = str(QALD10_LABELS_FILE)
                labels = _labels_for(gold.qids, flat["labels_by_id"], flat["unpaired_labels"])
        return entities, labels

    _load_qald_json(b, data_root / QALD10_FILE, "test", extra)
    return b.result()


def load_qald9_plus(data_root: Path) -> LoadedDataset:
    """Load QALD-9-plus over Wikidata (splits ``train`` 347, ``test`` 136).

    Args:
        data_root: The shared data folder.

    Returns:
        The dataset. In the test file 101 of 136 answer sets are empty (the MST5 copy stores empty bindings,
        ASK questions included): those rows have ``meta.answer_type == "empty"`` and no gold answers.
    """
    b = DatasetBuilder(QALD9P, ["train", "test"])
    path = data_root / QALD9P_TRAIN_FILE
    for i, rec in enumerate(read_json_list(b.source(path))):
        where = f"record {i}"
        if not isinstance(rec, dict) or rec.get("uid") is None or not isinstance(rec.get("answer", []), list):
            b.reject(path, f"{where}: not a question object with uid and an answer list", rec)
            continue
        sparql = clean_text(rec.get("sparql_wikidata")) or None
        flat = flat_answers(rec.get("answer") or [], rec.get("solved_answer"))
        boolean = any(isinstance(a, bool) for a in rec.get("answer") or [])
        question = normalize_question(rec.get("question"))
        meta = {
            "answer_type": _answer_type(flat["qids"], flat["literals"], boolean),
            "gold_literals": flat["literals"],
            "answer_labels": flat["labels_by_id"],
            "answer_labels_aligned": flat["aligned"],
            "gold_entities_source": "sparql-query",
            "NNQT_question": rec.get("NNQT_question") or None,
        }
        if isinstance(rec.get("question"), str) and rec["question"].strip() != question:
            meta["raw_question"] = rec["question"]
        row = question_row(
            QALD9P, "train", clean_text(rec["uid"]), question,
            gold_entities=qids_in_sparql(sparql),
            gold_answers=flat["literals"]
            + _labels_for(flat["qids"], flat["labels_by_id"], flat["unpaired_labels"]),
            gold_answer_qids=flat["qids"],
            sparql=sparql,
            meta=meta,
        )
        b.add(row, source_file=path, where=where, snippet=rec)
    _load_qald_json(b, data_root / QALD9P_TEST_FILE, "test")
    return b.result()
