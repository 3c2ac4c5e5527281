"""Benchmark: Wikidata JSON dump -> Parquet throughput, against a naive baseline measured in the same run.

Input: real dump lines (``wikidata-entities``) repeated with rewritten ids into a plain ``[ ... ]`` dump of
``--mb`` MB (default 500) and a 10x smaller one. Measured, each in a fresh subprocess (so peak RSS is per run):

* linkedqa: ``tasks.kb.stage.stage_shard`` (streaming reader + schema-enforced Parquet parts), 1 process;
* baseline: a plain per-line ``json.loads`` loop extracting the same fields (entity columns, labels in every
  language, English aliases, claims with datatype and rank) into Python lists and writing the Parquet files at
  the end (what a first script would do; it holds everything in memory);
* linkedqa with 2 byte-range shards in 2 worker processes (the shard speed-up on this machine).

Compressed input (``--compressed``, default on): the same dump compressed as Wikimedia publishes it (gzip -6,
bzip2 -9, here with Python's ``gzip``/``bz2`` modules), staged

* stdlib single stream: one line shard (``Shard(by_lines=True)``, ``gzip``/``bz2`` module), 1 process: the
  baseline of this section;
* rapidgzip / indexed_bzip2 parallel decompression of that single stream (``parallelization=2``, one parser):
  option B, measured by swapping the bench subprocess's decompressor;
* linkedqa's compressed byte shards (``tasks.dumps.seekable``): the seek index built once with W decoder
  threads, then 2 byte-range shards of the decompressed stream staged by W processes (W = 1: one after the
  other; W = 2: at once); the index time is counted in the total;
* linkedqa's stream shards of a multistream ``.bz2`` (``tasks.dumps.bz2streams``): the same JSON compressed
  as ``pbzip2`` does (one bzip2 stream per 900 kB, as in Wikimedia's ``pages-articles-multistream.xml.bz2``
  one stream per 100 pages), cut at stream starts found in its compressed bytes (no index, nothing
  decompressed to plan; the search counted in the total), then 2 shards staged by W processes, as above;

and decompression alone (stdlib, rapidgzip 1 and 2 threads, indexed_bzip2 1 and 2 threads). Prints MB/s of
uncompressed JSON, per core (divided by the cores used), and the ratio to stdlib single-stream.

Run: ``.venv/bin/python -m tests.bench.bench_ingest [--mb 500] [--no-compressed]``
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_ID = re.compile(rb'"(Q|P)(\d+)"')


def real_lines(data: Path) -> list[bytes]:
    """Entity lines of the real dump samples (dump format and line-delimited)."""
    out = []
    for f, opener in ((data / "wikidata-entities/wikibase-dump-filter/entities.gz", gzip.open),
                      (data / "wikidata-entities/opentapioca/sample_wikidata_items.json.bz2", bz2.open)):
        with opener(f, "rb") as fh:
            for line in fh:
                line = line.strip().rstrip(b",")
                if line.startswith(b"{"):
                    out.append(line)
    return out


def make_dump(lines: list[bytes], target_mb: int, path: Path) -> int:
    """Write a ``[``/``]`` dump of about ``target_mb`` MB; entity ids are rewritten so every copy is distinct."""
    target = target_mb * 1_000_000
    size = 0
    rep = 0
    with open(path, "wb") as fh:
        fh.write(b"[\n")
        while size < target:
            for line in lines:
                # rewrite the entity's own id (and item references) so copies are different entities
                new = _ID.sub(lambda m, r=rep: b'"%s%d"' % (m.group(1), int(m.group(2)) + r * 10_000_000),
                              line, count=1)
                fh.write(new + b",\n")
                size += len(new) + 2
            rep += 1
        fh.write(b"]\n")
    return path.stat().st_size


BASELINE = r'''
import json, sys, time, resource
import pyarrow as pa, pyarrow.parquet as pq
path, out = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
qid, label, desc, aliases, enwiki, nsl, inst = [], [], [], [], [], [], []
cs, cp, co, cv, cd, cr = [], [], [], [], [], []
lq, ll, lv, aq, av = [], [], [], [], []
with open(path, "rb") as fh:
    for line in fh:
        line = line.strip().rstrip(b",")
        if not line.startswith(b"{"):
            continue
        e = json.loads(line)
        qid.append(e["id"])
        for lang, lab in e.get("labels", {}).items():
            lq.append(e["id"]); ll.append(lang); lv.append(lab["value"])
        for a in e.get("aliases", {}).get("en", []):
            aq.append(e["id"]); av.append(a["value"])
        label.append(e.get("labels", {}).get("en", {}).get("value"))
        desc.append(e.get("descriptions", {}).get("en", {}).get("value"))
        aliases.append([a["value"] for a in e.get("aliases", {}).get("en", [])])
        sl = e.get("sitelinks", {})
        enwiki.append(sl.get("enwiki", {}).get("title"))
        nsl.append(len(sl))
        p31 = []
        for pid, stmts in e.get("claims", {}).items():
            for s in stmts:
                dv = s["mainsnak"].get("datavalue")
                if dv is None:
                    continue
                v = dv["value"]
                cd.append(s["mainsnak"].get("datatype")); cr.append(s.get("rank"))
                if isinstance(v, dict) and "id" in v:
                    cs.append(e["id"]); cp.append(pid); co.append(v["id"]); cv.append(None)
                    if pid == "P31":
                        p31.append(v["id"])
                else:
                    cs.append(e["id"]); cp.append(pid); co.append(None); cv.append(json.dumps(v))
        inst.append(p31)
pq.write_table(pa.table({"qid": qid, "label": label, "description": desc, "aliases": aliases,
                         "enwiki_title": enwiki, "sitelinks": nsl, "instance_of": inst}), out + ".entities.parquet")
pq.write_table(pa.table({"subject": cs, "property": cp, "object_qid": co, "object_value": cv, "datatype": cd,
                         "rank": cr}), out + ".claims.parquet")
pq.write_table(pa.table({"qid": lq, "lang": ll, "label": lv}), out + ".labels.parquet")
pq.write_table(pa.table({"qid": aq, "alias": av}), out + ".aliases.parquet")
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
'''

OURS = r'''
import sys, time, resource
from pathlib import Path
from tasks.dumps.base import Shard, byte_shards
from tasks.kb.plan import InputSpec
from tasks.kb.stage import stage_shard
path, out, nshards, index = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
shard = byte_shards(path, nshards)[index]
spec = InputSpec(kind="wikidata-json", path=str(path), source="wikidata-json", shards=(shard,))
t0 = time.perf_counter()
rec = stage_shard("bench", spec, shard, out)
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, sum(rec["rows"].values()))
'''


INDEX = r'''
import sys, time
from pathlib import Path
from tasks.dumps.seekable import seek_index
t0 = time.perf_counter()
idx = seek_index(Path(sys.argv[1]), Path(sys.argv[2]), threads=int(sys.argv[3]))
print(time.perf_counter() - t0, idx.path.stat().st_size)
'''

CUTS = r'''
import sys, time
from pathlib import Path
from tasks.dumps.bz2streams import stream_cuts
t0 = time.perf_counter()
cuts = stream_cuts(Path(sys.argv[1]), int(sys.argv[2]))
print(time.perf_counter() - t0, len(cuts))
'''

SHARD = r'''
import sys, time, resource
from pathlib import Path
from tasks.dumps.base import Shard, byte_shards
from tasks.kb.plan import InputSpec
from tasks.kb.stage import stage_shard
path, out, nshards, index, cache = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
shard = Shard(by_lines=True) if nshards == 0 else byte_shards(path, nshards, Path(cache))[index]
spec = InputSpec(kind="wikidata-json", path=str(path), source="wikidata-json", shards=(shard,))
t0 = time.perf_counter()
rec = stage_shard("bench", spec, shard, out)
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, sum(rec["rows"].values()))
'''

# option B: one line shard whose decompressor is rapidgzip / indexed_bzip2 with N threads (one parser)
PARALLEL_STREAM = r'''
import io, sys, time
from pathlib import Path
import indexed_bzip2, rapidgzip
import tasks.dumps.base as base
from tasks.dumps.base import Shard
from tasks.kb.plan import InputSpec
from tasks.kb.stage import stage_shard
path, out, threads = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])

def opener(p):
    if p.name.endswith(".gz"):
        return io.BufferedReader(rapidgzip.open(str(p), parallelization=threads), buffer_size=1 << 20)
    return indexed_bzip2.open(str(p), parallelization=threads)

base.open_text_stream = opener
shard = Shard(by_lines=True)
spec = InputSpec(kind="wikidata-json", path=str(path), source="wikidata-json", shards=(shard,))
t0 = time.perf_counter()
rec = stage_shard("bench", spec, shard, out)
print(time.perf_counter() - t0, sum(rec["rows"].values()))
'''

DECOMPRESS = r'''
import bz2, gzip, sys, time
import indexed_bzip2, rapidgzip
path, how, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
if how == "stdlib":
    fh = gzip.open(path, "rb") if path.endswith(".gz") else bz2.open(path, "rb")
elif path.endswith(".gz"):
    fh = rapidgzip.open(path, parallelization=threads)
else:
    fh = indexed_bzip2.open(path, parallelization=threads)
n = 0
buf = bytearray(4 << 20)
while True:
    k = fh.readinto(buf)
    if not k:
        break
    n += k
fh.close()
print(time.perf_counter() - t0, n)
'''


def compress(plain: Path, suffix: str) -> Path:
    """The plain dump compressed as Wikimedia does (gzip -6 / bzip2 -9), with Python's modules."""
    out = plain.with_name(plain.name + suffix)
    opener = gzip.open(out, "wb", compresslevel=6) if suffix == ".gz" else bz2.open(out, "wb", compresslevel=9)
    with open(plain, "rb") as src, opener as dst:
        while chunk := src.read(8 << 20):
            dst.write(chunk)
    return out


