"""Bad-input catalogue: every row is a real ``linkedqa`` invocation on a corrupted copy of a real file.

Each bullet is ``input -> result -> exit code``; the tests below check one row each (parametrized where
natural). "One line" means stderr is exactly ``error: <message>`` plus ``hint: <what to do>``, no traceback.

* truncated ``.gz`` Wikidata dump (``entities.gz`` cut at a third), truncated ``.bz2`` Wikidata dump
  (``short_stream.json.bz2``) and truncated ``.bz2`` Wikipedia dump -> ``error: <file>: unreadable after byte
  offset N (decompressed): Compressed file ended ...`` (N: start of the first line it could not finish; for
  XML the end of the last whole 1 MiB chunk parsed); no KB version published (no manifest, ``kb list``
  empty) -> 3
* malformed JSON line in the middle of a Wikidata dump -> ``rejects`` row (source_file, byte offset in the
  decompressed stream, line number, ``malformed JSON: ...``, first 200 bytes); every other entity kept -> 0
* claims of the wrong type (``"claims": {"P31": "oops"}``) or a ``string`` datavalue holding a number ->
  ``rejects`` row (``claims.P31 is str, expected a list`` / ``string datavalue is int``); the entity yields
  nothing else, the other entities are kept -> 0
* entity without ``labels`` -> kept: ``entities.label`` is null, no ``labels`` rows, its description, aliases
  and claims are kept -> 0
* Wikipedia page whose XML is well formed but broken (``<text>`` tag misspelled, non-numeric ``<id>``) ->
  ``rejects`` row with the page's byte offset (of its ``<page>`` tag) and its title (``snippet``); the other
  pages kept -> 0
* Wikipedia dump that is not well-formed XML (``</title>`` misspelled ``</titel>``) -> ``error: <file>: broken
  XML at byte offset N (decompressed): mismatched tag``; nothing published (the expat stream cannot resync
  on the next ``<page>``, so the whole file is refused, not just the page) -> 3
* giant Wikipedia page (30 MB of real wikitext in one ``<text>``) -> no size limit: stored as one article and
  its passages; memory grows with the page, one page held at a time (peak RSS of the build process about
  0.6 GB, against about 0.27 GB for the small builds here; asserted below 1.5 GB) -> 0
* unknown dataset name (``data load``, ``run --dataset``) -> ``error: unknown dataset 'x'; known datasets: ...``
  -> 2
* malformed question JSONL for ``data import`` (bad JSON, missing question, wrong types, non-UTF-8 bytes) ->
  every bad line rejected with its line number (printed, and in the dataset's ``rejects`` table with its byte
  offset); the good lines imported -> 0
* unknown method / unknown ``--set`` key -> one line listing the valid names; ``--set`` value of the wrong type
  -> one line naming the key and the expected type -> 2
* path traversal (``../x``) as dataset name (``run``, ``data load``), ``data import --name``, KB name, run id ->
  ``error: invalid <what> '../x': ...``; nothing written outside LINKEDQA_HOME -> 2
* SPARQL injection texts (quotes, ``} ; DROP ALL``, newline, backslash, ``\\u0022``, unicode) as labels through
  ``SparqlKG`` against a real Oxigraph server -> no match (empty candidate lists), no error, triple count
  unchanged -> n/a (library)
* non-UTF-8 bytes inside a string of a Wikidata dump line -> ``rejects`` row (``malformed JSON: str is not
  valid UTF-8``), build continues -> 0 (**currently fails**: the msgspec fast path raises an uncaught
  ``UnicodeDecodeError``, the whole build stops with ``error: 'utf-8' codec can't decode byte ...`` and exit 2)
* question file lines in Latin-1 (non-UTF-8 bytes) -> ``line N: invalid UTF-8 (invalid ... byte at byte K of
  the line)`` reject, the other lines imported -> 0
* CoDEx ``*_negatives.txt`` given as ``--triples`` -> ``error: <file>: *_negatives files hold FALSE triples
  ...``; nothing built -> 2
* ``er --set entities=run:<id>`` naming a run that does not exist -> ``error: --set entities=run:<id>: no
  finished run with that id under <home>/runs``; no LLM started, no run finished -> 4
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import unescape

import pytest

from storage import layout
from storage.catalog import done_kb_versions
from storage.parquet_io import read_table
from tasks.dumps.wikipedia_xml import CHUNK

ROOT = Path(__file__).resolve().parents[2]
WD_DUMP = "wikidata-entities/wikibase-dump-filter/entities.gz"
WD_BZ2 = "wikidata-entities/opentapioca/short_stream.json.bz2"
WP_SAMPLE = "wikipedia-xml-dump/enwiki-pages-articles-sample.xml.bz2"
WP_TABLES = "wikipedia-xml-dump/enwiki-table-markup.xml.bz2"
WP_SHORT = "wikipedia-xml-dump/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
NEGATIVES = "codex/triples/codex-s/valid_negatives.txt"


# ---------------------------------------------------------------------------------------------------- helpers
@dataclass
class Ran:
    """One finished ``linkedqa`` process."""

    code: int
    out: str
    err: str
    peak_rss_mb: float

    @property
    def error_line(self) -> str:
        """The ``error:`` line, after checking that stderr is exactly ``error: ...`` + ``hint: ...``."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), self.err[-3000:]
        return lines[0]


