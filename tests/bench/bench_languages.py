"""Benchmark: label languages (``kb build --languages``), every language (the baseline) against ``en,mul``.

Two measurements, both with the library build steps (``stage_shard`` + ``merge_and_publish``, no Prefect), each
configuration in a fresh temporary ``LINKEDQA_HOME``, the two configurations alternating ``--repeat`` times in the
same run:

* the sample KB (every real file under ``LINKEDQA_DATA``, as ``linkedqa kb build --sample [--languages en,mul]``):
  ``labels`` rows and Parquet bytes, the whole KB's Parquet bytes, staging seconds (sum over shards; and over the
  Wikidata JSON inputs alone, the ones with many languages) and merge seconds;
* a plain Wikidata JSON dump of ``--mb`` MB written from the real dump lines with the ids rewritten
  (``bench_ingest.make_dump``; synthetic, built from real entities): staging MB/s of one shard in one process,
  labels rows and staged labels bytes.

Run: ``.venv/bin/python -m tests.bench.bench_languages [--mb 100] [--repeat 2]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from storage import layout
from tasks.kb.merge import merge_and_publish
from tasks.kb.plan import InputSpec, make_plan, parse_languages, plan_from_inputs
from tasks.kb.stage import shard_dir, stage_shard
from tests.bench.bench_ingest import ROOT, make_dump, real_lines

CHOICES = ("all", "en,mul")
JSON_KINDS = ("wikidata-json", "entity-file")


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.parquet")) if folder.is_dir() else 0


def sample_kb(data: Path, languages: str, home: Path) -> dict:
    """Build the sample KB with ``languages`` under ``home``; sizes and times."""
    plan = plan_from_inputs(sample=True, data_root=data, languages=languages)
    stage_s = json_s = 0.0
    for spec in plan.inputs:
        for shard in spec.shards:
            rec = stage_shard(plan.version, spec, shard, home)
            stage_s += rec["seconds"]
            json_s += rec["seconds"] if spec.kind in JSON_KINDS else 0.0
    t0 = time.perf_counter()
    counts = merge_and_publish(plan, home, threads=os.cpu_count(), log=lambda m: None)
    merge_s = time.perf_counter() - t0
    vdir = layout.kb_dir(plan.version, home)
    return {"version": plan.version, "labels": counts.get("labels", 0), "entities": counts.get("entities", 0),
            "claims": counts.get("claims", 0), "labels_bytes": _bytes(vdir / "labels"),
            "kb_bytes": _bytes(vdir) - _bytes(vdir / "_staging"), "stage_s": stage_s, "json_stage_s": json_s,
            "merge_s": merge_s}


def dump_stage(dump: Path, languages: str, home: Path) -> dict:
    """Stage one plain dump as one shard in this process; rows, staged labels bytes and seconds."""
    spec = InputSpec(kind="wikidata-json", path=str(dump), source="wikidata-json",
                     languages=parse_languages(languages))
    version = make_plan("bench", [spec], languages=languages).version
    rec = stage_shard(version, spec, spec.shards[0], home)
    out = shard_dir(version, spec, spec.shards[0], home)
    return {"seconds": rec["seconds"], "labels": rec["rows"].get("labels", 0),
            "rows": sum(rec["rows"].values()), "labels_bytes": (out / "labels.parquet").stat().st_size}


def main() -> None:
    """Run the benchmark and print the figures (every ratio is en,mul against all, measured in this run)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="size of the synthetic plain dump (0: skip)")
    ap.add_argument("--repeat", type=int, default=2, help="alternating repetitions of each configuration")
    ap.add_argument("--no-sample", action="store_true", help="skip the sample KB builds")
    ap.add_argument("--data", default=os.environ.get("LINKEDQA_DATA", str(ROOT.parent / "shared" / "data")))
    a = ap.parse_args()
    data = Path(a.data)
    print(f"{os.cpu_count()} cores; configurations alternate, {a.repeat} run(s) each; baseline = all")
    with tempfile.TemporaryDirectory(prefix="lqa-bench-lang-") as tmp:
        tmp = Path(tmp)
        if not a.no_sample:
            res: dict[str, list[dict]] = {c: [] for c in CHOICES}
            for i in range(a.repeat):
                for c in CHOICES:
                    home = tmp / f"sample-{c}-{i}"
                    res[c].append(sample_kb(data, c, home))
                    shutil.rmtree(home)
            print("\nsample KB (every real sample file; library stage + merge):")
            first = {c: res[c][0] for c in CHOICES}
            for c in CHOICES:
                r = first[c]
                stage = ", ".join(f"{x['stage_s']:.1f}" for x in res[c])
                js = ", ".join(f"{x['json_stage_s']:.2f}" for x in res[c])
                merge = ", ".join(f"{x['merge_s']:.1f}" for x in res[c])
                print(f"  {c:<7} {r['version']}: labels {r['labels']:,} rows, {r['labels_bytes'] / 1e6:.2f} MB; "
                      f"KB {r['kb_bytes'] / 1e6:.1f} MB; entities {r['entities']:,}, claims {r['claims']:,}; "
                      f"staging s {stage} (Wikidata JSON inputs {js}); merge s {merge}")
            b, o = first["all"], first["en,mul"]
            js_best = {c: min(x["json_stage_s"] for x in res[c]) for c in CHOICES}
            print(f"  en,mul / all: labels rows x{o['labels'] / b['labels']:.3f}, labels bytes "
                  f"x{o['labels_bytes'] / b['labels_bytes']:.3f}, KB bytes x{o['kb_bytes'] / b['kb_bytes']:.3f}, "
                  f"Wikidata JSON staging time x{js_best['en,mul'] / js_best['all']:.2f} (best of {a.repeat}); "
                  f"same entities and claims: {(o['entities'], o['claims']) == (b['entities'], b['claims'])}")
        if a.mb:
            dump = tmp / "dump.json"
            mb = make_dump(real_lines(data), a.mb, dump) / 1e6
            runs: dict[str, list[dict]] = {c: [] for c in CHOICES}
            for i in range(a.repeat):
                for c in CHOICES:
                    home = tmp / f"dump-{c}-{i}"
                    runs[c].append(dump_stage(dump, c, home))
                    shutil.rmtree(home)
            print(f"\nplain dump, {mb:.0f} MB (real dump lines, ids rewritten), 1 shard, 1 process:")
            for c in CHOICES:
                r = runs[c][0]
                speeds = ", ".join(f"{mb / x['seconds']:.1f}" for x in runs[c])
                print(f"  {c:<7} MB/s {speeds}; labels {r['labels']:,} of {r['rows']:,} rows, staged labels "
                      f"{r['labels_bytes'] / 1e6:.1f} MB")
            best = {c: min(x["seconds"] for x in runs[c]) for c in CHOICES}
            print(f"  en,mul / all: speed x{best['all'] / best['en,mul']:.2f} (best of {a.repeat}), labels rows "
                  f"x{runs['en,mul'][0]['labels'] / runs['all'][0]['labels']:.3f}, staged labels bytes "
                  f"x{runs['en,mul'][0]['labels_bytes'] / runs['all'][0]['labels_bytes']:.3f}")


if __name__ == "__main__":
    main()
