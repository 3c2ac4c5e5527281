"""The ``prefect`` commands of docs/howto/schedule.md, run as the page writes them against a real ``prefect server
start`` (its own PREFECT_HOME and SQLite database) with the installed Prefect CLI.

The page's deployments are registered from prefect.yaml as ``make serve`` registers them (nothing serves them, so
the runs stay scheduled and nothing executes). Each ``prefect deployment run`` line creates a run whose parameters
are the deployment's with the given ones replaced by top-level name; the refused example prints what the page
shows; a schedule added with ``prefect deployment schedule create`` is replaced by the file's when the deployments
are registered again; ``prefect work-pool create`` and ``prefect deploy --name`` register the entry for a worker;
the other commands' options are in their ``--help``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli.serve import build_deployments, load_deployment_specs
from tests.flows.test_deployments import ROOT, _start, _tail, _wait_healthy
from tests.procs import free_port, prefect_free_env, stop_group
from tests.unit.test_howto_schedule import PAGE, RUN_FILE, _blocks, command_lines, given_parameters

pytestmark = pytest.mark.slow
#: How deep each ``prefect`` command group's subcommands go (``prefect work-pool create``: 2 words).
DEPTH = {"deploy": 1, "work-pool": 2, "worker": 2, "flow-run": 2, "deployment": 2}


def _shell(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=180)


def _run_id(out: str) -> str:
    m = re.search(r"UUID: ([0-9a-f-]{36})", out)
    assert m, out
    return m.group(1)


def test_the_pages_prefect_commands_on_a_real_server(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tasks.runs.config import RunConfig

    lines = command_lines()
    runs = [line for line in lines if line.startswith("prefect deployment run ") and len(line.split()) > 3]
    refused = "prefect deployment run run_method/nightly-ela --param cfg='{\"limit\": 20}'"
    assert refused in runs
    names = sorted({shlex.split(line)[3] for line in runs})
    specs = {s["name"]: s for s in load_deployment_specs()}
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    log = tmp_path / "server.log"
    env = prefect_free_env(PREFECT_API_URL=api, PREFECT_HOME=str(tmp_path / "client-home"), COLUMNS="120",
                           PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / RUN_FILE).write_text(_blocks("json", PAGE.read_text()[PAGE.read_text().index("<!-- same-run -->"):])[0])
    server = None
    try:
        server = _start([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                         str(port), "--no-ui"], prefect_free_env(PREFECT_HOME=str(tmp_path / "server-home")), log)
        _wait_healthy(api, server, log)
        with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            for d in build_deployments(list(specs.values()), only=[n.split("/")[1] for n in names]):
                d.apply()  # what `make serve` registers (it then serves them; nothing serves them here)

            for line in runs:
                argv = shlex.split(line)
                out = _shell(line, env, tmp_path)
                dep = specs[argv[3].split("/")[1]]
                if line == refused:  # the page's console block: rc 1 and the output it shows
                    shown = _blocks("console")[0].splitlines()
                    assert shown[0] == f"$ {line}" and out.returncode == 1, out
                    assert [s.rstrip() for s in out.stdout.splitlines() if s.strip()] == shown[1:], out.stdout
                    continue
                assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"
                run = client.read_flow_run(_run_id(out.stdout))
                assert run.state.type.value == "SCHEDULED"
                assert run.parameters == {**dep["parameters"], **given_parameters(argv[4:])}, line
                if "cfg" in run.parameters:
                    RunConfig.model_validate(run.parameters["cfg"])

            # a schedule added on the server holds until the file's deployments are registered again
            (create,) = [line for line in lines if line.startswith("prefect deployment schedule create ")]
            out = _shell(create, env, tmp_path)
            assert out.returncode == 0, f"{out.stdout}\n{out.stderr}"
            dep = client.read_deployment_by_name("run_method/nightly-ela")
            assert sorted((s.schedule.cron, s.schedule.timezone) for s in dep.schedules) == [
                ("0 1 * * *", "UTC"), ("30 12 * * 1-5", "Europe/Berlin")]
            (again,) = build_deployments([specs["nightly-ela"]])
            again.apply()
            dep = client.read_deployment_by_name("run_method/nightly-ela")
            assert [(s.schedule.cron, s.schedule.timezone) for s in dep.schedules] == [("0 1 * * *", "UTC")]

            # the worker route: the pool, then `prefect deploy --name`, from the repository root
            for line in ("prefect work-pool create cpu --type process", "prefect deploy --name nightly-ela"):
                assert line in lines
                out = _shell(line, env, ROOT)
                assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"
            dep = client.read_deployment_by_name("run_method/nightly-ela")
            assert dep.work_pool_name == "cpu" and dep.parameters == specs["nightly-ela"]["parameters"]
    finally:
        stop_group(server)
    assert server.returncode is not None, _tail(log)

    # every other command: its subcommand and options are in the installed CLI's help
    seen = set()
    for line in lines:
        argv = shlex.split(line)
        depth = DEPTH[argv[1]] + (argv[1:3] == ["deployment", "schedule"])
        path = argv[1:1 + depth]
        options = [a.split("=")[0] for a in argv if a.startswith("--")]
        if (key := (tuple(path), tuple(options))) in seen:
            continue
        seen.add(key)
        out = _shell(" ".join(["prefect", *path, "--help"]), env, tmp_path)
        assert out.returncode == 0 and f"Usage: prefect {' '.join(path)} " in out.stdout, out.stdout
        assert [o for o in options if o not in out.stdout] == [], line
