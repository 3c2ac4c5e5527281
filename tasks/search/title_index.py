"""BM25 search over Wikipedia article titles (ELA's "Wikipedia" source and its QA setup, docs/architecture.md#search).

Inputs: rows shaped like the ``articles`` table: ``title`` (required), ``qid`` (may be null), ``page_id``
(may be null), ``lead`` or ``description`` (the lead paragraph shown to the agent), optional ``redirects`` /
``aliases`` (other titles of the page) and ``popularity``. Outputs: an on-disk index folder
(``tasks.search.bm25``) and ranked :class:`~tasks.search.entity_index.Candidate` lists whose ``title`` is the
article title and ``description`` its lead paragraph; ``qid`` is ``None`` when the article has no known QID.

Ranking: BM25 on the title (boost 2.0) and on redirects/aliases, disjunction-max (tie-breaker 0.1), plus a
constant bonus when the normalised query equals the whole title (10), the title without its trailing
parenthetical disambiguator (``Mercury (planet)`` -> ``mercury``, 6) or a redirect (5), and 1 more when it
equals the title with punctuation kept (``Oklahoma!`` vs ``Oklahoma``). One document per title.
ELA's QA setup uses k = 35.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

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
from tasks.search.entity_index import Candidate

_DISAMBIGUATOR = re.compile(r"\s*\([^()]*\)\s*$")


def base_title(title: str) -> str:
    """The title without a trailing parenthetical disambiguator: ``"Boston (band)"`` -> ``"Boston"``."""
    stripped = _DISAMBIGUATOR.sub("", title)
    return stripped or title


class TitleIndex(BM25Index):
    """BM25 over Wikipedia titles (+ redirects); the lead paragraph is returned as description."""

    KIND: ClassVar[str] = "title-bm25"
    DOCS_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            pa.field("title", pa.string(), nullable=False),
            pa.field("qid", pa.string()),
            pa.field("page_id", pa.int64()),
            pa.field("description", pa.string()),
            pa.field("popularity", pa.int64()),
        ]
    )
    SEARCH_FIELDS: ClassVar[dict[str, float]] = {"title": 2.0, "redirects": 1.0}
    EXACT_FIELDS: ClassVar[dict[str, float]] = {"title_exact": 10.0, "base_exact": 6.0, "redirect_exact": 5.0}
    RAW_EXACT_FIELDS: ClassVar[dict[str, float]] = {"title_raw": 1.0}
    DEFAULT_K: ClassVar[int] = 35
    TIE_KEY: ClassVar[str] = "title"

    @classmethod
    def _tantivy_schema(cls) -> tantivy.Schema:
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("title", stored=True, tokenizer_name=ANALYZER)
        sb.add_text_field("qid", stored=True, tokenizer_name="raw")
        sb.add_integer_field("page_id", stored=True, indexed=True, fast=False)
        sb.add_text_field("redirects", stored=True, tokenizer_name=ANALYZER)
        sb.add_text_field("description", stored=True, tokenizer_name=STORE_ONLY)
        sb.add_text_field("title_exact", stored=False, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("base_exact", stored=False, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("redirect_exact", stored=False, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("title_raw", stored=False, tokenizer_name="raw", index_option="basic")
        sb.add_integer_field("row", stored=False, indexed=False, fast=True)
        return sb.build()

    @classmethod
    def _documents(
        cls, rows: Iterable[dict[str, Any]], stats: dict[str, int], seen: set[str] | NoKeys
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        for row in rows:
            stats["rows_in"] += 1
            title = (row.get("title") or "").strip()
            if not title:
                stats["rows_skipped"] += 1
                continue
            if title in seen:
                stats["duplicates_skipped"] += 1
                continue
            seen.add(title)
            qid = (row.get("qid") or "").strip() or None
            page_id = row.get("page_id")
            page_id = int(page_id) if page_id is not None else None
            lead = row.get("lead") if row.get("lead") is not None else row.get("description")
            redirects = [r for r in clean_list(row.get("redirects", row.get("aliases"))) if r != title]
            popularity = row.get("popularity", row.get("sitelinks"))
            doc: dict[str, Any] = {"title": title}
            if qid:
                doc["qid"] = qid
            if page_id is not None:
                doc["page_id"] = page_id
            add_texts(doc, "redirects", redirects)
            if lead:
                doc["description"] = lead
            key = query_key(title)
            add_texts(doc, "title_exact", [key])
            add_texts(doc, "title_raw", [raw_key(title)])
            base = query_key(base_title(title))
            if base != key:
                add_texts(doc, "base_exact", [base])
            add_texts(doc, "redirect_exact", dict.fromkeys(query_key(r) for r in redirects))
            yield (
                doc,
                {
                    "title": title,
                    "qid": qid,
                    "page_id": page_id,
                    "description": lead or None,
                    "popularity": int(popularity) if popularity is not None else None,
                },
            )

    def _make_hits(self, columns: dict[str, list[Any]], scores: list[float]) -> list[Candidate]:
        return hit_tuples(Candidate, columns["qid"], columns["title"], columns["description"], scores,
                          columns["page_id"])
