"""Cache wrapper: any backend + :class:`~tasks.llm.cache.ResponseCache`.

``generate`` looks every key up in one batched query, sends only the misses to the wrapped backend in ONE call
(identical requests in the same batch are sent once), stores the successful completions, and returns all
completions in request order, hits marked ``cached=True``. Errors are returned but never stored, so a re-run
retries exactly the failed items. Keys: ``ChatRequest.key(backend.name, backend.model_id)``.
"""

from __future__ import annotations

from tasks.llm.cache import ResponseCache
from tasks.llm.types import ChatRequest, Completion, LLMBackend


class CachedBackend:
    """Wraps ``backend`` with a persistent response cache.

    Args:
        backend: Any :class:`~tasks.llm.types.LLMBackend`.
        cache: The response cache (may be shared by several backends and processes).
    """

    def __init__(self, backend: LLMBackend, cache: ResponseCache):
        self.backend = backend
        self.cache = cache
        self.name = backend.name
        self.model_id = backend.model_id
        self.dtype = getattr(backend, "dtype", None)
        self.sent = 0
        self.served_from_cache = 0

    def __repr__(self) -> str:
        return f"CachedBackend({self.backend!r}, {self.cache!r})"

    def keys(self, requests: list[ChatRequest]) -> list[str]:
        """Cache keys of the requests, in order."""
        return [r.key(self.name, self.model_id) for r in requests]

    def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        """Serve hits from the cache, generate the misses in one backend call, store successes."""
        keys = self.keys(requests)
        hits = self.cache.get_many(keys)
        todo: dict[str, ChatRequest] = {}
        for key, req in zip(keys, requests, strict=True):
            if key not in hits and key not in todo:
                todo[key] = req
        fresh: dict[str, Completion] = {}
        if todo:
            outs = self.backend.generate(list(todo.values()))
            if len(outs) != len(todo):
                raise RuntimeError(
                    f"{self.backend!r} returned {len(outs)} completions for {len(todo)} requests"
                )
            fresh = dict(zip(todo.keys(), outs, strict=True))
            self.cache.put_many(list(fresh.items()))
            self.sent += len(todo)
        self.served_from_cache += sum(1 for k in keys if k in hits)
        return [hits[k] if k in hits else fresh[k] for k in keys]

    def close(self) -> None:
        """Close the wrapped backend (the cache stays open; it may be shared)."""
        self.backend.close()
