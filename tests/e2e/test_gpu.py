"""GPU readiness: the same code paths on a CUDA machine (``pytest -m gpu``; never part of ``make test``).

Run on a GPU machine after ``pip install -e .[gpu]`` (docs/scaling.md#gpu): ``LINKEDQA_DATA=... pytest -m gpu``.
``LINKEDQA_GPU_MODEL`` picks the model (a local folder or a Hugging Face id in the local HF cache; default: the
embedded Qwen2.5-Coder-0.5B-Instruct, prepared from the pinned wheels like on CPU). The test runs ELA through the
real ``linkedqa`` CLI on the sample KB and checks what a GPU run must show: every question answered once, bf16
numerics, the prefix cache serving the shared ELA prompt, and metrics computed from the stored predictions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage import layout

pytestmark = [pytest.mark.gpu, pytest.mark.llm]


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a CPU-only torch build or no driver: not a GPU machine
        return False


@pytest.fixture(scope="module")
def gpu_home(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> dict[str, str]:
    if not _cuda():
        pytest.skip("no CUDA device visible to torch (run these on a GPU machine: pytest -m gpu)")
    home = tmp_path_factory.mktemp("gpu") / "warehouse"
    env = {**os.environ, "LINKEDQA_HOME": str(home), "LINKEDQA_DATA": str(data_root),
           "LINKEDQA_PROGRESS": "plain"}
    env.pop("PREFECT_API_URL", None)
    out = subprocess.run([sys.executable, "-m", "flows.cli", "kb", "build", "--sample"], cwd=layout.REPO_ROOT,
                         env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return env


def test_ela_runs_unchanged_on_the_gpu(gpu_home):
    model = os.environ.get("LINKEDQA_GPU_MODEL", "embedded")
    n = int(os.environ.get("LINKEDQA_GPU_N", "64"))
    cmd = [sys.executable, "-m", "flows.cli", "run", "ela", "--dataset", "webqsp-el", "--split", "test",
           "--limit", str(n), "--shards", "2", "--model", model]
    out = subprocess.run(cmd, cwd=layout.REPO_ROOT, env=gpu_home, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    runs = sorted((Path(gpu_home["LINKEDQA_HOME"]) / "runs").glob("ela-webqsp-el-test-*"))
    assert len(runs) == 1
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert manifest["row_counts"]["predictions"] == n
    assert all(s["engine_dtype"] == "bfloat16" for s in manifest["shards"])  # auto on a GPU: bf16
    from storage.parquet_io import read_table

    metrics = {r["metric"]: r["value"] for r in read_table(runs[0] / "metrics", "metrics").to_pylist()}
    assert metrics["error_count"] < n / 2, metrics
    assert metrics["prefix_cache_share"] > 0.3, metrics
    print(f"GPU ELA on {n} questions ({model}): wall {metrics['wall_s']:.1f}s, "
          f"{metrics['completion_tokens'] / max(metrics['llm_seconds'], 1e-9):.0f} gen tok/s of LLM time, "
          f"precision {metrics['precision']:.3f}, recall {metrics['recall']:.3f}, "
          f"prefix-cache share {metrics['prefix_cache_share']:.3f}")
