"""Scale rehearsal: the real CLI end to end on synthetic dumps of growing size, and a projection.

Input, built from the REAL sample files only (nothing invented but ids and titles):

* Wikidata: the 149 real entity lines of ``wikidata-entities`` (``bench_ingest.real_lines``; famous entities,
  mean ~95 KB). The full dump's mean is ~11 KB per entity (1.3 TB / 115 M) and ~14 statements per entity
  (1.6 B / 115 M), so each real line is TRIMMED into ``VARIANTS`` seeded variants that stay valid Wikidata JSON:
  a random subset of its statements (exponential count, ~14 on average once capped by the line's own count),
  its English label / description / aliases, mul label, enwiki sitelink, then other languages' labels,
  descriptions, aliases and sitelinks in random order up to a random byte budget. Entity ``i`` is variant
  ``(i // 149) % VARIANTS`` of real line ``i % 149`` in copy ``c = i // 149``; ids follow
  ``bench_search.rewrite`` (``Q42`` -> ``Q<42 + c * 10^10>``), for the entity's own id AND every item
  reference in its claims (main snaks, qualifiers, references; ``numeric-id`` too). A reference to an item
  outside the 149 is mapped (crc32) to one of the 149 first, so every claim points to an entity of the same
  copy and the KG is connected. The enwiki sitelink title of copy ``c > 0`` gets the ``" (c)"`` suffix of
  ``bench_wikipedia.rewrite``. Written as Wikimedia publishes: ``[``, one entity per line ending ``,``, ``]``,
  gzip -6 (the ``gzip`` program, fed by a pipe). The mean bytes and statements per entity actually written are
  printed.
* Wikipedia: the real enwiki pages of ``wikipedia-xml-dump`` (``bench_wikipedia.real_pages``; articles,
  redirects, disambiguation pages), whole copies written by ``bench_wikipedia.write_dump`` (titles ``"T (c)"`` and
  page ids rewritten per copy) then bzip2 -9 as Wikimedia's ``pages-articles-multistream.xml.bz2`` (one stream
  per 100 pages, the header alone in the first; ``Multistream``), which ``kb build`` cuts at stream starts with
  no seek index; articles (pages that are not redirects) scale with entities in the
  full dump's ratio (7 M articles per 115 M entities), at least ``--min-pages`` pages.

For each size (entities, ``--sizes``; default 10000,100000,300000 = 1x/10x/30x; the >= 10 M point is
``--sizes 10000,100000,300000,10000000`` where the disk allows, refused before generating otherwise), in a fresh
``LINKEDQA_HOME`` under a temp folder (removed at the end unless ``--keep``), the real CLI runs as a user runs it
(``python -m flows.cli ...`` subprocesses, ``PREFECT_API_URL`` unset, so each command starts its own temporary
Prefect server; that fixed start-up is measured by running the first index command again once it is built, and
``kb list`` is timed once):

* ``kb build --wikidata X.json.gz --wikipedia Y.xml.bz2 --name scale<N> --shards S --workers 2`` (``--languages``
  default: en,mul), split into stage and merge with the KB manifest (``merge_seconds``, shard records); the merge
  of the articles and passages tables is its own step (``merge wikipedia``), projected by XML bytes as their
  staging is, the other tables' (``merge``) by entities;
* ``kb index --kind K`` once per kind (entity-bm25, title-bm25, passage-bm25, passage-dense, entity-dense,
  kg-duckdb, kg-oxigraph); entity-dense only up to ``--dense-max`` entities (sentence-transformers on CPU,
  ~410 texts/s here), passage-dense only up to ``--passage-dense-max`` (default: never; 100-word passages
  encode at ~10-25/s here, so its rate is measured with the product's ``encode`` on a 256-passage sample of the
  KB), both projected from the measured rate above that;
* ``kb export-nt --workers W`` to ``.nt.gz`` and ``run search-recall --dataset webqsp-el --split test --limit 200``.

Per step: wall time, peak RSS of the whole process tree (psutil, every 0.2 s, RSS of the step's process and all
its descendants summed), growth of ``LINKEDQA_HOME`` on disk (allocated blocks) and the file system's peak while
it ran (staging, spill files). Without ``--keep`` a size's inputs are removed once ``kb build`` has read them and
each index once it is measured (entity-bm25 after search-recall, which searches it), so the disk peak is the build's
(inputs, staging, KB and spill at once), not the sum of every index. Then, per step, the growth
exponent (least-squares slope of log(wall - CLI start-up) and log(peak RSS) against log(entities)) over every
size and between the two largest, and the projection to the full dump (115 M entities, 1.6 B statements, 7 M
articles) on 16 cores / 64 GB, with its assumptions printed next to the numbers: wall from the larger of the two
exponents (never below 1), RSS from the two largest sizes' (a step capped by a DuckDB memory limit stops growing
there, which an exponent over every size would not show).

Sizes longer than one sitting (10 M: ~5 h on 2 cores): ``--resume DIR`` works in ``DIR`` instead of a temp folder
and saves the figures to ``DIR/state.json`` after every step (atomically); stopped by SIGTERM or Ctrl-C (the running
step's process group is stopped, what it measured so far is saved) or by a crash, the same command goes on where it
was: finished sizes, written inputs and measured steps are not redone, an interrupted ``kb build`` continues from
its staged shards (its wall then sums the attempts, each with its start-up; the stage and merge rows come from the
KB manifest's per-shard and per-table records either way), an interrupted index is built again. Another run in the
same ``DIR``, or one with other options, is refused. Every CLI step records its commit and date, and the report says
when the sizes span several. ``--inputs-only`` writes the inputs and stops; ``--kind-max KIND=N`` builds an index
kind only up to N entities (kg-oxigraph's store needs ~7 kB per entity on disk at its peak), and the projection then
takes that step from the largest size that ran it.

Run: ``.venv/bin/python -m tests.bench.bench_scale [--sizes 10000,100000,300000] [--dense-max 10000] [--keep]
[--resume DIR] [--kind-max kg-oxigraph=3000000]`` (``make bench-scale``; long: not part of ``make bench``).
"""

from __future__ import annotations

import argparse
import bz2
import fcntl
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import psutil

from storage.catalog import auto_memory_limit, duckdb_memory_limit, memory_limit_bytes, parse_memory_limit
from tests.bench.bench_ingest import real_lines
from tests.bench.bench_search import OFFSET, rewrite
from tests.bench.bench_wikipedia import real_pages, write_dump

ROOT = Path(__file__).resolve().parents[2]
FULL_ENTITIES = 115_000_000
FULL_STATEMENTS = 1_600_000_000
FULL_ARTICLES = 7_000_000
FULL_XML_BYTES = 100e9  # enwiki pages-articles, uncompressed (~100 GB of XML)
FULL_CORES, FULL_RAM_GB = 16, 64
VARIANTS = 4
MEAN_STATEMENTS = FULL_STATEMENTS / FULL_ENTITIES  # ~13.9
INDEX_KINDS = ("entity-bm25", "title-bm25", "passage-bm25", "passage-dense", "entity-dense", "kg-duckdb",
               "kg-oxigraph")
DENSE = ("passage-dense", "entity-dense")
# How each step could use 16 cores instead of the 2 measured here (the projection's divisor), and why.
SPEEDUP = {
    "stage wikidata": (None, "per-core rate (shard CPU-seconds, 2 workers here) x 16 workers: /16 of core-s"),
    "stage wikipedia": (None, "shards of the multistream .xml.bz2 cut at its bzip2 stream starts (no seek "
                        "index): per-core rate x 16 workers: /16 of core-s"),
    "seek index wikidata": (None, "plan time, once per file: parallel decompression (rapidgzip) on every core: "
                            "/16 of core-s (decoder threads x wall)"),
    "seek index wikipedia": (None, "single-stream .xml.bz2 only (saved runs of such inputs): plan time, once per file: "
                             "parallel decompression (indexed_bzip2) on every "
                             "core: /16 of core-s (decoder threads x wall)"),
    "merge": (4.0, "DuckDB, all cores, memory_limit {mem} (spills): ASSUMED /4 for 2 -> 16 threads (50% eff.)"),
    "merge wikipedia": (4.0, "as merge (the articles and passages tables)"),
    "kb build": (None, "stage + merge as above"),
    "index entity-bm25": (3.0, "tantivy writer, --workers indexing threads and --workers processes building the "
                          "documents (1.3-1.6x of one process at 2, bench_bm25_build); the main thread then only "
                          "hands JSON to tantivy (~4.5 us/doc, ~1/5 of the 2-core wall): ASSUMED /3 for 2 -> 16"),
    "index title-bm25": (3.0, "as entity-bm25 (titles normalised in --workers processes): ASSUMED /3"),
    "index passage-bm25": (3.0, "tantivy writer, --workers indexing threads (1.3-1.5x of one at 2, "
                           "bench_bm25_build), and from 4 workers on as many document processes (main thread "
                           "~1.3 s against the 2-core wall's 7.7 s for 235k passages): ASSUMED /3 for 2 -> 16, "
                           "unmeasured above 2 cores"),
    "index passage-dense": (8.0, "torch CPU encode on all cores: ASSUMED linear, /8 for 2 -> 16 cores"),
    "index entity-dense": (8.0, "torch CPU encode on all cores: ASSUMED linear, /8 for 2 -> 16 cores"),
    "index kg-duckdb": (4.0, "DuckDB, memory_limit {mem}: ASSUMED /4 (as merge)"),
    "index kg-oxigraph": (2.0, "N-Triples parts (--workers processes) bulk-loaded by --workers threads at once "
                          "(1.06x at 2 on the 300k KB, bench_kg --build-only): ASSUMED /2, unmeasured above 2 cores"),
    "export-nt": (8.0, "--workers processes (2 here: 1.36x one process on the 300k KB, bench_kg --build-only) "
                  "writing parts, appended by one copy: ASSUMED /8 for 2 -> 16 (that efficiency holds; optimistic: "
                  "each claims worker scans the whole claims table for its hash partition)"),
    "search-recall": (1.0, "200 questions, fixed work; grows only with the index: no speed-up"),
}
# What drives each step's size: entities, or the Wikipedia text (XML bytes) or articles (the synthetic pages
# are ~57 kB of XML per article, enwiki ~14 kB: projecting text-driven steps by article count would overstate them)
DRIVER = {"stage wikipedia": "xml", "seek index wikipedia": "xml", "merge wikipedia": "xml",
          "index passage-bm25": "xml", "index passage-dense": "xml", "index title-bm25": "articles"}
