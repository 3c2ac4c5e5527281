"""OpenAI-compatible HTTP backend (``vllm serve``, hosted APIs): ``POST <base>/chat/completions`` via httpx.

* ``base_url``: ``http://host:port`` or ``http://host:port/v1`` (``/v1`` is appended when missing).
* API key: read once from the environment variable named by ``EngineConfig.api_key_env`` and sent as
  ``Authorization: Bearer ...``; it is kept only inside the HTTP client's headers, never in an attribute,
  ``repr``, log line or manifest. No variable set -> no Authorization header (fine for a local
  ``vllm serve``).
* Bounded concurrency: a thread pool of ``max_concurrency`` workers shares one connection-pooled client.
* Retries: 429, 5xx, timeouts and connection errors are retried ``max_retries`` times with exponential backoff
  (``backoff_s * 2**attempt``, jittered, capped; a ``Retry-After`` header is honoured up to the cap). Other
  4xx and malformed responses fail at once. ``timeout_s`` bounds each attempt's wall time (a server that
  never answers, or trickles bytes, times out), so one item takes at most about
  ``(max_retries + 1) * timeout_s`` plus backoff. After the last try the item gets ``Completion(error=...)``; the
  batch goes on.
* Payload (:func:`tasks.llm.api.request_payload`), by the server's profile ``EngineConfig.api``:
  ``vllm``: ``model, messages, temperature, top_p, max_tokens, seed``, ``stop`` when non-empty,
  ``repetition_penalty`` when != 1.0 and, for a constrained request (the methods' ``guided=true``), vLLM's
  ``structured_outputs`` field; ``openai`` (the public API's strict form): the documented fields only, the length
  limit as ``max_completion_tokens``, at most four stop sequences (the others cut the text here). What a method's
  settings need of the API is checked before a run starts (:func:`tasks.llm.api.applied_api`).
* ``model``: ``EngineConfig.model``, sent as given; ``"embedded"`` is sent as the slug
  ``qwen2.5-coder-0.5b-instruct``. ``linkedqa run`` checks it against the server's ``GET /v1/models`` first.
"""

from __future__ import annotations

import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tasks.llm.api import ApiError, apply_stops, request_payload
from tasks.llm.models import model_label
from tasks.llm.types import ChatRequest, Completion, EngineConfig

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def chat_url(base_url: str) -> str:
    """``<base>/v1/chat/completions`` from a base URL with or without the ``/v1`` suffix."""
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


class OpenAIBackend:
    """Chat completions against any OpenAI-compatible endpoint.

    Args:
        engine: ``base_url`` (required), ``model``, ``api_key_env``, ``timeout_s``, ``max_concurrency``,
            ``max_retries`` are used.
        backoff_s: First backoff delay; doubles per retry.
        max_backoff_s: Cap of one backoff delay (also caps ``Retry-After``).
        transport: Optional httpx transport (tests).

    Raises:
        ValueError: ``engine.base_url`` is not set.
    """

    name = "openai"

    def __init__(
        self,
        engine: EngineConfig,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ):
        if not engine.base_url:
            raise ValueError("the openai backend needs EngineConfig.base_url (e.g. http://127.0.0.1:8000/v1)")
        self.engine = engine
        self.model_id = model_label(engine.model)
        # the strict profile sends other requests for the same sampling: its responses are cached apart
        self.name = "openai" if engine.api == "vllm" else f"openai-{engine.api}"
        self.url = chat_url(engine.base_url)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(engine.api_key_env)
        self.has_api_key = bool(key)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        del key
        limits = httpx.Limits(
            max_connections=engine.max_concurrency, max_keepalive_connections=engine.max_concurrency
        )
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(engine.timeout_s), limits=limits, transport=transport
        )
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, engine.max_concurrency), thread_name_prefix="openai"
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(url={self.url!r}, model={self.model_id!r}, api={self.engine.api!r}, "
            f"api_key_env={self.engine.api_key_env!r}, api_key={'set' if self.has_api_key else 'unset'}, "
            f"max_concurrency={self.engine.max_concurrency})"
        )

    __str__ = __repr__

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass
        base = min(self.backoff_s * (2**attempt), self.max_backoff_s)
        return base * (0.5 + random.random() / 2)

    def _one(self, req: ChatRequest) -> Completion:
        t0 = time.perf_counter()
        try:
            body = request_payload(req, self.model_id, self.engine.api)
        except ApiError as exc:
            return Completion(error=str(exc))
        last = "no attempt"
        for attempt in range(self.engine.max_retries + 1):
            retry_after = None
            try:
                resp = self._post(body)
            except httpx.TimeoutException as e:
                last = f"timeout after {self.engine.timeout_s:g} s ({type(e).__name__})"
            except httpx.TransportError as e:
                last = f"connection error: {type(e).__name__}: {e}"
            else:
                if resp.status_code == 200:
                    return self._parse(resp, time.perf_counter() - t0, req.sampling.stop[len(body.get("stop", ())):])
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in RETRY_STATUS:
                    break
                retry_after = resp.headers.get("retry-after")
            if attempt < self.engine.max_retries:
                delay = self._delay(attempt, retry_after)
                log.debug("retry %d/%d in %.2f s: %s", attempt + 1, self.engine.max_retries, delay, last)
                time.sleep(delay)
        return Completion(error=last, latency_s=time.perf_counter() - t0)

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        """One attempt, bounded in total by ``timeout_s``.

        httpx's timeouts bound each connect/read separately, so a server that trickles a byte now and then would
        hold an attempt forever; the body is read in chunks against a wall-clock deadline instead.

        Raises:
            httpx.TimeoutException: No complete response within ``timeout_s`` (or a single read took that long).
        """
        deadline = time.monotonic() + self.engine.timeout_s
        with self._client.stream("POST", self.url, json=body) as resp:
            chunks = []
            for chunk in resp.iter_raw():  # raw: the new Response below decodes (gzip) as usual
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("response not complete within the deadline")
            return httpx.Response(resp.status_code, headers=resp.headers, content=b"".join(chunks),
                                  request=resp.request)

    def _parse(self, resp: httpx.Response, latency: float, unsent_stops: tuple[str, ...] = ()) -> Completion:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = apply_stops(choice["message"].get("content") or "", unsent_stops)
            usage = data.get("usage") or {}
            return Completion(
                text=text,
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                latency_s=latency,
                finish_reason=choice.get("finish_reason"),
                prefix_cached_tokens=int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            return Completion(
                error=f"malformed response: {type(e).__name__}: {resp.text[:200]}", latency_s=latency
            )

    def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        """Send all requests concurrently (at most ``max_concurrency`` in flight), results in order."""
        return list(self._pool.map(self._one, requests))

    def close(self) -> None:
        """Stop the worker threads and close the HTTP connections."""
        self._pool.shutdown(wait=True)
        self._client.close()
