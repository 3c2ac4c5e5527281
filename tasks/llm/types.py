"""Typed contract of the LLM layer (docs/architecture.md#llm-layer): requests, completions, engine and sampling configs.

Every backend implements ``LLMBackend.generate(requests) -> list[Completion]`` over a batch, in order.
Example payload::

    ChatRequest(messages=[{"role": "user", "content": "<link>who founded tesla</link>"}],
                sampling=SamplingConfig(temperature=0.7, top_p=0.8, repetition_penalty=1.05, max_tokens=256))
    -> Completion(text="<search> Search(tesla) </search>", prompt_tokens=812, completion_tokens=9,
                  latency_s=0.41, error=None, cached=False)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Version of the response-cache key (:meth:`ChatRequest.key`). Version 1 hashes backend, model, messages and the
#: sampling fields; a later version is hashed into the key too, so the entries of an older one are missed (runs
#: call the engine again) and stay in the cache file.
CACHE_KEY_FORMAT = 1


class SamplingConfig(BaseModel):
    """Sampling parameters (vLLM's SamplingParams group). Part of the response-cache key.

    Structured outputs (at most one of ``regex`` / ``choice`` / ``json_schema``): the
    completion is constrained to the given form by the backend's grammar engine — vLLM's
    ``StructuredOutputsParams`` (xgrammar, guidance fallback) in-process, the ``structured_outputs`` request
    field on a vLLM OpenAI-compatible server; the scripted backend ignores them. Unset (None) fields are left
    out of the cache key, so an unconstrained request's key is the one it has without these fields, and its
    cached responses stay valid.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = 0.0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = 0
    #: The whole completion must match this regular expression (xgrammar's regex dialect).
    regex: str | None = None
    #: The completion must be exactly one of these strings.
    choice: tuple[str, ...] | None = None
    #: The completion must be a JSON document valid under this JSON Schema (serialized as a string).
    json_schema: str | None = None

    @model_validator(mode="after")
    def _one_constraint(self) -> SamplingConfig:
        if sum(x is not None for x in (self.regex, self.choice, self.json_schema)) > 1:
            raise ValueError("at most one of regex, choice, json_schema may be set")
        if self.choice is not None and not self.choice:
            raise ValueError("choice needs at least one option")
        return self

    @property
    def constrained(self) -> bool:
        """Whether a structured-output constraint is set."""
        return self.regex is not None or self.choice is not None or self.json_schema is not None

    def key_body(self) -> dict[str, Any]:
        """The fields hashed into the response-cache key: every field, less the constraints left unset."""
        body = self.model_dump()
        for f in _CONSTRAINT_FIELDS:
            if body[f] is None:
                del body[f]
        return body


_CONSTRAINT_FIELDS = ("regex", "choice", "json_schema")


class EngineConfig(BaseModel):
    """Engine arguments (vLLM's EngineArgs group); never part of sampling, never sets env vars itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = "embedded"
    dtype: str = "auto"  # auto: bf16 on GPUs and bf16-capable CPUs, else float32 (tasks.llm.env.resolve_dtype)
    max_model_len: int = 4096
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    enable_prefix_caching: bool = True
    enforce_eager: bool = True
    base_url: str | None = None
    #: The OpenAI-compatible server's profile (``tasks.llm.api``): ``vllm`` (vLLM's extensions are sent) or
    #: ``openai`` (the public API's strict form).
    api: str = "vllm"
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    max_concurrency: int = 16
    max_retries: int = 4


class ChatRequest(BaseModel):
    """One chat request of a batch."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[dict[str, str], ...] | list[dict[str, str]]
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)

    def key(self, backend: str, model: str) -> str:
        """Cache key: sha256 over (backend, model, messages, sampling params incl. seed)."""
        fields: dict[str, Any] = {"b": backend, "m": model, "msg": list(self.messages), "s": self.sampling.key_body()}
        if CACHE_KEY_FORMAT != 1:
            fields["v"] = CACHE_KEY_FORMAT
        body = json.dumps(fields, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()

    def prompt_hash(self) -> str:
        """Short hash of the messages only (recorded in trajectories)."""
        body = json.dumps(list(self.messages), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


class Completion(BaseModel):
    """Result of one request; ``error`` is set (and ``text`` empty) when the backend failed for this item."""

    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    cached: bool = False
    finish_reason: str | None = None
    #: Prompt tokens the engine served from its prefix cache instead of computing them (vLLM's
    #: ``RequestOutput.num_cached_tokens``; OpenAI-compatible servers' ``usage.prompt_tokens_details.cached_tokens``).
    prefix_cached_tokens: int = 0


@runtime_checkable
class LLMBackend(Protocol):
    """Batch generation interface shared by the vllm, openai and scripted backends."""

    name: str
    model_id: str

    def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        """Generate one completion per request, in order; per-item failures go in ``Completion.error``."""
        ...

    def close(self) -> None:
        """Release the engine / connections."""
        ...


def as_dict(obj: BaseModel) -> dict[str, Any]:
    """Plain-dict view of a config (for manifests)."""
    return obj.model_dump()
