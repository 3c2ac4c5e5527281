"""LLM layer without an engine: response cache, cached/scripted backends, OpenAI backend on a local server."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from storage.layout import REPO_ROOT
from tasks.llm.backends import BACKENDS, UnknownBackendError, make_backend
from tasks.llm.cache import ResponseCache, default_cache_path
from tasks.llm.cached import CachedBackend
from tasks.llm.env import configure_runtime_env, runtime_env_defaults
from tasks.llm.models import (
    EMBEDDED_MODEL,
    GgufSource,
    ModelPrepError,
    assemble_gguf,
    model_label,
    prepare_embedded_model,
    resolve_model,
)
from tasks.llm.openai_backend import OpenAIBackend, chat_url
from tasks.llm.scripted import ScriptedBackend
from tasks.llm.types import ChatRequest, Completion, EngineConfig, SamplingConfig
from tasks.llm.vllm_backend import VLLMBackend


def req(text: str, **sampling) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], sampling=SamplingConfig(**sampling))


# ---------------------------------------------------------------------------------------- cache


def test_cache_round_trip_and_errors_not_stored(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    ok = Completion(text="Paris", prompt_tokens=12, completion_tokens=1, latency_s=0.2, finish_reason="stop")
    bad = Completion(error="timeout")
    assert cache.put_many([("k1", ok), ("k2", bad), ("k3", ok.model_copy(update={"text": "Rome"}))]) == 2
    got = cache.get_many(["k1", "k2", "k3", "k1", "nope"])
    assert set(got) == {"k1", "k3"}
    assert got["k1"].text == "Paris" and got["k1"].cached and got["k1"].prompt_tokens == 12
    assert got["k3"].text == "Rome"
    st = cache.stats()
    assert st["entries"] == 2 and st["hits"] == 2 and st["misses"] == 2 and st["puts"] == 2
    cache.close()
    again = ResponseCache(tmp_path / "c.sqlite")  # persisted, and stored without cached=True
    assert again.get("k1") == ok.model_copy(update={"cached": True})


def test_cache_many_keys_is_batched(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    items = [(f"key-{i}", Completion(text=f"t{i}")) for i in range(5000)]
    t0 = time.perf_counter()
    cache.put_many(items)
    got = cache.get_many([k for k, _ in items] + [f"missing-{i}" for i in range(2000)])
    assert len(got) == 5000 and got["key-4999"].text == "t4999"
    assert time.perf_counter() - t0 < 10


def test_default_cache_path_under_home(home: Path) -> None:
    assert default_cache_path() == home / "cache" / "llm" / "responses.sqlite"


_WRITER = """
import sys
from tasks.llm.cache import ResponseCache
from tasks.llm.types import Completion
path, tag, n, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = ResponseCache(path)
for b in range(n):
    c.put_many([(f"{tag}-{b}-{i}", Completion(text=f"{tag}{b}.{i}")) for i in range(batch)]
               + [(f"shared-{b}", Completion(text="same"))])
    print(b, flush=True)
