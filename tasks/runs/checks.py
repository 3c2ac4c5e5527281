"""The one check of a run's configuration, made by the plan and, before anything starts, by ``linkedqa run``.

It needs the method registry and the dataset registry, not the run machinery (backends, runtime, Parquet I/O), so
the command line can refuse a bad argument in about a second, before a Prefect server or an engine starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from storage import layout
from storage.catalog import done_dataset_versions
from tasks.datasets.registry import UnknownDataset, dataset_task, known_datasets
from tasks.llm.api import applied_api, check_model_served, probe_server, resolve_api
from tasks.llm.models import model_label
from tasks.llm.types import EngineConfig
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
    if cfg.dataset not in known_datasets() and cfg.dataset not in {d for d, _, _ in done_dataset_versions(root)}:
        raise UnknownDataset(cfg.dataset)
    task = dataset_task(cfg.dataset, root)
    method_cls.check_task(cfg.dataset, task)
    method_cls.check_inputs(settings, cfg.dataset, root)
    return method_cls, settings, task


def check_run_api(cfg: RunConfig, settings: BaseModel) -> tuple[RunConfig, dict | None]:
    """Check an HTTP server before the first item (``--backend openai``; ``tasks.llm.api``).

    It asks the server what it serves, resolves ``--api auto``, checks the model is served and what the method's
    settings need of the API.

    Returns:
        The config with its ``api`` resolved, and what the profile does to the method's requests (None for the
        in-process engine).

    Raises:
        tasks.llm.api.ApiError: Unreachable server, a refused key, an unserved model, a setting the API cannot honour.
        ValueError: ``--api`` without ``--backend openai``, or no ``--base-url``.
    """
    if cfg.backend != "openai":
        if cfg.api is not None:
            raise ValueError(f"--api applies to --backend openai, not to --backend {cfg.backend}")
        return cfg, None
    if not cfg.base_url:
        raise ValueError("--backend openai needs --base-url, e.g. http://127.0.0.1:8000/v1")
    info = probe_server(cfg.base_url, EngineConfig().api_key_env)
    api = resolve_api(cfg.api or "auto", info)
    check_model_served(model_label(cfg.model), info)
    return cfg.model_copy(update={"api": api}), applied_api(api, settings)
