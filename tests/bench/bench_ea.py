"""Benchmark: ``ea-embed`` on the full DBP15K test splits (10,500 links each), with in-run baselines.

Per pair (FR-EN, JA-EN, ZH-EN), in its own subprocess (so peak memory is per pair):

* prepare: store the dataset and its KG tables, encode every entity name with MiniLM (cached afterwards);
* run: ``linkedqa run ea-embed --dataset <pair> --split test`` through the Prefect-free run machinery (tuning
  the signal weights on the train links, CSLS pass, ranking, predictions, metrics) -> wall time, peak RSS,
  Hits@1/10, MRR, candidate recall@10/20 as stored in the run's ``metrics``;
* baselines on the same test space, same run: MiniLM names only (the English-only model alone), character
  n-grams of the names only (with and without kana transliteration), and the tuned config with the character
  signal switched (off if tuning kept it, on if tuning dropped it) -> the gain of each part.

Run: ``.venv/bin/python -m tests.bench.bench_ea [--pairs fr-en ja-en zh-en] [--home DIR] [--no-ablations]``
(the default home is a temporary folder: every figure includes encoding).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _hits(scorer, links, k: int = 10) -> tuple[float, float]:
    ranked = scorer.rank([s for s, _ in links], k)
    h1 = sum(r[0].id == t for r, (_, t) in zip(ranked, links, strict=True)) / len(links)
    h10 = sum(t in {c.id for c in r} for r, (_, t) in zip(ranked, links, strict=True)) / len(links)
    return h1, h10


def one(dataset: str, ablations: bool) -> dict:
    """Benchmark one dataset in this process; returns the figures."""
    from dataclasses import replace

    from storage import layout
    from tasks.datasets.ea_kg import kg_dir
    from tasks.datasets.store import ensure_kg, latest_dataset_folder
    from tasks.methods.ea.embed import AlignmentScorer, EmbedConfig, name_embeddings
    from tasks.methods.ea.embed_method import split_links
    from tasks.runs.config import RunConfig
    from tasks.runs.finalize import finalize_run
    from tasks.runs.planning import plan_run
    from tasks.runs.shard import execute_shard

    out: dict = {"dataset": dataset}
    t0 = time.perf_counter()
    ap = ensure_kg(dataset)
    out["load_s"] = time.perf_counter() - t0
    folder = latest_dataset_folder(dataset)
    cache = kg_dir(folder) / "embeddings"
    t0 = time.perf_counter()
    name_embeddings(ap.kg1.names, cache)
    name_embeddings(ap.kg2.names, cache)
    out["encode_s"] = time.perf_counter() - t0
    out["entities"] = len(ap.kg1) + len(ap.kg2)

    plan = plan_run(RunConfig(method="ea-embed", dataset=dataset, split="test"))
    t0 = time.perf_counter()
    execute_shard(plan, 0, log=lambda _m: None)
    metrics = finalize_run(plan, "bench", time.perf_counter() - t0, log=lambda _m: None)
    out["run_s"] = time.perf_counter() - t0
    m = {r["metric"]: r["value"] for r in metrics}
    n = {r["metric"]: r["n"] for r in metrics}
    out.update({k: m[k] for k in ("hits@1", "hits@10", "mrr", "candidate_recall@10", "candidate_recall@20")})
    out["n"] = n["hits@1"]
    cfg_path = layout.run_dir(plan.run_id) / "ea_embed_config.json"
    tuned = {k: v for k, v in json.loads(cfg_path.read_text()).items() if k != "tuned"}
    out["tuned"] = tuned
    if ablations:
        links = split_links(folder)
        test, train = links["test"], links["train"]
        cfg = EmbedConfig(**tuned)
        char_only = EmbedConfig(w_name=0.0, w_char=1.0, w_neighbour=0.0, w_anchor=0.0, csls=True)
        variants = {
            "minilm_names_only": EmbedConfig(w_name=1.0, w_char=0.0, w_neighbour=0.0, w_anchor=0.0, csls=True),
            "char_names_only": char_only,
            "char_names_only_without_transliteration": replace(char_only, transliterate=False),
            # the tuned config with the character signal switched (off when tuning kept it, on when it dropped it)
            "tuned_char_switched": replace(cfg, w_char=0.0 if cfg.w_char > 0 else 1.0)
            if cfg.w_char == 0 or cfg.w_name + cfg.w_neighbour + cfg.w_anchor > 0 else None,
        }
        for name, vcfg in variants.items():
            if vcfg is None:
                continue
            t0 = time.perf_counter()
            scorer = AlignmentScorer(ap, [s for s, _ in test], [t for _, t in test], train, vcfg, cache)
            h1, h10 = _hits(scorer, test)
            out[name] = {"hits@1": h1, "hits@10": h10, "s": time.perf_counter() - t0}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


def main() -> None:
    """Run every pair in a subprocess and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", nargs="+", default=["fr-en", "ja-en", "zh-en"])
    p.add_argument("--home", type=Path, default=None, help="LINKEDQA_HOME to use (default: a temporary one)")
    p.add_argument("--no-ablations", action="store_true")
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print("RESULT " + json.dumps(one(a.one, not a.no_ablations)), flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="bench_ea_") as tmp:
        home = a.home or Path(tmp) / "warehouse"
        env = {**os.environ, "LINKEDQA_HOME": str(home)}
        print(f"ea-embed on the full DBP15K test splits; {os.cpu_count()} CPU(s); LINKEDQA_HOME={home}")
        for pair in a.pairs:
            cmd = [sys.executable, "-m", "tests.bench.bench_ea", "--one", f"dbp15k-{pair}"]
            if a.no_ablations:
                cmd.append("--no-ablations")
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
            if proc.returncode != 0 or line is None:
                print(f"{pair}: FAILED (exit {proc.returncode})\n{proc.stderr[-3000:]}")
                continue
            r = json.loads(line[len("RESULT "):])
            print(f"\n{pair.upper()} ({r['n']} test links, {r['entities']} entities): wall {wall:.0f}s = "
                  f"load {r['load_s']:.0f}s + MiniLM encode {r['encode_s']:.0f}s + run {r['run_s']:.0f}s "
                  f"(tune + CSLS + rank + metrics); peak RSS {r['peak_rss_mb']:.0f} MB")
            print(f"  Hits@1 {r['hits@1']:.4f}  Hits@10 {r['hits@10']:.4f}  MRR {r['mrr']:.4f}  "
                  f"candidate recall@10 {r['candidate_recall@10']:.4f}  @20 {r['candidate_recall@20']:.4f}")
            print(f"  tuned on train links: {r['tuned']}")
            for name in ("minilm_names_only", "char_names_only", "char_names_only_without_transliteration",
                         "tuned_char_switched"):
                if name in r:
                    v = r[name]
                    print(f"  baseline {name}: Hits@1 {v['hits@1']:.4f}  Hits@10 {v['hits@10']:.4f}  "
                          f"(ea-embed / baseline Hits@10 = {r['hits@10'] / max(v['hits@10'], 1e-9):.2f}x; "
                          f"{v['s']:.0f}s)")


if __name__ == "__main__":
    main()
