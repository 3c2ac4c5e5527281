"""Loopback HTTP servers that answer like OpenAI-compatible APIs, for the tests of ``--backend openai``.

* :class:`ModelList`: a handler mix-in that serves ``GET /v1/models`` (the list ``linkedqa run`` reads before the
  first item), with the served names and the owner a vLLM server (``vllm``) or the public API (``openai``,
  ``system``) writes there.
* :class:`StrictServer`: answers chat completions as strictly as the public API does: a request field it does not
  document is a 400 (``Unrecognized request argument supplied: repetition_penalty``), ``max_tokens`` is a 400 as for
  the models that take only ``max_completion_tokens``, more than four stop sequences are a 400, a model it does not
  serve is a 404, a request without a key a 401, and the first attempt of every conversation a 429 with
  ``Retry-After``. The completion text comes from the test's ``reply(body)``. Every request is logged.

No LLM runs here: these are fault tests of the HTTP client and of the checks made before a run starts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

#: The chat completions request fields the public API documents (what a strict server accepts).
DOCUMENTED_FIELDS = frozenset({
    "model", "messages", "temperature", "top_p", "n", "stream", "stream_options", "stop", "max_completion_tokens",
    "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user", "seed",
    "response_format", "tools", "tool_choice", "parallel_tool_calls", "service_tier", "store", "metadata",
    "reasoning_effort", "modalities", "prediction", "audio",
})


class ModelList(BaseHTTPRequestHandler):
    """``GET /v1/models``: ``models`` owned by ``owned_by`` (set on the server: ``server.models``, ``.owned_by``)."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib handler name
        if urlsplit(self.path).path.rstrip("/") != "/v1/models":
            return self._json(404, {"error": {"message": f"no route {self.path}"}})
        data = [{"id": m, "object": "model", "owned_by": self.server.owned_by} for m in self.server.models]
        self._json(200, {"object": "list", "data": data})

    def _json(self, status: int, obj: dict, headers: dict[str, str] | None = None) -> None:
        out = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass


class StrictHandler(ModelList):
    """Chat completions with the public API's validation (see the module docstring)."""

    server: StrictServer

    def do_GET(self) -> None:  # noqa: N802 - stdlib handler name
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self._json(401, {"error": {"message": "You didn't provide an API key.",
                                              "type": "invalid_request_error"}})
        super().do_GET()

    def do_POST(self) -> None:  # noqa: N802 - stdlib handler name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, obj, headers = self._answer(body)
        with self.server.lock:
            self.server.log.append({"body": body, "status": status})
        self._json(status, obj, headers)

    def _answer(self, body: dict) -> tuple[int, dict, dict[str, str]]:
        def invalid(msg: str, param: str | None = None) -> tuple[int, dict, dict[str, str]]:
            return 400, {"error": {"message": msg, "type": "invalid_request_error", "param": param,
                                   "code": None}}, {}

        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return 401, {"error": {"message": "You didn't provide an API key."}}, {}
        if "max_tokens" in body:
            return invalid("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                           "'max_completion_tokens' instead.", "max_tokens")
        for field in body:
            if field not in DOCUMENTED_FIELDS:
                return invalid(f"Unrecognized request argument supplied: {field}", field)
        if len(body.get("stop") or []) > 4:
            return invalid("'stop' may hold at most 4 sequences", "stop")
        if body.get("model") not in self.server.models:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist",
                                   "code": "model_not_found"}}, {}
        convo = json.dumps(body["messages"], sort_keys=True)
        with self.server.lock:
            first = convo not in self.server.seen
            self.server.seen.add(convo)
        if first and self.server.rate_limit_first:
            return 429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {
                "Retry-After": str(self.server.retry_after)}
        text = self.server.reply(body)
        return 200, {"id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
                               "completion_tokens": len(text.split())}}, {}


class StrictServer(ThreadingHTTPServer):
    """A loopback server with :class:`StrictHandler`; ``log`` holds every chat request and its status."""

    daemon_threads = True

    def __init__(self, reply: Callable[[dict], str], models: tuple[str, ...] = ("gpt-test",),
                 owned_by: str = "system", retry_after: int = 1, rate_limit_first: bool = True):
        super().__init__(("127.0.0.1", 0), StrictHandler)
        self.reply, self.models, self.owned_by = reply, models, owned_by
        self.retry_after, self.rate_limit_first = retry_after, rate_limit_first
        self.log: list[dict] = []
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        """The base URL with ``/v1``."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