"""


def _writer(path: Path, tag: str, n: int, batch: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), tag, str(n), str(batch)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_cache_two_processes_write_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    procs = [_writer(path, tag, 40, 50) for tag in ("a", "b")]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    cache = ResponseCache(path)
    keys = [f"{t}-{b}-{i}" for t in "ab" for b in range(40) for i in range(50)]
    got = cache.get_many(keys + [f"shared-{b}" for b in range(40)])
    assert len(got) == 2 * 40 * 50 + 40
    assert got["b-39-49"].text == "b39.49"


def test_cache_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    p = _writer(path, "k", 100000, 200)
    done = []
    assert p.stdout is not None
    for line in p.stdout:
        done.append(int(line))
        if len(done) >= 5:
            break
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    cache = ResponseCache(path)
    keys = [f"k-{b}-{i}" for b in done for i in range(200)]
    assert len(cache.get_many(keys)) == len(keys)  # every committed batch is there after the kill
    assert len(cache) >= len(keys)


# ---------------------------------------------------------------------------------------- scripted / cached


def test_scripted_backend_modes() -> None:
    listed = ScriptedBackend(["a", "!error:timeout"])
    out = listed.generate([req("x"), req("y"), req("z")])
    assert [c.text for c in out] == ["a", "", ""]
    assert out[1].error == "timeout" and "exhausted" in (out[2].error or "")
    by_sub = ScriptedBackend({"capital": "Paris", "*": "dunno"})
    assert [c.text for c in by_sub.generate([req("the capital of France"), req("hello")])] == [
        "Paris",
        "dunno",
    ]
    fn = ScriptedBackend(lambda msgs: msgs[-1]["content"].upper())
    assert fn.generate([req("abc")])[0].text == "ABC"
    boom = ScriptedBackend(["!raise:engine died"])
    with pytest.raises(RuntimeError, match="engine died"):
        boom.generate([req("x")])
    assert fn.calls == 1 and fn.batch_sizes == [1]


def test_cached_backend_sends_only_misses(tmp_path: Path) -> None:
    inner = ScriptedBackend(lambda msgs: "echo " + msgs[-1]["content"])
    cb = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    first = cb.generate([req("q1"), req("q2"), req("q3"), req("q1")])  # q1 twice: sent once
    assert inner.batch_sizes == [3]
    assert [c.text for c in first] == ["echo q1", "echo q2", "echo q3", "echo q1"]
    assert not any(c.cached for c in first)
    second = cb.generate([req("q2"), req("q4"), req("q1"), req("q5")])
    assert inner.batch_sizes == [3, 2]
    assert [c.cached for c in second] == [True, False, True, False]
    assert [c.text for c in second] == ["echo q2", "echo q4", "echo q1", "echo q5"]
    cb.generate([req("q1"), req("q5")])
    assert inner.batch_sizes == [3, 2]  # all hits: no backend call at all
    # the key depends on sampling params: same text, other temperature is a miss
    cb.generate([req("q1", temperature=0.7)])
    assert inner.batch_sizes == [3, 2, 1]


def test_cached_backend_does_not_store_errors(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    flaky = ScriptedBackend({"bad": "!error:timeout", "*": "fine"})
    out = CachedBackend(flaky, cache).generate([req("good"), req("bad")])
    assert out[0].text == "fine" and out[1].error == "timeout"
    healed = ScriptedBackend({"*": "now fine"})
    out2 = CachedBackend(healed, cache).generate([req("good"), req("bad")])
    assert healed.batch_sizes == [1]  # only the failed item is regenerated
    assert out2[0].cached and out2[0].text == "fine" and out2[1].text == "now fine"


def test_make_backend_registry(tmp_path: Path) -> None:
    assert set(BACKENDS) == {"vllm", "openai", "scripted"}
    with pytest.raises(UnknownBackendError, match="openai, scripted, vllm"):
        make_backend("llamacpp", EngineConfig())
    b = make_backend(
        "scripted", EngineConfig(model="m"), cache=ResponseCache(tmp_path / "c.sqlite"), script=["x"]
    )
    assert isinstance(b, CachedBackend) and b.model_id == "m" and b.name == "scripted"


# ---------------------------------------------------------------------------------------- vLLM batch logic


class _FakeTokenizer:
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        if messages[-1]["role"] == "tool":
            raise ValueError("unknown role")
        return " ".join(m["content"] for m in messages) + " <assistant>"

    def encode(self, text, add_special_tokens=False):
        return text.split()


class _FakeLLM:
    def __init__(self) -> None:
        self.batches: list[int] = []

    def get_tokenizer(self):
        return _FakeTokenizer()

    def chat(self, convs, params, use_tqdm=True):
        assert (use_tqdm is False or callable(use_tqdm)) and len(convs) == len(params)
        self.batches.append(len(convs))
        if any("BOOM" in c[-1]["content"] for c in convs):
            raise RuntimeError("engine step failed")
        return [
            SimpleNamespace(
                prompt_token_ids=list(range(len(c[-1]["content"].split()) + 1)),
                outputs=[
                    SimpleNamespace(text=c[-1]["content"][::-1], token_ids=[1, 2], finish_reason="stop")
                ],
            )
            for c in convs
        ]


def test_vllm_backend_batch_isolation_with_fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(VLLMBackend, "sampling_params", staticmethod(lambda r, is_cpu=False: r.sampling))
    fake = _FakeLLM()
    be = VLLMBackend.wrap(fake, EngineConfig(max_model_len=8))
    long = " ".join(["w"] * 20)
    bad_role = ChatRequest(messages=[{"role": "tool", "content": "x"}])
    out = be.generate([req("abc"), req(long), req("BOOM now"), req("xyz"), bad_role])
    assert out[4].error is not None and out[4].error.startswith("chat template failed: ValueError")
    assert out[0].text == "cba" and out[3].text == "zyx" and out[0].completion_tokens == 2
    assert out[1].error is not None and out[1].error.startswith("context length exceeded: 21 > 7")
    assert out[2].error is not None and "engine step failed" in out[2].error
    assert fake.batches == [3, 1, 1, 1]  # one batched call, then one by one after the failure
    ok = be.generate([req("a b"), req("c")])
    assert ok[0].latency_s == ok[1].latency_s > 0  # batch wall time split evenly
    assert fake.batches[-1] == 2 and ok[0].prompt_tokens == 3
    be.close()


# ---------------------------------------------------------------------------------------- env / models


def test_configure_runtime_env_never_overrides(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in runtime_env_defaults():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")
    applied = configure_runtime_env()
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "7" and "VLLM_CPU_KVCACHE_SPACE" not in applied
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert os.environ["VLLM_CACHE_ROOT"] == str(home / "cache" / "vllm")
    assert configure_runtime_env() == {}


def test_the_engines_openmp_runtime_sleeps_while_it_waits(tmp_path: Path) -> None:
    """``configure_runtime_env`` before ``import torch`` (what the CLI and the tests do before vLLM starts) gives
    libgomp ``OMP_WAIT_POLICY=PASSIVE``, read from libgomp's own report of its settings (``OMP_DISPLAY_ENV``) in a
    fresh interpreter where nothing else set it; a value the user exported wins. libgomp reports an unset policy
    as ``PASSIVE`` too, so the spin count tells them apart: 0 when passive, 300,000 by default.

    ``LD_PRELOAD`` is cleared for the fresh interpreter: vLLM's CPU platform exports ``LD_PRELOAD`` with torch's
    libgomp (and its tcmalloc) in any process that started an engine, and a preloaded libgomp reads its
    environment before Python runs. On CI this test ran on the xdist worker that held the session engine and
    saw spin count 300,000. A child of a configured process inherits both variables, so it is passive too
    (the last case)."""
    code = ("from pathlib import Path; import sys; from tasks.llm.env import configure_runtime_env; "
            "configure_runtime_env(Path(sys.argv[1])); import torch; torch.set_num_threads(2); "
            "torch.ones(64, 64) @ torch.ones(64, 64)")
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "LD_PRELOAD")}
    base |= {"OMP_DISPLAY_ENV": "verbose"}
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    torch_pkg = Path(spec.origin).parent
    libgomp = sorted([*(torch_pkg / "lib").glob("libgomp*.so*"), *(torch_pkg.parent / "torch.libs").glob("libgomp*")])
    assert libgomp, f"no libgomp bundled with torch under {torch_pkg}"
    inherited = {"LD_PRELOAD": str(libgomp[0]), "OMP_WAIT_POLICY": "PASSIVE"}
    for extra, policy, spin in (({}, "PASSIVE", "0"), ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE", None),
                                (inherited, "PASSIVE", "0")):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=base | extra, capture_output=True,
                             text=True, timeout=120, cwd=REPO_ROOT)
        assert out.returncode == 0, out.stderr[-2000:]
        assert f"OMP_WAIT_POLICY = '{policy}'" in out.stderr, out.stderr[-2000:]
        if spin is not None:
            assert f"GOMP_SPINCOUNT = '{spin}'" in out.stderr, out.stderr[-2000:]


def test_models_fast_path_resolve_and_hash_check(tmp_path: Path) -> None:
    root = tmp_path / "models"
    done = root / EMBEDDED_MODEL
    done.mkdir(parents=True)
    (done / "prepared.json").write_text(json.dumps({"slug": EMBEDDED_MODEL}))
    assert prepare_embedded_model(root) == done  # marker present: returns without any work
    assert resolve_model("embedded", root) == str(done)
    assert resolve_model(str(tmp_path)) == str(tmp_path.resolve())
    assert resolve_model("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert model_label("embedded") == EMBEDDED_MODEL
    parts = []
    for i in range(3):
        parts.append(tmp_path / f"p{i}")
        parts[-1].write_bytes(bytes([i]) * 1000)
    with pytest.raises(ModelPrepError, match="sha256"):
        assemble_gguf(GgufSource("x", tuple(parts), "0" * 64), tmp_path / "g" / "x.gguf")
    assert not list((tmp_path / "g").iterdir())  # no partial file left behind
    import hashlib

    digest = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()
    assert assemble_gguf(GgufSource("x", tuple(parts), digest, 3000), tmp_path / "g" / "x.gguf") == digest


# ---------------------------------------------------------------------------------------- OpenAI over HTTP


class _Server:
    """OpenAI-shaped endpoint on 127.0.0.1: 'flaky' -> 500 twice then 200, 'slow' -> sleeps, 'bad' -> 400."""

    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}
        self.auth: list[str | None] = []
        self.paths: list[str] = []
        self.inflight = 0
        self.max_inflight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][-1]["content"]
                with outer.lock:
                    outer.attempts[text] = outer.attempts.get(text, 0) + 1
                    n = outer.attempts[text]
                    outer.auth.append(self.headers.get("Authorization"))
                    outer.paths.append(self.path)
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                self._counted = True
                try:
                    if text.startswith("trickle"):  # one byte per 0.2 s for 10 s: no single read times out
                        self._answered()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "100")
                        self.end_headers()
                        for _ in range(50):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.2)
                        return None
                    if text.startswith("gzip"):
                        return self._send(200, self._answer(body, text), gzip_body=True)
                    if text.startswith("slow"):
                        time.sleep(1.2)
                    elif text.startswith("wait"):
                        time.sleep(0.2)
                    if text.startswith("flaky") and n <= 2:
                        return self._send(500, {"error": {"message": "overloaded"}})
                    if text.startswith("bad"):
                        return self._send(400, {"error": {"message": "bad request"}})
                    self._send(200, self._answer(body, text))
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    self._answered()

            def _answered(self) -> None:
                """The request leaves the in-flight count before its answer is written: a client thread sends its
                next request as soon as it has read this answer, and counting until this handler's thread got
                back from the write counted that next request as a third in flight on a loaded machine."""
                if self._counted:
                    with outer.lock:
                        outer.inflight -= 1
                    self._counted = False

            @staticmethod
            def _answer(body: dict, text: str) -> dict:
                return {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": f"re: {text}"},
                         "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                }

            def _send(self, status: int, payload: dict, gzip_body: bool = False) -> None:
                data = json.dumps(payload).encode()
                self._answered()
                self.send_response(status)
                if gzip_body:
                    data = gzip.compress(data)
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    s = _Server()
    yield s
    s.stop()


def test_openai_backend_retries_timeouts_and_key(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-SECRET-123456"
    monkeypatch.setenv("LQA_TEST_KEY", secret)
    engine = EngineConfig(
        model="embedded",
        base_url=server.url,
        api_key_env="LQA_TEST_KEY",
        timeout_s=0.5,
        max_retries=2,
        max_concurrency=4,
    )
    be = OpenAIBackend(engine, backoff_s=0.01)
    out = be.generate([req("ok one"), req("flaky two"), req("slow three"), req("bad four"), req("ok five")])
    assert [c.text for c in out] == ["re: ok one", "re: flaky two", "", "", "re: ok five"]
    assert out[0].prompt_tokens == 11 and out[0].completion_tokens == 3 and out[0].finish_reason == "stop"
    assert server.attempts["flaky two"] == 3  # 500, 500, 200
    assert out[2].error is not None and "timeout" in out[2].error
    assert server.attempts["slow three"] == 3  # first try + max_retries
    assert out[3].error is not None and out[3].error.startswith("HTTP 400")
    assert server.attempts["bad four"] == 1  # 4xx other than 429 is not retried
    assert set(server.auth) == {f"Bearer {secret}"}
    assert set(server.paths) == {"/v1/chat/completions"}
    for text in (repr(be), str(be), repr(vars(be))):
        assert secret not in text
    assert "LQA_TEST_KEY" in repr(be)
    be.close()


def test_openai_backend_deadline_bounds_a_trickling_answer(server: _Server) -> None:
    """A byte every 0.2 s never trips a 0.5 s read timeout; the per-attempt deadline ends it (and gzip parses)."""
    be = OpenAIBackend(EngineConfig(model="m", base_url=server.url, timeout_s=0.5, max_retries=1), backoff_s=0.01)
    t0 = time.perf_counter()
    out = be.generate([req("trickle one"), req("gzip two")])
    elapsed = time.perf_counter() - t0
    assert out[0].error is not None and out[0].error.startswith("timeout after 0.5 s"), out[0]
    assert server.attempts["trickle one"] == 2  # first try + 1 retry
    assert elapsed < 6  # 2 attempts of ~0.6 s each; without the deadline one attempt alone takes 10 s
    assert out[1].text == "re: gzip two" and out[1].error is None
    be.close()


def test_openai_backend_bounded_concurrency(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LQA_NO_KEY", raising=False)
    engine = EngineConfig(
        model="m", base_url=server.url + "/v1/", api_key_env="LQA_NO_KEY", max_concurrency=2
    )
    be = OpenAIBackend(engine)
    out = be.generate([req(f"wait {i}") for i in range(6)])
    assert [c.text for c in out] == [f"re: wait {i}" for i in range(6)]
    assert server.max_inflight == 2  # bounded, and actually concurrent
    assert set(server.auth) == {None}
    be.close()


def test_chat_url() -> None:
    assert chat_url("http://h:1") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    with pytest.raises(ValueError, match="base_url"):
        OpenAIBackend(EngineConfig())
