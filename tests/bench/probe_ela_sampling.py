"""Probe: does an ELA answer depend on what the engine sampled before?
(docs/concepts.md#engine-dtype-and-reproducibility)

Rebuilds the answer-step prompts of a finished ELA run from its stored predictions: the first turn (system prompt,
few-shot turns, ``<link>question</link>``), the first answer as recorded in the trajectory, and the candidate
listing from the run's own entity-search index (the trajectory keeps a truncated copy of the tool result; ties are
broken by key, so the search gives the listing again). Each rebuilt prompt is checked against the prompt hash the
trajectory recorded; a prompt whose hash differs is left out and counted.

Then, with the run's sampling settings (``plan.json``):

* pass A: all prompts as one batch to a fresh engine (the product's :class:`VLLMBackend`, the run's engine config);
* pass B: the same batch again to the same engine (its generator has moved on; its prefix cache now holds them);
* pass C: the same batch to a fresh engine without prefix caching.

Printed: for each pair of passes (and the answers the run stored), how many questions got another ``<answer>``
and how many another text. On a platform that honours per-request seeds every pair would agree up to the
engine's numerics. With the seed left out (as chunked prefill requires on the CPU platform) the passes draw from
the engine's one generator (14 of 20 answers changed between A and B); so CPU engines prefill whole prompts and
keep every request's seed (``engine_kwargs``), and the passes should agree.

Needs the run's ``LINKEDQA_HOME`` (the KB's entity index, the dataset, the embedded model). ~13 min for 20
questions at 256 answer tokens on 2 cores.

Run: ``.venv/bin/python -m tests.bench.probe_ela_sampling --run ela-webqsp-el-test-a6686f42 [--out probe.json]``
"""

from __future__ import annotations

import argparse
import glob
import json
import time
from pathlib import Path


def question_texts(plan: dict, root: Path) -> dict[str, str]:
    """``question_id -> question`` of the dataset version a run (its ``plan.json``) read."""
    import pyarrow.parquet as pq

    from storage import layout

    qdir = layout.dataset_dir(plan["config"]["dataset"], plan["dataset_version"], root) / "questions"
    return {r["question_id"]: r["question"] for f in sorted(qdir.glob("*.parquet"))
            for r in pq.read_table(f, columns=["question_id", "question"]).to_pylist()}


def rebuild(run_dir: Path, root: Path) -> tuple[list, list[str], list[str], int, dict]:
    """(answer-step requests, question ids, the run's answer-step outputs, prompts left out, plan) of an ELA run."""
    import pyarrow.parquet as pq

    from tasks.llm.types import ChatRequest
    from tasks.methods.ela import method as ela
    from tasks.search.kb_indexes import search_tool

    plan = json.loads((run_dir / "plan.json").read_text())
    if plan["config"]["method"] != "ela":
        raise SystemExit(f"{run_dir.name}: an {plan['config']['method']} run, not ela")
    st = plan["method_settings"]
    text = question_texts(plan, root)
    tool = search_tool(plan["kb_version"], root, st["source"])
    base = ela.load_prompt(st["source"], st["fewshot"])
    sampling = ela.answer_sampling(ela.ElaSettings(**st))
    reqs, ids, stored, left_out = [], [], [], 0
    for f in sorted(glob.glob(str(run_dir / "predictions" / "*.parquet"))):
        for row in pq.read_table(f, columns=["question_id", "trajectory"]).to_pylist():
            llm = [s for s in json.loads(row["trajectory"] or "[]") if s.get("kind") == "llm"]
            if len(llm) < 2:  # no answer step (an item error, or no mention searched)
                continue
            mentions = ela.parse_search(llm[0]["raw_output"]) or []
            listing, _ = ela.format_candidates(mentions, tool([{"queries": mentions, "k": st["k"]}])[0])
            msgs2 = ela.answer_messages(ela.link_messages(base, text[row["question_id"]]), llm[0]["raw_output"],
                                        listing)
            req = ChatRequest(messages=msgs2, sampling=sampling)
            if req.prompt_hash() != llm[1]["prompt_hash"]:
                left_out += 1
                continue
            reqs.append(req)
            ids.append(row["question_id"])
            stored.append(llm[1]["raw_output"])
    return reqs, ids, stored, left_out, plan


def passes(reqs: list, engine_config) -> dict[str, list[str]]:
    """Texts of passes A and B (one engine) and C (a fresh engine without prefix caching)."""
    from tasks.llm.vllm_backend import VLLMBackend

    out: dict[str, list[str]] = {}
    for name, cfg, runs in (("AB", engine_config, 2),
                            ("C", engine_config.model_copy(update={"enable_prefix_caching": False}), 1)):
        be = VLLMBackend(cfg)
        for i in range(runs):
            t0 = time.perf_counter()
            out[name[i]] = [c.text for c in be.generate(reqs)]
            print(f"  pass {name[i]}: {len(reqs)} prompts in {time.perf_counter() - t0:.1f} s", flush=True)
        be.close()
    return out


def main() -> int:
    """Rebuild, run the three passes, print the differences."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="run id of a finished ELA run under LINKEDQA_HOME")
    ap.add_argument("--out", default=None, help="write the texts of every pass to this JSON file")
    a = ap.parse_args()
    from flows.cli.command_env import setup_env

    setup_env()
    from storage import layout
    from tasks.llm.types import EngineConfig
    from tasks.methods.ela.method import _answer_indexes

    root = layout.home()
    reqs, ids, stored, left_out, plan = rebuild(layout.run_dir(a.run, root), root)
    print(f"{a.run}: {len(reqs)} answer-step prompts rebuilt (prompt hashes equal), {left_out} left out")
    if not reqs:
        return 1
    cfg = plan["config"]
    texts = passes(reqs, EngineConfig(model=cfg["model"], dtype=cfg.get("dtype") or "auto",
                                      max_model_len=cfg["max_model_len"]))
    texts["run"] = stored
    answers = {k: [_answer_indexes(t) for t in v] for k, v in texts.items()}
    for x, y in (("A", "B"), ("A", "C"), ("B", "C"), ("run", "A"), ("run", "C")):
        n_ans = sum(p != q for p, q in zip(answers[x], answers[y], strict=True))
        n_txt = sum(p != q for p, q in zip(texts[x], texts[y], strict=True))
        print(f"  {x:>3} vs {y}: another <answer> for {n_ans} of {len(ids)}, another text for {n_txt}")
    if a.out:
        Path(a.out).write_text(json.dumps({"run": a.run, "ids": ids, "texts": texts}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
