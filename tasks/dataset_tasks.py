"""Prefect tasks that persist benchmark questions: thin wrappers over ``tasks.datasets``."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from storage.artifacts import ArtifactRef
from tasks.datasets.jsonl import DEFAULT_TASK
from tasks.datasets.store import store_dataset


@task(name="store_dataset", task_run_name="load {name}")
def load_dataset_task(name: str, data_root: str, import_file: str | None = None, task: str = DEFAULT_TASK
                      ) -> ArtifactRef:
    """Load a known dataset (or import a generic JSONL of task kind ``task``) into ``datasets/<name>/<version>/``."""
    return store_dataset(name, Path(data_root), Path(import_file) if import_file else None, task=task)
