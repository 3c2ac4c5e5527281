"""The server profiles of ``--backend openai`` (``tasks.llm.api``): payloads, mapping, and the probe of a server.

The probe runs against loopback servers that answer like a vLLM server and like the strict public API
(``tests/openai_servers.py``).
"""

from __future__ import annotations

from http.server import ThreadingHTTPServer

import pytest

from tasks.llm.api import (
    STRICT_FIELDS,
    ApiError,
    ServerInfo,
    applied_api,
    apply_stops,
    check_model_served,
    probe_server,
    request_payload,
    resolve_api,
)
from tasks.llm.types import ChatRequest, SamplingConfig
from tasks.methods.registry import METHODS
from tests.openai_servers import DOCUMENTED_FIELDS, ModelList, StrictServer
from tests.procs import serving

MSG = [{"role": "user", "content": "who wrote dune?"}]


def test_the_strict_profile_sends_only_documented_fields():
    s = SamplingConfig(temperature=0.7, top_p=0.8, repetition_penalty=1.05, max_tokens=64, stop=("</a>",), seed=3)
    body = request_payload(ChatRequest(messages=MSG, sampling=s), "gpt-test", "openai")
    assert set(body) <= STRICT_FIELDS <= DOCUMENTED_FIELDS
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body and "repetition_penalty" not in body
    vllm = request_payload(ChatRequest(messages=MSG, sampling=s), "m", "vllm")
    assert vllm["max_tokens"] == 64 and vllm["repetition_penalty"] == 1.05
    # at most four stop sequences go to a strict server; the rest cut the text on this side
    many = SamplingConfig(stop=("a1", "b2", "c3", "d4", "END", "STOP"))
    assert request_payload(ChatRequest(messages=MSG, sampling=many), "m", "openai")["stop"] == ["a1", "b2", "c3", "d4"]
    assert apply_stops("the answer STOP more END", ("END", "STOP")) == "the answer "
    assert apply_stops("no stop here", ("END",)) == "no stop here"
    with pytest.raises(ApiError, match="structured outputs"):
        request_payload(ChatRequest(messages=MSG, sampling=SamplingConfig(regex="a+")), "m", "openai")


@pytest.mark.parametrize("method", sorted(m for m, cls in METHODS.items() if cls.needs_llm))
def test_what_each_method_needs_of_the_public_api_is_decided_before_a_run(method: str):
    cls = METHODS[method]
    settings = cls.parse_settings({})
    assert applied_api("vllm", settings) == {"api": "vllm", "max_tokens_field": "max_tokens", "not_sent": {}}
    applied = applied_api("openai", settings)
    assert applied["max_tokens_field"] == "max_completion_tokens"
    rp = getattr(settings, "repetition_penalty", 1.0)
    assert set(applied["not_sent"]) == ({"repetition_penalty"} if rp != 1.0 else set())
    if "guided" in cls.Settings.model_fields:
        with pytest.raises(ApiError, match="guided=true"):
            applied_api("openai", cls.parse_settings({"guided": "true"}))
        assert applied_api("vllm", cls.parse_settings({"guided": "true"}))["api"] == "vllm"


def test_probe_tells_a_vllm_server_from_the_public_api(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LQA_TEST_KEY", "sk-test")
    vllm = ThreadingHTTPServer(("127.0.0.1", 0), ModelList)
    vllm.models, vllm.owned_by = ("my-qwen",), "vllm"
    with serving(vllm):
        info = probe_server(f"http://127.0.0.1:{vllm.server_address[1]}", "LQA_TEST_KEY")
    assert info == ServerInfo(api="vllm", models=("my-qwen",))
    assert resolve_api("auto", info) == "vllm" and resolve_api("openai", info) == "openai"
    strict = StrictServer(lambda body: "", models=("gpt-test", "gpt-other"))
    with serving(strict):
        info = probe_server(strict.url, "LQA_TEST_KEY")
        assert info == ServerInfo(api="openai", models=("gpt-test", "gpt-other"))
        check_model_served("gpt-test", info)
        with pytest.raises(ApiError, match=r"does not serve model 'qwen2.5-coder-0.5b-instruct'; it serves: "
                                           r"gpt-test, gpt-other \(pass --model NAME"):
            check_model_served("qwen2.5-coder-0.5b-instruct", info)
        with pytest.raises(ApiError, match="refused the API key .HTTP 401.: set LQA_NO_SUCH_KEY .it is unset."):
            probe_server(strict.url, "LQA_NO_SUCH_KEY")
    with pytest.raises(ApiError, match="cannot reach http://127.0.0.1:9/v1/models"):
        probe_server("http://127.0.0.1:9", "LQA_TEST_KEY", timeout_s=5)
    assert strict.log == []  # the probe never asks for a completion


def test_a_server_without_a_model_list_needs_api_given():
    class NoModels(ModelList):
        def do_GET(self):  # noqa: N802
            self._json(404, {"detail": "Not Found"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoModels)
    with serving(server):
        info = probe_server(f"http://127.0.0.1:{server.server_address[1]}/v1")
    assert (info.api, info.models) == (None, None) and "answered HTTP 404" in info.note
    with pytest.raises(ApiError, match=r"cannot tell the server's API: .*404.*give --api vllm or --api openai"):
        resolve_api("auto", info)
    assert resolve_api("openai", info) == "openai"
    check_model_served("any-name", info)  # nothing to check against


def test_the_command_line_reads_the_key_the_backend_sends():
    from flows.cli.run_command import API_KEY_ENV
    from tasks.llm.types import EngineConfig

    assert API_KEY_ENV == EngineConfig().api_key_env


def test_the_bigger_model_how_to_states_what_the_code_does():
    from pathlib import Path

    from tasks.llm.api import STRICT_MAX_STOPS
    from tasks.methods.ela.method import ElaSettings

    page = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "bigger-model.md").read_text()
    ela = ElaSettings()
    assert f"ELA's default {ela.repetition_penalty:g}" in page
    assert f"the first {['zero', 'one', 'two', 'three', 'four', 'five'][STRICT_MAX_STOPS]} sent" in page
    fields = [applied_api(api, ela)["max_tokens_field"] for api in ("vllm", "openai")]
    assert f"| `{fields[0]}` | `{fields[1]}` |" in page
