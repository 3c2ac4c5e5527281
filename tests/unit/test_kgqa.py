"""KGQA methods (kg-1hop, react-kg, closed-book KGQA branch): parsers, answer post-processing, context budgeting,
the agents' control flow with the scripted backend over a real KG, answer linking, SPARQL injection and a down
endpoint through a real Oxigraph server.

The KG is built from real LitWD1K data (triples, numeric literals, labels, aliases, Wikidata properties) with
the library, once for the module; the entities the tests use are picked by querying it. Question texts are real
QALD-9-plus questions (the scripted LLM decides what the agent does, so only the control flow is under test).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from kbkit import build_litwd1k_kb

from tasks.kg.duckdb_store import DuckDBKG
from tasks.kg.export_nt import export_ntriples
from tasks.kg.oxigraph_server import OxigraphServer, free_port
from tasks.kg.sparql import SparqlKG, render
from tasks.llm.scripted import ScriptedBackend
from tasks.methods.base import MethodContext, UnknownSetting
from tasks.methods.kg_context import approx_tokens, property_list, property_messages
from tasks.methods.kg_tools import fact_dict, kg_tools
from tasks.methods.kgqa.agents import closed_book_kg_agent, kg_one_hop_agent, react_kg_agent
from tasks.methods.kgqa.answers import format_answers, is_literal_answer, to_iso_date
from tasks.methods.kgqa.parsing import (
    extract_json,
    parse_answer_status,
    parse_entity_label,
    parse_item_choice,
    parse_property_choice,
    parse_qa,
)
from tasks.methods.kgqa.settings import KgqaSettings, ReactKgSettings
from tasks.methods.kgqa.tools import closed_book_kg_tools
from tasks.methods.registry import get_method
from tasks.methods.runtime import run_agents
from tasks.metrics.qald import qald_prf

INJECTIONS = ['x" } ; DROP ALL ; #', "}", "a\nb", "x' } DELETE WHERE { ?s ?p ?o } #", "\\u0022 } ; DROP ALL ; #"]


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, data_root: Path):
    root = tmp_path_factory.mktemp("kgqa") / "warehouse"
    mp = pytest.MonkeyPatch()
    mp.setenv("LINKEDQA_HOME", str(root))
    version = build_litwd1k_kb(root, data_root, "kgqatest")
    yield root, version
    mp.undo()


@pytest.fixture(scope="module")
def duck(kb):
    kg = DuckDBKG(kb[1], root=kb[0])
    yield kg
    kg.close()


@pytest.fixture(scope="module")
def picks(duck, kb):
    """Entities of the KB for the scenarios: a uniquely named entity whose item facts lead to labelled,
    uniquely named entities that have item facts themselves (two hops), and an ambiguous name."""
    import pyarrow.compute as pc

    from storage import layout
    from storage.parquet_io import read_table

    ents = read_table(layout.kb_table_dir(kb[1], "entities", kb[0]), "entities", ["qid", "label"])
    ents = ents.filter(pc.is_valid(ents["label"])).to_pylist()
    labels = {r["qid"]: r["label"] for r in ents}
    sample = sorted(labels, key=lambda q: int(q[1:]))[:400]
    out = duck.outgoing(sample)
    hits = duck.search_label([labels[q] for q in sample])
    unique = {q for q, h in zip(sample, hits, strict=True) if h == [q]}
    for q in sample:
        if q not in unique:
            continue
        item_facts = [f for f in out[q] if f.object_qid and f.object_label and f.property != "P31"]
        for f in item_facts:
            if duck.search_label([f.object_label])[0] != [f.object_qid]:
                continue
            second = [g for g in duck.outgoing([f.object_qid])[f.object_qid] if g.object_qid and g.object_label]
            if second:
                ambiguous = next(labels[a] for a, h in zip(sample, hits, strict=True) if len(h) >= 2)
                return {"main": q, "label": labels[q], "hop1": f, "hop2": second[0], "ambiguous": ambiguous,
                        "labels": labels}
    pytest.fail("no two-hop path with uniquely named entities in the LitWD1K KB")


@pytest.fixture(scope="module")
def questions(data_root: Path) -> list[dict]:
    from tasks.datasets.registry import load_dataset

    rows = list(load_dataset("qald-9-plus", data_root).rows("train"))
    return sorted(rows, key=lambda r: r["question_id"])[:4]


def _ctx(kb) -> MethodContext:
    return MethodContext(kb_version=kb[1], root=kb[0], dataset="qald-9-plus", task="kgqa")


def _router(replies: dict[str, str | list[str]]):
    """A scripted LLM that answers by step (recognised from the step's instruction, the last user message)."""
    markers = {"identify": "entity identifier model", "disambiguate": "matches the detected main entity",
               "choose": "knowledge graph analyzer", "status": "answer analyzer", "link": "answer entity",
               "qa": "question answerer"}
    counters: dict[str, int] = {}

    def reply(messages: list[dict[str, str]]) -> str:
        last = messages[-1]["content"]
        step = next(k for k, m in markers.items() if m in last)
        r = replies[step]
        if isinstance(r, list):
            i = counters.get(step, 0)
            counters[step] = i + 1
            return r[min(i, len(r) - 1)]
        return r

    return reply


# ------------------------------------------------------------------------------------------------ parsers
def test_extract_json_repairs_what_small_models_emit():
    assert extract_json('Example answer: [{"reason": "x", "answers": ["Paris"]') == {"reason": "x",
                                                                                    "answers": ["Paris"]}
    assert extract_json('```json\n{"a": 1,}\n```') == {"a": 1}
    assert extract_json("{'a': True, 'b': ['x', 'y'],}") == {"a": True, "b": ["x", "y"]}
    assert extract_json('noise {"reason": "a } inside", "k": "v"} trailing {"other": 1}') == {
        "reason": "a } inside", "k": "v"}
    assert extract_json('{"reason": "cut in the mid') == {"reason": "cut in the mid"}
    assert extract_json("no json at all") is None and extract_json("") is None


def test_step_parsers():
    assert parse_entity_label('{"reason": "r", "main_entity_label": "Berlin (Q64)"') == "Berlin"
    assert parse_entity_label('"main_entity_label": "Tom Hanks"') == "Tom Hanks"  # no braces: regex fallback
    assert parse_entity_label('{"main_entity_label": ""}') is None
    allowed = {"P6": "head of government", "P17": "country"}
    assert parse_property_choice('{"property_id": "P6", "property_name": "x"', allowed)[0] == "P6"
    assert parse_property_choice('{"property_id": "17"}', allowed)[0] == "P17"
    assert parse_property_choice('{"property_id": "P999", "property_name": "Country"}', allowed)[0] == "P17"
    assert parse_property_choice('{"information_requested": "who", "property_id": "P999"}', allowed) == (
        None, "who", "")
    assert parse_answer_status('{"answer_status": "require_more_details", "reason": "r"') == "require_more_details"
    assert parse_answer_status('{"answer_status": "Correct"}') == "correct"
    assert parse_answer_status("it is wrong") == "wrong" and parse_answer_status("banana") is None
    qa = parse_qa('{"reason": "r", "answers": ["a", 3, true], "answers_datatype": "String"')
    assert qa == {"answers": ["a", 3, True], "answers_datatype": "string", "reason": "r"}
    assert parse_qa('{"answers": "single"}')["answers"] == ["single"]
    assert parse_qa("I think it is Paris") is None
    cands = ["Q64", "Q56037"]
    assert parse_item_choice('{"main_entity_item_id": "http://www.wikidata.org/entity/Q56037"', "main_entity_item_id",
                             cands) == "Q56037"
    assert parse_item_choice("the answer is Q64 clearly", "x", cands) == "Q64"
    assert parse_item_choice('{"main_entity_item_id": "Q1"}', "main_entity_item_id", cands) is None


def test_answers_in_the_dataset_formats():
    assert format_answers(["Yes"], "boolean") == ["true"] and format_answers([False], "") == ["false"]
    assert format_answers(["no"], "string") == ["false"]
    assert format_answers(["1,234 m"], "quantity") == ["1234"] and format_answers(["+157"], "") == ["157"]
    assert format_answers([3, 2.5], "quantity") == ["3", "2.5"]
    assert format_answers(["March 5, 1990", "5th of May 1821", "1990-03-05T00:00:00Z", "July 1969"], "date") == [
        "1990-03-05", "1821-05-05", "1969-07-01"]
    assert format_answers(["Paris (capital of France)", "Paris", "", None, ["nested"]], "string") == ["Paris"]
    assert format_answers(["Paris (Q90)"], "string", {"Q90"}) == ["Q90"]
    assert format_answers(["Paris (Q90)"], "string") == ["Paris"]  # a QID the agent never showed is not trusted
    assert format_answers("single", "") == ["single"]
    assert to_iso_date("1990") is None and to_iso_date("February 30, 1990") is None
    assert [is_literal_answer(a) for a in ("true", "1234", "1990-03-05", "Q5", "Paris")] == [True] * 4 + [False]


def test_metric_compares_wikidata_literals_as_formatted():
    assert qald_prf(["1997-04-05"], ["1997-04-05T00:00:00Z"]) == (1.0, 1.0, 1.0)
    assert qald_prf(["157"], ["+157"]) == (1.0, 1.0, 1.0)
    assert qald_prf(["true"], ["True"]) == (1.0, 1.0, 1.0)
    assert qald_prf(["2001-07-20"], ["2001-07-20T10:00:00Z"]) == (0.0, 0.0, 0.0)  # not a plain date: unchanged


def test_context_is_filtered_and_bounded(duck, picks):
    q = picks["main"]
    facts = [fact_dict(f) for f in duck.outgoing([q])[q]]
    full = property_messages(facts, 100_000, max_values=2)
    assert full.shown and full.total == len(full.shown)
    assert all(m.startswith("Property: ") and m.count("\n") <= 3 for m in full.messages)
    assert not any(f["p"] in full.shown and (f.get("pl") or "").endswith("ID") for f in facts)
    one = approx_tokens(full.messages[0]) + 4
    small = property_messages(facts, one, max_values=2)
    assert small.messages == full.messages[:1] and small.total == full.total
    rels = [list(r) for r in duck.relations([q])[q]]
    text, listed = property_list(rels, 40, "List of properties")
    assert approx_tokens(text) <= 46 and all(f"({p})" in text for p in listed)
    assert set(listed) <= {r[0] for r in rels if r[2] == "out"}


# ------------------------------------------------------------------------------------------------ agents
def test_kg_1hop_control_flow_and_context_linking(kb, picks, questions):
    f1 = picks["hop1"]
    backend = ScriptedBackend(_router({
        "identify": [f'{{"reason": "r", "main_entity_label": "{picks["label"]}"', "I cannot tell."],
        "qa": f'{{"reason": "from the facts", "answers": ["{f1.object_label}", "Yes"], "answers_datatype": "string"',
    }))
    s = KgqaSettings(link_search_k=0)
    ctx = _ctx(kb)
    tools = get_method("kg-1hop")(s).build_tools(ctx)
    outs, stats = run_agents(kg_one_hop_agent(s), questions[:2], backend, tools)
    ok, bad = outs
    assert ok["error"] is None and ok["predicted_entities"] == [picks["main"]]
    assert ok["answers"] == [f1.object_qid, "true"]  # the label the LLM copied from its context -> its QID
    assert ok["answer"] == f"{f1.object_label}; true"
    assert bad["error"].startswith("AgentError: no main_entity_label")
    assert backend.batch_sizes[0] == 2  # one backend call per step for all items
    qa_prompt = next(r for r in backend.requests if "question answerer" in r.messages[-1]["content"])
    assert any(f"({f1.property})" in m["content"] for m in qa_prompt.messages)
    assert qa_prompt.messages[0]["role"] == "system" and "2024-04-11" in qa_prompt.messages[0]["content"]
    assert "Example answer" in qa_prompt.messages[2]["content"]  # the one-shot turn
    assert stats.llm_batches == 2


def test_kg_1hop_disambiguates_several_matches(kb, duck, picks, questions):
    cands = duck.search_label([picks["ambiguous"]])[0]
    backend = ScriptedBackend(_router({
        "identify": f'{{"main_entity_label": "{picks["ambiguous"]}"',
        "disambiguate": f'{{"reason": "second", "main_entity_item_id": "{cands[1]}"',
        "qa": '{"answers": ["12"], "answers_datatype": "quantity"',
    }))
    s = KgqaSettings(cot=False, one_shot=False, link_search_k=0)
    outs, _ = run_agents(kg_one_hop_agent(s), questions[:1], backend, kg_tools(duck))
    assert outs[0]["error"] is None and outs[0]["predicted_entities"] == [cands[1]]
    assert outs[0]["answers"] == ["12"]
    ident = backend.requests[0]
    assert len(ident.messages) == 2 and '"reason"' not in ident.messages[-1]["content"]  # no one-shot, no CoT


def test_react_kg_two_hops(kb, duck, picks, questions):
    f1, f2 = picks["hop1"], picks["hop2"]
    backend = ScriptedBackend(_router({
        "identify": f'{{"main_entity_label": "{picks["label"]}"',
        "choose": [f'{{"information_requested": "first hop", "property_id": "{f1.property}"',
                   f'{{"information_requested": "second hop", "property_id": "{f2.property}"'],
        "status": '{"answer_status": "require_more_details", "reason": "need more"',
        "qa": f'{{"answers": ["{f2.object_label}"], "answers_datatype": "string"',
    }))
    s = ReactKgSettings(link_search_k=0, max_depth=2)
    outs, _ = run_agents(react_kg_agent(s), questions[:1], backend, kg_tools(duck))
    out = outs[0]
    assert out["error"] is None and out["answers"] == [f2.object_qid]
    steps = [r.messages[-1]["content"] for r in backend.requests]
    assert sum("knowledge graph analyzer" in t for t in steps) == 2 and sum("answer analyzer" in t for t in steps) == 1
    second_choice = [r for r in backend.requests if "knowledge graph analyzer" in r.messages[-1]["content"]][1]
    assert f1.object_label in second_choice.messages[-1]["content"]  # "currently selected entities"
    qa = backend.requests[-1]
    assert any(f"Entity: {f1.object_label} ({f1.object_qid}), Property:" in m["content"] for m in qa.messages)

    # depth 1: the values answer at once, no thought step
    backend1 = ScriptedBackend(_router({
        "identify": f'{{"main_entity_label": "{picks["label"]}"',
        "choose": f'{{"property_id": "{f1.property}"', "qa": f'{{"answers": ["{f1.object_label}"]'}))
    outs, _ = run_agents(react_kg_agent(ReactKgSettings(link_search_k=0, max_depth=1)), questions[:1], backend1,
                         kg_tools(duck))
    assert outs[0]["answers"] == [f1.object_qid]
    assert not any("answer analyzer" in r.messages[-1]["content"] for r in backend1.requests)

    # a property that was not listed is garbage: a per-item error
    backend2 = ScriptedBackend(_router({
        "identify": f'{{"main_entity_label": "{picks["label"]}"', "choose": '{"property_id": "P999999"'}))
    outs, _ = run_agents(react_kg_agent(s), questions[:1], backend2, kg_tools(duck))
    assert "not among the" in outs[0]["error"]


def test_answer_linking_closed_book(kb, picks, questions):
    f1 = picks["hop1"]
    cands_text = picks["ambiguous"]
    backend = ScriptedBackend(_router({
        "qa": f'{{"reason": "r", "answers": ["{f1.object_label}", "{cands_text}", "{picks["label"]} xq", "1990"]',
        "link": "no idea",
    }))
    settings = KgqaSettings(link_search_k=3)
    ctx = _ctx(kb)
    tools = closed_book_kg_tools(settings, ctx)
    assert {"kg_link", "entity_search"} <= set(tools)
    outs, _ = run_agents(closed_book_kg_agent(settings, ctx), questions[:1], backend, tools)
    out = outs[0]
    assert out["error"] is None and out["predicted_entities"] == []
    # exact unique label -> its QID; ambiguous name with an unusable disambiguation -> text; BM25 fallback asked
    # the LLM too (unusable -> text); the number is never linked
    assert out["answers"] == [f1.object_qid, cands_text, f"{picks['label']} xq", "1990"]
    links = [r for r in backend.requests if "answer entity" in r.messages[-1]["content"]]
    assert len(links) == 2 and "Wikidata items:" in links[0].messages[0]["content"]

    # without a KB (closed-book runs have none unless asked) there is nothing to link against
    no_kb = MethodContext(kb_version=None, root=kb[0], task="kgqa")
    assert closed_book_kg_tools(settings, no_kb) == {}
    outs, _ = run_agents(closed_book_kg_agent(settings, no_kb), questions[:1],
                         ScriptedBackend(_router({"qa": '{"answers": ["Paris"]'})), {})
    assert outs[0]["answers"] == ["Paris"] and outs[0]["error"] is None


def test_settings_and_registry():
    cls = get_method("kg-1hop")
    assert cls.family_for("kgqa") == "qald" and cls.family_for("kgqa-open") == "tog"
    assert cls.tasks == ("kgqa", "kgqa-open") and get_method("react-kg").tasks == ("kgqa", "kgqa-open")
    with pytest.raises(UnknownSetting, match="endpoint"):
        cls.parse_settings({"kg": "sparql"})
    with pytest.raises(UnknownSetting, match="unknown --set"):
        cls.parse_settings({"depth": "2"})
    s = get_method("react-kg").parse_settings({"kg": "sparql", "endpoint": "http://127.0.0.1:1/query",
                                              "max_depth": "2"})
    assert s.max_depth == 2 and s.kg == "sparql"
    with pytest.raises(UnknownSetting):
        cls.check_task("webqsp-el", "el")


def test_sparql_injection_has_no_effect_and_down_endpoint_is_an_item_error(kb, duck, picks, questions, tmp_path):
    root, version = kb
    nt = tmp_path / "kb.nt.gz"
    export_ntriples(version, nt, root=root)
    items = [{**questions[i % len(questions)], "question_id": f"inj{i}"} for i in range(len(INJECTIONS))]
    items.append({**questions[0], "question_id": "real"})
    labels = {it["question_id"]: inj for it, inj in zip(items, INJECTIONS, strict=False)}
    labels["real"] = picks["label"]

    def script(messages):
        last = messages[-1]["content"]
        if "entity identifier model" in last:
            qid = next(k for k, v in labels.items() if messages[-2]["content"].endswith(f"#{k}"))
            return json.dumps({"main_entity_label": labels[qid]})
        return '{"answers": ["Yes"], "answers_datatype": "boolean"'

    for it in items:  # tag each question so the script knows which label to name
        it["question"] = f"{it['question']} #{it['question_id']}"
    with OxigraphServer() as srv:
        srv.load_ntriples(nt)
        settings = KgqaSettings(kg="sparql", endpoint=srv.query_url, endpoint_timeout_s=5, endpoint_retries=1,
                                link_search_k=0)
        kg = SparqlKG(srv.query_url)
        before = int(kg.select(render("count_triples"))[0]["n"]["value"])
        tools = get_method("kg-1hop")(settings).build_tools(_ctx(kb))
        outs, _ = run_agents(kg_one_hop_agent(settings), items, ScriptedBackend(script), tools)
        by_id = {o["question_id"]: o for o in outs}
        for i in range(len(INJECTIONS)):
            o = by_id[f"inj{i}"]
            assert o["error"] is None and o["predicted_entities"] == [] and o["answers"] == ["true"]
        assert by_id["real"]["predicted_entities"] == [picks["main"]]
        assert int(kg.select(render("count_triples"))[0]["n"]["value"]) == before
        srv.stop()
        t0 = time.perf_counter()
        outs, _ = run_agents(kg_one_hop_agent(settings), items[-2:], ScriptedBackend(script), tools)
        assert time.perf_counter() - t0 < 10
        assert all(o["error"].startswith("AgentError: KG error in kg_link: KGError:") for o in outs)

    # nothing listens on this port at all
    dead = KgqaSettings(kg="sparql", endpoint=f"http://127.0.0.1:{free_port()}/query", endpoint_timeout_s=1,
                        endpoint_retries=0, link_search_k=0)
    outs, _ = run_agents(kg_one_hop_agent(dead), items[-1:], ScriptedBackend(script),
                         get_method("kg-1hop")(dead).build_tools(_ctx(kb)))
    assert "failed after 1 attempt" in outs[0]["error"]


def test_local_kb_gold_answers(kb, picks, questions, data_root):
    from tasks.datasets.registry import load_dataset
    from tasks.methods.kgqa.kb_gold import gold_answers, open_store, supported

    qald10 = {r["question_id"]: r["sparql"] for r in load_dataset("qald-10", data_root).rows("test")}
    with_statements = next(q for q in qald10.values() if re.search(r"\sps:P\d", q))
    assert not supported(with_statements) and not supported("SELECT * { SERVICE <x> { ?s ?p ?o } }")
    # QALD-10 declares every WDQS prefix: only the body counts
    plain = {"wd", "wdt", "rdfs", "skos", "schema", "xsd", "rdf"}
    declared_only = [q for q in qald10.values() if "PREFIX p:" in q and "SERVICE" not in q and set(
        re.findall(r"(?<![\w:<])([a-z]+):", re.sub(r"PREFIX\s+\S*\s*<[^>]*>", "", q))) <= plain]
    assert declared_only and all(supported(q) for q in declared_only)
    f1, main = picks["hop1"], picks["main"]
    store = open_store(kb[1], kb[0])
    assert open_store(kb[1], kb[0]) is store  # built once, then reused
    res = gold_answers(store, [f"SELECT ?o WHERE {{ wd:{main} wdt:{f1.property} ?o }}",
                               f"ASK {{ wd:{main} wdt:{f1.property} wd:{f1.object_qid} }}",
                               "SELECT ?o WHERE { wd:Q1 wdt:P999999 ?o }", with_statements, None, "SELECT ?x WHERE {"])
    assert res[0]["status"] == "answered" and f1.object_qid in res[0]["qids"]
    assert res[1] == {"status": "answered", "qids": [], "literals": ["true"]}
    assert [r["status"] for r in res[2:]] == ["empty", "unsupported", "no_query", "error"]

    # through the agent: per-question scores say how much of the official gold the local KB gives
    item = {**questions[0], "sparql": f"SELECT ?o WHERE {{ wd:{main} wdt:{f1.property} ?o }}",
            "gold_answer_qids": [f1.object_qid]}
    backend = ScriptedBackend(_router({"identify": f'{{"main_entity_label": "{picks["label"]}"',
                                       "qa": f'{{"answers": ["{f1.object_label}"]'}))
    s = KgqaSettings(link_search_k=0, kb_gold=True)
    outs, _ = run_agents(kg_one_hop_agent(s), [item], backend, get_method("kg-1hop")(s).build_tools(_ctx(kb)))
    sc = outs[0]["scores"]
    assert sc["kb_gold_status"] == 1.0 and sc["kb_gold_n"] == len(res[0]["qids"]) and sc["kb_gold_f1"] > 0
    assert sc["kb_gold_answer_f1"] > 0 and outs[0]["error"] is None
