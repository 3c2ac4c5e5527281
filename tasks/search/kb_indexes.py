"""Search indexes built per KB version, and the batched ``entity_search`` tool the agents call.

Inputs: the published KB tables (``kb/<version>/entities``, ``articles``). Outputs:
``indexes/<kb_version>/entity-bm25`` (labels + aliases, description = Wikidata description) and
``indexes/<kb_version>/title-bm25`` (Wikipedia titles, description = lead paragraph),
``indexes/<kb_version>/passage-bm25`` and ``passage-dense`` (the KB's 100-word passages: BM25, and
all-MiniLM-L6-v2 + FAISS). Built once per version (atomic, idempotent) and opened once per process.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from storage import layout
from storage.parquet_io import part_files

# Bump when what goes into an index changes (new folder => rebuilt; part of every run id).
INDEX_FORMAT = 2
_OPEN: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _iter_rows(kb_version: str, table: str, columns: list[str], root: Path) -> Iterator[dict]:
    for f in part_files(layout.kb_table_dir(kb_version, table, root)):
        pf = pq.ParquetFile(f)
        for batch in pf.iter_batches(batch_size=50_000, columns=columns):
            yield from batch.to_pylist()


_DISAMBIG = re.compile(r"\s*\([^)]*\)\s*$")


def entity_doc(row: dict) -> dict:
    """Searchable names of an entity: label (else the Wikipedia title) and aliases plus the title.

    Without a label, the Wikipedia title minus a trailing "(...)" disambiguator is used: many sample-KB
    entities come from the title<->QID map only, and the title is their English name.
    """
    title = row.get("enwiki_title")
    label = row.get("label") or (_DISAMBIG.sub("", title) if title else None)
    aliases = list(row.get("aliases") or [])
    if title and title != label and title not in aliases:
        aliases.append(title)
    return {**row, "label": label, "aliases": aliases}


def entity_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the labels+aliases BM25 index of a KB version."""
    from tasks.search.entity_index import EntityIndex

    root = root or layout.home()
    key = (str(root), f"entity:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            folder = layout.index_dir(kb_version, f"entity-bm25.v{INDEX_FORMAT}", root)
            if not (folder / "meta.json").is_file():
                rows = _iter_rows(kb_version, "entities",
                                  ["qid", "label", "description", "aliases", "enwiki_title", "sitelinks"], root)
                EntityIndex.build(folder, (d for d in map(entity_doc, rows) if d["label"] or d["aliases"]))
            _OPEN[key] = EntityIndex.open(folder)
        return _OPEN[key]


def title_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the Wikipedia-title BM25 index of a KB version."""
    from tasks.search.title_index import TitleIndex

    root = root or layout.home()
    key = (str(root), f"title:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            folder = layout.index_dir(kb_version, f"title-bm25.v{INDEX_FORMAT}", root)
            if not (folder / "meta.json").is_file():
                rows = _iter_rows(kb_version, "articles", ["page_id", "title", "qid", "lead"], root)
                TitleIndex.build(folder, rows)
            _OPEN[key] = TitleIndex.open(folder)
        return _OPEN[key]


def passage_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the BM25 index over the KB's 100-word passages."""
    from tasks.search.passages import PassageIndex

    root = root or layout.home()
    key = (str(root), f"passage:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            folder = passage_index_dir(kb_version, "bm25", root)
            if not (folder / "meta.json").is_file():
                rows = _iter_rows(kb_version, "passages", ["passage_id", "page_id", "title", "qid", "text"], root)
                PassageIndex.build(folder, rows)
            _OPEN[key] = PassageIndex.open(folder)
        return _OPEN[key]


def passage_index_dir(kb_version: str, kind: str, root: Path | None = None) -> Path:
    """Folder of the ``bm25`` or ``dense`` passage index of a KB version."""
    return layout.index_dir(kb_version, f"passage-{kind}.v{INDEX_FORMAT}", root or layout.home())


def dense_passage_index(kb_version: str, root: Path | None = None):
    """Open (building if needed) the dense (MiniLM + FAISS) index over the KB's passages, with a text lookup.

    Returns:
        ``(DenseIndex, {passage_id: (title, text, qid)})``.
    """
    from tasks.search.passages import DenseIndex

    root = root or layout.home()
    key = (str(root), f"dense:{kb_version}")
    with _LOCK:
        if key not in _OPEN:
            rows = list(_iter_rows(kb_version, "passages", ["passage_id", "title", "qid", "text"], root))
            lookup = {r["passage_id"]: (r["title"], r["text"], r["qid"]) for r in rows if r["text"]}
            folder = passage_index_dir(kb_version, "dense", root)
            if not (folder / "meta.json").is_file():
                print(f"  building the dense passage index of {kb_version} ({len(lookup):,} passages, "
                      "all-MiniLM-L6-v2; once per KB version)", file=sys.stderr, flush=True)
            ids = list(lookup)
            texts = [f"{lookup[i][0]}\n{lookup[i][1]}" if lookup[i][0] else lookup[i][1] for i in ids]
            index = DenseIndex.build(folder, ids, texts, extra_meta={"kb_version": kb_version})
            _OPEN[key] = (index, lookup)
        return _OPEN[key]


def candidate_dict(c: Any) -> dict:
    """A search candidate as a plain dict (qid, title, description, score)."""
    return {"qid": c.qid, "title": c.title, "description": c.description, "score": round(float(c.score), 4)}


def search_tool(kb_version: str, root: Path, source: str = "wikidata"):
    """Batched tool: payloads ``{"queries": [...], "k": K}`` -> per payload, per query, candidate dicts.

    All queries of all payloads of one agent step go to the index in ONE ``search_many`` call.
    """
    index = entity_index(kb_version, root) if source == "wikidata" else title_index(kb_version, root)

    def tool(payloads: list[dict]) -> list[list[list[dict]]]:
        flat: list[str] = []
        ks: list[int] = []
        for p in payloads:
            flat.extend(p["queries"])
            ks.append(int(p.get("k", 50)))
        kmax = max(ks) if ks else 50
        hits = index.search_many(flat, k=kmax) if flat else []
        out, pos = [], 0
        for p, k in zip(payloads, ks, strict=True):
            n = len(p["queries"])
            out.append([[candidate_dict(c) for c in h[:k]] for h in hits[pos : pos + n]])
            pos += n
        return out

    return tool
