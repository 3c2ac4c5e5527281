"""Benchmark: vLLM engine dtype on this CPU: float32 vs bfloat16, same prompts, same engine settings.

Why: vLLM-CPU computes bfloat16 fast only where the CPU has it in hardware (AVX512-BF16, AMX); elsewhere it is
emulated. ``EngineConfig(dtype="auto")`` picks by the CPU's flags (:func:`tasks.llm.env.resolve_dtype`); this
script measures the choice. Each dtype runs in its own process (one engine per process) on the same real
prompts: ELA's first turn (system prompt + few-shot + ``<link>question</link>``) for the first ``--n``
WebQSP-EL test questions, greedy, ``--max-tokens`` new tokens. Printed: engine start, generation wall time,
prompt and generated tokens/s, and the ratio bfloat16 / float32 of the generation time (a dtype that does not
finish within ``--limit`` seconds is reported as slower than that bound).

Needs the embedded model (prepared on first use) and the datasets under LINKEDQA_DATA (no KB).

Run: ``.venv/bin/python -m tests.bench.bench_dtype [--n 8] [--max-tokens 64] [--limit 420]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def one(dtype: str, n: int, max_tokens: int, model: str) -> dict:
    """Start an engine in ``dtype`` and time one batched generation of the benchmark prompts."""
    from flows.cli.command_env import setup_env

    setup_env()
    from tasks.llm.types import ChatRequest, EngineConfig, SamplingConfig
    from tasks.llm.vllm_backend import VLLMBackend
    from tasks.methods.ela.method import load_prompt
    from tasks.runs.planning import load_questions

    questions, _, _ = load_questions("webqsp-el", "test")
    base = load_prompt("wikidata")
    reqs = [ChatRequest(messages=base + [{"role": "user", "content": f"<link>{q['question']}</link>"}],
                        sampling=SamplingConfig(max_tokens=max_tokens)) for q in questions[:n]]
    t0 = time.perf_counter()
    engine = VLLMBackend(EngineConfig(model=model, dtype=dtype))
    start = time.perf_counter() - t0
    engine.generate(reqs[:1])  # warm-up (first-call setup), not timed
    t0 = time.perf_counter()
    outs = engine.generate(reqs)
    wall = time.perf_counter() - t0
    engine.close()
    return {"dtype": engine.dtype, "start_s": start, "wall_s": wall, "n": len(reqs),
            "prompt_tokens": sum(o.prompt_tokens for o in outs), "gen_tokens": sum(o.completion_tokens for o in outs),
            "errors": sum(1 for o in outs if o.error)}


def main() -> None:
    """Run each dtype in a subprocess and print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--limit", type=float, default=420.0, help="seconds allowed per dtype (start included)")
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("RESULT " + json.dumps(one(a.one, a.n, a.max_tokens, a.model)), flush=True)
        return
    from tasks.llm.env import BF16_CPU_FLAGS, cpu_flags, resolve_dtype

    flags = cpu_flags()
    print(f"CPU bf16 flags: {sorted(flags & BF16_CPU_FLAGS) or 'none'}; avx512f: {'avx512f' in flags}; "
          f"auto picks {resolve_dtype('auto', True, flags)}")
    res: dict[str, dict | None] = {}
    for dtype in ("float32", "bfloat16"):
        cmd = [sys.executable, "-m", "tests.bench.bench_dtype", "--one", dtype, "--n", str(a.n),
               "--max-tokens", str(a.max_tokens), "--model", a.model]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.limit)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            res[dtype] = json.loads(line[7:]) if line else None
            if line is None:
                print(f"{dtype}: failed ({p.returncode}): {p.stderr[-800:]}")
        except subprocess.TimeoutExpired:
            res[dtype] = None
            print(f"{dtype}: not finished within {a.limit:.0f} s (engine start included)")
    for dtype, r in res.items():
        if r:
            print(f"{dtype:>9}: start {r['start_s']:5.1f}s  generate {r['n']} prompts {r['wall_s']:7.1f}s  "
                  f"{r['prompt_tokens']:,} prompt tok ({r['prompt_tokens'] / r['wall_s']:6.1f}/s incl. decode)  "
                  f"{r['gen_tokens']} gen tok ({r['gen_tokens'] / r['wall_s']:5.1f}/s)  errors {r['errors']}")
    f32, b16 = res.get("float32"), res.get("bfloat16")
    if f32 and b16:
        print(f"bfloat16 / float32 generation time: {b16['wall_s'] / f32['wall_s']:.2f}x")
    elif f32:
        print(f"bfloat16 / float32 generation time: > {(a.limit - 30) / f32['wall_s']:.1f}x (bf16 did not finish; "
              "30 s allowed for its engine start)")


if __name__ == "__main__":
    main()
