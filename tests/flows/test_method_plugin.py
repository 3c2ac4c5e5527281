"""Adding a method is one class plus one registry line: a method defined here runs through everything.

The method below is defined in this test module (not under ``tasks/methods``), registered with
``tasks.methods.registry.register`` and then run through the real ``run_method`` Prefect flow (ephemeral API),
the batching runtime (a batched tool call), the run machinery (plan, shards, metrics from stored predictions,
manifest) and the DuckDB catalog, on real PopQA questions from ``LINKEDQA_DATA``. It needs no LLM and no KB,
so the test proves the plug-in path itself, not a model.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tasks.methods.base import Method, MethodContext, MethodSettings
from tasks.methods.records import AgentResult
from tasks.methods.registry import METHODS, get_method, register
from tasks.methods.runtime import ItemContext, ToolCall


class LastWordSettings(MethodSettings):
    """``--set`` options of the test method."""

    lowercase: bool = False


def _last_capitalised(questions: list[str], lowercase: bool) -> list[str]:
    """A batched tool: the last capitalised word of each question (a deterministic, LLM-free 'answer')."""
    out = []
    for q in questions:
        words = re.findall(r"\b[A-Z][\w'-]*", q)
        word = words[-1] if words else ""
        out.append(word.lower() if lowercase else word)
    return out


class LastWordMethod(Method):
    """Answers a question with its last capitalised word (a plug-in method for this test only)."""

    name = "test-last-word"
    description = "test plug-in: the last capitalised word of the question"
    Settings = LastWordSettings
    needs_llm = False
    needs_kb = False
    metric_family = None  # the dataset's task decides: qa -> em/f1/acc_sub
    tasks = ("qa",)

    def build_tools(self, ctx: MethodContext) -> dict[str, Any]:
        """One batched tool."""
        lowercase = self.settings.lowercase
        return {"last_word": lambda payloads: _last_capitalised(payloads, lowercase)}

    def agent(self, ctx: MethodContext):
        """One tool call per question."""

        def agent(item: dict, ictx: ItemContext):
            word = yield ToolCall("last_word", item["question"])
            ictx.log({"note": f"picked {word!r}"})
            return AgentResult(answer=word)

        return agent


@pytest.fixture()
def plugin():
    """Register the test method for one test and remove it afterwards."""
    register(LastWordMethod)
    try:
        yield LastWordMethod
    finally:
        METHODS.pop(LastWordMethod.name, None)


def test_register_refuses_a_taken_name_and_a_nameless_class(plugin):
    class Impostor(LastWordMethod):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register(Impostor)
    with pytest.raises(ValueError, match="no name"):
        register(type("Nameless", (Method,), {}))
    assert register(LastWordMethod) is LastWordMethod  # re-registering the same class is harmless
    assert get_method("test-last-word") is LastWordMethod
    assert LastWordMethod.prompt_hashes("qa") == {}  # no prompts/ folder beside this module


def test_a_plugin_method_runs_through_flow_runtime_run_machinery_and_catalog(plugin, home: Path, data_root: Path,
                                                                           prefect_harness):
    from flows.run_method import run_method
    from storage import layout
    from storage.catalog import connect, refresh_catalog
    from storage.manifest import read_manifest
    from tasks.metrics.runs import summary_metrics
    from tasks.runs.config import RunConfig, load_plan
    from tasks.runs.evaluate import recompute_metrics
    from tasks.runs.finalize import read_predictions
    from tasks.runs.planning import plan_questions

    cfg = RunConfig(method="test-last-word", dataset="popqa", limit=6, shards=2, settings={"lowercase": "true"})
    run_id = run_method(cfg)
    assert run_id.startswith("test-last-word-popqa-")
    manifest = read_manifest(layout.run_dir(run_id))
    assert manifest is not None and manifest["method_settings"] == {"lowercase": True}
    assert manifest["prompt_hashes"] == {} and len(manifest["shards"]) == 2

    preds = read_predictions(run_id).to_pylist()
    plan = load_plan(run_id)
    questions = plan_questions(plan)
    assert sorted(p["question_id"] for p in preds) == sorted(plan.question_ids) and len(preds) == 6
    by_id = {q["question_id"]: q["question"] for q in questions}
    for p in preds:  # the runtime called the batched tool and stored the trajectory
        assert p["answer"] == _last_capitalised([by_id[p["question_id"]]], True)[0]
        assert p["error"] is None and p["llm_calls"] == 0
        assert '"tool": "last_word"' in p["trajectory"] or '"last_word"' in p["trajectory"]

    # metrics come from the stored predictions under the dataset's task family (qa)
    expected = {m["metric"]: m["value"] for m in summary_metrics("qa", preds, questions, None)}
    assert {"em", "f1", "acc_sub"} <= set(expected)
    recomputed, stored = recompute_metrics(run_id)
    stored_map = {m["metric"]: m["value"] for m in stored}
    for name, value in expected.items():
        assert stored_map[name] == pytest.approx(value)
    assert {m["metric"]: m["value"] for m in recomputed} == pytest.approx(expected)

    # the same command is a no-op: the finished run is reused, not recomputed
    assert run_method(cfg) == run_id

    refresh_catalog()
    con = connect()
    try:
        n = con.execute("SELECT count(*) FROM predictions WHERE run_id = ?", [run_id]).fetchone()[0]
        em = con.execute("SELECT value FROM metrics WHERE run_id = ? AND metric = 'em'", [run_id]).fetchone()[0]
        method = con.execute("SELECT method FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
    finally:
        con.close()
    assert n == 6 and em == pytest.approx(expected["em"]) and method == "test-last-word"
