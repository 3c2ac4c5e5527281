"""Fault-injection fixtures: real `linkedqa` subprocesses (SIGKILLed at named points by ``inject.py``).

Subprocesses talk to the session's Prefect test server (``prefect_harness``) instead of starting an ephemeral
one each (about 20 s per process on 2 cores). Every subprocess gets a planted ``OPENAI_API_KEY`` so that the
secrets check can grep what it wrote.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from faultkit import INJECT, PLANTED_KEY, kb_args

from storage import layout


@dataclass
class Cli:
    """Runs ``tests/faults/inject.py POINT ARGS`` with a given LINKEDQA_HOME."""

    env: dict[str, str]
    logs: Path

    def __call__(self, home: Path, point: str, args: list[str], timeout: float = 180,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str]:
        """Run to completion (or to its injected SIGKILL); kill its whole session on the way out.

        Args:
            env: Extra environment variables for this process.
            cwd: Working directory (default: the repository root).

        Returns:
            (return code, combined output).
        """
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{len(list(self.logs.iterdir())):03d}-{point.replace(':', '_')}.log"
        env = {**self.env, "LINKEDQA_HOME": str(home), **(env or {})}
        with open(log, "wb") as fh:
            proc = subprocess.Popen([sys.executable, str(INJECT), point, *args], cwd=cwd or layout.REPO_ROOT, env=env,
                                    stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            finally:
                try:  # the process group it led (its own children, if any), by its id
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if proc.poll() is None:
                    proc.wait(timeout=10)
        return rc, log.read_text(errors="replace")


@pytest.fixture(scope="session")
def cli(prefect_harness, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """Subprocess runner bound to the session's Prefect server, with the planted key in its environment."""
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "PREFECT_HOME": str(tmp_path_factory.mktemp("faults_prefect")),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "LINKEDQA_DATA": str(data_root),
        "OPENAI_API_KEY": PLANTED_KEY,
    })
    return Cli(env, tmp_path_factory.mktemp("faults_logs"))


@pytest.fixture(scope="session")
def ref_kb(cli: Cli, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The small KB built once without faults (the reference); returns (LINKEDQA_HOME, version)."""
    home = tmp_path_factory.mktemp("faults_ref") / "warehouse"
    rc, out = cli(home, "none", kb_args(data_root))
    assert rc == 0, out[-3000:]
    (version,) = [d.name for d in (home / "kb").iterdir() if (d / "manifest.json").is_file()]
    return home, version
