"""Benchmark: what CPU engines pay for prefilling whole prompts (chunked prefill off) so per-request seeds hold.

Why: on the CPU platform :func:`tasks.llm.vllm_backend.engine_kwargs` turns chunked prefill off (vLLM 0.32 fails a
seeded request whose partial prefill sampled a token it discards), so a prompt waits for room in a step's token
budget instead of being split. This script measures the cost on the product's real ELA prompts, against vLLM's
CPU default (chunked prefill on, same 4,096-token step budget, seeds left out, since chunked prefill fails
seeded requests there), each variant in its own process (one engine per process):

* the first turn (system prompt, few-shot turns, ``<link>question</link>``) of every question of a finished ELA
  run, one batch, the run's search-step token limit;
* the answer turn of the same questions, rebuilt from the run's trajectories with equal prompt hashes
  (``tests/bench/probe_ela_sampling.rebuild``), one batch, ``--answer-tokens`` new tokens.

Greedy by default, so both variants decode the same texts and the same number of tokens (the timing then
measures the scheduling, not other answers of other lengths; the printout says if the token counts differ).
Variants run in ABBA order (``--rounds 2``: whole, chunked, chunked, whole), so a machine that speeds up or slows
down during the run weighs on both alike. Printed per run and as means: engine start, each phase's wall time,
tokens, and the ratio whole / chunked of the generation time.

Needs the run's ``LINKEDQA_HOME`` (the KB's entity index, the dataset, the embedded model): ``make demo`` leaves
one (its ELA run id is printed at the end).

Run: ``.venv/bin/python -m tests.bench.bench_prefill --run ela-webqsp-el-test-aef503f7 [--rounds 2]
[--answer-tokens 128] [--sampled]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

VARIANTS = ("whole", "chunked")


def one(variant: str, run_id: str, answer_tokens: int, sampled: bool) -> dict:
    """Start an engine in ``variant`` and time the first-turn batch and the answer-turn batch of ``run_id``."""
    from flows.cli.command_env import setup_env

    setup_env()
    from storage import layout
    from tasks.llm.types import ChatRequest, EngineConfig
    from tasks.llm.vllm_backend import VLLMBackend
    from tasks.methods.ela import method as ela
    from tests.bench.probe_ela_sampling import question_texts, rebuild

    root = layout.home()
    answers, ids, _, left_out, plan = rebuild(layout.run_dir(run_id, root), root)
    st = ela.ElaSettings(**plan["method_settings"])
    text = question_texts(plan, root)
    base = ela.load_prompt(st.source, st.fewshot)
    upd: dict = {} if sampled else {"temperature": 0.0, "top_p": 1.0}
    if variant == "chunked":
        upd["seed"] = None  # the only way vLLM 0.32 on CPU runs a chunked batch (the backend's behaviour before)
    first = [ChatRequest(messages=ela.link_messages(base, text[q]),
                         sampling=ela.search_sampling(st).model_copy(update=upd)) for q in ids]
    second = [ChatRequest(messages=r.messages,
                          sampling=r.sampling.model_copy(update=upd | {"max_tokens": answer_tokens}))
              for r in answers]
    cfg = plan["config"]
    engine = EngineConfig(model=cfg["model"], dtype=cfg.get("dtype") or "auto", max_model_len=cfg["max_model_len"])
    extra = {"enable_chunked_prefill": True} if variant == "chunked" else {}
    t0 = time.perf_counter()
    be = VLLMBackend(engine, llm_kwargs=extra)
    start = time.perf_counter() - t0
    be.generate(first[:1])  # warm-up (first-call setup), not timed; its prefix is cached for both variants
    sched = be.llm.llm_engine.vllm_config.scheduler_config  # what the engine really runs with
    res: dict = {"variant": variant, "start_s": start, "n": len(ids), "left_out": left_out,
                 "chunked_prefill": bool(sched.enable_chunked_prefill), "budget": sched.max_num_batched_tokens}
    for name, reqs in (("first", first), ("answer", second)):
        t0 = time.perf_counter()
        outs = be.generate(reqs)
        res[name] = {"wall_s": time.perf_counter() - t0, "prompt_tokens": sum(o.prompt_tokens for o in outs),
                     "gen_tokens": sum(o.completion_tokens for o in outs), "errors": sum(1 for o in outs if o.error)}
    be.close()
    return res


def main() -> None:
    """Run the variants in ABBA order, each in a subprocess, and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="run id of a finished ELA run under LINKEDQA_HOME")
    ap.add_argument("--rounds", type=int, default=2, help="ABBA rounds (each runs both variants once)")
    ap.add_argument("--answer-tokens", type=int, default=128, help="new tokens of the answer turn")
    ap.add_argument("--sampled", action="store_true",
                    help="the run's sampling (temperature 0.7) instead of greedy: the variants then decode other "
                         "texts of other lengths")
    ap.add_argument("--limit", type=float, default=900.0, help="seconds allowed per variant run")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("RESULT " + json.dumps(one(a.one, a.run, a.answer_tokens, a.sampled)), flush=True)
        return
    order = [v for i in range(a.rounds) for v in (VARIANTS if i % 2 == 0 else VARIANTS[::-1])]
    res: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for v in order:
        cmd = [sys.executable, "-m", "tests.bench.bench_prefill", "--one", v, "--run", a.run,
               "--answer-tokens", str(a.answer_tokens)] + (["--sampled"] if a.sampled else [])
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.limit)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{v}: not finished within {a.limit:.0f} s") from None
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            raise SystemExit(f"{v}: failed ({p.returncode}): {p.stderr[-1500:]}")
        r = json.loads(line[7:])
        res[v].append(r)
        print(f"{v:>7} (chunked prefill {r['chunked_prefill']}, step budget {r['budget']}): "
              f"start {r['start_s']:5.1f}s  "
              + "  ".join(f"{k} {r['n']} prompts {r[k]['wall_s']:6.1f}s "
                          f"({r[k]['prompt_tokens']:,} prompt + {r[k]['gen_tokens']:,} gen tok, "
                          f"{r[k]['errors']} err)" for k in ("first", "answer")), flush=True)
    if res["whole"] and res["whole"][0]["left_out"]:
        print(f"({res['whole'][0]['left_out']} answer prompts left out: their rebuilt hash differs)")
    mean = {v: {k: statistics.fmean(r[k]["wall_s"] for r in rs) for k in ("first", "answer")} for v, rs in res.items()}
    gen = {v: statistics.fmean(r["first"]["gen_tokens"] + r["answer"]["gen_tokens"] for r in rs)
           for v, rs in res.items()}
    for k in ("first", "answer"):
        print(f"{k:>6} turn: whole {mean['whole'][k]:6.1f}s  chunked {mean['chunked'][k]:6.1f}s  "
              f"whole / chunked {mean['whole'][k] / mean['chunked'][k]:.2f}x")
    tw, tc = sum(mean["whole"].values()), sum(mean["chunked"].values())
    print(f"both turns: whole / chunked generation time {tw / tc:.2f}x (means of {a.rounds} runs each; generated "
          f"tokens {gen['whole']:.0f} vs {gen['chunked']:.0f})")
    if abs(gen["whole"] - gen["chunked"]) > 0.05 * max(gen.values()):
        print("note: the variants generated token counts >5% apart, so the ratio also measures other texts")


if __name__ == "__main__":
    main()
