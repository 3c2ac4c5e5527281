r"""SimpleQuestions mapped to Wikidata (``simplequestions-wd``, askplatypus/wikidata-simplequestions).

Inputs (under ``<data_root>/wikidata-simplequestions``): ``annotated_wd_data_{train,valid,test}.txt``
(train may be ``.txt.gz``) and the ``*_answerable.txt`` subsets (the triple exists in Wikidata). Each line,
no header: ``subject QID \t property \t object QID \t question``; the property is ``Pxxx`` or ``Rxxx`` (the
inverse of ``Pxxx``: the fact is ``object Pxxx subject``).

Outputs: ``questions`` rows in splits ``train``, ``valid``, ``test``, ``train_answerable``,
``valid_answerable``, ``test_answerable``; ``question_id`` = ``f"{split}-{line_no}"`` (1-based line number
in that split's file); ``gold_entities`` = [subject]; ``gold_answer_qids`` = [object] (the object is the
answer for P and R lines alike). ``meta``: ``property`` (as written), ``pid`` (``P`` form), ``inverse``,
and for answerable splits ``full_split_id`` (the id of the same line in the full split, when it occurs
there).
Malformed lines (wrong field count, ids not of the form Q../P../R.., empty question, bad UTF-8) are rejects
with their line number and byte offset.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

from tasks.datasets.base import (
    DatasetBuilder,
    DatasetError,
    LoadedDataset,
    clean_text,
    normalize_question,
    question_row,
    require_file,
)

NAME = "simplequestions-wd"
DESCRIPTION = "SimpleQuestions over Wikidata: subject, property, object, question (+ *_answerable splits)"
FOLDER = "wikidata-simplequestions"
BASE_SPLITS = ("train", "valid", "test")
_QID = re.compile(r"^Q\d+$")
_PROP = re.compile(r"^[PR]\d+$")


def split_file(folder: Path, split: str) -> Path:
    """The file of one split (``train`` may be gzip'd)."""
    plain = folder / f"annotated_wd_data_{split}.txt"
    gz = folder / f"annotated_wd_data_{split}.txt.gz"
    return gz if not plain.is_file() and gz.is_file() else plain


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    require_file(path)
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as fh:
            offset = 0
            for n, raw in enumerate(fh, start=1):
                yield n, offset, raw
                offset += len(raw)
    except (OSError, EOFError) as exc:
        raise DatasetError(f"{path}: unreadable: {exc}") from exc


def load(data_root: Path) -> LoadedDataset:
    """Load SimpleQuestions-Wikidata: three full splits and their answerable subsets.

    Args:
        data_root: The shared data folder.

    Returns:
        The dataset (blank lines are skipped silently; other malformed lines are rejects).
    """
    folder = data_root / FOLDER
    splits = [*BASE_SPLITS, *(f"{s}_answerable" for s in BASE_SPLITS)]
    b = DatasetBuilder(NAME, splits)
    full_ids: dict[str, dict[str, str]] = {s: {} for s in BASE_SPLITS}
    for split in splits:
        base = split.removesuffix("_answerable")
        path = b.source(split_file(folder, split))
        for n, offset, raw in _lines(path):
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                b.reject(path, f"line {n}: invalid UTF-8 ({exc.reason} at byte {exc.start})", raw,
                         line=n, offset=offset)
                continue
            parts = text.split("\t")
            if len(parts) != 4:
                b.reject(path, f"line {n}: expected 4 tab-separated fields, found {len(parts)}", raw,
                         line=n, offset=offset)
                continue
            subject, prop, obj = (clean_text(p) for p in parts[:3])
            question = normalize_question(parts[3])
            if not _QID.match(subject) or not _QID.match(obj) or not _PROP.match(prop):
                reason = f"line {n}: malformed ids (subject {subject!r}, property {prop!r}, object {obj!r})"
                b.reject(path, reason, raw, line=n, offset=offset)
                continue
            qid = f"{split}-{n}"
            key = "\t".join((subject, prop, obj, question))
            meta = {"property": prop, "pid": "P" + prop[1:], "inverse": prop.startswith("R")}
            if parts[3].strip() != question:
                meta["raw_question"] = parts[3]
            if split == base:
                full_ids[base].setdefault(key, qid)
            else:
                meta["full_split_id"] = full_ids[base].get(key)
            row = question_row(NAME, split, qid, question, gold_entities=[subject], gold_answer_qids=[obj],
                               meta=meta)
            b.add(row, source_file=path, where=f"line {n}", snippet=raw, line=n, offset=offset)
    return b.result()
