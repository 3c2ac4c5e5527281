"""Prefect tasks of the KB build: thin wrappers over ``tasks.kb`` (plan, stage one shard, merge, catalog)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from storage import layout
from storage.artifacts import ArtifactRef
from storage.catalog import refresh_catalog
from storage.manifest import read_manifest
from tasks.dumps.base import Shard
from tasks.kb.merge import merge_and_publish
from tasks.kb.plan import BuildPlan, InputSpec, plan_from_inputs
from tasks.kb.pool import shard_pool
from tasks.kb.stage import stage_shard
from tasks.progress import say


@task(name="plan_from_inputs")
def plan_kb_task(sample: bool, name: str | None, inputs: dict[str, list[str]], shards_per_file: int,
                 languages: str | None = None, workers: int | None = None) -> BuildPlan:
    """Resolve the build plan of a KB from its inputs by kind (``plan_from_inputs``)."""
    return plan_from_inputs(sample, name, shards_per_file=shards_per_file, languages=languages, workers=workers,
                            **inputs)


@task(name="stage_shard", task_run_name="stage {spec.kind}:{shard.index}/{shard.count}", retries=0)
def stage_shard_task(version: str, spec: InputSpec, shard: Shard, root: str, workers: int) -> dict:
    """Stage one shard (in a worker process when ``workers > 1``, so shards use all cores)."""
    if workers > 1:
        rec = shard_pool(workers).submit(stage_shard, version, spec, shard, Path(root)).result()
    else:
        rec = stage_shard(version, spec, shard, Path(root))
    rows = ", ".join(f"{t}={n:,}" for t, n in sorted(rec["rows"].items()))
    state = "already staged" if rec.get("skipped") else f"{rec['seconds']:.1f}s"
    line = f"  staged {Path(spec.path).name} [{shard.index + 1}/{shard.count}] {state}: {rows}"
    say(line)
    get_run_logger().debug(line)
    return rec


@task(name="merge_and_publish")
def merge_kb_task(plan: BuildPlan, root: str, shard_records: list[dict]) -> ArtifactRef:
    """Merge staged shards into the KB tables and publish the version (manifest last)."""
    log = get_run_logger()
    counts = merge_and_publish(
        plan, Path(root), extra_manifest={"shards": shard_records}, log=lambda m: log.info(m.strip())
    )
    return ArtifactRef(table="kb", version=plan.version, row_count=counts.get("entities", 0), extra=counts)


@task(name="refresh_catalog")
def refresh_catalog_task(root: str) -> str:
    """Rebuild catalog.duckdb views."""
    return str(refresh_catalog(Path(root)))


@task(name="publish_kb_artifact")
def publish_kb_artifact(version: str, root: str) -> None:
    """Markdown artifact with the KB's table counts and reject counts."""
    m = read_manifest(layout.kb_dir(version, Path(root))) or {}
    counts = m.get("row_counts", {})
    lines = [f"# KB `{version}`", "", "| table | rows |", "|---|---:|"]
    lines += [f"| {t} | {n:,} |" for t, n in sorted(counts.items())]
    lines += ["", f"Rejected records: **{counts.get('rejects', 0):,}**", "",
              f"Folder: `{layout.kb_dir(version, Path(root))}`"]
    create_markdown_artifact(markdown="\n".join(lines), key=f"kb-{version.lower().replace('.', '-')}"[:60],
                             description=f"KB build {version}")
