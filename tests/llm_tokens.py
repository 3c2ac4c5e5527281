"""Tokens the session's vLLM engine spent per test, printed at the end of the run (also under pytest-xdist).

``tests/e2e/conftest.py`` records them (and enforces ``@pytest.mark.llm_budget``); under pytest-xdist
(``make test`` runs ``-n 2``) each worker hands its counts to the controller through ``workeroutput``, and the
controller (``tests/conftest.py``, the only conftest it loads) prints the table.
"""

from __future__ import annotations

#: ``{nodeid: (prompt tokens, generated tokens)}`` of the tests in this process (or, on the xdist controller,
#: of every worker's tests once they finished).
TOKENS: dict[str, tuple[int, int]] = {}


def hand_over(config) -> None:
    """On an xdist worker, put this worker's counts into ``workeroutput`` for the controller."""
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["llm_tokens"] = {k: list(v) for k, v in TOKENS.items()}


def take_over(node) -> None:
    """On the xdist controller, merge the counts a finished worker handed over."""
    for nodeid, spent in (getattr(node, "workeroutput", None) or {}).get("llm_tokens", {}).items():
        TOKENS[nodeid] = (int(spent[0]), int(spent[1]))


def summary(terminalreporter) -> None:
    """The tests that made the engine work hardest (prompt + generated tokens), once per run."""
    if not TOKENS or getattr(terminalreporter.config, "workerinput", None) is not None:
        return
    terminalreporter.section("LLM tokens per test (session engine; prompt / generated)")
    for nodeid, (p, c) in sorted(TOKENS.items(), key=lambda kv: -sum(kv[1]))[:15]:
        terminalreporter.write_line(f"{p:>9,} / {c:>7,}  {nodeid}")