#: Shards of a compressed file in the byte- and stream-shard rows (with 1 worker they are staged one after the other)
SHARDS = 2


def compress_multistream(plain: Path, piece: int = 900_000) -> Path:
    """The plain dump as ``pbzip2 -9`` writes it: one bzip2 stream per ``piece`` bytes (lines cut anywhere)."""
    out = plain.with_name(plain.name + ".multistream.bz2")
    with open(plain, "rb") as src, open(out, "wb") as dst:
        while chunk := src.read(piece):
            dst.write(bz2.compress(chunk, 9))
    return out


def _parallel(code: str, argsets: list[list[str]]) -> tuple[float, float]:
    """One subprocess per argument list, all at once: the slowest one's own time (start-up excluded, as in _py)
    and the sum of the last figure each prints (rows staged)."""
    procs = [subprocess.Popen([sys.executable, "-c", code, *a], cwd=ROOT, stdout=subprocess.PIPE, text=True)
             for a in argsets]
    times, rows = [], 0.0
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"bench subprocess failed ({p.returncode})")
        last = out.strip().splitlines()[-1].split()
        times.append(float(last[0]))
        rows += float(last[-1])
    return max(times), rows


def compressed_section(big: Path, mb: float, rows_plain: float, tmp: Path) -> None:
    """Compressed input: stdlib single stream vs parallel decompression vs compressed byte shards."""
    print(f"\ncompressed input ({mb:.0f} MB of JSON; MB/s of uncompressed JSON; per core = / cores used):")
    for suffix, level in ((".gz", "gzip -6"), (".bz2", "bzip2 -9")):
        t0 = time.perf_counter()
        packed = compress(big, suffix)
        print(f"  {packed.name}: {packed.stat().st_size / 1e6:.0f} MB ({level}, compressed in "
              f"{time.perf_counter() - t0:.0f} s)")
        dec = {"stdlib": _py(DECOMPRESS, str(packed), "stdlib", "1")[0]}
        for th in (1, 2):
            dec[f"parallel x{th}"] = _py(DECOMPRESS, str(packed), "parallel", str(th))[0]
        lib = "rapidgzip" if suffix == ".gz" else "indexed_bzip2"
        print("    decompression only: " + ", ".join(
            f"{k.replace('parallel', lib)} {mb / t:.0f} MB/s" for k, t in dec.items()))
        t_std, _, rows = _py(SHARD, str(packed), str(tmp / f"std{suffix}"), "0", "0", "-")
        assert rows == rows_plain, (rows, rows_plain)
        std = mb / t_std
        print(f"    stdlib single stream, 1 process:            {std:6.1f} MB/s  per core {std:6.1f}   1.00x")
        t_b, rows_b = _py(PARALLEL_STREAM, str(packed), str(tmp / f"b{suffix}"), "2")
        assert rows_b == rows_plain
        print(f"    {lib} parallelization=2, 1 parser:   {mb / t_b:6.1f} MB/s  per core {mb / t_b / 2:6.1f}   "
              f"{t_std / t_b:.2f}x  (option B, 2 cores)")
        for w in (1, 2):
            cache = tmp / f"idx{w}{suffix}"
            t_idx, idx_bytes = _py(INDEX, str(packed), str(cache), str(w))
            t_st, rows_w = _staged_by(packed, tmp / f"w{w}{suffix}", w, cache)
            assert rows_w == rows_plain, (rows_w, rows_plain)
            total = t_idx + t_st
            print(f"    byte shards, {w} worker{'s' if w > 1 else ' '} (index {t_idx:5.1f} s + stage {t_st:5.1f} s): "
                  f"{mb / total:6.1f} MB/s  per core {mb / total / w:6.1f}   {t_std / total:.2f}x  "
                  f"(staging alone {mb / t_st:.1f} MB/s; index file {idx_bytes / 1e3:.0f} kB)")
        packed.unlink()
        if suffix == ".bz2":
            t0 = time.perf_counter()
            multi = compress_multistream(big)
            print(f"  {multi.name}: {multi.stat().st_size / 1e6:.0f} MB (bzip2 -9 per 900 kB stream, as pbzip2; "
                  f"compressed in {time.perf_counter() - t0:.0f} s)")
            for w in (1, 2):
                t_cut, _ = _py(CUTS, str(multi), str(SHARDS))
                t_st, rows_m = _staged_by(multi, tmp / f"m{w}", w, tmp / "no-index")
                assert rows_m == rows_plain, (rows_m, rows_plain)
                assert not (tmp / "no-index").exists()
                total = t_cut + t_st
                print(f"    stream shards, {w} worker{'s' if w > 1 else ' '} (cuts {t_cut:5.2f} s + stage "
                      f"{t_st:5.1f} s): {mb / total:6.1f} MB/s  per core {mb / total / w:6.1f}   {t_std / total:.2f}x  "
                      f"(multistream .bz2, no seek index)")
            multi.unlink()


