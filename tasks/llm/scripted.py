"""Scripted backend: replays canned responses, for unit tests of agent control flow only.

Never a default and never used in e2e tests (docs/architecture.md#llm-layer). A script is one of:

* a list of texts, consumed in order across calls (running out gives a per-item ``"script exhausted"`` error);
* a callable ``messages -> str``;
* a dict mapping a substring of the last user message to a reply (first matching key in insertion order;
  the key ``"*"`` is the default; no match and no default gives a per-item error).

A reply starting with ``"!error:"`` becomes ``Completion(error=<rest>)`` (e.g. ``"!error:timeout"``) so tests
can simulate per-item failures; ``"!length:<text>"`` returns ``<text>`` cut off at the token bound
(``finish_reason="length"``); ``"!raise:<msg>"`` makes the whole ``generate`` call raise
``RuntimeError(msg)`` (a backend that crashes). Every call is recorded: ``calls``, ``batch_sizes`` and
``requests``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from tasks.llm.types import ChatRequest, Completion, EngineConfig

Script = Sequence[str] | Callable[[list[dict[str, str]]], str] | Mapping[str, str]

ERROR_PREFIX = "!error:"
RAISE_PREFIX = "!raise:"
LENGTH_PREFIX = "!length:"


def _last_user(messages: Sequence[dict[str, str]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return m.get("content", "")
    return ""


class ScriptedBackend:
    """Replays a script (see the module docstring).

    Args:
        script: List of texts, callable ``messages -> str``, or dict ``substring -> reply``.
        engine: Ignored except for ``engine.model`` (used as ``model_id`` when ``model_id`` is not given).
        name: Backend name (part of cache keys).
        model_id: Model name reported (part of cache keys).
    """

    def __init__(
        self,
        script: Script,
        engine: EngineConfig | None = None,
        name: str = "scripted",
        model_id: str | None = None,
    ):
        self.name = name
        self.model_id = model_id or (engine.model if engine is not None else "scripted")
        self._script = script
        self._pos = 0
        self._lock = threading.Lock()
        self.calls = 0
        self.batch_sizes: list[int] = []
        self.requests: list[ChatRequest] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"ScriptedBackend(name={self.name!r}, model_id={self.model_id!r}, calls={self.calls})"

    def _reply(self, req: ChatRequest) -> str | None:
        messages = [dict(m) for m in req.messages]
        s = self._script
        if callable(s):
            return s(messages)
        if isinstance(s, Mapping):
            last = _last_user(messages)
            for sub, reply in s.items():
                if sub != "*" and sub in last:
                    return reply
            return s.get("*")
        if self._pos >= len(s):
            return None
        reply = s[self._pos]
        self._pos += 1
        return reply

    def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        """Answer every request from the script, in order.

        Raises:
            RuntimeError: When a reply is ``"!raise:<msg>"``.
        """
        with self._lock:
            self.calls += 1
            self.batch_sizes.append(len(requests))
            self.requests.extend(requests)
            out = []
            for req in requests:
                reply = self._reply(req)
                ptoks = sum(len(m.get("content", "").split()) for m in req.messages)
                if reply is None:
                    out.append(Completion(error="script exhausted or no matching reply", prompt_tokens=ptoks))
                elif reply.startswith(RAISE_PREFIX):
                    raise RuntimeError(reply[len(RAISE_PREFIX) :])
                elif reply.startswith(ERROR_PREFIX):
                    out.append(Completion(error=reply[len(ERROR_PREFIX) :], prompt_tokens=ptoks))
                else:
                    cut = reply.startswith(LENGTH_PREFIX)
                    text = reply[len(LENGTH_PREFIX) :] if cut else reply
                    out.append(
                        Completion(
                            text=text,
                            prompt_tokens=ptoks,
                            completion_tokens=len(text.split()),
                            finish_reason="length" if cut else "stop",
                        )
                    )
            return out

    def close(self) -> None:
        """Mark closed (nothing to release)."""
        self.closed = True
