"""Streaming sessions: submit requests at any time, collect completions as they finish.

The continuous runtime (``tasks.methods.runtime.run_agents_continuous``) submits an item's next request as soon
as its previous one returns, instead of waiting for a whole batch. It talks to a backend through a session:

* ``submit([(token, ChatRequest), ...])`` queues requests (pre-checks failing at once come back on the next
  ``poll``);
* ``poll()`` advances the backend and returns ``[(token, Completion), ...]`` for the requests finished since the
  last call (possibly none), in finishing order;
* ``busy`` says whether requests are still in flight; ``close()`` ends the session.

Sessions by backend:

* ``VLLMBackend``: the engine's own step API (``LLM.enqueue_chat`` renders the chat exactly as ``LLM.chat`` does,
  ``llm_engine.step()`` runs one scheduler iteration), so requests join the running batch between steps;
* ``CachedBackend``: hits are answered from the response cache without reaching the engine; misses go to the
  wrapped backend's session (identical requests in flight are sent once), successes are stored;
* any other backend (OpenAI-compatible HTTP): ``generate`` of one request at a time on a bounded thread pool
  (``EngineConfig.max_concurrency`` threads), the HTTP equivalent of continuous batching;
* ``BatchSession`` (``threads=0``): every ``poll`` sends all queued requests in one ``generate`` call; used for
  backends that are not thread-safe (the scripted test backend).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Hashable, Sequence
from typing import Any

from tasks.llm.cached import CachedBackend
from tasks.llm.scripted import ScriptedBackend
from tasks.llm.types import ChatRequest, Completion, LLMBackend
from tasks.llm.vllm_backend import VLLMBackend

log = logging.getLogger(__name__)

Item = tuple[Hashable, ChatRequest]


class BatchSession:
    """Queued requests go to ``backend.generate`` in one call per ``poll`` (lockstep underneath)."""

    def __init__(self, backend: LLMBackend):
        self.backend = backend
        self._queue: list[Item] = []

    @property
    def busy(self) -> bool:
        """Requests queued and not yet returned."""
        return bool(self._queue)

    def submit(self, items: Sequence[Item]) -> None:
        """Queue requests."""
        self._queue.extend(items)

    def poll(self) -> list[tuple[Hashable, Completion]]:
        """Generate every queued request in one backend call."""
        items, self._queue = self._queue, []
        if not items:
            return []
        try:
            outs = self.backend.generate([r for _, r in items])
        except Exception as exc:  # noqa: BLE001 - a crashing backend fails the requests, not the run
            outs = [Completion(error=f"backend error: {type(exc).__name__}: {exc}") for _ in items]
        if len(outs) != len(items):
            raise RuntimeError(f"backend returned {len(outs)} completions for {len(items)} requests")
        return [(tok, c) for (tok, _), c in zip(items, outs, strict=True)]

    def close(self) -> None:
        """Nothing to release."""


class ThreadSession:
    """One ``generate([request])`` per request on a bounded thread pool (HTTP backends)."""

    def __init__(self, backend: LLMBackend, threads: int):
        self.backend = backend
        self._pool = cf.ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="llm-stream")
        self._futures: dict[cf.Future, Hashable] = {}

    @property
    def busy(self) -> bool:
        """Requests in flight."""
        return bool(self._futures)

    def submit(self, items: Sequence[Item]) -> None:
        """Start one call per request (at most ``threads`` at once; the rest wait in the pool's queue)."""
        for tok, req in items:
            self._futures[self._pool.submit(self.backend.generate, [req])] = tok

    def poll(self, timeout: float = 0.05) -> list[tuple[Hashable, Completion]]:
        """Completions of the calls finished within ``timeout`` seconds (at least one when any is in flight)."""
        if not self._futures:
            return []
        done, _ = cf.wait(list(self._futures), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        out = []
        for fut in done:
            tok = self._futures.pop(fut)
            try:
                comps = fut.result()
                comp = comps[0] if len(comps) == 1 else Completion(error=f"backend returned {len(comps)} completions")
            except Exception as exc:  # noqa: BLE001 - a failing call fails its request
                comp = Completion(error=f"backend error: {type(exc).__name__}: {exc}")
            out.append((tok, comp))
        return out

    def close(self) -> None:
        """Wait for calls in flight and stop the pool."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _external_id(request_id: str) -> str:
    """The id a ``RequestOutput`` carries for a request ``LLM.enqueue_chat`` returned.

    vLLM makes the ids it returns unique by appending ``-<8 random characters>`` to ``LLM``'s counter value,
    while outputs carry the counter value itself (``external_req_id``).
    """
    head, sep, _tail = request_id.partition("-")
    return head if sep and head.isdigit() else request_id


class VLLMSession:
    """Continuous batching on the in-process vLLM engine through its step API."""

    def __init__(self, backend: Any):

        self.backend = backend
        self._inflight: dict[str, tuple[Hashable, float]] = {}
        self._ready: list[tuple[Hashable, Completion]] = []
        self._lock = backend._entry.lock
        if backend.llm.llm_engine.has_unfinished_requests():
            raise RuntimeError("the vLLM engine has unfinished requests from another caller")

    @property
    def busy(self) -> bool:
        """Requests in flight or answered and not yet returned."""
        return bool(self._inflight or self._ready)

    def submit(self, items: Sequence[Item]) -> None:
        """Pre-check (chat template, context length, sampling parameters) and enqueue into the running engine."""
        if not items:
            return
        b = self.backend
        with self._lock:
            idx, params, failed = b.precheck([r for _, r in items])
            self._ready += [(items[i][0], c) for i, c in failed.items()]
            ok = [items[i] for i in idx]
            if not ok:
                return
            now = time.perf_counter()
            ids = b.llm.enqueue_chat([[dict(m) for m in r.messages] for _, r in ok], params, use_tqdm=False)
            for rid, (tok, _) in zip(ids, ok, strict=True):
                self._inflight[_external_id(str(rid))] = (tok, now)

    def poll(self) -> list[tuple[Hashable, Completion]]:
        """Run one engine step; return the requests it finished (and any pre-check failures)."""
        out, self._ready = self._ready, []
        if not self._inflight:
            return out
        with self._lock:
            try:
                step_outputs = self.backend.llm.llm_engine.step()
            except Exception as exc:  # noqa: BLE001 - the engine failed: every request in flight fails
                self.backend._abort_leftovers()
                msg = f"engine error: {type(exc).__name__}: {exc}"
                out += [(tok, Completion(error=msg)) for tok, _ in self._inflight.values()]
                self._inflight.clear()
                return out
        now = time.perf_counter()
        for o in step_outputs:
            if not getattr(o, "finished", False) or str(o.request_id) not in self._inflight:
                continue
            tok, t0 = self._inflight.pop(str(o.request_id))
            comp = self.backend.completion(o, now - t0)
            out.append((tok, comp))
        if self._inflight and not self.backend.llm.llm_engine.has_unfinished_requests():
            # never spin on requests the engine no longer holds: fail them (a re-run retries them)
            msg = f"engine finished without answering {len(self._inflight)} request(s)"
            out += [(tok, Completion(error=msg)) for tok, _ in self._inflight.values()]
            self._inflight.clear()
        return out

    def close(self) -> None:
        """Abort requests still in flight (a stopped run), so they cannot leak into the next caller."""
        if self._inflight:
            with self._lock:
                self.backend._abort_leftovers()
            self._inflight.clear()


class CachedSession:
    """Response-cache hits answered at once; misses streamed through the wrapped backend's session."""

    def __init__(self, cached: Any, inner: Any):
        self.cached = cached
        self.inner = inner
        self._ready: list[tuple[Hashable, Completion]] = []
        self._waiting: dict[str, list[Hashable]] = {}  # cache key in flight -> tokens waiting for it

    @property
    def busy(self) -> bool:
        """Requests in flight or answered and not yet returned."""
        return bool(self._ready or self._waiting or self.inner.busy)

    def submit(self, items: Sequence[Item]) -> None:
        """Answer hits from the cache; send each distinct miss once."""
        if not items:
            return
        keys = self.cached.keys([r for _, r in items])
        hits = self.cached.cache.get_many(keys)
        send: list[Item] = []
        for (tok, req), key in zip(items, keys, strict=True):
            if key in hits:
                self._ready.append((tok, hits[key]))
                self.cached.served_from_cache += 1
            elif key in self._waiting:
                self._waiting[key].append(tok)
            else:
                self._waiting[key] = [tok]
                send.append((key, req))
        if send:
            self.cached.sent += len(send)
            self.inner.submit(send)

    def poll(self) -> list[tuple[Hashable, Completion]]:
        """Cache hits, then what the wrapped session finished (successes stored in the cache)."""
        out, self._ready = self._ready, []
        fresh = self.inner.poll()
        ok = [(key, comp) for key, comp in fresh if not comp.error]
        if ok:
            self.cached.cache.put_many(ok)
        for key, comp in fresh:
            out += [(tok, comp) for tok in self._waiting.pop(key, [])]
        return out

    def close(self) -> None:
        """Close the wrapped session."""
        self.inner.close()


class _Locked:
    """A session holding a serialising lock for its lifetime (one shard drives the engine at a time)."""

    def __init__(self, inner: Any, lock: threading.Lock):
        self.inner = inner
        self._lock = lock

    @property
    def busy(self) -> bool:
        """Requests in flight."""
        return self.inner.busy

    def submit(self, items: Sequence[Item]) -> None:
        """See the module docstring."""
        self.inner.submit(items)

    def poll(self) -> list[tuple[Hashable, Completion]]:
        """See the module docstring."""
        return self.inner.poll()

    def close(self) -> None:
        """Close the session and release the lock."""
        try:
            self.inner.close()
        finally:
            self._lock.release()


def open_session(backend: Any, threads: int | None = None) -> Any:
    """A streaming session over ``backend`` (see the module docstring for which kind each backend gets).

    Args:
        backend: A backend, possibly wrapped by ``CachedBackend`` and the run machinery's serialising wrapper.
        threads: Concurrency of the thread session for HTTP backends (default: the engine's
            ``max_concurrency``, else 16); 0 forces a ``BatchSession``.
    """
    lock = getattr(backend, "_lock", None)
    if lock is not None and hasattr(backend, "inner"):  # tasks.runs.engine_pool._Serialized
        lock.acquire()
        try:
            return _Locked(open_session(backend.inner, threads), lock)
        except BaseException:
            lock.release()
            raise
    if isinstance(backend, CachedBackend):
        return CachedSession(backend, open_session(backend.backend, threads))
    if isinstance(backend, VLLMBackend):
        return VLLMSession(backend)
    if threads == 0 or isinstance(backend, ScriptedBackend):
        return BatchSession(backend)
    n = threads if threads is not None else getattr(getattr(backend, "engine", None), "max_concurrency", 16)
    return ThreadSession(backend, int(n or 16))
