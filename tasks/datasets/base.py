"""Shared building blocks of the benchmark loaders.

Inputs: raw benchmark files (JSON, gzip'd JSON, TSV, JSONL) under the data root.
Outputs: ``LoadedDataset`` objects holding ``questions`` rows (exactly the columns of
``storage.schemas.QUESTIONS``) grouped by split, ``rejects`` rows (``storage.schemas.REJECTS``) and the list
of input files (for manifests).

Conventions every loader follows (so that all datasets look alike downstream):

* ``question_id`` is a string, unique within (dataset, split): a repeated id keeps its first row and the
  others become rejects with reason ``duplicate id``.
* Question text is stripped of surrounding whitespace; loaders without mention spans also collapse inner
  whitespace runs and drop zero-width characters (``normalize_question``), keeping the raw text in
  ``meta.raw_question`` when it changed. An empty question is a reject.
* ``gold_*`` lists are de-duplicated keeping first-seen order, never contain ``None``.
* ``meta`` is ``json.dumps`` of the dataset-specific fields with sorted keys (``ensure_ascii=False``).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage.schemas import QUESTIONS, REJECTS

QUESTION_COLUMNS: tuple[str, ...] = tuple(QUESTIONS.names)
REJECT_COLUMNS: tuple[str, ...] = tuple(REJECTS.names)

Row = dict[str, Any]

#: The IRI prefix of Wikidata entities: an answer that is a Wikidata lexeme or property (not an item) is kept as
#: ``WIKIDATA_ENTITY + id`` among the literal answers, so the QALD metrics still see an entity (GERBIL's IRI).
WIKIDATA_ENTITY = "http://www.wikidata.org/entity/"
_WD_ENTITY_URI = re.compile(r"^https?://www\.wikidata\.org/entity/([QLPM]\d+(?:-[FS]\d+)?)$")
_QID = re.compile(r"^Q\d+$")
_SPARQL_QID = re.compile(r"(?:\bwd:|<https?://www\.wikidata\.org/entity/)(Q\d+)\b>?")


class DatasetError(ValueError):
    """A benchmark file that cannot be read as a whole (wrong top-level structure, truncated gzip...)."""


@dataclass
class LoadedDataset:
    """Questions of one dataset, ready to be written as the ``questions`` table.

    Attributes:
        name: Dataset name (the ``dataset`` column of every row).
        questions: Split name -> rows, each with exactly the ``questions`` columns, in source order.
        rejects: ``rejects`` rows for records that were skipped, with the reason.
        sources: Input files that were read (for manifests and content hashes).
    """

    name: str
    questions: dict[str, list[Row]] = field(default_factory=dict)
    rejects: list[Row] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Number of questions per split."""
        return {split: len(rows) for split, rows in self.questions.items()}

    def rows(self, split: str | None = None) -> Iterator[Row]:
        """Iterate over the rows of one split, or of every split in order.

        Args:
            split: A split name, or ``None`` for all splits.

        Raises:
            KeyError: When ``split`` is not a split of this dataset (the message lists the splits).
        """
        if split is None:
            for rows in self.questions.values():
                yield from rows
            return
        if split not in self.questions:
            raise KeyError(f"{self.name} has no split {split!r}; splits: {', '.join(self.questions)}")
        yield from self.questions[split]


def dedupe(values: Iterable[Any]) -> list[Any]:
    """Drop ``None``, empty strings and repeats, keeping first-seen order."""
    seen: set[Any] = set()
    out: list[Any] = []
    for v in values:
        if v is None or v == "" or v in seen:
            continue
        seen.add(v)
        out.append(v)
    return out


def clean_text(value: Any) -> str:
    """Strip surrounding whitespace (incl. NBSP and BOM) of a text field; ``None`` becomes ``""``."""
    if value is None:
        return ""
    return str(value).strip().strip("\ufeff").strip()


_ZERO_WIDTH = re.compile(r"[\u200b-\u200d\u2060\ufeff]")


