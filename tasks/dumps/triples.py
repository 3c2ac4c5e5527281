"""Streaming readers of triple-shaped Wikidata extracts: KGTK TSV, plain TSV triples, label files, N-Triples.

Inputs:
    * KGTK edge files with a header naming ``node1``/``label``/``node2`` (``id`` and
      ``node2;wikidatatype`` optional; any column order), values KGTK-encoded (``'text'@en``, ``"string"``,
      ``^1947-07-30T00:00:00Z/11``, ``@lat/lon``, numbers, node ids) -> ``read_kgtk``.
    * Plain ``subject<TAB>property<TAB>object`` triples (CoDEx, LitWD train/valid/test, LitWD
      ``numeric_literals.txt`` with ``PID_unitQID`` properties and ``"value"^^xsd:decimal`` objects) and
      two-column ``QID<TAB>typeQID`` typing files (``entity_types.txt``, read as P31) -> ``read_triples``.
      Files whose name contains ``negatives`` (CoDEx false triples) are refused.
    * ``ID<TAB>text`` label / alias (comma-separated) / description files (LitWD) and CoDEx
      ``{id: {label, description, wiki}}`` JSON files -> ``read_label_file``.
    * Wikidata truthy N-Triples (``wdt:`` claims, ``rdfs:label``, ``schema:description``,
      ``skos:altLabel``, ``schema:about`` enwiki sitelinks, ``wikibase:sitelinks``,
      ``wikibase:propertyType``) -> ``read_ntriples``.
    * The Wikipedia vital-articles ``QID;title;url`` map -> ``read_title_map`` / ``load_title_map``.

Outputs: ``(table, row)`` pairs with exactly the columns of ``storage.schemas``: ``claims``, ``aliases``,
``labels``, ``rejects`` and PARTIAL ``entities`` / ``properties`` rows (only the fields the input provides are
set, the others are ``None``). Consecutive input rows about the same id are merged into one partial row; the
same id may still appear in several partial rows (other files, other shards, unsorted input), so the KB merge
combines them (union of aliases / instance_of, first non-null of the other fields). Ranks: ``normal`` for KGTK
edges, ``truthy`` for plain triples and N-Triples.

``languages`` (the build's ``--languages``; ``None`` = all) keeps only the ``labels`` / ``aliases`` rows of those
languages (a label file's rows are ``en``); the partial ``entities`` / ``properties`` rows (English texts) and the
claims do not depend on it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import orjson

from tasks.dumps.base import DumpError, Shard, TableRow, iter_lines, open_text_stream, read_whole, reject
from tasks.dumps.wikidata_json import BadEntity, normalize_time

_IS_ID = re.compile(r"[QP][1-9][0-9]*").fullmatch
_IS_PID = re.compile(r"P[1-9][0-9]*").fullmatch
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?").match

ENTITY_IRI = "http://www.wikidata.org/entity/"
XSD = "http://www.w3.org/2001/XMLSchema#"
_XSD_QUANTITY = {"decimal", "integer", "double", "float", "int", "long", "short", "nonNegativeInteger"}


# --------------------------------------------------------------------------- partial rows
def _entity_row(qid: str, source: str, **fields: object) -> TableRow:
    row = {"qid": qid, "label": None, "description": None, "aliases": None, "enwiki_title": None,
           "sitelinks": None, "instance_of": None, "source": source}
    row.update(fields)
    return "entities", row


def _property_row(pid: str, **fields: object) -> TableRow:
    row = {"pid": pid, "label": None, "description": None, "aliases": None, "datatype": None}
    row.update(fields)
    return "properties", row


class _Group:
    """Merge consecutive facts about one id into one partial ``entities`` or ``properties`` row."""

    __slots__ = ("key", "fields", "source")

    def __init__(self, source: str):
        self.key: str | None = None
        self.fields: dict[str, object] = {}
        self.source = source

    def switch(self, key: str) -> TableRow | None:
        """Make ``key`` the current id; returns the finished row of the previous id, if any."""
        if key == self.key:
            return None
        done = self.flush()
        self.key = key
        return done

    def set(self, name: str, value: object) -> None:
        """Set a scalar field (the first value wins)."""
        if self.fields.get(name) is None:
            self.fields[name] = value

    def add(self, name: str, value: str) -> None:
        """Append to a list field (aliases, instance_of), without duplicates."""
        lst = self.fields.setdefault(name, [])
        if value not in lst:
            lst.append(value)

    def flush(self) -> TableRow | None:
        """Return the current partial row (or ``None`` when nothing was collected) and reset."""
        key, fields = self.key, self.fields
        self.key, self.fields = None, {}
        if key is None or not fields:
            return None
        if key[0] == "P":
            fields.pop("instance_of", None)
            fields.pop("enwiki_title", None)
            fields.pop("sitelinks", None)
            if not fields:
                return None
            return _property_row(key, **fields)
        fields.pop("datatype", None)
        return _entity_row(key, self.source, **fields)


# --------------------------------------------------------------------------- KGTK
_KGTK_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_BACKSLASH = re.compile(r"\\(.)", re.DOTALL)


def kgtk_unescape(text: str) -> str:
    r"""Undo KGTK backslash escapes (``\'``, ``\"``, ``\\``, ``\|``, ``\n``, ``\t``, ...)."""
    if "\\" not in text:
        return text
    return _BACKSLASH.sub(lambda m: _KGTK_ESCAPES.get(m.group(1), m.group(1)), text)


def kgtk_value(value: str) -> tuple[str | None, str | None, str | None, str | None]:
    """Decode one KGTK ``node2`` value.

    Args:
        value: The raw KGTK cell, e.g. ``Q5``, ``'Douglas'@en``, ``"abc"``, ``^1952-03-11T00:00:00Z/11``,
            ``@51.5/-0.12``, ``+1.96Q11573``.

    Returns:
        ``(object_qid, object_value, datatype, lang)``: item/property ids give ``object_qid`` (datatype
        ``wikibase-item``/``wikibase-property``); language strings give the unescaped text
        (``monolingualtext``, with ``lang``); strings -> ``string``; dates -> ISO text at their precision
        (``time``); locations -> ``"lat,lon"`` (``globe-coordinate``); numbers -> the amount without ``+``,
        unit and tolerance dropped (``quantity``); any other symbol -> ``object_value`` with datatype
        ``None``.

    Raises:
        ValueError: For an empty value or a malformed literal.
    """
    if not value:
        raise ValueError("empty node2")
    if _IS_ID(value):
        return value, None, ("wikibase-item" if value[0] == "Q" else "wikibase-property"), None
    first = value[0]
    if first == "'":
        i = value.rfind("'@")
        if i <= 0:
            raise ValueError(f"malformed language-qualified string {value[:50]!r}")
        return None, kgtk_unescape(value[1:i]), "monolingualtext", value[i + 2:]
    if first == '"':
        if len(value) < 2 or value[-1] != '"':
            raise ValueError(f"malformed string {value[:50]!r}")
        return None, kgtk_unescape(value[1:-1]), "string", None
    if first == "^":
        body, _, prec = value[1:].partition("/")
        try:
            return None, normalize_time(body, int(prec) if prec else None), "time", None
        except (BadEntity, ValueError) as exc:
            raise ValueError(f"malformed date {value[:50]!r}: {exc}") from None
    if first == "@":
        lat, sep, lon = value[1:].partition("/")
        if not sep or not _NUMBER(lat) or not _NUMBER(lon):
            raise ValueError(f"malformed location {value[:50]!r}")
        return None, f"{lat},{lon}", "globe-coordinate", None
    m = _NUMBER(value)
    if m:
        amount = m.group(0)
        return None, amount[1:] if amount[0] == "+" else amount, "quantity", None
    return None, value, None, None


_KGTK_COLS = {"node1": ("node1", "subject", "from"), "label": ("label", "predicate", "relation"),
              "node2": ("node2", "object", "to")}


def _kgtk_header(path: Path) -> dict[str, int]:
    try:
        with open_text_stream(path) as fh:
            header = fh.readline().decode("utf-8").rstrip("\r\n").split("\t")
    except (EOFError, OSError, UnicodeDecodeError) as exc:
        raise DumpError(f"{path}: unreadable KGTK header at byte offset 0: {exc}") from exc
    cols: dict[str, int] = {}
    for key, names in _KGTK_COLS.items():
        for name in names:
            if name in header:
                cols[key] = header.index(name)
                break
        else:
            raise DumpError(f"{path}: not a KGTK edge file: header {header!r} has no {key} column")
    if "node2;wikidatatype" in header:
        cols["datatype"] = header.index("node2;wikidatatype")
    return cols


def read_kgtk(path: Path | str, shard: Shard = Shard(), source: str | None = None,
              languages: tuple[str, ...] | None = None) -> Iterator[TableRow]:
    """Stream a KGTK edge file into KB rows.

    Edge labels: ``label`` -> partial ``entities`` row + ``labels`` row (Q ids) or partial ``properties`` row
    (P ids); ``description`` -> partial row with the English description; ``alias`` -> ``aliases`` row (Q ids)
    and the alias in the partial row's list; ``datatype`` -> the property's datatype; a PID -> ``claims`` row
    (rank ``normal``; datatype from the ``node2;wikidatatype`` column when present, else inferred from the
    value); P31 edges also fill the partial row's ``instance_of``. Other edge labels (sitelinks, qualifiers'
    edges, ...) are skipped. The header line is read separately, so byte shards of plain files work.

    Args:
        path: KGTK TSV file (plain or compressed).
        shard: Slice to read (see ``tasks.dumps.base.Shard``).
        source: Value of the ``source`` column; defaults to the file name.
        languages: Keep only these languages' ``labels`` / ``aliases`` rows (untagged text is ``en``); ``None`` =
            every language.

    Yields:
        ``(table, row)`` pairs; malformed lines (wrong column count, bad ids, malformed values, invalid UTF-8)
        become ``rejects`` rows.

    Raises:
        DumpError: When the file is unreadable, truncated, or has no KGTK header.
    """
    path = Path(path)
    src = source or path.name
    cols = _kgtk_header(path)
    i1, il, i2 = cols["node1"], cols["label"], cols["node2"]
    idt = cols.get("datatype")
    need = max(cols.values()) + 1
    group = _Group(src)
    for lineno, offset, raw in iter_lines(path, shard):
        if offset == 0:
            continue  # header
        try:
            fields = raw.decode("utf-8").rstrip("\r\n").split("\t")
        except UnicodeDecodeError as exc:
            yield reject(path, f"invalid UTF-8: {exc}", raw, offset, lineno, "kgtk")
            continue
        if len(fields) < need:
            if len(fields) == 1 and not fields[0].strip():
                continue
            yield reject(path, f"expected at least {need} tab-separated columns, got {len(fields)}", raw,
                         offset, lineno, "kgtk")
            continue
        node1, label, node2 = fields[i1], fields[il], fields[i2]
        if not _IS_ID(node1):
            yield reject(path, f"node1 is not a Wikidata id: {node1[:50]!r}", raw, offset, lineno, "kgtk")
            continue
        try:
            oq, ov, dt, lang = kgtk_value(node2)
        except ValueError as exc:
            yield reject(path, str(exc), raw, offset, lineno, "kgtk")
            continue
        done = group.switch(node1)
        if done is not None:
            yield done
        is_item = node1[0] == "Q"
        if label in ("label", "description", "alias"):
            if ov is None or dt not in ("monolingualtext", "string"):
                yield reject(path, f"{label} value is not a string: {node2[:50]!r}", raw, offset, lineno,
                             "kgtk")
                continue
            english = lang in (None, "en")
            kept = is_item and (languages is None or (lang or "en") in languages)
            if label == "label":
                if english:
                    group.set("label", ov)
                if kept:
                    yield "labels", {"qid": node1, "lang": lang or "en", "label": ov}
            elif label == "description":
                if english:
                    group.set("description", ov)
            else:
                if english:
                    group.add("aliases", ov)
                if kept:
                    yield "aliases", {"qid": node1, "alias": ov, "lang": lang or "en"}
        elif label == "datatype":
            group.set("datatype", ov)
        elif _IS_PID(label):
            if idt is not None and idt < len(fields) and fields[idt]:
                dt = fields[idt]
            yield "claims", {"subject": node1, "property": label, "object_qid": oq, "object_value": ov,
                             "datatype": dt, "rank": "normal", "source": src}
            if label == "P31" and oq is not None and is_item:
                group.add("instance_of", oq)
    done = group.flush()
    if done is not None:
        yield done


# --------------------------------------------------------------------------- plain triples
def _typed_literal(text: str) -> tuple[str, str] | None:
    """Parse ``"v"``, ``"v"@lang`` or ``"v"^^<type>`` (escapes undone); returns ``(value, datatype)``."""
    m = _LITERAL(text)
    if not m:
        return None
    value = nt_unescape(m.group(1))
    lang, dtype = m.group(2), m.group(3)
    if lang:
        return value, "monolingualtext"
    if dtype:
        return _xsd_value(value, dtype)
    return value, "string"


def _xsd_value(value: str, dtype: str) -> tuple[str, str]:
    local = dtype.rsplit("#", 1)[-1]
    if dtype.startswith(XSD) and local in _XSD_QUANTITY:
        return (value[1:] if value[:1] == "+" else value), "quantity"
    if dtype.startswith(XSD) and local in ("dateTime", "date"):
        if value.endswith("T00:00:00Z"):
            return normalize_time(value, 11), "time"
        return value, "time"
    if local == "wktLiteral" and value.startswith("Point(") and value.endswith(")"):
        parts = value[6:-1].split()
        if len(parts) == 2:
            return f"{parts[1]},{parts[0]}", "globe-coordinate"
    return value, "string"


# LitWD's numeric literals split a coordinate (P625 and the extreme points P1332-P1335, P5140) into
# ``P625_Latitude`` and ``P625_Longtiude`` (sic) lines. Each half is staged with one of these datatypes (staging
# only: no merged claim has them) and sql/kb/stg_claims_paired.sql joins the two halves of one subject, property
# and source into one ``globe-coordinate`` claim ``"lat,lon"`` (the JSON dump's form), wherever the shards cut the
# file.
COORDINATE_HALVES = {"Latitude": "coordinate-latitude", "Longtiude": "coordinate-longitude",
                     "Longitude": "coordinate-longitude"}


def read_triples(path: Path | str, shard: Shard = Shard(), source: str | None = None,
                 default_property: str = "P31") -> Iterator[TableRow]:
    """Stream a plain TSV triple file into ``claims`` rows (rank ``truthy``).

    Three columns ``subject property object``: item objects give ``object_qid`` (datatype ``wikibase-item``,
    or ``wikibase-property`` for P ids); literal objects (``"v"^^<xsd:decimal>``, ``"v"@en``, ``"v"``) give
    ``object_value`` (``quantity``, ``time``, ``monolingualtext``, ``string``). A property written
    ``P1082_Q199`` (LitWD numeric literals: property + unit) is read as ``P1082`` (the unit is dropped); a
    ``P625_Latitude``/``P625_Longtiude`` pair gives two coordinate halves (``COORDINATE_HALVES``), joined on
    merge. Two
    columns ``subject object`` (LitWD ``entity_types.txt``) are ``default_property`` (P31) claims; P31 claims
    also yield partial ``entities`` rows with ``instance_of`` (consecutive lines of one subject merged).

    Args:
        path: Triple file (plain or compressed). A name containing ``negatives`` is refused.
        shard: Slice to read.
        source: Value of the ``source`` column; defaults to the file name.
        default_property: Property of two-column lines.

    Yields:
        ``(table, row)`` pairs; lines with another column count, non-Wikidata ids or malformed literals become
        ``rejects`` rows.

    Raises:
        ValueError: For CoDEx ``*negatives*`` files (false triples must never enter the KB).
        DumpError: When the file is unreadable or truncated.
    """
    path = Path(path)
    if "negatives" in path.name.lower():
        raise ValueError(f"{path}: refusing to import negative (false) triples")
    src = source or path.name
    group = _Group(src)
    for lineno, offset, raw in iter_lines(path, shard):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            yield reject(path, f"invalid UTF-8: {exc}", raw, offset, lineno, "triples")
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        half = None
        if len(parts) == 3:
            s, p, o = parts
            if "_" in p:
                p, suffix = p.split("_", 1)
                half = COORDINATE_HALVES.get(suffix)
        elif len(parts) == 2:
            s, o = parts
            p = default_property
        else:
            yield reject(path, f"expected 2 or 3 tab-separated columns, got {len(parts)}", raw, offset,
                         lineno, "triples")
            continue
        if not _IS_ID(s) or not _IS_PID(p):
            yield reject(path, f"bad subject or property: {s[:30]!r} {p[:30]!r}", raw, offset, lineno,
                         "triples")
            continue
        if _IS_ID(o):
            oq, ov, dt = o, None, ("wikibase-item" if o[0] == "Q" else "wikibase-property")
        else:
            lit = _typed_literal(o)
            if lit is None:
                yield reject(path, f"object is neither a Wikidata id nor a literal: {o[:50]!r}", raw, offset,
                             lineno, "triples")
                continue
            oq, (ov, dt) = None, lit
            if half is not None and dt == "quantity":
                dt = half  # one half of a coordinate: the KB merge joins the two (sql/kb/stg_claims_paired.sql)
        yield "claims", {"subject": s, "property": p, "object_qid": oq, "object_value": ov, "datatype": dt,
                         "rank": "truthy", "source": src}
        if p == "P31" and oq is not None and s[0] == "Q":
            done = group.switch(s)
            if done is not None:
                yield done
            group.add("instance_of", oq)
    done = group.flush()
    if done is not None:
        yield done


# --------------------------------------------------------------------------- label files
def _split_aliases(text: str) -> list[str]:
    out: list[str] = []
    for a in text.split(","):
        a = a.strip()
        if a and a not in out:
            out.append(a)
    return out


def _wiki_title(url: object) -> str | None:
    if not isinstance(url, str) or "/wiki/" not in url:
        return None
    title = unquote(url.split("/wiki/", 1)[1]).replace("_", " ").strip()
    return title or None


_KIND_ALIASES = {"labels": "label", "aliases": "alias", "descriptions": "description"}


def _label_kind(path: Path) -> str:
    name = path.name.lower()
    for kind in ("alias", "description", "label"):
        if kind in name:
            return kind
    raise ValueError(f"{path}: cannot tell the kind (label/alias/description) from the name; pass kind=")


def read_label_file(path: Path | str, shard: Shard = Shard(), source: str | None = None,
                    kind: str | None = None, languages: tuple[str, ...] | None = None) -> Iterator[TableRow]:
    """Read an id -> English text file into partial ``entities`` / ``properties`` rows.

    TSV files ``ID<TAB>text`` (LitWD ``entity_labels_en.txt``, ``entity_aliases_en.txt``,
    ``entity_wikidata_descriptions_en.txt``, ``Relations/relation_*``, ``Attributes/attribute_*``): Q ids give
    partial ``entities`` rows (plus a ``labels`` row per label and an ``aliases`` row per alias), P ids
    partial ``properties`` rows. Alias cells are split on commas (so an alias that itself contains a comma,
    such as ``Boston, MA``, is split in two: the file format cannot tell them apart).

    JSON files ``{id: {label, description, wiki?}}`` (CoDEx ``relations.json``, ``types.json``) are loaded
    whole (small files; read only by shard 0): Q ids give ``entities`` rows (enwiki_title derived from the
    ``wiki`` URL) and ``labels`` rows, P ids ``properties`` rows.

    Args:
        path: Label file.
        shard: Slice to read (TSV files).
        source: Value of the ``source`` column; defaults to the file name.
        kind: ``label``, ``alias`` or ``description`` (plural forms accepted) for TSV files; inferred from
            the file name when ``None``.
        languages: The ``labels`` / ``aliases`` rows (all ``en``) are kept when ``en`` is among these or when
            ``None``.

    Yields:
        ``(table, row)`` pairs; malformed lines become ``rejects`` rows.

    Raises:
        ValueError: When ``kind`` is unknown or cannot be inferred.
        DumpError: When the file is unreadable or truncated.
    """
    path = Path(path)
    src = source or path.name
    en = languages is None or "en" in languages
    if path.name.lower().endswith((".json", ".json.gz", ".json.bz2")):
        if shard.index == 0:
            yield from _read_label_json(path, src, en)
        return
    kind = kind or _label_kind(path)
    kind = _KIND_ALIASES.get(kind, kind)
    if kind not in ("label", "alias", "description"):
        raise ValueError(f"unknown label-file kind {kind!r}")
    for lineno, offset, raw in iter_lines(path, shard):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            yield reject(path, f"invalid UTF-8: {exc}", raw, offset, lineno, "labels")
            continue
        if not line.strip():
            continue
        key, sep, text = line.partition("\t")
        text = text.strip()
        if not sep or not _IS_ID(key) or not text:
            yield reject(path, "expected 'ID<TAB>text' with a Wikidata id", raw, offset, lineno, "labels")
            continue
        item = key[0] == "Q"
        if kind == "label":
            if item:
                yield _entity_row(key, src, label=text)
                if en:
                    yield "labels", {"qid": key, "lang": "en", "label": text}
            else:
                yield _property_row(key, label=text)
        elif kind == "description":
            yield _entity_row(key, src, description=text) if item else _property_row(key, description=text)
        else:
            aliases = _split_aliases(text)
            if item:
                yield _entity_row(key, src, aliases=aliases)
                for a in aliases if en else ():
                    yield "aliases", {"qid": key, "alias": a, "lang": "en"}
            else:
                yield _property_row(key, aliases=aliases)


def read_codex_json(path: Path | str, source: str | None = None,
                    languages: tuple[str, ...] | None = None) -> Iterator[TableRow]:
    """Read a CoDEx ``{id: {label, description, wiki?}}`` JSON file (``relations.json``, ``types.json``).

    Args:
        path: The JSON file (loaded whole: small files).
        source: Value of the ``source`` column; defaults to the file name.
        languages: The ``labels`` rows (all ``en``) are kept when ``en`` is among these or when ``None``.

    Yields:
        ``entities`` rows (enwiki_title from the ``wiki`` URL) + ``labels`` rows for Q ids, ``properties``
        rows for P ids, ``rejects`` for malformed entries.

    Raises:
        DumpError: When the file cannot be read.
    """
    path = Path(path)
    yield from _read_label_json(path, source or path.name, languages is None or "en" in languages)


def _read_label_json(path: Path, src: str, en: bool = True) -> Iterator[TableRow]:
    data = read_whole(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        yield reject(path, f"malformed JSON: {exc}", data, 0, None, "labels")
        return
    if not isinstance(doc, dict):
        yield reject(path, "expected a JSON object {id: {label, description}}", data, 0, None, "labels")
        return
    for key, rec in doc.items():
        if not _IS_ID(key) or not isinstance(rec, dict):
            yield reject(path, f"bad entry {key[:30]!r}", orjson.dumps({key: rec})[:200], None, None,
                         "labels")
            continue
        label = rec.get("label") if isinstance(rec.get("label"), str) else None
        desc = rec.get("description") if isinstance(rec.get("description"), str) else None
        label, desc = label or None, desc or None
        if key[0] == "P":
            yield _property_row(key, label=label, description=desc)
            continue
        yield _entity_row(key, src, label=label, description=desc, enwiki_title=_wiki_title(rec.get("wiki")))
        if label and en:
            yield "labels", {"qid": key, "lang": "en", "label": label}


# --------------------------------------------------------------------------- N-Triples
_NT_LINE = re.compile(r"(<[^>]*>|_:\S+)\s+<([^>]*)>\s+(.+?)\s*\.\s*\Z", re.DOTALL)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"(?:@([A-Za-z0-9-]+)|\^\^<([^>]*)>)?\Z', re.DOTALL).match
_NT_ESC = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)
_NT_CHARS = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}

