"""Backend registry: name -> class, and :func:`make_backend`.

Every backend class takes the :class:`~tasks.llm.types.EngineConfig` as ``engine`` plus its own keyword
arguments; importing this module imports neither vLLM nor torch (the vLLM backend imports vLLM when it
starts an engine).
"""

from __future__ import annotations

from typing import Any

from tasks.llm.cache import ResponseCache
from tasks.llm.cached import CachedBackend
from tasks.llm.openai_backend import OpenAIBackend
from tasks.llm.scripted import ScriptedBackend
from tasks.llm.types import EngineConfig, LLMBackend
from tasks.llm.vllm_backend import VLLMBackend

BACKENDS: dict[str, type] = {
    "vllm": VLLMBackend,
    "openai": OpenAIBackend,
    "scripted": ScriptedBackend,
}


class UnknownBackendError(ValueError):
    """A backend name that is not in :data:`BACKENDS`."""


def make_backend(
    name: str, engine: EngineConfig | None = None, cache: ResponseCache | None = None, **kw: Any
) -> LLMBackend:
    """Build a backend by name.

    Args:
        name: ``vllm``, ``openai`` or ``scripted``.
        engine: Engine config (default ``EngineConfig()``: the embedded model).
        cache: When given, wrap the backend in :class:`~tasks.llm.cached.CachedBackend`.
        **kw: Backend-specific arguments (``script=...`` for scripted, ``backoff_s=...`` for openai,
            ``models_root=...`` / ``llm_kwargs=...`` for vllm).

    Returns:
        The backend (cached when ``cache`` is given).

    Raises:
        UnknownBackendError: Unknown name; the message lists the valid names.
    """
    try:
        cls = BACKENDS[name]
    except KeyError:
        raise UnknownBackendError(
            f"unknown LLM backend {name!r}; valid backends: {', '.join(sorted(BACKENDS))}"
        ) from None
    backend = cls(engine=engine or EngineConfig(), **kw)
    return CachedBackend(backend, cache) if cache is not None else backend
