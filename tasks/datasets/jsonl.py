"""Generic question import (``linkedqa data import FILE.jsonl --name NAME [--task KIND]``).

Inputs: a JSONL file (plain or ``.gz``), one object per line::

    {"id": "q1", "question": "who wrote dune?", "gold_entities": ["Q190192"],
     "gold_answers": ["Frank Herbert"], "gold_answer_qids": ["Q7241"],
     "gold_mentions": [{"text": "dune", "start": 10, "end": 14, "qid": "Q190192"}],
     "sparql": "...", "split": "test", "anything_else": ...}

``id`` (string or integer) and ``question`` (non-empty string) are always required. ``split`` defaults to
``test`` and must be a safe name (letters, digits, ``. _ = + -``). ``gold_entities`` / ``gold_answer_qids``
are lists of strings; ``gold_answers`` are lists of strings, numbers or booleans (stored as text, booleans as
``true``/``false``). Mentions are ``{text?, start, end, qid?}`` with ``0 <= start < end <= len(question)``
character offsets (end exclusive) into the question *as written in the file*; when ``text`` is given it must
equal ``question[start:end]``. Surrounding whitespace of the question is stripped and mention offsets shifted
to match. Unknown keys (and the items of a ``meta`` object) go to ``meta``.

The task kind (``TASKS``, default ``qa``) says which methods accept the dataset (``Method.tasks``) and what each
record needs besides ``id`` and ``question`` (:func:`require_gold`: the gold a method of that kind cannot be
scored without). ``ea`` is refused (``EA_REFUSED``): an alignment dataset is two graphs and their links, not a
questions file. docs/howto/own-questions.md shows one real record per kind.

Outputs: a ``LoadedDataset``. Bad lines (invalid UTF-8 or JSON, not an object, missing id/question, wrong
types, mention spans outside the question, duplicate ids within a split, gold the task kind needs missing)
become rejects with the 1-based line number, the byte offset and the reason; everything else is imported.
Blank lines are skipped.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from storage.layout import LayoutError, safe_name
from tasks.datasets.base import (
    DatasetBuilder,
    DatasetError,
    LoadedDataset,
    Row,
    is_qid,
    literal_text,
    question_row,
    require_file,
)

KNOWN_KEYS = (
    "id", "question", "gold_entities", "gold_answers", "gold_answer_qids", "gold_mentions", "sparql", "split",
    "meta",
)
DEFAULT_SPLIT = "test"
#: Task kinds of a dataset (``tasks.datasets.registry.DatasetSpec.task``), in the order ``--task`` lists them.
TASKS = ("el", "qa", "yesno", "kgqa", "kgqa-open", "ea")
#: The task kind of an import that names none: ``id`` and ``question`` are all a record needs.
DEFAULT_TASK = "qa"
#: Why an import cannot have task kind ``ea``.
EA_REFUSED = ("task ea cannot be imported from a questions file: an entity-alignment dataset is two knowledge graphs "
              "and the gold links between their entities, and the ea methods (ea-embed, ea-agent) read the graphs of "
              "a registered DBP15K pair; load one with `linkedqa data load dbp15k-fr-en` (or dbp15k-ja-en, "
              "dbp15k-zh-en)")
#: Accepted yes/no gold answers (lower-cased) -> the stored answer (as the StrategyQA loader stores it).
YESNO = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}


class BadRecord(ValueError):
    """One JSONL record that cannot be imported (the message is the reject reason)."""


def _no_constant(name: str) -> Any:
    raise BadRecord(f"invalid JSON ({name} is not a JSON number)")


def _str_list(obj: dict[str, Any], key: str, scalars: bool = False) -> list[str]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRecord(f"field {key!r} must be a list, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, str):
            out.append(v.strip())
        elif scalars and isinstance(v, bool | int | float):
            out.append(literal_text(v))
        else:
            allowed = "strings, numbers or booleans" if scalars else "strings"
            raise BadRecord(f"field {key!r} item {i} must be one of {allowed}, got {type(v).__name__}")
    return [v for v in out if v]


def _mentions(obj: dict[str, Any], raw_question: str, lead: int, question: str) -> list[dict[str, Any]]:
    value = obj.get("gold_mentions")
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRecord(f"field 'gold_mentions' must be a list, got {type(value).__name__}")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict):
            raise BadRecord(f"gold_mentions[{i}] must be an object, got {type(m).__name__}")
        start, end = m.get("start"), m.get("end")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)):
            raise BadRecord(f"gold_mentions[{i}]: start and end must be integers")
        if not 0 <= start < end <= len(raw_question):
            raise BadRecord(f"gold_mentions[{i}]: span [{start}, {end}) is outside the question "
                            f"(length {len(raw_question)})")
        surface = raw_question[start:end]
        text = m.get("text")
        if text is not None and not isinstance(text, str):
            raise BadRecord(f"gold_mentions[{i}]: text must be a string")
        if text is not None and text != surface:
            raise BadRecord(
                f"gold_mentions[{i}]: text {text!r} does not match question[{start}:{end}] {surface!r}"
            )
        qid = m.get("qid")
        if qid is not None and not isinstance(qid, str):
            raise BadRecord(f"gold_mentions[{i}]: qid must be a string or null")
        s, e = start - lead, end - lead
        if s < 0 or e > len(question):
            raise BadRecord(f"gold_mentions[{i}]: span [{start}, {end}) covers only surrounding whitespace")
        out.append({"text": surface, "start": s, "end": e, "qid": (qid or "").strip() or None})
    return out


def check_task(task: str) -> str:
    """The task kind of an import, when an import can have it.

    Raises:
        ValueError: An unknown kind, or ``ea`` (:data:`EA_REFUSED`).
    """
    if task not in TASKS:
        raise ValueError(f"unknown task kind {task!r}; task kinds: {', '.join(TASKS)}")
    if task == "ea":
        raise ValueError(EA_REFUSED)
    return task


def require_gold(row: Row, task: str) -> Row:
    """Check that a row holds the gold a method of kind ``task`` needs to be scored.

    ``qa`` needs nothing more (a question without ``gold_answers`` is answered and not scored). For the other
    kinds ``gold_entities``, ``gold_answer_qids`` and the mentions' ``qid`` hold Wikidata QIDs, and ``el`` needs
    ``gold_entities`` (the linking metrics), ``kgqa`` ``gold_answer_qids`` or ``gold_answers`` (QALD F1),
    ``kgqa-open`` ``gold_answers`` (the ToG metrics score a question without them as a miss), ``yesno`` exactly
    one yes/no answer (stored as ``yes``/``no``). A ``kgqa`` record's ``gold_literals`` (its literal answers alone,
    when ``gold_answers`` also holds the entity answers' labels) is checked by :func:`parse_record` and kept in
    ``meta``, where QALD F1 reads it as the built-in QALD loaders write it.

    Returns:
        The row (``yesno``: its answer as ``yes``/``no``).

    Raises:
        BadRecord: Naming the task kind and what is missing or wrong.
    """
    if task == DEFAULT_TASK:
        return row
    for key in ("gold_entities", "gold_answer_qids"):
        for i, v in enumerate(row[key]):
            if not is_qid(v):
                raise BadRecord(f"task {task}: {key} item {i} {v!r} is not a Wikidata QID (Q followed by digits)")
    for i, m in enumerate(row["gold_mentions"]):
        if m["qid"] is not None and not is_qid(m["qid"]):
            raise BadRecord(f"task {task}: gold_mentions[{i}] qid {m['qid']!r} is not a Wikidata QID")
    if task == "el" and not row["gold_entities"]:
        raise BadRecord("task el needs gold_entities (the QIDs of the entities the question mentions)")
    if task == "kgqa" and not (row["gold_answer_qids"] or row["gold_answers"]):
        raise BadRecord("task kgqa needs gold_answers or gold_answer_qids")
    if task == "kgqa-open" and not row["gold_answers"]:
        raise BadRecord("task kgqa-open needs gold_answers")
    if task == "yesno":
        answers = row["gold_answers"]
        if len(answers) != 1 or answers[0].lower() not in YESNO:
            raise BadRecord(f'task yesno needs exactly one gold_answers item: true, false, "yes" or "no" '
                            f"(got {json.dumps(answers)})")
        row["gold_answers"] = [YESNO[answers[0].lower()]]
    return row


def parse_record(obj: Any, dataset: str, task: str = DEFAULT_TASK) -> dict[str, Any]:
    """Validate one decoded JSONL object and build its ``questions`` row.

    Args:
        obj: The decoded JSON value of one line.
        dataset: Dataset name for the row.
        task: The import's task kind (:func:`require_gold`).

    Returns:
        The row.

    Raises:
        BadRecord: With the reason, when the record cannot be imported.
    """
    if not isinstance(obj, dict):
        raise BadRecord(f"line is a JSON {type(obj).__name__}, not an object")
    qid = obj.get("id")
    if qid is None:
        raise BadRecord("missing 'id'")
    if isinstance(qid, bool) or not isinstance(qid, str | int):
        raise BadRecord(f"'id' must be a string or an integer, got {type(qid).__name__}")
    qid = str(qid).strip()
    if not qid:
        raise BadRecord("empty 'id'")
    raw_question = obj.get("question")
    if raw_question is None:
        raise BadRecord("missing 'question'")
    if not isinstance(raw_question, str):
        raise BadRecord(f"'question' must be a string, got {type(raw_question).__name__}")
    question = raw_question.strip()
    if not question:
        raise BadRecord("empty 'question'")
    lead = len(raw_question) - len(raw_question.lstrip())
    split = obj.get("split", DEFAULT_SPLIT)
    if split is None:
        split = DEFAULT_SPLIT
    try:
        split = safe_name(split, "split") if isinstance(split, str) else None
    except LayoutError as exc:
        raise BadRecord(str(exc)) from None
    if split is None:
        raise BadRecord("'split' must be a string")
    sparql = obj.get("sparql")
    if sparql is not None and not isinstance(sparql, str):
        raise BadRecord(f"'sparql' must be a string, got {type(sparql).__name__}")
    meta_in = obj.get("meta")
    if meta_in is not None and not isinstance(meta_in, dict):
        raise BadRecord(f"'meta' must be an object, got {type(meta_in).__name__}")
    meta = dict(meta_in or {})
    meta.update({k: v for k, v in obj.items() if k not in KNOWN_KEYS})
    if task == "kgqa" and meta.get("gold_literals") is not None:  # QALD F1 reads it (tasks.metrics.registry)
        meta["gold_literals"] = _str_list(meta, "gold_literals", scalars=True)
    row = question_row(
        dataset, split, qid, question,
        gold_entities=_str_list(obj, "gold_entities"),
        gold_answers=_str_list(obj, "gold_answers", scalars=True),
        gold_answer_qids=_str_list(obj, "gold_answer_qids"),
        gold_mentions=_mentions(obj, raw_question, lead, question),
        sparql=(sparql or "").strip() or None,
        meta=meta,
    )
    return require_gold(row, task)


def import_jsonl(path: Path | str, name: str, task: str = DEFAULT_TASK) -> LoadedDataset:
    """Import a user JSONL file of questions as dataset ``name``.

    Args:
        path: The JSONL file (``.gz`` accepted).
        name: Dataset name; must be a safe path component and not a built-in dataset's name.
        task: Task kind of the questions (:data:`TASKS` but ``ea``); each record is checked for its gold.

    Returns:
        The dataset (splits in first-seen order) with one reject per bad line.

    Raises:
        storage.layout.LayoutError: When ``name`` is not a safe name.
        ValueError: When ``task`` is unknown or ``ea`` (:func:`check_task`).
        FileNotFoundError: When the file does not exist.
        DatasetError: When a compressed file is truncated or unreadable.
    """
    safe_name(name, "dataset name")
    check_task(task)
    path = require_file(Path(path))
    b = DatasetBuilder(name)
    b.source(path)
    offset = 0
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as fh:
            for n, raw in enumerate(fh, start=1):
                here, offset = offset, offset + len(raw)
                line = raw.rstrip(b"\r\n")
                if n == 1 and line.startswith(b"\xef\xbb\xbf"):
                    line = line[3:]
                if not line.strip():
                    continue
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    reason = f"line {n}: invalid UTF-8 ({exc.reason} at byte {exc.start} of the line)"
                    b.reject(path, reason, raw, line=n, offset=here)
                    continue
                try:
                    obj = json.loads(text, parse_constant=_no_constant)
                except BadRecord as exc:
                    b.reject(path, f"line {n}: {exc}", raw, line=n, offset=here)
                    continue
                except json.JSONDecodeError as exc:
                    b.reject(path, f"line {n}: invalid JSON ({exc.msg} at column {exc.colno})", raw,
                             line=n, offset=here)
                    continue
                try:
                    row = parse_record(obj, name, task)
                except BadRecord as exc:
                    b.reject(path, f"line {n}: {exc}", raw, line=n, offset=here)
                    continue
                b.add(row, source_file=path, where=f"line {n}", snippet=raw, line=n, offset=here)
    except (OSError, EOFError) as exc:
        raise DatasetError(f"{path}: unreadable after byte offset {offset}: {exc}") from exc
    return b.result()
