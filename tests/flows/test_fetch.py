"""``linkedqa data fetch`` / ``linkedqa kb download`` against a loopback HTTP mirror of the official locations.

The mirror (``tests/mirror.py``) is a temp tree laid out like raw.githubusercontent.com
(``<owner>/<repo>/<commit>/<path>``) and dumps.wikimedia.org (``wikidatawiki/entities/<date>/``, ``enwiki/<date>/``),
filled from the real files of ``../shared/data``: upstream bytes for the benchmarks and the sample KB's inputs
(gunzipped where the collector gzip'd them), the real 49-entity Wikidata dump sample and a real enwiki
pages-articles sample for the dumps, with sums files computed here.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.datasets.registry import REGISTRY, load_dataset
from tasks.fetch.http import ChecksumMismatch, DownloadError, download, meta_path, part_path
from tasks.fetch.sources import (
    DATASET_FILES,
    FILES,
    NOT_FETCHABLE,
    SAMPLE_KB_FILES,
    Gzip,
    HeadLines,
    dataset_files,
    mirror_url,
    parse_sums,
    wikidata_dump_urls,
    wikipedia_dump_urls,
)
from tasks.kb.plan import plan_from_inputs, sample_inputs
from tests.cli_env import user_shell_env
from tests.mirror import MirrorServer, mirror_path, put, put_registry_files, serving

ROOT = Path(__file__).resolve().parents[2]
DUMP_DATE = "20250101"
WD_SAMPLE = "wikidata-entities/wikibase-dump-filter/entities.gz"  # 49 real dump lines
WP_SAMPLE = "wikipedia-xml-dump/enwiki-pages-articles-sample.xml.bz2"  # 3 real enwiki pages

pytestmark = pytest.mark.usefixtures("cli_session_api")  # tests/cli_env.py


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sums_file(files: dict[str, bytes], algo: str) -> bytes:
    return "".join(f"{hashlib.new(algo, d).hexdigest()}  {n}\n" for n, d in files.items()).encode()


@pytest.fixture()
def mirror(tmp_path: Path, data_root: Path) -> Iterator[MirrorServer]:
    root = tmp_path / "mirror"
    put_registry_files(root, data_root, {bf.path for name in ("qald-9-plus", "triviaqa", "strategyqa",
                                                               "lcquad2-sample") for bf in dataset_files(name)})
    # Wikidata: a complete dump folder, a newer unfinished one (no all.json.gz yet), an older one with a wrong sum
    wd = wikidata_dump_urls(DUMP_DATE)
    dump = (data_root / WD_SAMPLE).read_bytes()
    put(root, mirror_path(wd.dump), dump)
    put(root, mirror_path(wd.sha1sums), sums_file({wd.file_name: dump, "wikidata-20250101-lexemes.json.gz": b"x"},
                                                  "sha1"))
    put(root, mirror_path(wd.md5sums), sums_file({wd.file_name: dump}, "md5"))
    newer = wikidata_dump_urls("20250108")
    put(root, mirror_path(newer.sha1sums), sums_file({"wikidata-20250108-lexemes.json.gz": b"x"}, "sha1"))
    put(root, mirror_path(newer.md5sums), sums_file({"wikidata-20250108-lexemes.json.gz": b"x"}, "md5"))
    bad = wikidata_dump_urls("20241201")
    put(root, mirror_path(bad.dump), dump)
    put(root, mirror_path(bad.sha1sums), sums_file({bad.file_name: dump + b"changed"}, "sha1"))
    put(root, mirror_path(wd.latest_alias), dump)
    # enwiki: md5 sums only (the fallback when no sha1 file is published)
    wp = wikipedia_dump_urls("enwiki", DUMP_DATE)
    xml = (data_root / WP_SAMPLE).read_bytes()
    put(root, mirror_path(wp.dump), xml)
    put(root, mirror_path(wp.md5sums), sums_file({wp.file_name: xml}, "md5"))
    with serving(root) as server:
        yield server


def cli(*args: str, home: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = user_shell_env(home, drop=("LINKEDQA_MIRROR",), **(extra_env or {}))
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def one_line_error(out: subprocess.CompletedProcess, code: int, needle: str) -> str:
    assert out.returncode == code, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), out.stderr
    assert needle in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------------------- registry
def test_registry_pins_and_sources_match_shared_data(data_root: Path):
    rows = {}
    for line in (data_root / "SOURCES.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 8 and re.fullmatch(r"[0-9a-f]{40}", cells[3]):
            rows[cells[1]] = cells
    # the FactoidQA article texts are one row of SOURCES.md (a path pattern for 150 files)
    cmu = rows["factoidqa-cmu/S??/data/set?/a*.txt.clean.gz"]
    assert set(DATASET_FILES) | set(NOT_FETCHABLE) == set(REGISTRY)
    assert not set(DATASET_FILES) & set(NOT_FETCHABLE)
    assert {p for files in DATASET_FILES.values() for p in files} | set(SAMPLE_KB_FILES) == set(FILES)
    for rel, bf in FILES.items():
        data = (data_root / rel).read_bytes()
        assert sha256(data) == bf.sha256, rel
        if rel not in rows and re.fullmatch(r"factoidqa-cmu/S(08|09|10)/data/set\d/a\d+\.txt\.clean\.gz", rel):
            year, rest = rel.removeprefix("factoidqa-cmu/").split("/", 1)
            rows[rel] = [*cmu[:4], f"Data/Question_Answer_Dataset_v1.2/{year}/{rest.removesuffix('.gz')}",
                         str(len(data)), cmu[6], "[gzip -9 applied by collector]"]
        _, _, repo, commit, repo_path, size, _, fmt = rows[rel]
        assert (bf.repo.name, bf.repo.commit) == (repo, commit), rel
        assert int(size) == len(data), rel
        assert bf.url == f"https://raw.githubusercontent.com/{repo}/{commit}/{bf.repo_path}"
        if isinstance(bf.post, HeadLines):
            assert repo_path == f"{bf.repo_path} (first {bf.post.n} of its lines)"
            assert data.count(b"\n") == bf.post.n
        else:
            assert repo_path == bf.repo_path, rel
        assert isinstance(bf.post, Gzip) == ("gzip -9 applied by collector" in fmt), rel
        if isinstance(bf.post, Gzip):
            assert sha256(gzip.decompress(data)) == bf.post.content_sha256, rel
            name = data[10:].split(b"\0")[0].decode() if data[3] & 8 else ""
            assert (name, int.from_bytes(data[4:8], "little")) == (bf.post.name, bf.post.mtime), rel


# loaders that take more than ~1 s are left out to keep this file fast (simplequestions-wd, dbp15k-*)
@pytest.mark.parametrize("name", [n for n in DATASET_FILES if n != "simplequestions-wd" and "dbp15k" not in n])
def test_registered_files_are_all_a_loader_needs(name: str, data_root: Path, tmp_path: Path):
    for rel in DATASET_FILES[name]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).symlink_to(data_root / rel)
    assert load_dataset(name, tmp_path).counts() == load_dataset(name, data_root).counts()


def test_sample_kb_files_are_what_kb_build_sample_reads(data_root: Path):
    read = {str(Path(s.path).relative_to(data_root)) for s in sample_inputs(data_root)}
    # the FactoidQA question files' inputs read every article text of their year (tasks/dumps/cmu_articles.py)
    read |= {str(p.relative_to(data_root)) for p in data_root.glob("factoidqa-cmu/S*/data/set*/a*.txt.clean.gz")}
    assert set(SAMPLE_KB_FILES) == read
    assert len(SAMPLE_KB_FILES) == len(set(SAMPLE_KB_FILES))
    articles = [p for p in SAMPLE_KB_FILES if p.endswith(".txt.clean.gz")]
    assert len(articles) == 150 and sum((data_root / p).stat().st_size for p in articles) == 1_772_733


def test_the_demo_names_the_mirror_variable_the_fetch_reads():
    from flows.cli.demo import MIRROR_ENV
    from tasks.fetch.sources import MIRROR_ENV as FETCH_MIRROR_ENV

    assert MIRROR_ENV == FETCH_MIRROR_ENV


def test_data_fetch_kb_sample_gives_the_shared_tree_and_its_kb_version(data_root: Path, tmp_path: Path):
    root = tmp_path / "mirror"
    put_registry_files(root, data_root, SAMPLE_KB_FILES)
    to = tmp_path / "data"
    with serving(root) as mirror:
        out = cli("data", "fetch", "--kb-sample", "--mirror", mirror.url, "--to", str(to), home=tmp_path / "wh")
    assert out.returncode == 0, out.stderr
    n = len(SAMPLE_KB_FILES)
    assert f"kb-sample: {n} file(s) verified ({n} downloaded, 0 already present)" in out.stdout
    assert f"data root: {to}  (use it with LINKEDQA_DATA={to})" in out.stdout
    for rel in SAMPLE_KB_FILES:
        assert (to / rel).read_bytes() == (data_root / rel).read_bytes(), rel
    # the fetch's sidecars (<file>.meta.json) are not read as entity documents: same inputs, same KB version
    assert len(list(to.rglob("*.meta.json"))) == n
    fetched = plan_from_inputs(sample=True, data_root=to)
    assert [Path(s.path).relative_to(to) for s in fetched.inputs] == [
        Path(s.path).relative_to(data_root) for s in plan_from_inputs(sample=True, data_root=data_root).inputs]
    assert fetched.version == plan_from_inputs(sample=True, data_root=data_root).version


def test_wikimedia_urls_sums_and_mirror():
    wd = wikidata_dump_urls("20250101")
    assert wd.dump == "https://dumps.wikimedia.org/wikidatawiki/entities/20250101/wikidata-20250101-all.json.gz"
    assert wd.sha1sums.endswith("/20250101/wikidata-20250101-sha1sums.txt")
    assert wd.latest_alias == "https://dumps.wikimedia.org/wikidatawiki/entities/latest-all.json.gz"
    wp = wikipedia_dump_urls("enwiki", "20250101")
    assert wp.dump == ("https://dumps.wikimedia.org/enwiki/20250101/"
                       "enwiki-20250101-pages-articles-multistream.xml.bz2")
    assert wp.sha1sums == "https://dumps.wikimedia.org/enwiki/20250101/enwiki-20250101-sha1sums.txt"
    for bad in ("2025-01-01", "20251301", "latest"):
        with pytest.raises(ValueError):
            wikidata_dump_urls(bad)
    text = ("0123456789abcdef0123456789abcdef01234567  enwiki-20250101-pages-articles-multistream.xml.bz2\n"
            "\nnot a sums line\nFEDCBA9876543210FEDCBA9876543210  wikidata-20250101-all.json.gz\n")
    assert parse_sums(text) == {
        "enwiki-20250101-pages-articles-multistream.xml.bz2": "0123456789abcdef0123456789abcdef01234567",
        "wikidata-20250101-all.json.gz": "fedcba9876543210fedcba9876543210"}
    assert mirror_url(wd.dump, "http://m.example/dumps/") == ("http://m.example/dumps/wikidatawiki/entities/20250101/"
                                                              "wikidata-20250101-all.json.gz")
    assert mirror_url(wd.dump, "") == wd.dump
    with pytest.raises(ValueError):
        mirror_url(wd.dump, "ftp://m.example")


# ------------------------------------------------------------------------------------ data fetch
def test_data_fetch_lands_pinned_files_the_loaders_read(mirror: MirrorServer, data_root: Path, tmp_path: Path):
    to = tmp_path / "data"
    # the first response for one file is cut after 50,000 bytes: the same command resumes it with a Range request
    cut_file = FILES["qald-9-plus/qald_9_plus_train_final.json"]
    mirror.cut[mirror_path(cut_file.url)] = 50_000
    out = cli("data", "fetch", "qald-9-plus", "triviaqa", "--mirror", mirror.url, "--to", str(to),
              home=tmp_path / "wh")
    assert out.returncode == 0, out.stderr
    assert "qald-9-plus: 2 file(s) verified (2 downloaded, 0 already present)" in out.stdout
    for name in ("qald-9-plus", "triviaqa"):
        for bf in dataset_files(name):
            got = (to / bf.path).read_bytes()
            assert got == (data_root / bf.path).read_bytes() and sha256(got) == bf.sha256, bf.path
            meta = json.loads(meta_path(to / bf.path).read_text())
            assert meta["source"]["commit"] == bf.repo.commit and meta["checksums"]["sha256"] == bf.sha256
            assert not list((to / bf.path).parent.glob(".*.fetch")), "work folder left behind"
        assert load_dataset(name, to).counts() == load_dataset(name, data_root).counts()
    cut_log = mirror.requests_for(mirror_path(cut_file.url))
    size = (data_root / cut_file.path).stat().st_size
    assert [(e["range"], e["status"], e["sent"]) for e in cut_log] == [
        (None, 200, 50_000), ("bytes=50000-", 206, size - 50_000)]
    # a second run downloads nothing: every file is present with its pinned sha256
    n_before = len(mirror.log)
    out = cli("data", "fetch", "qald-9-plus", "triviaqa", "--to", str(to), home=tmp_path / "wh",
              extra_env={"LINKEDQA_MIRROR": mirror.url})
    assert out.returncode == 0, out.stderr
    assert "triviaqa: 2 file(s) verified (0 downloaded, 2 already present)" in out.stdout
    assert len(mirror.log) == n_before


def test_data_fetch_errors(mirror: MirrorServer, tmp_path: Path):
    to = tmp_path / "data"
    # a corrupted file on the mirror (same size, one byte changed) fails the pin: nothing is left behind
    dev = FILES["strategyqa/dev.jsonl"]
    f = mirror.root / mirror_path(dev.url).lstrip("/")
    data = bytearray(f.read_bytes())
    data[1000] ^= 0x01
    f.write_bytes(bytes(data))
    out = cli("data", "fetch", "strategyqa", "--mirror", mirror.url, "--to", str(to), home=tmp_path / "wh")
    one_line_error(out, 3, "checksum mismatch for dev.jsonl")
    assert not (to / dev.path).exists() and not part_path(to / dev.path).exists()
    assert (to / "strategyqa/test.jsonl").is_file()  # the good file of the same dataset was kept
    # the same for a file the collector gzip'd (the upstream content is checked before compressing)
    lc = FILES["lcquad2-sample/train_lcquad2_final_1k.json.gz"]
    f = mirror.root / mirror_path(lc.url).lstrip("/")
    f.write_bytes(f.read_bytes().replace(b"?", b"!", 1))
    out = cli("data", "fetch", "lcquad2-sample", "--mirror", mirror.url, "--to", str(to), home=tmp_path / "wh")
    one_line_error(out, 3, "checksum mismatch for train_lcquad2_final_1k.json")
    assert not (to / lc.path).exists() and not list((to / "lcquad2-sample").iterdir())
    # unknown dataset: usage error before any download
    n = len(mirror.log)
    out = cli("data", "fetch", "no-such-set", "--mirror", mirror.url, "--to", str(to), home=tmp_path / "wh")
    one_line_error(out, 2, "unknown dataset 'no-such-set'")
    assert len(mirror.log) == n


# ------------------------------------------------------------------------------- resumable download
def test_interrupted_download_resumes_with_a_range_request(mirror: MirrorServer, data_root: Path, tmp_path: Path):
    wd = wikidata_dump_urls(DUMP_DATE)
    path, url = mirror_path(wd.dump), mirror_url(wd.dump, mirror.url)
    data = (data_root / WD_SAMPLE).read_bytes()
    dest = tmp_path / "dl" / wd.file_name
    cut = 123_456
    mirror.cut[path] = cut
    with pytest.raises(DownloadError, match="connection lost|ended after"):
        download(url, dest, expected_sha1=hashlib.sha1(data).hexdigest(), retries=0, progress=False)
    assert part_path(dest).stat().st_size == cut and not dest.exists()
    res = download(url, dest, expected_sha1=hashlib.sha1(data).hexdigest(), retries=0, progress=False)
    log = mirror.requests_for(path)
    assert [(e["range"], e["status"], e["sent"]) for e in log] == [(None, 200, cut),
                                                                   (f"bytes={cut}-", 206, len(data) - cut)]
    assert res.resumed_from == cut and res.verified == ("sha1",) and dest.read_bytes() == data
    assert not part_path(dest).exists() and not list(dest.parent.glob("*.part.json"))
    meta = json.loads(meta_path(dest).read_text())
    assert meta["url"] == url and meta["size"] == len(data) and meta["checksums"]["sha256"] == sha256(data)
    assert meta["etag"] and meta["last_modified"] and meta["fetched_at"]
    # present and verified: no request at all
    assert download(url, dest, expected_sha1=hashlib.sha1(data).hexdigest(), progress=False).skipped
    assert len(mirror.requests_for(path)) == 2

    # a server that ignores Range answers 200: the .part is rewritten from byte 0
    dest2 = tmp_path / "dl2" / wd.file_name
    dest2.parent.mkdir()
    part_path(dest2).write_bytes(data[:1000])
    mirror.ignore_range.add(path)
    res = download(url, dest2, expected_md5=hashlib.md5(data).hexdigest(), progress=False)
    assert dest2.read_bytes() == data and mirror.requests_for(path)[-1]["status"] == 200
    mirror.ignore_range.clear()
    # a complete .part gets 416 for its Range request and is verified as is
    dest3 = tmp_path / "dl3" / wd.file_name
    dest3.parent.mkdir()
    part_path(dest3).write_bytes(data)
    res = download(url, dest3, expected_sha256=sha256(data), progress=False)
    assert res.resumed_from == len(data) and dest3.read_bytes() == data
    assert mirror.requests_for(path)[-1]["status"] == 416
    # a wrong expected checksum: ChecksumMismatch, the .part is removed, dest is not written
    dest4 = tmp_path / "dl4" / wd.file_name
    with pytest.raises(ChecksumMismatch, match="sha256 is .* expected 0000"):
        download(url, dest4, expected_sha256="0" * 64, progress=False)
    assert not dest4.exists() and not part_path(dest4).exists()
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(mirror.url + "/nope.gz", tmp_path / "nope.gz", progress=False)


# ------------------------------------------------------------------------------------- kb download
def test_kb_download_pins_the_dump_date(mirror: MirrorServer, data_root: Path, tmp_path: Path):
    from tasks.kb.plan import explicit_inputs, make_plan

    to = tmp_path / "dumps-home"
    out = cli("kb", "download", "--wikidata", "latest", "--wikipedia", "enwiki:latest", "--to", str(to),
              "--mirror", mirror.url, home=tmp_path / "wh")
    assert out.returncode == 0, out.stderr
    wd_path = to / "dumps" / DUMP_DATE / f"wikidata-{DUMP_DATE}-all.json.gz"
    wp_path = to / "dumps" / DUMP_DATE / f"enwiki-{DUMP_DATE}-pages-articles-multistream.xml.bz2"
    assert out.stdout.strip().splitlines()[-2:] == [str(wd_path), str(wp_path)]
    assert f"build the KB with: linkedqa kb build --wikidata {wd_path} --wikipedia {wp_path}" in out.stdout
    assert wd_path.read_bytes() == (data_root / WD_SAMPLE).read_bytes()
    assert wp_path.read_bytes() == (data_root / WP_SAMPLE).read_bytes()
    wd_meta = json.loads(meta_path(wd_path).read_text())
    assert (wd_meta["date"], wd_meta["requested"], wd_meta["verified"]) == (DUMP_DATE, "latest", ["sha1"])
    assert json.loads(meta_path(wp_path).read_text())["verified"] == ["md5"]
    # latest = the newest folder whose sums list the dump: 20250108 (unfinished) was looked at and skipped
    assert mirror.requests_for("/wikidatawiki/entities/") and mirror.requests_for(
        "/wikidatawiki/entities/20250108/wikidata-20250108-sha1sums.txt")
    assert not any("latest" in e["path"] for e in mirror.log)
    # the KB version is pinned by the date in the file name (and the files' size + head/tail hash)
    plan = make_plan(None, explicit_inputs(wikidata=[wd_path], wikipedia=[wp_path]))
    assert plan.name == DUMP_DATE and plan.version.startswith(f"{DUMP_DATE}-")

    # an explicit date gives the same file; a second run finds it verified and downloads nothing
    out = cli("kb", "download", "--wikidata", DUMP_DATE, "--to", str(tmp_path / "other"), home=tmp_path / "wh",
              extra_env={"LINKEDQA_MIRROR": mirror.url})
    assert out.returncode == 0, out.stderr
    other = tmp_path / "other" / "dumps" / DUMP_DATE / wd_path.name
    assert out.stdout.strip().splitlines()[-1] == str(other) and other.read_bytes() == wd_path.read_bytes()
    n = len(mirror.requests_for(mirror_path(wikidata_dump_urls(DUMP_DATE).dump)))
    out = cli("kb", "download", "--wikidata", DUMP_DATE, "--to", str(tmp_path / "other"), "--mirror", mirror.url,
              home=tmp_path / "wh")
    assert out.returncode == 0 and "already present" in out.stdout, out.stderr
    assert len(mirror.requests_for(mirror_path(wikidata_dump_urls(DUMP_DATE).dump))) == n


def test_kb_download_errors(mirror: MirrorServer, tmp_path: Path):
    to = tmp_path / "d"
    out = cli("kb", "download", "--wikidata", "20240101", "--to", str(to), "--mirror", mirror.url,
              home=tmp_path / "wh")
    line = one_line_error(out, 4, "HTTP 404")
    assert "no wikidata dump dated 20240101" in line
    # the published sha1 does not match the bytes served: exit 3, no file, no .part
    out = cli("kb", "download", "--wikidata", "20241201", "--to", str(to), "--mirror", mirror.url,
              home=tmp_path / "wh")
    one_line_error(out, 3, "checksum mismatch for wikidata-20241201-all.json.gz")
    assert not list(to.rglob("wikidata-20241201-all.json.gz*"))
    out = cli("kb", "download", "--wikidata", "2025-01-01", "--to", str(to), "--mirror", mirror.url,
              home=tmp_path / "wh")
    one_line_error(out, 2, "YYYYMMDD")
    out = cli("kb", "download", "--to", str(to), home=tmp_path / "wh")
    one_line_error(out, 2, "give --wikidata")
