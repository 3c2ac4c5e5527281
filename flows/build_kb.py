"""Flow ``build_kb``: plan -> one task per shard -> merge -> manifest -> catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from storage import layout
from storage.artifacts import ArtifactRef
from storage.manifest import read_manifest
from tasks.kb.plan import BuildPlan
from tasks.kb.pool import shutdown_pool
from tasks.kb_tasks import (
    merge_kb_task,
    plan_kb_task,
    publish_kb_artifact,
    refresh_catalog_task,
    stage_shard_task,
)


@flow(name="build_kb", task_runner=ThreadPoolTaskRunner(max_workers=4))
def build_kb(plan: BuildPlan, workers: int = 1, keep_staging: bool = False) -> ArtifactRef:
    """Build (or resume, or skip) one KB version.

    Args:
        plan: Resolved plan (``tasks.kb.plan.make_plan``).
        workers: Worker processes for shards (1 = in the flow's process).
        keep_staging: Keep per-shard intermediates after publishing.

    Returns:
        Reference to the published version.
    """
    root = str(layout.home())
    vdir = layout.kb_dir(plan.version)
    done = read_manifest(vdir)
    if done is not None:
        print(f"KB {plan.version} already built: nothing to do")
        refresh_catalog_task(root)
        return ArtifactRef(table="kb", version=plan.version, row_count=done["row_counts"].get("entities", 0),
                           extra=done["row_counts"])
    pairs = [(spec, shard) for spec in plan.inputs for shard in spec.shards]
    print(f"KB {plan.version}: {len(plan.inputs)} inputs, {len(pairs)} shards, {workers} worker(s)")
    try:
        futures = [stage_shard_task.submit(plan.version, s, sh, root, workers) for s, sh in pairs]
        records = [f.result() for f in futures]
    except BaseException:
        shutdown_pool()  # waits: the running shards end (kept for the re-run) before the error is reported
        raise
    shutdown_pool(wait=False)  # every shard staged: the workers' exit overlaps the merge
    ref = merge_kb_task(plan, root, records)
    if not keep_staging:
        shutil.rmtree(Path(vdir) / "_staging", ignore_errors=True)
    refresh_catalog_task(root)
    publish_kb_artifact(plan.version, root)
    return ref


@flow(name="build_kb_from_inputs")
def build_kb_from_inputs(sample: bool = True, name: str | None = None, wikidata: list[str] | None = None,
                         truthy: list[str] | None = None, kgtk: list[str] | None = None,
                         triples: list[str] | None = None, wikipedia: list[str] | None = None,
                         properties: list[str] | None = None, title_maps: list[str] | None = None,
                         shards_per_file: int = 1, workers: int = 1, languages: str | None = None) -> ArtifactRef:
    """Plan a KB from its inputs by kind, then ``build_kb`` as a subflow (``linkedqa kb build`` and deployments).

    Args:
        sample: Build the sample KB from every real file under ``LINKEDQA_DATA`` (the input lists are ignored).
        name: KB name (default ``sample`` for the sample KB, else the dump date in the first file name).
        wikidata: Wikidata JSON dumps / Special:EntityData files.
        truthy: Wikidata truthy N-Triples.
        kgtk: KGTK TSV files or folders.
        triples: ``subject<TAB>property<TAB>object`` files.
        wikipedia: pages-articles XML (``.bz2``).
        properties: ``properties.json(.gz)`` label lists.
        title_maps: ``QID;title;url`` maps.
        shards_per_file: Byte shards per line file and per pages-articles XML file (plain, .gz or .bz2: a
            compressed one is split over its decompressed bytes); an ``.xz`` XML file, which cannot be cut by
            byte range, gets at most ``workers`` of them (each of its shards decompresses the whole file).
        workers: Worker processes: one pool for every input's shards.
        languages: Label languages to keep, comma-separated (``en,mul``) or ``all``; default ``all`` for the
            sample KB, ``en,mul`` (``tasks.kb.plan.DEFAULT_LANGUAGES``) otherwise. Part of the KB version.

    Returns:
        Reference to the published version (``extra``: row counts per table).
    """
    inputs = {"wikidata": wikidata or [], "truthy": truthy or [], "kgtk": kgtk or [], "triples": triples or [],
              "wikipedia": wikipedia or [], "properties": properties or [], "title_maps": title_maps or []}
    plan = plan_kb_task(sample, name, inputs, shards_per_file, languages, workers)
    return build_kb(plan, workers=workers)
