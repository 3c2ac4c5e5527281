"""Shared fixtures: real data root (fails loudly when missing), an isolated LINKEDQA_HOME per test."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import layout
from tests import llm_tokens

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under pytest-xdist (``make test`` runs ``-n 2``), every test under ``tests/e2e`` goes to one worker.

    They start the real vLLM engine (one in-process per session, plus those of the CLI subprocesses they run):
    run in order on one worker they keep the machine at two engines at most (~14 GB of 24), convert the
    embedded model once, and leave the other worker the tests that mostly wait on subprocesses and servers.
    A scheduler rather than ``--dist loadgroup``: pytest-xdist 3.8 marks a group by rewriting ``item._nodeid``,
    which pytest 9.2 no longer reads, so ``xdist_group`` marks are silently ignored.
    Other ``--dist`` modes are left to xdist.
    """
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class E2EOnOneWorker(LoadScopeScheduling):
        """xdist's scope scheduling with two kinds of scope: all of ``tests/e2e``, and every other single test."""

        def _split_scope(self, nodeid: str) -> str:
            return "tests/e2e" if nodeid.startswith("tests/e2e/") else nodeid

    return E2EOnOneWorker(config, log)


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The real shared data folder (LINKEDQA_DATA); a missing folder is an error, never a skip."""
    root = layout.data_root(required=False)
    if not root.is_dir():
        pytest.fail(f"real data not found at {root}: set LINKEDQA_DATA to ../shared/data", pytrace=False)
    return root


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh LINKEDQA_HOME for one test."""
    h = tmp_path / "warehouse"
    monkeypatch.setenv("LINKEDQA_HOME", str(h))
    return h


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory):
    """One temporary Prefect API (SQLite) for the whole session (Prefect's own test harness)."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect_home"))
    os.environ["PREFECT_MEMO_STORE_PATH"] = os.path.join(os.environ["PREFECT_HOME"], "memo_store.toml")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from prefect.testing.utilities import prefect_test_harness

    from flows.cli.prefect_server import drop_flow_heartbeats, uvicorn_dies_with_this_process

    with contextlib.ExitStack() as stack:
        with uvicorn_dies_with_this_process():  # a pytest killed by SIGTERM/SIGKILL takes its server along
            stack.enter_context(prefect_test_harness(server_startup_timeout=180))
        stack.enter_context(drop_flow_heartbeats())  # as a command's own server: it ends with the session
        yield


@pytest.fixture(scope="session")
def prefect_api(prefect_harness) -> str:
    """URL of the session's Prefect test API, for CLI subprocesses.

    A ``linkedqa`` command that runs a flow starts its own temporary Prefect server unless ``PREFECT_API_URL`` is
    set (5-8 s per command on 2 cores). CLI tests that are not about that server's life cycle pass this URL;
    the user's path (no ``PREFECT_*`` in the environment, own server) stays covered by the demo test, the ELA
    signal test and ``tests/faults/test_fault_signals.py``.
    """
    from prefect.settings import PREFECT_API_URL

    return str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def cli_session_api(prefect_api: str) -> None:
    """Points :func:`tests.cli_env.user_shell_env` at the session's Prefect test API (opt in per module with
    ``pytestmark = pytest.mark.usefixtures("cli_session_api")``)."""
    from tests.cli_env import SESSION_API

    SESSION_API["PREFECT_API_URL"] = prefect_api


@pytest.fixture(scope="session")
def session_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LINKEDQA_HOME shared by the session's end-to-end tests (the sample KB copied into it once)."""
    h = tmp_path_factory.mktemp("session_home") / "warehouse"
    h.mkdir()
    return h