def normalize_question(value: Any) -> str:
    """Normalise the question text of datasets without character spans.

    Zero-width characters are removed and every whitespace run (newlines, tabs, NBSP, double spaces) becomes
    one space; the ends are stripped. Loaders with gold mention offsets (WebQSP_EL, JSONL import) only strip
    the ends, so offsets stay valid.
    """
    if value is None:
        return ""
    return " ".join(_ZERO_WIDTH.sub("", str(value)).split())


def dump_meta(meta: dict[str, Any]) -> str:
    """Serialise a meta dict: sorted keys, UTF-8 kept as is."""
    return json.dumps(meta, sort_keys=True, ensure_ascii=False)


def question_row(
    dataset: str,
    split: str,
    question_id: str,
    question: str,
    *,
    gold_entities: Iterable[str] = (),
    gold_answers: Iterable[str] = (),
    gold_answer_qids: Iterable[str] = (),
    gold_mentions: Iterable[dict[str, Any]] = (),
    sparql: str | None = None,
    meta: dict[str, Any] | None = None,
) -> Row:
    """Build one ``questions`` row with exactly the declared columns.

    Args:
        dataset: Dataset name.
        split: Split name.
        question_id: Id, unique within dataset+split (converted to ``str``).
        question: Question text (already cleaned).
        gold_entities: Gold question (topic) entity QIDs.
        gold_answers: Gold answer strings (literals, labels, aliases).
        gold_answer_qids: Gold answers that are entities.
        gold_mentions: ``{text, start, end, qid}`` dicts, character offsets into ``question`` (end exclusive).
        sparql: Gold query text, if any.
        meta: Dataset-specific fields (serialised with sorted keys).

    Returns:
        The row dict.
    """
    return {
        "dataset": dataset,
        "split": split,
        "question_id": str(question_id),
        "question": question,
        "gold_entities": dedupe(gold_entities),
        "gold_answers": dedupe(str(a) for a in gold_answers if a is not None),
        "gold_answer_qids": dedupe(gold_answer_qids),
        "gold_mentions": [
            {"text": m["text"], "start": int(m["start"]), "end": int(m["end"]), "qid": m.get("qid")}
            for m in gold_mentions
        ],
        "sparql": sparql or None,
        "meta": dump_meta(meta or {}),
    }


def reject_row(
    source_file: Path | str,
    reason: str,
    snippet: Any = None,
    *,
    line: int | None = None,
    offset: int | None = None,
    stage: str = "datasets",
) -> Row:
    """Build one ``rejects`` row.

    Args:
        source_file: Input file of the record.
        reason: Why it was rejected.
        snippet: The record (bytes, text or a JSON value); its first 200 characters are kept.
        line: 1-based line number for line-oriented files.
        offset: Byte offset of the record in the decompressed stream, when known.
        stage: Reader that rejected it, e.g. ``datasets.webqsp-el``.
    """
    if isinstance(snippet, bytes):
        text = snippet[:200].decode("utf-8", errors="replace")
    elif isinstance(snippet, str) or snippet is None:
        text = (snippet or "")[:200]
    else:
        text = json.dumps(snippet, ensure_ascii=False, sort_keys=True)[:200]
    return {
        "source_file": str(source_file),
        "offset": offset,
        "line": line,
        "reason": reason,
        "snippet": text,
        "stage": stage,
    }


