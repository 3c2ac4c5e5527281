"""Run configuration and plan: resolved inputs, the deterministic run id and the shard layout.

Inputs: CLI/flow parameters. Outputs: ``RunPlan`` (``storage.run_store``, frozen) persisted as ``plan.json``. The run id
is ``<method>-<dataset>-<split>-<hash8>`` over everything that changes predictions (method settings with
defaults, dataset version, KB version, backend, model, sampling, prompt templates, limit), so the same
command resumes/reuses a run and a different config never overwrites one.
"""

from __future__ import annotations

from pathlib import Path

from storage import layout
from storage.catalog import done_kb_versions, latest_kb_version
from storage.layout import INDEX_FORMAT
from storage.manifest import config_hash
from storage.run_store import RunConfig as RunConfig  # re-exported: the run machinery's vocabulary
from storage.run_store import RunPlan as RunPlan
from storage.run_store import RunStore

#: Part of every run id. Bump when a change alters what a run computes without changing its settings, prompts,
#: KB version or index format, so a finished run of the old code is not taken for one of the new.
#: 2: entity search sums query terms across label and aliases; same index files, other rankings.
#: 3: BM25 hits are ordered by score rounded to 4 decimals, then popularity (entities, titles), then row, over
#:    the whole group tied at the k-th score, not among tantivy's first k + 16
#:    (entities) or in tantivy's own order (titles, passages); 23 of 4,593 WebQSP-EL test mentions got another
#:    top-50 on the sample KB.
#: 4: the last tie-break of BM25 hits is the document's key (QID, title, passage id; shorter first, then by value),
#:    not its row: rows follow the KB tables' order, which DuckDB's parallel merge changes between builds of the
#:    same KB version (two cold sample builds: 1,261 of 1,603 WebQSP-EL test gold mentions got another top-50
#:    from entity-bm25, so the demo's ELA prompts and figures differed between cold runs).
#: 5: sampled requests keep their seeds on the CPU platform too (its engine prefills without chunks), so an
#:    answer does not depend on what the engine sampled for other requests.
#: 6: an EA-Agent Entity Alignment Tool or Reflector reply that names a shown candidate by its exact label (not its
#:    IRI; case-insensitive, underscores as spaces) is that candidate; a label two shown candidates share names none.
RUN_FORMAT = 6


# Fields that say how to reach the engine, not what is computed: not part of the run id, and taken from the
# current invocation when a stored plan is resumed (the endpoint may have moved, a timeout may need raising).
# The scheduler changes when requests reach the engine, not what they ask (greedy predictions are equal in
# float32; a bfloat16 engine's numerics depend on the batch, docs/concepts.md#engine-dtype-and-reproducibility).
# The dtype is hardware-dependent like the engine itself: the one each shard ran with is in its shard record
# (``engine_dtype`` in the manifest) and in the response-cache keys, and a resume whose engine runs another
# dtype than the finished shards' is refused (``tasks.runs.shard.check_engine_dtype``).
OPERATIONAL_FIELDS = ("base_url", "cache", "timeout_s", "max_retries", "api_key_block", "dtype", "scheduler",
                      "concurrency")


def resolve_kb(kb: str | None, root: Path | None = None) -> str | None:
    """Resolve ``--kb``: an exact version, the newest version whose name matches, or the newest overall."""
    versions = [v for v, _ in done_kb_versions(root)]
    if kb is None:
        return latest_kb_version(root)
    if kb in versions:
        return kb
    named = [v for v, m in done_kb_versions(root) if m.get("name") == kb]
    if named:
        return named[-1]
    available = ", ".join(versions) or "none (run linkedqa kb build)"
    raise LookupError(f"no published KB named {kb!r}; available: {available}")


def contiguous_shards(n_items: int, n_shards: int) -> list[tuple[int, int]]:
    """Split ``n_items`` sorted items into ``n_shards`` contiguous ``[start, end)`` slices (sizes differ by <= 1)."""
    n_shards = max(1, min(n_shards, max(1, n_items)))
    base, extra = divmod(n_items, n_shards)
    bounds, start = [], 0
    for i in range(n_shards):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def make_run_id(cfg: RunConfig, method_settings: dict, dataset_version: str, split: str,
                kb_version: str | None, hashes: dict[str, str], api_applied: dict | None = None) -> str:
    """Deterministic run id for a config (``api_applied``: what an HTTP server's API profile did, if any)."""
    body = {
        "format": RUN_FORMAT,
        "method": cfg.method,
        "settings": method_settings,
        "dataset": cfg.dataset,
        "dataset_version": dataset_version,
        "split": split,
        "limit": cfg.limit,
        "shards": cfg.shards,
        "backend": cfg.backend,
        "model": cfg.model,
        "max_model_len": cfg.max_model_len,
        "kb": kb_version,
        "prompts": hashes,
        "index_format": INDEX_FORMAT,
    }
    if api_applied is not None:
        body["api"] = api_applied
    return layout.safe_name(f"{cfg.method}-{cfg.dataset}-{split}-{config_hash(body)}", "run id")


def load_plan(run_id: str, root: Path | None = None) -> RunPlan:
    """Read ``runs/<run_id>/plan.json`` (``storage.run_store.RunStore.load_plan``)."""
    return RunStore(run_id, root).load_plan()


def run_is_done(run_id: str, root: Path | None = None) -> bool:
    """Whether the run is done (its manifest exists)."""
    return RunStore(run_id, root).is_done()
