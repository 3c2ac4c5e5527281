"""Structured outputs: constraints on the sampling config, the backends' request bodies, and
which requests of each method carry which constraint with ``guided=true`` (scripted backend: agent control
flow only; the grammar itself is exercised with the real engine in ``tests/e2e/test_guided_ela.py``)."""

from __future__ import annotations

import json
import re

import pytest

from tasks.llm.openai_backend import request_payload
from tasks.llm.scripted import ScriptedBackend
from tasks.llm.types import ChatRequest, EngineConfig, SamplingConfig
from tasks.methods.ea.prompting import choice_options, parse_choice, parse_path, path_regex
from tasks.methods.ela.method import ElaSettings, answer_regex, ela_agent, parse_answer
from tasks.methods.runtime import run_agents

MSG = [{"role": "user", "content": "hi"}]


def test_unconstrained_cache_keys_are_unchanged():
    """Keys of cache-key format 1 without constraints (existing response caches must keep hitting)."""
    r = ChatRequest(messages=MSG, sampling=SamplingConfig(temperature=0.7, max_tokens=64, stop=("</x>",)))
    assert r.key("vllm", "embedded") == "80acb31089537ec2c59f729128758512b0de085a80aa8fba33c5327b8bbd5d96"
    assert ChatRequest(messages=MSG).key("scripted", "m") == (
        "d7cef231a39739b512f96123bcac86f9f23be7664c270b8c37e60666cdad420b")


def test_a_new_cache_key_format_changes_every_key(monkeypatch):
    """Bumping ``CACHE_KEY_FORMAT`` (the CHANGELOG's formats table) misses the cached responses of the old one."""
    import tasks.llm.types as types

    r = ChatRequest(messages=MSG)
    old = r.key("vllm", "m")
    monkeypatch.setattr(types, "CACHE_KEY_FORMAT", 2)
    assert r.key("vllm", "m") != old


def test_constraints_change_the_key_and_are_exclusive():
    plain = ChatRequest(messages=MSG).key("vllm", "m")
    keys = {ChatRequest(messages=MSG, sampling=SamplingConfig(**kw)).key("vllm", "m")
            for kw in ({"regex": "a|b"}, {"regex": "a"}, {"choice": ("a", "b")}, {"json_schema": "{}"})}
    assert len(keys) == 4 and plain not in keys
    with pytest.raises(ValueError, match="at most one"):
        SamplingConfig(regex="a", choice=("a",))
    with pytest.raises(ValueError, match="at least one"):
        SamplingConfig(choice=())
    assert SamplingConfig(choice=("yes", "no")).constrained and not SamplingConfig().constrained


def test_openai_payload_carries_vllm_structured_outputs():
    assert "structured_outputs" not in request_payload(ChatRequest(messages=MSG), "m")
    body = request_payload(ChatRequest(messages=MSG, sampling=SamplingConfig(regex="a+")), "m")
    assert body["structured_outputs"] == {"regex": "a+"}
    body = request_payload(ChatRequest(messages=MSG, sampling=SamplingConfig(choice=("yes", "no"))), "m")
    assert body["structured_outputs"] == {"choice": ["yes", "no"]}
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = request_payload(ChatRequest(messages=MSG, sampling=SamplingConfig(json_schema=json.dumps(schema))), "m")
    assert body["structured_outputs"] == {"json": schema}


def test_vllm_structured_outputs_params():
    vb = pytest.importorskip("tasks.llm.vllm_backend")
    pytest.importorskip("vllm")
    assert vb.structured_outputs(ChatRequest(messages=MSG)) is None
    so = vb.structured_outputs(ChatRequest(messages=MSG, sampling=SamplingConfig(choice=("yes", "no"))))
    assert so.choice == ["yes", "no"] and so.regex is None
    sp = vb.VLLMBackend.sampling_params(ChatRequest(messages=MSG, sampling=SamplingConfig(regex="a+", seed=5)))
    assert sp.structured_outputs.regex == "a+"
    assert sp.seed == 5  # on every platform (CPU engines run without chunked prefill, where seeds hold)


