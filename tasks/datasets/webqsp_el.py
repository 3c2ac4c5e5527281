"""WebQSP_EL loader (``webqsp-el``): WebQuestionsSP with Wikidata entity annotations and main-entity spans.

Inputs (under ``<data_root>/webqsp-el``, PNEL copies of Sorokin & Gurevych 2018's annotations):
``webqsp.test.entities.with_classes.json`` (split ``test``), ``webqsp.train.entities.json`` split into
``train`` / ``dev`` by ``webqsp.train.ids.json`` / ``webqsp.dev.ids.json``.

Outputs: ``questions`` rows.

* ``gold_entities``: the non-null QIDs of ``entities`` (nulls are Freebase entities without a Wikidata match).
* ``gold_mentions``: one mention for the main entity. ``main_entity_pos`` is a ``[start, end)`` character span
  of the *utterance* that covers ``main_entity_tokens`` (the surface form, e.g. ``jamaican``), not
  ``main_entity_text`` (the entity's label, e.g. ``Jamaica``; it matches the surface text only when the
  question spells the label). The mention text is therefore ``utterance[start:end]``. In 35 rows the
  annotator tokenised punctuation (``george w . bush``) and stored ``start = -1``; the span is then recovered
  by matching the tokens with optional whitespace between them (``george w. bush``), dangling apostrophes
  are trimmed (``facebook '`` -> ``facebook``), and ``meta.mention_span`` says ``recovered``. No mention is
  emitted when there is no token text or the main entity has no QID (``meta.mention_span`` = ``none`` /
  ``no_qid``).
* ``meta``: ``entities_fb``, ``entities_wd`` (raw, aligned with ``entities_fb``, nulls kept),
  ``main_entity``, ``main_entity_fb``, ``main_entity_text``, ``main_entity_tokens``, ``main_entity_pos``
  (raw), ``entity_classes`` (test only), ``mention_span``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tasks.datasets.base import (
    DatasetBuilder,
    LoadedDataset,
    clean_text,
    is_qid,
    question_row,
    read_json_list,
)

NAME = "webqsp-el"
DESCRIPTION = "WebQSP_EL: WebQuestionsSP with Wikidata QIDs and main-entity spans (train/dev/test)"
FOLDER = "webqsp-el"
TEST_FILE = "webqsp.test.entities.with_classes.json"
TRAIN_FILE = "webqsp.train.entities.json"
TRAIN_IDS = "webqsp.train.ids.json"
DEV_IDS = "webqsp.dev.ids.json"


def locate_mention(utterance: str, pos: Any, tokens: str | None) -> tuple[int, int, str] | None:
    """Find the main-entity span in the utterance.

    Args:
        utterance: The question text.
        pos: Raw ``main_entity_pos`` (``[start, end)``; ``start`` is -1 when the annotator lost it).
        tokens: Raw ``main_entity_tokens`` (the surface form, maybe tokenised with spaces around punctuation).

    Returns:
        ``(start, end, status)`` with status ``exact`` or ``recovered``; ``None`` when no span can be found.
    """
    if not tokens or not tokens.strip():
        return None
    if isinstance(pos, list | tuple) and len(pos) == 2 and all(isinstance(p, int) for p in pos):
        start, end = pos
        if 0 <= start < end <= len(utterance) and utterance[start:end].lower() == tokens.lower():
            return start, end, "exact"
    pattern = r"\s*".join(re.escape(t) for t in tokens.split())
    m = re.search(pattern, utterance, flags=re.IGNORECASE)
    if not m:
        return None
    start, end = m.start(), m.end()
    while end > start and utterance[end - 1] in " '":
        end -= 1
    return (start, end, "recovered") if end > start else None


def _row(rec: dict[str, Any], split: str) -> dict[str, Any]:
    utterance = rec.get("utterance")
    question = clean_text(utterance)
    lead = len(utterance) - len(utterance.lstrip()) if isinstance(utterance, str) else 0
    entities = rec.get("entities") or []
    main_qid = rec.get("main_entity")
    tokens = rec.get("main_entity_tokens")
    mentions = []
    span = locate_mention(question, _shift(rec.get("main_entity_pos"), lead), tokens)
    if span is None:
        status = "none"
    elif not is_qid(main_qid):
        status = "no_qid"
    else:
        start, end, status = span
        mentions.append({"text": question[start:end], "start": start, "end": end, "qid": main_qid})
    meta = {
        "entities_fb": rec.get("entities_fb"),
        "entities_wd": entities,
        "main_entity": main_qid,
        "main_entity_fb": rec.get("main_entity_fb"),
        "main_entity_text": rec.get("main_entity_text"),
        "main_entity_tokens": tokens,
        "main_entity_pos": rec.get("main_entity_pos"),
        "mention_span": status,
    }
    if "entity_classes" in rec:
        meta["entity_classes"] = rec["entity_classes"]
    return question_row(
        NAME,
        split,
        clean_text(rec.get("question_id")),
        question,
        gold_entities=[e for e in entities if is_qid(e)],
        gold_mentions=mentions,
        meta=meta,
    )


def _shift(pos: Any, lead: int) -> Any:
    ok = isinstance(pos, list) and len(pos) == 2 and all(isinstance(p, int) for p in pos)
    if lead and ok and pos[0] >= 0:
        return [pos[0] - lead, pos[1] - lead]
    return pos


def load(data_root: Path) -> LoadedDataset:
    """Load WebQSP_EL (splits ``train``, ``dev``, ``test``).

    Args:
        data_root: The shared data folder (``LINKEDQA_DATA``).

    Returns:
        The dataset; records without ``question_id``/``utterance`` or in neither id list are rejects.
    """
    folder = data_root / FOLDER
    b = DatasetBuilder(NAME, ["train", "dev", "test"])
    dev_ids = {str(x) for x in read_json_list(b.source(folder / DEV_IDS))}
    train_ids = {str(x) for x in read_json_list(b.source(folder / TRAIN_IDS))}
    for path, fixed_split in ((folder / TRAIN_FILE, None), (folder / TEST_FILE, "test")):
        for i, rec in enumerate(read_json_list(b.source(path))):
            where = f"record {i}"
            ok = isinstance(rec, dict) and isinstance(rec.get("utterance"), str) and rec.get("question_id")
            if not ok:
                b.reject(path, f"{where}: not an object with question_id and utterance", rec)
                continue
            qid = clean_text(rec["question_id"])
            split = fixed_split
            if split is None:
                in_dev, in_train = qid in dev_ids, qid in train_ids
                if in_dev == in_train:
                    b.reject(path, f"{where}: id {qid!r} is in {'both' if in_dev else 'neither'} of "
                             f"{TRAIN_IDS} and {DEV_IDS}", rec)
                    continue
                split = "dev" if in_dev else "train"
            b.add(_row(rec, split), source_file=path, where=where, snippet=rec)
    return b.result()
