"""One pyarrow schema per persisted table (docs/architecture.md#storage-contracts).

Inputs: nothing. Outputs: ``SCHEMAS`` (table name -> ``pa.Schema``), used by ``storage.parquet_io`` to enforce
every write and by ``storage.catalog`` to name the views. Column names are a contract with SQL, notebooks and
users; add columns, never rename them. Identifiers are strings (``"Q42"``, ``"P31"``).
"""

from __future__ import annotations

import hashlib

import pyarrow as pa


def _f(name: str, typ: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, typ, nullable=nullable, metadata={"doc": doc})


_STR_LIST = pa.list_(pa.string())

ENTITIES = pa.schema(
    [
        _f("qid", pa.string(), "Wikidata id, e.g. Q42", nullable=False),
        _f("label", pa.string(), "English label (or best available)"),
        _f("description", pa.string(), "English description"),
        _f("aliases", _STR_LIST, "English aliases"),
        _f("enwiki_title", pa.string(), "English Wikipedia title from sitelinks or the title<->QID map"),
        _f("sitelinks", pa.int32(), "number of sitelinks (popularity proxy); null when the source has none"),
        _f("instance_of", _STR_LIST, "P31 objects"),
        _f("source", pa.string(), "input that supplied this row (richest source wins on merge)"),
    ]
)

ALIASES = pa.schema(
    [
        _f("qid", pa.string(), "entity id", nullable=False),
        _f("alias", pa.string(), "one alias", nullable=False),
        _f("lang", pa.string(), "language code"),
    ]
)

LABELS = pa.schema(
    [
        _f("qid", pa.string(), "entity id", nullable=False),
        _f("lang", pa.string(), "language code", nullable=False),
        _f("label", pa.string(), "label in that language", nullable=False),
    ]
)

CLAIMS = pa.schema(
    [
        _f("subject", pa.string(), "subject QID (or PID for property statements)", nullable=False),
        _f("property", pa.string(), "PID", nullable=False),
        _f("object_qid", pa.string(), "object entity id; null for literals"),
        _f("object_value", pa.string(), "literal value as text (dates ISO, quantities decimal); null for items"),
        _f("datatype", pa.string(), "Wikidata datatype (wikibase-item, time, quantity, string, ...)"),
        _f("rank", pa.string(), "preferred | normal | deprecated | truthy (for truthy dumps/triple files)"),
        _f("source", pa.string(), "input that supplied the claim"),
    ]
)

PROPERTIES = pa.schema(
    [
        _f("pid", pa.string(), "property id, e.g. P31", nullable=False),
        _f("label", pa.string(), "English label"),
        _f("description", pa.string(), "English description"),
        _f("aliases", _STR_LIST, "English aliases"),
        _f("datatype", pa.string(), "Wikidata datatype"),
    ]
)

ARTICLES = pa.schema(
    [
        _f("page_id", pa.int64(), "Wikipedia page id", nullable=False),
        _f("title", pa.string(), "page title", nullable=False),
        _f("qid", pa.string(), "linked Wikidata id (sitelinks or title map); null when unknown"),
        _f("lead", pa.string(), "plain-text lead paragraph"),
        _f("text", pa.string(), "plain text (templates, refs, tables, files, categories dropped)"),
        _f("n_words", pa.int32(), "whitespace word count of text"),
        _f("source", pa.string(), "input file"),
    ]
)

REDIRECTS = pa.schema(
    [
        _f("title", pa.string(), "redirect page title", nullable=False),
        _f("target", pa.string(), "target title", nullable=False),
    ]
)

PASSAGES = pa.schema(
    [
        _f("passage_id", pa.string(), "'<page_id>-<i>'", nullable=False),
        _f("page_id", pa.int64(), "Wikipedia page id"),
        _f("title", pa.string(), "page title"),
        _f("qid", pa.string(), "linked Wikidata id"),
        _f("text", pa.string(), "100-word passage"),
    ]
)