#: KB tables whose merge follows the Wikipedia text: their seconds (the manifest's ``merge_seconds``) are the
#: ``merge wikipedia`` step, projected by XML bytes like their staging; the other tables' are ``merge``, by entities.
#: One ``merge`` row by entities projected the passages' sort (44% of the merge at 3 M) x40 instead of x10.
WIKIPEDIA_TABLES = ("articles", "passages")
# steps projected from their core-seconds (a per-core rate) x 16 cores
PER_CORE = ("stage wikidata", "stage wikipedia", "seek index wikidata", "seek index wikipedia")
FULL = {"entities": FULL_ENTITIES, "xml": FULL_XML_BYTES, "articles": FULL_ARTICLES}
_PH = re.compile(rb'"@@N:(\d+)@@"|@@Q:(\d+)@@|@@T@@')


# ----------------------------------------------------------------------------------------------- input
def _item_refs(obj, ids: set[int], base: list[int]) -> None:
    """Replace every item reference under ``obj`` (datavalue ``{"entity-type": "item", ...}``) by placeholders."""
    if isinstance(obj, dict):
        if obj.get("entity-type") == "item" and ("id" in obj or "numeric-id" in obj):
            n = int(obj.get("numeric-id") or str(obj.get("id"))[1:])
            if n not in ids:  # outside the 149: one of them, same copy, so the KG stays connected
                n = base[zlib.crc32(str(n).encode()) % len(base)]
            if "id" in obj:
                obj["id"] = f"@@Q:{n}@@"
            if "numeric-id" in obj:
                obj["numeric-id"] = f"@@N:{n}@@"
            return
        for v in obj.values():
            _item_refs(v, ids, base)
    elif isinstance(obj, list):
        for v in obj:
            _item_refs(v, ids, base)


def trim(entity: dict, rng: random.Random, ids: set[int], base: list[int]) -> tuple[dict, int]:
    """A smaller, still valid copy of a real entity (see the module docstring); (entity, statements kept)."""
    claims = [(pid, st) for pid, sts in entity.get("claims", {}).items() for st in sts]
    n_st = min(len(claims), max(1, round(rng.expovariate(1 / (MEAN_STATEMENTS * 1.15)))))  # cap: ~x1.15
    keep = rng.sample(claims, n_st)
    out: dict = {"type": entity["type"], "id": f"@@Q:{entity['id'][1:]}@@", "labels": {}, "descriptions": {},
                 "aliases": {}, "claims": {}, "sitelinks": {}}
    for pid, st in keep:
        st = json.loads(json.dumps(st))
        _item_refs(st, ids, base)
        out["claims"].setdefault(pid, []).append(st)
    for block in ("labels", "descriptions", "aliases"):
        for lang in ("en", "mul"):
            if lang in entity.get(block, {}):
                out[block][lang] = entity[block][lang]
    sitelinks = entity.get("sitelinks", {})
    if "enwiki" in sitelinks:
        out["sitelinks"]["enwiki"] = {**sitelinks["enwiki"], "title": sitelinks["enwiki"]["title"] + "@@T@@"}
    extra = [(b, k) for b in ("labels", "descriptions", "aliases", "sitelinks") for k in entity.get(b, {})
             if k not in out[b]]
    rng.shuffle(extra)
    budget = len(json.dumps(out)) + rng.uniform(1000, 6000)
    size = len(json.dumps(out))
    for b, k in extra:
        if size >= budget:
            break
        out[b][k] = entity[b][k]
        size += len(json.dumps(entity[b][k])) + len(k) + 4
    return out, n_st


class Template:
    """One trimmed entity as byte segments around its id placeholders; :meth:`render` writes copy ``c``."""

    def __init__(self, entity: dict, statements: int):
        raw = json.dumps(entity, separators=(",", ":")).encode()
        self.statements = statements
        self.segments: list[bytes] = []
        self.ops: list[tuple[str, int]] = []
        pos = 0
        for m in _PH.finditer(raw):
            self.segments.append(raw[pos:m.start()])
            if m.group(1):
                self.ops.append(("N", int(m.group(1))))
            elif m.group(2):
                self.ops.append(("Q", int(m.group(2))))
            else:
                self.ops.append(("T", 0))
            pos = m.end()
        self.segments.append(raw[pos:])

    def render(self, copy: int) -> bytes:
        """Copy ``copy``: ids ``+ copy * OFFSET`` (``bench_search.rewrite``), enwiki title ``"T (copy)"``."""
        shift = copy * OFFSET
        title = b"" if copy == 0 else b" (%d)" % copy
        parts = [self.segments[0]]
        for (kind, n), seg in zip(self.ops, self.segments[1:], strict=True):
            parts.append(b"Q%d" % (n + shift) if kind == "Q" else b"%d" % (n + shift) if kind == "N" else title)
            parts.append(seg)
        return b"".join(parts)


def templates(data: Path, seed: int) -> list[list[Template]]:
    """``VARIANTS`` trimmed templates of every distinct real entity, seeded."""
    entities, seen = [], set()
    for line in real_lines(data):  # the two sample files share a few entities (Q31, Q278, Q288): once each
        e = json.loads(line)
        if e["id"] not in seen:
            seen.add(e["id"])
            entities.append(e)
    base = [int(e["id"][1:]) for e in entities if e["id"].startswith("Q")]
    ids = set(base)
    assert rewrite("Q42", 3) == f"Q{42 + 3 * OFFSET}"  # the id scheme rendered below
    out = []
    for i, e in enumerate(entities):
        rng = random.Random(seed * 1_000_003 + i)
        out.append([Template(*trim(e, rng, ids, base)) for _ in range(VARIANTS)])
    return out


#: Rounds of the speed probe (~0.7 s each on a 2-core EPYC)
PROBE_ROUNDS = 8


def speed_probe(tpl: list[list[Template]]) -> float:
    """Seconds of a fixed single-thread CPU workload, best of 3: render and parse every template ``PROBE_ROUNDS``
    times (the JSON work staging does). Run before each CLI step, so that steps measured hours or days apart (a
    ``--resume`` over sittings) can be compared: this machine's speed varies by up to ~35% from one hour to the
    next (the staging core-seconds of one 1 M input: 228 and 313 on the same day)."""
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for c in range(1, PROBE_ROUNDS + 1):
            for variants in tpl:
                for t in variants:
                    json.loads(t.render(c))
        best = min(best, time.perf_counter() - t0)
    return best


def write_wikidata(tpl: list[list[Template]], n: int, path: Path) -> dict:
    """``n`` entities as a Wikimedia-style ``[ ... ]`` dump piped through ``gzip -6``; sizes and statements."""
    k = len(tpl)
    plain = statements = 0
    with open(path, "wb") as out:
        gz = subprocess.Popen(["gzip", "-6", "-c"], stdin=subprocess.PIPE, stdout=out)
        buf: list[bytes] = [b"[\n"]
        for i in range(n):
            copy, j = divmod(i, k)
            t = tpl[j][copy % VARIANTS]
            line = t.render(copy)
            buf.append(line + (b",\n" if i < n - 1 else b"\n"))
            plain += len(line)
            statements += t.statements
            if len(buf) >= 2000:
                gz.stdin.write(b"".join(buf))
                buf = []
        buf.append(b"]\n")
        gz.stdin.write(b"".join(buf))
        gz.stdin.close()
        if gz.wait():
            raise RuntimeError("gzip failed")
    return {"entities": n, "json_bytes": plain, "statements": statements, "gz_bytes": path.stat().st_size}


def page_copies(n: int, pages: list[bytes], min_pages: int) -> int:
    """Copies of the real page set for ``n`` entities: ARTICLES (pages that are not redirects) in the full dump's
    ratio (7 M per 115 M entities), and at least ``min_pages`` pages."""
    articles = sum(1 for p in pages if b"<redirect" not in p)
    return max(1, math.ceil(min_pages / len(pages)), math.ceil(n * FULL_ARTICLES / FULL_ENTITIES / articles))


class Multistream:
    """A binary sink that bzip2-compresses what it is given as Wikimedia writes
    ``pages-articles-multistream.xml.bz2``: the first write (the ``<siteinfo>`` header) as a stream of its own,
    then one stream per ``per_stream`` writes (``write_dump`` writes one page per call), the rest and the closing
    tag on :meth:`close`. :meth:`cancel` makes the next write fail (the writer thread then stops)."""

    def __init__(self, fh, per_stream: int = 100, level: int = 9):
        self._fh, self._per, self._level = fh, per_stream, level
        self._buf: list[bytes] = []
        self._header = True
        self.cancelled = False

    def write(self, chunk: bytes) -> None:
        if self.cancelled:
            raise OSError("cancelled")
        self._buf.append(chunk)
        if self._header or len(self._buf) >= self._per:
            self._flush()
            self._header = False

    def _flush(self) -> None:
        if self._buf:
            self._fh.write(bz2.compress(b"".join(self._buf), self._level))  # libbz2 runs without the GIL
            self._buf = []

    def close(self) -> None:
        self._flush()

    def cancel(self) -> None:
        self.cancelled = True


