"""Streaming reader of Wikipedia ``pages-articles`` XML dumps (plain, .bz2, .gz, .xz).

Inputs: a MediaWiki XML export (``<mediawiki><siteinfo/><page><title/><ns/><id/><redirect title=.../>?
<revision>...<text>wikitext</text></revision></page>...``; export schema 0.9/0.10; UTF-8, UTF-16 of either
byte order, or another encoding expat reads, LF or CRLF line ends: the rows are the same), a ``Shard`` and an
optional title -> QID mapping (dict or callable, e.g. ``tasks.dumps.triples.load_title_map``).

Outputs (``(table, row)`` pairs with the columns of ``storage.schemas``):
    * ``redirects`` (title, target) for redirect pages;
    * ``articles`` (page_id, title, qid, lead, text, n_words, source) for the other pages: ``text`` is plain
      text (templates, ``<ref>``s and other invisible tags, tables, comments, File/Media/Category links, named
      in English or in the wiki's own language (its ``<siteinfo><namespaces>``), and interlanguage links
      dropped; wikilink and external-link text kept; headings kept as their own lines;
      trailing reference-like sections such as "References", "External links", "See also" dropped),
      ``lead`` is the first paragraph of the plain text with at least ``LEAD_MIN_WORDS`` words;
    * ``passages`` (passage_id ``"<page_id>-<i>"``, page_id, title, qid, text): consecutive windows of
      ``passage_words`` whitespace-separated words of ``text`` (the last one may be shorter);
    * ``rejects`` for a broken page (missing/invalid ``<id>``, no ``<text>``, wikitext the cleaner cannot
      handle, wikitext that leaves no text), with the byte offset of its ``<page>`` tag in the decompressed
      stream and its title.

The wikitext -> text conversion is a fixed sequence of C-level passes (``re.sub``/``str.replace``) over the
page: drop comments, invisible tag blocks, templates (innermost first) and tables; replace wikilinks by their
visible text (innermost first, so a File: caption's links go before the File: link itself); keep external
links' labels, drop bare URLs, HTML tags, bold/italic quotes and magic words; decode HTML entities; mark
headings; collapse blanks; then one Python loop over the lines assembles paragraphs. A full mwparserfromhell
parse spends ~65% of the reader's time in its Python tree builder: ~20 MB/s per core here against 4.3 MB/s on
the bench input (``tests/bench/bench_wikipedia.py``). On the 112 real sample articles both give identical leads
and 102 identical texts; in the other 10 this conversion decodes ``&nbsp;``/``&ndash;``, drops ``__TOC__``, keeps
a definition list's ``;term: definition`` on one line and leaves fewer empty lines.

Only pages in ``namespaces`` (default: the article namespace 0) are emitted; a page without ``<ns>`` takes the
namespace its title's prefix names (``Talk:X``: 1), as MediaWiki resolves titles. A truncated or corrupt compressed
stream, or XML that is not well formed, raises ``DumpError`` naming the file and the decompressed byte offset.

Parsing is streamed with expat (the parser under ``xml.etree.ElementTree.iterparse``) driven directly: one
page is held at a time (memory bounded by the largest page), and expat reports the exact byte offset of each
``<page>``, which iterparse does not expose.

Sharding, two ways; either way the shards' outputs tile the file's output:

* **By byte range** (``tasks.dumps.base.byte_shards``: plain files, and ``.gz``/``.bz2`` through their seek
  index, one parallel decompression per file): a shard ``[start, end)`` of the decompressed bytes owns the pages
  whose ``<page>`` tag starts in it. It seeks to ``start``, skips to the first ``<page>`` tag (inside ``<text>``
  a ``<`` is always escaped, so the literal tag is a page start; in the dump's encoding, told by its head:
  in UTF-16 at an even offset), parses from there under a synthetic ``<mediawiki>`` root and reads past ``end``
  only to finish the page that crosses it. Every shard decompresses and parses only its own share of the file,
  as the line readers do. Offsets stay those of the whole decompressed stream. A multistream ``.bz2``
  (Wikimedia's ``pages-articles-multistream.xml.bz2``) is cut at its bzip2 stream starts instead, with no
  decompression before staging (``tasks.dumps.bz2streams``): the same rule over the decompressed bytes of its
  streams, whose offsets then count from its first stream.
* **By page ordinal** (``Shard(index=i, count=n)`` with no range: ``.xz``, which has no seek index here): the
  pages whose ordinal (0-based position among all ``<page>`` elements, every namespace counted) satisfies
  ``ordinal % n == i``. Every such shard decompresses and scans the whole file but parses only the wikitext of
  its own pages.

``by_lines`` is ignored for XML.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from html import unescape as _html_unescape
from pathlib import Path
from xml.parsers import expat

from tasks.dumps.base import DumpError, Shard, TableRow, decompressed, open_shard, range_end, reject

STAGE = "wikipedia_xml"
CHUNK = 1 << 20
_PAGE_TAG = b"<page>"
_ROOT = b"<mediawiki>"  # the synthetic root a byte-range shard parses its pages under
LEAD_MIN_WORDS = 5

_DROP_TAGS = frozenset({
    "ref", "references", "table", "gallery", "math", "chem", "ce", "imagemap", "timeline", "score", "graph",
    "syntaxhighlight", "source", "templatedata", "templatestyles", "mapframe", "maplink", "noinclude",
    "includeonly", "onlyinclude", "nowiki", "hiero", "categorytree", "inputbox", "style",
    "script",
})
#: Namespaces whose links are dropped from the text (their local names come from the dump's siteinfo).
_DROP_LINK_KEYS = frozenset({-2, 6, 14})  # Media, File, Category
#: MediaWiki's canonical (English) namespace names, valid on every wiki whatever its language, plus the
#: ``Image`` alias of File; a dump's ``<siteinfo><namespaces>`` adds the wiki's own names.
CANONICAL_NAMESPACES: dict[str, int] = {
    "media": -2, "special": -1, "talk": 1, "user": 2, "user talk": 3, "project": 4, "project talk": 5,
    "file": 6, "image": 6, "file talk": 7, "image talk": 7, "mediawiki": 8, "mediawiki talk": 9, "template": 10,
    "template talk": 11, "help": 12, "help talk": 13, "category": 14, "category talk": 15,
}


def drop_link_names(names: Mapping[str, int]) -> frozenset[str]:
    """The namespace names (lower-cased) whose links carry no text: Media, File (and Image), Category."""
    return frozenset(n for n, key in names.items() if key in _DROP_LINK_KEYS)


#: The dropped names of a dump without siteinfo: the canonical ones.
_DROP_LINK_NS = drop_link_names(CANONICAL_NAMESPACES)
_SITEINFO_HEAD = 1 << 20  # bytes read for <siteinfo> (it precedes the first page; a few KB in real exports)
# the encoding an XML declaration names (ASCII-compatible encodings; UTF-16 is told by its first bytes)
_XML_DECL = re.compile(rb"<\?xml\s[^>]*?\bencoding\s*=\s*[\"']([A-Za-z][A-Za-z0-9._-]*)[\"']")
_INTERLANG = re.compile(r"[a-z]{2,3}(?:-[a-z]+)*\Z")
_TAIL_SECTIONS = frozenset({
    "references", "external links", "see also", "notes", "further reading", "bibliography", "sources",
    "footnotes", "notes and references", "citations", "works cited", "references and notes",
})
# after blanks are collapsed to one space: "( )" / "(, ; x" / "x ;, )"
_EMPTY_BRACKETS = re.compile(r"\( ?[,;]? ?\)")
_OPEN_PUNCT = re.compile(r"\( ?(?:[,;] ?)+")
_CLOSE_PUNCT = re.compile(r"[,;](?: ?[,;])* ?\)")  # its leading blank is removed through the \x01 mark
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_BR = re.compile(r"</?br\b[^>]*>", re.IGNORECASE)
_MAGIC = re.compile(r"__[A-Z]+__")
_HEADING = re.compile(r"\n(={1,6})([^\n]+?)\1[ \t]*(?=\n|\Z)")
# [[title]] or [[title|text]] with no link inside (text may hold [single bracket] pairs: external links)
# (possessive: an unclosed "[[" fails in one scan, never by backtracking)
_WIKILINK = re.compile(r"\[\[([^\[\]|\n]*+)(?:\|([^\[\]]*+(?:\[[^\[\]]*+\][^\[\]]*+)*+))?\]\]")
# one pattern starting with "[" (a top-level alternation or IGNORECASE would make re try every position); the
# label stops at the next bracket, so an unclosed "[http://..." costs one short scan, not one to the end of the page
_EXT_LINK = re.compile(
    r"\[(?:(?:(?:https?|ftps?|irc|ircs|gopher|nntp|telnet|sftp|ssh|svn|git|mms|worldwind):)?//"
    r"|(?:mailto|news|urn|tel|geo|magnet|xmpp|sips?):)[^\s\[\]<>\"]++(?:[ \t]+([^\[\]\n]*+))?\]"
)
_BARE_URL = re.compile(r"(?:https?|ftp)://[^\s<>\[\]{}|\"]+", re.IGNORECASE)
_NOISE = "*#:;|-=!() ,."  # a line made only of these (list/table/heading residue) carries no text
_BULLETS = "*#:; "


_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_BLOCK_TAGS = "|".join(sorted(_DROP_TAGS, key=len, reverse=True))
# an opening, closing or self-closing tag of _DROP_TAGS (attributes never contain "<" or ">")
# (a closing tag is "</ref>" or "</ref >" only: "</ref name=x>" is malformed and closes nothing, as in MediaWiki)
_BLOCK_EDGE = re.compile(rf"<(?:(/)({_BLOCK_TAGS})\s*|({_BLOCK_TAGS})\b[^<>]*+)>", re.IGNORECASE)
_BRACES = re.compile(r"\{\{|\}\}")
_INNER_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")


def _drop_templates(text: str) -> str:
    """Remove balanced ``{{...}}`` spans (templates, parser functions); unbalanced braces are left as is.

    Innermost templates (no brace inside) go first, one C-level ``re.sub`` per nesting level; what is left
    (a single ``{``/``}`` inside a template, unbalanced braces) goes through the balanced scanner.
    """
    while "{{" in text:
        new = _INNER_TEMPLATE.sub("", text)
        if len(new) == len(text):
            return _drop_balanced(new)
        text = new
    return text


def _drop_balanced(text: str) -> str:
    if "{{" not in text:
        return text
    out: list[str] = []
    depth = 0
    keep_from = 0
    open_at = 0
    for m in _BRACES.finditer(text):
        if m.group(0) == "{{":
            if depth == 0:
                open_at = m.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                out.append(text[keep_from:open_at])
                keep_from = m.end()
    out.append(text[keep_from:])
    return "".join(out)


def _drop_blocks(text: str) -> str:
    """Remove ``<ref>...</ref>``-like blocks of ``_DROP_TAGS`` (content included) and their self-closing tags.

    An opening tag runs to the first closing tag of the same name after it (as ``<ref>.*?</ref>`` would); one
    with no closing tag anywhere after it is left (``_HTML_TAG`` drops the tag, its text stays). One scan over
    the tags: linear even on pages with thousands of unclosed tags, where the equivalent regex is quadratic.
    """
    if "<" not in text:
        return text
    edges = list(_BLOCK_EDGE.finditer(text))
    if not edges:
        return text
    last_close: dict[str, int] = {}
    for m in edges:
        if m.group(1):
            last_close[m.group(2).lower()] = m.start()
    out: list[str] = []
    keep_from = 0
    open_name: str | None = None
    open_at = 0
    for m in edges:
        if open_name is None:
            if m.group(1):
                continue  # a stray closing tag
            if m.group(0).endswith("/>"):
                out.append(text[keep_from:m.start()])
                keep_from = m.end()
            elif last_close.get(name := m.group(3).lower(), -1) > m.start():
                open_name, open_at = name, m.start()
        elif m.group(1) and m.group(2).lower() == open_name:
            out.append(text[keep_from:open_at])
            keep_from = m.end()
            open_name = None
    out.append(text[keep_from:])
    return "".join(out)


#: A heading line, by the rule of ``_HEADING`` (the same run of 1 to 6 ``=`` on both sides).
_SECTION_HEADING = re.compile(r"(={1,6})[^\n]+?\1[ \t]*\Z")


def _drop_tables(text: str) -> str:
    """Remove ``{| ... |}`` tables (nested ones included) line by line.

    A table ends at its ``|}``, and every open table ends at an HTML ``</table>`` or at the next section heading
    (``== ... ==``, kept): an unclosed or HTML-closed table never swallows the rest of the page.
    """
    if "{|" not in text:
        return text
    out: list[str] = []
    depth = 0
    for line in text.split("\n"):
        s = line.lstrip()
        if s.startswith("{|"):
            depth += 1
            continue
        if depth:
            if s.startswith("|}"):
                depth -= 1
            elif "</table>" in s.lower():
                depth = 0
            elif _SECTION_HEADING.match(s):
                depth = 0
                out.append(line)
            continue
        out.append(line)
    return "\n".join(out)


def prestrip(wikitext: str) -> str:
    """Remove the markup whose content is dropped whole: comments, invisible tags, templates, tables.

    Comments first (they may hide any markup), then ``<ref>``/``<math>``/``<nowiki>``/... blocks (the tags of
    ``_DROP_TAGS``, content included), then balanced ``{{...}}`` templates, then ``{| ... |}`` tables.

    Args:
        wikitext: Raw wikitext.

    Returns:
        The wikitext without those constructs.
    """
    text = _COMMENT.sub("", wikitext) if "<!--" in wikitext else wikitext
    text = _drop_blocks(text)
    text = _drop_templates(text)
    return _drop_tables(text)


def _link(m: re.Match, drop: frozenset[str] = _DROP_LINK_NS) -> str:
    """Visible text of one innermost ``[[title|text]]`` link ("" for File:/Category:/interlanguage links).

    ``drop``: the lower-cased namespace names whose links are dropped.
    """
    title, text = m.group(1), m.group(2)
    if ":" in title:
        t = title.strip()
        lead = t.startswith(":")
        prefix = t.lstrip(":").partition(":")[0].strip().lower()
        if not lead and (prefix in drop or (text is None and _INTERLANG.match(prefix))):
            return ""
    return title.strip().lstrip(":") if text is None else text


def _links(text: str, drop: frozenset[str] = _DROP_LINK_NS) -> str:
    """Replace wikilinks by their visible text, innermost first (a File: caption's links, then the File: link)."""
    sub = _link if drop == _DROP_LINK_NS else functools.partial(_link, drop=drop)
    while "[[" in text:
        new = _WIKILINK.sub(sub, text)
        if new == text:
            break
        text = new
    return text


def _render(wikitext: str, drop: frozenset[str] = _DROP_LINK_NS) -> str:
    """Wikitext -> visible text lines (a heading as a line starting with NUL), before paragraph assembly.

    Every step is one C-level pass (``re.sub``/``str.replace``) over the page, skipped when the page lacks the
    character it needs; the only Python per match is ``_link``/``_heading`` (one call per link/heading).
    """
    text = prestrip(wikitext)
    if "[[" in text:
        text = _links(text, drop)
    if "[" in text:
        text = _EXT_LINK.sub(_ext_text, text)
    if "://" in text:
        text = _BARE_URL.sub("", text)
    if "<" in text:
        text = _BR.sub("\n", text)
        text = _HTML_TAG.sub("", text)
    if "&" in text:
        text = _html_unescape(text)
        if "<" in text:  # entities that spelled tags (&lt;span&gt;) are dropped like tags
            text = _HTML_TAG.sub("", text)
    if "''" in text:
        text = text.replace("'''", "").replace("''", "")
    if "__" in text:
        text = _MAGIC.sub("", text)
    if "=" in text:
        text = _HEADING.sub(_heading, "\n" + text)[1:]
    # runs of blanks -> one space (str.replace: ~15x faster than a regex hitting every space)
    if "\t" in text:
        text = text.replace("\t", " ")
    if "\u00a0" in text:
        text = text.replace("\u00a0", " ")
    while "  " in text:
        text = text.replace("  ", " ")
    if "(" in text:  # "( )", "(, x" and "x, )" left by dropped templates
        text = _OPEN_PUNCT.sub("(", _EMPTY_BRACKETS.sub("", text))
        if ",)" in text or ";)" in text or ", )" in text or "; )" in text:
            text = _CLOSE_PUNCT.sub("\x01)", text).replace(" \x01", "").replace("\x01", "")
        while "  " in text:
            text = text.replace("  ", " ")
    return text


def _heading(m: re.Match) -> str:
    return "\n\x00" + " ".join(m.group(2).split())


def _ext_text(m: re.Match) -> str:
    return m.group(1) or ""


def wikitext_to_plain(wikitext: str, drop_link_ns: frozenset[str] = _DROP_LINK_NS) -> tuple[str, str]:
    """Convert wikitext to plain text and its lead paragraph.

    Args:
        wikitext: Raw page wikitext.
        drop_link_ns: Lower-cased namespace names whose links are dropped (default: the English File, Image,
            Category and Media; :func:`drop_link_names` adds a dump's own names).

    Returns:
        ``(text, lead)``: paragraphs separated by blank lines (headings on their own lines), and the first
        paragraph of at least ``LEAD_MIN_WORDS`` words (``""`` when there is none).
    """
    raw = _render(wikitext, drop_link_ns)
    if " " in raw:
        raw = raw.replace(" ,", ",").replace(" .", ".").replace(" ;", ";")
    paragraphs: list[str] = []
    lines: list[str] = []
    heading: str | None = None  # emitted only when content follows it
    append = lines.append
    for line in raw.split("\n"):
        if not line or line == " ":  # blank line: closes the paragraph
            if lines:
                if heading:
                    paragraphs.append(heading)
                    heading = None
                paragraphs.append("\n".join(lines))
                lines = []
                append = lines.append
            continue
        if line[0] == "\x00":  # heading marker: "\x00<title>"
            if lines:
                if heading:
                    paragraphs.append(heading)
                paragraphs.append("\n".join(lines))
                lines = []
                append = lines.append
            heading = line[1:].strip()
            if heading.lower() in _TAIL_SECTIONS:
                break
            continue
        if not line.strip(_NOISE):  # only list/table/heading punctuation: skipped
            continue
        append(line.lstrip(_BULLETS).strip())
    else:
        if lines:
            if heading:
                paragraphs.append(heading)
            paragraphs.append("\n".join(lines))
    text = "\n\n".join(paragraphs)
    lead = ""
    for p in paragraphs:
        if len(p.split()) >= LEAD_MIN_WORDS:
            lead = p
            break
    return text, lead


def passages(page_id: int, title: str, qid: str | None, text: str, words: int = 100) -> list[TableRow]:
    """Split plain text into consecutive ``words``-word passages.

    Args:
        page_id: Wikipedia page id.
        title: Page title.
        qid: Linked QID or ``None``.
        text: Plain text of the page.
        words: Window size in words.

    Returns:
        ``passages`` rows with ids ``f"{page_id}-{i}"``, i = 0, 1, ...
    """
    return _passage_rows(page_id, title, qid, text.split(), words)


def _passage_rows(page_id: int, title: str, qid: str | None, toks: list[str], words: int) -> list[TableRow]:
    join = " ".join
    return [("passages", {"passage_id": f"{page_id}-{i}", "page_id": page_id, "title": title, "qid": qid,
                          "text": join(toks[start:start + words])})
            for i, start in enumerate(range(0, len(toks), words))]


class _PageCollector:
    """expat handlers that assemble one ``<page>`` at a time."""

    def __init__(self, parser: expat.XMLParserType):
        self.parser = parser
        self.depth = 0
        self.page_depth = -1
        self.ordinal = -1
        self.page: dict | None = None
        self.buf: list[str] | None = None
        self.done: list[dict] = []
        self.want: Callable[[int], bool] = lambda _: True
        #: decompressed offset of the parser's byte 0 (a byte-range shard starts its feed mid-file)
        self.base = 0
        #: pages starting at or after this decompressed offset belong to the next shard (byte-range shards)
        self.limit: int | None = None
        self.past_limit = False
        parser.StartElementHandler = self.start
        parser.EndElementHandler = self.end
        parser.CharacterDataHandler = self.chars
        parser.buffer_text = True

    def start(self, name: str, attrs: dict) -> None:
        self.depth += 1
        name = name.rpartition(":")[2] if ":" in name else name
        if name == "page":
            self.ordinal += 1
            self.page_depth = self.depth
            offset = self.base + self.parser.CurrentByteIndex
            if self.limit is not None and offset >= self.limit:
                self.past_limit = True
            self.page = {"offset": offset, "ordinal": self.ordinal, "title": None,
                         "ns": None, "id": None, "redirect": None, "text": None,
                         "keep": not self.past_limit and self.want(self.ordinal)}
            return
        page = self.page
        if page is None:
            return
        rel = self.depth - self.page_depth
        if rel == 1 and name in ("title", "ns", "id"):
            self.buf = []
        elif rel == 1 and name == "redirect":
            page["redirect"] = attrs.get("title", "")
        elif name == "text" and page["keep"]:
            self.buf = []

    def chars(self, data: str) -> None:
        if self.buf is not None:
            self.buf.append(data)

    def end(self, name: str) -> None:
        name = name.rpartition(":")[2] if ":" in name else name
        page = self.page
        if page is not None:
            if name == "page" and self.depth == self.page_depth:
                self.done.append(page)
                self.page = None
            elif self.buf is not None and name in ("title", "ns", "id", "text"):
                if name == "text" or self.depth - self.page_depth == 1:
                    page[name] = "".join(self.buf)
                self.buf = None
        self.depth -= 1


def _is_byte_range(shard: Shard) -> bool:
    return not shard.by_lines and (shard.streams or shard.seek_index is not None or shard.start > 0
                                   or shard.end is not None)


def _first_page(fh, start: int, tag: bytes = _PAGE_TAG, unit: int = 1,
                aligned: bool = True) -> tuple[int, bytes] | None:
    """Read from ``start`` to the first ``<page>`` tag: its decompressed offset and the bytes from it on.

    ``tag`` is ``<page>`` in the dump's encoding, whose characters take ``unit`` bytes at offsets that are a
    multiple of it (UTF-16: 2); ``aligned=False`` (a shard whose offsets count from a bzip2 stream, not from the
    file) takes the first match whatever its offset.
    """
    pos, buf, keep = start, b"", len(tag) - 1
    while True:
        chunk = fh.read(CHUNK)
        if not chunk:
            return None
        buf += chunk
        at = buf.find(tag)
        while at >= 0 and aligned and (pos + at) % unit:
            at = buf.find(tag, at + 1)
        if at >= 0:
            return pos + at, buf[at:]
        pos += len(buf) - keep
        buf = buf[-keep:]


def xml_encoding(head: bytes) -> str | None:
    """The encoding of an XML document told by its first bytes, as expat names it; ``None`` for UTF-8.

    UTF-16 by its byte order mark, or by the byte order of its first ``<`` (XML 1.0 appendix F, as expat
    detects it); else the encoding its XML declaration names. A parser that starts mid-file (a byte-range shard)
    is given it: the bytes it sees carry neither mark nor declaration.
    """
    if head.startswith((b"\xff\xfe", b"<\x00")):
        return "UTF-16LE"
    if head.startswith((b"\xfe\xff", b"\x00<")):
        return "UTF-16BE"
    m = _XML_DECL.match(head.removeprefix(b"\xef\xbb\xbf"))
    if m is None or m.group(1).lower().replace(b"_", b"-") in (b"utf-8", b"utf8"):
        return None
    return m.group(1).decode()


def _encoded(text: bytes, encoding: str | None) -> bytes:
    """ASCII markup (``<page>``, the synthetic root) in the dump's encoding."""
    if encoding is None:
        return text
    try:
        return text.decode().encode(encoding)
    except LookupError:  # a name Python does not know: expat then refuses the file with its own error
        return text


class _SiteinfoRead(Exception):
    """Raised from the expat handlers at ``</siteinfo>`` (or at the first ``<page>``): the rest is not read."""


def _dump_head(path: Path) -> bytes:
    """The first ``_SITEINFO_HEAD`` decompressed bytes of a dump (empty when unreadable: the page reader reports)."""
    try:
        with open_shard(path, Shard()) as fh:
            return fh.read(_SITEINFO_HEAD)
    except (EOFError, OSError, ValueError):
        return b""


def _head_namespaces(head: bytes) -> dict[str, int]:
    """The namespace names of ``<siteinfo><namespaces>`` in a dump's head, parsed by expat in the dump's encoding."""
    parser = expat.ParserCreate()
    found: dict[str, int] = {}
    name_of: list = []  # [key, [text...]] while inside a <namespace>

    def start(tag: str, attrs: dict) -> None:
        tag = tag.rpartition(":")[2]
        if tag == "page":
            raise _SiteinfoRead
        if tag == "namespace" and attrs.get("key", "").lstrip("-").isdigit():
            name_of[:] = [int(attrs["key"]), []]

    def chars(data: str) -> None:
        if name_of:
            name_of[1].append(data)

    def end(tag: str) -> None:
        tag = tag.rpartition(":")[2]
        if tag == "siteinfo":
            raise _SiteinfoRead
        if tag == "namespace" and name_of:
            text = "".join(name_of[1]).strip().replace("_", " ").lower()
            if text:
                found[text] = name_of[0]
            name_of.clear()

    parser.StartElementHandler, parser.CharacterDataHandler, parser.EndElementHandler = start, chars, end
    try:
        parser.Parse(head, False)
    except (_SiteinfoRead, expat.ExpatError):
        pass  # broken XML: the names read so far (the page reader refuses the file)
    return found


def site_namespaces(path: Path, head: bytes | None = None) -> dict[str, int]:
    """Namespace names of a dump (lower-cased name -> key): the canonical English ones and the wiki's own.

    The wiki's own come from its ``<siteinfo><namespaces>`` (``Kategoreja`` -> 14 in a Latgalian dump), read
    from the head of the file whatever the shard (``<siteinfo>`` precedes the first page) by expat, so in the
    dump's encoding (UTF-8, UTF-16 with either byte order, any other that expat reads) and with its entities
    decoded; an export without siteinfo has the canonical names only.

    Args:
        path: The dump.
        head: Its first decompressed bytes, when already read (default: read here).
    """
    return {**CANONICAL_NAMESPACES, **_head_namespaces(_dump_head(path) if head is None else head)}


def title_namespace(title: str, names: Mapping[str, int]) -> int:
    """The namespace of a page told by its title's prefix (``Talk:X`` -> 1), for exports without ``<ns>``."""
    prefix, colon, _ = title.partition(":")
    return names.get(prefix.strip().replace("_", " ").lower(), 0) if colon else 0


def _pages(path: Path, shard: Shard, encoding: str | None = None) -> Iterator[dict]:
    by_range = _is_byte_range(shard)
    mid_file = by_range and shard.start > 0
    # a mid-file shard's parser sees neither byte order mark nor declaration: it is told the dump's encoding
    parser = expat.ParserCreate(encoding if mid_file else None)
    col = _PageCollector(parser)
    if by_range:
        col.limit = None if shard.streams else shard.end
    elif shard.count > 1:
        col.want = lambda ordinal: ordinal % shard.count == shard.index
    # a stream-boundary shard's offsets count from its first stream, and it learns its end on reaching it
    offset = shard.start if by_range and not shard.streams else 0
    try:
        with open_shard(path, shard) as fh:
            if mid_file:
                if not shard.streams:
                    fh.seek(shard.start)
                unit = 2 if encoding and encoding.upper().startswith("UTF-16") else 1
                first = _first_page(fh, offset, _encoded(_PAGE_TAG, encoding), unit, aligned=not shard.streams)
                end = range_end(fh, shard)
                if first is None or (end is not None and first[0] >= end):
                    return  # no page starts in this range
                page_at, head = first
                root = _encoded(_ROOT, encoding)
                col.base = page_at - len(root)
                offset = page_at + len(head)
                col.limit = end
                parser.Parse(root + head, False)
            while not col.past_limit:
                chunk = fh.read(CHUNK)
                if col.limit is None and by_range:
                    col.limit = range_end(fh, shard)  # known once read up to (a stream shard's end)
                if not chunk:
                    parser.Parse(b"", True)
                    break
                offset += len(chunk)
                parser.Parse(chunk, False)
                if col.done:
                    yield from col.done
                    col.done = []
    except expat.ExpatError as exc:
        raise DumpError(f"{path}: broken XML at byte offset {col.base + parser.ErrorByteIndex} "
                        f"({decompressed(shard)}): {expat.errors.messages[exc.code]}") from exc
    except (EOFError, OSError, ValueError) as exc:
        raise DumpError(f"{path}: unreadable after byte offset {offset} ({decompressed(shard)}): {exc}") from exc
    yield from col.done


def read_wikipedia_xml(path: Path | str, shard: Shard = Shard(), source: str | None = None,
                       title_to_qid: Mapping[str, str] | Callable[[str], str | None] | None = None,
                       passage_words: int = 100, namespaces: tuple[int, ...] = (0,)) -> Iterator[TableRow]:
    """Stream a pages-articles XML dump into ``articles``, ``passages``, ``redirects`` and ``rejects`` rows.

    Args:
        path: The XML dump (plain, .bz2, .gz, .xz).
        shard: A decompressed byte range (pages whose ``<page>`` tag starts in it), else ``index``/``count``
            select pages by ordinal modulo ``count`` (see the module docstring).
        source: Value of the ``source`` column; defaults to the file name.
        title_to_qid: Title -> QID as a mapping or a callable; ``None`` leaves ``qid`` null.
        passage_words: Words per passage.
        namespaces: Namespaces whose pages are emitted (default: articles only).

    Yields:
        ``(table, row)`` pairs.

    Raises:
        DumpError: For a truncated/corrupt compressed stream or malformed XML (file and byte offset named).
    """
    path = Path(path)
    src = source or path.name
    if title_to_qid is None:
        lookup: Callable[[str], str | None] = lambda _t: None  # noqa: E731
    elif isinstance(title_to_qid, Mapping):
        lookup = title_to_qid.get
    else:
        lookup = title_to_qid
    head = _dump_head(path)
    names = site_namespaces(path, head)
    drop = drop_link_names(names)
    for page in _pages(path, shard, xml_encoding(head)):
        if not page["keep"]:
            continue
        title = (page["title"] or "").strip()
        offset = page["offset"]
        try:
            ns = int(page["ns"]) if page["ns"] is not None else title_namespace(title, names)
        except ValueError:
            yield reject(path, f"invalid <ns> {page['ns']!r}", title, offset, None, STAGE)
            continue
        if ns not in namespaces:
            continue
        if not title:
            yield reject(path, "page without <title>", f"page id {page['id']}", offset, None, STAGE)
            continue
        if page["redirect"] is not None:
            target = page["redirect"].strip()
            if not target:
                yield reject(path, "redirect without target", title, offset, None, STAGE)
                continue
            yield "redirects", {"title": title, "target": target}
            continue
        try:
            page_id = int((page["id"] or "").strip())
        except ValueError:
            reason = "page without <id>" if not page["id"] else f"invalid <id> {page['id'][:30]!r}"
            yield reject(path, reason, title, offset, None, STAGE)
            continue
        if page["text"] is None:
            yield reject(path, "page without revision <text>", title, offset, None, STAGE)
            continue
        try:
            text, lead = wikitext_to_plain(page["text"], drop)
        except Exception as exc:  # noqa: BLE001 - any parser failure quarantines the page
            yield reject(path, f"unparsable wikitext: {type(exc).__name__}: {exc}", title, offset, None,
                         STAGE)
            continue
        qid = lookup(title)
        toks = text.split()  # once: n_words and the passages
        if not toks and page["text"].split():
            # markup removal left nothing of a page that had text: counted, not published as an empty article
            yield reject(path, f"no text left after markup removal ({len(page['text'].split())} words of wikitext)",
                         title, offset, None, STAGE)
            continue
        yield "articles", {"page_id": page_id, "title": title, "qid": qid, "lead": lead, "text": text,
                           "n_words": len(toks), "source": src}
        yield from _passage_rows(page_id, title, qid, toks, passage_words)
