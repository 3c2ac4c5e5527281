"""Benchmark: Wikipedia pages-articles XML -> plain text, against WikiExtractor measured on the same pages.

Input: the real enwiki pages of ``wikipedia-xml-dump/*.bz2`` (214 ``<page>``s: articles, redirects,
disambiguation pages, table-heavy pages) repeated into a plain (uncompressed) XML dump of ``--mb`` MB and one
10x larger; copy ``c > 0`` of a page has its title rewritten (``"<title> (c)"``) and its page id shifted by
``c * 10^8``, so every page is distinct. Measured, each in a fresh subprocess, on the 1x dump:

* linkedqa: ``tasks.dumps.wikipedia_xml.read_wikipedia_xml`` (expat + wikitext cleaner, articles, passages
  and redirects), 1 process, article texts written as JSON lines;
* WikiExtractor (PyPI ``wikiextractor``, pinned in the ``bench`` extra): ``--no-templates --processes 1
  --json``, i.e. its reader process, one extract process and its output process (CPU of all three counted).

"Per core" = per CPU-second (user + system of the subprocess and its children, start-up included). Printed:
pages/s and MB/s per core and the ratio linkedqa / WikiExtractor; residual markup per 1,000 output words for
both (``{{ }} [[ ]] <ref {| |} |-``); how many list items of the disambiguation pages survive (first link text
of every ``*`` line above "See also", found in the output); and peak RSS at 1x and 10x input of the reader
alone, of the KB staging path (``tasks.kb.stage.stage_shard``: reader + Parquet parts) and of the reader with
the byte-bounded writer (``tasks.dumps.bounded_writer``).

Run: ``.venv/bin/python -m tests.bench.bench_wikipedia [--mb 19] [--scale 10]``
"""

from __future__ import annotations

import argparse
import bz2
import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
XML_DIR = "wikipedia-xml-dump"
ID_SHIFT = 10**8
MARKUP = ("{{", "}}", "[[", "]]", "<ref", "{|", "|}", "|-")
_PAGE = re.compile(rb"[ \t]*<page>.*?</page>\s*?\n", re.DOTALL)
_TITLE = re.compile(rb"<title>(.*?)</title>")
_PAGE_ID = re.compile(rb"(</ns>\s*<id>)(\d+)(</id>)")
_DISAMBIG = re.compile(r"\{\{\s*(?:disambiguation|disambig|dab|geodis|hndis)\b", re.I)
_TAIL = re.compile(r"=+\s*(?:see also|references|external links|notes|further reading)\s*=+\s*$", re.I)
_ITEM_LINK = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]")


def real_pages(data: Path) -> tuple[bytes, list[bytes]]:
    """The ``<mediawiki>``/``<siteinfo>`` header of the gensim sample and every ``<page>`` of the real files."""
    header = b""
    pages: list[bytes] = []
    for f in sorted((data / XML_DIR).glob("*.bz2")):
        xml = bz2.open(f).read()
        if b"<namespaces>" in xml[: xml.find(b"<page>")] and not header:
            header = xml[: xml.find(b"<page>")].rstrip(b" ")
        pages.extend(m.group(0) for m in _PAGE.finditer(xml))
    if not pages or not header:
        raise SystemExit(f"no real pages under {data / XML_DIR}: set LINKEDQA_DATA or --data")
    return header, pages


def rewrite(page: bytes, copy: int) -> bytes:
    """Copy ``copy`` of a page: title ``"T (copy)"``, page id + ``copy * 10^8`` (copy 0 unchanged)."""
    if copy == 0:
        return page
    page = _TITLE.sub(lambda m: b"<title>%s (%d)</title>" % (m.group(1), copy), page, count=1)
    return _PAGE_ID.sub(lambda m: m.group(1) + b"%d" % (int(m.group(2)) + copy * ID_SHIFT) + m.group(3), page,
                        count=1)


def write_dump(fh, header: bytes, pages: list[bytes], copies: int) -> tuple[int, int]:
    """Write a plain XML dump of ``copies`` copies of the page set to the binary file ``fh``; (bytes, pages).

    Page by page: the copies are never held together (``make bench-scale`` writes ~10 GB of XML at 3 M entities and
    ~35 GB at 10 M through ``bzip2``; a tuple of every copy would hold them all in memory)."""
    n = size = 0
    copied = (rewrite(p, copy) for copy in range(copies) for p in pages)
    for chunk in itertools.chain((header,), copied, (b"</mediawiki>\n",)):
        fh.write(chunk)
        size += len(chunk)
        n += 1
    return size, n - 2