class WikipediaWriter:
    """Whole copies of the real pages (``bench_wikipedia.write_dump``) written into ``path`` as Wikimedia's
    multistream dump (:class:`Multistream`: bzip2 -9, one stream per 100 pages), by a thread, while the caller
    writes the Wikidata dump (the plain XML never lands on disk: ~35 GB at 10 M entities); :meth:`wait` gives
    (pages, plain XML bytes)."""

    def __init__(self, header: bytes, pages: list[bytes], copies: int, path: Path):
        self._out = open(path, "wb")
        self._sink = Multistream(self._out)
        self.result: tuple[int, int] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._write, args=(header, pages, copies), daemon=True)
        self._thread.start()

    def _write(self, header: bytes, pages: list[bytes], copies: int) -> None:
        try:
            self.result = write_dump(self._sink, header, pages, copies)
            self._sink.close()
        except BaseException as e:  # noqa: BLE001 - raised again by wait()
            self.error = e

    def stop(self) -> None:
        """Make the writer fail at its next page, and join it."""
        self._sink.cancel()
        self._thread.join()
        self._out.close()

    def wait(self) -> tuple[int, int]:
        """Join the writer; (pages, plain XML bytes), or RuntimeError."""
        self._thread.join()
        self._out.close()
        if self.error is not None or self.result is None:
            raise RuntimeError(f"writing the Wikipedia dump failed: {self.error!r}")
        size, written = self.result
        return written, size


#: Disk per entity for the up-front check, from the disk peaks this bench measures (``make bench-scale``,
#: 10k to 3 M entities; docs/benchmarks/scale.md): the inputs (compression ratios of ``gzip -6`` on the JSON and
#: ``bzip2 -9`` on the XML: 1.77 and 0.96 kB per entity), ``LINKEDQA_HOME`` at the peak of ``kb build`` (staging, KB
#: and DuckDB's spill at once, the inputs still there: 2.1 / 2.5 / 3.2 kB per entity at 300k / 1 M / 3 M, growing
#: with the spill), at the peak of the largest index step (kg-oxigraph's N-Triples parts and store before
#: compaction, 5.4 / 5.7 kB) over the KB (1.1 kB) and the kept search index (0.2 kB), and with every index kept
#: (``--keep``, 6.3 kB). The two peaks are the 3 M figures grown to 10 M at their exponents between 1 M and 3 M
#: (1.2 and 1.05), so that the >= 10 M point is refused up front rather than failing hours in.
GZ_RATIO, BZ2_RATIO = 6.2, 3.6
BUILD_PEAK = 4.0e3
#: kb build's peak at a DuckDB limit of 4 GB or more (the merge spills less): ``auto`` on 24 GB (6300MB)
#: peaked at 2.1 / 2.4 kB per entity at 1 M / 3 M, grown to 10 M at their exponent (1.13): 2.8 kB
BUILD_PEAK_LARGE_LIMIT = 3.0e3
INDEX_PEAK = 7.4e3
#: The largest index peak where kg-oxigraph does not run (``--kind-max kg-oxigraph=N`` below the size):
#: passage-bm25, 2.3 kB per entity at 3 M, over the KB and the kept search index
OTHER_INDEX_PEAK = 4.0e3
HOME_KEPT = 6.3e3
#: Steps that ``--resume`` continues instead of starting over (``kb build`` keeps its staged shards), so the walls of
#: their interrupted attempts add up (:func:`join_attempts`); any other interrupted step is run again whole
CONTINUED = ("kb build",)
#: The index ``run search-recall`` searches (its default source): kept until that run, without ``--keep``
SEARCH_INDEX = "entity-bm25"


def drop_index(home: Path, version: str, kind: str) -> int:
    """Remove a measured index of ``kind`` (without ``--keep``: the indexes of a size are not held together, so the
    disk peak is the KB plus its largest index, not their sum); the bytes it held."""
    from storage.layout import index_kind_dir

    folder = index_kind_dir(version, kind, home)
    size = du(folder) if folder.exists() else 0
    shutil.rmtree(folder, ignore_errors=True)
    return size


def seek_index_record(home: Path, name: str) -> dict | None:
    """The done marker of the seek index ``kb build`` made for input file ``name`` (wall seconds, decoder threads,
    decompressed size), or ``None`` (not indexed: one shard)."""
    from storage.done import read_done

    for folder in sorted((home / "cache" / "dump-index").glob("*")):
        done = read_done(folder)
        if done and Path(done.get("input", "")).name == name:
            return done
    return None


# ----------------------------------------------------------------------------------------------- measuring
def du(path: Path) -> int:
    """Bytes allocated under ``path`` (blocks, as ``du``)."""
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_blocks * 512
            except OSError:
                pass
    return total


def _tree_rss(proc: psutil.Process) -> int:
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_step(argv: list[str], env: dict, log: Path, home: Path, live: dict | None = None) -> dict:
    """Run one CLI command in its own process group; wall, peak tree RSS, disk growth of ``home`` (net, and its
    peak while the step ran: the file system's used bytes, every 0.2 s, so DuckDB's spill files, a build's staging
    and files the step writes outside ``home`` count; so would another program writing to the same disk), rc.

    ``live``, when given, holds the figures so far (``wall``, ``rss``, ``disk_peak``, ``home0``: ``home``'s bytes
    at the start), updated every 0.2 s: what an interrupted step had measured. The output is appended to ``log``
    after a line naming the attempt, so a step run again (``--resume``) keeps the earlier attempt's output."""
    d0 = du(home)
    fs0 = shutil.disk_usage(home).used
    fs_peak = fs0
    t0 = time.perf_counter()
    live = {} if live is None else live
    with open(log, "ab") as fh:
        fh.write(f"=== bench_scale: {time.strftime('%F %T %Z')}: {' '.join(argv)}\n".encode())
        fh.flush()
        p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        ps = psutil.Process(p.pid)
        peak = 0
        try:
            while p.poll() is None:
                peak = max(peak, _tree_rss(ps))
                fs_peak = max(fs_peak, shutil.disk_usage(home).used)
                live.update(wall=time.perf_counter() - t0, rss=peak, disk_peak=fs_peak - fs0, home0=d0)
                time.sleep(0.2)
        except BaseException:  # Ctrl-C: the whole step, Prefect server and workers included
            _killpg(p.pid)
            p.wait()
            raise
    wall = time.perf_counter() - t0
    left = _group_members(p.pid)
    if left:  # a step must not leave processes behind (e.g. its temporary Prefect server); 5 s of grace
        time.sleep(5)
        left = _group_members(p.pid)
    if left:
        print(f"    WARNING: {len(left)} process(es) of this step still alive 5 s after it exited: "
              f"{[_cmd(q) for q in left]}; killed", flush=True)
        _killpg(p.pid)
    return {"wall": wall, "rss": peak, "disk": du(home) - d0, "disk_peak": fs_peak - fs0, "rc": p.returncode,
            "left_behind": len(left), "home0": d0}


def join_attempts(r: dict, earlier: list[dict]) -> dict:
    """The figures of a step that ``--resume`` CONTINUED (``kb build``: its finished shards are kept) after
    ``earlier`` interrupted attempts: wall summed (each attempt's start-up included), peak RSS the largest, disk
    net from the first attempt's start, disk peak the largest over that start."""
    if not earlier:
        return r
    home0 = earlier[0].get("home0", r["home0"])
    lost = r["home0"] - home0  # what the earlier attempts left in home (staged shards), net of their start
    return {**r, "wall": r["wall"] + sum(e.get("wall", 0.0) for e in earlier),
            "rss": max([r["rss"], *(e.get("rss", 0) for e in earlier)]),
            "disk": r["disk"] + lost,
            "disk_peak": max([r["disk_peak"] + lost, *(e.get("disk_peak", 0) for e in earlier)]),
            "home0": home0, "attempts": 1 + len(earlier)}


def save_state(path: Path, startup: float, dense_rate: dict, results: dict, extra: dict | None = None) -> None:
    """Write the measured figures as JSON (the ``--save`` / ``--load`` format), atomically (temp file + rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"commit": _sh("git", "rev-parse", "--short", "HEAD"), "startup": startup,
                               "dense_rate": dense_rate, "results": results, **(extra or {})},
                              indent=1, default=str))
    os.replace(tmp, path)


def _cmd(q: psutil.Process) -> str:
    try:
        return " ".join(q.cmdline())[:160]
    except psutil.Error:
        return "?"


def _group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for q in psutil.process_iter():
        try:
            if os.getpgid(q.pid) == pgid:
                out.append(q)
        except (OSError, psutil.Error):
            pass
    return out


def _killpg(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(1)


#: Lines of nanobind's report of objects alive at interpreter exit (DuckDB's binding, after an exception): up to
#: ~60 lines that would push the step's own error out of the tail shown.
_NANOBIND_NOISE = re.compile(r"^(nanobind: |See https://nanobind| - (leaked |\.\.\. skipped))")


def fail(name: str, argv: list[str], log: Path, rc: int) -> None:
    """Print a failed step's command, the last 40 lines of its output (nanobind's leak report left out) and where
    the whole log is."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if not _NANOBIND_NOISE.match(ln)]
    print(f"  FAILED: {name} (exit {rc}): {' '.join(argv)}\n  last 40 lines of its output ({log}; kept with "
          "--keep):")
    for line in lines[-40:]:
        print("    | " + line)


SAMPLE = 256
PASSAGE_RATE = r'''
import glob, json, sys, time
import pyarrow.parquet as pq
from tasks.search.passages import encode
files = sorted(glob.glob(sys.argv[1] + "/**/*.parquet", recursive=True))
texts = pq.read_table(files[0], columns=["text"]).column("text").to_pylist()[: int(sys.argv[2])]
encode(texts[:8])  # model load and warm-up, not timed
t0 = time.perf_counter()
encode(texts)
print(json.dumps({"n": len(texts), "s": time.perf_counter() - t0}))
'''


