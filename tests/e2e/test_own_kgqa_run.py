"""End-to-end: a user's KGQA questions imported with ``linkedqa data import --task kgqa`` (the real command) and
answered by ``kg-1hop`` through the run flow on the session's vLLM engine and the sample KB. The run reads the
imported questions, sees the dataset's kind (``kgqa``), and stores the QALD family's metrics, which ``linkedqa eval``
recomputes from its stored predictions.

The questions are real: the first SimpleQuestions-Wikidata and the first QALD-9-plus question that the sample KB
answers in one hop (found as ``tests/e2e/test_kgqa_run.py`` finds them), and a real question without answers,
which the import rejects. Bounds for the 2-core machine: two questions, the KGQA tests' small settings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from tests.cli_env import user_shell_env

pytestmark = [pytest.mark.llm, pytest.mark.usefixtures("cli_session_api")]

NAME = "own-kgqa"
SETTINGS = {"context_tokens": "2048", "max_tokens": "160", "max_tokens_step": "112"}


@pytest.fixture()
def run_env(kb_home: str, embedded_models_root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LINKEDQA_MODELS", str(embedded_models_root))
    return kb_home


def _records(sample_kb: str, home: Path, data_root: Path) -> list[dict]:
    """The two answerable questions as import records, then a question without answers."""
    from tasks.datasets.registry import load_dataset
    from tasks.kg.duckdb_store import DuckDBKG
    from tests.e2e.test_kgqa_run import _answerable

    sq_rows = list(load_dataset("simplequestions-wd", data_root).rows("test"))
    qald_rows = sorted(load_dataset("qald-9-plus", data_root).rows("train"), key=lambda r: int(r["question_id"]))
    with DuckDBKG(sample_kb, root=home) as kg:
        picked = [_answerable(sq_rows, kg)[0], _answerable(qald_rows, kg)[0]]
    records = [{"id": r["question_id"], "question": r["question"], "gold_entities": r["gold_entities"],
                "gold_answer_qids": r["gold_answer_qids"], "sparql": r["sparql"]} for r in picked]
    unanswered = next(r for r in sq_rows if r["question_id"] not in {p["question_id"] for p in picked})
    return [*records, {"id": unanswered["question_id"], "question": unanswered["question"]}]


# two questions (the KGQA flow test measured 1,903 prompt / 233 generated tokens for two with these settings)
@pytest.mark.llm_budget(prompt=4_000, completion=800)
def test_kg_1hop_on_an_imported_kgqa_set(run_env, embedded_llm, prefect_harness, session_home: Path,
                                         data_root: Path, tmp_path: Path):
    from flows.run_method import run_method
    from tasks.datasets.registry import dataset_task
    from tasks.metrics.runs import FAMILIES
    from tasks.runs.config import RunConfig
    from tasks.runs.evaluate import recompute_metrics
    from tasks.runs.resolve import resolve_run

    records = _records(run_env, session_home, data_root)
    f = tmp_path / "own-kgqa.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in records))
    ran = subprocess.run([sys.executable, "-m", "flows.cli", "data", "import", str(f), "--name", NAME, "--task",
                          "kgqa"], cwd=layout.REPO_ROOT, capture_output=True, text=True, timeout=600,
                         env=user_shell_env(session_home, LINKEDQA_DATA=str(data_root)))
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines() == [f"{NAME}: 2 question(s) imported (test=2), 1 line(s) rejected; task kgqa",
                                       "  line 3: task kgqa needs gold_answers or gold_answer_qids"]
    assert dataset_task(NAME, session_home) == "kgqa"

    run_id = run_method(RunConfig(method="kg-1hop", dataset=NAME, settings=SETTINGS))
    run = resolve_run(run_id, session_home)
    assert (run.task, run.family) == ("kgqa", "qald")
    rdir = layout.run_dir(run_id, session_home)
    assert read_manifest(rdir)["row_counts"]["predictions"] == 2
    preds = read_table(rdir / "predictions", "predictions").to_pylist()
    assert sorted(p["question_id"] for p in preds) == sorted(r["id"] for r in records[:2])
    assert any(p["error"] is None for p in preds), [p["error"] for p in preds]  # some item was answered
    for p in preds:
        assert p["dataset"] == NAME and p["llm_calls"] >= 1
        assert p["error"] is None or p["error"].startswith("AgentError"), p["error"]
        assert all(q.startswith("Q") for q in p["predicted_entities"] or [])
        assert "qald_macro_f1_gerbil" in dict(p["scores"])
    recomputed, stored = recompute_metrics(run_id, session_home)
    stored_by = {r["metric"]: r for r in stored}
    assert set(FAMILIES["qald"].metrics) <= set(stored_by)
    assert stored_by["qald_macro_f1_gerbil"]["n"] == 2 and 0.0 <= stored_by["qald_macro_f1_gerbil"]["value"] <= 1.0
    for r in recomputed:
        assert stored_by[r["metric"]]["value"] == pytest.approx(r["value"]), r["metric"]