@pytest.mark.parametrize("max_model_len", [2048, 4096, 8192])
def test_cpu_engines_prefill_whole_prompts_so_seeds_hold(max_model_len: int):
    vb = pytest.importorskip("tasks.llm.vllm_backend")
    cfg = EngineConfig(max_model_len=max_model_len, dtype="float32")
    cpu = vb.engine_kwargs(cfg, "/m", is_cpu=True)
    assert cpu["enable_chunked_prefill"] is False and "gpu_memory_utilization" not in cpu
    assert cpu["max_num_batched_tokens"] == max(max_model_len, 4096)  # holds the longest prompt, never below vLLM's
    gpu = vb.engine_kwargs(cfg, "/m", is_cpu=False)
    assert "enable_chunked_prefill" not in gpu and "max_num_batched_tokens" not in gpu


# ------------------------------------------------------------------------------------------------ ELA
def test_ela_answer_regex_accepts_answers_and_only_shown_indexes():
    rx = re.compile(answer_regex(3))
    ok = "<think>[0] is the city of the question </think> <answer>[0][2]</answer>"
    assert rx.fullmatch(ok) and parse_answer(ok) == [0, 2]
    assert rx.fullmatch("<think>no match </think><answer></answer>")
    assert not rx.fullmatch("<think>x </think> <answer>[3]</answer>")  # index 3 is not shown
    assert not rx.fullmatch("<think>x </think> <answer>[0][1][2][0][1][2][0]</answer>")  # > MAX_MENTIONS
    assert not rx.fullmatch("<answer>[0]</answer>")  # the answer step reasons first
    assert re.fullmatch(answer_regex(3, think=False), "<answer>[1]</answer>")
    assert re.fullmatch(answer_regex(0, think=False), "<answer></answer>")


CANDS = [{"qid": "Q90", "title": "Paris", "description": "capital of France"},
         {"qid": "Q142", "title": "France", "description": "country"}]


def _ela_script(messages):
    last = messages[-1]["content"]
    if last.startswith("<link>"):
        return "<search> Search(Paris) Search(France) </search>"
    if "slow" in messages[-3]["content"] and "Search(" in last:
        return "!length:<think> thinking a lot"
    if last.startswith("Search("):
        return "<think> paris and france </think> <answer>[0][1]"
    return "<answer>[0]"


def _search(payloads):
    return [[[c for c in CANDS if c["title"].lower() == q.lower()] for q in p["queries"]] for p in payloads]


@pytest.mark.parametrize("guided", [False, True])
def test_ela_guided_constrains_answer_and_followup_only(guided):
    backend = ScriptedBackend(_ela_script)
    items = [{"question_id": "q0", "question": "paris in france"}, {"question_id": "q1", "question": "slow one"}]
    out, _ = run_agents(ela_agent(ElaSettings(guided=guided)), items, backend, {"entity_search": _search})
    by = {o["question_id"]: o for o in out}
    assert by["q0"]["predicted_entities"] == ["Q90", "Q142"] and by["q1"]["predicted_entities"] == ["Q90"]
    search_reqs = [r for r in backend.requests if r.messages[-1]["content"].startswith("<link>")]
    answer_reqs = [r for r in backend.requests if r.messages[-1]["content"].startswith("Search(")]
    followups = [r for r in backend.requests if r not in search_reqs and r not in answer_reqs]
    assert len(search_reqs) == 2 and len(answer_reqs) == 2 and len(followups) == 1
    assert all(not r.sampling.constrained for r in search_reqs)
    if not guided:
        assert not any(r.sampling.constrained for r in backend.requests)
        return
    assert all(r.sampling.regex == answer_regex(2) for r in answer_reqs)  # two candidates shown
    assert followups[0].sampling.regex == answer_regex(2, think=False)
    assert answer_reqs[0].sampling.stop == ("</answer>",)  # the rest of the sampling is unchanged


