"""LC-QuAD 2.0 sample (``lcquad2-sample``): marca116's 1,312-question template-balanced train subset.

Inputs: ``<data_root>/lcquad2-sample/train_lcquad2_final_1k.json.gz``, a JSON list of
``{uid, question, NNQT_question, sparql_wikidata, template, template_id, answer, solved_answer, ...}``.

Outputs: ``questions`` rows in split ``train``:

* ``question``: the verbalised question. LC-QuAD 2.0 has questions its annotators left unusable (null,
  ``n/a``, ``na``, ``[]`` or a single word such as ``EDITION``; 4 rows in this file). Those rows are kept with
  the template question ``NNQT_question`` (braces removed) and ``meta.question_source = "NNQT_question"``
  (``meta.original_question`` keeps the raw value), so the split keeps the file's size and a run can filter
  them. Rows with neither are rejects.
* ``gold_entities``: the *entities in the query* (``wd:Q..`` in ``sparql_wikidata``).
* ``gold_answer_qids``: entity answers; ``gold_answers``: literal answers (``true``/``false`` for ASK; a
  Wikidata lexeme or property as its IRI) then the labels of the entity answers. ``solved_answer`` holds one
  label per answer, index-aligned with ``answer`` (checked: literals sit at the same index in both lists); labels
  are only paired when the lengths agree.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tasks.datasets.base import (
    WIKIDATA_ENTITY,
    DatasetBuilder,
    LoadedDataset,
    clean_text,
    dedupe,
    literal_text,
    normalize_question,
    qids_in_sparql,
    question_row,
    read_json_list,
    wikidata_id,
)

NAME = "lcquad2-sample"
DESCRIPTION = "LC-QuAD 2.0 over Wikidata: 1,312-question template-balanced train sample (SPARQL + answers)"
FILE = Path("lcquad2-sample/train_lcquad2_final_1k.json.gz")
_PLACEHOLDERS = {"", "n/a", "na", "none", "null", "nan", "[]", "{}", "-", "?"}


def usable_question(value: Any) -> tuple[str | None, list[str]]:
    """The question text and any extra paraphrases.

    An annotator sometimes typed several paraphrases separated by blank lines: the first is the question, the
    others are returned as paraphrases.

    Returns:
        ``(question, paraphrases)``; the question is ``None`` when missing or a placeholder (``n/a``, one
        word...).
    """
    if not isinstance(value, str):
        return None, []
    parts = [normalize_question(p) for p in re.split(r"\n\s*\n", value)]
    parts = [p for p in parts if p]
    if not parts or parts[0].casefold() in _PLACEHOLDERS or len(parts[0].split()) < 2:
        return None, []
    return parts[0], parts[1:]


def template_question(nnqt: Any) -> str | None:
    """``NNQT_question`` with the template braces removed (``What is {x} of {y}`` -> ``What is x of y``)."""
    if not isinstance(nnqt, str):
        return None
    text = " ".join(re.sub(r"[{}]", " ", nnqt).split())
    text = re.sub(r"\s+([?.,])", r"\1", text)
    return text or None


def _answers(answer: list[Any], solved: list[Any]) -> tuple[list[str], list[str], dict[str, list[str]], bool]:
    qids: list[str] = []
    literals: list[str] = []
    for a in answer:
        wid = wikidata_id(a) if isinstance(a, str) else None
        if wid and wid.startswith("Q"):
            qids.append(wid)
        elif wid:
            literals.append(WIKIDATA_ENTITY + wid)
        elif a is not None:
            literals.append(literal_text(a))
    labels: dict[str, list[str]] = {}
    aligned = len(answer) == len(solved)
    if aligned:
        for a, s in zip(answer, solved, strict=True):
            wid = wikidata_id(a) if isinstance(a, str) else None
            label = clean_text(s) if isinstance(s, str) else ""
            if wid and label:
                labels[wid] = dedupe([*labels.get(wid, []), label])
    return dedupe(qids), dedupe(literals), labels, aligned


def load(data_root: Path) -> LoadedDataset:
    """Load the LC-QuAD 2.0 sample (split ``train``).

    Args:
        data_root: The shared data folder.

    Returns:
        The dataset.
    """
    b = DatasetBuilder(NAME, ["train"])
    path = data_root / FILE
    for i, rec in enumerate(read_json_list(b.source(path))):
        where = f"record {i}"
        if not isinstance(rec, dict) or rec.get("uid") is None or not isinstance(rec.get("answer", []), list):
            b.reject(path, f"{where}: not a question object with uid and an answer list", rec)
            continue
        question, paraphrases = usable_question(rec.get("question"))
        source = "question"
        if question is None:
            question, source = template_question(rec.get("NNQT_question")), "NNQT_question"
        if not question:
            reason = f"{where}: no usable question text (question {rec.get('question')!r}, no NNQT_question)"
            b.reject(path, reason, rec)
            continue
        answer = rec.get("answer") or []
        solved = rec.get("solved_answer") if isinstance(rec.get("solved_answer"), list) else []
        qids, literals, labels, aligned = _answers(answer, solved)
        boolean = any(isinstance(a, bool) for a in answer)
        sparql = clean_text(rec.get("sparql_wikidata")) or None
        meta = {
            "uid": rec["uid"],
            "question_source": source,
            "NNQT_question": rec.get("NNQT_question"),
            "template": clean_text(rec.get("template")) or None,
            "template_id": rec.get("template_id"),
            "template_index": rec.get("template_index"),
            "subgraph": rec.get("subgraph") or None,
            "answer_type": "boolean" if boolean else "mixed" if qids and literals else
            "resource" if qids else "literal" if literals else "empty",
            "gold_literals": literals,
            "answer_labels": labels,
            "answer_labels_aligned": aligned,
            "gold_entities_source": "sparql-query",
        }
        if source != "question":
            meta["original_question"] = rec.get("question")
        elif paraphrases:
            meta["question_paraphrases"] = paraphrases
            meta["raw_question"] = rec["question"]
        elif rec["question"].strip() != question:
            meta["raw_question"] = rec["question"]
        row = question_row(
            NAME, "train", clean_text(rec["uid"]), question,
            gold_entities=qids_in_sparql(sparql),
            gold_answers=literals + [x for q in qids for x in labels.get(q, [])],
            gold_answer_qids=qids,
            sparql=sparql,
            meta=meta,
        )
        b.add(row, source_file=path, where=where, snippet=rec)
    return b.result()
