"""Continuous per-item scheduling: same results as the lockstep runtime, and no item waits for another.

Control flow only (scripted / in-test backends, as docs/architecture.md#llm-layer allows for unit tests of agent
control flow); the real engine's continuous path is exercised end to end by the ELA e2e test and measured by bench_ela.
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from tasks.llm.cache import ResponseCache
from tasks.llm.cached import CachedBackend
from tasks.llm.scripted import ScriptedBackend
from tasks.llm.streaming import BatchSession, ThreadSession, open_session
from tasks.llm.types import ChatRequest, Completion, SamplingConfig
from tasks.methods.ela.method import ElaSettings, ela_agent
from tasks.methods.records import AgentResult, note_answered_by, read_notes
from tasks.methods.runtime import AgentError, ItemContext, LLMCall, ToolCall, run_agents, run_agents_continuous
from tests.unit.test_runtime_ela import _script, search_tool


def _strip(outs: list[dict]) -> list[dict]:
    """Outputs without timing (latency differs between runs)."""
    res = []
    for o in outs:
        o = {k: v for k, v in o.items() if k != "latency_s"}
        o["trajectory"] = json.dumps([{k: v for k, v in s.items() if k != "step"}
                                      for s in json.loads(o["trajectory"])])
        res.append(o)
    return res


ITEMS = [{"question_id": f"q{i}", "question": q} for i, q in enumerate(
    ["where is Paris in France", "what is Paris", "garbage question", "nothing here", "crash now", "Paris in France"])]


def test_ela_predictions_equal_the_lockstep_runtime():
    agent = ela_agent(ElaSettings())
    lock, _ = run_agents(agent, ITEMS, ScriptedBackend(_script), {"entity_search": search_tool})
    cont, stats = run_agents_continuous(agent, ITEMS, ScriptedBackend(_script), {"entity_search": search_tool})
    assert _strip(cont) == _strip(lock)
    assert [o["error"] for o in cont].count(None) == 4  # garbage and crash are item errors in both
    assert stats.llm_requests == sum(o["llm_calls"] for o in cont)


def _parallel_agent(item: dict, ctx: ItemContext):
    """Parallel sub-agent calls, then a tool, then one more call (AnchorRAG's shape)."""
    n = int(item["question_id"][1:]) % 3 + 1
    reqs = [LLMCall(ChatRequest(messages=[{"role": "user", "content": f"{item['question']} part {j}"}],
                                sampling=SamplingConfig(max_tokens=4))) for j in range(n)]
    parts = yield reqs
    found = yield ToolCall("count", [p.text for p in parts])
    final = yield LLMCall(ChatRequest(messages=[{"role": "user", "content": f"sum {found}"}]))
    return AgentResult(answer=final.text, answers=[p.text for p in parts])


def test_parallel_calls_tools_and_errors_match_lockstep():
    def script(messages):
        text = messages[-1]["content"]
        return "!error:boom" if "q4 part 1" in text else text.upper()

    tools = {"count": lambda payloads: [len(p) for p in payloads]}
    items = [{"question_id": f"q{i}", "question": f"q{i}"} for i in range(7)]
    lock, _ = run_agents(_parallel_agent, items, ScriptedBackend(script), tools)
    cont, _ = run_agents_continuous(_parallel_agent, items, ScriptedBackend(script), tools)
    assert _strip(cont) == _strip(lock)
    assert cont[0]["answers"] == ["Q0 PART 0"] and cont[2]["answers"] == ["Q2 PART 0", "Q2 PART 1", "Q2 PART 2"]


class _SlowFor:
    """A thread-safe backend where requests mentioning 'slow' take 0.6 s and the others 0.01 s."""

    name, model_id = "test", "test"

    def __init__(self):
        self.log: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def generate(self, requests):
        text = requests[0].messages[-1]["content"]
        time.sleep(0.6 if "slow" in text else 0.01)
        with self._lock:
            self.log.append((time.perf_counter(), text))
        return [Completion(text=f"done {text}", prompt_tokens=3, completion_tokens=2)]

    def close(self):
        pass


def _chain(item: dict, ctx: ItemContext):
    last = None
    for k in range(item["steps"]):
        last = yield LLMCall(ChatRequest(messages=[{"role": "user", "content": f"{item['question_id']} step {k}"}]))
    return AgentResult(answer=last.text)


def test_no_item_waits_for_another_items_completion():
    backend = _SlowFor()
    items = [{"question_id": "slow", "steps": 1}, {"question_id": "fast", "steps": 5}]
    t0 = time.perf_counter()
    outs, _ = run_agents_continuous(_chain, items, backend, {}, session=ThreadSession(backend, threads=4))
    wall = time.perf_counter() - t0
    assert [o["answer"] for o in outs] == ["done slow step 0", "done fast step 4"]
    fast_done = max(t for t, text in backend.log if text.startswith("fast"))
    slow_done = max(t for t, text in backend.log if text.startswith("slow"))
    assert fast_done < slow_done  # all five fast steps ran while the slow call was in flight
    assert wall < 10  # a hang guard only: the order above is the check (a bound near 0.6 s flaked under load)


def test_lockstep_makes_the_fast_item_wait():
    """The baseline the test above improves on: each lockstep step lasts as long as its slowest call."""
    backend = _SlowFor()

    class Batched:
        name, model_id = "test", "test"

        def generate(self, requests):  # sequential calls inside one step, like one batch
            return [backend.generate([r])[0] for r in requests]

    items = [{"question_id": "slow", "steps": 1}, {"question_id": "fast", "steps": 5}]
    run_agents(_chain, items, Batched(), {})
    fast_first = min(t for t, text in backend.log if text.startswith("fast step 1"))
    slow_done = max(t for t, text in backend.log if text.startswith("slow"))
    assert fast_first > slow_done


def test_cached_session_answers_hits_without_the_backend_and_sends_duplicates_once(tmp_path):
    script = ScriptedBackend(lambda m: m[-1]["content"][::-1])
    cached = CachedBackend(script, ResponseCache(tmp_path / "c.sqlite"))
    req = ChatRequest(messages=[{"role": "user", "content": "abc"}])
    sess = open_session(cached)
    sess.submit([("a", req), ("b", req)])
    got = dict(sess.poll())
    assert got["a"].text == got["b"].text == "cba" and len(script.requests) == 1
    sess.submit([("c", req)])
    got = dict(sess.poll())
    assert got["c"].cached and len(script.requests) == 1 and not sess.busy


def test_open_session_kinds():
    assert isinstance(open_session(ScriptedBackend(["x"])), BatchSession)
    assert isinstance(open_session(_SlowFor(), threads=2), ThreadSession)
    assert isinstance(open_session(_SlowFor(), threads=0), BatchSession)


def test_a_backend_crash_fails_the_requests_not_the_run():
    def strict(item, ctx):
        c = yield LLMCall(ChatRequest(messages=[{"role": "user", "content": item["question_id"]}]))
        if c.error:
            raise AgentError(c.error)
        return AgentResult(answer=c.text)

    outs, _ = run_agents_continuous(strict, [{"question_id": "x"}, {"question_id": "y"}],
                                    ScriptedBackend(["!raise:down"]), {})
    assert [o["error"] for o in outs] == ["AgentError: backend error: RuntimeError: down"] * 2


def test_step_limit_and_unknown_tool_are_item_errors():
    def looping(item, ctx):
        while True:
            yield ToolCall("count", 1)

    def bad_tool(item, ctx):
        yield ToolCall("nope", 1)

    outs, _ = run_agents_continuous(looping, [{"question_id": "a"}], None, {"count": lambda ps: ps}, max_steps=5)
    assert outs[0]["error"] == "step limit 5 exceeded"
    outs, _ = run_agents_continuous(bad_tool, [{"question_id": "a"}], None, {})
    assert outs[0]["error"] == "AgentError: unknown tool 'nope'"


@pytest.mark.parametrize("runtime", [run_agents, run_agents_continuous])
def test_both_schedulers_fail_an_item_alike(runtime):
    """Step bound, unknown tool, unsupported action, a result outside the contract and a note metrics read in
    another shape: the same item error and the same error event in the trajectory under both schedulers (one item
    state machine decides them); typed notes are stored as logged."""
    def looping(item, ctx):
        while True:
            yield ToolCall("count", 1)

    def empty_list(item, ctx):
        yield []

    def a_dict(item, ctx):
        yield ToolCall("count", 1)
        return {"answer": "x"}

    def untyped_note(item, ctx):
        yield ToolCall("count", 1)
        ctx.log({"answered_by": "kb_lookup"})  # a field metrics read, outside its type
        return AgentResult(answer="x")

    def typed(item, ctx):
        n = yield ToolCall("count", 2)
        ctx.log(note_answered_by("retrieval"))
        ctx.log({"step": "count", "n": n})
        return AgentResult(answer=str(n), scores={"n": float(n)}, side={"kept": True})

    tools = {"count": lambda ps: ps}
    cases = [(looping, {"max_steps": 3}, "step limit 3 exceeded"),
             (empty_list, {}, "AgentError: agent yielded an unsupported action list"),
             (a_dict, {}, "AgentError: agent returned dict, expected AgentResult"),
             (untyped_note, {}, "TypeError: the 'answered_by' note in the wrong shape")]
    for agent, kw, error in cases:
        (out,), _ = runtime(agent, [{"question_id": "a"}], None, tools, **kw)
        assert out["error"].startswith(error), out["error"]
        assert json.loads(out["trajectory"])[-1] == {"kind": "error", "error": out["error"]}
        assert (out["answer"], out["predicted_entities"], out["scores"], out["side"]) == ("", [], {}, None)
    (out,), _ = runtime(typed, [{"question_id": "a"}], None, tools)
    assert out["error"] is None and out["answer"] == "2" and out["scores"] == {"n": 2.0} and out["side"] == {
        "kept": True}
    events = json.loads(out["trajectory"])
    assert events[1:] == [{"kind": "note", "answered_by": "retrieval"}, {"kind": "note", "step": "count", "n": 2}]
    assert read_notes(out["trajectory"]).answered_by == "retrieval"


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_single_item(n):
    outs, stats = run_agents_continuous(_chain, [{"question_id": "x", "steps": 1}][:n], ScriptedBackend(["hi"]), {})
    assert len(outs) == n and (n == 0 or outs[0]["answer"] == "hi")


def test_vllm_request_ids_map_to_the_ids_outputs_carry():
    from tasks.llm.streaming import _external_id

    assert _external_id("17-1a2b3c4d") == "17"  # LLM.enqueue_chat's id: counter + random suffix
    assert _external_id("17") == "17"  # VLLM_DISABLE_REQUEST_ID_RANDOMIZATION
    assert _external_id("custom-id") == "custom-id"


def test_a_note_metrics_read_is_its_type_or_refused():
    """What metrics read from a trajectory is what the note types say: the builders' notes pass as built, a method's
    own note passes as given, and a read note's field in another shape (or an event's ``kind``) is refused."""
    from tasks.methods.records import note_event, note_fallback, note_retrieved

    docs = [{"id": 7, "title": None, "text": "Paris is the capital."}]
    assert note_event(note_retrieved(docs)) == {"kind": "note", "retrieved": [
        {"id": "7", "title": None, "text": "Paris is the capital."}]}
    assert note_event(note_fallback("closed-book", "no documents")) == {
        "kind": "note", "fallback": "closed-book", "reason": "no documents"}
    assert note_event({"step": "search", "parsed": ["Paris"]}) == {"kind": "note", "step": "search",
                                                                  "parsed": ["Paris"]}
    refused = {
        "kind": ({"kind": "tool", "step": "x"}, "no 'kind' key"),
        "int id": ({"retrieved": [{"id": 7, "title": "t", "text": "x"}]}, "('retrieved', 0, 'id')"),
        "extra key": ({"retrieved": [], "score": 1.0}, "exactly the keys ['retrieved']"),
        "extra key in a document": ({"retrieved": [{"id": "7", "title": "t", "text": "x", "score": 1.0}]},
                                    "('retrieved', 0, 'score')"),
        "reason missing": ({"fallback": "closed-book"}, "build it with note_fallback()"),
        "two notes": ({"answered_by": "cot", "fallback": "x", "reason": "y"}, "one read note per entry"),
        "not a mapping": ([("step", "x")], "not list"),
        "a key not a string": ({"step": "x", 3: "y"}, "string keys only, not [3]"),
    }
    for name, (note, message) in refused.items():
        with pytest.raises(TypeError, match=re.escape(message)):
            note_event(note)
            pytest.fail(name)