# ------------------------------------------------------------------------------------------------ EA-Agent
def test_ea_path_regex_and_choices_parse():
    rx = re.compile(path_regex())
    reply = "1. RelationTripleSelector\n2. EntityAlignmentTool\n3. Reflector"
    assert rx.fullmatch(reply) and parse_path(reply).tools == ("RelationTripleSelector", "EntityAlignmentTool",
                                                               "Reflector")
    assert rx.fullmatch("1. Reflector") and not rx.fullmatch("1. [IRI]")
    assert not rx.fullmatch("1. Reflector\n2. Reflector\n3. Reflector\n4. Reflector\n5. Reflector")
    cands = [{"id": "en:a", "iri": "http://dbpedia.org/resource/Paris", "name": "Paris"},
             {"id": "en:b", "iri": "http://dbpedia.org/resource/Paris_FC", "name": "Paris FC"}]
    opts = choice_options(cands)
    assert opts == ("[http://dbpedia.org/resource/Paris]", "[http://dbpedia.org/resource/Paris_FC]")
    assert [parse_choice(o, cands) for o in opts] == ["en:a", "en:b"]


# ------------------------------------------------------------------------------------------------ KGQA
def _schema(req: ChatRequest) -> dict:
    return json.loads(req.sampling.json_schema)


def test_kgqa_guided_json_schemas_follow_the_prompts_fields():
    from tasks.methods.kgqa.agents import Prompter
    from tasks.methods.kgqa.parsing import (
        parse_answer_status,
        parse_entity_label,
        parse_item_choice,
        parse_property_choice,
        parse_qa,
    )
    from tasks.methods.kgqa.settings import KgqaSettings, ReactKgSettings

    plain = Prompter(KgqaSettings())
    assert not plain.identify("q").sampling.constrained and not plain.qa("q", []).sampling.constrained
    p = Prompter(ReactKgSettings(guided=True))
    s = _schema(p.identify("q"))
    assert list(s["properties"]) == ["reason", "main_entity_label"] and s["additionalProperties"] is False
    cands = [{"qid": "Q90", "label": "Paris"}, {"qid": "Q167646", "label": "Paris"}]
    assert _schema(p.disambiguate("q", "Paris", cands))["properties"]["main_entity_item_id"] == {
        "enum": ["Q90", "Q167646"]}
    assert _schema(p.link_answer("q", "Paris", cands, "r", None))["properties"]["answer_entity_item_id"] == {
        "enum": ["Q90", "Q167646"]}
    s = _schema(p.choose_property("q", ["info"], 1, ["Paris (Q90)"], {"P17": "country", "P6": "head"}))
    assert list(s["properties"]) == ["information_requested", "property_id", "property_name", "reason"]
    assert s["properties"]["property_id"] == {"enum": ["P17", "P6"]}
    assert _schema(p.status("q", [], "x"))["properties"]["answer_status"]["enum"] == [
        "correct", "require_more_details", "wrong"]
    s = _schema(p.qa("q", ["fact"]))
    assert list(s["properties"]) == ["reason", "answers", "answers_datatype"]
    assert p.qa("q", []).sampling.stop == ("}",)  # the rest of the sampling is unchanged
    direct = Prompter(KgqaSettings(guided=True, cot=False))
    assert list(_schema(direct.qa("q", []))["properties"]) == ["answers", "answers_datatype"]
    assert list(_schema(direct.choose_property("q", [], 1, []))["properties"]) == ["property_id", "property_name"]
    # schema-conform replies, cut at the stop sequence "}", still parse
    assert parse_entity_label('{"reason": "r", "main_entity_label": "France"') == "France"
    assert parse_item_choice('{"reason": "r", "main_entity_item_id": "Q90"', "main_entity_item_id",
                             ["Q90", "Q167646"]) == "Q90"
    assert parse_property_choice('{"information_requested": "i", "property_id": "P17", "property_name": "country", '
                                 '"reason": "r"', {"P17": "country"})[0] == "P17"
    assert parse_answer_status('{"answer_status": "require_more_details", "reason": "r"') == "require_more_details"
    assert parse_qa('{"reason": "r", "answers": ["Paris"], "answers_datatype": "string"')["answers"] == ["Paris"]