class DatasetBuilder:
    """Collects rows per split, enforcing unique ids, and turns into a ``LoadedDataset``.

    Args:
        name: Dataset name.
        splits: Split names in the order they should appear (splits with no rows are still listed).
    """

    def __init__(self, name: str, splits: Iterable[str] = ()):
        self.name = name
        self.stage = f"datasets.{name}"
        self._questions: dict[str, list[Row]] = {s: [] for s in splits}
        self._seen: dict[str, dict[str, str]] = {s: {} for s in self._questions}
        self.rejects: list[Row] = []
        self.sources: list[Path] = []

    def source(self, path: Path) -> Path:
        """Record an input file (once) and return it."""
        if path not in self.sources:
            self.sources.append(path)
        return path

    def reject(self, source_file: Path | str, reason: str, snippet: Any = None, *, line: int | None = None,
               offset: int | None = None) -> None:
        """Add a ``rejects`` row tagged with this dataset's stage."""
        self.rejects.append(
            reject_row(source_file, reason, snippet, line=line, offset=offset, stage=self.stage)
        )

    def add(self, row: Row, *, source_file: Path | str, where: str, snippet: Any = None,
            line: int | None = None, offset: int | None = None) -> bool:
        """Add a row unless its id is already taken in its split (then reject it).

        Args:
            row: A ``question_row`` result.
            source_file: Input file (for the reject row).
            where: Human-readable position of the record ("line 7", "record 12"), kept in the reason.
            snippet: Raw record for the reject row.
            line: 1-based line number, for line-oriented inputs.
            offset: Byte offset, when known.

        Returns:
            Whether the row was kept.
        """
        split, qid = row["split"], row["question_id"]
        seen = self._seen.setdefault(split, {})
        rows = self._questions.setdefault(split, [])
        if not row["question"]:
            self.reject(source_file, f"{where}: empty question (id {qid!r})", snippet,
                        line=line, offset=offset)
            return False
        if qid in seen:
            reason = f"{where}: duplicate id {qid!r} in split {split!r} (first at {seen[qid]})"
            self.reject(source_file, reason, snippet, line=line, offset=offset)
            return False
        seen[qid] = where
        rows.append(row)
        return True

    def result(self) -> LoadedDataset:
        """The collected dataset."""
        return LoadedDataset(self.name, self._questions, self.rejects, list(self.sources))


def require_file(path: Path) -> Path:
    """Return ``path`` if it is a file, else raise ``FileNotFoundError`` naming it.

    Inputs never go missing silently.
    """
    if not path.is_file():
        raise FileNotFoundError(f"benchmark file not found: {path}")
    return path