_WDT = "http://www.wikidata.org/prop/direct/"
_NOVALUE = "http://www.wikidata.org/prop/novalue/"
_GENID = "http://www.wikidata.org/.well-known/genid/"
_RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
_RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
_SCHEMA_DESC = "http://schema.org/description"
_SKOS_ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
_SCHEMA_ABOUT = "http://schema.org/about"
_ENWIKI = "https://en.wikipedia.org/wiki/"
_WB_SITELINKS = "http://wikiba.se/ontology#sitelinks"
_WB_PROPTYPE = "http://wikiba.se/ontology#propertyType"
_WB_TYPES = {"WikibaseItem": "wikibase-item", "WikibaseProperty": "wikibase-property", "String": "string",
             "ExternalId": "external-id", "Url": "url", "CommonsMedia": "commonsMedia", "Time": "time",
             "Quantity": "quantity", "Monolingualtext": "monolingualtext",
             "GlobeCoordinate": "globe-coordinate",
             "Math": "math", "GeoShape": "geo-shape", "TabularData": "tabular-data",
             "WikibaseLexeme": "wikibase-lexeme", "WikibaseForm": "wikibase-form",
             "WikibaseSense": "wikibase-sense", "MusicalNotation": "musical-notation",
             "EntitySchema": "entity-schema"}


