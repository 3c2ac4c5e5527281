"""KGTK, plain-triple, label-file, N-Triples and title-map readers on the real files."""

from __future__ import annotations

import collections
import csv
import gzip
import io
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from storage.parquet_io import conform
from tasks.dumps.base import DumpError, Shard, byte_shards
from tasks.dumps.triples import (
    kgtk_value,
    load_title_map,
    read_codex_json,
    read_kgtk,
    read_label_file,
    read_ntriples,
    read_title_map,
    read_triples,
)

KGTK = "kgtk-arnold"
LITWD = "literallywikidata"


def _by_table(rows):
    tables = collections.defaultdict(list)
    for table, row in rows:
        tables[table].append(row)
    return tables


def _tsv(path: Path) -> list[list[str]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as fh:
        return [line.rstrip("\r\n").split("\t") for line in fh]


def _unescape(text: str) -> str:
    """KGTK backslash escapes, undone character by character (independent of the reader's regex)."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _check_schemas(tables) -> None:
    for table, rows in tables.items():
        assert conform(rows, table).num_rows == len(rows)


# --------------------------------------------------------------------------- KGTK
def test_kgtk_labels(data_root: Path) -> None:
    path = data_root / KGTK / "labels.en.tsv.gz"
    lines = _tsv(path)
    assert lines[0][:3] == ["node1", "label", "node2"]
    body = lines[1:]
    q = [r for r in body if r[0].startswith("Q")]
    p = [r for r in body if r[0].startswith("P")]
    t = _by_table(read_kgtk(path))
    assert not t["rejects"]
    assert len(t["labels"]) == len(q) == 61324
    assert len(t["entities"]) == len({r[0] for r in q})
    assert len(t["properties"]) == len({r[0] for r in p})
    first = next(r for r in t["entities"] if r["qid"] == "Q100")
    assert first["label"] == "Boston" and first["description"] is None and first["source"] == path.name
    _check_schemas(t)


def test_kgtk_aliases_and_descriptions(data_root: Path) -> None:
    path = data_root / KGTK / "aliases.en.tsv.gz"
    body = _tsv(path)[1:]
    t = _by_table(read_kgtk(path))
    assert len(t["aliases"]) == sum(1 for r in body if r[0].startswith("Q"))
    expected = collections.defaultdict(list)
    for r in body:
        text = _unescape(r[2][1:-4])
        if text not in expected[r[0]]:
            expected[r[0]].append(text)
    got = {r["qid"]: r["aliases"] for r in t["entities"]}
    got.update({r["pid"]: r["aliases"] for r in t["properties"]})
    assert got == dict(expected)
    assert "Boston, MA" in got["Q100"]

    path = data_root / KGTK / "descriptions.en.tsv.gz"
    body = _tsv(path)[1:]
    t = _by_table(read_kgtk(path))
    assert len(t["entities"]) + len(t["properties"]) == len(body)
    p10 = next(r for r in t["properties"] if r["pid"] == "P10")
    assert '"object has role"' in p10["description"]  # KGTK \" escapes undone


def test_kgtk_edges(data_root: Path) -> None:
    path = data_root / KGTK / "claims.time.tsv.gz"
    body = _tsv(path)[1:]
    t = _by_table(read_kgtk(path))
    assert len(t["claims"]) == len(body) == 38055
    assert {c["datatype"] for c in t["claims"]} == {"time"}
    by_key = {(c["subject"], c["property"]): c["object_value"] for c in t["claims"]}
    assert by_key[("Q100", "P571")] == "1630-09-07"
    assert by_key[("Q1000", "P571")] == "1960"  # precision 9 -> year
    for c in t["claims"]:
        assert c["object_qid"] is None and c["rank"] == "normal"

    path = data_root / KGTK / "derived.P31.tsv.gz"
    lines = _tsv(path)
    assert lines[0] == ["id", "node1", "label", "node2"]
    t = _by_table(read_kgtk(path))
    assert len(t["claims"]) == len(lines) - 1
    assert all(c["property"] == "P31" and c["object_qid"] for c in t["claims"])
    expected = collections.defaultdict(list)
    for r in lines[1:]:
        if r[1].startswith("Q") and r[3] not in expected[r[1]]:  # the file repeats some values
            expected[r[1]].append(r[3])
    inst = collections.defaultdict(list)
    for e in t["entities"]:
        inst[e["qid"]].extend(e["instance_of"])
    assert dict(inst) == dict(expected)


def test_kgtk_value() -> None:
    assert kgtk_value("Q5") == ("Q5", None, "wikibase-item", None)
    assert kgtk_value("P31") == ("P31", None, "wikibase-property", None)
    assert kgtk_value(r"'master\'s thesis'@en") == (None, "master's thesis", "monolingualtext", "en")
    assert kgtk_value('"abc"') == (None, "abc", "string", None)
    assert kgtk_value("^1947-07-30T00:00:00Z/11") == (None, "1947-07-30", "time", None)
    assert kgtk_value("@51.5/-0.12") == (None, "51.5,-0.12", "globe-coordinate", None)
    assert kgtk_value("+1.96Q11573") == (None, "1.96", "quantity", None)
    with pytest.raises(ValueError):
        kgtk_value("'unterminated")


def test_kgtk_byte_shards_and_rejects(data_root: Path, tmp_path: Path) -> None:
    lines = gzip.open(data_root / KGTK / "labels.en.tsv.gz").read().split(b"\n")[:3001]
    plain = tmp_path / "labels.en.tsv"
    bad = [b"Q1\tlabel", b"notanid\tlabel\t'x'@en\tid", b"Q2\tlabel\t'unterminated\tid"]
    plain.write_bytes(b"\n".join(lines[:1500] + bad + lines[1500:]) + b"\n")
    whole = list(read_kgtk(plain))
    t = _by_table(whole)
    assert [r["line"] for r in t["rejects"]] == [1501, 1502, 1503]
    assert len(t["labels"]) + len(t["properties"]) == 3000
    for n in (3, 7):
        parts = [row for sh in byte_shards(plain, n) for row in read_kgtk(plain, sh)]
        # a group cut by a shard boundary may give two partial rows; every other row is identical (line
        # numbers are unknown in byte shards that start mid-file)
        def norm(rows):
            return [(t_, {k: v for k, v in r.items() if k != "line"}) for t_, r in rows if t_ != "properties"]

        assert norm(parts) == norm(whole)
        assert {r["pid"] for t_, r in parts if t_ == "properties"} == {r["pid"] for t_, r in whole
                                                                         if t_ == "properties"}
    headerless = tmp_path / "noheader.tsv"
    headerless.write_bytes(b"\n".join(lines[1:10]))
    with pytest.raises(DumpError, match="noheader.tsv"):
        list(read_kgtk(headerless))


# --------------------------------------------------------------------------- plain triples
@pytest.mark.parametrize("name", [
    "codex/triples/codex-s/train.txt", "codex/triples/codex-s/valid.txt",
    "codex/triples/codex-m/train.txt.gz", "codex/triples/codex-l/test.txt",
    f"{LITWD}/LitWD1K/train.txt", f"{LITWD}/LitWD19K/valid.txt",
])
def test_triples_counts(data_root: Path, name: str) -> None:
    path = data_root / name
    body = _tsv(path)
    t = _by_table(read_triples(path))
    assert not t["rejects"]
    assert [(c["subject"], c["property"], c["object_qid"]) for c in t["claims"]] == [tuple(r) for r in body]
    assert all(c["rank"] == "truthy" and c["datatype"] == "wikibase-item" for c in t["claims"])


@pytest.mark.parametrize("name", ["codex/triples/codex-s/valid_negatives.txt",
                                  "codex/triples/codex-m/test_negatives.txt"])
def test_codex_negatives_refused(data_root: Path, name: str) -> None:
    with pytest.raises(ValueError, match="negative"):
        list(read_triples(data_root / name))


def test_numeric_literals_and_types(data_root: Path) -> None:
    path = data_root / LITWD / "LitWD1K/numeric_literals.txt"
    body = _tsv(path)
    t = _by_table(read_triples(path))
    assert len(t["claims"]) == len(body)
    c0 = t["claims"][0]
    assert (c0["subject"], c0["property"], c0["object_value"], c0["datatype"]) == ("Q1000", "P1081", "0.702",
                                                                                   "quantity")
    for c, r in zip(t["claims"], body, strict=True):
        assert c["property"] == r[1].split("_")[0]
        value, dtype = r[2].split('"')[1], r[2].rsplit("#", 1)[1].rstrip(">")
        if dtype == "dateTime":
            assert c["datatype"] == "time" and c["object_value"] == value.split("T")[0]
        elif r[1].endswith(("_Latitude", "_Longtiude")):  # one half of a coordinate, joined on merge
            half = "coordinate-latitude" if r[1].endswith("_Latitude") else "coordinate-longitude"
            assert c["datatype"] == half and float(c["object_value"]) == float(value)
        else:
            assert c["datatype"] == "quantity" and float(c["object_value"]) == float(value)
    halves = collections.Counter(c["datatype"] for c in t["claims"] if c["datatype"].startswith("coordinate-"))
    assert halves == {"coordinate-latitude": 700, "coordinate-longitude": 700}

    path = data_root / LITWD / "Entities/entity_types.txt"
    body = _tsv(path)
    t = _by_table(read_triples(path))
    assert len(t["claims"]) == len(body) == 70740
    assert all(c["property"] == "P31" for c in t["claims"])
    expected = collections.defaultdict(list)
    for s, o in body:
        if o not in expected[s]:
            expected[s].append(o)
    inst = collections.defaultdict(list)
    for e in t["entities"]:
        inst[e["qid"]] += [x for x in e["instance_of"] if x not in inst[e["qid"]]]
    assert dict(inst) == dict(expected)
    _check_schemas(t)


def test_triples_rejects_and_shards(data_root: Path, tmp_path: Path) -> None:
    lines = (data_root / "codex/triples/codex-s/train.txt").read_bytes().split(b"\n")[:2000]
    path = tmp_path / "triples.txt"
    bad = [b"Q1\tP31\tQ5\textra", b"X1\tP31\tQ5", b"Q1\tP31\tnot-a-node"]
    path.write_bytes(b"\n".join(lines[:10] + bad + lines[10:]) + b"\n")
    whole = list(read_triples(path))
    t = _by_table(whole)
    assert [r["line"] for r in t["rejects"]] == [11, 12, 13]
    assert len(t["claims"]) == 2000
    for n in (2, 9):
        assert [row for sh in byte_shards(path, n) for row in read_triples(path, sh)] == whole


# --------------------------------------------------------------------------- label files
def test_litwd_label_files(data_root: Path) -> None:
    ent = data_root / LITWD / "Entities"
    labels = _tsv(ent / "entity_labels_en.txt")
    t = _by_table(read_label_file(ent / "entity_labels_en.txt"))
    assert len(t["entities"]) == len(t["labels"]) == len(labels) == 59724
    assert t["entities"][0] == {"qid": "Q100", "label": "Boston", "description": None, "aliases": None,
                                "enwiki_title": None, "sitelinks": None, "instance_of": None,
                                "source": "entity_labels_en.txt"}
    aliases = _tsv(ent / "entity_aliases_en.txt")
    t = _by_table(read_label_file(ent / "entity_aliases_en.txt"))
    assert len(t["entities"]) == len(aliases) == 23840
    n_alias = 0
    for r in aliases:
        parts = []
        for a in r[1].split(","):
            if a.strip() and a.strip() not in parts:
                parts.append(a.strip())
        n_alias += len(parts)
    assert len(t["aliases"]) == n_alias
    t = _by_table(read_label_file(ent / "entity_wikidata_descriptions_en.txt"))
    assert len(t["entities"]) == 58963
    same = list(read_label_file(ent / "entity_wikidata_descriptions_en.txt", kind="descriptions"))
    assert [r for _, r in same] == t["entities"]
    _check_schemas(t)
    for sub, prefix in (("Relations", "relation"), ("Attributes", "attribute")):
        for kind in ("labels", "aliases", "wikidata_descriptions"):
            path = data_root / LITWD / sub / f"{prefix}_{kind}_en.txt"
            t = _by_table(read_label_file(path))
            assert set(t) == {"properties"} and len(t["properties"]) == len(_tsv(path))


def test_codex_json_label_files(data_root: Path) -> None:
    path = data_root / "codex/relations/en/relations.json"
    raw = json.loads(path.read_text())
    t = _by_table(read_label_file(path))
    assert [p["pid"] for p in t["properties"]] == list(raw) and len(raw) == 71
    path = data_root / "codex/types/en/types.json"
    raw = json.loads(path.read_text())
    t = _by_table(read_label_file(path))
    assert [e["qid"] for e in t["entities"]] == list(raw)
    assert list(read_codex_json(path, source="types.json")) == list(read_label_file(path))
    assert list(read_label_file(path, Shard(1, 2))) == []  # whole-file JSON is read by shard 0 only
    prof = t["entities"][0]
    assert prof["qid"] == "Q28640" and prof["enwiki_title"] == "Profession"
    with_wiki = sum(1 for v in raw.values() if v.get("wiki"))
    assert sum(1 for e in t["entities"] if e["enwiki_title"]) == with_wiki
    _check_schemas(t)


def test_title_map(data_root: Path) -> None:
    path = data_root / "wikipedia-vital-articles/vital_articles_entities_2019.csv.gz"
    rows = list(csv.reader(io.TextIOWrapper(gzip.open(path), encoding="utf-8"), delimiter=";"))
    t = _by_table(read_title_map(path))
    assert not t["rejects"]
    assert [(e["qid"], e["enwiki_title"]) for e in t["entities"]] == [(r[0], r[1]) for r in rows]
    assert len(rows) == 34971
    m = load_title_map(path)
    assert m['"Weird Al" Yankovic'] == "Q8349"
    assert len(m) == len({r[1] for r in rows})


# --------------------------------------------------------------------------- N-Triples
WD = "http://www.wikidata.org/entity/"


def _nt_lit(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_truthy_ntriples(data_root: Path, out: Path, n_triples: int = 1500) -> dict:
    """Regenerate a Wikidata-truthy-style N-Triples sample from real CoDEx triples and LitWD labels.

    Per entity (subjects grouped, as in the real truthy dump): rdfs:label / schema:name (en),
    schema:description, skos:altLabel, wdt: claims, an enwiki sitelink (from the vital-articles map),
    numeric literals, plus somevalue / novalue statements and skipped statement-node triples. Returns the
    expected facts.
    """
    triples = [tuple(r) for r in _tsv(data_root / "codex/triples/codex-s/train.txt")[:n_triples]]
    ent_dir = data_root / LITWD / "Entities"
    labels = dict(r for r in _tsv(ent_dir / "entity_labels_en.txt"))
    descs = dict(r for r in _tsv(ent_dir / "entity_wikidata_descriptions_en.txt"))
    aliases = {r[0]: [a.strip() for a in r[1].split(",") if a.strip()]
               for r in _tsv(ent_dir / "entity_aliases_en.txt")}
    titles = {q: t for t, q in load_title_map(data_root / "wikipedia-vital-articles/"
                                              "vital_articles_entities_2019.csv.gz").items()}
    numeric = collections.defaultdict(list)
    for s, p, o in _tsv(data_root / LITWD / "LitWD1K/numeric_literals.txt"):
        numeric[s].append((p.split("_")[0], o.split('"')[1], o.rsplit("^^", 1)[1]))
    by_subject = collections.defaultdict(list)
    for s, p, o in triples:
        by_subject[s].append((p, o))
    expected: dict = {"claims": set(), "labels": {}, "descriptions": {}, "aliases": {}, "enwiki": {},
                      "instance_of": {}}
    lines: list[str] = []
    for s, claims in by_subject.items():
        subj = f"<{WD}{s}>"
        if s in titles:
            page = f"<https://en.wikipedia.org/wiki/{quote(titles[s].replace(' ', '_'))}>"
            lines += [f"{page} <http://schema.org/about> {subj} .",
                      f'{page} <http://schema.org/inLanguage> "en" .']
            expected["enwiki"][s] = titles[s]
        if s in labels:
            lines.append(f"{subj} <http://www.w3.org/2000/01/rdf-schema#label> {_nt_lit(labels[s])}@en .")
            lines.append(f"{subj} <http://schema.org/name> {_nt_lit(labels[s])}@en .")
            expected["labels"][s] = labels[s]
        if s in descs:
            lines.append(f"{subj} <http://schema.org/description> {_nt_lit(descs[s])}@en .")
            expected["descriptions"][s] = descs[s]
        for a in dict.fromkeys(aliases.get(s, [])):
            lines.append(f"{subj} <http://www.w3.org/2004/02/skos/core#altLabel> {_nt_lit(a)}@en .")
            expected["aliases"].setdefault(s, []).append(a)
        for p, o in claims:
            lines.append(f"{subj} <http://www.wikidata.org/prop/direct/{p}> <{WD}{o}> .")
            expected["claims"].add((s, p, o, None, "wikibase-item"))
            if p == "P31":
                expected["instance_of"].setdefault(s, []).append(o)
        for p, v, dtype in numeric.get(s, []):
            lines.append(f'{subj} <http://www.wikidata.org/prop/direct/{p}> "{v}"^^{dtype} .')
            if dtype.endswith("dateTime>"):
                expected["claims"].add((s, p, None, v.split("T")[0], "time"))
            else:
                expected["claims"].add((s, p, None, v.lstrip("+"), "quantity"))
        lines.append(f"{subj} <http://www.wikidata.org/prop/direct-normalized/P214> "
                     "<http://viaf.org/viaf/1> .")
        lines.append(f"<{WD}statement/{s}-1> <http://wikiba.se/ontology#rank> "
                     "<http://wikiba.se/ontology#NormalRank> .")
    q = triples[0][0]
    lines += [f"<{WD}{q}> <http://www.wikidata.org/prop/direct/P570> _:b0 .",
              f"<{WD}{q}> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> "
              "<http://www.wikidata.org/prop/novalue/P40> .",
              f'<{WD}{q}> <http://www.wikidata.org/prop/direct/P569> '
              '"1952-03-11T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .',
              f"<{WD}P31> <http://www.w3.org/2000/01/rdf-schema#label> \"instance of\"@en .",
              f"<{WD}P31> <http://wikiba.se/ontology#propertyType> "
              "<http://wikiba.se/ontology#WikibaseItem> ."]
    expected["claims"] |= {(q, "P570", None, "<somevalue>", None), (q, "P40", None, "<novalue>", None),
                           (q, "P569", None, "1952-03-11", "time")}
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return expected


def test_ntriples_roundtrip(data_root: Path, tmp_path: Path) -> None:
    path = tmp_path / "truthy.nt"
    exp = write_truthy_ntriples(data_root, path)
    t = _by_table(read_ntriples(path))
    assert not t["rejects"]
    got = {(c["subject"], c["property"], c["object_qid"], c["object_value"], c["datatype"])
           for c in t["claims"]}
    assert got == exp["claims"]
    assert len(t["claims"]) == len(exp["claims"])
    assert {r["qid"]: r["label"] for r in t["labels"]} == exp["labels"]
    merged: dict[str, dict] = {}
    for e in t["entities"]:
        m = merged.setdefault(e["qid"], {})
        for k, v in e.items():
            if v is not None:
                m.setdefault(k, v)
    assert {q: m["label"] for q, m in merged.items() if "label" in m} == exp["labels"]
    assert {q: m["description"] for q, m in merged.items() if "description" in m} == exp["descriptions"]
    assert {q: m["aliases"] for q, m in merged.items() if "aliases" in m} == exp["aliases"]
    assert {q: m["enwiki_title"] for q, m in merged.items() if "enwiki_title" in m} == exp["enwiki"]
    assert {q: m["instance_of"] for q, m in merged.items() if "instance_of" in m} == exp["instance_of"]
    assert t["properties"] == [{"pid": "P31", "label": "instance of", "description": None, "aliases": None,
                                "datatype": "wikibase-item"}]
    n_alias = sum(len(v) for v in exp["aliases"].values())
    assert len(t["aliases"]) == n_alias
    _check_schemas(t)
    # byte shards of the file give the same claims
    parts = [row for sh in byte_shards(path, 4) for row in read_ntriples(path, sh)]
    assert [r[1] for r in parts if r[0] == "claims"] == t["claims"]
    assert [r[1] for r in parts if r[0] == "labels"] == t["labels"]


def test_ntriples_rejects(tmp_path: Path) -> None:
    path = tmp_path / "bad.nt"
    path.write_text(
        f"<{WD}Q1> <http://www.wikidata.org/prop/direct/P31> <{WD}Q5> .\n"
        f"<{WD}Q1> <http://www.wikidata.org/prop/direct/P31> <{WD}Q5>\n"  # no final dot
        f'<{WD}Q1> <http://www.w3.org/2000/01/rdf-schema#label> "unterminated@en .\n'
        f'<{WD}Q1> <http://www.w3.org/2000/01/rdf-schema#label> "Universe \\u00e9"@en .\n',
        encoding="utf-8",
    )
    t = _by_table(read_ntriples(path))
    assert [r["line"] for r in t["rejects"]] == [2, 3]
    assert t["labels"] == [{"qid": "Q1", "lang": "en", "label": "Universe é"}]


def test_truncated_gzip_raises(data_root: Path, tmp_path: Path) -> None:
    data = (data_root / KGTK / "claims.time.tsv.gz").read_bytes()
    cut = tmp_path / "claims.time.tsv.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DumpError, match="claims.time.tsv.gz"):
        list(read_kgtk(cut, Shard(by_lines=True)))
