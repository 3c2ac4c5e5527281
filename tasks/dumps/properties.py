"""Reader of a Wikidata property list (``wikidata-properties/properties.json.gz``).

Input: one JSON array of ``{id, label, description, aliases, datatype, ...}`` objects (plain or compressed;
the file lists every Wikidata property, ~12k entries, so it is loaded whole: use ``read_wikidata_json`` for
property entities inside a full dump). An empty ``{}``/``[]`` label or description (95 entries of the real
file have ``"description": {}``) means "none".

Output: ``properties`` rows (pid, label, description, aliases, datatype) and ``rejects`` rows for entries that
are not objects, lack a ``P<digits>`` id or carry values of the wrong type.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from tasks.dumps.base import DumpError, TableRow, read_whole, reject

STAGE = "properties_json"


def _opt_str(value: object) -> str | None:
    if value is None or value == "" or value == {} or value == []:
        return None
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def read_properties_json(path: Path | str, source: str | None = None) -> Iterator[TableRow]:
    """Read a JSON list of Wikidata properties into ``properties`` rows.

    Args:
        path: The JSON file (plain, ``.gz``, ``.bz2``, ``.xz``).
        source: Accepted for a uniform reader interface; unused (``properties`` has no source column).

    Yields:
        ``("properties", row)`` per valid entry and ``("rejects", row)`` per bad one (offset: None, line: the
        1-based position of the entry in the array).

    Raises:
        DumpError: When the file cannot be read, decompressed or decoded as JSON, or is not a JSON array.
    """
    path = Path(path)
    data = read_whole(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DumpError(f"{path}: malformed JSON at byte offset {exc.pos}: {exc.msg}") from exc
    if not isinstance(doc, list):
        raise DumpError(f"{path}: expected a JSON array of properties, got {type(doc).__name__}")
    for i, rec in enumerate(doc, start=1):
        try:
            if not isinstance(rec, dict):
                raise TypeError(f"entry is {type(rec).__name__}, expected an object")
            pid = rec.get("id")
            if not isinstance(pid, str) or pid[:1] != "P" or not pid[1:].isdigit():
                raise ValueError(f"missing or invalid property id {pid!r}")
            aliases = rec.get("aliases") or []
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise TypeError("aliases is not a list of strings")
            row = {"pid": pid, "label": _opt_str(rec.get("label")),
                   "description": _opt_str(rec.get("description")), "aliases": aliases,
                   "datatype": _opt_str(rec.get("datatype"))}
        except (TypeError, ValueError) as exc:
            yield reject(path, str(exc), orjson.dumps(rec)[:200], None, i, STAGE)
            continue
        yield "properties", row