def nt_unescape(text: str) -> str:
    r"""Undo N-Triples string escapes (``\"``, ``\\``, ``\n``, ``\uXXXX``, ``\UXXXXXXXX``, ...)."""
    if "\\" not in text:
        return text

    def sub(m: re.Match) -> str:
        hexa = m.group(1) or m.group(2)
        if hexa:
            return chr(int(hexa, 16))
        return _NT_CHARS.get(m.group(3), m.group(3))

    return _NT_ESC.sub(sub, text)


def _entity_id(iri: str) -> str | None:
    if iri.startswith(ENTITY_IRI):
        eid = iri[len(ENTITY_IRI):]
        if _IS_ID(eid):
            return eid
    return None


def read_ntriples(path: Path | str, shard: Shard = Shard(), source: str | None = None,
                  languages: tuple[str, ...] | None = None) -> Iterator[TableRow]:
    """Stream Wikidata truthy N-Triples into KB rows.

    Triples used (others, e.g. statement nodes, ``schema:name`` duplicates, other sitelinks, are skipped):
    ``wd:X wdt:P o`` -> ``claims`` (rank ``truthy``; entity objects -> object_qid, blank nodes / genids ->
    ``<somevalue>``, ``wd:X a wdno:P`` -> ``<novalue>``, literals -> object_value with the datatype inferred
    from the literal: ``xsd:decimal``... -> quantity, ``xsd:dateTime`` -> time (``YYYY-MM-DD`` at midnight),
    ``geo:wktLiteral`` -> ``"lat,lon"``, language string -> monolingualtext, other IRIs -> url);
    ``rdfs:label`` -> ``labels`` row (every language) and the English label; ``schema:description`` (en);
    ``skos:altLabel`` (en) -> ``aliases`` rows; ``<https://en.wikipedia.org/wiki/T> schema:about wd:X`` ->
    enwiki_title; ``wikibase:sitelinks`` -> sitelinks; ``wikibase:propertyType`` -> property datatype.
    Facts about consecutive triples of one entity are merged into one partial ``entities`` (Q) or
    ``properties`` (P) row.

    Args:
        path: N-Triples file (plain or compressed).
        shard: Slice to read.
        source: Value of the ``source`` column; defaults to the file name.
        languages: Keep only these languages' ``labels`` / ``aliases`` rows (an untagged label is ``en``);
            ``None`` = every language.

    Yields:
        ``(table, row)`` pairs; unparsable lines become ``rejects`` rows.

    Raises:
        DumpError: When the file is unreadable or truncated.
    """
    path = Path(path)
    src = source or path.name
    group = _Group(src)
    for lineno, offset, raw in iter_lines(path, shard):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            yield reject(path, f"invalid UTF-8: {exc}", raw, offset, lineno, "ntriples")
            continue
        if not line or line[0] == "#":
            continue
        m = _NT_LINE.match(line)
        if not m:
            yield reject(path, "not an N-Triples line", raw, offset, lineno, "ntriples")
            continue
        s_term, pred, o_term = m.groups()
        subj = _entity_id(s_term[1:-1]) if s_term[0] == "<" else None
        if pred == _SCHEMA_ABOUT:
            about = _entity_id(o_term[1:-1]) if o_term[0] == "<" else None
            if about is None or not s_term.startswith("<" + _ENWIKI):
                continue
            done = group.switch(about)
            if done is not None:
                yield done
            group.set("enwiki_title", unquote(s_term[len(_ENWIKI) + 1:-1]).replace("_", " "))
            continue
        if subj is None:
            continue
        lit = None
        if o_term[0] == '"':
            lm = _LITERAL(o_term)
            if not lm:
                yield reject(path, "malformed literal", raw, offset, lineno, "ntriples")
                continue
            lit = (nt_unescape(lm.group(1)), lm.group(2), lm.group(3))
        elif o_term[0] != "<" and not o_term.startswith("_:"):
            yield reject(path, "malformed object", raw, offset, lineno, "ntriples")
            continue
        if pred.startswith(_WDT):
            prop = pred[len(_WDT):]
            if not _IS_PID(prop):
                continue
            oq = ov = None
            if lit is not None:
                text, lang, dtype = lit
                if lang:
                    ov, dt = text, "monolingualtext"
                elif dtype:
                    ov, dt = _xsd_value(text, dtype)
                else:
                    ov, dt = text, "string"
            elif o_term[0] == "<":
                iri = o_term[1:-1]
                oq = _entity_id(iri)
                if oq is not None:
                    dt = "wikibase-item" if oq[0] == "Q" else "wikibase-property"
                elif iri.startswith(_GENID):
                    ov, dt = "<somevalue>", None
                else:
                    ov, dt = iri, "url"
            else:
                ov, dt = "<somevalue>", None
            yield "claims", {"subject": subj, "property": prop, "object_qid": oq, "object_value": ov,
                             "datatype": dt, "rank": "truthy", "source": src}
            if prop == "P31" and oq is not None and subj[0] == "Q":
                done = group.switch(subj)
                if done is not None:
                    yield done
                group.add("instance_of", oq)
            continue
        if pred == _RDF_TYPE:
            if o_term.startswith("<" + _NOVALUE):
                prop = o_term[len(_NOVALUE) + 1:-1]
                if _IS_PID(prop):
                    yield "claims", {"subject": subj, "property": prop, "object_qid": None,
                                     "object_value": "<novalue>", "datatype": None, "rank": "truthy",
                                     "source": src}
            continue
        if pred == _WB_PROPTYPE:
            if o_term[0] == "<":
                done = group.switch(subj)
                if done is not None:
                    yield done
                local = o_term[1:-1].rsplit("#", 1)[-1]
                group.set("datatype", _WB_TYPES.get(local, local))
            continue
        if pred == _WB_SITELINKS:
            if lit is not None and lit[0].lstrip("+").isdigit():
                done = group.switch(subj)
                if done is not None:
                    yield done
                group.set("sitelinks", int(lit[0]))
            continue
        if pred not in (_RDFS_LABEL, _SCHEMA_DESC, _SKOS_ALT) or lit is None:
            continue
        text, lang = lit[0], lit[1] or "en"
        done = group.switch(subj)
        if done is not None:
            yield done
        kept = subj[0] == "Q" and (languages is None or lang in languages)  # an item's row in a kept language
        if pred == _RDFS_LABEL:
            if kept:
                yield "labels", {"qid": subj, "lang": lang, "label": text}
            if lang == "en":
                group.set("label", text)
        elif lang != "en":
            continue
        elif pred == _SCHEMA_DESC:
            group.set("description", text)
        else:
            group.add("aliases", text)
            if kept:
                yield "aliases", {"qid": subj, "alias": text, "lang": "en"}
    done = group.flush()
    if done is not None:
        yield done


