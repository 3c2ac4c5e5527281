"""A run resumed on a machine of another engine dtype is refused (tasks.runs.shard.check_engine_dtype).

The dtype is operational (not in the run id), and bfloat16 and float32 engines sample different answers, so a run
finished in one must not get shards of the other. Records and parts are files as ``execute_shard`` writes them.
"""

from __future__ import annotations

import json

import pytest

from storage import layout
from storage.run_store import RunStore
from tasks.runs.config import RunConfig, RunPlan, contiguous_shards
from tasks.runs.shard import MixedDtypeError, check_engine_dtype


def _plan(n_shards: int) -> RunPlan:
    ids = [f"q{i}" for i in range(6)]
    cfg = RunConfig(method="ela", dataset="webqsp-el", shards=n_shards)
    return RunPlan(run_id="ela-webqsp-el-test-0000", config=cfg, method_settings={}, dataset_version="v1",
                   split="test", kb_version="kb",
                   question_ids=ids, shard_bounds=contiguous_shards(len(ids), n_shards), prompt_hashes={})


def _finish(plan: RunPlan, i: int, dtype: str | None, root, with_part: bool = True) -> None:
    rec = RunStore(plan.run_id, root).shard_record_path(i)
    rec.parent.mkdir(parents=True, exist_ok=True)
    rec.write_text(json.dumps({"shard": i, "engine_dtype": dtype}))
    if with_part:
        part = RunStore(plan.run_id, root).shard_part(i, plan.n_shards)
        part.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(b"PAR1")


def test_a_shard_in_another_dtype_is_refused_with_how_to_resume(tmp_path):
    plan = _plan(3)
    _finish(plan, 0, "bfloat16", tmp_path)
    _finish(plan, 1, "bfloat16", tmp_path)
    check_engine_dtype(plan, "bfloat16", tmp_path)  # same dtype: resumes
    with pytest.raises(MixedDtypeError) as exc:
        check_engine_dtype(plan, "float32", tmp_path)
    msg = str(exc.value)
    assert "bfloat16 (shards 0, 1)" in msg and "this engine runs float32" in msg
    assert "--dtype bfloat16" in msg and str(layout.run_dir(plan.run_id, tmp_path)) in msg


def test_unfinished_shards_and_undeclared_dtypes_do_not_count(tmp_path):
    plan = _plan(3)
    _finish(plan, 0, "float32", tmp_path, with_part=False)  # killed between its record and its part
    _finish(plan, 1, None, tmp_path)  # a remote endpoint: no dtype known
    check_engine_dtype(plan, "bfloat16", tmp_path)
    _finish(plan, 2, "float32", tmp_path)
    check_engine_dtype(plan, None, tmp_path)  # this backend declares none
    with pytest.raises(MixedDtypeError, match=r"float32 \(shard 2\)"):
        check_engine_dtype(plan, "bfloat16", tmp_path)


def test_auto_records_and_engines_are_not_compared(tmp_path):
    plan = _plan(2)
    _finish(plan, 0, "auto", tmp_path)  # a GPU shard recorded before the engine's own dtype was
    check_engine_dtype(plan, "float32", tmp_path)
    _finish(plan, 1, "bfloat16", tmp_path)
    check_engine_dtype(plan, "auto", tmp_path)  # an engine that does not say: nothing to compare
    with pytest.raises(MixedDtypeError, match=r"bfloat16 \(shard 1\).*--dtype bfloat16"):
        check_engine_dtype(plan, "float32", tmp_path)


def test_the_cli_says_how_to_resume_a_refused_run():
    from flows.cli.errors import EXIT_USAGE, error_kind

    code, hint = error_kind(MixedDtypeError("run x: finished shards ran with engine dtype bfloat16 (shard 0)"))
    assert code == EXIT_USAGE and "--dtype" in hint and "refused again" in hint


def test_the_engine_s_own_dtype_is_recorded():
    from types import SimpleNamespace

    from tasks.llm.vllm_backend import engine_dtype

    torch = pytest.importorskip("torch")
    assert engine_dtype(SimpleNamespace(model_config=SimpleNamespace(dtype=torch.bfloat16)), "auto") == "bfloat16"
    assert engine_dtype(SimpleNamespace(), "float32") == "float32"  # a wrapped engine that does not say