def make_dump(header: bytes, pages: list[bytes], copies: int, path: Path) -> tuple[int, int]:
    """Write a plain XML dump of ``copies`` copies of the page set to ``path``; (bytes, pages)."""
    with open(path, "wb") as fh:
        return write_dump(fh, header, pages, copies)


OURS = r'''
import json, resource, sys, time
from tasks.dumps.wikipedia_xml import read_wikipedia_xml
path, out = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
n = {"articles": 0, "passages": 0, "redirects": 0, "rejects": 0}
with open(out, "w") as fh:
    for table, row in read_wikipedia_xml(path):
        n[table] += 1
        if table == "articles":
            fh.write(json.dumps({"title": row["title"], "text": row["text"]}) + "\n")
print(json.dumps({"wall": time.perf_counter() - t0, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rows": n}))
'''

STAGE = r'''
import json, resource, sys, time
from pathlib import Path
from tasks.dumps.base import Shard
from tasks.kb.plan import InputSpec
from tasks.kb.stage import stage_shard
path, out = Path(sys.argv[1]), Path(sys.argv[2])
spec = InputSpec(kind="wikipedia", path=str(path), source="bench", shards=(Shard(),))
t0 = time.perf_counter()
rec = stage_shard("bench", spec, Shard(), out)
print(json.dumps({"wall": time.perf_counter() - t0, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rows": rec["rows"]}))
'''

