"""One run folder (``runs/<run_id>/``): its paths, its typed records, its done rules and its tables.

The run machinery computes; this module is the only place that knows where a run's files are and what its JSON
records hold. Layout::

    plan.json                                  RunPlan, written first (storage.done marker)
    shards/shard-00003.json                    ShardRecord of shard 3, written before its part
    predictions/part-00003-of-00008.parquet    shard 3's rows: its existence marks the shard done
    metrics/part-00000-of-00001.parquet        summary + efficiency metrics
    stages/part-00000-of-00001.parquet         each scored item's failure stage
    runs/part-00000-of-00001.parquet           the run's row of the ``runs`` table
    manifest.json                              RunManifest, written last: the run is done

Done rules: a run is planned when ``plan.json`` exists, a shard is done when its predictions part exists (its
record may be missing: it then reads as an empty :class:`ShardRecord`), and the run is done when its manifest
exists. Every write is atomic (``storage.parquet_io.write_table``, ``storage.manifest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from storage import layout
from storage.done import is_done, mark_done, read_done, read_json
from storage.manifest import manifest_done, read_manifest, write_json_atomic, write_manifest
from storage.parquet_io import part_files, read_table, remove_temp_files, write_table

#: The tables a run folder holds, one folder each.
RUN_TABLES = ("predictions", "metrics", "stages", "runs")


class PredictionRow(TypedDict):
    """One row of a run's ``predictions`` table: the columns of ``storage.schemas.PREDICTIONS``, in its order."""

    run_id: str
    method: str
    dataset: str
    split: str
    question_id: str
    shard: int
    predicted_entities: list[str]
    answer: str
    answers: list[str]
    trajectory: str
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None
    scores: dict[str, float] | None


#: The columns a prediction row takes as they are from the runtime's output of its item (``ItemOutput``).
ITEM_COLUMNS = ("question_id", "predicted_entities", "answer", "trajectory", "llm_calls", "prompt_tokens",
                "completion_tokens", "latency_s", "error")


class RunConfig(BaseModel):
    """What the user asked for (``linkedqa run METHOD ...``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str
    dataset: str
    split: str | None = None
    limit: int | None = None
    shards: int = Field(default=1, ge=1, le=10_000)
    backend: str = "vllm"
    model: str = "embedded"
    kb: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    max_model_len: int = 4096
    base_url: str | None = None
    cache: bool = True
    timeout_s: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0)
    api_key_block: str | None = None
    #: ``--backend openai``: the server's profile (``tasks.llm.api``): ``auto`` (ask the server), ``vllm`` or
    #: ``openai``; a planned run holds the resolved profile. None with the in-process vLLM engine.
    api: str | None = Field(default=None, pattern="^(auto|vllm|openai)$")
    #: ``--backend openai``: requests in flight at once (None: ``EngineConfig.max_concurrency``).
    concurrency: int | None = Field(default=None, ge=1)
    dtype: str | None = None  # engine dtype; None = auto (tasks.llm.env.resolve_dtype)
    #: How a shard's items share the engine: ``continuous`` (an item's next call is submitted as soon as its
    #: previous one returns; tasks.methods.runtime.run_agents_continuous) or ``lockstep`` (one batch per step).
    scheduler: str = Field(default="continuous", pattern="^(continuous|lockstep)$")


class RunPlan(BaseModel):
    """A resolved run: ``plan.json``."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    config: RunConfig
    method_settings: dict
    dataset_version: str
    split: str
    kb_version: str | None
    question_ids: list[str]
    shard_bounds: list[tuple[int, int]]
    prompt_hashes: dict[str, str]
    #: ``--backend openai``: what the server's API profile does to the method's requests
    #: (``tasks.llm.api.applied_api``); part of the run id. None with the in-process engine.
    api_applied: dict | None = None

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return len(self.shard_bounds)


class ShardRecord(BaseModel):
    """What one shard's execution cost: ``shards/shard-NNNNN.json``, and its entry in the manifest.

    Every field has a default: a done shard whose record is missing (killed between its part and its record is
    impossible, the record comes first; but a record may be deleted) reads as the empty record, and records of
    older runs lack the fields added since. Only the fields a record holds are written back (``dump``).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    shard: int | None = None
    rows: int = 0
    errors: int = 0
    setup_s: float = 0.0
    wall_s: float = 0.0
    llm_seconds: float = 0.0
    tool_seconds: float = 0.0
    non_llm_seconds: float = 0.0
    steps: int = 0
    llm_batches: int = 0
    llm_requests: int = 0
    cached_calls: int = 0
    peak_rss_mb: float = 0.0
    #: The engine's dtype (None: a shard without an in-process engine).
    engine_dtype: str | None = None
    scheduler: str | None = None
    pid: int | None = None
    finished_at: str = ""
    #: Set only on the record ``tasks.runs.shard.execute_shard`` returns for a shard an earlier attempt finished
    #: (never stored).
    skipped: bool = False

    def dump(self) -> dict[str, Any]:
        """The record as stored: the fields it was given, in the JSON types."""
        return self.model_dump(mode="json", exclude_unset=True)


class RunManifest(BaseModel):
    """``manifest.json``, written last: what a done run computed and how (the ``storage.manifest`` marker)."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    kind: str = "run"
    run_id: str
    config: dict[str, Any]
    method_settings: dict[str, Any]
    dataset_version: str
    kb_version: str | None = None
    prompt_hashes: dict[str, str] = Field(default_factory=dict)
    row_counts: dict[str, int] = Field(default_factory=dict)
    n_errors: int = 0
    shards: list[ShardRecord] = Field(default_factory=list)
    started_at: str = ""
    wall_s: float = 0.0
    #: The metric rules the stored values follow (``tasks.metrics.base.METRICS_FORMAT``; 1 before it was recorded).
    metrics_format: int = 1
    #: The formats the metrics were stored under before a ``linkedqa eval --write``, with when they were replaced.
    metrics_history: list[dict[str, Any]] = Field(default_factory=list)
    table_schema: dict[str, list[str]] = Field(default_factory=dict, alias="schema")
    git_sha: str | None = None
    written_at: str | None = None

    def dump(self) -> dict[str, Any]:
        """The manifest as stored (``schema`` under its own name, shard records as they were given)."""
        body = self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"shards"})
        if "shards" in self.model_fields_set:
            body["shards"] = [s.dump() for s in self.shards]
        return body