def _staged_by(packed: Path, out: Path, workers: int, cache: Path) -> tuple[float, float]:
    """:data:`SHARDS` shards of a compressed file staged by ``workers`` processes at a time (1 worker: one after
    the other; a single shard would be the stdlib single stream): summed wall of the rounds, rows staged."""
    total = rows = 0.0
    for first in range(0, SHARDS, workers):
        t, r = _parallel(SHARD, [[str(packed), str(out), str(SHARDS), str(i), str(cache)]
                                 for i in range(first, min(SHARDS, first + workers))])
        total += t
        rows += r
    return total, rows


def _py(code: str, *args: str) -> list[float]:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return [float(x) for x in out.stdout.strip().splitlines()[-1].split()]  # last line: stage_shard prints progress


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--data", default=os.environ.get("LINKEDQA_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--compressed", action=argparse.BooleanOptionalAction, default=True,
                    help="also measure .gz/.bz2 input (stdlib single stream vs parallel paths)")
    a = ap.parse_args()
    lines = real_lines(Path(a.data))
    with tempfile.TemporaryDirectory(prefix="lqa-bench-") as tmp:
        tmp = Path(tmp)
        big, small = tmp / "big.json", tmp / "small.json"
        mb_big = make_dump(lines, a.mb, big) / 1e6
        mb_small = make_dump(lines, max(1, a.mb // 10), small) / 1e6
        print(f"input: {mb_big:.0f} MB and {mb_small:.0f} MB plain JSON dumps from {len(lines)} real entity lines "
              f"(ids rewritten); {os.cpu_count()} cores")
        t_base, rss_base = _py(BASELINE, str(big), str(tmp / "base"))
        t_ours, rss_ours, rows = _py(OURS, str(big), str(tmp / "w1"), "1", "0")
        _, rss_small, _ = _py(OURS, str(small), str(tmp / "w0"), "1", "0")
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", OURS, str(big), str(tmp / "w2"), "2", str(i)], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True) for i in range(2)]
        for p in procs:
            p.communicate()
        t_two = time.perf_counter() - t0
        ours, base = mb_big / t_ours, mb_big / t_base
        print(f"baseline (json.loads loop -> 1 parquet):  {base:7.1f} MB/s   peak RSS {rss_base:7.0f} MB")
        print(f"linkedqa stage_shard, 1 process:          {ours:7.1f} MB/s   peak RSS {rss_ours:7.0f} MB   "
              f"({rows:,.0f} rows)")
        print(f"ratio linkedqa / baseline:                {ours / base:7.2f}x")
        print(f"peak RSS at {mb_small:.0f} MB vs {mb_big:.0f} MB input:        {rss_small:.0f} MB vs "
              f"{rss_ours:.0f} MB (x{rss_ours / rss_small:.2f} for x{mb_big / mb_small:.0f} input)")
        print(f"2 shards in 2 processes:                  {mb_big / t_two:7.1f} MB/s   "
              f"speed-up x{t_ours / t_two:.2f}")
        full_tb = 1.3e6
        hours = full_tb / (ours * 16) / 3600
        print(f"projection, full dump (~1.3 TB JSON) on 16 cores at this per-core rate: {hours:.1f} h of parsing "
              "(compressed dumps: byte shards of the decompressed stream, below)")
        if a.compressed:
            compressed_section(big, mb_big, rows, tmp)

if __name__ == "__main__":
    main()