def linkedqa(*args: str, home: Path, data: Path, api: str | None = None, timeout: float = 300) -> Ran:
    """Run ``python -m flows.cli ARGS`` as a user would, with its own LINKEDQA_HOME; measure its peak RSS.

    ``api`` points Prefect at the session's test server (saves starting an ephemeral one per process).
    The peak RSS is the largest ``VmHWM`` (per-address-space high-water mark) seen while polling every process of
    the child's session. ``wait4``'s ``ru_maxrss`` cannot be used: Linux carries the pre-``exec`` high-water mark
    into it, so a child forked from a pytest process that holds a vLLM engine reports the engine's ~6 GB.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({"LINKEDQA_HOME": str(home), "PREFECT_HOME": str(home / ".prefect"), "LINKEDQA_DATA": str(data),
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    if api:
        env["PREFECT_API_URL"] = api
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:  # outside the tree under test
        proc = subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=env, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        status, usage = _wait(proc, timeout)
        out.seek(0)
        err.seek(0)
        ran = Ran(os.waitstatus_to_exitcode(status), out.read().decode(errors="replace"),
                  err.read().decode(errors="replace"), usage / 1024)
    proc.returncode = ran.code
    assert ran.code != -signal.SIGKILL, f"timed out after {timeout}s: {ran.err[-2000:]}"
    return ran


def _session_hwm_kb(sid: int) -> int:
    """The largest ``VmHWM`` (kB) among the live processes of session ``sid``."""
    best = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) != sid:  # after "pid (comm)": state ppid pgrp session ...
                continue
            for line in (stat.parent / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    best = max(best, int(line.split()[1]))
        except (OSError, IndexError, ValueError):
            continue
    return best


def _wait(proc: subprocess.Popen, timeout: float):
    """Reap ``proc``, polling its session's peak RSS (kB); SIGKILL its process group after ``timeout``."""
    deadline = time.monotonic() + timeout
    peak = 0
    try:
        while True:
            peak = max(peak, _session_hwm_kb(proc.pid))
            pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, _ = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
    finally:
        try:  # its process group (anything it started), by its id
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return status, peak


def one_version(home: Path) -> str:
    """The single published KB version under ``home``."""
    versions = [v for v, _ in done_kb_versions(home)]
    assert len(versions) == 1, versions
    return versions[0]


def kb_rows(home: Path, version: str, table: str) -> list[dict]:
    """Every row of one published KB table."""
    return read_table(layout.kb_table_dir(version, table, home), table).to_pylist()


def assert_nothing_published(home: Path) -> None:
    """No KB manifest anywhere under ``home/kb`` and no complete version in the catalog's scan."""
    assert not list((home / "kb").glob("*/manifest.json"))
    assert done_kb_versions(home) == []