# --------------------------------------------------------------------------- title map
def read_title_map(path: Path | str, shard: Shard = Shard(), source: str | None = None) -> Iterator[TableRow]:
    """Read a ``QID;title;url`` map (Wikipedia vital articles, ``;``-separated CSV, no header).

    Args:
        path: The map file (plain or compressed); CSV double-quote quoting is honoured.
        shard: Slice to read.
        source: Value of the ``source`` column; defaults to the file name.

    Yields:
        Partial ``entities`` rows (qid, enwiki_title, source); malformed lines become ``rejects`` rows.

    Raises:
        DumpError: When the file is unreadable or truncated.
    """
    path = Path(path)
    src = source or path.name
    for lineno, offset, qid, title, raw in _title_lines(path, shard):
        if qid is None:
            yield reject(path, title, raw, offset, lineno, "title_map")
            continue
        yield _entity_row(qid, src, enwiki_title=title)


def _title_lines(path: Path, shard: Shard) -> Iterator[tuple]:
    for lineno, offset, raw in iter_lines(path, shard):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            yield lineno, offset, None, f"invalid UTF-8: {exc}", raw
            continue
        if not line.strip():
            continue
        try:
            fields = next(csv.reader([line], delimiter=";"))
        except csv.Error as exc:
            yield lineno, offset, None, f"bad CSV: {exc}", raw
            continue
        if len(fields) < 2 or not _IS_ID(fields[0]) or fields[0][0] != "Q" or not fields[1].strip():
            yield lineno, offset, None, "expected 'QID;title;url'", raw
            continue
        yield lineno, offset, fields[0], fields[1].strip(), raw


def load_title_map(path: Path | str) -> dict[str, str]:
    """Load a ``QID;title;url`` map as ``{title: qid}`` (for ``read_wikipedia_xml(title_to_qid=...)``).

    Args:
        path: The map file; malformed lines are ignored (``read_title_map`` reports them).

    Returns:
        Title -> QID (the first QID wins when a title repeats).
    """
    out: dict[str, str] = {}
    for _, _, qid, title, _ in _title_lines(Path(path), Shard()):
        if qid is not None:
            out.setdefault(title, qid)
    return out