def _run_shared_dir(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """A folder shared by every process of this pytest run: the run's basetemp, above the xdist workers' own
    (``<basetemp>/popen-gwN``). Told by the worker's own config, not by ``PYTEST_XDIST_WORKER``, which a nested
    pytest started by a test inherits."""
    shared = tmp_path_factory.getbasetemp()
    return shared.parent if hasattr(config, "workerinput") else shared


def build_once(shared: Path, name: str, build: Callable[[Path], str]) -> tuple[Path, str]:
    """``(folder, version)`` of what ``build(folder)`` makes, built once for every process of the run.

    The first caller builds in ``<name>.building-<pid>``, writes the returned version into it and renames it to
    ``<name>`` (atomic: the folder exists only when complete); the others wait on ``<name>.lock`` and reuse it.
    A builder that died leaves only its own ``.building-`` folder.
    """
    from filelock import FileLock  # heavy: only the sessions that need a shared build take the lock

    done = shared / name
    with FileLock(str(shared / f"{name}.lock"), timeout=1800):
        if not done.is_dir():
            tmp = shared / f"{name}.building-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            (tmp / "VERSION").write_text(build(tmp))
            tmp.rename(done)
    return done, (done / "VERSION").read_text()


@pytest.fixture(scope="session")
def sample_kb(session_home: Path, data_root: Path, prefect_harness, tmp_path_factory: pytest.TempPathFactory,
              pytestconfig: pytest.Config) -> str:
    """The sample KB built from every real file once per pytest run, through the real Prefect flow.

    The first xdist worker that needs it builds it in a warehouse of the run's shared folder (:func:`build_once`);
    every worker copies that warehouse into its own ``session_home`` and rebuilds the catalog there, the only file
    that names its folder (each worker's tests write runs into their own ``session_home``).
    """
    from flows.build_kb import build_kb
    from storage.catalog import refresh_catalog
    from tasks.kb.plan import make_plan, sample_inputs

    def build(folder: Path) -> str:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("LINKEDQA_HOME", str(folder / "warehouse"))
            return build_kb(make_plan("sample", sample_inputs(data_root)), workers=1).version

    built, version = build_once(_run_shared_dir(tmp_path_factory, pytestconfig), "sample-kb", build)
    shutil.copytree(built / "warehouse", session_home, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(layout.catalog_path(session_home).name))
    refresh_catalog(session_home)
    return version


@pytest.fixture(scope="session")
def tog_kb_template(tmp_path_factory: pytest.TempPathFactory, data_root: Path,
                    pytestconfig: pytest.Config) -> tuple[Path, str]:
    """``(warehouse, version)`` of ``kbkit.build_tog_kb``'s KB with its dense entity and entity BM25 indexes,
    built once per pytest run and shared by the xdist workers (:func:`build_once`); read-only: copy it with
    ``kbkit.copy_tog_kb`` to run anything in it."""
    from tests.unit.kbkit import build_tog_template

    built, version = build_once(_run_shared_dir(tmp_path_factory, pytestconfig), "tog-kb",
                                lambda folder: build_tog_template(folder / "warehouse", data_root))
    return built / "warehouse", version


@pytest.fixture()
def kb_home(sample_kb: str, session_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """LINKEDQA_HOME pointed at the session warehouse holding the sample KB; returns the KB version."""
    monkeypatch.setenv("LINKEDQA_HOME", str(session_home))
    return sample_kb


# ---------------------------------------------------------------- no server may outlive the session
_SESSION_START = __import__("time").time()
# Every process this session starts inherits this tag, so the leak check below never touches the servers of
# another pytest (or `linkedqa`) running beside this one on the same machine.
_SESSION_TAG = f"{os.getpid()}-{_SESSION_START}"
os.environ["LINKEDQA_TEST_SESSION"] = _SESSION_TAG


def _orphaned_servers() -> list:
    """Prefect/uvicorn or Oxigraph processes of this checkout's venv, started by this session (they carry its
    ``LINKEDQA_TEST_SESSION`` tag), whose parent died (re-parented to init or a subreaper): servers a test
    started and did not stop."""
    import sys

    import psutil

    venv = str(Path(sys.executable).parent.parent)
    out = []
    # No filter on create_time: psutil gives it as /proc/stat's btime plus ticks since boot, and btime moves with
    # every step of the wall clock, so a process started after this one can read as older than _SESSION_START
    # (a probe went unseen once in `make test`, its nested session finding nothing: of this check's conditions
    # only that one depends on the clock). The tag alone is exact.
    trace = os.environ.get("LINKEDQA_TEST_LEAK_TRACE")  # a file: what the guard looked at, for the harness test
    seen = []
    for p in psutil.process_iter(["pid", "ppid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if p.pid == os.getpid():
            continue
        if venv in cmd and ("uvicorn" in cmd or "oxigraph" in cmd):
            try:
                tag = p.environ().get("LINKEDQA_TEST_SESSION")
            except psutil.Error as exc:
                seen.append(f"{p.pid}: environ unreadable {exc!r}")
                continue
            if tag != _SESSION_TAG:
                seen.append(f"{p.pid}: tag {tag!r} is not this session's {_SESSION_TAG!r}")
                continue
            try:
                parent = psutil.Process(p.info["ppid"])
                parent_cmd = " ".join(parent.cmdline())
                seen.append(f"{p.pid}: ppid {parent.pid} {parent_cmd[:80]!r}")
                if parent.pid == 1 or venv not in parent_cmd:
                    out.append(p)
            except psutil.Error as exc:
                seen.append(f"{p.pid}: parent {p.info['ppid']} unreadable {exc!r}")
                out.append(p)
    if trace:
        with open(trace, "a") as f:
            f.write(f"guard in pid {os.getpid()} (tag {_SESSION_TAG}): " + ("; ".join(seen) or "nothing") + "\n")
    return out


#: Servers that xdist workers found left running (``pytest_testnodedown``, controller side).
_LEAKED_ON_WORKERS: list[str] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when a test left a server running (killing it, so CI machines stay clean).

    Under pytest-xdist each worker checks the servers its own tests started (they carry its tag) and hands the
    list to the controller, which fails the run: a worker's own exit status is not the run's.
    """
    leaked = _orphaned_servers()
    if leaked:  # a server whose parent just exited gets its parent-death signal: give it time to go
        import psutil

        # graceful uvicorn shutdown is slow under load; the harness test's probe never goes, so it waits less
        grace = float(os.environ.get("LINKEDQA_TEST_LEAK_GRACE_S", "30"))
        _gone, leaked = psutil.wait_procs(leaked, timeout=grace)
    lines = [f"  pid {p.pid}: {' '.join(p.info['cmdline'] or [])[:160]}" for p in leaked]
    for p in leaked:
        with contextlib.suppress(Exception):
            p.kill()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["leaked_servers"] = lines
    lines += _LEAKED_ON_WORKERS
    if lines:
        print("\nERROR: servers left running by the tests (now killed):\n" + "\n".join(lines))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # noqa: ARG001 - pytest-xdist hook, controller side
    """Merge a finished xdist worker's LLM token counts (``tests/llm_tokens.py``) and the servers it found left
    running (:func:`pytest_sessionfinish`)."""
    llm_tokens.take_over(node)
    _LEAKED_ON_WORKERS.extend((getattr(node, "workeroutput", None) or {}).get("leaked_servers", []))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001 - pytest hook
    """The tests that made the session engine work hardest (prompt + generated tokens)."""
    llm_tokens.summary(terminalreporter)