def tree(folder: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` (except under ``skip``) with its size and mtime."""
    out = {}
    for p in folder.rglob("*"):
        if p == skip or skip in p.parents:
            continue
        st = p.lstat()
        out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return out


def entity_lines(data_root: Path) -> list[bytes]:
    """The real dump's lines (``[`` first, then one entity per line ending in ``,``), newline kept."""
    return gzip.decompress((data_root / WD_DUMP).read_bytes()).splitlines(keepends=True)


def entity_obj(line: bytes) -> dict:
    """Decode one dump line."""
    return json.loads(line.rstrip(b",\n"))


def dump_line(obj: dict) -> bytes:
    """Encode one entity as a dump line."""
    return json.dumps(obj, ensure_ascii=False).encode() + b",\n"


def wikipedia_xml(data_root: Path, rel: str) -> bytes:
    """Decompressed real pages-articles XML."""
    return bz2.decompress((data_root / rel).read_bytes())


@pytest.fixture(scope="module")
def api(prefect_api: str) -> str:
    """URL of the session's Prefect test server, for the subprocesses that run a flow."""
    return prefect_api


# ------------------------------------------------------------------------------------ truncated compressed dumps
@pytest.mark.parametrize(
    ("rel", "flag", "name"),
    [
        (WD_DUMP, "--wikidata", "latest-all.json.gz"),
        (WD_BZ2, "--wikidata", "short_stream.json.bz2"),
        (WP_SHORT, "--wikipedia", "enwiki-pages-articles1.xml.bz2"),
    ],
    ids=["wikidata-gz", "wikidata-bz2", "wikipedia-bz2"],
)
def test_truncated_dump_is_one_line_with_offset_and_publishes_nothing(tmp_path, data_root, api, rel, flag, name):
    raw = (data_root / rel).read_bytes()
    cut = tmp_path / name
    cut.write_bytes(raw[: len(raw) // 3])  # cut inside the stream (for the XML file: after 2 of its bz2 blocks)
    # what a decompressor can still get out of the cut file
    readable = (zlib.decompressobj(31) if name.endswith(".gz") else bz2.BZ2Decompressor()).decompress(cut.read_bytes())
    home = tmp_path / "wh"
    ran = linkedqa("kb", "build", flag, str(cut), "--name", "cut", home=home, data=data_root, api=api)
    assert ran.code == 3, ran.err[-3000:]
    line = ran.error_line
    m = re.search(r"unreadable after byte offset (\d+) \(decompressed\): Compressed file ended", line)
    assert m and line.startswith(f"error: {cut}: "), line
    if flag == "--wikidata":  # line reader: the start of the first line it could not finish
        assert int(m.group(1)) == readable.rfind(b"\n") + 1 > 0
    else:  # XML reader: the end of the last whole 1 MiB chunk it parsed
        assert int(m.group(1)) == len(readable) // CHUNK * CHUNK > 0
    assert_nothing_published(home)
    listing = linkedqa("kb", "list", home=home, data=data_root)
    assert listing.code == 0 and "no KB built yet" in listing.out


# ------------------------------------------------------------------------- corrupted lines in a Wikidata dump
@dataclass
class WikidataBuild:
    home: Path
    version: str
    path: Path
    lines: list[bytes]
    kept: list[str]  # qids expected in entities
    bad: dict[str, int]  # what -> 1-based line number of the corrupted line
    unlabelled: dict  # the original object of the entity whose labels were removed
    ran: Ran


@pytest.fixture(scope="module")
def wikidata_build(tmp_path_factory, data_root, api) -> WikidataBuild:
    """One build of the real 49-entity dump with four corrupted lines (rows: malformed JSON, wrong types, no
    labels)."""
    tmp = tmp_path_factory.mktemp("wd_corrupt")
    real = entity_lines(data_root)
    assert real[0].strip() == b"[" and len(real) == 50
    lines = list(real)
    by_qid = {entity_obj(x)["id"]: i for i, x in enumerate(lines) if i}

    claims_str = entity_obj(lines[by_qid["Q13"]])
    claims_str["claims"]["P31"] = "oops"
    lines[by_qid["Q13"]] = dump_line(claims_str)

    bad_value = entity_obj(lines[by_qid["Q102"]])
    st = next(st for sts in bad_value["claims"].values() for st in sts
              if st["mainsnak"].get("datavalue", {}).get("type") == "string")
    st["mainsnak"]["datavalue"]["value"] = 12345
    lines[by_qid["Q102"]] = dump_line(bad_value)

    unlabelled = entity_obj(lines[by_qid["Q82"]])
    stripped = dict(unlabelled)
    del stripped["labels"]
    lines[by_qid["Q82"]] = dump_line(stripped)

    broken = real[by_qid["Q1"]]
    middle = len(lines) // 2
    lines.insert(middle, broken[: len(broken) // 2] + b"\n")  # a real line cut mid-object, in the middle

    bad = {"malformed": middle + 1}
    for i, x in enumerate(lines):
        if i and i != middle and entity_obj(x)["id"] in ("Q13", "Q102"):
            bad["claims-str" if entity_obj(x)["id"] == "Q13" else "value-int"] = i + 1
    path = tmp / "latest-all.json.gz"
    path.write_bytes(gzip.compress(b"".join(lines), compresslevel=1))
    kept = [entity_obj(x)["id"] for x in real[1:] if entity_obj(x)["id"] not in ("Q13", "Q102")]
    home = tmp / "wh"
    ran = linkedqa("kb", "build", "--wikidata", str(path), "--name", "corrupt", home=home, data=data_root, api=api)
    assert ran.code == 0, ran.err[-3000:]
    return WikidataBuild(home, one_version(home), path, lines, kept, bad, unlabelled, ran)


def _reject_at(b: WikidataBuild, line: int) -> dict:
    rejects = kb_rows(b.home, b.version, "rejects")
    assert len(rejects) == 3, rejects
    (r,) = [r for r in rejects if r["line"] == line]
    assert r["source_file"] == str(b.path) and r["stage"] == "wikidata_json"
    assert r["offset"] == sum(len(x) for x in b.lines[: line - 1])  # byte offset in the decompressed stream
    assert r["snippet"] == b.lines[line - 1][:200].decode()
    return r


def test_malformed_json_line_is_a_reject_and_every_good_entity_is_kept(wikidata_build):
    b = wikidata_build
    r = _reject_at(b, b.bad["malformed"])
    assert r["reason"].startswith("malformed JSON: ")
    assert sorted(e["qid"] for e in kb_rows(b.home, b.version, "entities")) == sorted(b.kept)
    assert len(b.kept) == 47
    assert re.search(r"rejects\s+3\b", b.ran.out), b.ran.out[-2000:]
    manifest = dict(done_kb_versions(b.home))[b.version]
    assert manifest["row_counts"]["rejects"] == 3 and manifest["row_counts"]["entities"] == 47


@pytest.mark.parametrize(("what", "qid", "reason"), [
    ("claims-str", "Q13", "claims.P31 is str, expected a list"),
    ("value-int", "Q102", "string datavalue is int"),
])
def test_value_of_the_wrong_type_is_a_reject_with_its_reason(wikidata_build, what, qid, reason):
    b = wikidata_build
    r = _reject_at(b, b.bad[what])
    assert r["reason"] == reason
    # all-or-nothing: the entity leaves no row anywhere, its neighbours are whole
    for table, col in (("entities", "qid"), ("claims", "subject"), ("labels", "qid"), ("aliases", "qid")):
        assert not [x for x in kb_rows(b.home, b.version, table) if x[col] == qid], table
    assert {"Q1", "Q31", "Q306"} <= {e["qid"] for e in kb_rows(b.home, b.version, "entities")}


def test_entity_without_labels_is_kept_with_a_null_label(wikidata_build):
    b = wikidata_build
    (e,) = [e for e in kb_rows(b.home, b.version, "entities") if e["qid"] == "Q82"]
    orig = b.unlabelled
    assert orig["labels"]["en"]["value"] == "printer"  # what was removed
    assert e["label"] is None
    assert e["description"] == orig["descriptions"]["en"]["value"]
    assert e["aliases"] == [a["value"] for a in orig["aliases"]["en"]]
    assert not [x for x in kb_rows(b.home, b.version, "labels") if x["qid"] == "Q82"]
    n_statements = sum(len(v) for v in orig["claims"].values())
    assert len([c for c in kb_rows(b.home, b.version, "claims") if c["subject"] == "Q82"]) == n_statements
    assert not [r for r in kb_rows(b.home, b.version, "rejects") if "Q82" in r["snippet"][:40]]


def test_non_utf8_bytes_in_a_dump_line_are_a_reject(tmp_path, data_root, api):
    """A line that is not UTF-8 is one reject (docs/errors.md), not a crashed build; the other entities load."""
    lines = entity_lines(data_root)[:11]  # '[' + 10 real entities
    i = next(i for i, x in enumerate(lines) if b'"value":"Belgium"' in x)
    lines[i] = lines[i].replace(b'"value":"Belgium"', b'"value":"Bel\xff\xfegium"', 1)
    path = tmp_path / "latest-all.json.gz"
    path.write_bytes(gzip.compress(b"".join(lines), compresslevel=1))
    home = tmp_path / "wh"
    ran = linkedqa("kb", "build", "--wikidata", str(path), "--name", "bytes", home=home, data=data_root, api=api)
    assert ran.code == 0, ran.err[-3000:]
    version = one_version(home)
    (r,) = kb_rows(home, version, "rejects")
    assert r["line"] == i + 1 and r["offset"] == sum(len(x) for x in lines[:i])
    assert "UTF-8" in r["reason"] and r["reason"].startswith("malformed JSON")
    assert len(kb_rows(home, version, "entities")) == 9


# ------------------------------------------------------------------------------------------ Wikipedia pages
@dataclass
class WikipediaBuild:
    home: Path
    version: str
    path: Path
    xml: bytes
    offsets: dict[str, int]  # title -> byte offset of its <page>
    ran: Ran


@pytest.fixture(scope="module")
def wikipedia_build(tmp_path_factory, data_root, api) -> WikipediaBuild:
    """The real 5-page table-markup dump with two broken (well-formed) pages."""
    tmp = tmp_path_factory.mktemp("wp_broken")
    xml = wikipedia_xml(data_root, WP_TABLES)
    starts = [m.start() for m in re.finditer(rb"<page>", xml)]
    assert len(starts) == 5
    titles = [re.search(rb"<title>(.*?)</title>", xml[s:]).group(1).decode() for s in starts]
    # page 2: its <text> element misspelled -> no revision text; page 4: page <id> not a number
    p2, p3, p4 = starts[1], starts[2], starts[3]
    page2 = xml[p2:p3].replace(b"<text ", b"<txet ", 1).replace(b"</text>", b"</txet>", 1)
    page4 = re.sub(rb"(</ns>\s*<id>)(\d+)(</id>)", rb"\g<1>12x\g<2>\g<3>", xml[p4:starts[4]], count=1)
    assert page2 != xml[p2:p3] and page4 != xml[p4:starts[4]]
    broken = xml[:p2] + page2 + xml[p3:p4] + page4 + xml[starts[4]:]
    offsets = {t: m.start() for t, m in zip(titles, re.finditer(rb"<page>", broken), strict=True)}
    path = tmp / "enwiki-broken-pages-articles.xml.bz2"
    path.write_bytes(bz2.compress(broken, 1))
    home = tmp / "wh"
    ran = linkedqa("kb", "build", "--wikipedia", str(path), "--name", "wpbroken", home=home, data=data_root, api=api)
    assert ran.code == 0, ran.err[-3000:]
    return WikipediaBuild(home, one_version(home), path, broken, offsets, ran)


def test_broken_wikipedia_page_is_a_reject_with_offset_and_title(wikipedia_build):
    b = wikipedia_build
    rejects = sorted(kb_rows(b.home, b.version, "rejects"), key=lambda r: r["offset"])
    assert [(r["snippet"], r["reason"]) for r in rejects] == [
        ("List of Prison Break characters", "page without revision <text>"),
        ("Economy of Estonia", "invalid <id> '12x" + re.search(r"12x(\d+)", b.xml.decode()).group(1) + "'"),
    ]
    for r in rejects:
        assert r["offset"] == b.offsets[r["snippet"]] and b.xml[r["offset"]:r["offset"] + 6] == b"<page>"
        assert r["source_file"] == str(b.path) and r["stage"] == "wikipedia_xml" and r["line"] is None
    titles = sorted(a["title"] for a in kb_rows(b.home, b.version, "articles"))
    assert titles == ["Academy Award for Best Production Design", "Brahui language",
                      "Constructive vote of no confidence"]
    assert all(a["n_words"] > 100 for a in kb_rows(b.home, b.version, "articles"))


def test_xml_that_is_not_well_formed_refuses_the_file(tmp_path, data_root, api):
    xml = wikipedia_xml(data_root, WP_TABLES)
    third = [m.start() for m in re.finditer(rb"<page>", xml)][2]
    at = xml.index(b"</title>", third)
    bad = xml[:at] + b"</titel>" + xml[at + len(b"</title>"):]
    path = tmp_path / "enwiki-badtag-pages-articles.xml.bz2"
    path.write_bytes(bz2.compress(bad, 1))
    home = tmp_path / "wh"
    ran = linkedqa("kb", "build", "--wikipedia", str(path), "--name", "badtag", home=home, data=data_root, api=api)
    assert ran.code == 3, ran.err[-3000:]
    line = ran.error_line
    m = re.search(r"broken XML at byte offset (\d+) \(decompressed\): mismatched tag", line)
    assert m and str(path) in line, line
    assert at <= int(m.group(1)) < at + len(b"</titel>")  # expat points into the offending tag
    assert_nothing_published(home)


def test_giant_page_is_stored_whole_in_memory_bounded_by_the_page(tmp_path, data_root, api):
    """30 MB of real wikitext in one page: no size limit; memory grows by about 10-12x the page."""
    xml = wikipedia_xml(data_root, WP_SAMPLE)
    m = re.search(rb"<title>Accessibility</title>.*?(<text[^>]*>)(.*?)</text>", xml, re.S)
    body = m.group(2)
    body = body[: re.search(rb"\n==\s*See also", body).start()] + b"\n"  # prose only: the text keeps it all
    copies = (30 << 20) // len(body) + 1
    giant = xml[: m.start(2)] + body * copies + xml[m.end(2):]
    path = tmp_path / "enwiki-giant-pages-articles.xml"  # plain XML: no 30 MB bz2 round trip on 2 cores
    path.write_bytes(giant)
    home = tmp_path / "wh"
    ran = linkedqa("kb", "build", "--wikipedia", str(path), "--name", "giant", home=home, data=data_root, api=api,
                   timeout=240)
    assert ran.code == 0, ran.err[-3000:]
    version = one_version(home)
    arts = {a["title"]: a for a in kb_rows(home, version, "articles")}
    assert sorted(arts) == ["Accessibility", "Computer accessibility"]
    big = arts["Accessibility"]
    from tasks.dumps.wikipedia_xml import wikitext_to_plain

    one, _ = wikitext_to_plain(unescape(body.decode(), {"&quot;": '"', "&apos;": "'"}))
    assert abs(big["n_words"] - copies * len(one.split())) <= copies  # every copy made it into the text
    assert len(big["text"]) > 20 << 20
    passages = [p for p in kb_rows(home, version, "passages") if p["title"] == "Accessibility"]
    assert len(passages) == -(-big["n_words"] // 100)
    assert kb_rows(home, version, "rejects") == []
    print(f"giant page: {len(giant) >> 20} MB XML, {big['n_words']:,} words, peak RSS {ran.peak_rss_mb:.0f} MB")
    assert ran.peak_rss_mb < 1536


# --------------------------------------------------------------------------------------- names and settings
@pytest.mark.parametrize("args", [["data", "load", "no-such-set"], ["run", "ela", "--dataset", "no-such-set"]],
                         ids=["data-load", "run"])
def test_unknown_dataset_lists_the_known_ones(tmp_path, data_root, args, api):
    ran = linkedqa(*args, home=tmp_path / "wh", data=data_root, api=api)
    assert ran.code == 2
    line = ran.error_line
    assert line.startswith("error: unknown dataset 'no-such-set'; known datasets: ")
    from tasks.datasets.registry import known_datasets

    assert line.endswith(", ".join(known_datasets()))
    assert not (tmp_path / "wh" / "datasets").exists()


@pytest.mark.parametrize(("args", "start", "needles"), [
    (["run", "bogus", "--dataset", "webqsp-el"], "error: unknown method 'bogus'; valid methods: ",
     ["anchorrag", "bm25-rag", "closed-book", "cot", "ela", "er", "tog"]),
    (["run", "ela", "--dataset", "webqsp-el", "--set", "nope=1"], "error: unknown --set key(s) ['nope'] for method "
     "'ela'; valid keys: ", ["source (default 'wikidata')", "k (default 50)", "temperature (default 0.7)"]),
    (["run", "tog", "--dataset", "cwq", "--set", "width=3", "--set", "dept=2"], "error: unknown --set key(s) ['dept']",
     ["valid keys: ", "depth"]),
    (["run", "ela", "--dataset", "webqsp-el", "--set", "k=many"], "error: invalid --set value for 'ela': k: ",
     ["valid integer"]),
], ids=["method", "set-key", "set-key-tog", "set-type"])
def test_unknown_method_or_setting_is_one_line_with_the_valid_names(tmp_path, data_root, args, start, needles, api):
    ran = linkedqa(*args, home=tmp_path / "wh", data=data_root, api=api)
    assert ran.code == 2, ran.err
    line = ran.error_line
    assert line.startswith(start), line
    assert all(n in line for n in needles), line
    if "valid methods" in start:
        from tasks.methods.registry import METHODS

        assert line.endswith(", ".join(sorted(METHODS)))


@pytest.mark.parametrize(("args", "what"), [
    (["run", "ela", "--dataset", "../x"], "dataset name"),
    (["data", "load", "../x"], "dataset name"),
    (["data", "import", "QFILE", "--name", "../x"], "dataset name"),
    (["kb", "build", "--wikidata", "ENTITY", "--name", "../x"], "KB name"),
    (["eval", "../x"], "run id"),
], ids=["run-dataset", "data-load", "data-import-name", "kb-name", "eval-run-id"])
def test_path_traversal_in_a_name_is_refused_and_writes_nothing_outside_home(tmp_path, data_root, args, what, api):
    qfile = tmp_path / "in" / "qs.jsonl"
    qfile.parent.mkdir()
    real = json.loads((data_root / "webqsp-el/webqsp.test.entities.with_classes.json").read_text())[:2]
    qfile.write_text("".join(json.dumps({"id": r["question_id"], "question": r["utterance"]}) + "\n" for r in real))
    entity = data_root / "wikidata-entities/wikibase-sdk/Q571.json"
    args = [str(qfile) if a == "QFILE" else str(entity) if a == "ENTITY" else a for a in args]
    home = tmp_path / "box" / "wh"
    home.mkdir(parents=True)
    before = tree(tmp_path, home)
    ran = linkedqa(*args, home=home, data=data_root, api=api)
    assert ran.code == 2, ran.err
    assert ran.error_line.startswith(f"error: invalid {what} '../x': use letters, digits")
    assert tree(tmp_path, home) == before
    assert not [p for p in home.rglob("*") if p.is_file() and not p.is_relative_to(home / ".prefect")]


def test_codex_negatives_are_refused(tmp_path, data_root, api):
    neg = data_root / NEGATIVES
    home = tmp_path / "wh"
    ran = linkedqa("kb", "build", "--triples", str(neg), "--name", "neg", home=home, data=data_root, api=api)
    assert ran.code == 2, ran.err
    assert ran.error_line == f"error: {neg}: *_negatives files hold FALSE triples and are never imported as claims"
    assert not (home / "kb").exists()


# --------------------------------------------------------------------------------------- question files
def test_malformed_question_jsonl_reports_line_numbers_and_imports_the_rest(tmp_path, data_root, api):
    real = json.loads((data_root / "webqsp-el/webqsp.test.entities.with_classes.json").read_text())[:6]
    good = [{"id": r["question_id"], "question": r["utterance"], "gold_entities": [r["main_entity"]]}
            for r in real]
    enc = [json.dumps(g).encode() for g in good]
    lines = [
        enc[0],                                                                  # 1 good
        enc[1][: len(enc[1]) // 2],                                              # 2 bad JSON (cut line)
        json.dumps({"id": good[2]["id"], "gold_entities": []}).encode(),         # 3 missing question
        json.dumps({**good[3], "question": 42}).encode(),                        # 4 question is a number
        json.dumps({**good[4], "gold_entities": "Q42"}).encode(),                # 5 list field is a string
        json.dumps(good[5], ensure_ascii=False).encode().replace(b'"question": "', b'"question": "\xff', 1),  # 6
        enc[2],                                                                  # 7 good
        b"",                                                                     # 8 blank: skipped
        enc[3],                                                                  # 9 good
    ]
    assert b"\xff" in lines[5]
    f = tmp_path / "qs.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    home = tmp_path / "wh"
    ran = linkedqa("data", "import", str(f), "--name", "mine", home=home, data=data_root, api=api)
    assert ran.code == 0, ran.err
    assert "mine: 3 question(s) imported (test=3), 5 line(s) rejected" in ran.out
    printed = re.findall(r"^  line (\d+): (.*)$", ran.out, re.M)
    assert [int(n) for n, _ in printed] == [2, 3, 4, 5, 6]
    reasons = [reason for _, reason in printed]
    assert "invalid JSON" in reasons[0]
    assert "missing 'question'" in reasons[1]
    assert "'question' must be a string, got int" in reasons[2]
    assert "field 'gold_entities' must be a list, got str" in reasons[3]
    assert "invalid UTF-8" in reasons[4]
    (folder,) = (home / "datasets" / "mine").iterdir()
    qs = read_table(folder / "questions", "questions").to_pylist()
    assert sorted(q["question_id"] for q in qs) == sorted(str(g["id"]) for g in (good[0], good[2], good[3]))
    rej = read_table(folder / "rejects", "rejects").to_pylist()
    assert [r["line"] for r in rej] == [2, 3, 4, 5, 6]
    starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    assert [r["offset"] for r in rej] == starts[1:6]


def test_question_file_lines_in_latin1_are_rejected_with_line_numbers(tmp_path, data_root, api):
    """Real QALD-10 questions, two of them saved as Latin-1 (the classic wrong-encoding file)."""
    qald = json.loads((data_root / "qald-10/qald_10.json").read_text())["questions"]
    picked = [(str(q["id"]), s["string"]) for q in qald for s in q["question"]
              if s["language"] == "en" and any(127 < ord(c) < 256 for c in s["string"])][:4]
    assert len(picked) == 4
    lines = [json.dumps({"id": i, "question": t}, ensure_ascii=False).encode("latin-1" if n % 2 else "utf-8")
             for n, (i, t) in enumerate(picked)]
    f = tmp_path / "qald-latin1.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    home = tmp_path / "wh"
    ran = linkedqa("data", "import", str(f), "--name", "latin", home=home, data=data_root, api=api)
    assert ran.code == 0, ran.err
    assert "latin: 2 question(s) imported (test=2), 2 line(s) rejected" in ran.out
    printed = re.findall(r"^  line (\d+): (.*)$", ran.out, re.M)
    assert [int(n) for n, _ in printed] == [2, 4]
    for (_n, reason), raw in zip(printed, (lines[1], lines[3]), strict=True):
        first_bad = next(k for k, ch in enumerate(raw) if ch > 127)
        assert re.fullmatch(rf"invalid UTF-8 \(invalid (start|continuation) byte at byte {first_bad} "
                            r"of the line\)", reason), reason  # printed once: "  line N: invalid UTF-8 (...)"
    (folder,) = (home / "datasets" / "latin").iterdir()
    qs = read_table(folder / "questions", "questions").to_pylist()
    assert sorted((q["question_id"], q["question"]) for q in qs) == sorted([picked[0], picked[2]])


# ---------------------------------------------------------------------------------------------- SPARQL
INJECTIONS = ['"} ; DROP ALL ; SELECT * {"', '\\" . ?s ?p ?o . "', 'x" } ; DROP ALL ; #', "a\nb", "'", '"', "\\",
              "\\u0022 } ; DROP ALL ; #", "x' } DELETE WHERE { ?s ?p ?o } #", "\r\n\t{ }", '"""', "Belgium\" } #",
              "Poznań\\", "☃\u0000", ">"]


def test_sparql_injection_through_labels_matches_nothing_and_changes_nothing(wikidata_build, tmp_path):
    """The KB built from the real dump, exported to N-Triples, served by a real Oxigraph on loopback."""
    from tasks.kg.export_nt import export_ntriples
    from tasks.kg.oxigraph_server import OxigraphServer
    from tasks.kg.sparql import SparqlKG, render

    b = wikidata_build
    nt = tmp_path / "kb.nt.gz"
    counts = export_ntriples(b.version, nt, root=b.home)
    with OxigraphServer(store_dir=tmp_path / "store") as srv:
        srv.load_ntriples(nt)
        kg = SparqlKG(srv.query_url, timeout_s=10, retries=0)

        def n_triples() -> int:
            return int(kg.select(render("count_triples"))[0]["n"]["value"])

        before = n_triples()
        assert before == counts["triples"] > 0
        assert kg.search_label(["Belgium", "Poznań"]) == [["Q31"], ["Q268"]]  # real labels are found
        assert kg.search_label(INJECTIONS) == [[] for _ in INJECTIONS]
        for text in INJECTIONS:  # one query each, too: no error other than "no match"
            assert kg.search_label([text]) == [[]]
        assert n_triples() == before
        assert kg.labels(["Q31"]) == {"Q31": "Belgium"}


# ------------------------------------------------------------------------------------- er: unknown source run
def test_er_naming_an_unknown_run_is_exit_4(wikipedia_build, data_root, api):
    """Real KB (with articles) and a real imported QA set; the source run does not exist. The openai backend
    points at a closed port, so nothing could start an engine even if the check were missed."""
    b = wikipedia_build
    real = json.loads((data_root / "webqsp-el/webqsp.test.entities.with_classes.json").read_text())[:2]
    f = b.home.parent / "er-qs.jsonl"
    f.write_text("".join(json.dumps({"id": r["question_id"], "question": r["utterance"]}) + "\n" for r in real))
    imp = linkedqa("data", "import", str(f), "--name", "erqs", home=b.home, data=data_root, api=api)
    assert imp.code == 0, imp.err
    ran = linkedqa("run", "er", "--dataset", "erqs", "--set", "entities=run:no-such-run", "--backend", "openai",
                   "--base-url", "http://127.0.0.1:9/v1", "--model", "none", home=b.home, data=data_root, api=api)
    assert ran.code == 4, ran.err[-3000:]
    assert ran.error_line == (f"error: --set entities=run:no-such-run: no finished run with that id under "
                              f"{b.home / 'runs'}")
    assert not list((b.home / "runs").glob("*/manifest.json"))
