"""The method matrix's checks (``tests/e2e/test_method_matrix.py``) on what the real runtime and agents write, without
an engine: :data:`CODE_ERROR` against the runtime's own item errors, the step contracts (:data:`STEPS`) against
EA-Agent trajectories over real FR-EN candidates, and the settings and questions each pair runs with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.llm.scripted import ScriptedBackend
from tasks.methods.registry import METHODS
from tasks.methods.runtime import AgentError, ToolCall, run_agents
from tests.e2e.matrix_home import QUESTIONS, import_record
from tests.e2e.test_method_matrix import (
    CODE_ERROR,
    STEP_SETTINGS,
    STEPS,
    dataset_of,
    missing_steps,
    pairs,
    small_settings,
)


def _echo(payloads: list) -> list:
    return payloads


def _loops(item, ctx):
    while True:
        yield ToolCall("echo", 1)


def _a_dict(item, ctx):
    yield ToolCall("echo", 1)
    return {"answer": "x"}


def _wrong_type(item, ctx):
    yield ToolCall("echo", 1)
    return 5


def _unknown_tool(item, ctx):
    yield ToolCall("search_the_web", 1)


def _unsupported(item, ctx):
    yield "a string"


def _code_bug(item, ctx):
    yield ToolCall("echo", 1)
    return {}["missing"]


def _model_garbage(item, ctx):  # how the agents refuse an unparseable reply
    yield ToolCall("echo", 1)
    raise AgentError("no <answer> in output")


def test_code_error_matches_the_runtime_s_own_item_errors_and_not_a_model_s():
    agents = {_loops: True, _a_dict: True, _wrong_type: True, _unknown_tool: True, _unsupported: True,
              _code_bug: True, _model_garbage: False}
    for agent, code in agents.items():
        (out,), _ = run_agents(agent, [{"question_id": "q"}], None, {"echo": _echo}, max_steps=5)
        assert out["error"] and bool(CODE_ERROR.search(out["error"])) == code, (agent.__name__, out["error"])
    # the messages of the agents' own AgentErrors are the model's (unparseable or unusable replies)
    for msg in ("AgentError: hop 1: the chosen property is not among the 113 listed ones",
                "AgentError: EntityAlignmentTool reply names no candidate: '[IRI]'",
                "AgentError: no main_entity_label in the identify-entity output", "AgentError: no candidates"):
        assert not CODE_ERROR.search(msg), msg


def test_every_contract_names_a_method_and_runs_on_a_question_of_a_kind_it_serves():
    assert set(STEPS) <= set(METHODS) and set(STEP_SETTINGS) <= set(METHODS)
    for method, task in pairs():
        if method in STEPS and task in QUESTIONS:
            assert dataset_of(method, task) == f"matrix-{task}"
    for method in METHODS:
        sets = small_settings(method)[1::2]
        assert {f"{k}={v}" for k, v in STEP_SETTINGS.get(method, {}).items()} <= set(sets), method
        METHODS[method].parse_settings(dict(kv.split("=", 1) for kv in sets))  # valid --set values


def test_the_questions_import_with_their_gold(data_root: Path, tmp_path: Path):
    from tasks.datasets.jsonl import import_jsonl
    from tasks.datasets.registry import load_dataset

    for task, (dataset, split, qid) in QUESTIONS.items():
        (row,) = [r for r in load_dataset(dataset, data_root).rows(split) if r["question_id"] == qid]
        f = tmp_path / f"{task}.jsonl"
        f.write_text(json.dumps(import_record(row, task)) + "\n")
        got = import_jsonl(f, f"matrix-{task}", task)
        assert got.rejects == [] and got.counts() == {"test": 1}, (task, got.rejects)
        (imported,) = got.questions["test"]
        assert (imported["question_id"], imported["question"], imported["gold_entities"]) == (
            qid, row["question"], row["gold_entities"])
        assert imported["gold_entities"] in (["Q183"], ["Q91"]), task  # Germany (claims), Abraham Lincoln (article)


# ---------------------------------------------------------------- EA-Agent's contract on real FR-EN candidates
@pytest.fixture(scope="module")
def ea_tools(data_root: Path):
    from tasks.datasets.dbp15k import split_of
    from tasks.datasets.ea_kg import read_pair_cached
    from tasks.methods.ea.agent_method import selector_tool
    from tasks.methods.ea.embed import EmbedConfig
    from tasks.methods.ea.embed_method import CandidateTool

    ap = read_pair_cached(data_root, "fr_en")
    labels = split_of(len(ap.links))
    links = {s: [lk for lk, x in zip(ap.links, labels, strict=True) if x == s] for s in ("train", "test")}
    items = [{"question_id": s, "split": "test", "gold_entities": [t], "question": s} for s, t in links["test"][:2]]
    return {"ea_candidates": CandidateTool(ap, links, EmbedConfig(w_name=0.0, w_neighbour=0.0), None),
            "ea_select": selector_tool(ap, 5)}, items


@pytest.mark.parametrize(("plan", "reached"), [("1. RelationTripleSelector\n2. EntityAlignmentTool", True),
                                               ("1. EntityAlignmentTool", False)])
def test_ea_agent_contract(ea_tools, plan: str, reached: bool):
    from tasks.methods.ea.agent_method import EaAgentSettings, ea_agent

    tl, items = ea_tools

    def reply(messages):
        text = messages[-1]["content"]
        if "Statistics:" in text or "optimizing the tool selection" in text:
            return plan
        return "[" + text.split("IRI: ", 1)[1].split(" (similarity", 1)[0] + "]"

    outs, _ = run_agents(ea_agent(EaAgentSettings(k=5)), items, ScriptedBackend(reply), tl)
    for o in outs:
        assert o["error"] is None
        missing = missing_steps(json.loads(o["trajectory"]), STEPS["ea-agent"])
        assert missing == ([] if reached else ["a path with a selector", "the selectors", "Entity Alignment Tool",
                                               "a shown candidate chosen"])
