"""The environment of a ``linkedqa`` subprocess in the CLI tests: a user's shell, pointed at the session's Prefect API.

A command that runs a flow starts its own temporary Prefect server unless ``PREFECT_API_URL`` is set (5-8 s per
command on 2 cores). CLI tests that are not about that server's life cycle run their commands against the
session's test API instead: a module opts in with ``pytestmark = pytest.mark.usefixtures("cli_session_api")``
(``tests/conftest.py``) and builds each command's environment with :func:`user_shell_env`. The user's own-server
path stays covered by the demo test, the ELA signal test and ``tests/faults/test_fault_signals.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: ``{"PREFECT_API_URL": <session test API>}`` once the ``cli_session_api`` fixture ran; empty before.
SESSION_API: dict[str, str] = {}


def user_shell_env(home: Path, *, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """This process's environment without the test session's ``PREFECT_*`` settings (and any ``drop`` prefixes),
    with ``LINKEDQA_HOME=home``, a ``PREFECT_HOME`` inside it, the session's API URL and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", *drop))}
    env.update(LINKEDQA_HOME=str(home), PREFECT_HOME=str(home / ".prefect"), **SESSION_API, **extra)
    return env
