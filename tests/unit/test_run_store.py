"""The run store: one run folder's paths, typed records and done rules; nothing else joins a run path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from storage import layout
from storage.done import read_json
from storage.manifest import read_manifest
from storage.run_store import (
    ITEM_COLUMNS,
    RUN_TABLES,
    PredictionRow,
    RunConfig,
    RunManifest,
    RunPlan,
    RunStore,
    ShardRecord,
)
from storage.schemas import PREDICTIONS
from tasks.methods.records import ItemOutput

REPO = Path(__file__).resolve().parents[2]


def _plan(n_shards: int = 2) -> RunPlan:
    return RunPlan(run_id="ela-webqsp-el-test-00000000", config=RunConfig(method="ela", dataset="webqsp-el"),
                   method_settings={"k": 5}, dataset_version="v1", split="test", kb_version="kb-1",
                   question_ids=["q1", "q2", "q3"], shard_bounds=[(0, 2), (2, 3)][:n_shards], prompt_hashes={})


def _row(qid: str, shard: int) -> dict:
    return {"run_id": "ela-webqsp-el-test-00000000", "method": "ela", "dataset": "webqsp-el", "split": "test",
            "question_id": qid, "shard": shard, "predicted_entities": ["Q1"], "answer": "a", "answers": ["a"],
            "trajectory": "[]", "llm_calls": 1, "prompt_tokens": 2, "completion_tokens": 3, "latency_s": 0.5,
            "error": None, "scores": {"accuracy": 1.0}}


def test_plan_shards_and_manifest_follow_the_done_rules(tmp_path: Path) -> None:
    plan = _plan()
    store = RunStore(plan.run_id, tmp_path)
    assert store.read_plan() is None and not store.is_planned() and not store.is_done()
    with pytest.raises(LookupError, match="unknown run"):
        store.load_plan()
    store.write_plan(plan)
    assert store.is_planned() and store.load_plan() == plan

    assert store.shard_done(0, 2) is None
    record = ShardRecord(shard=0, rows=2, errors=0, wall_s=1.5, engine_dtype=None, finished_at="2026-12-02T00:00")
    store.write_shard(0, 2, record, [_row("q1", 0), _row("q2", 0)])
    assert store.shard_done(0, 2) == record and store.shard_done(1, 2) is None
    # the record holds the fields it was given, no defaults
    assert read_json(store.shard_record_path(0)) == {"shard": 0, "rows": 2, "errors": 0, "wall_s": 1.5,
                                                      "engine_dtype": None, "finished_at": "2026-12-02T00:00"}
    # a done shard whose record is gone reads as the empty record; an older record lacks newer fields
    store.write_shard(1, 2, ShardRecord(shard=1, rows=1), [_row("q3", 1)])
    store.shard_record_path(1).unlink()
    assert store.shard_done(1, 2) == ShardRecord() and store.shard_done(1, 2).tool_seconds == 0.0
    assert [p.name for p in store.prediction_parts()] == ["part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]
    assert store.read_table("predictions", ["question_id"]).column(0).to_pylist() == ["q1", "q2", "q3"]

    assert not store.has_table("metrics")
    store.write_table("metrics", [{"run_id": plan.run_id, "method": "ela", "dataset": "webqsp-el", "split": "test",
                                   "metric": "accuracy", "value": 1.0, "n": 3}])
    assert store.has_table("metrics") and store.read_table("metrics").num_rows == 1
    with pytest.raises(ValueError, match="no table 'ratings'"):
        store.table_dir("ratings")

    manifest = RunManifest(run_id=plan.run_id, config=plan.config.model_dump(mode="json"),
                           method_settings=plan.method_settings, dataset_version="v1", kb_version="kb-1",
                           row_counts={"predictions": 3}, shards=[store.shard_done(0, 2), store.shard_done(1, 2)],
                           metrics_format=4, table_schema={"predictions": ["run_id"]})
    store.write_manifest(manifest)
    assert store.is_done()
    raw = read_manifest(store.folder)
    assert raw["schema"] == {"predictions": ["run_id"]} and "table_schema" not in raw
    assert raw["shards"] == [read_json(store.shard_record_path(0)), {}] and raw["git_sha"]
    back = store.read_manifest()
    assert back.shards[0] == store.shard_done(0, 2) and back.metrics_format == 4 and back.n_errors == 0
    # a rewrite keeps what it does not change, and the fields it does not know
    again = back.model_copy(update={"metrics_format": 5})
    store.write_manifest(again)
    assert read_manifest(store.folder) == {**raw, "metrics_format": 5}


def test_a_manifest_of_an_older_run_reads(tmp_path: Path) -> None:
    """A manifest without metrics_format, history or shard fields added later, with a key unknown here."""
    store = RunStore("search-recall-webqsp-el-test-00000000", tmp_path)
    store.folder.mkdir(parents=True)
    (store.folder / "manifest.json").write_text(json.dumps({
        "kind": "run", "run_id": store.run_id, "config": {"method": "search-recall"}, "method_settings": {},
        "dataset_version": "v1", "row_counts": {"predictions": 1}, "shards": [{"shard": 0, "wall_s": 2.0}],
        "future_key": [1]}))
    m = store.read_manifest()
    assert m.metrics_format == 1 and m.metrics_history == [] and m.shards[0].llm_seconds == 0.0
    assert m.dump()["future_key"] == [1] and m.dump()["shards"] == [{"shard": 0, "wall_s": 2.0}]


def test_run_ids_are_checked_and_tables_named() -> None:
    with pytest.raises(ValueError):
        RunStore("../escape")
    assert RUN_TABLES == ("predictions", "metrics", "stages", "runs")


def test_nothing_outside_storage_joins_a_run_path_or_reads_a_run_json() -> None:
    """The run folder's layout is the store's: no ``layout.run_dir`` / ``run_shard_*`` call, no run JSON read and
    no run table folder joined by hand in flows/ or tasks/."""
    patterns = [r"layout\.run_dir\(", r"layout\.run_shard_(part|record)\(", r"\"manifest\.json\"",
                r"layout\.PLAN\b", r"/ \"(predictions|metrics|stages|shards)\"", r"\brdir\b"]
    found = []
    for path in sorted([*(REPO / "tasks").rglob("*.py"), *(REPO / "flows").rglob("*.py")]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if any(re.search(p, line) for p in patterns):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert found == []
    assert layout.PLAN == "plan.json"


def test_one_prediction_row_for_the_schema_and_the_code() -> None:
    """The row type has the schema's columns in its order; the columns taken from an item's output are fields of
    the runtime's ``ItemOutput``."""
    assert list(PredictionRow.__annotations__) == PREDICTIONS.names
    assert set(ITEM_COLUMNS) | {"answers", "scores"} <= set(ItemOutput.__annotations__)
    assert set(ITEM_COLUMNS) < set(PREDICTIONS.names)
