"""Process environment for the LLM stack (vLLM CPU, transformers, torch inductor).

Nothing happens at import time: the CLI and the tests call :func:`configure_runtime_env` explicitly, *before*
``import vllm`` / ``import transformers`` (several of these variables are read once, when those libraries are
imported). Every variable is set with ``setdefault`` semantics: a value the user already exported always wins.

Measured on the project's 2-core CPU machine (``../shared/stack/REPORT.md``, "vLLM CPU settings"):

* ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``: by default vLLM keeps one core for its scheduler, so on 2 cores the
  model runs on one core; 0 binds both (243 vs 141-158 tok/s batched).
* ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: engine core and worker run inside the calling process; no process
  spawns that re-import torch+vLLM (engine start 19 s instead of 47-68 s), and no
  ``if __name__ == "__main__"`` guard is needed (pytest, Prefect tasks).
* ``VLLM_CPU_KVCACHE_SPACE=2`` (GiB): 174,720 KV tokens, plenty for ``max_model_len=4096``.
* ``OMP_WAIT_POLICY=PASSIVE``: the engine's OpenMP threads sleep instead of spinning while they wait
  (:mod:`tasks.openmp`, with the measurements). It is set here for the engine itself, not only as a side effect
  of importing the search modules that set it for FAISS and MiniLM.

On a GPU machine the ``VLLM_CPU_*`` variables are ignored by vLLM; the in-process engine core also works
there.
"""

from __future__ import annotations

import os
from pathlib import Path

from storage import layout
from tasks.openmp import WAIT_POLICY

#: Fixed values (set only when absent from the environment).
STATIC_DEFAULTS: dict[str, str] = {
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    WAIT_POLICY[0]: WAIT_POLICY[1],
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # vLLM usage statistics would try to reach stats.vllm.ai and write under ~/.config/vllm.
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
}


def runtime_env_defaults(root: Path | None = None) -> dict[str, str]:
    """The variables :func:`configure_runtime_env` would set, without touching ``os.environ``.

    Args:
        root: Data root (``LINKEDQA_HOME``); defaults to :func:`storage.layout.home`.

    Returns:
        Mapping of variable name to default value. Cache folders live under ``<root>/cache/`` so that
        vLLM and torch write nothing to ``~/.cache`` or ``$TMPDIR`` (REPORT.md trap 11).
    """
    env = dict(STATIC_DEFAULTS)
    env["VLLM_CACHE_ROOT"] = str(layout.cache_dir("vllm", root))
    env["VLLM_CONFIG_ROOT"] = str(layout.cache_dir("vllm-config", root))
    env["TORCHINDUCTOR_CACHE_DIR"] = str(layout.cache_dir("torchinductor", root))
    return env


#: CPU flags (``/proc/cpuinfo``) of hardware bfloat16 arithmetic: AVX512-BF16 and the AMX tile unit.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
#: Engine dtypes a user may ask for (``auto`` = :func:`resolve_dtype`).
DTYPES = ("auto", "float32", "bfloat16", "float16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU feature flags of this machine (the first ``flags`` line of ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with cpuinfo.open() as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def resolve_dtype(dtype: str, is_cpu: bool, flags: frozenset[str] | None = None) -> str:
    """The engine dtype to use for a requested one.

    ``auto`` on the CPU picks ``bfloat16`` only where the CPU computes it in hardware (AVX512-BF16 or AMX); elsewhere
    vLLM-CPU emulates bf16 and is several times slower than float32 (measured: docs/benchmarks/ela.md#engine-dtype). On
    a GPU ``auto`` is left to vLLM (the model's own dtype, bf16 for the embedded model). Any other value is taken as
    given.

    Args:
        dtype: ``auto`` or an explicit dtype (:data:`DTYPES`).
        is_cpu: Whether vLLM runs on its CPU platform.
        flags: CPU flags (default: :func:`cpu_flags`).

    Raises:
        ValueError: An unknown dtype.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    if dtype != "auto" or not is_cpu:
        return dtype
    flags = cpu_flags() if flags is None else flags
    return "bfloat16" if flags & BF16_CPU_FLAGS else "float32"


def configure_runtime_env(root: Path | None = None) -> dict[str, str]:
    """Set the LLM runtime environment variables that are not already set.

    Call it before importing vllm or transformers. Idempotent; never overrides a value the user exported.
    ``HF_HOME`` and ``TMPDIR`` are deliberately left alone: a user's Hugging Face cache must stay reachable
    for ``--model <hf id>``, and ``TMPDIR`` is the user's choice.

    Args:
        root: Data root (``LINKEDQA_HOME``); defaults to :func:`storage.layout.home`.

    Returns:
        The variables this call actually set (name -> value); empty when everything was already set.
    """
    applied: dict[str, str] = {}
    for name, value in runtime_env_defaults(root).items():
        if name not in os.environ:
            os.environ[name] = value
            applied[name] = value
    return applied
