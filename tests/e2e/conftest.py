"""E2E fixtures: ONE real vLLM engine (embedded model) for the whole test session.

The embedded model is converted once (~65 s, 1.27 GB) into a persistent folder, reused by every later test
run: ``$LINKEDQA_MODELS_CACHE`` when set, else ``<repo>/warehouse/models`` (git-ignored; the same place
``make demo`` uses with the default ``LINKEDQA_HOME``). vLLM / torch-inductor caches go to
``<repo>/warehouse/cache``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import layout


@pytest.fixture(scope="session")
def embedded_models_root() -> Path:
    """Persistent models root shared by test runs (see the module docstring)."""
    env = os.environ.get("LINKEDQA_MODELS_CACHE")
    return Path(env).resolve() if env else layout.models_root(layout.REPO_ROOT / "warehouse")


@pytest.fixture(scope="session")
def embedded_llm(embedded_models_root: Path) -> Iterator:
    """The embedded model on a real in-process vLLM engine (``max_model_len=4096``), shared by the session."""
    from tasks.llm.env import configure_runtime_env

    configure_runtime_env(layout.REPO_ROOT / "warehouse")  # before vllm is imported
    from tasks.llm.models import prepare_embedded_model
    from tasks.llm.types import EngineConfig
    from tasks.llm.vllm_backend import VLLMBackend

    prepare_embedded_model(embedded_models_root)
    backend = VLLMBackend(EngineConfig(max_model_len=4096), models_root=embedded_models_root)
    yield backend
    backend.close()