def test_closed_book_kgqa_reads_guided_from_its_settings():
    from tasks.methods.kgqa.agents import Prompter
    from tasks.methods.qa.method import ClosedBookSettings

    assert Prompter(ClosedBookSettings(guided=True).kgqa()).qa("q", []).sampling.json_schema is not None
    assert Prompter(ClosedBookSettings().kgqa()).qa("q", []).sampling.json_schema is None


# ------------------------------------------------------------------------------------------------ AnchorRAG / ToG
def test_anchorrag_and_tog_guided_keyword_lists():
    from tasks.methods.anchorrag.agents import Prompts, keywords_regex
    from tasks.methods.anchorrag.parsing import parse_keywords
    from tasks.methods.anchorrag.settings import AnchorRagSettings, TogSettings

    assert not Prompts(AnchorRagSettings()).keywords("q").request.sampling.constrained
    for s in (AnchorRagSettings(guided=True, max_keywords=3), TogSettings(guided=True, max_keywords=3)):
        p = Prompts(s)
        assert p.keywords("q").request.sampling.regex == keywords_regex(3)
        assert not p.relations("q", "e", ["r"], 3).request.sampling.constrained  # only the keyword step
    rx = re.compile(keywords_regex(3))
    assert rx.fullmatch("Tesla Motors, Elon Musk") and rx.fullmatch("Mount Everest")
    assert not rx.fullmatch("The topic entities are:\nTesla") and not rx.fullmatch("a, b, c, d")
    assert not rx.fullmatch(" one two three four five six seven eight nine")
    assert parse_keywords("Tesla Motors, Elon Musk", 3) == ["Tesla Motors", "Elon Musk"]


# ------------------------------------------------------------------------------------------------ QA yes/no
def test_yes_no_choice_only_on_yes_no_datasets():
    from tasks.methods.qa.method import QASettings, _sampling

    assert _sampling(QASettings(guided=True), "yesno").choice == ("yes", "no")
    assert _sampling(QASettings(guided=True), "qa").choice is None
    assert _sampling(QASettings(), "yesno").choice is None


def test_closed_book_declares_the_kgqa_options_it_uses_on_kgqa_datasets():
    """closed-book's settings carry the KGQA options its KGQA branch reads, with KGQA's defaults; its own QA
    defaults (``max_tokens=0``, ``cot`` unset) map to KGQA's, and a key neither family has is refused."""
    from tasks.methods.base import UnknownSetting
    from tasks.methods.kgqa.settings import KgqaSettings
    from tasks.methods.qa.method import ClosedBookMethod, ClosedBookSettings

    kg = ClosedBookSettings().kgqa()
    defaults = KgqaSettings()
    assert kg == defaults.model_copy(update={"max_tokens_step": min(defaults.max_tokens, defaults.max_tokens_step)})
    custom = ClosedBookMethod.parse_settings({"link_search_k": "0", "max_tokens": "64", "cot": "false",
                                               "kg": "sparql", "endpoint": "http://127.0.0.1:1/q"}).kgqa()
    assert (custom.link_search_k, custom.max_tokens, custom.max_tokens_step, custom.cot, custom.kg) == (
        0, 64, 64, False, "sparql")
    with pytest.raises(UnknownSetting, match="unknown --set key"):
        ClosedBookMethod.parse_settings({"max_depth": "2"})
    with pytest.raises(UnknownSetting, match="on a KGQA dataset"):
        ClosedBookSettings(max_tokens=8).kgqa()
