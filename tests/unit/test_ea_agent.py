"""EA-Agent control flow with the scripted backend (unit test only) over real FR-EN candidates.

Checks: one batched LLM call per step for all entities, the planned path drives the tools, the Reflector only
when planned, rewards follow Eq. 3-6, rounds execute the rewritten path, SFT records per round, and garbage
replies become per-item errors while the other items finish.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from storage.side_files import write_side_outputs
from tasks.datasets.dbp15k import split_of
from tasks.datasets.ea_kg import read_pair_cached
from tasks.llm.scripted import ScriptedBackend
from tasks.methods.base import MethodContext, UnknownSetting
from tasks.methods.ea.agent_method import (
    EaAgentMethod,
    EaAgentSettings,
    ea_agent,
    selector_tool,
    sft_records,
    sft_side_outputs,
)
from tasks.methods.ea.embed import EmbedConfig
from tasks.methods.ea.embed_method import CandidateTool
from tasks.methods.ea.reward import compute_reward
from tasks.methods.runtime import run_agents

PLAN = "1. AttributeTripleSelector\n2. RelationTripleSelector\n3. EntityAlignmentTool\n4. Reflector"
REWRITE = "1. RelationTripleSelector\n2. EntityAlignmentTool"
_IRI = re.compile(r"IRI: (\S+) \(similarity")


@pytest.fixture(scope="module")
def tools(data_root: Path):
    ap = read_pair_cached(data_root, "fr_en")
    labels = split_of(len(ap.links))
    train = [lk for lk, s in zip(ap.links, labels, strict=True) if s == "train"]
    test = [lk for lk, s in zip(ap.links, labels, strict=True) if s == "test"][:300]
    cand = CandidateTool(ap, {"train": train, "test": test}, EmbedConfig(w_name=0.0, w_neighbour=0.0), None)
    return {"ea_candidates": cand, "ea_select": selector_tool(ap, 5)}, test


def script(messages):
    """Plan with every tool; align to the SECOND candidate; the Reflector picks the FIRST; rewrite drops it."""
    text = messages[-1]["content"]
    if "optimizing the tool selection" in text:
        return REWRITE
    if "Statistics:" in text:
        return PLAN
    iris = _IRI.findall(text)
    if "Initial choice:" in text:
        return f"[{iris[0]}]"
    return f"[{iris[1]}]"


def items(test, n):
    return [{"question_id": s, "split": "test", "gold_entities": [t], "question": s} for s, t in test[:n]]


def test_rounds_rewards_and_sft_export(tools, tmp_path: Path):
    tl, test = tools
    its = items(test, 6)
    backend = ScriptedBackend(script)
    settings = EaAgentSettings(rounds=2, k=5, candidate_k=8)
    outs, stats = run_agents(ea_agent(settings), its, backend, tl)
    assert all(o["error"] is None for o in outs), [o["error"] for o in outs]
    # every step's LLM requests of all 6 items go in one batch
    assert set(backend.batch_sizes) == {6}
    # round 0: plan, align, reflect, rewrite; round 1: align, rewrite (rewritten path has no Reflector)
    assert backend.calls == 6 and all(o["llm_calls"] == 6 for o in outs)
    for o, it in zip(outs, its, strict=True):
        gold = it["gold_entities"][0]
        cands = o["answers"]
        assert len(cands) == 8
        s = o["scores"]
        assert s["r0_path_length"] == 4 and s["r0_reflected"] == 1 and s["r1_path_length"] == 2
        assert s["r1_reflected"] == 0
        # round 0: initial = 2nd candidate, reflected to the 1st; round 1: 2nd candidate, no reflection
        r0 = compute_reward(cands[0], gold, ["a"] * 4, cands[1], True)
        r1 = compute_reward(cands[1], gold, ["a"] * 2)
        assert s["r0_reward"] == pytest.approx(r0.total) and s["r1_reward"] == pytest.approx(r1.total)
        assert s["r1_reward"] >= math.exp(-0.4)
        assert o["predicted_entities"] == [cands[1]]  # the last round's answer
        assert s["planning_tokens"] > 0 and s["alignment_tokens"] > s["planning_tokens"]
        traj = json.loads(o["trajectory"])
        sel = [t for t in traj if t["kind"] == "tool" and t["tool"] == "ea_select"]
        assert len(sel) == 2  # one selector call per round
        first = next(iter(sel[0]["result"].values()))
        assert first["attribute"]["note"] == "no attributes" and len(first["relation"]["triples"]) <= 5
    align_prompt = next(r.messages[-1]["content"] for r in backend.requests
                        if "Please enter the IRI" in r.messages[-1]["content"])
    assert "(attribute triples: no attributes)" in align_prompt
    recs = sft_records(outs, 2)
    assert [len(recs[0]), len(recs[1])] == [6, 6]
    rec = recs[0][0]
    assert rec["path"][-1] == "Reflector" and rec["rewritten_path"] == ["RelationTripleSelector", "EntityAlignmentTool"]
    assert rec["messages"][1]["content"] == REWRITE and "Statistics:" in rec["messages"][0]["content"]
    write_side_outputs(tmp_path, sft_side_outputs(outs, 3, 2))
    lines = (tmp_path / "sft" / "round-1" / "part-00003.jsonl").read_text().splitlines()
    assert len(lines) == 6 and json.loads(lines[0])["round"] == 1
    assert json.loads((tmp_path / "sft" / "round-1" / "part-00003.json").read_text())["records"] == 6


def test_garbage_is_a_per_item_error(tools):
    tl, test = tools
    its = items(test, 5)
    src_iri = tl["ea_candidates"].ap.kg1.iris[tl["ea_candidates"].ap.kg1.index[its[0]["question_id"]]]

    def garbage_plan_for_first(messages):
        text = messages[-1]["content"]
        return "I cannot decide." if "Statistics:" in text and src_iri in text else script(messages)

    outs, _ = run_agents(ea_agent(EaAgentSettings(k=5, rewrite=False)), its, ScriptedBackend(garbage_plan_for_first),
                         tl)
    assert "planning reply names no tool" in outs[0]["error"] and outs[0]["predicted_entities"] == []
    assert all(o["error"] is None and o["predicted_entities"] for o in outs[1:])
    bad = ScriptedBackend(lambda m: "[http://dbpedia.org/resource/Not_a_candidate]" if "IRI" in m[-1]["content"]
                          else PLAN)
    outs, _ = run_agents(ea_agent(EaAgentSettings(k=5)), its[:2], bad, tl)
    assert all("names no candidate" in o["error"] for o in outs)
    outs, _ = run_agents(ea_agent(EaAgentSettings(k=5)), its[:2], ScriptedBackend(["!error:boom"] * 2), tl)
    assert all("LLM error at path planning" in o["error"] for o in outs)


def test_rounds_above_one_are_refused_on_test(tmp_path: Path):
    method = EaAgentMethod(EaAgentSettings(rounds=3))
    with pytest.raises(UnknownSetting, match="--split train"):
        method.build_tools(MethodContext(kb_version=None, root=tmp_path, run_dir=tmp_path, dataset="dbp15k-fr-en",
                                         task="ea", split="test"))


def test_guided_constrains_plan_alignment_and_reflection(tools):
    """guided=true: planning/rewriting replies constrained to tool-path lines, alignment and reflection replies
    to exactly one shown candidate's ``[IRI]``; the scripted replies (already in those forms) parse as unguided
    ones do."""
    from tasks.methods.ea.prompting import path_regex

    tl, test = tools
    its = items(test, 3)
    backend = ScriptedBackend(script)
    outs, _ = run_agents(ea_agent(EaAgentSettings(k=5, candidate_k=8, guided=True)), its, backend, tl)
    assert all(o["error"] is None for o in outs), [o["error"] for o in outs]
    plan = [r for r in backend.requests if "Statistics:" in r.messages[-1]["content"]]
    rewrite = [r for r in backend.requests if "optimizing the tool selection" in r.messages[-1]["content"]]
    align = [r for r in backend.requests if "IRI: " in r.messages[-1]["content"]]
    assert len(plan) == len(rewrite) == 3 and len(align) == 6  # alignment + reflection per item
    assert all(r.sampling.regex == path_regex() for r in plan + rewrite)
    for r in align:
        shown = _IRI.findall(r.messages[-1]["content"])
        assert r.sampling.choice == tuple(f"[{iri}]" for iri in shown) and len(shown) == 5
    for o in outs:
        assert o["predicted_entities"] == [o["answers"][0]]  # the Reflector's pick, as unguided
    plain = ScriptedBackend(script)
    run_agents(ea_agent(EaAgentSettings(k=5, candidate_k=8)), its, plain, tl)
    assert not any(r.sampling.constrained for r in plain.requests)


def test_a_candidate_named_by_its_label_is_aligned(tools):
    """Free-form replies that name a shown candidate by its label (the end of its IRI, as the 0.5B model writes
    them) are that candidate; a name no shown candidate has stays a per-item error."""
    from tasks.datasets.ea_kg import name_from_iri

    tl, test = tools
    its = items(test, 3)

    def by_label(messages):
        text = messages[-1]["content"]
        if "Statistics:" in text:
            return "1. RelationTripleSelector\n2. EntityAlignmentTool"
        if "optimizing the tool selection" in text:
            return REWRITE
        return f"[{name_from_iri(_IRI.findall(text)[1])}]"  # the second candidate, by its label

    outs, _ = run_agents(ea_agent(EaAgentSettings(k=5, candidate_k=8)), its, ScriptedBackend(by_label), tl)
    assert [o["error"] for o in outs] == [None] * 3
    assert all(o["predicted_entities"] == [o["answers"][1]] for o in outs)
    src = tl["ea_candidates"].ap.kg1
    own_name = ScriptedBackend(lambda m: f"[{src.names[src.index[its[0]['question_id']]]}]"
                               if "IRI: " in m[-1]["content"] else "1. EntityAlignmentTool")
    outs, _ = run_agents(ea_agent(EaAgentSettings(k=5, rewrite=False)), its[:1], own_name, tl)
    assert "EntityAlignmentTool reply names no candidate" in outs[0]["error"]
