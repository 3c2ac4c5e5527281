"""BM25 entity search over Wikidata labels and aliases (ELA's "Wikidata" source, docs/architecture.md#search).

Inputs: rows shaped like the ``entities`` table (``qid``, ``label``, ``description``, ``aliases`` list,
optional ``sitelinks`` / ``popularity``). Outputs: an on-disk tantivy index folder (see ``tasks.search.bm25``)
and, at query time, ranked :class:`Candidate` lists.

Ranking: per distinct query term, BM25 on the label (boost 2.0) and on the aliases combined with a
disjunction-max (tie-breaker 0.1), and the terms' scores added up (``PER_TERM``): a term counts once, in its
best field, so an entity is not favoured for how many aliases repeat a word, yet terms found in different
fields add up ("jackie kennedy" finds Jacqueline Kennedy Onassis: "kennedy" in the label, "jackie" in the
aliases; scoring the whole query per field would take the better field only, and her top-50 places would go
to entities labelled "Jackie ..." or "... Kennedy"); plus a constant bonus when the whole normalised query
equals the label (10) or an alias (5), and 1 more when it equals the label with punctuation kept. Equal scores are
ordered by popularity (sitelinks), more first. One document per QID: later rows with a QID already seen are
skipped and counted in the done-marker (``_done.json``).

Example::

    idx = EntityIndex.build(index_dir(kb_version, "entities-bm25"), rows)
    idx.search_many(["Boston", "Gabon"], k=50)[0][0]   # Candidate(qid='Q100', title='Boston', ...)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NamedTuple

import pyarrow as pa
import tantivy

from tasks.search.bm25 import (
    ANALYZER,
    STORE_ONLY,
    BM25Index,
    NoKeys,
    add_texts,
    clean_list,
    hit_tuples,
    query_key,
    raw_key,
)


class Candidate(NamedTuple):
    """One search hit shown to an agent: an entity (or article) with its description and BM25 score.

    A named tuple, not a frozen dataclass: a search of k=50 makes 50 of them per query, and a frozen dataclass's
    ``__init__`` (one ``object.__setattr__`` per field) costs 2.5 times a named tuple's, a third of the search's
    CPU time on the sample KB (py-spy).

    Attributes:
        qid: Wikidata id; ``None`` for a Wikipedia article without a known QID.
        title: Entity label, or Wikipedia article title.
        description: Wikidata description, or the article's lead paragraph.
        score: Retrieval score (higher is better; comparable only within one query).
        page_id: Wikipedia page id (title search only, when known).
    """

    qid: str | None
    title: str
    description: str | None
    score: float
    page_id: int | None = None


class EntityIndex(BM25Index):
    """BM25 over entity labels + aliases; see the module docstring for the ranking."""

    KIND: ClassVar[str] = "entity-bm25"
    DOCS_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            pa.field("qid", pa.string(), nullable=False),
            pa.field("label", pa.string()),
            pa.field("description", pa.string()),
            pa.field("popularity", pa.int64()),
        ]
    )
    SEARCH_FIELDS: ClassVar[dict[str, float]] = {"label": 2.0, "aliases": 1.0}
    PER_TERM: ClassVar[bool] = True
    EXACT_FIELDS: ClassVar[dict[str, float]] = {"label_exact": 10.0, "alias_exact": 5.0}
    RAW_EXACT_FIELDS: ClassVar[dict[str, float]] = {"label_raw": 1.0}
    DEFAULT_K: ClassVar[int] = 50
    TIE_KEY: ClassVar[str] = "qid"

    @classmethod
    def _tantivy_schema(cls) -> tantivy.Schema:
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("qid", stored=True, tokenizer_name="raw")
        sb.add_text_field("label", stored=True, tokenizer_name=ANALYZER)
        sb.add_text_field("aliases", stored=True, tokenizer_name=ANALYZER)
        sb.add_text_field("description", stored=True, tokenizer_name=STORE_ONLY)
        sb.add_text_field("label_exact", stored=False, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("alias_exact", stored=False, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("label_raw", stored=False, tokenizer_name="raw", index_option="basic")
        sb.add_integer_field("row", stored=False, indexed=False, fast=True)
        return sb.build()

    @classmethod
    def _documents(
        cls, rows: Iterable[dict[str, Any]], stats: dict[str, int], seen: set[str] | NoKeys
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        for row in rows:
            stats["rows_in"] += 1
            qid = (row.get("qid") or "").strip()
            label = (row.get("label") or "").strip()
            aliases = [a for a in clean_list(row.get("aliases")) if a != label]
            if not qid or not (label or aliases):
                stats["rows_skipped"] += 1
                continue
            if qid in seen:
                stats["duplicates_skipped"] += 1
                continue
            seen.add(qid)
            description = row.get("description") or None
            popularity = row.get("popularity", row.get("sitelinks"))
            doc: dict[str, Any] = {"qid": qid}
            if label:
                doc["label"] = label
                add_texts(doc, "label_exact", (query_key(label), ))
                add_texts(doc, "label_raw", (raw_key(label), ))
            if aliases:  # non-empty already (clean_list)
                doc["aliases"] = aliases
                add_texts(doc, "alias_exact", dict.fromkeys(map(query_key, aliases)))
            if description:
                doc["description"] = description
            yield (
                doc,
                {
                    "qid": qid,
                    "label": label or aliases[0],
                    "description": description,
                    "popularity": int(popularity) if popularity is not None else None,
                },
            )

    def _make_hits(self, columns: dict[str, list[Any]], scores: list[float]) -> list[Candidate]:
        return hit_tuples(Candidate, columns["qid"], columns["label"], columns["description"], scores,
                          itertools.repeat(None, len(scores)))
