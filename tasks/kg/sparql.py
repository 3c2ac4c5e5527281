r"""KG access through a SPARQL endpoint (``SparqlKG``), and the one helper that fills query templates (``render``).

Inputs: an endpoint URL (a local Oxigraph or Virtuoso server loaded from ``linkedqa kb export-nt``, or the public
Wikidata Query Service, ``WDQS_URL``) and the query templates ``sql/sparql/*.rq``. Outputs: the ``KGClient``
results of ``tasks.kg.base`` (``Fact``, ``Relation``), equal to the DuckDB store's on the same KB.

Injection: templates hold named placeholders ``{{name}}`` and nothing else is ever pasted into a query.
``render`` accepts only typed values: ``Ids`` (each id must match ``^[QP][1-9][0-9]*$``, else ``KGError``),
``Pairs`` of ids, ``Texts`` (free text, always written as a quoted SPARQL string literal with backslash, both
quotes, LF, CR, tab, backspace and form feed escaped, and a ``u``/``U`` after a backslash written as
``\u0075``/``\u0055`` so that endpoints which decode ``\uXXXX`` before parsing cannot be tricked into closing
the string) and ``int``. Anything else (a bare ``str`` included) is refused.

Robustness: every query is POSTed with a timeout; connection errors, timeouts, HTTP 429 and 5xx are retried
``retries`` times with exponential backoff (``Retry-After`` honoured up to 30 s), then raised as ``KGTimeout``
(timeouts) or ``KGError`` with the endpoint and cause. Malformed queries (HTTP 400) are not retried.

Differences from ``DuckDBKG`` (documented, not hidden):

* ``search_label`` sends a fixed set of case variants of each text (as given, lower, upper, capitalised, title)
  as exact ``rdfs:label``/``skos:altLabel`` matches (indexed lookups; a ``LCASE`` filter would scan the whole
  store, which times out on WDQS), then keeps names equal to the text case-insensitively. A label in another
  casing (``"bArAcK obama"``) is found by DuckDB only.
* ``datatype`` is derived from the RDF term: entity IRIs give ``wikibase-item``/``wikibase-property``,
  ``xsd:dateTime``/``xsd:gYear`` give ``time``, ``xsd:decimal`` gives ``quantity``, plain strings the property's
  ``wikibase:propertyType`` (else ``string``). Where a source's claim datatype disagrees with its property's
  declared type (a ``string`` claim on an ``external-id`` property) the two backends differ.
* Without ``limit_per_entity`` one query returns at most ``max_rows`` rows; more raises ``KGError`` rather than
  silently truncating. With a limit, each entity gets its own ``ORDER BY ... LIMIT`` query.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.error
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from SPARQLWrapper import JSON, POST, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import SPARQLWrapperException

from storage import layout
from tasks.kg.base import (
    ID_RE,
    Fact,
    KGError,
    KGTimeout,
    Relation,
    check_ids,
    check_limit,
    check_pairs,
    fact_sort_key,
    finish_facts,
    id_number,
    name_key,
    relation_sort_key,
)
from tasks.kg.export_nt import PROPERTY_TYPES

SPARQL_DIR = layout.REPO_ROOT / "sql" / "sparql"
WDQS_URL = "https://query.wikidata.org/sparql"
DEFAULT_USER_AGENT = "linkedqa/0.1 (https://github.com/linkedqa; research batch pipeline)"
WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
XSD = "http://www.w3.org/2001/XMLSchema#"
_WIKIBASE = "http://wikiba.se/ontology#"
_TYPE_NAMES = {f"{_WIKIBASE}{v}": k for k, v in PROPERTY_TYPES.items()}
_PLACEHOLDER = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")
_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                                 "\b": "\\b", "\f": "\\f"})
_BACKSLASH_U = re.compile(r"\\\\([uU])")


@dataclass(frozen=True)
class Ids:
    """A list of entity/property ids for a ``VALUES`` block: ``wd:Q1 wd:Q2`` (or ``wdt:P31`` with prefix)."""

    values: Sequence[str]
    prefix: str = "wd"


@dataclass(frozen=True)
class Pairs:
    """``(qid, pid)`` rows for a two-variable ``VALUES`` block: ``(wd:Q1 wdt:P31)``."""

    rows: Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Texts:
    """Free texts for a ``VALUES`` block, each a quoted string literal (with ``@lang`` when given)."""

    values: Sequence[str]
    lang: str | None = "en"


def sparql_string(text: str) -> str:
    """Quote any text as a SPARQL string literal (``STRING_LITERAL2``).

    Args:
        text: Untrusted text.

    Returns:
        ``"..."`` in which no character can end the literal or be decoded into one that does.
    """
    if not isinstance(text, str):
        raise KGError(f"expected text, got {type(text).__name__}")
    escaped = text.translate(_STRING_ESCAPES)
    # '\\' followed by u/U: spell the letter as \u0075 / \u0055 so a codepoint-escape pre-pass cannot turn the
    # user's backslash + "u0022" into a closing quote; parsers without the pre-pass decode it back to u/U.
    escaped = _BACKSLASH_U.sub(lambda m: "\\\\\\u0075" if m.group(1) == "u" else "\\\\\\u0055", escaped)
    return f'"{escaped}"'


def _id_term(value: object, prefix: str) -> str:
    if not isinstance(value, str) or not ID_RE.match(value):
        raise KGError(f"invalid Wikidata id {value!r}: expected Q<digits> or P<digits>")
    if prefix == "wdt" and not value.startswith("P"):
        raise KGError(f"invalid property id {value!r}")
    return f"{prefix}:{value}"


def _term(name: str, value: object) -> str:
    if isinstance(value, bool):
        raise KGError(f"placeholder {name}: booleans are not accepted")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, Ids):
        if isinstance(value.values, str):
            raise KGError(f"placeholder {name}: Ids takes a list of ids, not one string")
        if value.prefix not in ("wd", "wdt"):
            raise KGError(f"placeholder {name}: unknown prefix {value.prefix!r}")
        return " ".join(_id_term(v, value.prefix) for v in value.values)
    if isinstance(value, Pairs):
        return " ".join(f"({_id_term(q, 'wd')} {_id_term(p, 'wdt')})" for q, p in value.rows)
    if isinstance(value, Texts):
        if isinstance(value.values, str):
            raise KGError(f"placeholder {name}: Texts takes a list of texts, not one string")
        if value.lang is not None and not re.fullmatch(r"[a-z]{2,3}(-[A-Za-z0-9]+)*", value.lang):
            raise KGError(f"placeholder {name}: invalid language tag {value.lang!r}")
        tag = f"@{value.lang}" if value.lang else ""
        return " ".join(sparql_string(t) + tag for t in value.values)
    raise KGError(f"placeholder {name}: unsupported value type {type(value).__name__} (use Ids, Pairs, Texts, int)")


def render(query_file: str | Path, **values: object) -> str:
    """Fill a query template's ``{{name}}`` placeholders with escaped values.

    Args:
        query_file: A template name in ``sql/sparql`` (``"outgoing"`` or ``"outgoing.rq"``) or a path.
        **values: One value per placeholder: ``Ids``, ``Pairs``, ``Texts`` or ``int``.

    Returns:
        The query text.

    Raises:
        KGError: On a missing or unexpected placeholder, an invalid id, or a value of another type.
    """
    path = Path(query_file)
    if not path.is_absolute():
        path = SPARQL_DIR / (path.name if path.suffix == ".rq" else f"{path.name}.rq")
    template = path.read_text()
    names = set(_PLACEHOLDER.findall(template))
    if names != set(values):
        raise KGError(f"{path.name}: placeholders {sorted(names)} but values for {sorted(values)}")
    terms = {k: _term(k, v) for k, v in values.items()}
    return _PLACEHOLDER.sub(lambda m: terms[m.group(1)], template)


def _chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _entity_id(term: dict | None) -> str | None:
    if not term or term.get("type") != "uri":
        return None
    value = term["value"]
    if value.startswith(WD):
        ident = value[len(WD):]
        return ident if ID_RE.match(ident) else None
    return None


def _literal(term: dict, ptype: str | None) -> tuple[str, str]:
    value, dt = term["value"], term.get("datatype")
    if dt == f"{XSD}dateTime":
        return value.removesuffix("T00:00:00Z"), "time"
    if dt in (f"{XSD}gYear", f"{XSD}gYearMonth", f"{XSD}date"):
        return value, "time"
    if dt == f"{XSD}decimal":
        return value, "quantity"
    kind = _TYPE_NAMES.get(ptype or "")
    return value, kind or "string"


def _text(term: dict | None) -> str | None:
    return term["value"] if term else None


class SparqlKG:
    """``KGClient`` over a SPARQL 1.1 endpoint (Oxigraph, Virtuoso, WDQS) via SPARQLWrapper.

    Example:
        >>> kg = SparqlKG("http://127.0.0.1:7878/query", timeout_s=5)  # doctest: +SKIP
        >>> kg.outgoing(["Q1000"])["Q1000"][0].property_label  # doctest: +SKIP
        'country'
    """

    def __init__(self, endpoint_url: str, timeout_s: float = 10, retries: int = 2,
                 user_agent: str = DEFAULT_USER_AGENT, batch_size: int = 500, max_rows: int = 100_000,
                 backoff_s: float = 0.25):
        """Configure the client (no request is made here).

        Args:
            endpoint_url: SPARQL query endpoint (``http://127.0.0.1:PORT/query`` for Oxigraph, ``WDQS_URL``).
            timeout_s: Per-request timeout (connect and each read).
            retries: Extra attempts after a failed request (timeouts, connection errors, 429, 5xx).
            user_agent: HTTP User-Agent (WDQS blocks generic agents; keep a contact URL in it).
            batch_size: Entities per ``VALUES`` block; longer inputs are split into several queries.
            max_rows: ``LIMIT`` of one query when no per-entity limit is given (more rows raise ``KGError``).
            backoff_s: First retry delay (doubled per attempt, at most 5 s).
        """
        if retries < 0 or timeout_s <= 0:
            raise ValueError("retries must be >= 0 and timeout_s > 0")
        self.endpoint_url = endpoint_url
        self.timeout_s = timeout_s
        self.retries = retries
        self.user_agent = user_agent
        self.batch_size = batch_size
        self.max_rows = max_rows
        self.backoff_s = backoff_s

    # -- transport ---------------------------------------------------------------------------------------------

    def _once(self, query: str) -> list[dict]:
        sw = SPARQLWrapper(self.endpoint_url, agent=self.user_agent)
        sw.setMethod(POST)
        sw.setReturnFormat(JSON)
        sw.timeout = self.timeout_s  # setTimeout() truncates to int (0.5 s would mean no timeout at all)
        sw.setQuery(query)
        result = sw.queryAndConvert()
        if not isinstance(result, dict) or "results" not in result:
            raise KGError(f"{self.endpoint_url}: unexpected answer (not SPARQL JSON results)")
        return result["results"]["bindings"]

    def select(self, query: str) -> list[dict]:
        """Run a rendered SELECT query with timeout and retries.

        Args:
            query: Query text from ``render``.

        Returns:
            SPARQL JSON result bindings.

        Raises:
            KGTimeout: When every attempt timed out.
            KGError: On any other failure after the retries, or at once on a malformed query.
        """
        attempts = self.retries + 1
        last: Exception | None = None
        timed_out = False
        for attempt in range(attempts):
            delay = min(self.backoff_s * (2**attempt), 5.0)
            try:
                return self._once(query)
            except SPARQLWrapperException as exc:
                name = type(exc).__name__
                if name in ("QueryBadFormed", "Unauthorized", "EndPointNotFound", "URITooLong"):
                    raise KGError(f"{self.endpoint_url}: {name}: {str(exc)[:500]}") from exc
                last, timed_out = exc, False
            except urllib.error.HTTPError as exc:
                if exc.code != 429 and exc.code < 500:
                    raise KGError(f"{self.endpoint_url}: HTTP {exc.code} {exc.reason}") from exc
                last, timed_out = exc, False
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                if retry_after and retry_after.isdigit():
                    delay = min(float(retry_after), 30.0)
            except urllib.error.URLError as exc:
                last, timed_out = exc, isinstance(exc.reason, TimeoutError)
            except TimeoutError as exc:
                last, timed_out = exc, True
            except (OSError, http.client.HTTPException, json.JSONDecodeError) as exc:
                last, timed_out = exc, False
            if attempt + 1 < attempts:
                time.sleep(delay)
        if timed_out:
            raise KGTimeout(f"{self.endpoint_url}: no answer within {self.timeout_s}s "
                            f"({attempts} attempt(s))") from last
        raise KGError(f"{self.endpoint_url}: request failed after {attempts} attempt(s): "
                      f"{type(last).__name__}: {last}") from last

    def _rows(self, template: str, limit: int | None = None, **values: object) -> list[dict]:
        cap = limit if limit is not None else self.max_rows
        rows = self.select(render(template, limit=cap, **values))
        if limit is None and len(rows) >= self.max_rows:
            raise KGError(f"{self.endpoint_url}: {template} returned {self.max_rows}+ rows; pass limit_per_entity "
                          "or raise max_rows")
        return rows

    # -- KGClient ----------------------------------------------------------------------------------------------

    def labels(self, qids: Sequence[str]) -> dict[str, str | None]:
        """English labels of entities or properties (see ``KGClient.labels``)."""
        ids = check_ids(qids)
        out: dict[str, str | None] = dict.fromkeys(ids)
        for chunk in _chunks(ids, self.batch_size):
            for b in self.select(render("labels", items=Ids(chunk))):
                ident = _entity_id(b.get("item"))
                if ident in out and (out[ident] is None or b["label"]["value"] < out[ident]):
                    out[ident] = b["label"]["value"]
        return out

    def search_label(self, texts: Sequence[str]) -> list[list[str]]:
        """Entities whose English label or alias equals each text (see ``KGClient.search_label``)."""
        texts = [t if isinstance(t, str) else "" for t in texts]
        keys = [name_key(t) for t in texts]
        variants: dict[str, None] = {}
        for t in texts:
            if t:
                for v in (t, t.lower(), t.upper(), t.capitalize(), t.title(), t[:1].upper() + t[1:]):
                    variants[v] = None
        found: dict[str, dict[str, bool]] = {}
        names = list(variants)
        for chunk in _chunks(names, self.batch_size):
            for b in self.select(render("search_label", names=Texts(chunk))):
                qid = _entity_id(b.get("item"))
                if qid is None or not qid.startswith("Q"):
                    continue
                is_alias = b.get("alias", {}).get("value") in ("true", "1")
                hits = found.setdefault(name_key(b["name"]["value"]), {})
                hits[qid] = hits.get(qid, True) and is_alias
        out = []
        for k in keys:
            hits = found.get(k, {}) if k else {}
            out.append(sorted(hits, key=lambda q, h=hits: (h[q], id_number(q))))
        return out

    def _facts(self, rows: list[dict], subject_var: str = "s", object_var: str = "o") -> list[Fact]:
        facts = []
        for b in rows:
            s = _entity_id(b.get(subject_var))
            wdt = b.get("wdt", {}).get("value", "")
            pid = wdt[len(WDT):] if wdt.startswith(WDT) else None
            obj = b.get(object_var)
            if s is None or pid is None or not ID_RE.match(pid) or obj is None:
                continue
            if obj["type"] == "uri":
                oq = _entity_id(obj)
                if oq is None:
                    continue  # skolemised somevalue, lexemes...: not in the KB's claim set either
                value, datatype = None, "wikibase-item" if oq.startswith("Q") else "wikibase-property"
            elif obj["type"] in ("literal", "typed-literal"):
                oq = None
                value, datatype = _literal(obj, _text(b.get("ptype")))
            else:
                continue
            facts.append(Fact(subject=s, property=pid, property_label=_text(b.get("pl")), object_qid=oq,
                              object_value=value, object_label=_text(b.get("ol")) if oq else None,
                              datatype=datatype, subject_label=_text(b.get("sl"))))
        return list(dict.fromkeys(facts))

    def _one_hop(self, template: str, key: str, qids: Sequence[str],
                 limit_per_entity: int | None) -> dict[str, list[Fact]]:
        ids = check_ids(qids)
        limit = check_limit(limit_per_entity)
        facts: list[Fact] = []
        if limit is None:
            for chunk in _chunks(ids, self.batch_size):
                facts.extend(self._facts(self._rows(template, items=Ids(chunk))))
        else:
            for q in ids:
                facts.extend(self._facts(self._rows(template, limit=limit, items=Ids([q]))))
        return finish_facts(ids, facts, key, limit)

    def outgoing(self, qids: Sequence[str], limit_per_entity: int | None = None) -> dict[str, list[Fact]]:
        """Claims whose subject is each entity (see ``KGClient.outgoing``)."""
        return self._one_hop("outgoing", "subject", qids, limit_per_entity)

    def incoming(self, qids: Sequence[str], limit_per_entity: int | None = None) -> dict[str, list[Fact]]:
        """Claims whose item object is each entity (see ``KGClient.incoming``)."""
        return self._one_hop("incoming", "object_qid", qids, limit_per_entity)

    def relations(self, qids: Sequence[str]) -> dict[str, list[Relation]]:
        """Properties around each entity with claim counts (see ``KGClient.relations``)."""
        ids = check_ids(qids)
        counts: list[tuple[str, str, str, int]] = []
        for chunk in _chunks(ids, self.batch_size):
            for b in self.select(render("relations", items=Ids(chunk))):
                q = _entity_id(b.get("item"))
                wdt = b["wdt"]["value"]
                if q is None or not wdt.startswith(WDT):
                    continue
                counts.append((q, wdt[len(WDT):], b["dir"]["value"], int(b["n"]["value"])))
        names = self.labels(sorted({pid for _, pid, _, _ in counts})) if counts else {}
        out: dict[str, list[Relation]] = {q: [] for q in ids}
        for q, pid, direction, n in counts:
            out[q].append(Relation(pid=pid, label=names.get(pid), direction=direction, count=n))
        for rels in out.values():
            rels.sort(key=relation_sort_key)
        return out

    def neighbours(self, pairs: Sequence[tuple[str, str, str]]) -> list[list[Fact]]:
        """Facts linking each entity through one property in one direction (see ``KGClient.neighbours``)."""
        reqs = check_pairs(pairs)
        by_key: dict[tuple[str, str, str], list[Fact]] = {}
        for direction, template, attr in (("out", "neighbours_out", "subject"), ("in", "neighbours_in", "object_qid")):
            keys = list(dict.fromkeys((q, p) for q, p, d in reqs if d == direction))
            for chunk in _chunks(keys, self.batch_size):
                for f in self._facts(self._rows(template, pairs=Pairs(chunk))):
                    by_key.setdefault((getattr(f, attr), f.property, direction), []).append(f)
        out = []
        for q, p, d in reqs:
            out.append(sorted(set(by_key.get((q, p, d), [])), key=fact_sort_key))
        return out
