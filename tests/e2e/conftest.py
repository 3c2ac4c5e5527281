"""E2E fixtures: ONE real vLLM engine (embedded model) for the whole test session.

The embedded model is converted once (~65 s, 1.27 GB) into a persistent folder, reused by every later test
run: ``$LINKEDQA_MODELS_CACHE`` when set, else ``<repo>/warehouse/models`` (git-ignored; the same place
``make demo`` uses with the default ``LINKEDQA_HOME``). vLLM / torch-inductor caches go to
``<repo>/warehouse/cache``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import layout
from tests.llm_tokens import TOKENS, hand_over


@pytest.fixture(scope="session")
def embedded_models_root() -> Path:
    """Persistent models root shared by test runs (see the module docstring)."""
    env = os.environ.get("LINKEDQA_MODELS_CACHE")
    return Path(env).resolve() if env else layout.models_root(layout.REPO_ROOT / "warehouse")


@pytest.fixture(scope="session")
def embedded_llm(embedded_models_root: Path) -> Iterator:
    """The embedded model on a real in-process vLLM engine (``max_model_len=4096``), shared by the session."""
    from tasks.llm.env import configure_runtime_env

    configure_runtime_env(layout.REPO_ROOT / "warehouse")  # before vllm is imported
    from tasks.llm.models import prepare_embedded_model
    from tasks.llm.types import EngineConfig
    from tasks.llm.vllm_backend import VLLMBackend

    prepare_embedded_model(embedded_models_root)
    # vLLM's CPU platform exports LD_PRELOAD (torch's libgomp, its tcmalloc) for engine processes it would spawn;
    # in-process it only reaches this worker's later subprocesses (the CLI tests' commands, which a user starts
    # without it), and a preloaded libgomp ignores the OMP_WAIT_POLICY set in Python. Keep the worker's own.
    preload = os.environ.get("LD_PRELOAD")
    backend = VLLMBackend(EngineConfig(max_model_len=4096), models_root=embedded_models_root)
    if preload is None:
        os.environ.pop("LD_PRELOAD", None)
    else:
        os.environ["LD_PRELOAD"] = preload
    yield backend
    backend.close()


# ------------------------------------------------------------------ token budgets of the LLM tests
_NO_TOKENS = {"prompt_tokens": 0, "completion_tokens": 0}
#: The engine's counters when a test's setup began: before the module- or session-scoped fixtures it sets up,
#: which this module's function-scoped budget fixture comes after (their LLM calls count for that test).
_USAGE_AT_SETUP = pytest.StashKey[dict]()


def _usage_now() -> dict:
    import sys

    usage = sys.modules.get("tasks.llm.vllm_backend")  # not imported yet: nothing was spent
    return dict(usage.USAGE) if usage else dict(_NO_TOKENS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    item.stash[_USAGE_AT_SETUP] = _usage_now()
    return (yield)


@pytest.fixture(autouse=True)
def _llm_token_budget(request: pytest.FixtureRequest) -> Iterator[None]:
    """Count the tokens this process's engine spends in each test; enforce ``@pytest.mark.llm_budget``.

    ``@pytest.mark.llm_budget(prompt=P, completion=C)``: the test fails when the session engine processed more
    than P prompt or C generated tokens during it (the worst case that keeps `make test` within 30 min on a
    2-core CPU without AVX-512; a test's CLI subprocesses bound theirs by their command-line limits instead).
    A test's count starts with its setup, so the LLM calls of a module-scoped fixture count for the first test
    that uses it.
    """
    before = request.node.stash.get(_USAGE_AT_SETUP, None) or _usage_now()
    yield
    after = _usage_now()
    spent = (after["prompt_tokens"] - before["prompt_tokens"], after["completion_tokens"] - before["completion_tokens"])
    if any(spent):
        TOKENS[request.node.nodeid] = spent
    mark = request.node.get_closest_marker("llm_budget")
    if mark is not None:
        prompt, completion = mark.kwargs["prompt"], mark.kwargs["completion"]
        assert spent[0] <= prompt and spent[1] <= completion, (
            f"LLM token budget exceeded: {spent[0]:,} prompt / {spent[1]:,} generated tokens, "
            f"budget {prompt:,} / {completion:,}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, this worker hands its token counts to the controller (``tests/llm_tokens.py``)."""
    hand_over(session.config)


@pytest.fixture(scope="module")
def matrix_env(tmp_path_factory: pytest.TempPathFactory, data_root: Path,
               embedded_models_root: Path) -> Iterator[tuple[Path, str]]:
    """``(LINKEDQA_HOME, base URL)`` of a home of the module's own with the matrix KBs, questions and vLLM server
    (``tests.e2e.matrix_home``)."""
    from tests.e2e.matrix_home import serve_matrix

    yield from serve_matrix(tmp_path_factory.mktemp("matrix") / "warehouse", data_root, embedded_models_root)