BOUNDED = r'''
import json, resource, sys, time
from pathlib import Path
from tasks.dumps.bounded_writer import write_parts
from tasks.dumps.wikipedia_xml import read_wikipedia_xml
path, out = Path(sys.argv[1]), Path(sys.argv[2])
t0 = time.perf_counter()
rows = write_parts(read_wikipedia_xml(path, source="bench"), out)
print(json.dumps({"wall": time.perf_counter() - t0, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rows": rows}))
'''


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_py(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter; its JSON result plus ``cpu`` (CPU-s of it and its children)."""
    c0 = _cpu()
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["cpu"] = _cpu() - c0
    return res


def run_wikiextractor(path: Path, outdir: Path) -> dict:
    """WikiExtractor ``--no-templates --processes 1 --json``; CPU of its three processes, its texts merged."""
    c0 = _cpu()
    cmd = [sys.executable, "-m", "wikiextractor.WikiExtractor", "--no-templates", "--processes", "1", "--json",
           "-q", "-b", "100M", "-o", str(outdir), str(path)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    cpu = _cpu() - c0
    merged = outdir.with_suffix(".jsonl")
    n = 0
    with open(merged, "w") as fh:
        for f in sorted(outdir.rglob("wiki_*")):
            for line in open(f, encoding="utf-8"):
                d = json.loads(line)
                fh.write(json.dumps({"title": d["title"], "text": d["text"]}) + "\n")
                n += 1
    return {"cpu": cpu, "articles": n, "out": merged}


def markup(jsonl: Path) -> tuple[dict[str, int], int]:
    """Residual markup counts and the number of words over the texts of a JSON-lines output."""
    counts = dict.fromkeys(MARKUP, 0)
    words = 0
    for line in open(jsonl, encoding="utf-8"):
        text = json.loads(line)["text"]
        words += len(text.split())
        for m in MARKUP:
            counts[m] += text.count(m)
    return counts, words


def disambiguation_items(pages: list[bytes]) -> dict[str, list[str]]:
    """Title -> first-link text of every ``*`` list line, for the real disambiguation pages."""
    import html

    out = {}
    for p in pages:
        m = re.search(rb"<text[^>]*>(.*?)</text>", p, re.DOTALL)
        if m is None or b"<redirect" in p:
            continue
        text = html.unescape(m.group(1).decode())
        if not _DISAMBIG.search(text):
            continue
        items = []
        for line in text.split("\n"):
            if _TAIL.match(line):  # "See also" & co. are dropped by both readers (not article text)
                break
            if line.startswith("*") and (lk := _ITEM_LINK.search(line)):
                items.append(" ".join((lk.group(2) or lk.group(1)).replace("'''", "").replace("''", "").split()))
        out[html.unescape(_TITLE.search(p).group(1).decode())] = items
    return out


def kept(jsonl: Path, items: dict[str, list[str]]) -> tuple[int, int]:
    """(list items found in their page's output text, all list items)."""
    texts = {}
    for line in open(jsonl, encoding="utf-8"):
        d = json.loads(line)
        if d["title"] in items:
            texts[d["title"]] = " ".join(d["text"].split())
    total = sum(len(v) for v in items.values())
    return sum(1 for t, v in items.items() for i in v if i in texts.get(t, "")), total


def _sh(*cmd: str) -> str:
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=19,
                    help="about the 1x size (MB of XML; whole copies of the 6.4 MB page set)")
    ap.add_argument("--scale", type=int, default=10, help="the larger dump is this many times the 1x one")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs of each reader on the 1x dump (best kept)")
    ap.add_argument("--skip-wikiextractor", action="store_true")
    ap.add_argument("--data", default=os.environ.get("LINKEDQA_DATA", str(ROOT.parent / "shared" / "data")))
    a = ap.parse_args()
    cpu_model = next((ln.split(":", 1)[1].strip() for ln in _sh("lscpu").splitlines()
                      if ln.startswith("Model name")), "?")
    commit = _sh("git", "rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if _sh("git", "status", "--porcelain", "--", "tasks/dumps") else ""
    print(f"commit {commit}{dirty}; CPU {cpu_model}, {os.cpu_count()} cores")
    header, pages = real_pages(Path(a.data))
    items = disambiguation_items(pages)
    with tempfile.TemporaryDirectory(prefix="lqa-bench-wiki-") as tmp:
        tmp = Path(tmp)
        small, big = tmp / "x1.xml", tmp / f"x{a.scale}.xml"
        copies = max(1, round(a.mb * 1e6 / sum(map(len, pages))))  # whole copies of the page set
        b1, n1 = make_dump(header, pages, copies, small)
        b10, n10 = make_dump(header, pages, copies * a.scale, big)
        print(f"input: {b1 / 1e6:.1f} MB ({n1:,} pages) and {b10 / 1e6:.1f} MB ({n10:,} pages) of plain XML: the "
              f"{len(pages)} real enwiki pages of {XML_DIR}/*.bz2 repeated, titles and page ids rewritten per copy")
        ours = min((run_py(OURS, str(small), str(tmp / "ours.jsonl")) for _ in range(a.repeat)),
                   key=lambda r: r["cpu"])
        print(f"linkedqa reader, 1 process:  {n1 / ours['cpu']:7.1f} pages/s per core  "
              f"{b1 / 1e6 / ours['cpu']:6.2f} MB/s per core  ({ours['cpu']:.1f} CPU-s, {ours['wall']:.1f} s wall; "
              f"{ours['rows']})", flush=True)
        wx = None
        if not a.skip_wikiextractor:
            wx = min((run_wikiextractor(small, tmp / f"wx{i}") for i in range(a.repeat)), key=lambda r: r["cpu"])
            print(f"WikiExtractor --no-templates --processes 1: {n1 / wx['cpu']:7.1f} pages/s per core  "
                  f"{b1 / 1e6 / wx['cpu']:6.2f} MB/s per core  ({wx['cpu']:.1f} CPU-s; {wx['articles']} articles)")
            print(f"ratio linkedqa / WikiExtractor per core: {wx['cpu'] / ours['cpu']:.2f}x")
        for name, path in (("linkedqa", tmp / "ours.jsonl"), ("WikiExtractor", wx["out"] if wx else None)):
            if path is None:
                continue
            counts, words = markup(path)
            per_k = sum(counts.values()) / max(words, 1) * 1000
            k, total = kept(path, items)
            detail = ", ".join(f"{m} {c}" for m, c in counts.items())
            print(f"{name:>13}: residual markup {per_k:.3f} per 1,000 words ({detail}; "
                  f"{words:,} words); disambiguation list items kept {k}/{total} ({len(items)} pages)")
        for name, code in (("reader alone", OURS), ("stage_shard (KB staging, Parquet)", STAGE),
                           ("reader + byte-bounded writer", BOUNDED)):
            rss = []
            for path in (small, big):
                out = tmp / f"o-{len(rss)}"
                r = run_py(code, str(path), str(tmp / "o.jsonl") if code is OURS else str(out))
                rss.append(r)
                shutil.rmtree(out, ignore_errors=True)
            print(f"peak RSS, {name}: {rss[0]['rss']:.0f} MiB at {b1 / 1e6:.0f} MB, {rss[1]['rss']:.0f} MiB at "
                  f"{b10 / 1e6:.0f} MB (x{rss[1]['rss'] / rss[0]['rss']:.2f} for x{b10 / b1:.0f} input; "
                  f"{b10 / 1e6 / rss[1]['cpu']:.2f} MB/s per core at {a.scale}x)", flush=True)


if __name__ == "__main__":
    main()
