"""Open-world KGQA cost: LLM calls and tokens per question for anchorrag vs tog vs react-kg (and cot), same questions.

AnchorRAG issue benchmark. Questions: real WebQuestions test questions (or ``--split test-noisy``) whose topic
entities are KG subjects of the KB, the first ``--n``. KB: ``kbkit.build_tog_kb`` built in a temporary warehouse
(default), or ``--home`` with an existing KB (``--kb``). One vLLM engine for every method; each method runs all
questions in one batched ``run_agents`` call. Prints per method: LLM calls, prompt and completion tokens per
question, batched generate calls, wall time, and hit1_tog / anchor_acc / cot_rate from the ``tog`` metrics; ratios
are against ``tog`` measured in the same run.

    python -m tests.bench.bench_anchorrag --n 6
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

METHODS = (("anchorrag", {}), ("tog", {}), ("react-kg", {"context_tokens": "2048", "max_depth": "2"}),
           ("cot", {}))


def main() -> None:
    """Run the benchmark and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=6, help="questions")
    p.add_argument("--split", default="test", help="webquestions split (test, test-noisy)")
    p.add_argument("--home", type=Path, default=None, help="LINKEDQA_HOME holding --kb (default: build the test KB)")
    p.add_argument("--kb", default=None, help="KB version in --home")
    p.add_argument("--model", default="embedded")
    p.add_argument("--depth", default="3")
    a = p.parse_args()

    from storage import layout
    from tasks.datasets.registry import load_dataset
    from tasks.kg.duckdb_store import DuckDBKG
    from tasks.llm.types import EngineConfig
    from tasks.llm.vllm_backend import VLLMBackend
    from tasks.methods.base import MethodContext
    from tasks.methods.registry import get_method
    from tasks.methods.runtime import run_agents
    from tasks.metrics.runs import summary_metrics
    from tests.unit.kbkit import build_tog_kb

    tmp = tempfile.TemporaryDirectory()
    root = a.home or Path(tmp.name) / "warehouse"
    os.environ["LINKEDQA_HOME"] = str(root)
    t0 = time.perf_counter()
    kb = a.kb or build_tog_kb(root, layout.data_root(), "togbench")
    print(f"KB {kb} ready in {time.perf_counter() - t0:.1f}s")
    with DuckDBKG(kb, root=root) as kg:
        rows = [r for r in load_dataset("webquestions", layout.data_root()).rows(a.split) if r["gold_entities"]]
        facts = kg.outgoing(sorted({q for r in rows for q in r["gold_entities"]}), limit_per_entity=1)
    questions = [r for r in rows if all(facts.get(q) for q in r["gold_entities"])][: a.n]
    print(f"{len(questions)} webquestions/{a.split} questions whose topic entities are KG subjects of {kb}")

    t0 = time.perf_counter()
    engine = VLLMBackend(EngineConfig(model=a.model))
    print(f"engine start: {time.perf_counter() - t0:.1f}s ({a.model})")
    ctx = MethodContext(kb_version=kb, root=root, dataset="webquestions", task="kgqa-open")
    table = {}
    for name, settings in METHODS:
        cls = get_method(name)
        extra = {"depth": a.depth} if name in ("anchorrag", "tog") else {}
        m = cls(cls.parse_settings({**settings, **extra}))
        t1 = time.perf_counter()
        tools = m.build_tools(ctx)
        t_tools = time.perf_counter() - t1
        t1 = time.perf_counter()
        outs, stats = run_agents(m.agent(ctx), questions, engine, tools)
        wall = time.perf_counter() - t1
        preds = [{**o, "scores": o.get("scores")} for o in outs]
        summ = {r["metric"]: r["value"] for r in summary_metrics("tog", preds, questions)}
        n = len(outs)
        table[name] = {
            "calls": sum(o["llm_calls"] for o in outs) / n,
            "prompt": sum(o["prompt_tokens"] for o in outs) / n,
            "completion": sum(o["completion_tokens"] for o in outs) / n,
            "batches": stats.llm_batches, "wall": wall, "tools_s": t_tools,
            "errors": sum(1 for o in outs if o["error"]),
            "hit1_tog": summ.get("hit1_tog"), "anchor_acc": summ.get("anchor_acc"), "cot_rate": summ.get("cot_rate"),
        }
        print(f"  {name}: done in {wall:.1f}s (tools ready in {t_tools:.1f}s)", flush=True)
    engine.close()

    base = table["tog"]
    print(f"\nOpen-world KGQA on {len(questions)} questions ({a.model}, depth {a.depth}); ratios vs tog, same run:")
    print(f"{'method':<10} {'calls/q':>8} {'x':>5} {'prompt tok/q':>13} {'x':>5} {'compl tok/q':>12} {'x':>5} "
          f"{'batches':>8} {'wall s':>7} {'errors':>6} {'hit1_tog':>8} {'anchor':>7} {'cot':>5}")

    def fmt(v):
        return "-" if v is None else f"{v:.2f}"

    for name, r in table.items():
        ratio = {k: r[k] / base[k] if base[k] else float("nan") for k in ("calls", "prompt", "completion")}
        print(f"{name:<10} {r['calls']:>8.1f} {ratio['calls']:>5.2f} {r['prompt']:>13.0f} "
              f"{ratio['prompt']:>5.2f} {r['completion']:>12.0f} {ratio['completion']:>5.2f} "
              f"{r['batches']:>8} {r['wall']:>7.1f} {r['errors']:>6} {fmt(r['hit1_tog']):>8} "
              f"{fmt(r['anchor_acc']):>7} {fmt(r['cot_rate']):>5}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
