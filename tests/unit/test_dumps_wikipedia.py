"""Wikipedia pages-articles XML reader on the three real enwiki samples."""

from __future__ import annotations

import bz2
import collections
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from storage.parquet_io import conform
from tasks.dumps import wikipedia_xml
from tasks.dumps.base import DumpError, Shard
from tasks.dumps.triples import load_title_map
from tasks.dumps.wikipedia_xml import read_wikipedia_xml, wikitext_to_plain

XML_DIR = "wikipedia-xml-dump"
GENSIM = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
SAMPLE = "enwiki-pages-articles-sample.xml.bz2"
TABLES = "enwiki-table-markup.xml.bz2"


def _by_table(rows):
    tables = collections.defaultdict(list)
    for table, row in rows:
        tables[table].append(row)
    return tables


def _independent_pages(path: Path) -> list[dict]:
    """ElementTree parse of the whole (small) file: title, ns, page id, redirect target."""
    root = ET.parse(bz2.open(path)).getroot()
    ns = root.tag.split("}")[0] + "}"
    out = []
    for page in root.iter(ns + "page"):
        red = page.find(ns + "redirect")
        out.append({"title": page.find(ns + "title").text, "ns": int(page.find(ns + "ns").text),
                    "id": int(page.find(ns + "id").text),
                    "redirect": None if red is None else red.get("title")})
    return out


@pytest.fixture(scope="module")
def title_map(data_root: Path) -> dict[str, str]:
    return load_title_map(data_root / "wikipedia-vital-articles/vital_articles_entities_2019.csv.gz")


@pytest.fixture(scope="module")
def parsed(data_root: Path, title_map) -> dict[str, dict[str, list[dict]]]:
    return {name: _by_table(read_wikipedia_xml(data_root / XML_DIR / name, title_to_qid=title_map))
            for name in (GENSIM, SAMPLE, TABLES)}


def test_counts_match_independent_parse(data_root: Path, parsed) -> None:
    total = collections.Counter()
    for name, t in parsed.items():
        pages = _independent_pages(data_root / XML_DIR / name)
        arts = [p for p in pages if p["ns"] == 0 and p["redirect"] is None]
        reds = [p for p in pages if p["ns"] == 0 and p["redirect"] is not None]
        assert [(a["page_id"], a["title"]) for a in t["articles"]] == [(p["id"], p["title"]) for p in arts]
        assert [(r["title"], r["target"]) for r in t["redirects"]] == [(p["title"], p["redirect"])
                                                                        for p in reds]
        assert not t["rejects"]
        total.update({k: len(v) for k, v in t.items()})
    assert total["articles"] == 113
    assert total["redirects"] == 100  # ns 0 only; the 101st redirect is the gensim sample's ns-4 page
    assert len(parsed[GENSIM]["articles"]) == 106 and len(parsed[GENSIM]["redirects"]) == 99


def test_other_namespaces(data_root: Path) -> None:
    t = _by_table(read_wikipedia_xml(data_root / XML_DIR / GENSIM, namespaces=(4,)))
    assert list(t) == ["redirects"]
    assert t["redirects"][0]["title"].startswith("Wikipedia:")


def test_plain_text_is_clean(parsed) -> None:
    for t in parsed.values():
        for a in t["articles"]:
            text = a["text"]
            for junk in ("{{", "}}", "<ref", "[[Category:", "[[File:", "[[Image:", "{|", "|}", "]]", "[["):
                assert junk not in text, (a["title"], junk)
            assert not re.search(r"</?(ref|div|span|table|small)\b", text), a["title"]
            assert a["n_words"] == len(text.split()) > 50
            assert a["lead"] and a["lead"] in text
            assert a["source"]
        conform(t["articles"], "articles")
        conform(t["passages"], "passages")
        conform(t["redirects"], "redirects")


def test_leads(parsed) -> None:
    arts = {a["title"]: a for t in parsed.values() for a in t["articles"]}
    assert arts["Anarchism"]["lead"].startswith("Anarchism is a political philosophy")
    assert arts["Albedo"]["lead"].startswith("Albedo or reflection coefficient")
    assert arts["Accessibility"]["lead"].startswith("Accessibility is the degree")
    assert arts["Anarchism"]["qid"] == "Q6199"
    assert sum(1 for a in arts.values() if a["qid"]) > 50


