"""Local-KB gold: what the KB a run uses answers to a question's gold SPARQL query.

Why not in the dataset loaders: a loader reads files and knows no KB, and the questions table is shared by every
KB version; the local answers depend on the KB version. So they are computed where both are known, at run time,
by the KGQA methods (``--set kb_gold=true``): a batched ``kb_gold`` tool runs each question's query, and the
agent stores the outcome per question in ``predictions.scores`` (``kb_gold_status``, ``kb_gold_n``,
``kb_gold_f1`` = QALD F1 of the local answers against the official gold: 1.0 where the KB fully covers the
question, 0.0 where it cannot answer it) and the answers themselves in the trajectory.

Backend: an Oxigraph store (the ``pyoxigraph`` package, in process) built once per KB version from the KB's
N-Triples export by ``tasks.kg.oxigraph_store.open_store`` (``indexes/<kb_version>/kg-oxigraph.v1``, with the
``storage.done`` marker; this module re-exports ``open_store`` and ``INDEX_NAME`` and writes no file); meant for KBs
that fit one machine (the sample KB: seconds). Queries get the WDQS prefixes predefined. What the export cannot
answer is reported, not guessed: queries using statement nodes (``p:``/``ps:``/``pq:``), ``SERVICE`` (the
label service) or other Wikidata-only vocabularies are ``unsupported``; a query running past ``timeout_s`` is
``timeout`` (it is left to finish in a daemon thread; later queries go on).

Statuses: ``answered`` (non-empty answers), ``empty``, ``unsupported``, ``no_query``, ``error``, ``timeout``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NotRequired

import pyoxigraph
from typing_extensions import TypedDict

from tasks.kg.oxigraph_store import INDEX_NAME, open_store

__all__ = ["INDEX_NAME", "STATUS_CODES", "gold_answers", "kb_gold_tool", "open_store", "run_query", "supported"]

STATUS_CODES = {"answered": 1.0, "empty": 0.0, "unsupported": -1.0, "no_query": -2.0, "error": -3.0,
                "timeout": -4.0}
PREFIXES = {
    "wd": "http://www.wikidata.org/entity/",
    "wdt": "http://www.wikidata.org/prop/direct/",
    "wikibase": "http://wikiba.se/ontology#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "schema": "http://schema.org/",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "owl": "http://www.w3.org/2002/07/owl#",
}
# vocabularies the N-Triples export does not hold (statement nodes, qualifiers, references, services, lexemes)
_UNSUPPORTED = re.compile(r"\bSERVICE\b|(?<![\w:])(?:p|ps|pq|psv|pqv|pr|prv|prn|wdno|wds|wdv|wdref|bd|dct|"
                          r"ontolex|mwapi|hint|geof|wdtn|psn|pqn):", re.I)
_WD = "http://www.wikidata.org/entity/"


_PREFIX_DECL = re.compile(r"PREFIX\s+[\w-]*:\s*<[^>]*>", re.I)


def supported(sparql: str | None) -> bool:
    """Whether a query only uses what the export holds (``wd:``, ``wdt:``, labels, aliases, descriptions).

    Prefix declarations do not count (QALD-10 declares every WDQS prefix), only their use in the query body.
    """
    if not sparql or not sparql.strip():
        return False
    return not _UNSUPPORTED.search(_PREFIX_DECL.sub(" ", sparql))


def _term(t: Any) -> tuple[str | None, str | None]:
    """(qid, literal) of one result term; any other IRI (a lexeme's, a property's) is kept whole, as the loaders do."""
    if isinstance(t, pyoxigraph.NamedNode):
        v = t.value
        if v.startswith(_WD) and v[len(_WD):].startswith("Q"):
            return v[len(_WD):], None
        return None, v
    if isinstance(t, pyoxigraph.Literal):
        return None, t.value
    return None, None


def run_query(store: Any, sparql: str) -> GoldAnswers:
    """Run one gold query on a store.

    Returns:
        ``{"status", "qids", "literals"}`` (``error`` added on failure); ASK answers are ``true``/``false``.
    """
    try:
        res = store.query(sparql, prefixes=PREFIXES)
    except (SyntaxError, OSError, ValueError) as exc:
        return {"status": "error", "qids": [], "literals": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    if isinstance(res, bool) or isinstance(res, pyoxigraph.QueryBoolean):
        return {"status": "answered", "qids": [], "literals": ["true" if bool(res) else "false"]}
    qids: list[str] = []
    literals: list[str] = []
    if isinstance(res, pyoxigraph.QuerySolutions):
        for sol in res:
            for v in res.variables:
                q, lit = _term(sol[v])
                if q and q not in qids:
                    qids.append(q)
                elif lit is not None and lit not in literals:
                    literals.append(lit)
    return {"status": "answered" if qids or literals else "empty", "qids": qids, "literals": literals}


class GoldPayload(TypedDict):
    """The ``kb_gold`` payload: a question's gold SPARQL query (None when it has none)."""

    sparql: str | None


class GoldAnswers(TypedDict):
    """What the local KB answers to one gold query (the statuses: the module docstring)."""

    status: Literal["answered", "empty", "unsupported", "no_query", "error", "timeout"]
    qids: list[str]
    literals: list[str]
    error: NotRequired[str]


def gold_answers(store: Any, queries: Sequence[str | None], timeout_s: float = 20.0) -> list[GoldAnswers]:
    """Local answers of several gold queries (see the module docstring for the statuses)."""
    out: list[GoldAnswers] = []
    for q in queries:
        if not q or not q.strip():
            out.append({"status": "no_query", "qids": [], "literals": []})
            continue
        if not supported(q):
            out.append({"status": "unsupported", "qids": [], "literals": []})
            continue
        box: dict[str, Any] = {}
        worker = threading.Thread(target=lambda q=q, box=box: box.update(run_query(store, q)), daemon=True)
        worker.start()
        worker.join(timeout_s)
        out.append(box if box else {"status": "timeout", "qids": [], "literals": []})
    return out


def kb_gold_tool(kb_version: str, root: Path, timeout_s: float = 20.0):
    """Batched tool: payloads ``{"sparql": text or None}`` -> ``{"status", "qids", "literals"}`` each."""

    def tool(payloads: list[GoldPayload]) -> list[GoldAnswers]:
        try:
            store = open_store(kb_version, root)
        except (OSError, RuntimeError, ValueError) as exc:
            return [{"status": "error", "qids": [], "literals": [], "error": str(exc)[:300]} for _ in payloads]
        return gold_answers(store, [p.get("sparql") for p in payloads], timeout_s)

    return tool