REJECTS = pa.schema(
    [
        _f("source_file", pa.string(), "input file", nullable=False),
        _f("offset", pa.int64(), "byte offset of the record in the (uncompressed) stream; a shard of a multistream "
           ".bz2 counts from its first bzip2 stream, whose compressed offset the reason names"),
        _f("line", pa.int64(), "1-based line number, when line-oriented"),
        _f("reason", pa.string(), "why it was rejected", nullable=False),
        _f("snippet", pa.string(), "first 200 bytes of the record"),
        _f("stage", pa.string(), "reader that rejected it"),
    ]
)

GOLD_MENTION = pa.struct(
    [
        pa.field("text", pa.string()),
        pa.field("start", pa.int32()),
        pa.field("end", pa.int32()),
        pa.field("qid", pa.string()),
    ]
)

QUESTIONS = pa.schema(
    [
        _f("dataset", pa.string(), "dataset name", nullable=False),
        _f("split", pa.string(), "split name", nullable=False),
        _f("question_id", pa.string(), "id unique within dataset+split", nullable=False),
        _f("question", pa.string(), "question text (English)", nullable=False),
        _f("gold_entities", _STR_LIST, "gold question (topic) entity QIDs"),
        _f("gold_answers", _STR_LIST, "gold answer strings (labels, aliases, literals)"),
        _f("gold_answer_qids", _STR_LIST, "gold answers as QIDs where they are entities"),
        _f("gold_mentions", pa.list_(GOLD_MENTION), "gold mention spans [{text,start,end,qid}]"),
        _f("sparql", pa.string(), "gold SPARQL query, when the dataset has one"),
        _f("meta", pa.string(), "JSON object with dataset-specific fields"),
    ]
)

PREDICTIONS = pa.schema(
    [
        _f("run_id", pa.string(), "run id", nullable=False),
        _f("method", pa.string(), "method name", nullable=False),
        _f("dataset", pa.string(), "dataset", nullable=False),
        _f("split", pa.string(), "split", nullable=False),
        _f("question_id", pa.string(), "question id", nullable=False),
        _f("shard", pa.int32(), "shard index that produced the row"),
        _f("predicted_entities", _STR_LIST, "linked entity QIDs"),
        _f("answer", pa.string(), "final answer text"),
        _f("answers", _STR_LIST, "answer list (set-valued answers, QIDs for KGQA)"),
        _f("trajectory", pa.string(), "JSON list: every step (prompt hash, raw output, parsed action, tool result)"),
        _f("llm_calls", pa.int32(), "LLM requests made for this item"),
        _f("prompt_tokens", pa.int64(), "prompt tokens"),
        _f("completion_tokens", pa.int64(), "completion tokens"),
        _f("latency_s", pa.float64(), "sum of this item's backend-call latencies (batched calls are shared)"),
        _f("error", pa.string(), "per-item error; null on success"),
        _f("scores", pa.map_(pa.string(), pa.float64()), "per-item metric values"),
    ]
)

METRICS = pa.schema(
    [
        _f("run_id", pa.string(), "run id", nullable=False),
        _f("method", pa.string(), "method", nullable=False),
        _f("dataset", pa.string(), "dataset", nullable=False),
        _f("split", pa.string(), "split", nullable=False),
        _f("metric", pa.string(), "metric name (docs/architecture.md#cli-contract)", nullable=False),
        _f("value", pa.float64(), "value"),
        _f("n", pa.int64(), "number of items the value is computed over"),
    ]
)

RUNS = pa.schema(
    [
        _f("run_id", pa.string(), "run id", nullable=False),
        _f("method", pa.string(), "method"),
        _f("dataset", pa.string(), "dataset"),
        _f("split", pa.string(), "split"),
        _f("kb_version", pa.string(), "KB version used"),
        _f("backend", pa.string(), "LLM backend"),
        _f("model", pa.string(), "model id or path"),
        _f("config", pa.string(), "resolved config (JSON)"),
        _f("n_questions", pa.int64(), "questions in the run"),
        _f("n_shards", pa.int32(), "shards"),
        _f("n_errors", pa.int64(), "items with an error"),
        _f("git_sha", pa.string(), "code version"),
        _f("started_at", pa.string(), "ISO time"),
        _f("finished_at", pa.string(), "ISO time"),
        _f("wall_s", pa.float64(), "wall time of the run"),
    ]
)

