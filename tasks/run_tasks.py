"""Prefect tasks of a method run: thin wrappers over ``tasks.runs`` (plan, one shard, finalize, artifact)."""

from __future__ import annotations

import os
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from storage.artifacts import ArtifactRef
from storage.catalog import refresh_catalog
from storage.run_store import RunStore, ShardRecord
from tasks.llm.types import EngineConfig
from tasks.progress import say
from tasks.runs.config import RunConfig, RunPlan
from tasks.runs.finalize import finalize_run
from tasks.runs.planning import plan_run
from tasks.runs.shard import execute_shard


@task(name="plan_run")
def plan_run_task(cfg: RunConfig, root: str, data_root: str) -> RunPlan:
    """Resolve the run (dataset, KB, the HTTP server's API profile, run id, shards) and persist plan.json."""
    load_api_key(cfg)  # the server's model list may need the key too
    return plan_run(cfg, Path(root), Path(data_root))


def load_api_key(cfg: RunConfig) -> None:
    """Load the API key from the Prefect ``Secret`` block ``cfg.api_key_block`` unless the variable is set.

    The key goes into the backend's environment variable (``OPENAI_API_KEY``) of this process, from which the
    OpenAI backend reads it into its HTTP headers. It runs where the shard runs (a Dask or Prefect worker has its
    own environment). The key is never logged, returned or written: plan and manifest record only the block name.
    """
    if cfg.backend != "openai" or not cfg.api_key_block:
        return
    from prefect.blocks.system import Secret  # heavy: prefect


    var = EngineConfig().api_key_env
    if not os.environ.get(var):
        os.environ[var] = Secret.load(cfg.api_key_block).get()


@task(name="execute_shard", task_run_name="shard {i}", tags=["llm-shard"])
def execute_shard_task(plan: RunPlan, i: int, root: str, data_root: str, device: str | None = None) -> ShardRecord:
    """Run one shard (skipped when its predictions part exists).

    ``device`` pins the shard to one GPU on multi-GPU hosts (``CUDA_VISIBLE_DEVICES`` is read by vLLM when the
    engine of this worker process starts).
    """
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    load_api_key(plan.config)
    log = get_run_logger()
    return execute_shard(plan, i, Path(root), Path(data_root), log=lambda m: (say(m), log.debug(m)))


@task(name="finalize_run")
def finalize_run_task(plan: RunPlan, started_at: str, wall_s: float, root: str) -> ArtifactRef:
    """Metrics from stored predictions, runs row, manifest (last), catalog refresh."""
    rows = finalize_run(plan, started_at, wall_s, Path(root))
    refresh_catalog(Path(root))
    return ArtifactRef(table="predictions", version=plan.run_id, row_count=len(plan.question_ids),
                       paths=[str(RunStore(plan.run_id, Path(root)).folder)],
                       extra={"metrics": {r["metric"]: r["value"] for r in rows}})


@task(name="publish_run_artifact")
def publish_run_artifact(plan: RunPlan, ref: ArtifactRef) -> None:
    """Markdown artifact: metrics, counts, efficiency and the run folder."""
    m = ref.extra.get("metrics", {})
    lines = [f"# Run `{plan.run_id}`", "", f"method **{plan.config.method}**, dataset **{plan.config.dataset}/"
             f"{plan.split}**, {len(plan.question_ids)} questions, {plan.n_shards} shard(s), KB `{plan.kb_version}`",
             "", "| metric | value |", "|---|---:|"]
    lines += [f"| {k} | {'n/a' if v is None else f'{v:.4f}'} |" for k, v in m.items()]
    lines += ["", f"Run folder: `{ref.paths[0]}`"]
    key = "run-" + "".join(ch if ch.isalnum() else "-" for ch in plan.run_id.lower())
    create_markdown_artifact(markdown="\n".join(lines), key=key[:80], description=f"linkedqa run {plan.run_id}")