def passage_rate(version: str, env: dict, rows: dict, xml_plain: int) -> tuple[float, float]:
    """(passages/s of the product's ``encode`` on ``SAMPLE`` of the KB's passages, passages per XML byte)."""
    folder = Path(env["LINKEDQA_HOME"]) / "kb" / version / "passages"
    out = subprocess.run([sys.executable, "-c", PASSAGE_RATE, str(folder), str(SAMPLE)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["n"] / r["s"], rows.get("passages", 0) / xml_plain


# ----------------------------------------------------------------------------------------------- report
def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log(y) against log(x) (None with fewer than 2 usable points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 2 * 86400:
        return f"{s / 86400:,.0f} d"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s"


def _fmt_b(b: float | None) -> str:
    if b is None:
        return "-"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= f:
            return f"{b / f:.1f} {unit}"
    return f"{b:.0f} B"


def _fmt_e(e: float | None) -> str:
    return "-" if e is None else f"{e:.2f}"


def _exp_word(e: float | None) -> str:
    if e is None:
        return "n/a"
    if e > 1.15:
        return "WORSE THAN LINEAR"
    if e >= 0.85:
        return "linear"
    return "sub-linear"


MIN_NET = 2.0  # seconds of wall net of start-up below which a size does not enter the wall exponent


def stage_steps(wd_shards: list[dict], wp_shards: list[dict], workers: int, json_bytes: int, pages: int,
                xml_bytes: int) -> dict[str, dict]:
    """The ``stage wikidata`` and ``stage wikipedia`` steps of one size from the KB manifest's shard records.

    Both inputs' shards run in ``kb build``'s one pool of ``workers`` processes (``flows/build_kb.py``), so each
    row's wall is its core-seconds over the workers, and the two rows add up to the staging part of ``kb build``'s
    wall (the projection sums them). Records saved before this rule (the Wikipedia row's wall was its longest
    shard: 20 s at 10 M for ~14 min of staging) are re-derived by :func:`restage_wikipedia`.
    """
    core = sum(s["seconds"] for s in wd_shards)
    out = {"stage wikidata": {
        "wall": core / workers, "core_s": core, "workers": workers, "startup": 0.0,
        "rss": max(s.get("peak_rss_mb", 0) for s in wd_shards) * 2**20,
        "note": f"{len(wd_shards)} shards, {core:.1f} core-s, {json_bytes / 1e6 / core:.1f} MB/s per core (shard "
                "records; RSS = largest shard)"}}
    if wp_shards:
        core = sum(s["seconds"] for s in wp_shards)
        longest = max(s["seconds"] for s in wp_shards)
        out["stage wikipedia"] = {
            "wall": core / workers, "core_s": core, "workers": workers, "longest": longest, "startup": 0.0,
            "shards": len(wp_shards), "rss": max(s.get("peak_rss_mb", 0) for s in wp_shards) * 2**20,
            "note": f"{len(wp_shards)} {_shard_kind(wp_shards)}, {core:.1f} core-s ({xml_bytes / 1e6 / core:.1f} MB/s "
                    f"per core), longest {longest:.1f} s; {pages:,} pages, {xml_bytes / 1e6:.0f} MB XML"}
    return out


def _shard_kind(shards: list[dict]) -> str:
    """How ``kb build`` cut a file, from its shard records: at bzip2 stream starts (they record their
    ``compressed_range``) or by byte range."""
    return "stream shards (multistream)" if any("compressed_range" in s for s in shards) else "byte-range shards"


def restage_wikipedia(res: dict) -> None:
    """A ``stage wikipedia`` step saved with its longest shard as wall gets core-seconds over workers instead
    (:func:`stage_steps`; the workers from the ``stage wikidata`` row of the same size, whose wall was always
    core-seconds over workers). A record already re-derived is left as it is."""
    steps = res["steps"]
    wp, wd = steps.get("stage wikipedia"), steps.get("stage wikidata")
    if not wp or "longest" in wp or not wp.get("core_s") or not wd or not wd.get("wall"):
        return
    workers = round(wd["core_s"] / wd["wall"])
    wp.update(longest=wp["wall"], wall=wp["core_s"] / workers, workers=workers,
              note=f"{wp.get('shards', '?')} byte-range shards, {wp['core_s']:.1f} core-s, longest {wp['wall']:.1f} "
                   f"s (re-derived: core-s / {workers} workers); " + wp.get("note", "").partition("; ")[2]
                   .partition("; ")[2])


def split_merge(res: dict) -> None:
    """Split a size's ``merge`` step in place: the Wikipedia tables' seconds (:data:`WIKIPEDIA_TABLES`) become the
    ``merge wikipedia`` step (right after it), the rest stay ``merge``.

    The per-table seconds are the record's ``tables``; a record saved before the split has only its note's four
    largest tables (one decimal), which held both Wikipedia tables at every size measured so far. A record already
    split, or one without them, is left as it is.
    """
    steps = res["steps"]
    m = steps.get("merge")
    if not m or "merge wikipedia" in steps or m.get("wall") is None:
        return
    tables = m.get("tables")
    if tables is None:
        tables = {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+)", m.get("note", "").partition(":")[2])}
    if not all(t in tables for t in WIKIPEDIA_TABLES):
        if "note" not in m:
            m["note"] = "manifest merge_seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in tables.items())
        return
    wp = sum(tables[t] for t in WIKIPEDIA_TABLES)
    rest = sorted(((k, v) for k, v in tables.items() if k not in WIKIPEDIA_TABLES), key=lambda kv: -kv[1])
    base = {k: m[k] for k in ("startup", "rss", "probe_s") if k in m}
    out = {}
    for name, r in steps.items():
        if name != "merge":
            out[name] = r
            continue
        out["merge"] = {**base, "wall": max(m["wall"] - wp, 0.0), "tables": dict(rest),
                        "note": "Wikidata tables (manifest merge_seconds): " + ", ".join(
                            f"{k} {v:.1f}" for k, v in rest[:3])}
        out["merge wikipedia"] = {**base, "wall": wp, "tables": {t: tables[t] for t in WIKIPEDIA_TABLES},
                                  "note": "manifest merge_seconds: " + ", ".join(
                                      f"{t} {tables[t]:.1f}" for t in WIKIPEDIA_TABLES)}
    res["steps"] = out


def _driver(res: dict, step: str) -> float:
    kind = DRIVER.get(step, "entities")
    if kind == "xml":
        return res["input"]["xml_plain"]
    if kind == "articles":
        return res.get("rows", {}).get("articles") or res["input"]["pages"]
    return res["input"]["entities"]


def _probe(res: dict, step: str) -> float | None:
    """The speed probe of ``step`` in one size: the median of its own and its neighbours' (the steps run before and
    after it), so that one probe's noise is not read as the machine's speed. A single 2-s probe can be an outlier:
    before 3 M's entity-bm25 it took 0.641 s against 0.40-0.46 s before every other step of both runs, which made
    that step's exponent between 3 M and 10 M 1.37 against 0.99 in seconds."""
    names = [k for k, r in res["steps"].items() if r.get("probe_s")]
    if step not in names:
        return res["steps"][step].get("probe_s")
    i = names.index(step)
    return statistics.median(res["steps"][k]["probe_s"] for k in names[max(i - 1, 0):i + 2])


def growth(results: dict[int, dict], steps: list[str]) -> dict[str, dict]:
    """Growth exponents of each step over the sizes that ran it (x: the step's :data:`DRIVER`).

    Per step: ``wall`` (net of start-up, over the sizes with >= ``MIN_NET`` s net) and ``wall_last_two`` (the
    two largest of those), in units of the speed probe run before the step where the sizes have one
    (``norm_all``, ``norm_two``); ``rss`` and ``rss_last_two``; ``kept`` and ``sizes`` (how many sizes entered).
    """
    sizes = sorted(results)
    out: dict[str, dict] = {}
    for s in steps:
        ns = [n for n in sizes if s in results[n]["steps"] and results[n]["steps"][s].get("wall") is not None]
        if not ns:
            continue
        xs = [_driver(results[n], s) for n in ns]
        net = [results[n]["steps"][s]["wall"] - results[n]["steps"][s].get("startup", 0) for n in ns]
        rss = [results[n]["steps"][s].get("rss") for n in ns]
        keep = [i for i, t in enumerate(net) if t >= MIN_NET]  # below, the start-up's noise is the signal
        # in units of the speed probe run before the step, where the sizes have one: a slower hour must not read as
        # growth. It matters between the two largest sizes (a 35% slower hour there adds 0.25 to an exponent over
        # half a decade, 0.04 over three decades), which a --resume may measure on different days
        probes = [_probe(results[n], s) for n in ns]
        unit = [t / p if p else t for t, p in zip(net, probes, strict=True)]
        norm_all = bool(keep) and all(probes[i] for i in keep)
        norm_two = len(keep) > 2 and all(probes[i] for i in keep[-2:])
        ys = unit if norm_all else net
        ew = slope([xs[i] for i in keep], [ys[i] for i in keep])
        # between the two largest sizes: a step that reaches a memory limit stops growing there (an exponent
        # over every size would still project growth), and one that starts spilling grows faster there
        ys = unit if norm_two else net
        ew2 = slope([xs[i] for i in keep[-2:]], [ys[i] for i in keep[-2:]]) if len(keep) > 2 else None
        out[s] = {"wall": ew, "wall_last_two": ew2, "rss": slope(xs, rss),
                  "rss_last_two": slope(xs[-2:], rss[-2:]) if len(ns) > 2 else None,
                  "norm_all": norm_all, "norm_two": norm_two, "kept": len(keep), "sizes": len(ns)}
    return out


#: A step gets a disk row in :func:`markdown_table` when its disk peak reached this at some size
DISK_ROW_MIN = 1e9


def markdown_table(results: dict[int, dict]) -> str:
    """The per-step figures as a Markdown table (docs/benchmarks/scale.md): wall / peak RSS per size, an index
    step's own build seconds in brackets, and the growth exponents of wall (over every size, and in brackets
    between the two largest) and of RSS (over every size);
    below a step whose disk peak reached ``DISK_ROW_MIN``, its disk peak and net growth per size.
    """
    sizes = sorted(results)
    steps: list[str] = []
    for n in sizes:
        steps += [s for s, r in results[n]["steps"].items() if s not in steps and r.get("wall") is not None]
    g = growth(results, steps)
    head = ["step", *(f"{n:,}" for n in sizes), "exponent of wall (last two) / RSS"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(sizes) + "---|"]
    for s in steps:
        cells = []
        for n in sizes:
            r = results[n]["steps"].get(s) or {}
            if r.get("wall") is None:
                cells.append("-")
                continue
            own = f" [{r['own_s']:.1f}]" if r.get("own_s") is not None else ""
            rss = f" / {_fmt_b(r['rss'])}" if r.get("rss") else ""
            cells.append(f"{_fmt_s(r['wall'])}{own}{rss}")
        e = g.get(s, {})
        expo = (f"{_fmt_e(e.get('wall'))} ({_fmt_e(e.get('wall_last_two'))}) / {_fmt_e(e.get('rss'))}"
                if e else "-")
        lines.append(f"| {s} | " + " | ".join(cells) + f" | {expo} |")
        peaks = [(results[n]["steps"].get(s) or {}).get("disk_peak") for n in sizes]
        if max((b or 0 for b in peaks), default=0) >= DISK_ROW_MIN:  # where the disk, not the result, grows
            finals = [(results[n]["steps"].get(s) or {}).get("disk") for n in sizes]
            lines.append(f"| {s}: disk peak (net growth) | " + " | ".join(
                "-" if b is None else f"{_fmt_b(b)} ({_fmt_b(f)})" for b, f in zip(peaks, finals, strict=True))
                + " | |")
    return "\n".join(lines)


#: The steps of a searchable KB (the issue's "<= 2 hours" target): the KB, its BM25 indexes, the DuckDB KG store
#: and one search-recall run; not the dense indexes, the N-Triples export nor Oxigraph's store (prefixes of step names)
SEARCHABLE = ("stage ", "seek index ", "merge", "index entity-bm25", "index title-bm25", "index passage-bm25",
              "index kg-duckdb", "search-recall")


def searchable_kb(projected: dict[str, float]) -> float:
    """Projected seconds of the searchable KB (:data:`SEARCHABLE`) from each step's projected seconds; the stage
    rows add up (one pool of workers)."""
    return sum(v for k, v in projected.items() if k.startswith(SEARCHABLE))


def report(results: dict[int, dict], startup: float, dense_rate: dict, markdown: bool = False) -> None:
    """Per-step tables, growth exponents and the full-dump projection."""
    sizes = sorted(results)
    for res in results.values():
        split_merge(res)  # sizes saved before the split (--load, --resume)
        restage_wikipedia(res)  # and before the Wikipedia stage's wall was its core-seconds over the workers
        for r in res["steps"].values():
            if r.get("cli"):  # an index step's own seconds (its log line) leave the rest of its wall as start-up
                own = r.get("own_s")
                r["startup"] = max(r["wall"] - own, 0.0) if own is not None and r.get("wall") else startup
    steps: list[str] = []
    for n in sizes:
        for s in results[n]["steps"]:
            if s not in steps:
                steps.append(s)
    runs = {n: sorted({f"{r['commit']} {r['date']}" for r in results[n]["steps"].values() if r.get("commit")})
            for n in sizes}
    speed = {n: (results[n]["steps"].get("kb build") or {}).get("probe_s") for n in sizes}
    known = [v for v in speed.values() if v]
    if known:
        print("\nspeed probe before kb build (s; lower = faster; wall* exponents below divide by the probe before "
              "each step): " + ", ".join(f"{n:,}: {v:.2f}" if v else f"{n:,}: -" for n, v in speed.items())
              + (f"; the machine's speed varied {max(known) / min(known) - 1:.0%} between sizes"
                 if len(known) > 1 else ""))
    if len({x for v in runs.values() for x in v}) > 1:  # --load'ed sizes, or a --resume over several sittings
        print("\nNOTE: the sizes were measured on several commits or days (the CLI steps' commit and date; this "
              "machine's speed varies ~15% from day to day, which a 2-point exponent amplifies): "
              + "; ".join(f"{n:,}: {', '.join(v) or 'not recorded'}" for n, v in runs.items()))
    print("\n== per step: wall / peak RSS (process tree) / disk growth of LINKEDQA_HOME (net, and the peak while the "
          "step ran) ==")
    print(f"(start-up of a CLI step: {startup:.1f} s (the same index command again, already built); it is in every "
          "CLI step's wall below; an index step's exponent and projection use its own build time from its log)")
    for s in steps:
        print(f"\n{s}")
        print(f"  {'entities':>11} {'wall':>10} {'peak RSS':>10} {'disk':>10} {'disk peak':>10}  note")
        for n in sizes:
            r = results[n]["steps"].get(s)
            if r is None:
                continue
            print(f"  {n:>11,} {_fmt_s(r.get('wall')):>10} {_fmt_b(r.get('rss')):>10} {_fmt_b(r.get('disk')):>10} "
                  f"{_fmt_b(r.get('disk_peak')):>10}  {r.get('note', '')}")
    print("\n== growth exponents over the sizes run (slope of log y vs log entities; ~1.0 = linear; "
          "wall is net of the start-up; 'last two': between the two largest sizes, the regime the projection "
          "continues from; * = in units of the speed probe run before each step, where those sizes have one) ==")
    expo: dict[str, tuple[float | None, float | None]] = {}
    for s, g in growth(results, steps).items():
        ew, ew2, er, er2 = g["wall"], g["wall_last_two"], g["rss"], g["rss_last_two"]
        # the projection never scales better than linearly, nor better than between its two largest sizes
        expo[s] = (max((e for e in (ew, ew2) if e is not None), default=None), er2 if er2 is not None else er)
        flag_r = ""
        if expo[s][1] is not None and expo[s][1] >= 0.2:
            flag_r = "  RSS GROWS WITH INPUT"
        elif er is not None and er >= 0.2:
            flag_r = "  RSS grew, FLAT between the two largest sizes"
        print(f"  {s:<22} wall{'*' if g['norm_all'] else ' '}{_fmt_e(ew):>5} ({_exp_word(ew)}; last two "
              f"{_fmt_e(ew2)}{'*' if g['norm_two'] else ''})   "
              f"peak RSS {_fmt_e(er):>5} "
              f"(last two {_fmt_e(er2)}){flag_r}   [{g['kept']}/{g['sizes']} sizes with >= {MIN_NET:.0f} s net; "
              f"x = {DRIVER.get(s, 'entities')}]")
    big = sizes[-1]
    res = results[big]
    scale = FULL_ENTITIES / big
    xscale = FULL_XML_BYTES / res["input"]["xml_plain"]
    print(f"\n== projection to the full dump ({FULL_ENTITIES / 1e6:.0f} M entities, {FULL_STATEMENTS / 1e9:.1f} B "
          f"statements, {FULL_ARTICLES / 1e6:.0f} M articles) on {FULL_CORES} cores / {FULL_RAM_GB} GB ==")
    print(f"from the largest size run ({big:,} entities, x{scale:,.0f}; its statements/entity "
          f"{res['input']['statements'] / big:.1f} vs {MEAN_STATEMENTS:.1f} in the full dump); "
          "wall_full = (wall - start-up) x scale^max(exponent, exponent of the last two, 1) / speed-up + start-up; "
          "RSS_full = RSS x scale^(RSS exponent of the last two sizes); "
          f"scale = x{scale:,.0f} entities, or x{xscale:,.0f} XML bytes ({FULL_XML_BYTES / 1e9:.0f} GB) for the "
          "Wikipedia-text steps, or x{:,.0f} articles for title-bm25".format(
              FULL_ARTICLES / max(res.get("rows", {}).get("articles", 1), 1)))
    print(f"  {'step':<22} {'exp':>5} {'2 cores here':>12} {'speed-up':>8} {'16 cores':>10} {'RSS':>10}  assumption")
    total = dense_total = 0.0
    projected: dict[str, float] = {}  # step -> projected seconds, for the subtotals below
    for s in steps:
        # the largest size that measured this step (a step skipped at the largest size, e.g. kg-oxigraph where the
        # disk is short, is projected from the largest size that ran it, and says so)
        ran = [n for n in sizes if (results[n]["steps"].get(s) or {}).get("wall") is not None]
        src = ran[-1] if ran else big
        res = results[src]
        r = res["steps"].get(s)
        ew, er = expo.get(s, (None, None))
        sp, why = SPEEDUP.get(s, (1.0, "no speed-up assumed"))
        if src != big:
            why = f"FROM THE {src:,} SIZE (not run at {big:,}); {why}"
        why = why.replace("{mem}", (res.get("memory_limit") or "not recorded (2GB)")
                          + f" here; auto gives {auto_memory_limit(1, FULL_RAM_GB * 10**9)} on {FULL_RAM_GB} GB, so it "
                          "would spill less there")
        if s == "kb build":
            continue  # its parts are projected separately
        if r is None or r.get("wall") is None:
            if s.startswith("index ") and s[6:] in DENSE and s[6:] in dense_rate:
                rate, texts_per_entity = dense_rate[s[6:]]
                texts = texts_per_entity * (FULL_ENTITIES if s[6:] == "entity-dense" else FULL_XML_BYTES)
                full = texts / rate / sp
                total += full
                dense_total += full
                print(f"  {s:<22} {'1.00':>5} {'not run':>12} {sp:>8.0f} {_fmt_s(full):>10} {'-':>10}  "
                      f"{rate:.0f} texts/s measured here, {texts / 1e6:.0f} M texts; {why}")
            continue
        # measured sub-linear exponents come from fixed costs amortising over 2-3 small sizes; they do not go on
        # for another 2-3 decades, so the projection never scales better than linearly
        e = max(ew, 1.0) if ew is not None else 1.0
        k = FULL[DRIVER.get(s, "entities")] / _driver(res, s)
        net = max(r["wall"] - r.get("startup", 0), 0.0)
        here = net * k ** e + r.get("startup", 0)
        if s in PER_CORE:
            full = r["core_s"] * k ** e / FULL_CORES
            sp_txt = "x16/core"
        else:
            full = net * k ** e / sp + r.get("startup", 0)
            sp_txt = f"{sp:.0f}"
            if net < MIN_NET:  # below what this run resolves: an upper bound
                full = MIN_NET * k ** e / sp + r.get("startup", 0)
                why = f"UPPER BOUND: < {MIN_NET:.0f} s net at the largest size; {why}"
        if ew is None:
            why = f"exponent ASSUMED 1.0 (too few sizes with >= {MIN_NET:.0f} s net); {why}"
        rss_full = r["rss"] * k ** er if (r.get("rss") and er is not None) else None
        over = "  > 64 GB!" if rss_full and rss_full > FULL_RAM_GB * 1e9 else ""
        projected[s] = full
        total += full  # the two stage rows too: both inputs' shards share one pool, their core-seconds add up
        if s[6:] in DENSE:
            dense_total += full
        shown = ("< " if net < MIN_NET and s not in PER_CORE else "") + _fmt_s(full)
        print(f"  {s:<22} {e:>5.2f} {_fmt_s(here):>12} {sp_txt:>8} {shown:>10} {_fmt_b(rss_full):>10}  "
              f"{why}{over}")
    print(f"  {'total (sequential)':<22} {'':>5} {'':>12} {'':>8} {_fmt_s(total):>10}  the two stage rows add up "
          "(their shards share one pool of workers)")
    print(f"  {'total without dense':<22} {'':>5} {'':>12} {'':>8} {_fmt_s(total - dense_total):>10}  the KB, BM25 "
          "indexes, KG stores, export and one search-recall run")
    searchable = searchable_kb(projected)
    print(f"  {'searchable KB':<22} {'':>5} {'':>12} {'':>8} {_fmt_s(searchable):>10}  the KB (stage, seek "
          "indexes, merge), the BM25 indexes, kg-duckdb and one search-recall run")
    print(f"  {'  without kg-duckdb':<22} {'':>5} {'':>12} {'':>8} "
          f"{_fmt_s(searchable - projected.get('index kg-duckdb', 0.0)):>10}")
    print("  notes: the stage rows come from the KB manifest's shard records (wikidata: sum of shard seconds = "
          "core-seconds, shown as core-seconds / workers); the seek index rows from the index's done marker (wall, "
          "decoder threads); merge from merge_seconds (the articles and passages tables as merge wikipedia, by XML "
          "bytes); kb build's wall minus those is planning + start-up. "
          "Extrapolating 2-3 sizes over 2-3 decades is a rehearsal, not a "
          "measurement: a step whose cost changes regime (spilling, page cache) would not show here.")
    if markdown:
        print("\n== per step, as Markdown (docs/benchmarks/scale.md) ==\n" + markdown_table(results))


# ----------------------------------------------------------------------------------------------- main
def _sh(*cmd: str) -> str:
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "flows.cli", *args]


def main() -> int:
    """Generate, run, measure, report; exit status 1 when a step failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="the >= 10 M point: --sizes 10000,100000,300000,10000000 (needs ~74 GB of "
                                        "free disk at kg-oxigraph's peak by the estimate above (without --keep), so "
                                        "it is refused with less than ~82 GB free; choose --workdir on a larger disk, "
                                        "or add --kind-max kg-oxigraph=3000000: then kb build's peak with the inputs "
                                        "still there, ~57 GB at the auto limit on 24 GB (measured: 27.3 GB of inputs "
                                        "and +27.5 GB); 10 M alone took 3.0 h on 2 AVX-512 cores (inputs 58 min, kb "
                                        "build 57.5 min, the indexes 29 min), so --resume DIR to spread it over "
                                        "sittings)")
    ap.add_argument("--sizes", default="10000,100000,300000",
                    help="entity counts, comma-separated (empty with --load: only print the loaded figures' report)")
    ap.add_argument("--dense-max", type=int, default=None,
                    help="run entity-dense only up to this many entities (default: the smallest size)")
    ap.add_argument("--passage-dense-max", type=int, default=0,
                    help="run passage-dense only up to this many entities (default 0: never; ~10-25 passages/s "
                         "here, ~40 passages per article; its rate is then measured on a sample and projected)")
    ap.add_argument("--min-pages", type=int, default=300, help="Wikipedia pages at least (default 300)")
    ap.add_argument("--shards", type=int, default=None, help="kb build --shards (default: from the size)")
    ap.add_argument("--workers", type=int, default=2,
                    help="--workers of kb build, kb index (kg-oxigraph's export) and kb export-nt (default 2)")
    ap.add_argument("--memory-limit", default=None, metavar="SIZE",
                    help="--memory-limit of kb build, kb index and kb export-nt, a size or auto (default: "
                         "theirs, $LINKEDQA_DUCKDB_MEMORY else auto)")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--workdir", default=None, help="parent of the temp folder (default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (inputs and LINKEDQA_HOMEs)")
    ap.add_argument("--save", default=None, help="write the measured figures to this JSON file after each size")
    ap.add_argument("--load", default=None,
                    help="JSON of an earlier --save run (same machine): its sizes join the tables, exponents and "
                         "projection (sizes run again here replace them)")
    ap.add_argument("--markdown", action="store_true",
                    help="also print the per-step table as Markdown (wall [own build s] / peak RSS, exponents)")
    ap.add_argument("--stop-on-failure", action="store_true", help="stop (exit 1) at the first failed step")
    ap.add_argument("--resume", default=None, metavar="DIR",
                    help="work in DIR (made if missing) instead of a temp folder and keep it: the figures are saved "
                         "to DIR/state.json after every step, so a run stopped (Ctrl-C, SIGTERM, a crash) and started "
                         "again with the same options and --resume DIR goes on at the step it was in: finished sizes, "
                         "inputs and steps are not redone; an interrupted kb build continues (its staged shards are "
                         "kept; its wall then sums the attempts), an interrupted index is built again. For sizes "
                         "longer than one sitting (10 M: ~5 h on 2 cores)")
    ap.add_argument("--inputs-only", action="store_true",
                    help="with --resume: write the sizes' inputs and stop (a later --resume DIR runs the steps)")
    ap.add_argument("--kind-max", action="append", default=[], metavar="KIND=N",
                    help="build index KIND only up to N entities (0: never; repeatable), e.g. kg-oxigraph=3000000: "
                         "its store peaks at ~7 kB per entity on disk, ~70 GB at 10 M; the projection takes a step "
                         "not run at the largest size from the largest size that ran it")
    ap.add_argument("--data", default=os.environ.get("LINKEDQA_DATA", str(ROOT.parent / "shared" / "data")))
    a = ap.parse_args()
    sizes = sorted({int(s) for s in a.sizes.split(",") if s.strip()})
    kind_max: dict[str, int] = {}
    for item in a.kind_max:
        kind, _, cap = item.partition("=")
        if kind.strip() not in INDEX_KINDS or not cap.strip().isdigit():
            ap.error(f"--kind-max: expected KIND=N with KIND one of {', '.join(INDEX_KINDS)}, got {item!r}")
        kind_max[kind.strip()] = int(cap)
    if a.inputs_only and not a.resume:
        ap.error("--inputs-only needs --resume DIR (the inputs are kept there for the run that measures them)")
    if not sizes and a.load:
        old = json.loads(Path(a.load).read_text())
        print(f"bench_scale: report of {a.load} (commit {old.get('commit')}), nothing run")
        report({int(k): v for k, v in old["results"].items()}, old["startup"],
               {k: tuple(v) for k, v in old["dense_rate"].items()}, a.markdown)
        return 0
    if not sizes:
        ap.error("--sizes is empty")
    dense_max = a.dense_max if a.dense_max is not None else sizes[0]
    try:  # a bad size fails here, not at the first kb build after that size's inputs are written
        if a.memory_limit:
            mem = ["--memory-limit", parse_memory_limit(a.memory_limit)]
        else:  # the commands then read $LINKEDQA_DUCKDB_MEMORY
            mem = []
            duckdb_memory_limit()
    except ValueError as exc:
        ap.error(f"--memory-limit: {exc}" if a.memory_limit else str(exc))
    data = Path(a.data)

    lscpu = _sh("lscpu")
    model = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")), "?")
    avx512 = "yes" if "avx512f" in lscpu else "no"
    dirty = " (+ uncommitted changes)" if _sh("git", "status", "--porcelain", "--", "flows", "tasks", "storage",
                                               "sql") else ""
    commit = _sh("git", "rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
    print(f"bench_scale: commit {_sh('git', 'rev-parse', '--short', 'HEAD')}{dirty}; CPU {model}, AVX-512 {avx512}, "
          f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM; {time.strftime('%F %T %Z')}")
    print("input: SYNTHETIC dumps built from the REAL sample files only: the real Wikidata entity lines "
          "(trimmed, ids rewritten) and the real enwiki pages (titles/ids rewritten)")

    t0 = time.perf_counter()
    tpl = templates(data, a.seed)
    header, pages = real_pages(data)
    n_tpl = sum(len(v) for v in tpl)
    mean_b = sum(len(t.render(1)) for v in tpl for t in v) / n_tpl
    mean_st = sum(t.statements for v in tpl for t in v) / n_tpl
    page_b = sum(map(len, pages)) / len(pages)
    print(f"templates: {len(tpl)} real entities x {VARIANTS} trimmed variants in {time.perf_counter() - t0:.1f} s: "
          f"mean {mean_b / 1e3:.1f} kB and {mean_st:.1f} statements per entity (full dump ~11 kB, "
          f"{MEAN_STATEMENTS:.1f}); {len(pages)} real pages, mean {page_b / 1e3:.1f} kB")

    # the options a --resume DIR was started with: figures measured under other ones would not compare
    limit = duckdb_memory_limit(parse_memory_limit(a.memory_limit) if a.memory_limit else None)
    run_args = {"seed": a.seed, "min_pages": a.min_pages, "shards": a.shards, "workers": a.workers,
                "memory_limit": limit, "dense_max": dense_max, "passage_dense_max": a.passage_dense_max,
                "kind_max": kind_max, "data": str(data)}
    work = Path(a.resume).resolve() if a.resume else None
    state_file = work / "state.json" if work else None
    prior = json.loads(state_file.read_text()) if state_file and state_file.exists() else None
    if prior is not None:
        diff = {k: (prior.get("args", {}).get(k), v) for k, v in run_args.items() if prior.get("args", {}).get(k) != v}
        if diff:
            changed = "; ".join(f"{k}: {o!r} -> {n!r}" for k, (o, n) in diff.items())
            ap.error(f"--resume {work}: started with other options; run it with the same ones or use another DIR "
                     f"(option: started with -> now): {changed}")

    # disk and time, up front
    build_peak = BUILD_PEAK_LARGE_LIMIT if memory_limit_bytes(limit) >= 4e9 else BUILD_PEAK
    def oxigraph(n: int) -> bool:
        return n <= kind_max.get("kg-oxigraph", n)

    need = []
    for n in sizes:
        index_peak = INDEX_PEAK if oxigraph(n) else OTHER_INDEX_PEAK
        inputs = n * mean_b / GZ_RATIO + page_copies(n, pages, a.min_pages) * len(pages) * page_b / BZ2_RATIO
        if a.inputs_only:
            need.append(inputs)
        # without --keep the build's peak (inputs still there) or the largest index's (inputs gone), size by size
        elif a.keep:
            need.append(inputs + n * (HOME_KEPT + build_peak))
        else:
            need.append(max(inputs + n * build_peak, n * index_peak))
    peak_need = sum(need) if (a.keep or a.inputs_only) else max(need)
    parent = work.parent if work else Path(a.workdir or tempfile.gettempdir())
    if not parent.is_dir():
        ap.error(f"{'--resume' if work else '--workdir'}: {parent} is not a directory")
    free = shutil.disk_usage(parent).free
    held = du(work) if work and work.exists() else 0  # what a resumed run already wrote counts in the need
    print(f"disk: need ~{_fmt_b(peak_need)} at the peak ({'all sizes kept' if a.keep else 'one size at a time'}: "
          f"inputs ~{mean_b / GZ_RATIO / 1e3:.1f} kB/entity .json.gz and the .xml.bz2, LINKEDQA_HOME "
          + (f"~{HOME_KEPT / 1e3:.1f} kB/entity with every index kept" if a.keep else
             f"~{build_peak / 1e3:.1f} kB/entity at the peak of kb build (DuckDB limit {limit}), "
             f"~{INDEX_PEAK / 1e3:.1f} at kg-oxigraph's, ~{OTHER_INDEX_PEAK / 1e3:.1f} at passage-bm25's "
             "where kg-oxigraph does not run")
          + f"), free {_fmt_b(free)} under {parent}" + (f", {_fmt_b(held)} of it already in {work}" if held else ""))
    if peak_need - held > free * 0.9:
        print(f"REFUSED: the sizes {sizes} need ~{_fmt_b(peak_need)} but only {_fmt_b(free + held)} is free under "
              f"{parent} (keep 10% spare); choose smaller --sizes, --kind-max kg-oxigraph=N or another "
              f"{'--resume DIR' if work else '--workdir'}", file=sys.stderr)
        return 2
    # a priori ~1.2 ms per entity for build + bm25 + KG + export on 2 cores, dense ~400 texts/s, ~15 s start-up/step
    steps_n = 3 + len(INDEX_KINDS)
    est = sum(n * 1.2e-3 + steps_n * 15 + (n * 2 / 410 if n <= dense_max else 0) for n in sizes)
    print(f"time: ~{_fmt_s(est)} a priori (~1.2 ms/entity + ~15 s start-up per step + entity-dense at ~410 texts/s "
          "up to "
          f"{dense_max:,} entities); refined after each size", flush=True)

    if work:
        work.mkdir(parents=True, exist_ok=True)
        lock = open(work / ".lock", "a+")  # noqa: SIM115 - held until the process exits
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            print(f"REFUSED: another bench_scale (pid {lock.read().strip() or '?'}) is running in {work}; wait for it "
                  "or stop it (SIGTERM or Ctrl-C: it saves what it measured)", file=sys.stderr)
            return 2
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
    else:
        work = Path(tempfile.mkdtemp(prefix="lqa-bench-scale-", dir=a.workdir))
    results: dict[int, dict] = {}
    dense_rate: dict[str, tuple[float, float]] = {}
    startup = 0.0
    if a.load:
        old = json.loads(Path(a.load).read_text())
        results.update({int(k): v for k, v in old["results"].items()})
        dense_rate.update({k: tuple(v) for k, v in old["dense_rate"].items()})
        startup = old["startup"]
        print(f"loaded sizes {sorted(results)} from {a.load} (commit {old.get('commit')}); start-up {startup:.1f} s")
    resumed: set[int] = set()
    if prior is not None:
        resumed = {int(k) for k in prior["results"]}
        results.update({int(k): v for k, v in prior["results"].items()})
        dense_rate.update({k: tuple(v) for k, v in prior["dense_rate"].items()})
        startup = prior["startup"] or startup
        print(f"resuming {work} (started on commit {prior.get('commit')}): sizes "
              + ", ".join(f"{n:,} {'done' if results[n].get('seconds') is not None else 'begun'}"
                          for n in sorted(resumed)), flush=True)

    def save() -> None:
        if state_file:  # this run's sizes only: a --load'ed file stays the source of its own sizes
            save_state(state_file, startup, dense_rate, {n: results[n] for n in sizes if n in results},
                       {"args": run_args})

    def on_term(signum, frame):  # SIGTERM stops the step and saves as Ctrl-C does
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    failed = False
    current: dict = {}  # the size being run: its figures and when this run began it
    try:
        for n in sizes:
            t_size = time.perf_counter()
            sdir = work / f"n{n}"
            home = sdir / "home"
            res = results.get(n) if n in resumed else None
            if res is not None and res.get("seconds") is not None:
                print(f"\n=== {n:,} entities: done in an earlier run of {work} ({_fmt_s(res['seconds'])}) ===")
                continue
            env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
            env.update(LINKEDQA_HOME=str(home), LINKEDQA_DATA=str(data), PYTHONUNBUFFERED="1")
            print(f"\n=== {n:,} entities ({sdir}) ===", flush=True)
            gz, xml = sdir / "wikidata-all.json.gz", sdir / "enwiki-pages-articles-multistream.xml.bz2"
            built = res is not None and "kb build" in res["steps"] and res["steps"]["kb build"].get("rc") == 0
            if res is not None and (built or (gz.exists() and xml.exists())):
                print(f"  input written in an earlier run ({res['input_s']:.0f} s)" +
                      ("" if built else f": {gz.stat().st_size / 1e6:.1f} MB .json.gz, "
                                        f"{xml.stat().st_size / 1e6:.1f} MB .xml.bz2"), flush=True)
            else:
                shutil.rmtree(sdir, ignore_errors=True)  # an interrupted write, or a home without its inputs
                home.mkdir(parents=True)
                t0 = time.perf_counter()
                bz = WikipediaWriter(header, pages, page_copies(n, pages, a.min_pages), xml)
                try:
                    wd = write_wikidata(tpl, n, gz)
                except BaseException:  # disk full, Ctrl-C: bzip2 and its writer go too
                    bz.stop()
                    raise
                n_pg, xml_plain = bz.wait()
                xml_b = xml.stat().st_size
                print(f"  input in {time.perf_counter() - t0:.0f} s: {wd['gz_bytes'] / 1e6:.1f} MB .json.gz "
                      f"({wd['json_bytes'] / 1e6:.0f} MB JSON, mean {wd['json_bytes'] / n / 1e3:.1f} kB and "
                      f"{wd['statements'] / n:.1f} statements per entity), {xml_b / 1e6:.1f} MB .xml.bz2 "
                      f"({n_pg:,} pages)", flush=True)
                res = {"input": {**wd, "xml_bytes": xml_b, "xml_plain": xml_plain, "pages": n_pg}, "steps": {},
                       "input_s": time.perf_counter() - t0, "dropped": 0, "earlier_s": 0.0}
                t_size = t0  # the input's time is in the size's, once
            results[n] = res
            current.update(res=res, t=t_size)
            save()
            if a.inputs_only:
                res["earlier_s"] += time.perf_counter() - t_size
                current.clear()
                save()
                continue
            log_dir = sdir / "logs"
            log_dir.mkdir(exist_ok=True)

            def step(name: str, argv: list[str], res=res, env=env, home=home, log_dir=log_dir) -> dict | None:
                log = log_dir / (re.sub(r"\W+", "_", name) + ".log")
                probe = speed_probe(tpl)
                live: dict = {}
                try:
                    r = run_step(argv, env, log, home, live)
                except BaseException:
                    if live:  # what the interrupted attempt measured: kb build goes on from it when resumed
                        res.setdefault("attempts", {}).setdefault(name, []).append(live)
                    raise
                earlier = res.get("attempts", {}).pop(name, [])
                if earlier and name in CONTINUED:
                    r = join_attempts(r, earlier)
                r["cli"] = True  # a CLI command: the start-up is in its wall (set in report)
                r["log"] = log
                r["commit"], r["date"] = commit, time.strftime("%F")  # a resumed run may span commits and days
                r["probe_s"] = probe
                res["steps"][name] = r
                again = f"; {r['attempts']} attempts, walls summed" if r.get("attempts") else ""
                print(f"  {name:<22} {_fmt_s(r['wall']):>9}  peak RSS {_fmt_b(r['rss']):>9}  "
                      f"disk +{_fmt_b(r['disk'])} (peak +{_fmt_b(r['disk_peak'])}){again}", flush=True)
                if r["rc"]:
                    fail(name, argv, log, r["rc"])
                    r["wall"] = None
                    return None
                return r

            def measured(name: str, res=res) -> bool:
                r = res["steps"].get(name)
                if r is None or r.get("rc") != 0 or r.get("wall") is None:
                    return False
                print(f"  {name:<22} {_fmt_s(r['wall']):>9}  (measured in an earlier run)", flush=True)
                return True

            if n == sizes[0] and not res["steps"]:
                r = run_step(_cli("kb", "list"), env, log_dir / "kb_list.log", home)
                print(f"  `kb list` (CLI start-up without a flow): {r['wall']:.1f} s, peak RSS {_fmt_b(r['rss'])}",
                      flush=True)
            shards = a.shards or max(2, math.ceil(res["input"]["json_bytes"] / 512e6))
            if not measured("kb build"):
                b = step("kb build", _cli("kb", "build", "--wikidata", str(gz), "--wikipedia", str(xml),
                                          "--name", f"scale{n}", "--shards", str(shards), "--workers",
                                          str(a.workers), *mem))
                if b is None:
                    failed = True
                    save()
                    if a.stop_on_failure:
                        break
                    continue
                b["note"] = f"--shards {shards} --workers {a.workers}; disk peak +{_fmt_b(b['disk_peak'])}" + (
                    f"; {b['attempts']} attempts (interrupted, resumed)" if b.get("attempts") else "")
                if not a.keep:  # read once by the build (its seek indexes stay in LINKEDQA_HOME's cache)
                    for f in (gz, xml):
                        f.unlink()
                save()
            wd, xml_plain, n_pg = res["input"], res["input"]["xml_plain"], res["input"]["pages"]
            mans = [json.loads(p.read_text()) for p in (home / "kb").glob("*/manifest.json")]
            man = next(m for m in mans if m.get("name") == f"scale{n}")
            version = man["kb_version"]
            res["memory_limit"] = man.get("merge_memory_limit")  # the limit this size's DuckDB steps ran under
            merge_s = sum(man.get("merge_seconds", {}).values())
            wd_sh = [s for s in man.get("shards", []) if s["kind"] == "wikidata-json"]
            wp_sh = [s for s in man.get("shards", []) if s["kind"] != "wikidata-json"]
            rc = man.get("row_counts", {})
            res["rows"] = rc
            res["steps"].update(stage_steps(wd_sh, wp_sh, a.workers, wd["json_bytes"], n_pg, xml_plain))
            core_s = res["steps"]["stage wikidata"]["core_s"]
            for which, src in (("wikidata", gz.name), ("wikipedia", xml.name)):
                mark = seek_index_record(home, src)
                if mark is not None:
                    res["steps"][f"seek index {which}"] = {
                        "wall": mark["seconds"], "startup": 0.0, "core_s": mark["seconds"] * mark["threads"],
                        "rss": None, "note": f"{mark['threads']} decoder threads, {mark['size'] / 1e6:,.0f} MB "
                                             f"decompressed, {mark['size'] / 1e6 / mark['seconds']:.0f} MB/s"}
            for derived in ("stage wikidata", "stage wikipedia", "seek index wikidata", "seek index wikipedia"):
                if derived in res["steps"]:  # parts of kb build: its speed probe
                    res["steps"][derived]["probe_s"] = res["steps"]["kb build"].get("probe_s")
            res["steps"].pop("merge wikipedia", None)  # a resumed size: split again from the manifest below
            res["steps"]["merge"] = {"wall": merge_s, "startup": 0.0, "rss": None,
                                     "probe_s": res["steps"]["kb build"].get("probe_s"),
                                     "tables": man.get("merge_seconds", {})}
            split_merge(res)
            print(f"  KB {version}: " + ", ".join(f"{k} {v:,}" for k, v in sorted(rc.items())) +
                  f"; stage (wikidata) {core_s:.1f} core-s in {len(wd_sh)} shards, merge {merge_s:.1f} s",
                  flush=True)
            if "passage-dense" not in dense_rate and n > min(dense_max, a.passage_dense_max):
                dense_rate["passage-dense"] = passage_rate(version, env, rc, xml_plain)
                print(f"  passage-dense encode rate, in-process sample of {SAMPLE} of this KB's passages (model "
                      f"load excluded): {dense_rate['passage-dense'][0]:.1f} passages/s", flush=True)
            save()
            for kind in INDEX_KINDS:
                name = f"index {kind}"
                limit = dense_max if kind == "entity-dense" else min(dense_max, a.passage_dense_max)
                if n > kind_max.get(kind, n):
                    why_not = f"not run above {kind_max[kind]:,} entities (--kind-max)"
                    print(f"  {name:<22} {why_not}", flush=True)
                    res["steps"][name] = {"wall": None, "note": why_not}
                    continue
                if kind in DENSE and n > limit:
                    known = dense_rate.get(kind)
                    texts = rc.get("passages", 0) if kind == "passage-dense" else \
                        rc.get("entities", n) * (known[1] if known else 2)
                    eta = f" (would take ~{_fmt_s(texts / known[0])} at the measured {known[0]:.0f} texts/s)" \
                        if known else ""
                    passage_flag = kind == "passage-dense" and not a.passage_dense_max
                    flag = "--passage-dense-max" if passage_flag else "--dense-max"
                    why_not = f"not run above {limit:,} entities" if limit else f"not run ({flag} 0)"
                    print(f"  {name:<22} {why_not}{eta}", flush=True)
                    res["steps"][name] = {"wall": None, "note": f"{why_not}{eta}"}
                    continue
                if measured(name):
                    if not a.keep and kind != SEARCH_INDEX:  # stopped between its measure and its removal
                        res["dropped"] += drop_index(home, version, kind)
                    continue
                r = step(name, _cli("kb", "index", "--kb", version, "--kind", kind, "--workers", str(a.workers), *mem))
                if r is not None and not startup:
                    # the fixed cost of every step: the same command again, its index already built (CLI
                    # imports, the command's temporary Prefect server, the flow run, the done check)
                    again = run_step(_cli("kb", "index", "--kb", version, "--kind", kind), env,
                                     log_dir / "startup.log", home)
                    if not again["rc"]:
                        startup = again["wall"]
                        print(f"  start-up of a step (`kb index --kind {kind}` again, already built: CLI + its "
                              f"temporary Prefect server + flow run): {startup:.1f} s, peak RSS "
                              f"{_fmt_b(again['rss'])}", flush=True)
                if r is None:
                    failed = True
                    save()
                    if a.stop_on_failure:
                        break
                    continue
                # the build's own seconds (build_index_task's line), free of the start-up's noise: at 100k the
                # start-up (~8-11 s) dwarfs a BM25 build, and a 1 s wobble of it swung the fitted exponent
                own = re.findall(rf"index {re.escape(kind)}\s+built in ([0-9.]+)s",
                                 r["log"].read_text(errors="replace"))
                if own:  # the last attempt's line (the log keeps every attempt's output)
                    r["own_s"] = float(own[-1])
                    r["note"] = f"built in {r['own_s']:.1f} s (its log)"
                if kind in DENSE:
                    done = next(iter((home / "indexes" / version).glob(f"{kind}.v*/_done.json")), None)
                    meta = json.loads(done.read_text()) if done else {}
                    texts = meta.get("doc_count", 0)
                    rate = meta.get("encode_per_s") or texts / max(r["wall"] - startup, 1e-3)
                    per = texts / rc.get("entities", n) if kind == "entity-dense" else texts / xml_plain
                    dense_rate[kind] = (rate, per)
                    r["note"] = f"{texts:,} texts, encoded at {rate:.0f} texts/s (index meta)"
                if not a.keep and kind != SEARCH_INDEX:
                    res["dropped"] += drop_index(home, version, kind)
                save()
            if failed and a.stop_on_failure:
                break
            nt = sdir / "kb.nt.gz"
            if not measured("export-nt"):
                r = step("export-nt", _cli("kb", "export-nt", "--kb", version, str(nt), "--workers", str(a.workers),
                                           *mem))
                if r is not None:
                    r["note"] = f"{nt.stat().st_size / 1e6:.1f} MB .nt.gz (outside LINKEDQA_HOME, not in disk)"
                    r["disk"] = nt.stat().st_size
                    nt.unlink()
                else:
                    failed = True
                save()
            if not measured("search-recall"):
                r = step("search-recall", _cli("run", "search-recall", "--dataset", "webqsp-el", "--split", "test",
                                               "--kb", version, "--limit", "200"))
                if r is None:
                    failed = True
                else:
                    found = dict(re.findall(r"\b(recall@(?:1|10|50)(?:_covered)?|kb_coverage)\s*[=:]?\s*([0-9.]+)",
                                            r["log"].read_text(errors="replace")))
                    r["note"] = ", ".join(f"{k} {v}" for k, v in found.items())
                save()
            if not a.keep:
                res["dropped"] += drop_index(home, version, SEARCH_INDEX)
            dropped = res["dropped"]
            home_b = du(home) + dropped  # the indexes removed once measured counted, as if kept
            res["home_bytes"] = home_b
            res["seconds"] = res.get("earlier_s", 0.0) + time.perf_counter() - t_size
            current.clear()
            save()
            if a.save:
                save_state(Path(a.save), startup, dense_rate, results)
            print(f"  size done in {_fmt_s(res['seconds'])}; LINKEDQA_HOME {_fmt_b(home_b)} "
                  f"({home_b / n / 1e3:.1f} kB/entity, every index counted"
                  f"{'' if a.keep else ', ' + _fmt_b(dropped) + ' of them removed once measured'})", flush=True)
            rest = [m for m in sizes if m > n]
            if rest:
                cli = [(k, r) for k, r in res["steps"].items() if r.get("cli") and r.get("wall") is not None]
                fixed = startup * len(cli)
                var = sum(r["wall"] for k, r in cli if k[6:] not in DENSE) - fixed + res["input_s"]
                eta = sum(max(var, 0) * m / n + fixed for m in rest)
                print(f"  remaining sizes {rest}: ~{_fmt_s(eta)} if linear (start-up per step not scaled)",
                      flush=True)
            if not a.keep:
                shutil.rmtree(sdir, ignore_errors=True)
            if failed and a.stop_on_failure:
                break
        if a.inputs_only:
            print(f"\ninputs written; measure them with the same options and --resume {work} (without --inputs-only)")
        elif results:
            report({n: r for n, r in results.items() if r.get("steps")}, startup, dense_rate, a.markdown)
    except KeyboardInterrupt:
        if current:  # the time this run spent on the size counts when it is resumed
            current["res"]["earlier_s"] = current["res"].get("earlier_s", 0.0) + time.perf_counter() - current["t"]
            save()
        print("\ninterrupted: the running step's process group was stopped"
              + (f"; resume with the same options and --resume {work}" if a.resume else ""), file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if a.keep or a.resume:
            print(f"\nkept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
