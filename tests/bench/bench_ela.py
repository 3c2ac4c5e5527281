"""Benchmark: ELA runtime batching, response-cache re-run cost, and entity search speed/recall.

Figures (all measured in this run, on the same questions):

* entity search: batched queries/s of the labels+aliases BM25 index over the sample KB (gold mention texts of
  WebQSP-EL test, repeated to ``--queries``), and recall@50 of gold mentions on the KB-covered questions;
* ELA, same questions, same engine: the batching runtime (one backend call per step for all questions) vs a
  per-question loop (the same agent run question by question), cache off -> throughput ratio; the non-LLM
  share of the batched wall time; then a re-run through the persistent response cache (all hits) as a share
  of the first run's wall time.

Needs the sample KB (``linkedqa kb build --sample``) in ``LINKEDQA_HOME`` and the embedded model (prepared on
first use). On a GPU machine pass ``--model`` (an 8B model) and a larger ``--n`` to get output tok/s and
questions/s.

Run: ``.venv/bin/python -m tests.bench.bench_ela [--n 64] [--loop-n 64] [--model embedded]``; on a GPU machine
``--model <hf id or local path> --n 1000`` (docs/scaling.md#gpu).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="questions for the batched runtime")
    ap.add_argument("--loop-n", type=int, default=64,
                    help="questions of the per-question loop (the first ones of --n; a 1,000-question loop would "
                         "take hours, and its q/s rate does not depend on the count)")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--temperature", type=float, default=None,
                    help="ELA sampling temperature (default: the paper's 0.7; 0 = greedy, then the continuous and "
                         "lockstep runs must agree)")
    ap.add_argument("--skip-llm", action="store_true")
    a = ap.parse_args()

    from flows.cli.command_env import setup_env

    setup_env()
    from storage import layout
    from storage.catalog import latest_kb_version
    from tasks.methods.base import MethodContext
    from tasks.methods.ela.method import ElaSettings, ela_agent
    from tasks.methods.runtime import run_agents, run_agents_continuous
    from tasks.methods.search_recall.method import SearchRecallMethod
    from tasks.metrics.runs import summary_metrics
    from tasks.runs.finalize import prefix_cache_share
    from tasks.runs.planning import load_questions
    from tasks.search.kb_indexes import entity_index, search_tool

    kb = latest_kb_version()
    if kb is None:
        raise SystemExit("no KB: run `linkedqa kb build --sample` first")
    questions, _, _ = load_questions("webqsp-el", "test")
    root = layout.home()

    # ---- entity search
    t0 = time.perf_counter()
    index = entity_index(kb, root)
    t_open = time.perf_counter() - t0
    mentions = [m["text"] for q in questions for m in (q["gold_mentions"] or []) if m.get("text")]
    queries = (mentions * (a.queries // len(mentions) + 1))[: a.queries]
    index.search_many(queries[:200], k=50)  # warm the mmap
    t0 = time.perf_counter()
    index.search_many(queries, k=50)
    dt = time.perf_counter() - t0
    print(f"entity search: {len(queries):,} queries (k=50) in {dt:.2f}s = {len(queries) / dt:,.0f} q/s "
          f"(one batched call, 1 process); index opened/built in {t_open:.1f}s, KB {kb}")
    method = SearchRecallMethod(SearchRecallMethod.Settings())
    ctx = MethodContext(kb_version=kb, root=root)
    tools = method.build_tools(ctx)
    outs, _ = run_agents(method.agent(ctx), questions, None, tools)
    preds = [{**o, "scores": o.get("scores")} for o in outs]
    summ = {m["metric"]: m for m in summary_metrics("search", preds, questions)}
    print(f"search recall@50: {summ['recall@50']['value']:.3f} over {summ['recall@50']['n']} questions with a gold "
          f"mention; {summ['recall@50_covered']['value']:.3f} over the {summ['recall@50_covered']['n']} whose gold "
          f"entity the sample KB can name (coverage {summ['kb_coverage']['value']:.3f})")
    if a.skip_llm:
        return

    # ---- ELA runtime: batched vs per-question, then cache re-run
    from tasks.llm.cache import ResponseCache
    from tasks.llm.cached import CachedBackend
    from tasks.llm.types import EngineConfig
    from tasks.llm.vllm_backend import VLLMBackend

    qs = questions[: a.n]
    tools = {"entity_search": search_tool(kb, root, "wikidata")}
    settings = ElaSettings() if a.temperature is None else ElaSettings(temperature=a.temperature)
    agent = ela_agent(settings)
    t0 = time.perf_counter()
    engine = VLLMBackend(EngineConfig(model=a.model))
    print(f"engine start: {time.perf_counter() - t0:.1f}s ({a.model})")
    engine.generate([])  # no-op; keeps the first timed call free of lazy setup

    def tokens(outs):
        return sum(o["completion_tokens"] for o in outs), sum(o["prompt_tokens"] for o in outs)

    def cold() -> None:
        # every timed phase starts from an empty prefix cache: the phases send the same prompts, so a warm
        # cache would make whichever phase runs second look faster (measured: lockstep after continuous served
        # 96% of its prompt tokens from the cache)
        if not engine.llm.reset_prefix_cache():
            raise SystemExit("vLLM could not reset its prefix cache; the phases would not be comparable")

    def share(outs) -> str:
        v = prefix_cache_share([o["trajectory"] for o in outs])
        return "-" if v is None else f"{v:.2f}"

    cold()
    t0 = time.perf_counter()
    outs_c, st_c = run_agents_continuous(agent, qs, engine, tools)  # no cache: every call is generated
    t_cont = time.perf_counter() - t0
    gen_c, prm_c = tokens(outs_c)
    with tempfile.TemporaryDirectory(prefix="lqa-cache-") as tmp:
        cached = CachedBackend(engine, ResponseCache(Path(tmp) / "c.sqlite"))
        cold()
        t0 = time.perf_counter()
        outs_b, st = run_agents(agent, qs, cached, tools)  # empty cache: every call is generated
        t_batched = time.perf_counter() - t0
        gen_b, prm_b = tokens(outs_b)
        t0 = time.perf_counter()
        outs_r, _ = run_agents(agent, qs, cached, tools)  # same run again: all cache hits
        t_rerun = time.perf_counter() - t0
    cold()
    t0 = time.perf_counter()
    outs_s = []
    loop_qs = qs[: max(1, min(a.loop_n, len(qs)))]
    for q in loop_qs:
        o, _ = run_agents(agent, [q], engine, tools)
        outs_s += o
    t_seq = time.perf_counter() - t0
    gen_s, prm_s = tokens(outs_s)
    n, n_loop = len(qs), len(loop_qs)
    print(f"ELA on {n} WebQSP-EL questions, same engine, temperature {settings.temperature}:")
    print(f"  continuous:        {t_cont:7.1f}s  {n / t_cont:6.3f} q/s  {gen_c / t_cont:7.1f} gen tok/s  "
          f"{prm_c / t_cont:7.1f} prompt tok/s  prefix-cached {share(outs_c)}  ({st_c.steps} engine steps, "
          f"{st_c.llm_requests} requests)")
    print(f"  batched runtime:   {t_batched:7.1f}s  {n / t_batched:6.3f} q/s  {gen_b / t_batched:7.1f} gen tok/s  "
          f"{prm_b / t_batched:7.1f} prompt tok/s  prefix-cached {share(outs_b)}  ({st.llm_batches} backend calls)")
    print(f"  per-question loop: {t_seq:7.1f}s  {n_loop / t_seq:6.3f} q/s  {gen_s / t_seq:7.1f} gen tok/s  "
          f"{prm_s / t_seq:7.1f} prompt tok/s  prefix-cached {share(outs_s)}  "
          f"({sum(o['llm_calls'] for o in outs_s)} backend calls, "
          f"first {n_loop} questions)")
    print(f"  throughput ratio batched / per-question: {(n / t_batched) / (n_loop / t_seq):.2f}x (q/s)")
    print(f"  throughput ratio continuous / lockstep: {t_batched / t_cont:.2f}x; continuous / per-question: "
          f"{(n / t_cont) / (n_loop / t_seq):.2f}x (q/s)")
    agree = sum(x.get("predicted_entities") == y.get("predicted_entities")
                and bool(x.get("error")) == bool(y.get("error")) for x, y in zip(outs_c, outs_b, strict=True))
    print(f"  continuous vs lockstep: same predictions for {agree}/{n} questions"
          + (" (greedy decoding)" if settings.temperature == 0 else " (sampling: not expected to agree)"))
    errs = sum(1 for o in outs_b if o.get("error"))
    print(f"  batched run: {errs}/{n} item errors (each phase started from an empty prefix cache)")
    print(f"  non-LLM share of the batched wall time: {100 * st.non_llm_seconds / t_batched:.2f}% "
          f"({st.non_llm_seconds:.2f}s: search, parsing, bookkeeping, cache lookups)")
    same = sum(x.get("predicted_entities") == y.get("predicted_entities") for x, y in zip(outs_b, outs_r, strict=True))
    print(f"  re-run through the response cache: {t_rerun:.2f}s = {100 * t_rerun / t_batched:.2f}% of the first "
          f"run; identical predictions {same}/{n}")
    engine.close()


if __name__ == "__main__":
    main()