@dataclass(frozen=True)
class RunStore:
    """The folder of one run under a ``LINKEDQA_HOME``.

    Attributes:
        run_id: The run id (checked safe as a folder name).
        root: ``LINKEDQA_HOME`` (default: ``storage.layout.home()``).
    """

    run_id: str
    root: Path | None = None

    def __post_init__(self) -> None:
        layout.safe_name(self.run_id, "run id")

    # ------------------------------------------------------------------------------------------------ paths
    @property
    def folder(self) -> Path:
        """``runs/<run_id>/``."""
        return layout.run_dir(self.run_id, self.root)

    def table_dir(self, table: str) -> Path:
        """The folder of one of the run's tables (:data:`RUN_TABLES`)."""
        if table not in RUN_TABLES:
            raise ValueError(f"a run holds no table {table!r}; its tables: {', '.join(RUN_TABLES)}")
        return self.folder / table

    def shard_part(self, i: int, n: int) -> Path:
        """Predictions part of shard ``i`` of ``n``."""
        return layout.run_shard_part(self.run_id, i, n, self.root)

    def shard_record_path(self, i: int) -> Path:
        """Record of shard ``i``."""
        return layout.run_shard_record(self.run_id, i, self.root)

    # ------------------------------------------------------------------------------------------------- plan
    def read_plan(self) -> RunPlan | None:
        """The stored plan, or None before the run is planned."""
        stored = read_done(self.folder, layout.PLAN)
        return None if stored is None else RunPlan.model_validate(stored)

    def load_plan(self) -> RunPlan:
        """The stored plan.

        Raises:
            LookupError: The run was never planned (an unknown run id).
        """
        plan = self.read_plan()
        if plan is None:
            raise LookupError(f"unknown run {self.run_id!r}: {self.folder / layout.PLAN} not found")
        return plan

    def is_planned(self) -> bool:
        """Whether ``plan.json`` exists."""
        return is_done(self.folder, layout.PLAN)

    def write_plan(self, plan: RunPlan) -> None:
        """Write ``plan.json`` (the run folder's first file)."""
        mark_done(self.folder, plan.model_dump(mode="json"), layout.PLAN)

    # ----------------------------------------------------------------------------------------------- shards
    def shard_done(self, i: int, n: int) -> ShardRecord | None:
        """Shard ``i``'s record when the shard is done (its predictions part exists), else None."""
        part = self.shard_part(i, n)
        if not is_done(part.parent, part.name):
            return None
        return ShardRecord.model_validate(read_json(self.shard_record_path(i)) or {})

    def write_shard(self, i: int, n: int, record: ShardRecord, rows: list[PredictionRow]) -> None:
        """Write shard ``i``'s record, then, last, its predictions part (each atomically)."""
        write_json_atomic(self.shard_record_path(i), record.dump())
        write_table(rows, "predictions", self.shard_part(i, n))

    def prediction_parts(self) -> list[Path]:
        """The done shards' predictions parts, in shard order."""
        return part_files(self.table_dir("predictions"))

    # ----------------------------------------------------------------------------------------------- tables
    def has_table(self, table: str) -> bool:
        """Whether the run stored ``table``."""
        return self.table_dir(table).is_dir()

    def read_table(self, table: str, columns: list[str] | None = None) -> pa.Table:
        """One of the run's tables, every part (raises when the run has not stored it)."""
        return read_table(self.table_dir(table), table, columns)

    def write_table(self, table: str, rows: list[dict[str, Any]]) -> Path:
        """Write a one-part table (``metrics``, ``stages``, ``runs``), atomically replacing an older part."""
        return write_table(rows, table, self.table_dir(table) / layout.part_name(0, 1))

    def remove_temp_files(self) -> list[Path]:
        """Delete the temp files of killed writers (only safe once every shard is done); the removed paths."""
        return remove_temp_files(self.folder)

    # --------------------------------------------------------------------------------------------- manifest
    def read_manifest(self) -> RunManifest | None:
        """The manifest, or None while the run is not done."""
        stored = read_manifest(self.folder)
        return None if stored is None else RunManifest.model_validate(stored)

    def is_done(self) -> bool:
        """Whether the run is done (its manifest exists)."""
        return manifest_done(self.folder)

    def write_manifest(self, manifest: RunManifest) -> None:
        """Write the manifest, the run folder's last file."""
        write_manifest(self.folder, manifest.dump())
