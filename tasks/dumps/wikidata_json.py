"""Streaming reader of Wikidata entity JSON (dump lines, line-delimited entities, EntityData files).

Inputs:
    * The Wikidata JSON dump (``latest-all.json[.gz|.bz2]``): first line ``[``, one entity object per line
      ending with ``,``, last line ``]``. Plain files are sharded by byte range, compressed ones by line range
      (``tasks.dumps.base.Shard``).
    * Line-delimited entity objects (one ``Special:EntityData``/``wbgetentities`` entity per line, no
      brackets or commas), e.g. opentapioca's ``short_stream.json.bz2``: the same reader handles both layouts.
    * Single whole-file JSON documents (``Special:EntityData/Q42.json``, a ``wbgetentities`` response with an
      ``{"entities": {...}}`` envelope): ``read_entity_file`` (small files, loaded whole).

Outputs (``(table, row)`` pairs, rows with exactly the columns of ``storage.schemas``):
    * ``entities``: qid, English label (fallback ``mul``, then the first label), English description (fallback
      ``mul``), English aliases (then ``mul`` aliases not already present), enwiki_title, sitelinks (count),
      instance_of (P31 item ids of non-deprecated statements), source.
    * ``aliases``: one row per alias in ``entities.aliases`` (lang ``en`` or ``mul``).
    * ``labels``: one row per label in every language (``en`` included), or in the kept ``languages``.
    * ``claims``: one row per statement's main snak (qualifiers and references are not read): object_qid for
      item/property values, object_value as text for literals (see ``snak_value``), datatype, rank, source.
    * ``properties``: one row per property entity (pid, English label, description, aliases, datatype);
      property entities also yield their ``claims`` (subject = PID) but no ``labels``/``aliases`` rows.
    * ``rejects``: malformed JSON, missing/invalid id, wrong value types, unsupported entity types
      (lexemes, media-info, ...) with the file, byte offset, line number, reason and the first 200 bytes. A
      rejected line yields nothing else (entities are all-or-nothing).

``languages`` (the build's ``--languages``) keeps only the ``labels`` / ``aliases`` rows of those languages; the
``entities`` / ``properties`` rows and the claims do not depend on it (the entity's label still falls back to the
first label of any language when it has no ``en`` or ``mul`` one). The labels of other languages are skipped at
parse time like the descriptions and aliases of other languages: not decoded, so not validated either (a malformed
label in a language that is not kept does not reject its entity).

A truncated or corrupt compressed stream raises ``DumpError`` (from ``tasks.dumps.base.iter_lines``).

Speed: lines are decoded with msgspec against typed, partial schemas (qualifiers, references and the values of
descriptions/aliases in other languages are skipped without building Python objects), which is about twice as
fast as a full ``orjson.loads``. Any line the typed schema does not accept (a bad line, an unknown datavalue
type, an empty map serialized as ``[]``) is decoded again with orjson and converted by ``entity_rows``, the
reference semantics that also produce the reject reasons; both paths give identical rows (tested on every real
entity). Without msgspec installed the reader uses the orjson path only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from tasks.dumps.base import RowBlock, Shard, TableRow, iter_lines, read_whole, reject

try:  # optional fast path (msgspec is in the pinned lock; the orjson path is the reference)
    import msgspec
except ImportError:  # pragma: no cover - exercised only where msgspec is absent
    msgspec = None

STAGE = "wikidata_json"

_ENTITY_PREFIX = {"item": "Q", "property": "P", "lexeme": "L"}


class BadEntity(ValueError):
    """An entity object whose values do not have the documented Wikidata JSON shape."""


def normalize_time(value: str, precision: int | None) -> str:
    """Turn a Wikibase time string into ISO text at its precision.

    ``+1952-03-11T00:00:00Z`` becomes ``1952-03-11`` (precision >= 11, day), ``1952-03`` (10, month) or
    ``1952`` (<= 9: year, decade, century, ...; the year digits are kept as given). Negative (BCE) years keep
    their ``-`` sign; a leading ``+`` is dropped.

    Args:
        value: Wikibase/KGTK time string, e.g. ``"+1952-03-11T00:00:00Z"``.
        precision: Wikibase precision (11 = day, 10 = month, 9 = year); ``None`` is treated as day.

    Returns:
        The normalized date text.

    Raises:
        BadEntity: When ``value`` is not a string of the form ``[+-]Y-M-D...``.
    """
    if not isinstance(value, str) or not value:
        raise BadEntity(f"time value is not a string: {value!r}")
    sign = "-" if value[0] == "-" else ""
    body = value[1:] if value[0] in "+-" else value
    date = body.split("T", 1)[0]
    parts = date.rsplit("-", 2)
    if len(parts) != 3:
        raise BadEntity(f"bad time value {value!r}")
    year, month, day = parts
    if precision is None or precision >= 11:
        return f"{sign}{year}-{month}-{day}"
    if precision == 10:
        return f"{sign}{year}-{month}"
    return f"{sign}{year}"


def snak_value(snak: dict) -> tuple[str | None, str | None]:
    """Convert one Wikibase snak to ``(object_qid, object_value)``.

    Rules: ``wikibase-entityid`` values give ``object_qid`` for Q/P ids (other entity ids, e.g. lexemes, go to
    ``object_value``); ``time`` -> ``normalize_time``; ``quantity`` -> the amount without a leading ``+``;
    ``monolingualtext`` -> the text; ``string`` (string, external-id, url, commonsMedia, ...) -> the string;
    ``globecoordinate`` -> ``"lat,lon"``; unknown value types -> compact JSON of the value; ``somevalue`` /
    ``novalue`` snaks -> ``"<somevalue>"`` / ``"<novalue>"``.

    Args:
        snak: A ``mainsnak`` dict.

    Returns:
        ``(object_qid, object_value)``, exactly one of them non-null.

    Raises:
        BadEntity: When the snak or its datavalue has the wrong shape.
    """
    snaktype = snak["snaktype"]
    if snaktype != "value":
        if snaktype == "somevalue":
            return None, "<somevalue>"
        if snaktype == "novalue":
            return None, "<novalue>"
        raise BadEntity(f"unknown snaktype {snaktype!r}")
    dv = snak["datavalue"]
    vtype = dv["type"]
    v = dv["value"]
    if vtype == "wikibase-entityid":
        eid = v.get("id")
        if eid is None:
            eid = _ENTITY_PREFIX[v["entity-type"]] + str(int(v["numeric-id"]))
        elif not isinstance(eid, str):
            raise BadEntity(f"entity id value is not a string: {eid!r}")
        if eid[:1] in ("Q", "P"):
            return eid, None
        return None, eid
    if vtype == "string":
        if not isinstance(v, str):
            raise BadEntity(f"string datavalue is {type(v).__name__}")
        return None, v
    if vtype == "time":
        return None, normalize_time(v["time"], v.get("precision"))
    if vtype == "quantity":
        amount = v["amount"]
        if not isinstance(amount, str):
            amount = str(amount)
        return None, amount[1:] if amount[:1] == "+" else amount
    if vtype == "monolingualtext":
        text = v["text"]
        if not isinstance(text, str):
            raise BadEntity(f"monolingualtext text is {type(text).__name__}")
        return None, text
    if vtype == "globecoordinate":
        lat = v["latitude"]
        lon = v["longitude"]
        if not isinstance(lat, int | float) or not isinstance(lon, int | float):
            raise BadEntity("globecoordinate latitude/longitude are not numbers")
        return None, f"{lat},{lon}"
    return None, orjson.dumps(v).decode()


def _texts(block: object, what: str) -> dict:
    if block is None:
        return {}
    if isinstance(block, list) and not block:
        return {}  # PHP serializes an empty map as []
    if not isinstance(block, dict):
        raise BadEntity(f"{what} is {type(block).__name__}, expected an object")
    return block


def _value(entry: object, what: str) -> str:
    if isinstance(entry, dict):
        v = entry.get("value")
        if isinstance(v, str):
            return v
    raise BadEntity(f"{what} entry has no string value")


def entity_rows(obj: object, source: str, languages: tuple[str, ...] | None = None) -> list[TableRow]:
    """Convert one parsed entity object to its output rows (all-or-nothing).

    Args:
        obj: The decoded JSON object of one entity (dump line or EntityData document).
        source: Value of the ``source`` column.
        languages: Languages whose ``labels`` / ``aliases`` rows are kept (labels in this order); ``None`` = all.

    Returns:
        The ``entities``/``properties``, ``aliases``, ``labels`` and ``claims`` rows of the entity.

    Raises:
        BadEntity: With a human-readable reason when the object is not a supported, well-formed entity
            (the caller turns it into a ``rejects`` row).
    """
    if not isinstance(obj, dict):
        raise BadEntity(f"not a JSON object ({type(obj).__name__})")
    eid = obj.get("id")
    if eid is None:
        raise BadEntity("missing id")
    if not isinstance(eid, str) or len(eid) < 2:
        raise BadEntity(f"invalid id {eid!r}")
    if "missing" in obj:
        raise BadEntity("missing entity (wbgetentities 'missing')")
    etype = obj.get("type")
    if etype is None:
        etype = {"Q": "item", "P": "property"}.get(eid[0])
    if etype not in ("item", "property"):
        raise BadEntity(f"unsupported entity type {etype!r}")
    if not eid[1:].isdigit() or eid[0] != ("Q" if etype == "item" else "P"):
        raise BadEntity(f"invalid id {eid!r} for type {etype}")

    labels = _texts(obj.get("labels"), "labels")
    descriptions = _texts(obj.get("descriptions"), "descriptions")
    aliases_block = _texts(obj.get("aliases"), "aliases")
    claims_block = _texts(obj.get("claims"), "claims")

    try:
        # label: en, then mul, then the first available language
        lab = labels.get("en") or labels.get("mul")
        if lab is None and labels:
            lab = next(iter(labels.values()))
        label = _value(lab, "labels") if lab is not None else None
        desc = descriptions.get("en") or descriptions.get("mul")
        description = _value(desc, "descriptions") if desc is not None else None
        aliases: list[str] = []
        alias_langs: list[str] = []
        for lang in ("en", "mul"):
            entries = aliases_block.get(lang)
            if not entries:
                continue
            if not isinstance(entries, list):
                raise BadEntity(f"aliases.{lang} is {type(entries).__name__}, expected a list")
            for entry in entries:
                a = _value(entry, "aliases")
                if a not in aliases:
                    aliases.append(a)
                    alias_langs.append(lang)

        rows: list[TableRow] = []
        instance_of: list[str] = []
        for pid, statements in claims_block.items():
            if not isinstance(statements, list):
                raise BadEntity(f"claims.{pid} is {type(statements).__name__}, expected a list")
            is_p31 = pid == "P31"
            for st in statements:
                snak = st["mainsnak"]
                rank = st.get("rank", "normal")
                oq, ov = snak_value(snak)
                rows.append(("claims", {"subject": eid, "property": pid, "object_qid": oq, "object_value": ov,
                                        "datatype": snak.get("datatype"), "rank": rank, "source": source}))
                if is_p31 and oq is not None and rank != "deprecated":
                    instance_of.append(oq)
    except BadEntity:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        raise BadEntity(f"wrong value shape: {type(exc).__name__}: {exc}") from None

    if etype == "property":
        dt = obj.get("datatype")
        rows.append(("properties", {"pid": eid, "label": label, "description": description,
                                    "aliases": aliases, "datatype": dt if isinstance(dt, str) else None}))
        return rows

    sitelinks = _texts(obj.get("sitelinks"), "sitelinks")
    enwiki = sitelinks.get("enwiki")
    enwiki_title = None
    if enwiki is not None:
        enwiki_title = enwiki.get("title") if isinstance(enwiki, dict) else None
        if not isinstance(enwiki_title, str):
            raise BadEntity("sitelinks.enwiki has no string title")
    rows.append(("entities", {"qid": eid, "label": label, "description": description, "aliases": aliases,
                              "enwiki_title": enwiki_title, "sitelinks": len(sitelinks),
                              "instance_of": instance_of, "source": source}))
    for a, lang in zip(aliases, alias_langs, strict=True):
        if languages is None or lang in languages:
            rows.append(("aliases", {"qid": eid, "alias": a, "lang": lang}))
    kept = labels.items() if languages is None else [(g, labels[g]) for g in languages if g in labels]
    for lang, entry in kept:
        rows.append(("labels", {"qid": eid, "lang": lang, "label": _value(entry, "labels")}))
    return rows


class _Fallback(Exception):
    """The typed fast path cannot decide this line; decode it again with the reference (orjson) path."""


if msgspec is not None:

    class _Text(msgspec.Struct, gc=False):
        value: str

    class _EntityIdValue(msgspec.Struct, gc=False):
        id: str | None = None
        entity_type: str | None = msgspec.field(name="entity-type", default=None)
        numeric_id: int | None = msgspec.field(name="numeric-id", default=None)

    class _TimeValue(msgspec.Struct, gc=False):
        time: str
        precision: int | None = None

    class _QuantityValue(msgspec.Struct, gc=False):
        amount: str

    class _MonoValue(msgspec.Struct, gc=False):
        text: str

    class _GlobeValue(msgspec.Struct, gc=False):
        latitude: int | float
        longitude: int | float

    class _DVEntity(msgspec.Struct, tag_field="type", tag="wikibase-entityid", gc=False):
        value: _EntityIdValue

    class _DVString(msgspec.Struct, tag_field="type", tag="string", gc=False):
        value: str

    class _DVTime(msgspec.Struct, tag_field="type", tag="time", gc=False):
        value: _TimeValue

    class _DVQuantity(msgspec.Struct, tag_field="type", tag="quantity", gc=False):
        value: _QuantityValue

    class _DVMono(msgspec.Struct, tag_field="type", tag="monolingualtext", gc=False):
        value: _MonoValue

    class _DVGlobe(msgspec.Struct, tag_field="type", tag="globecoordinate", gc=False):
        value: _GlobeValue

    class _Snak(msgspec.Struct, gc=False):
        snaktype: str
        datatype: str | None = None
        datavalue: _DVEntity | _DVString | _DVTime | _DVQuantity | _DVMono | _DVGlobe | None = None

    class _Statement(msgspec.Struct, gc=False):
        mainsnak: _Snak
        rank: str = "normal"

    class _Sitelink(msgspec.Struct, gc=False):
        title: str

    class _Entity(msgspec.Struct, gc=False):
        id: str
        type: str | None = None
        datatype: str | None = None
        missing: str | None = None
        labels: dict[str, _Text] = {}
        descriptions: dict[str, msgspec.Raw] = {}
        aliases: dict[str, msgspec.Raw] = {}
        claims: dict[str, list[_Statement]] = {}
        sitelinks: dict[str, _Sitelink] = {}

    class _EntitySomeLabels(msgspec.Struct, gc=False):
        """``_Entity`` whose labels stay raw JSON: a build that keeps a few languages decodes only those."""

        id: str
        type: str | None = None
        datatype: str | None = None
        missing: str | None = None
        labels: dict[str, msgspec.Raw] = {}
        descriptions: dict[str, msgspec.Raw] = {}
        aliases: dict[str, msgspec.Raw] = {}
        claims: dict[str, list[_Statement]] = {}
        sitelinks: dict[str, _Sitelink] = {}

    _decode_entity = msgspec.json.Decoder(_Entity).decode
    _decode_entity_some_labels = msgspec.json.Decoder(_EntitySomeLabels).decode
    _decode_text = msgspec.json.Decoder(_Text).decode
    _decode_texts = msgspec.json.Decoder(list[_Text]).decode
    _MSGSPEC_ERRORS: tuple[type[Exception], ...] = (msgspec.ValidationError, msgspec.DecodeError)
else:  # pragma: no cover
    _MSGSPEC_ERRORS = ()


def _fast_rows(line: bytes, source: str, blocks: bool = False,
               languages: tuple[str, ...] | None = None) -> list[TableRow]:
    """Typed decode of one well-formed entity line; raises ``_Fallback`` (or a msgspec error) otherwise.

    With ``blocks`` the labels (every language: most rows of an item) come as one ``RowBlock`` per entity. With
    ``languages`` only those labels (and the fallback label of the ``entities`` row) are decoded.
    """
    if languages is None:
        e = _decode_entity(line)
        labels = e.labels
        lab = labels.get("en") or labels.get("mul")
        if lab is None and labels:
            lab = next(iter(labels.values()))
        label = lab.value if lab is not None else None
    else:
        e = _decode_entity_some_labels(line)
        raw = e.labels
        labels = {g: _decode_text(raw[g]) for g in languages if g in raw}
        # the entities row's label as without a filter: en, then mul, then the first language
        fb = "en" if "en" in raw else "mul" if "mul" in raw else next(iter(raw), None)
        lab = None if fb is None else labels[fb] if fb in labels else _decode_text(raw[fb])
        label = lab.value if lab is not None else None
    eid = e.id
    etype = e.type
    if e.missing is not None or etype not in ("item", "property") or len(eid) < 2 or not eid[1:].isdigit():
        raise _Fallback
    if eid[0] != ("Q" if etype == "item" else "P"):
        raise _Fallback
    descs = e.descriptions
    desc = descs.get("en") or descs.get("mul")
    description = _decode_text(desc).value if desc is not None else None
    aliases: list[str] = []
    alias_langs: list[str] = []
    ab = e.aliases
    for lang in ("en", "mul"):
        raw = ab.get(lang)
        if raw is None:
            continue
        for t in _decode_texts(raw):
            a = t.value
            if a not in aliases:
                aliases.append(a)
                alias_langs.append(lang)

    rows: list[TableRow] = []
    append = rows.append
    instance_of: list[str] = []
    for pid, statements in e.claims.items():
        is_p31 = pid == "P31"
        for st in statements:
            snak = st.mainsnak
            rank = st.rank
            snaktype = snak.snaktype
            oq = ov = None
            if snaktype == "value":
                dv = snak.datavalue
                if dv is None:
                    raise _Fallback
                v = dv.value
                cls = type(dv)
                if cls is _DVEntity:
                    oq = v.id
                    if oq is None or oq[:1] not in ("Q", "P"):
                        raise _Fallback
                elif cls is _DVString:
                    ov = v
                elif cls is _DVTime:
                    ov = normalize_time(v.time, v.precision)
                elif cls is _DVQuantity:
                    ov = v.amount
                    if ov[:1] == "+":
                        ov = ov[1:]
                elif cls is _DVMono:
                    ov = v.text
                else:
                    ov = f"{v.latitude},{v.longitude}"
            elif snaktype == "somevalue":
                ov = "<somevalue>"
            elif snaktype == "novalue":
                ov = "<novalue>"
            else:
                raise _Fallback
            append(("claims", {"subject": eid, "property": pid, "object_qid": oq, "object_value": ov,
                               "datatype": snak.datatype, "rank": rank, "source": source}))
            if is_p31 and oq is not None and rank != "deprecated":
                instance_of.append(oq)

    if etype == "property":
        append(("properties", {"pid": eid, "label": label, "description": description, "aliases": aliases,
                               "datatype": e.datatype}))
        return rows
    sitelinks = e.sitelinks
    enwiki = sitelinks.get("enwiki")
    append(("entities", {"qid": eid, "label": label, "description": description, "aliases": aliases,
                         "enwiki_title": enwiki.title if enwiki is not None else None,
                         "sitelinks": len(sitelinks), "instance_of": instance_of, "source": source}))
    for a, lang in zip(aliases, alias_langs, strict=True):
        if languages is None or lang in languages:
            append(("aliases", {"qid": eid, "alias": a, "lang": lang}))
    if blocks:
        if labels:
            append(("labels", RowBlock({"qid": [eid] * len(labels), "lang": list(labels),
                                        "label": [t.value for t in labels.values()]})))
    else:
        for lang, t in labels.items():
            append(("labels", {"qid": eid, "lang": lang, "label": t.value}))
    return rows


def line_rows(line: bytes, source: str, fast: bool = True, blocks: bool = False,
              languages: tuple[str, ...] | None = None) -> list[TableRow]:
    """Convert one entity JSON text (no trailing comma) to its rows.

    Args:
        line: The JSON text of one entity.
        source: Value of the ``source`` column.
        fast: Try the typed msgspec decoder first (falls back to orjson + ``entity_rows`` on anything
            unusual).
        blocks: Let the fast path return the labels as one ``RowBlock`` (same rows, fewer objects).
        languages: Languages whose ``labels`` / ``aliases`` rows are kept (sorted codes); ``None`` = all.

    Returns:
        The entity's rows.

    Raises:
        BadEntity: With the reject reason (malformed JSON, missing id, wrong value shape, unsupported type).
    """
    if fast and msgspec is not None:
        try:
            return _fast_rows(line, source, blocks, languages)
        except (_Fallback, BadEntity, UnicodeDecodeError, *_MSGSPEC_ERRORS):
            pass  # msgspec raises a bare UnicodeDecodeError for bad UTF-8 inside a string: orjson's path rejects it
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise BadEntity(f"malformed JSON: {exc}") from None
    return entity_rows(obj, source, languages)


def read_wikidata_json(path: Path | str, shard: Shard = Shard(), source: str | None = None,
                       fast: bool = True, blocks: bool = False,
                       languages: tuple[str, ...] | None = None) -> Iterator[TableRow]:
    """Stream one Wikidata JSON dump (or line-delimited entity file) into KB rows.

    Lines ``[`` and ``]`` and blank lines are skipped; a trailing ``,`` is removed before decoding each
    line. Memory use is bounded by the largest single line.

    Args:
        path: Dump file (plain, ``.gz``, ``.bz2``, ``.xz``).
        shard: Byte range (plain files) or line range (compressed files, ``by_lines=True``) to read.
        source: Value of the ``source`` column; defaults to the file name.
        fast: Use the typed msgspec fast path (``False`` forces the orjson reference path; same rows).
        blocks: Yield each entity's labels as one ``RowBlock`` where the fast path applies (the KB build's
            stage step writes them in bulk; the rows are the same).
        languages: Keep only these languages' ``labels`` / ``aliases`` rows (``tasks.kb.plan.parse_languages``
            codes); ``None`` = every language.

    Yields:
        ``(table, row)`` pairs: ``entities``, ``aliases``, ``labels``, ``claims``, ``properties`` and
        ``rejects`` (one per bad line, with byte offset in the decompressed stream and line number).

    Raises:
        DumpError: When the (compressed) file cannot be read to the end; names the file and offset.
    """
    path = Path(path)
    src = source or path.name
    for lineno, offset, raw in iter_lines(path, shard):
        line = raw.strip()
        if not line or line == b"[" or line == b"]":
            continue
        if line[-1:] == b",":
            line = line[:-1]
        try:
            rows = line_rows(line, src, fast, blocks, languages)
        except BadEntity as exc:
            yield reject(path, str(exc), raw, offset, lineno, STAGE)
            continue
        yield from rows


def read_entity_file(path: Path | str, source: str | None = None,
                     languages: tuple[str, ...] | None = None) -> Iterator[TableRow]:
    """Read one whole-file entity JSON document (``Special:EntityData`` or a ``wbgetentities`` response).

    The file (plain or compressed) is loaded whole: these documents hold one or a few entities. Accepted
    shapes: a single entity object (with ``id``), ``{"entities": {id: entity, ...}}``, or a JSON list of
    entities.

    Args:
        path: The JSON file.
        source: Value of the ``source`` column; defaults to the file name.
        languages: Keep only these languages' ``labels`` / ``aliases`` rows; ``None`` = every language.

    Yields:
        The same rows as ``read_wikidata_json``; a document that is not an entity (e.g. a search response), or
        an entity of the wrong shape, yields a ``rejects`` row instead (offset 0 for the whole document).

    Raises:
        DumpError: When the file cannot be read or decompressed.
    """
    path = Path(path)
    src = source or path.name
    data = read_whole(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        yield reject(path, f"malformed JSON: {exc}", data, 0, None, STAGE)
        return
    if isinstance(doc, dict) and "id" not in doc and isinstance(doc.get("entities"), dict):
        objs = list(doc["entities"].values())
    elif isinstance(doc, list):
        objs = doc
    elif isinstance(doc, dict) and "id" in doc:
        objs = [doc]
    else:
        yield reject(path, "not an entity document (no id, no entities envelope)", data, 0, None, STAGE)
        return
    for obj in objs:
        try:
            rows = entity_rows(obj, src, languages)
        except BadEntity as exc:
            yield reject(path, str(exc), orjson.dumps(obj)[:200], 0, None, STAGE)
            continue
        yield from rows
