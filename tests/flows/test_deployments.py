"""The deployments of ``prefect.yaml``: every entrypoint loads and takes its parameters, and one served deployment
runs end to end on a real ``prefect server start`` (its own PREFECT_HOME and SQLite database, not the session's
ephemeral harness)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flows.cli.serve import build_deployments, load_deployment_specs
from tests.procs import free_port, prefect_free_env, stop_group

ROOT = Path(__file__).resolve().parents[2]
PREFECT_YAML = ROOT / "prefect.yaml"
EXPECTED = {  # deployment name -> (flow name, cron or None)
    "weekly": ("build_kb_from_inputs", "0 3 * * 0"),
    "nightly-ela": ("run_method", "0 1 * * *"),
    "nightly-anchorrag": ("run_method", "0 2 * * *"),
    "on-demand": ("render_reports", None),
    "weekly-indexes": ("build_indexes", "0 5 * * 0"),
    "weekly-eval": ("evaluate_run", "0 6 * * 1"),
    "load-on-demand": ("load_benchmarks", None),
    "fetch-on-demand": ("fetch_benchmarks", None),
    "export-on-demand": ("export_kb_ntriples", None),
    "dumps-on-demand": ("download_dumps", None),
}


def test_prefect_yaml_entrypoints_load(data_root: Path, home: Path):
    from cronsim import CronSim
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import Flow, load_flow_from_entrypoint
    from prefect.utilities.callables import parameter_schema
    from prefect.utilities.schema_tools import validate

    from tasks.datasets.registry import load_dataset
    from tasks.runs.checks import check_run_config

    specs = load_deployment_specs(PREFECT_YAML)
    assert {s["name"] for s in specs} == set(EXPECTED)
    for spec in specs:
        name = spec["name"]
        # the real module, never Prefect's placeholder flow (which would hide an ImportError)
        flow = load_flow_from_entrypoint(str(ROOT / spec["entrypoint"]), use_placeholder_flow=False)
        assert isinstance(flow, Flow) and flow.name == EXPECTED[name][0], name
        assert spec.get("description"), f"{name}: no description"
        assert spec["work_pool"]["name"] == "cpu", name
        params = spec.get("parameters") or {}
        validated = flow.validate_parameters(params)  # the flow's signature (pydantic models included)
        schema = parameter_schema(flow.fn).model_dump_for_openapi()  # what the server enforces on new runs
        assert validate(params, schema, raise_on_error=False) == [], name
        crons = [s["cron"] for s in spec.get("schedules") or []]
        assert crons == ([EXPECTED[name][1]] if EXPECTED[name][1] else []), name
        for s in spec.get("schedules") or []:
            CronSchedule(cron=s["cron"], timezone=s["timezone"])  # raises on a bad expression or time zone
            assert next(CronSim(s["cron"], datetime.now(UTC))) > datetime.now(UTC)
        if flow.name == "run_method":
            cfg = validated["cfg"]
            check_run_config(cfg)  # method, --set keys, dataset and method/dataset task fit, as `linkedqa run` checks
            assert cfg.split in load_dataset(cfg.dataset, data_root).counts(), name
    with pytest.raises(ValueError):
        CronSchedule(cron="61 * * * *")
    # the serve entrypoint builds the same deployments from the same file
    built = build_deployments(specs)
    assert [(d.flow_name, d.name) for d in built] == [(f, n) for n, (f, _) in EXPECTED.items()]
    assert [[s.schedule.cron for s in d.schedules] for d in built] == [[c] if c else [] for _, c in EXPECTED.values()]
    with pytest.raises(ValueError, match="unknown deployment"):
        build_deployments(specs, only=["nope"])


# ------------------------------------------------------------------------- a real server
def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    # own session = own process group, so stopping it also stops its children (flow-run subprocesses)
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _tail(log: Path, n: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-n:]) if log.exists() else "(no log)"


def _wait_healthy(api: str, proc: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prefect server exited with {proc.returncode} before it was healthy:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{api}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"prefect server at {api} not healthy after {timeout_s:.0f}s:\n{_tail(log)}")


@pytest.mark.slow
def test_deployment_runs_on_a_real_prefect_server(tmp_path: Path, data_root: Path):
    from cronsim import CronSim
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from storage import layout
    from storage.manifest import read_manifest
    from tasks.kb.plan import plan_from_inputs

    began = datetime.now(UTC)  # the scheduler runs between this and its runs' read below
    q42 = data_root / "wikidata-entities" / "qwikidata" / "wd_Q42.json"  # one real Special:EntityData document
    assert q42.is_file(), q42
    warehouse = tmp_path / "warehouse"
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    server_log, serve_log = tmp_path / "server.log", tmp_path / "serve.log"
    server = serve = None
    try:
        server = _start([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                         str(port), "--no-ui"], prefect_free_env(PREFECT_HOME=str(tmp_path / "server-home")),
                        server_log)
        _wait_healthy(api, server, server_log)
        # serve ONE deployment from the real prefect.yaml (weekly KB rebuild, its cron schedule included)
        serve = _start([sys.executable, "-m", "flows.cli.serve", "--only", "weekly"],
                       prefect_free_env(PREFECT_API_URL=api, PREFECT_HOME=str(tmp_path / "serve-home"),
                            PREFECT_RUNNER_POLL_FREQUENCY="2", LINKEDQA_HOME=str(warehouse),
                            LINKEDQA_DATA=str(data_root)), serve_log)
        with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            assert client.api_url.host == "127.0.0.1" and client.api_url.port == port
            deadline = time.monotonic() + 120
            while True:
                try:
                    dep = client.read_deployment_by_name("build_kb_from_inputs/weekly")
                    break
                except ObjectNotFound:
                    if serve.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"deployment never registered (serve rc={serve.poll()}):\n{_tail(serve_log)}")
                    time.sleep(1)
            assert [(s.schedule.cron, s.schedule.timezone, s.active) for s in dep.schedules] == [
                ("0 3 * * 0", "UTC", True)]
            assert dep.parameters == {"sample": True, "workers": 2}
            assert dep.description and dep.description.startswith("Rebuild the sample KB")
            # the server's scheduler turns the cron into SCHEDULED runs: Sundays 03:00 UTC, the next one first
            by_dep = DeploymentFilter(id=DeploymentFilterId(any_=[dep.id]))
            deadline = time.monotonic() + 60
            while not (scheduled := client.read_flow_runs(deployment_filter=by_dep)):
                if time.monotonic() > deadline:
                    pytest.fail(f"the scheduler created no runs for the cron schedule:\n{_tail(server_log)}")
                time.sleep(1)
            starts = sorted(r.expected_start_time.astimezone(UTC) for r in scheduled)
            assert {r.state.type.value for r in scheduled} == {"SCHEDULED"}
            # the next Sunday 03:00 after the scheduler's pass: after `began`, or one week on if 03:00 fell between
            assert starts[0] in {next(CronSim("0 3 * * 0", began)), next(CronSim("0 3 * * 0", datetime.now(UTC)))}
            assert all(t.weekday() == 6 and (t.hour, t.minute) == (3, 0) for t in starts), starts

            # a run now, on one real entity file instead of the whole sample (seconds, not minutes)
            params = {"sample": False, "name": "q42", "wikidata": [str(q42)], "workers": 1}
            run = client.create_flow_run_from_deployment(dep.id, parameters=params)
            deadline = time.monotonic() + 180
            while not (run := client.read_flow_run(run.id)).state.is_final():
                if serve.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"flow run {run.id} stuck in {run.state.type.value} (serve rc={serve.poll()}):\n"
                                f"{_tail(serve_log)}")
                time.sleep(1)
            assert run.state.is_completed(), f"{run.state.type.value}: {run.state.message}\n{_tail(serve_log)}"
            assert run.deployment_id == dep.id and run.parameters == {**dep.parameters, **params}

        version = plan_from_inputs(name="q42", wikidata=[str(q42)]).version  # the flow's planning path
        manifest = read_manifest(layout.kb_dir(version, warehouse))
        assert manifest is not None, f"no manifest for KB {version} under {warehouse}:\n{_tail(serve_log)}"
        assert manifest["row_counts"]["entities"] >= 1
        assert (warehouse / "catalog.duckdb").is_file()
    finally:
        stop_group(serve)
        stop_group(server)
    assert server.returncode is not None and serve.returncode is not None
