"""What an OpenAI-compatible server accepts, found out before the first item (``--backend openai --api ...``).

Two server profiles:

* ``vllm``: a ``vllm serve`` endpoint. It takes vLLM's extensions of the chat completions request:
  ``repetition_penalty`` and ``structured_outputs`` (regex, choice, JSON schema), and ``max_tokens``.
* ``openai``: the public API's strict form (OpenAI, and servers that copy its validation). An unknown field is a
  400, so only the documented fields are sent, the length limit as ``max_completion_tokens``. A method setting
  that needs a vLLM extension is either mapped (``repetition_penalty``: not sent, which the run records) or refused
  before anything starts (``guided=true``: the public API has no regex or choice constraint).

``--api auto`` (the default) asks the server's ``GET /v1/models``: a model entry ``owned_by: vllm`` means ``vllm``,
anything else ``openai``. The same request lists the served model names, so a ``--model`` the server does not serve
is refused with the names it does serve, instead of one HTTP 404 per item. What the profile did to the method's
requests is part of the run's plan and run id (:func:`applied_api`).

Example::

    info = probe_server("http://127.0.0.1:8000/v1")       # ServerInfo(api="vllm", models=("my-qwen",))
    check_model_served("my-qwen", info)
    applied_api("openai", ela_settings)                     # {"api": "openai", "max_tokens_field":
                                                            #  "max_completion_tokens", "not_sent": {...}}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import httpx

from tasks.llm.types import ChatRequest

API_PROFILES = ("vllm", "openai")
#: The ``--api`` choices: a profile, or ``auto`` (ask the server).
API_CHOICES = ("auto", *API_PROFILES)
#: Fields of a chat completions request that the strict profile sends (the public API's documented ones we use).
STRICT_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "max_completion_tokens", "seed", "stop"})
#: Most stop sequences the public API takes; the rest are applied to the text here (:func:`apply_stops`).
STRICT_MAX_STOPS = 4


class ApiError(ValueError):
    """The server, its models or its API cannot run the method as configured (said before anything starts)."""


@dataclass(frozen=True)
class ServerInfo:
    """What ``GET /v1/models`` said.

    Attributes:
        api: The detected profile (``vllm`` or ``openai``); None when the server has no model list.
        models: The served model names; None when the server has no model list.
        note: Why nothing is known, when so.
    """

    api: str | None
    models: tuple[str, ...] | None
    note: str = ""


def models_url(base_url: str) -> str:
    """``<base>/v1/models`` from a base URL with or without the ``/v1`` suffix."""
    base = base_url.rstrip("/")
    return (base if base.endswith("/v1") else base + "/v1") + "/models"


def probe_server(base_url: str, api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> ServerInfo:
    """Ask an OpenAI-compatible server which models it serves and whether it is vLLM.

    Raises:
        ApiError: The server cannot be reached, refuses the key, or answers something that is not a model list.
    """
    url = models_url(base_url)
    key = os.environ.get(api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with httpx.Client(timeout=timeout_s, transport=transport) as client:
            resp = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise ApiError(f"cannot reach {url}: {type(exc).__name__}: {exc} (is the server up? check --base-url)"
                       ) from None
    if resp.status_code in (401, 403):
        raise ApiError(f"{url} refused the API key (HTTP {resp.status_code}): set {api_key_env}"
                       + ("" if key else " (it is unset)"))
    if resp.status_code in (404, 405, 501):  # a server without the endpoint: nothing to detect or check
        return ServerInfo(api=None, models=None, note=f"{url} answered HTTP {resp.status_code}: {resp.text[:200]}")
    if resp.status_code != 200:
        raise ApiError(f"{url} answered HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        entries = resp.json()["data"]
        models = tuple(str(m["id"]) for m in entries)
        owners = {str(m.get("owned_by", "")) for m in entries}
    except (ValueError, KeyError, TypeError) as exc:
        raise ApiError(f"{url} did not answer a model list ({type(exc).__name__}: {resp.text[:200]})") from None
    return ServerInfo(api="vllm" if "vllm" in owners else "openai", models=models)


def resolve_api(requested: str, info: ServerInfo) -> str:
    """The profile to use: the requested one, or the detected one for ``auto``."""
    if requested not in API_CHOICES:
        raise ApiError(f"unknown --api {requested!r}; choose one of {', '.join(API_CHOICES)}")
    if requested != "auto":
        return requested
    if info.api is None:
        raise ApiError(f"cannot tell the server's API: {info.note} (give --api vllm or --api openai, and check "
                       "--base-url: it should end in /v1 or be the server's root)")
    return info.api


def check_model_served(model_id: str, info: ServerInfo) -> None:
    """Refuse a model name the server does not list (a server without a model list is not checked).

    Raises:
        ApiError: With the served names and how to pass one.
    """
    if info.models is not None and model_id not in info.models:
        shown = ", ".join(info.models[:20]) + (f" and {len(info.models) - 20} more" if len(info.models) > 20 else "")
        raise ApiError(f"the server does not serve model {model_id!r}; it serves: {shown or 'nothing'} "
                       "(pass --model NAME exactly as the server lists it)")


def applied_api(api: str, settings: Any) -> dict[str, Any]:
    """What the profile does to a method's requests, checked before the first item.

    Args:
        api: ``vllm`` or ``openai``.
        settings: The method's parsed settings (``guided``, ``repetition_penalty`` are read where they exist).

    Returns:
        ``{"api", "max_tokens_field", "not_sent"}``: the request field that carries the length limit, and each
        method setting that is not sent, with why (stored in the plan, hashed into the run id).

    Raises:
        ApiError: A setting the API cannot honour and that has no faithful mapping (``guided=true`` on ``openai``).
    """
    if api not in API_PROFILES:
        raise ApiError(f"unknown API profile {api!r}; choose one of {', '.join(API_PROFILES)}")
    if api == "vllm":
        return {"api": "vllm", "max_tokens_field": "max_tokens", "not_sent": {}}
    if getattr(settings, "guided", False):
        raise ApiError("--set guided=true constrains answers with vLLM's structured outputs (regex, choice or JSON "
                       "schema), which the public OpenAI API does not accept; run against a vLLM server "
                       "(--api vllm) or leave guided off")
    not_sent = {}
    rp = getattr(settings, "repetition_penalty", 1.0)
    if rp != 1.0:
        not_sent["repetition_penalty"] = (f"{rp:g}: a vLLM extension the public API rejects (its frequency_penalty "
                                          "is another rule); sampled without a repetition penalty")
    return {"api": "openai", "max_tokens_field": "max_completion_tokens", "not_sent": not_sent}


def request_payload(req: ChatRequest, model: str, api: str = "vllm") -> dict[str, Any]:
    """The JSON body of one chat completion request for a server of the given profile.

    Raises:
        ApiError: A constrained request (regex, choice, JSON schema) for the ``openai`` profile, which
            :func:`applied_api` refuses before a run starts.
    """
    s = req.sampling
    strict = api == "openai"
    body: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in req.messages],
        "temperature": s.temperature,
        "top_p": s.top_p,
        ("max_completion_tokens" if strict else "max_tokens"): s.max_tokens,
    }
    if s.seed is not None:
        body["seed"] = s.seed
    if s.stop:
        body["stop"] = list(s.stop[:STRICT_MAX_STOPS] if strict else s.stop)
    if strict:
        if s.constrained:
            raise ApiError("a constrained request (structured outputs) cannot go to the public OpenAI API")
        return body
    if s.repetition_penalty != 1.0:
        body["repetition_penalty"] = s.repetition_penalty
    if s.regex is not None:
        body["structured_outputs"] = {"regex": s.regex}
    elif s.choice is not None:
        body["structured_outputs"] = {"choice": list(s.choice)}
    elif s.json_schema is not None:
        body["structured_outputs"] = {"json": json.loads(s.json_schema)}
    return body


def apply_stops(text: str, stops: tuple[str, ...]) -> str:
    """``text`` cut before the first of ``stops`` (the stop sequences a strict server was not sent)."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]
