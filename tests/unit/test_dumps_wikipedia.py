"""Wikipedia pages-articles XML reader on the three real enwiki samples."""

from __future__ import annotations

import bz2
import collections
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storage.parquet_io import conform
from tasks.dumps import wikipedia_xml
from tasks.dumps.base import DumpError, Shard
from tasks.dumps.bounded_writer import BoundedPartWriter, write_parts
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
            for junk in ("{{", "}}", "<ref", "[[Category:", "[[File:", "[[Image:", "{|", "|}", "]]", "[[", "|-",
                         "&nbsp;", "&ndash;", "__TOC__", "__NOTOC__", "http://", "https://"):
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


@pytest.mark.parametrize("suffix", [".xml", ".xml.bz2", ".xml.gz"])
def test_byte_range_shards_tile_plain_and_compressed(data_root: Path, tmp_path: Path, suffix: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Byte-range shards (``byte_shards``: plain, or the decompressed bytes of .bz2/.gz through the seek index)
    give the rows of the whole file, each page once, with offsets of the whole stream; cuts fall inside pages."""
    import gzip

    from tasks.dumps.base import byte_shards

    monkeypatch.setattr(wikipedia_xml, "CHUNK", 4096)  # tags split across reads
    xml = _xml(data_root)
    path = tmp_path / f"enwiki{suffix}"
    path.write_bytes({".xml": xml, ".xml.bz2": bz2.compress(xml), ".xml.gz": gzip.compress(xml)}[suffix])
    whole = list(read_wikipedia_xml(data_root / XML_DIR / SAMPLE, source=path.name))
    starts = [m.start() for m in re.finditer(rb"<page>", xml)]
    for n in (2, 5, 13):
        shards = byte_shards(path, n, cache=tmp_path / "index")
        assert len(shards) == n and (suffix == ".xml") == (shards[0].seek_index is None)
        cuts = [sh.start for sh in shards[1:]]
        assert any(c not in starts for c in cuts)  # most cuts land mid-page
        per_shard = [list(read_wikipedia_xml(path, sh)) for sh in shards]
        parts = [row for rows in per_shard for row in rows]
        assert sorted(map(repr, parts)) == sorted(map(repr, whole)) and len(parts) == len(whole)
        # each page in the shard whose range holds its <page> tag
        for sh, rows in zip(shards, per_shard, strict=True):
            ids = {r["page_id"] for t, r in rows if t == "articles"}
            owned = [st for st in starts if sh.start <= st < (sh.end if sh.end is not None else len(xml))]
            assert len(ids) <= len(owned)


def test_byte_range_shard_rejects_keep_whole_stream_offsets(data_root: Path, tmp_path: Path) -> None:
    from tasks.dumps.base import byte_shards

    xml = _xml(data_root)
    starts = [m.start() for m in re.finditer(rb"<page>", xml)]
    last = starts[-1]
    m = re.compile(rb"\s*<id>\d+</id>").search(xml, last)  # the last page loses its page id
    broken = xml[: m.start()] + xml[m.end():]
    path = tmp_path / "broken.xml.bz2"
    path.write_bytes(bz2.compress(broken))
    shards = byte_shards(path, 3, cache=tmp_path / "index")
    (rej,) = [r for sh in shards for t, r in read_wikipedia_xml(path, sh) if t == "rejects"]
    assert rej["reason"] == "page without <id>" and rej["offset"] == last
    assert broken[rej["offset"]: rej["offset"] + 6] == b"<page>"


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


def test_wikitext_to_plain_links_lists_entities_and_urls() -> None:
    text, _ = wikitext_to_plain(
        "'''X''' is a [[river|stream]]s of [[:Category:Rivers|rivers]] near [[de:Fluss]] and [[wikt:water]].\n"
        "[[File:X.jpg|thumb|A view of [[Bonn|the city]] from [http://example.org the hill]]]\n"
        "See [http://example.org/a official site], [http://example.org/b] and http://example.org/c too.\n"
        "It is 35&nbsp;km long &ndash; or so.__NOTOC__<br/>Next line<ref name=a/> (, {{lang|de|Fluss}}) end.\n"
        "; Term : its definition\n"
        "* [[Item one]], first\n"
        "=== Sub &amp; section ===\n"
        "Body {{unclosed {{inner}} text\n"
        "== See also ==\n"
        "* [[Dropped]]\n"
    )
    assert text.split("\n") == [
        "X is a streams of rivers near and wikt:water.",
        "",  # the File: line (its caption's links included) is gone: a blank line in its place
        "See official site, and too.",
        "It is 35 km long – or so.",
        "Next line end.",
        "Term : its definition",
        "Item one, first",
        "",
        "Sub & section",
        "",
        "Body {{unclosed text",
    ]


def test_templates_are_dropped_innermost_first_and_unbalanced_braces_kept() -> None:
    drop = wikipedia_xml._drop_templates
    assert drop("a{{x|{{y|{{z}}}}|w}}b{{q}}c") == "abc"
    assert drop("a{{x|b}c}}d") == "ad"  # a single brace inside: the balanced scanner
    assert drop("a}}b{{c}}d") == "a}}bd"
    assert drop("keep {{open") == "keep {{open"


def _disambiguation_pages(data_root: Path) -> dict[str, list[str]]:
    """Title -> visible text of the first link of every ``*`` line above "See also" (real disambiguation pages)."""
    import html

    out = {}
    for name in (GENSIM, SAMPLE, TABLES):
        xml = bz2.open(data_root / XML_DIR / name).read().decode()
        for page in re.findall(r"<page>.*?</page>", xml, re.S):
            m = re.search(r"<text[^>]*>(.*?)</text>", page, re.S)
            if m is None or "<redirect" in page:
                continue
            wikitext = html.unescape(m.group(1))
            if not re.search(r"\{\{\s*(?:disambiguation|disambig|geodis|hndis)\b", wikitext, re.I):
                continue
            items = []
            for line in wikitext.split("\n"):
                if re.match(r"=+\s*see also\s*=+", line, re.I):
                    break
                if line.startswith("*") and (lk := re.search(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]", line)):
                    items.append(" ".join((lk.group(2) or lk.group(1)).replace("''", "").split()))
            out[html.unescape(re.search(r"<title>(.*?)</title>", page).group(1))] = items
    return out


def test_disambiguation_list_items_are_kept(data_root: Path, parsed) -> None:
    pages = _disambiguation_pages(data_root)
    assert len(pages) >= 8 and sum(map(len, pages.values())) > 300  # Alien, Ada, Aberdeen, Animal, ...
    texts = {a["title"]: " ".join(a["text"].split()) for t in parsed.values() for a in t["articles"]}
    missing = [(title, item) for title, items in pages.items() for item in items if item not in texts[title]]
    assert missing == []
    assert "Alien (law), a person in a country who is not a national of that country" in texts["Alien"]


def test_byte_bounded_writer_flushes_by_bytes(data_root: Path, tmp_path: Path) -> None:
    path = data_root / XML_DIR / GENSIM
    budget = 256 << 10
    rows = write_parts(read_wikipedia_xml(path), tmp_path, batch_bytes=budget)
    whole = _by_table(read_wikipedia_xml(path))
    assert rows == {t: len(v) for t, v in whole.items()}
    for table in ("articles", "passages"):
        f = pq.ParquetFile(tmp_path / f"{table}.parquet")
        chars = sum(len(v) for r in whole[table] for v in r.values() if isinstance(v, str))
        assert f.metadata.num_row_groups >= chars // budget  # one row group per ~budget of text
        biggest = max(sum(len(v) for v in r.values() if isinstance(v, str)) for r in whole[table])
        for g in range(f.metadata.num_row_groups):
            got = f.read_row_group(g).to_pylist()
            assert sum(len(v) for r in got for v in r.values() if isinstance(v, str)) < budget + biggest
        assert f.read().to_pylist() == conform(whole[table], table).to_pylist()


def test_byte_bounded_writer_keeps_the_row_bound(tmp_path: Path) -> None:
    w = BoundedPartWriter("redirects", tmp_path / "r.parquet", batch_rows=10, batch_bytes=1 << 30)
    for i in range(35):
        w.add({"title": f"T{i}", "target": "X"})
    assert w.close() == 35 and w.flushes == 4
    assert pq.ParquetFile(tmp_path / "r.parquet").metadata.num_row_groups == 4


@pytest.mark.parametrize("junk", ["<ref>a ", "<ref name=", "[http://example.org a ", "[[a|b ", "{{", "<span "])
def test_unclosed_markup_costs_linear_time(junk: str) -> None:
    import time

    t0 = time.process_time()
    text, _ = wikitext_to_plain("Start. " + junk * 20_000 + "\n\nEnd of the page here.")
    assert text.endswith("End of the page here.")
    assert time.process_time() - t0 < 5  # ~0.05 s; the quadratic regexes took minutes


def test_malformed_closing_tag_closes_nothing() -> None:
    text, _ = wikitext_to_plain('A b c d e.<ref>{{x| one</ref name"n"> two}}</ref> F g h i j.')
    assert text == "A b c d e. F g h i j."


def _real_table_page(data_root: Path) -> tuple[str, str]:
    """``(title, wikitext)`` of the first page of the real table-markup export that has a ``{| ... |}`` table
    followed by prose."""
    root = ET.parse(bz2.open(data_root / XML_DIR / TABLES)).getroot()
    ns = root.tag.split("}")[0] + "}"
    for page in root.iter(ns + "page"):
        text = page.find(f"{ns}revision/{ns}text").text or ""
        if "\n{|" in text and "\n|}" in text:
            return page.find(ns + "title").text, text
    raise AssertionError("no page with a table in the table-markup sample")


def test_an_html_closed_table_opened_twice_does_not_swallow_the_page(data_root: Path) -> None:
    """A real page whose first table opens with ``{|`` twice and closes with ``</table>`` (as exports of other
    wikis have it) keeps the prose after the table; before, everything after it was dropped."""
    _title, text = _real_table_page(data_root)
    start = text.index("\n{|")
    end = text.index("\n|}", start)
    after = text[end + 3:]
    broken = text[:start] + "\n{|\n" + text[start + 1:end] + "\n</table>" + after
    want, _ = wikitext_to_plain(text)
    got, _ = wikitext_to_plain(broken)
    tail = wikitext_to_plain(after)[0].split()[-12:]
    assert len(tail) == 12 and " ".join(tail) in " ".join(got.split())
    assert len(got.split()) >= 0.9 * len(want.split())


def test_an_unclosed_table_ends_at_the_next_section(data_root: Path) -> None:
    _title, text = _real_table_page(data_root)
    start = text.index("\n{|")
    end = text.index("\n|}", start)
    unclosed = text[:end] + "\n== Aftermath ==\nThe rest of the article is prose that must stay.\n"
    got, _ = wikitext_to_plain(unclosed)
    assert "Aftermath" in got and "The rest of the article is prose that must stay." in got


def test_a_page_left_without_text_is_a_reject(data_root: Path, tmp_path: Path) -> None:
    """A page whose wikitext is all markup (here a real page's table alone) is counted as a reject with its
    word count, not published as an empty article."""
    title, text = _real_table_page(data_root)
    start = text.index("\n{|")
    end = text.index("\n|}", start)
    from xml.sax.saxutils import escape

    xml = (f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><page><title>{escape(title)}</title>'
           f"<ns>0</ns><id>7</id><revision><id>1</id><text>{escape(text[start + 1:end + 3])}</text></revision>"
           "</page></mediawiki>")
    path = tmp_path / "only-a-table.xml"
    path.write_text(xml)
    rows = _by_table(read_wikipedia_xml(path))
    assert "articles" not in rows and "passages" not in rows
    [rej] = rows["rejects"]
    assert rej["snippet"] == title and re.match(r"no text left after markup removal \(\d+ words", rej["reason"])
    assert rej["stage"] == "wikipedia_xml" and xml.encode()[rej["offset"]: rej["offset"] + 6] == b"<page>"


def _localised_sample(data_root: Path, tmp_path: Path, file_ns: str, category_ns: str, talk_ns: str,
                      drop_ns: bool = False) -> Path:
    """The real sample export as another wiki writes it: its siteinfo's File, Category and Talk namespaces renamed,
    the article "Accessibility" given a File link with a caption and a Category link in those names (as in
    ``[[Fails:Plants.jpg|thumb|250px|Augoji]]`` of a Latgalian dump), and with ``drop_ns`` no ``<ns>`` elements and
    the article "Computer accessibility" retitled as a Talk page."""
    xml = bz2.open(data_root / XML_DIR / SAMPLE).read().decode()
    xml = xml.replace('case="first-letter">File</namespace>', f'case="first-letter">{file_ns}</namespace>')
    xml = xml.replace('case="first-letter">Category</namespace>', f'case="first-letter">{category_ns}</namespace>')
    xml = xml.replace('case="first-letter">Talk</namespace>', f'case="first-letter">{talk_ns}</namespace>')
    i = xml.index("<title>Accessibility</title>")
    j = xml.index(">", xml.index("<text", i)) + 1  # at the top of the article, before any tail section
    xml = xml[:j] + f"[[{file_ns}:Plants.jpg|thumb|250px|Augoji]]\n[[{category_ns}:Albaneja]]\n" + xml[j:]
    if drop_ns:
        xml = re.sub(r"\s*<ns>\d+</ns>", "", xml)
        xml = xml.replace("<title>Computer accessibility</title>", f"<title>{talk_ns}:Computer accessibility</title>")
    path = tmp_path / "localised.xml"
    path.write_text(xml)
    return path


@pytest.mark.parametrize(("file_ns", "category_ns", "talk_ns"), [("Fails", "Kategoreja", "Sprīža"),
                                                                  ("Файл", "Категория", "Беседа")],
                         ids=["latgalian", "bulgarian"])
def test_file_and_category_links_in_the_wikis_own_language_are_dropped(data_root: Path, tmp_path: Path, file_ns,
                                                                        category_ns, talk_ns) -> None:
    path = _localised_sample(data_root, tmp_path, file_ns, category_ns, talk_ns)
    [article] = [r for r in _by_table(read_wikipedia_xml(path))["articles"] if r["title"] == "Accessibility"]
    for leftover in (category_ns, "Albaneja", "thumb", "250px", "Augoji", "Plants.jpg"):
        assert leftover not in article["text"], leftover


def test_an_export_without_ns_takes_the_namespace_from_the_title(data_root: Path, tmp_path: Path) -> None:
    path = _localised_sample(data_root, tmp_path, "Fails", "Kategoreja", "Sprīža", drop_ns=True)
    rows = _by_table(read_wikipedia_xml(path))
    titles = {r["title"] for r in rows["articles"]}
    assert "Accessibility" in titles and not any(t.startswith("Sprīža:") for t in titles)
    talk = [r for r in rows["articles"] if "Computer accessibility" in r["title"]]
    assert talk == []  # a Talk page, in the wiki's own name for it, is not an article


_CATEGORY_LINK = re.compile(r"\[\[Category:[^\[\]]*\]\]\n?")


def _german_export(data_root: Path) -> str:
    """The real gensim enwiki export as a German wiki writes it (derived, not a real dewiki export): its siteinfo's
    Category namespace renamed ``Kategorie``, every ``[[Category:...]]`` link renamed to ``[[Kategorie:...]]`` and
    moved to the top of its page's wikitext (in the real export they follow "References", whose section is cut
    whatever its links are named), and the article "Albedo" without its page ``<id>`` (one reject)."""
    xml = bz2.open(data_root / XML_DIR / GENSIM).read().decode()
    assert xml.count('case="first-letter">Category</namespace>') == 1
    xml = xml.replace('case="first-letter">Category</namespace>', 'case="first-letter">Kategorie</namespace>')

    def to_top(m: re.Match) -> str:
        links = "".join(link.replace("[[Category:", "[[Kategorie:") for link in _CATEGORY_LINK.findall(m[2]))
        return m[1] + links + _CATEGORY_LINK.sub("", m[2]) + m[3]

    xml = re.sub(r"(<text[^>]*>)(.*?)(</text>)", to_top, xml, flags=re.S)
    m = re.compile(r"\s*<id>\d+</id>").search(xml, xml.index("<title>Albedo</title>"))
    return xml[: m.start()] + xml[m.end():]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_crlf_export_reads_like_its_utf8_lf_original(data_root: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, encoding: str) -> None:
    """A German-style export re-encoded as UTF-16 (byte order mark, XML declaration) with CRLF line ends gives the
    rows of its UTF-8 LF original, whole and in byte-range shards: the same namespace names (``Kategorie`` -> 14),
    its ``[[Kategorie:...]]`` links dropped from every text, and a reject whose offset is the UTF-16 byte offset of
    its ``<page>``. Both files are derived from the real gensim enwiki export (``_german_export``: namespace and
    links renamed), not taken from a real German wiki."""
    from tasks.dumps.base import byte_shards

    monkeypatch.setattr(wikipedia_xml, "CHUNK", 1 << 16)  # tags split across reads
    xml = _german_export(data_root)
    utf8 = tmp_path / "dewiki.xml"
    utf8.write_bytes(xml.encode())
    utf16 = tmp_path / f"dewiki-{encoding}.xml"
    bom = b"\xff\xfe" if encoding.endswith("le") else b"\xfe\xff"
    utf16.write_bytes(bom + ('<?xml version="1.0" encoding="UTF-16"?>\n' + xml).replace("\n", "\r\n").encode(encoding))

    names = wikipedia_xml.site_namespaces(utf8)
    assert names["kategorie"] == 14 and wikipedia_xml.site_namespaces(utf16) == names
    want = _by_table(read_wikipedia_xml(utf8, source="dewiki"))
    got = _by_table(read_wikipedia_xml(utf16, source="dewiki"))
    assert len(want["articles"]) == 105 and len(want["passages"]) > 1000
    # the moved links would show in the text were Kategorie not read from the siteinfo
    shown = [a for a in want["articles"] if "Kategorie:" in wikitext_to_plain(
        re.search(rf"<title>{re.escape(a['title'])}</title>.*?<text[^>]*>(.*?)</text>", xml, re.S)[1])[0]]
    assert len(shown) > 90
    assert not [a["title"] for t in (want, got) for a in t["articles"] if "Kategorie" in a["text"]]
    for table in ("articles", "passages", "redirects"):
        assert got[table] == want[table], table
    [want_rej], [got_rej] = want["rejects"], got["rejects"]
    assert {**got_rej, "offset": 0, "source_file": ""} == {**want_rej, "offset": 0, "source_file": ""}
    raw = utf16.read_bytes()
    assert raw[got_rej["offset"]: got_rej["offset"] + 12] == "<page>".encode(encoding)

    shards = byte_shards(utf16, 7)
    assert any(sh.start % 2 for sh in shards)  # some cuts fall inside a UTF-16 code unit
    parts = [row for sh in shards for row in read_wikipedia_xml(utf16, sh, source="dewiki")]
    assert sorted(map(repr, parts)) == sorted(map(repr, (("rejects", got_rej), *(
        (t, r) for t in ("articles", "passages", "redirects") for r in got[t]))))