def read_json(path: Path) -> Any:
    """Parse a JSON file (plain or ``.gz``; a UTF-8 BOM is accepted).

    Raises:
        FileNotFoundError: When the file is missing.
        DatasetError: When it is not valid JSON or not valid UTF-8, naming the file.
    """
    require_file(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                raw = fh.read()
        else:
            raw = path.read_bytes()
        return json.loads(raw.decode("utf-8-sig"))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: cannot parse as JSON: {exc}") from exc


def read_json_list(path: Path, key: str | None = None) -> list[Any]:
    """Parse a JSON file whose records are a top-level list (or the list under ``key``).

    Raises:
        DatasetError: When the structure is not a list (naming the file and what was found).
    """
    data = read_json(path)
    if key is not None:
        if not isinstance(data, dict) or key not in data:
            raise DatasetError(f"{path}: expected an object with a {key!r} list")
        data = data[key]
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of records, found {type(data).__name__}")
    return data


def wikidata_id(uri: str) -> str | None:
    """Local id of a Wikidata entity URI (``http://www.wikidata.org/entity/Q42`` -> ``Q42``) or ``None``."""
    m = _WD_ENTITY_URI.match(uri.strip()) if isinstance(uri, str) else None
    return m.group(1) if m else None


def is_qid(value: Any) -> bool:
    """Whether ``value`` is a string of the form ``Q<digits>``."""
    return isinstance(value, str) and bool(_QID.match(value))


def qids_in_sparql(sparql: str | None) -> list[str]:
    """QIDs written in a SPARQL query (``wd:Q42`` or ``<http://www.wikidata.org/entity/Q42>``), in order.

    These are the *entities in the query*: topic entities but also classes and constraint values
    (e.g. ``wd:Q5`` "human" in ``?x wdt:P31 wd:Q5``).
    """
    return dedupe(_SPARQL_QID.findall(sparql or ""))


def literal_text(value: Any) -> str:
    """Answer literal as text: booleans as ``true``/``false``, everything else ``str`` (stripped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


@dataclass
class SparqlGold:
    """Gold answers parsed from a SPARQL-JSON result set (QALD ``answers`` field).

    Attributes:
        qids: Wikidata items (``Q...``) among the bindings, in order.
        literals: Literal values (numbers, dates as ISO text, strings, ``true``/``false`` for ASK), plus
            non-item URIs (Wikidata lexemes/properties as ``WIKIDATA_ENTITY`` + id, other URIs verbatim).
        answer_type: ``boolean`` | ``resource`` | ``literal`` | ``mixed`` | ``empty``.
        variables: Head variables.
        datatypes: Datatypes (or ``lang:<tag>``) seen among the literal bindings.
    """

    qids: list[str]
    literals: list[str]
    answer_type: str
    variables: list[str]
    datatypes: list[str]


def parse_sparql_results(answers: Any) -> SparqlGold:
    """Parse QALD ``answers`` (a list of SPARQL-JSON result objects, usually one).

    Every binding of every variable counts (QALD answer sets are the union of bound values).

    Raises:
        DatasetError: When an answer object is neither a ``boolean`` nor a ``results.bindings`` result.
    """
    if isinstance(answers, dict):
        answers = [answers]
    qids: list[str] = []
    literals: list[str] = []
    variables: list[str] = []
    datatypes: list[str] = []
    boolean = False
    for ans in answers or []:
        if not isinstance(ans, dict):
            raise DatasetError(f"answer is not a SPARQL-JSON object: {ans!r:.80}")
        variables.extend((ans.get("head") or {}).get("vars") or [])
        if "boolean" in ans:
            boolean = True
            literals.append(literal_text(bool(ans["boolean"])))
            continue
        results = ans.get("results")
        if not isinstance(results, dict) or not isinstance(results.get("bindings"), list):
            raise DatasetError(f"answer has neither 'boolean' nor 'results.bindings': {ans!r:.80}")
        for binding in results["bindings"]:
            for value in binding.values():
                kind, text = value.get("type"), str(value.get("value", ""))
                if kind == "uri":
                    wid = wikidata_id(text)
                    if wid and wid.startswith("Q"):
                        qids.append(wid)
                    else:
                        literals.append(WIKIDATA_ENTITY + wid if wid else text)
                else:
                    literals.append(text.strip())
                    lang = value.get("xml:lang")
                    dt = value.get("datatype") or (f"lang:{lang}" if lang else None)
                    if dt:
                        datatypes.append(dt)
    qids, literals = dedupe(qids), dedupe(literals)
    if boolean:
        kind = "boolean"
    elif qids and literals:
        kind = "mixed"
    elif qids:
        kind = "resource"
    elif literals:
        kind = "literal"
    else:
        kind = "empty"
    return SparqlGold(qids, literals, kind, dedupe(variables), dedupe(datatypes))


def pair_answer_labels(answers: list[Any], solved: list[Any]) -> tuple[dict[str, list[str]], list[str], bool]:
    """Pair entity answers with their label lists in the marca116 flat format (QALD-9-plus train, QALD-10).

    ``answer`` holds entity URIs and literals; ``solved_answer`` holds one entry per answer: a list of
    labels (label first, then aliases) for entities, the literal itself otherwise. The two lists are not
    always in the same order (literals may come first in one and last in the other), so entities are paired
    with label lists by order *within their kind*; when the counts differ, labels are returned unpaired.

    Returns:
        ``(labels_by_id, unpaired_labels, aligned)`` where ids are Wikidata local ids (``Q..``, ``L..``).
    """
    entity_ids = [wikidata_id(a) for a in answers if isinstance(a, str) and wikidata_id(a)]
    label_lists = [[clean_text(x) for x in s if clean_text(x)] for s in solved if isinstance(s, list)]
    if len(entity_ids) == len(label_lists):
        by_id: dict[str, list[str]] = {}
        for eid, labels in zip(entity_ids, label_lists, strict=True):
            by_id.setdefault(eid, [])
            by_id[eid] = dedupe(by_id[eid] + labels)
        return by_id, [], True
    return {}, dedupe(x for labels in label_lists for x in labels), False