def test_passages(parsed) -> None:
    for t in parsed.values():
        by_page = collections.defaultdict(list)
        for p in t["passages"]:
            by_page[p["page_id"]].append(p)
            assert len(p["text"].split()) <= 100
        ids = [p["passage_id"] for p in t["passages"]]
        assert len(ids) == len(set(ids))
        for a in t["articles"]:
            ps = by_page[a["page_id"]]
            assert [p["passage_id"] for p in ps] == [f"{a['page_id']}-{i}" for i in range(len(ps))]
            assert " ".join(p["text"] for p in ps).split() == a["text"].split()
            assert all(len(p["text"].split()) == 100 for p in ps[:-1])
            assert all(p["qid"] == a["qid"] and p["title"] == a["title"] for p in ps)


def test_page_shards_tile(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wikipedia_xml, "CHUNK", 8192)
    for name in (SAMPLE, TABLES):
        path = data_root / XML_DIR / name
        whole = list(read_wikipedia_xml(path))
        for n in (2, 3):
            parts = [row for i in range(n) for row in read_wikipedia_xml(path, Shard(index=i, count=n))]
            assert sorted(map(repr, parts)) == sorted(map(repr, whole))
            assert len(parts) == len(whole)


def _xml(data_root: Path) -> bytes:
    return bz2.open(data_root / XML_DIR / SAMPLE).read()


def test_broken_page_is_rejected(data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wikipedia_xml, "CHUNK", 4096)  # offsets must stay absolute across parser feeds
    xml = _xml(data_root)
    # remove the page-level <id> of the third page (Accessibility); revision ids stay
    starts = [m.start() for m in re.finditer(rb"<page>", xml)]
    third = starts[2]
    m = re.compile(rb"\s*<id>\d+</id>").search(xml, third)
    broken = xml[: m.start()] + xml[m.end():]
    path = tmp_path / "broken.xml"
    path.write_bytes(broken)
    t = _by_table(read_wikipedia_xml(path))
    assert [a["title"] for a in t["articles"]] == ["Computer accessibility"]
    (rej,) = t["rejects"]
    assert rej["reason"] == "page without <id>" and rej["snippet"] == "Accessibility"
    assert broken[rej["offset"]: rej["offset"] + 6] == b"<page>"
    assert rej["offset"] == third
    conform(t["rejects"], "rejects")


def test_truncated_bz2_raises(data_root: Path, tmp_path: Path) -> None:
    data = (data_root / XML_DIR / TABLES).read_bytes()
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DumpError, match=r"cut\.xml\.bz2.*offset \d+"):
        list(read_wikipedia_xml(cut))


def test_broken_xml_raises(data_root: Path, tmp_path: Path) -> None:
    xml = _xml(data_root)
    path = tmp_path / "half.xml"
    path.write_bytes(xml[: len(xml) // 2])
    with pytest.raises(DumpError, match=r"half\.xml.*offset \d+"):
        list(read_wikipedia_xml(path))
    bad = tmp_path / "bad.xml"
    bad.write_bytes(xml.replace(b"</title>", b"</titel>", 1))
    with pytest.raises(DumpError, match="bad.xml"):
        list(read_wikipedia_xml(bad))


def test_wikitext_to_plain_rules() -> None:
    text, lead = wikitext_to_plain(
        "{{Infobox person|name=X}}'''Ada Lovelace''' (born 1815)<ref>{{cite book|title=Y}}</ref> was an "
        "[[England|English]] [[mathematician]].<!-- c -->\n\n[[File:Ada.jpg|thumb|A portrait]]\n"
        "{| class=wikitable\n|-\n| cell\n|}\n== Life ==\nShe worked with [[Charles Babbage]].\n"
        "[[Category:Mathematicians]]\n[[de:Ada Lovelace]]\n== References ==\n{{reflist}}\n"
    )
    assert lead == "Ada Lovelace (born 1815) was an English mathematician."
    assert text == lead + "\n\nLife\n\nShe worked with Charles Babbage."
