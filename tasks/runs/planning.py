"""Plan a run: resolve its config into a ``RunPlan`` (run id, questions, shards) and store ``plan.json``.

The first phase of ``linkedqa run`` (then ``tasks.runs.shard``, ``tasks.runs.finalize``); ``tasks.runs.evaluate``
recomputes a finished run. The run folder is ``storage.run_store.RunStore``'s.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from storage.run_store import RunStore
from tasks.datasets.store import latest_dataset_folder, store_dataset
from tasks.runs.checks import check_run_api, check_run_config
from tasks.runs.config import OPERATIONAL_FIELDS, RunConfig, RunPlan, contiguous_shards, make_run_id, resolve_kb


def load_questions(dataset: str, split: str | None, root: Path | None = None,
                   data_root: Path | None = None) -> tuple[list[dict], str, str]:
    """Questions of a dataset split, sorted by id (loading the dataset into the warehouse if needed).

    Returns:
        (rows, dataset_version, split)
    """
    folder = latest_dataset_folder(dataset, root)
    if folder is None:
        store_dataset(dataset, data_root or layout.data_root(), root=root)
        folder = latest_dataset_folder(dataset, root)
    manifest = read_manifest(folder) or {}
    splits = manifest.get("splits", {})
    if split is None:
        split = "test" if "test" in splits else sorted(splits)[0]
    if split not in splits:
        raise LookupError(f"dataset {dataset!r} has no split {split!r}; splits: {', '.join(sorted(splits))}")
    tbl = read_table(folder / "questions", "questions")
    tbl = tbl.filter(pc.equal(tbl["split"], split))
    rows = sorted(tbl.to_pylist(), key=lambda r: r["question_id"])
    return rows, folder.name, split


def plan_run(cfg: RunConfig, root: Path | None = None, data_root: Path | None = None) -> RunPlan:
    """Resolve a run config into a plan and persist ``plan.json`` (idempotent).

    Raises:
        tasks.methods.registry.UnknownMethod, tasks.methods.base.UnknownSetting, LookupError: Bad inputs
            (:func:`tasks.runs.checks.check_run_config`; no KB, no questions).
    """
    method_cls, settings, task = check_run_config(cfg, root)
    cfg, api_applied = check_run_api(cfg, settings)
    needs_kb = method_cls.needs_kb_for(task)
    kb_version = resolve_kb(cfg.kb, root) if needs_kb else None
    if needs_kb and kb_version is None:
        raise LookupError("no KB built yet: run `linkedqa kb build --sample` first")
    rows, ds_version, split = load_questions(cfg.dataset, cfg.split, root, data_root)
    if cfg.limit is not None:
        rows = rows[: cfg.limit]
    if not rows:
        raise LookupError(f"no questions in {cfg.dataset}/{split}")
    hashes = method_cls.prompt_hashes(task)
    settings_dump = settings.model_dump(mode="json")
    run_id = make_run_id(cfg, settings_dump, ds_version, split, kb_version, hashes, api_applied)
    ids = [r["question_id"] for r in rows]
    plan = RunPlan(run_id=run_id, config=cfg, method_settings=settings_dump, dataset_version=ds_version,
                   split=split, kb_version=kb_version, question_ids=ids,
                   shard_bounds=contiguous_shards(len(ids), cfg.shards), prompt_hashes=hashes,
                   api_applied=api_applied)
    store = RunStore(run_id, root)
    old = store.read_plan()
    if old is not None:
        if old.question_ids != plan.question_ids:
            raise RuntimeError(f"run {run_id}: stored plan has different questions; remove {store.folder} to "
                               "restart")
        current = {k: getattr(cfg, k) for k in OPERATIONAL_FIELDS}
        return old.model_copy(update={"config": old.config.model_copy(update=current)})
    store.write_plan(plan)
    return plan


def plan_questions(plan: RunPlan, root: Path | None = None, start: int = 0, end: int | None = None) -> list[dict]:
    """The plan's questions ``question_ids[start:end]`` (a shard, or all of them), in plan order."""
    folder = layout.dataset_dir(plan.config.dataset, plan.dataset_version, root)
    tbl = read_table(folder / "questions", "questions")
    by_id = {r["question_id"]: r for r in tbl.filter(pc.equal(tbl["split"], plan.split)).to_pylist()}
    return [by_id[q] for q in plan.question_ids[start:end]]
