"""Prefix reuse: batches go to the engine grouped by shared prefix, and the engine's cache hits are stored.

Runtime control flow only (scripted backend, as docs/architecture.md#llm-layer allows for unit tests); the real vLLM
counts are checked end to end in ``tests/e2e/test_ela_run.py``.
"""

from __future__ import annotations

import json

from tasks.llm.scripted import ScriptedBackend
from tasks.llm.types import ChatRequest, Completion, SamplingConfig
from tasks.methods.records import AgentResult
from tasks.methods.runtime import ItemContext, LLMCall, prefix_order, run_agents
from tasks.runs.finalize import prefix_cache_share

SYSTEMS = ["You link entities.", "You answer questions."]


def _req(system: str, user: str) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                       sampling=SamplingConfig(max_tokens=4))


def test_prefix_order_puts_shared_prefixes_side_by_side_and_is_stable():
    reqs = [_req(SYSTEMS[i % 2], f"q{i}") for i in range(6)]
    order = prefix_order(reqs)
    systems = [reqs[k].messages[0]["content"] for k in order]
    assert systems == sorted(systems)  # each system prompt's requests are contiguous
    assert sorted(order) == list(range(6))
    same = [_req("s", "x"), _req("s", "x")]
    assert prefix_order(same) == [0, 1]  # ties keep the agents' order


class _CountingBackend(ScriptedBackend):
    """Echoes the user message and reports every token of a prompt after the first of its group as cached."""

    def generate(self, requests):
        out = super().generate(requests)
        seen = set()
        res = []
        for req, comp in zip(requests, out, strict=True):
            system = req.messages[0]["content"]
            cached = 10 if system in seen else 0
            seen.add(system)
            res.append(comp.model_copy(update={"prompt_tokens": 12, "prefix_cached_tokens": cached}))
        return res


def test_answers_come_back_to_their_own_items_and_cache_hits_are_stored():
    backend = _CountingBackend(lambda messages: messages[-1]["content"].upper())

    def agent(item: dict, ctx: ItemContext):
        c: Completion = yield LLMCall(_req(SYSTEMS[int(item["question_id"]) % 2], item["question"]))
        return AgentResult(answer=c.text)

    items = [{"question_id": str(i), "question": f"question {i}"} for i in range(6)]
    outs, stats = run_agents(agent, items, backend, {})
    assert [o["answer"] for o in outs] == [f"QUESTION {i}" for i in range(6)]
    sent = [r.messages[0]["content"] for r in backend.requests]
    assert sent == sorted(sent) and backend.batch_sizes == [6]
    steps = [s for o in outs for s in json.loads(o["trajectory"]) if s["kind"] == "llm"]
    assert sorted(s["prefix_cached_tokens"] for s in steps) == [0, 0, 10, 10, 10, 10]
    assert prefix_cache_share([o["trajectory"] for o in outs]) == 40 / 72


def test_share_leaves_out_response_cache_replays_errors_and_old_trajectories():
    fresh = {"kind": "llm", "cached": False, "prompt_tokens": 100, "prefix_cached_tokens": 60}
    replay = {"kind": "llm", "cached": True, "prompt_tokens": 100}
    failed = {"kind": "llm", "cached": False, "prompt_tokens": 0, "prefix_cached_tokens": 0, "error": "x"}
    old = {"kind": "llm", "cached": False, "prompt_tokens": 100}  # stored before the count existed
    assert prefix_cache_share([json.dumps([fresh, replay, failed, old]), None]) == 0.6
    assert prefix_cache_share([json.dumps([replay, old])]) is None
