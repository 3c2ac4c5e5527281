"""Reader for the Wikipedia article texts shipped with the CMU FactoidQA dataset (Question/Answer v1.2).

Input: a year's ``question_answer_pairs.txt`` (``S08``, ``S09`` or ``S10``); every distinct ``ArticleFile``
it references is read from ``<year>/<ArticleFile>.txt.clean.gz`` (plus the year's article files no question
refers to, titled by their first line) (cleaned plain text: the title on the first
line, paragraphs separated by blank lines). Outputs ``articles`` and ``passages`` rows (100-word windows, like
the Wikipedia XML reader) and ``rejects`` for referenced files that are missing or unreadable.

These articles are not from a dump, so they have no Wikipedia page id: ``page_id`` is a negative synthetic id,
``-(year * 100000 + set * 1000 + article)`` (``S08/data/set3/a4`` -> ``-803004``), which cannot collide with a
real page id. The same article appears in several years in different revisions; each (year, file) is its own
article so a question is answered from the revision it was written on. ``title`` is ``ArticleTitle`` with
underscores as spaces and the first letter upper-cased (Wikipedia's convention); the QID is resolved by the KB
merge from the title maps (``sql/kb/articles.sql``, case-insensitive fallback). ``source`` is
``factoidqa-cmu/<year>/<ArticleFile>`` so a question's ``meta.article_file`` finds its exact article.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasks.dumps.base import Shard, TableRow, open_text_stream, reject
from tasks.dumps.wikipedia_xml import passages

STAGE = "cmu-articles"
_CMU_COLUMNS = 6
_FILE = re.compile(r"^data/set(\d+)/a(\d+)$")


def cmu_records(path: Path, b: Any = None) -> Iterator[tuple[int, list[str]]]:
    """``(line_no, six fields)`` of a CMU ``question_answer_pairs.txt``, re-joining records split by a newline.

    A line with fewer than six tab-separated fields is joined with the following line(s) while that yields
    at most six fields; what still does not have six fields is rejected (when a ``DatasetBuilder`` is given).
    """
    if not path.is_file():
        raise FileNotFoundError(f"required input file not found: {path}")
    with open_text_stream(path) as fh:  # counted by a KB build's progress line (it read 0 B of the file before)
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # README: "may be latin-1 encoded"
    lines = text.replace("\r\n", "\n").split("\n")
    i = 1  # line 0 is the header
    while i < len(lines):
        n, line = i + 1, lines[i]
        i += 1
        if not line.strip():
            continue
        fields = line.split("\t")
        while len(fields) < _CMU_COLUMNS and i < len(lines):
            nxt = lines[i].split("\t")
            if len(fields) + len(nxt) - 1 > _CMU_COLUMNS:
                break
            fields = [*fields[:-1], fields[-1] + " " + nxt[0], *nxt[1:]]
            i += 1
        if len(fields) != _CMU_COLUMNS:
            if b is not None:
                b.reject(path, f"line {n}: expected {_CMU_COLUMNS} tab-separated fields, found {len(fields)}",
                         line, line=n)
            continue
        yield n, [f.strip() for f in fields]


def synthetic_page_id(year: str, article_file: str) -> int | None:
    """Negative page id of ``(S08, data/set3/a4)``; None for an unexpected file name."""
    m = _FILE.match(article_file)
    if not m or not year[1:].isdigit():
        return None
    return -(int(year[1:]) * 100_000 + int(m.group(1)) * 1_000 + int(m.group(2)))


def wiki_title(article_title: str) -> str:
    """``ArticleTitle`` as a Wikipedia title: underscores -> spaces, first letter upper-cased."""
    t = " ".join(article_title.replace("_", " ").split())
    return t[:1].upper() + t[1:]


def split_clean_text(raw: str) -> tuple[str, str]:
    """``(text, lead)`` of a ``.txt.clean`` file: the title line dropped, paragraphs joined by blank lines."""
    lines = raw.replace("\r\n", "\n").split("\n")
    body = lines[1:] if lines else []
    paras = [" ".join(p.split()) for p in "\n".join(body).split("\n\n")]
    paras = [p for p in paras if p]
    return "\n\n".join(paras), (paras[0] if paras else "")


def read_cmu_articles(path: Path | str, shard: Shard = Shard(), source: str | None = None,
                      passage_words: int = 100) -> Iterator[TableRow]:
    """Stream the articles referenced by one CMU ``question_answer_pairs.txt``.

    Args:
        path: ``.../factoidqa-cmu/<year>/question_answer_pairs.txt``.
        shard: Ignored (a year's articles are one unit of work).
        source: Unused; the ``source`` column names the article file.
        passage_words: Words per passage.

    Yields:
        ``(table, row)`` pairs for ``articles``, ``passages`` and ``rejects``.
    """
    path = Path(path)
    year = path.parent.name
    seen: dict[str, str] = {}
    for _n, fields in cmu_records(path):
        seen.setdefault(fields[5], fields[0])
    # article files no question refers to: their title is the file's first line
    for file in sorted(path.parent.glob("data/set*/a*.txt.clean.gz")):
        rel = str(file.relative_to(path.parent)).removesuffix(".txt.clean.gz")
        if rel not in seen:
            with gzip.open(file, "rt", encoding="utf-8", errors="replace") as fh:
                seen[rel] = fh.readline().strip()
    for article_file, title in seen.items():
        page_id = synthetic_page_id(year, article_file)
        file = path.parent / f"{article_file}.txt.clean.gz"
        if page_id is None:
            yield reject(path, f"unexpected ArticleFile {article_file!r}", article_file, None, None, STAGE)
            continue
        try:
            raw = gzip.decompress(file.read_bytes()).decode("utf-8", errors="replace")
        except (OSError, EOFError) as exc:
            yield reject(file, f"article text unreadable: {exc}", article_file, None, None, STAGE)
            continue
        text, lead = split_clean_text(raw)
        if not text:
            yield reject(file, "empty article text", article_file, None, None, STAGE)
            continue
        name = wiki_title(title)
        yield "articles", {"page_id": page_id, "title": name, "qid": None, "lead": lead, "text": text,
                           "n_words": len(text.split()), "source": f"factoidqa-cmu/{year}/{article_file}"}
        yield from passages(page_id, name, None, text, passage_words)
