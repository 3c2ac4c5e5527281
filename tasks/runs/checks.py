"""The one check of a run's configuration, made by the plan and, before anything starts, by ``linkedqa run``.

It needs the method registry and the dataset registry, not the run machinery (backends, runtime, Parquet I/O), so
the command line can refuse a bad argument in about a second, before a Prefect server or an engine starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from storage import layout
from storage.catalog import complete_dataset_versions
from tasks.datasets.registry import UnknownDataset, dataset_task, known_datasets
from tasks.methods.registry import get_method
from tasks.runs.config import RunConfig


def check_run_config(cfg: RunConfig, root: Path | None = None) -> tuple[Any, BaseModel, str]:
    """Check a run's method, ``--set`` keys, dataset name and task kind.

    Returns:
        The method class, its parsed settings and the dataset's task kind.

    Raises:
        tasks.methods.registry.UnknownMethod, tasks.methods.base.UnknownSetting: Unknown method or setting.
        tasks.datasets.registry.UnknownDataset: A dataset neither registered nor imported into ``root``.
        storage.layout.LayoutError: A dataset name that is not a safe folder name.
    """
    method_cls = get_method(cfg.method)
    settings = method_cls.parse_settings(cfg.settings)
    layout.safe_name(cfg.dataset, "dataset name")
    if cfg.dataset not in known_datasets() and cfg.dataset not in {d for d, _, _ in complete_dataset_versions(root)}:
        raise UnknownDataset(cfg.dataset)
    task = dataset_task(cfg.dataset, root)
    method_cls.check_task(cfg.dataset, task)
    return method_cls, settings, task