STAGES = pa.schema(
    [
        _f("run_id", pa.string(), "run id", nullable=False),
        _f("method", pa.string(), "method", nullable=False),
        _f("dataset", pa.string(), "dataset", nullable=False),
        _f("split", pa.string(), "split", nullable=False),
        _f("question_id", pa.string(), "question id", nullable=False),
        _f("family", pa.string(), "stage family (tasks/metrics/stages.py: linking, textqa, alignment)", nullable=False),
        _f("stage", pa.string(), "the first stage of the family's list the item failed, or correct", nullable=False),
        _f("stage_rank", pa.int16(), "position of the stage in the family's list (0 = earliest)", nullable=False),
        _f("evidence", pa.string(), "JSON object: what decided the stage (gold, shown, chosen, ranks...)"),
        _f("stages_format", pa.int16(), "version of the stage rules (tasks.metrics.stages.STAGES_FORMAT)"),
    ]
)

REPRODUCTIONS = pa.schema(
    [
        _f("paper", pa.string(), "paper id (tasks/reproduce/papers/<paper>.yaml)", nullable=False),
        _f("condition", pa.string(), "condition id within the paper", nullable=False),
        _f("paper_table", pa.string(), "the paper's table, as printed"),
        _f("paper_row", pa.string(), "the paper's row label, as printed"),
        _f("paper_model", pa.string(), "the model the paper's row used"),
        _f("paper_metric", pa.string(), "the paper's metric name, as printed"),
        _f("metric", pa.string(), "the linkedqa metric that computes it", nullable=False),
        _f("paper_value", pa.float64(), "the paper's figure on linkedqa's scale (printed / scale)"),
        _f("paper_printed", pa.string(), "the paper's figure as printed"),
        _f("measured", pa.float64(), "the value the run stored"),
        _f("difference", pa.float64(), "measured - paper_value"),
        _f("n", pa.int64(), "items the measured value is computed over"),
        _f("model", pa.string(), "the model the run used"),
        _f("backend", pa.string(), "the run's LLM backend (vllm, openai)"),
        _f("run_id", pa.string(), "the run", nullable=False),
        _f("kb_version", pa.string(), "the run's KB version"),
        _f("question_limit", pa.int64(), "--limit of the run (null: the whole split)"),
        _f("git_sha", pa.string(), "code version of the run"),
        _f("recorded_at", pa.string(), "ISO time the row was stored"),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "entities": ENTITIES,
    "aliases": ALIASES,
    "labels": LABELS,
    "claims": CLAIMS,
    "properties": PROPERTIES,
    "articles": ARTICLES,
    "passages": PASSAGES,
    "redirects": REDIRECTS,
    "rejects": REJECTS,
    "questions": QUESTIONS,
    "predictions": PREDICTIONS,
    "metrics": METRICS,
    "runs": RUNS,
    "stages": STAGES,
    "reproductions": REPRODUCTIONS,
}

KB_TABLES = ("entities", "aliases", "labels", "claims", "properties", "articles", "passages", "redirects", "rejects")
RUN_TABLES = ("predictions", "metrics", "runs", "stages")


def schema_for(table: str) -> pa.Schema:
    """Return the declared schema of a persisted table.

    Args:
        table: Table name, e.g. ``"entities"``.

    Returns:
        The pyarrow schema.

    Raises:
        KeyError: With the list of known tables when ``table`` is unknown.
    """
    try:
        return SCHEMAS[table]
    except KeyError:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(sorted(SCHEMAS))}") from None


def fingerprint(schema: pa.Schema) -> str:
    """Short stable hash of a schema's names and types (for ArtifactRefs and manifests)."""
    text = ";".join(f"{f.name}:{f.type}" for f in schema)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
