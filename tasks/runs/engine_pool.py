"""One LLM backend per process and config, wrapped in the persistent response cache.

The vLLM engine takes ~20 s to start on 2 CPU cores and its weights dominate memory, so every shard that runs
in a process reuses the same engine (keyed by backend name + engine config).
"""

from __future__ import annotations

import threading
from pathlib import Path

from storage import layout
from tasks.llm.backends import make_backend
from tasks.llm.cache import ResponseCache
from tasks.llm.types import EngineConfig, LLMBackend
from tasks.progress import phase

_BACKENDS: dict[tuple, LLMBackend] = {}
_LOCK = threading.Lock()


class _Serialized:
    """Serialise generate() calls: one engine must not be driven by two shard threads at once."""

    def __init__(self, inner: LLMBackend):
        self.inner = inner
        self.name = getattr(inner, "name", "llm")
        self.model_id = getattr(inner, "model_id", "")
        self.dtype = getattr(inner, "dtype", None)
        self._lock = threading.Lock()

    def generate(self, requests):
        with self._lock:
            return self.inner.generate(requests)

    def close(self) -> None:
        self.inner.close()


def engine_config(cfg) -> EngineConfig:
    """Engine config from a run config.

    Model, context length, dtype, endpoint and its API profile, and the HTTP timeout, retries and concurrency
    where given.
    """
    extra = {k: v for k, v in (("timeout_s", cfg.timeout_s), ("max_retries", cfg.max_retries),
                               ("dtype", cfg.dtype), ("max_concurrency", cfg.concurrency),
                               ("api", cfg.api if cfg.api in ("vllm", "openai") else None)) if v is not None}
    return EngineConfig(model=cfg.model, max_model_len=cfg.max_model_len, base_url=cfg.base_url, **extra)


def get_backend(cfg, root: Path | None = None) -> LLMBackend:
    """The process-wide backend for a run config (created on first use)."""
    engine = engine_config(cfg)
    key = (cfg.backend, engine.model_dump_json(), cfg.cache, str(root or layout.home()))
    with _LOCK:
        if key not in _BACKENDS:
            cache = ResponseCache(layout.cache_dir("llm", root) / "responses.sqlite") if cfg.cache else None
            if cfg.backend == "vllm":  # model preparation + engine start: up to minutes on a small CPU
                with phase(f"start the vLLM engine ({cfg.model})"):
                    inner = make_backend(cfg.backend, engine, cache=cache)
            else:
                inner = make_backend(cfg.backend, engine, cache=cache)
            _BACKENDS[key] = _Serialized(inner)
        return _BACKENDS[key]


def close_backends() -> None:
    """Shut down every engine this process started."""
    with _LOCK:
        for b in _BACKENDS.values():
            try:
                b.close()
            except Exception:  # noqa: BLE001 - best-effort shutdown
                pass
        _BACKENDS.clear()
