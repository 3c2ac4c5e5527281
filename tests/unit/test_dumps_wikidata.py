"""Wikidata JSON readers on the real dump samples, checked against an independent json+gzip/bz2 parse."""

from __future__ import annotations

import bz2
import collections
import gzip
import json
from pathlib import Path

import pytest

from storage.parquet_io import conform
from tasks.dumps.base import DumpError, Shard, byte_shards
from tasks.dumps.properties import read_properties_json
from tasks.dumps.wikidata_json import normalize_time, read_entity_file, read_wikidata_json

DUMP_FILES = [
    "wikidata-entities/wikibase-dump-filter/entities.gz",
    "wikidata-entities/opentapioca/sample_wikidata_items.json.bz2",
    "wikidata-entities/opentapioca/short_stream.json.bz2",
]


def _open(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    if path.name.endswith(".bz2"):
        return bz2.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _independent(path: Path) -> list[dict]:
    """Plain json module parse of a dump / line-delimited file: one dict per entity line."""
    out = []
    with _open(path) as fh:
        for line in fh:
            line = line.strip()
            if line in ("[", "]", ""):
                continue
            out.append(json.loads(line.rstrip(",")))
    return out


def _by_table(rows):
    tables = collections.defaultdict(list)
    for table, row in rows:
        tables[table].append(row)
    return tables


@pytest.fixture(scope="module")
def parsed(data_root: Path) -> dict[str, dict[str, list[dict]]]:
    return {f: _by_table(read_wikidata_json(data_root / f)) for f in DUMP_FILES}


@pytest.mark.parametrize("name", DUMP_FILES)
def test_counts_match_independent_parse(data_root: Path, parsed, name: str) -> None:
    ents = _independent(data_root / name)
    t = parsed[name]
    assert not t["rejects"]
    assert [e["qid"] for e in t["entities"]] == [e["id"] for e in ents]
    assert len(t["claims"]) == sum(len(sts) for e in ents for sts in e["claims"].values())
    assert len(t["labels"]) == sum(len(e["labels"]) for e in ents)
    n_aliases = 0
    for e in ents:
        seen = []
        for lang in ("en", "mul"):
            for a in e.get("aliases", {}).get(lang, []):
                if a["value"] not in seen:
                    seen.append(a["value"])
        n_aliases += len(seen)
    assert len(t["aliases"]) == n_aliases
    for row, e in zip(t["entities"], ents, strict=True):
        assert row["sitelinks"] == len(e.get("sitelinks", {}))
        assert row["enwiki_title"] == e.get("sitelinks", {}).get("enwiki", {}).get("title")
        en = e["labels"].get("en") or e["labels"].get("mul")
        if en:
            assert row["label"] == en["value"]
        assert row["description"] == (e["descriptions"].get("en") or {}).get("value", row["description"])
        p31 = [st["mainsnak"]["datavalue"]["value"]["id"] for st in e["claims"].get("P31", [])
               if st["mainsnak"]["snaktype"] == "value" and st["rank"] != "deprecated"]
        assert row["instance_of"] == p31
    # every row conforms to its declared schema
    for table, rows in t.items():
        assert conform(rows, table).num_rows == len(rows)


def test_real_counts(parsed) -> None:
    counts = {f: {k: len(v) for k, v in t.items()} for f, t in parsed.items()}
    assert counts[DUMP_FILES[0]]["entities"] == 49
    assert counts[DUMP_FILES[1]]["entities"] == 100
    assert counts[DUMP_FILES[2]]["entities"] == 635


@pytest.mark.parametrize("name", DUMP_FILES)
def test_fast_path_equals_reference_path(data_root: Path, name: str) -> None:
    fast = list(read_wikidata_json(data_root / name))
    ref = list(read_wikidata_json(data_root / name, fast=False))
    assert fast == ref


@pytest.mark.parametrize("name", DUMP_FILES)
def test_label_blocks_are_the_same_rows(data_root: Path, name: str, tmp_path: Path) -> None:
    """``blocks=True`` (the KB build's bulk labels) expands to exactly the row stream of ``blocks=False``, and
    ``PartWriter.add_columns`` writes the same Parquet rows as ``add``."""
    from storage.parquet_io import PartWriter, read_table
    from tasks.dumps.base import RowBlock

    plain = list(read_wikidata_json(data_root / name))
    mixed = list(read_wikidata_json(data_root / name, blocks=True))
    assert any(type(r) is RowBlock for _, r in mixed)
    expanded = [(t, row) for t, r in mixed for row in (r.rows() if type(r) is RowBlock else [r])]
    assert expanded == plain
    with PartWriter("labels", tmp_path / "a.parquet", batch_rows=100) as a, \
            PartWriter("labels", tmp_path / "b.parquet", batch_rows=100) as b:
        for t, r in mixed:
            if t == "labels":
                b.add_columns(r.columns) if type(r) is RowBlock else b.add(r)
        a.extend(r for t, r in plain if t == "labels")
    assert read_table(tmp_path / "a.parquet").equals(read_table(tmp_path / "b.parquet"))


def test_add_columns_refuses_ragged_or_wrong_columns(tmp_path: Path) -> None:
    from storage.parquet_io import PartWriter, SchemaMismatch

    w = PartWriter("labels", tmp_path / "x.parquet")
    with pytest.raises(SchemaMismatch, match="different lengths"):
        w.add_columns({"qid": ["Q1", "Q1"], "lang": ["en"], "label": ["a", "b"]})
    with pytest.raises(SchemaMismatch, match="missing columns"):
        w.add_columns({"qid": ["Q1"], "label": ["a"]})
    assert w.rows == 0 and not w._buf
    w.abort()


def test_snak_values_and_somevalue(data_root: Path, parsed) -> None:
    claims = [c for t in parsed.values() for c in t["claims"]]
    indep = collections.Counter()
    for f in DUMP_FILES:
        for e in _independent(data_root / f):
            for sts in e["claims"].values():
                for st in sts:
                    indep[st["mainsnak"]["snaktype"]] += 1
    got = collections.Counter(c["object_value"] for c in claims
                              if c["object_value"] in ("<somevalue>", "<novalue>"))
    assert got["<somevalue>"] == indep["somevalue"] > 0
    assert got["<novalue>"] == indep["novalue"] > 0
    for c in claims:
        assert (c["object_qid"] is None) != (c["object_value"] is None)
        if c["datatype"] == "wikibase-item" and c["object_qid"]:
            assert c["object_qid"][0] == "Q"
        if c["datatype"] == "quantity" and c["object_value"][0] != "<":
            assert not c["object_value"].startswith("+")
            float(c["object_value"])
        if c["datatype"] == "globe-coordinate" and c["object_value"][0] != "<":
            lat, lon = map(float, c["object_value"].split(","))
            assert -90 <= lat <= 90 and -360 <= lon <= 360


def test_entity_data_files(data_root: Path) -> None:
    q42 = _by_table(read_entity_file(data_root / "wikidata-entities/qwikidata/wd_Q42.json"))
    (ent,) = q42["entities"]
    assert ent["qid"] == "Q42" and ent["label"] == "Douglas Adams" and ent["enwiki_title"] == "Douglas Adams"
    assert ent["instance_of"] == ["Q5"]
    by_prop = {(c["property"]): c for c in q42["claims"]}
    assert by_prop["P569"]["object_value"] == "1952-03-11" and by_prop["P569"]["datatype"] == "time"
    assert by_prop["P31"]["object_qid"] == "Q5"
    raw = json.loads((data_root / "wikidata-entities/qwikidata/wd_Q42.json").read_text())
    assert len(q42["claims"]) == sum(len(v) for v in raw["claims"].values())
    assert len(q42["labels"]) == len(raw["labels"])
    assert {r["lang"] for r in q42["labels"]} >= {"en", "de", "fr"}

    p = _by_table(read_entity_file(data_root / "wikidata-entities/wikibase-sdk/P8098.json"))
    assert [r["pid"] for r in p["properties"]] == ["P8098"]
    assert p["properties"][0]["datatype"] == "external-id" and "entities" not in p
    assert all(c["subject"] == "P8098" for c in p["claims"])

    envelope = data_root / "wikidata-entities/opentapioca/wbgetentities_response.json.gz"
    env = _by_table(read_entity_file(envelope))
    raw = json.loads(gzip.open(envelope).read())
    present = [k for k, v in raw["entities"].items() if "missing" not in v]
    assert [e["qid"] for e in env["entities"]] == present
    assert len(env["rejects"]) == len(raw["entities"]) - len(present)

    q22 = _by_table(read_entity_file(data_root / "wikidata-entities/wikibase-dump-filter/Q22.json"))
    assert q22["entities"][0]["qid"] == "Q22"

    search = _by_table(read_entity_file(data_root / "wikidata-entities/wikibase-sdk/"
                                        "cirrus_search_response.json"))
    assert list(search) == ["rejects"]


def test_normalize_time() -> None:
    assert normalize_time("+1952-03-11T00:00:00Z", 11) == "1952-03-11"
    assert normalize_time("+1952-03-00T00:00:00Z", 10) == "1952-03"
    assert normalize_time("+1952-00-00T00:00:00Z", 9) == "1952"
    assert normalize_time("-0500-00-00T00:00:00Z", 9) == "-0500"
    assert normalize_time("+13798000000-00-00T00:00:00Z", 3) == "13798000000"


def _real_lines(data_root: Path, n: int = 4) -> list[bytes]:
    with gzip.open(data_root / DUMP_FILES[0]) as fh:
        lines = [line for line in fh if len(line) > 3]
    return lines[:n]


def test_rejects_on_corrupted_lines(data_root: Path, tmp_path: Path) -> None:
    good1, good2, base3, base4 = _real_lines(data_root)
    missing_id = json.loads(base3.rstrip(b",\n"))
    del missing_id["id"]
    labels_list = json.loads(base4.rstrip(b",\n"))
    labels_list["labels"] = list(labels_list["labels"].values())
    claims_list = json.loads(base3.rstrip(b",\n"))
    claims_list["claims"] = list(claims_list["claims"].values())
    with gzip.open(data_root / DUMP_FILES[0]) as fh:  # first real entity with a dated claim
        bad_snak = next(e for e in (json.loads(x.rstrip(b",\n")) for x in fh if len(x) > 3)
                        if any(st["mainsnak"].get("datavalue", {}).get("type") == "time"
                               for sts in e["claims"].values() for st in sts))
    times = [st for sts in bad_snak["claims"].values() for st in sts
             if st["mainsnak"].get("datavalue", {}).get("type") == "time"]
    times[0]["mainsnak"]["datavalue"]["value"] = "yesterday"
    lexeme = {"type": "lexeme", "id": "L1", "lemmas": {}}
    lines = [
        b"[\n",
        good1,
        good2[: len(good2) // 2] + b"\n",  # truncated JSON line
        json.dumps(missing_id).encode() + b",\n",
        json.dumps(labels_list).encode() + b",\n",
        json.dumps(claims_list).encode() + b",\n",
        json.dumps(bad_snak).encode() + b",\n",
        json.dumps(lexeme).encode() + b",\n",
        good2,
        b"]\n",
    ]
    path = tmp_path / "corrupt.json"
    path.write_bytes(b"".join(lines))
    for fast in (True, False):
        t = _by_table(read_wikidata_json(path, fast=fast))
        good_ids = [json.loads(good1.rstrip(b",\n"))["id"], json.loads(good2.rstrip(b",\n"))["id"]]
        assert [e["qid"] for e in t["entities"]] == good_ids
        rej = t["rejects"]
        assert [r["line"] for r in rej] == [3, 4, 5, 6, 7, 8]
        reasons = [r["reason"] for r in rej]
        assert reasons[0].startswith("malformed JSON")
        assert reasons[1] == "missing id"
        assert "labels is list" in reasons[2]
        assert "claims is list" in reasons[3]
        assert "time" in reasons[4] or "shape" in reasons[4]
        assert "unsupported entity type" in reasons[5]
        offsets = [sum(len(x) for x in lines[: i - 1]) for i in (3, 4, 5, 6, 7, 8)]
        assert [r["offset"] for r in rej] == offsets
        assert all(r["source_file"] == str(path) and r["stage"] == "wikidata_json" for r in rej)
        assert rej[0]["snippet"] == lines[2][:200].decode()
        conform(rej, "rejects")


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_truncated_compressed_stream_raises(data_root: Path, tmp_path: Path, suffix: str) -> None:
    src = data_root / (DUMP_FILES[0] if suffix == ".gz" else DUMP_FILES[1])
    data = src.read_bytes()
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DumpError, match=r"cut\.(gz|bz2).*offset \d+"):
        for _ in read_wikidata_json(cut):
            pass


def test_byte_shards_tile(data_root: Path, tmp_path: Path) -> None:
    plain = tmp_path / "entities.json"
    plain.write_bytes(gzip.open(data_root / DUMP_FILES[0]).read())
    whole = list(read_wikidata_json(plain))
    for n in (2, 5, 13):
        parts = [row for sh in byte_shards(plain, n) for row in read_wikidata_json(plain, sh)]
        assert parts == whole
    qids = [r["qid"] for t, r in whole if t == "entities"]
    assert len(qids) == len(set(qids)) == 49


def test_line_shards_of_compressed_file_tile(data_root: Path) -> None:
    path = data_root / DUMP_FILES[0]
    whole = list(read_wikidata_json(path))
    bounds = [0, 7, 20, 33, None]
    parts = [row for a, b in zip(bounds, bounds[1:], strict=False)
             for row in read_wikidata_json(path, Shard(0, 4, a, b, by_lines=True))]
    assert parts == whole


def test_properties_json(data_root: Path, tmp_path: Path) -> None:
    path = data_root / "wikidata-properties/properties.json.gz"
    raw = json.loads(gzip.open(path).read())
    t = _by_table(read_properties_json(path))
    assert not t["rejects"]
    assert [p["pid"] for p in t["properties"]] == [r["id"] for r in raw] and len(raw) == 11734
    by_pid = {p["pid"]: p for p in t["properties"]}
    assert by_pid["P31"]["label"] == "instance of" and by_pid["P31"]["datatype"] == "wikibase-item"
    empty_desc = [r["id"] for r in raw if r.get("description") == {}]
    assert empty_desc and all(by_pid[p]["description"] is None for p in empty_desc)
    conform(t["properties"], "properties")

    bad = [raw[0], {"label": "no id"}, {**raw[1], "aliases": "not a list"}, "not an object", raw[2]]
    corrupt = tmp_path / "props.json"
    corrupt.write_text(json.dumps(bad))
    t = _by_table(read_properties_json(corrupt))
    assert [p["pid"] for p in t["properties"]] == [raw[0]["id"], raw[2]["id"]]
    assert [r["line"] for r in t["rejects"]] == [2, 3, 4]

    cut = tmp_path / "props.json.gz"
    data = path.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DumpError, match="props.json.gz"):
        list(read_properties_json(cut))
