"""Benchmark: ``linkedqa kb build`` end to end against staging alone, the same input in the same run.

Target: the end-to-end build within 1.5x of staging alone on the 510 MB input (start-up, Prefect server and
merge measured separately). Input: the ``bench_ingest`` dump, real Wikidata dump lines with ids rewritten,
``--mb`` MB of plain JSON (default 500). Measured, each in fresh processes:

* **staging alone**, the baseline: the dump's 2 byte-range shards staged by 2 processes at once
  (``tasks.kb.stage.stage_shard``, the label languages ``kb build`` keeps by default); the slowest shard's own
  time, and the processes' wall with their Python start-up;
* **the command's temporary Prefect server alone**: spawned as the CLI spawns it, to its first health answer,
  once creating Prefect's database and once with the database it left;
* **``linkedqa kb build --wikidata F --shards 2 --workers 2``** through the real CLI, ``--rounds`` times in each
  of three settings, alternating: a new ``LINKEDQA_HOME`` (a user's first command: its server creates Prefect's
  database), a home whose Prefect database exists (the KB removed between rounds: any later command), and
  against a Prefect server already running (``prefect server start``, started here and stopped by its pid: the
  ``make serve`` case). For each: wall, CPU of the command's process tree (plus the running server's), the
  flow's own time (``ready in``), the merge (KB manifest) and the rows, checked equal to staging alone's.

Prints each setting's median wall and its ratio to staging alone.

Run: ``.venv/bin/python -m tests.bench.bench_build [--mb 500] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from tests.bench.bench_ingest import ROOT, _parallel, make_dump, real_lines
from tests.procs import free_port, prefect_free_env, stop_group

STAGE = r'''
import sys, time
from pathlib import Path
from tasks.dumps.base import byte_shards
from tasks.kb.plan import DEFAULT_LANGUAGES, InputSpec
from tasks.kb.stage import stage_shard
path, out, nshards, index = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
shard = byte_shards(path, nshards)[index]
spec = InputSpec(kind="wikidata-json", path=str(path), source="wikidata-json", shards=(shard,),
                 languages=DEFAULT_LANGUAGES)
t0 = time.perf_counter()
rec = stage_shard("bench", spec, shard, out)
print(time.perf_counter() - t0, sum(rec["rows"].values()))
'''

BOOT = r'''
import time
t0 = time.perf_counter()
from flows.cli import prefect_server
prefect_server.spawn_ephemeral_server()
prefect_server.bind_ephemeral_server()
print(time.perf_counter() - t0)
'''

SETTINGS = ("new home", "existing Prefect database", "running server")
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _boot(prefect_home: Path) -> float:
    """Seconds from a fresh interpreter to the temporary server's first health answer."""
    prefect_home.mkdir(parents=True, exist_ok=True)  # as the CLI's setup_env makes it
    out = subprocess.run([sys.executable, "-c", BOOT], cwd=ROOT, env=prefect_free_env(PREFECT_HOME=str(prefect_home)),
                         capture_output=True, text=True, timeout=300)
    if out.returncode:
        raise RuntimeError(f"server boot failed: {out.stderr[-2000:]}")
    return float(out.stdout.split()[-1])


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "linkedqa"
    return [str(script)] if script.exists() else [sys.executable, "-m", "flows.cli"]


def _tree_cpu(proc: psutil.Process) -> float:
    """CPU seconds of a process and its children so far."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def _build(dump: Path, home: Path, server: psutil.Process | None, api_url: str | None) -> dict:
    """One ``kb build`` through the real CLI: wall, CPU, flow time, merge seconds, staged rows."""
    extra = {"LINKEDQA_HOME": str(home)} | ({"PREFECT_API_URL": api_url} if api_url else {})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    srv0 = _tree_cpu(server) if server else 0.0
    t0 = time.perf_counter()
    out = subprocess.run([*_cli(), "kb", "build", "--wikidata", str(dump), "--shards", "2", "--workers", "2"],
                         cwd=ROOT, env=prefect_free_env(**extra), capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise RuntimeError(f"kb build failed ({out.returncode}): {out.stderr[-2000:]}")
    m = re.search(r"KB (\S+) ready in ([0-9.]+)s", out.stdout)
    if not m:
        raise RuntimeError(f"no 'ready in' line in: {out.stdout[-2000:]}")
    manifest = json.loads((home / "kb" / m.group(1) / "manifest.json").read_text())
    return {"wall": wall, "flow": float(m.group(2)),
            "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "server_cpu": (_tree_cpu(server) - srv0) if server else 0.0,
            "merge": sum(manifest["merge_seconds"].values()),
            "rows": sum(sum(s["rows"].values()) for s in manifest["shards"])}


def _start_server(prefect_home: Path) -> tuple[subprocess.Popen, str]:
    """``prefect server start`` on a free loopback port, healthy; the caller stops it by its pid."""
    port = free_port()
    prefect = Path(sys.executable).parent / "prefect"
    proc = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=prefect_free_env(PREFECT_HOME=str(prefect_home), PREFECT_UI_ENABLED="false"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prefect server start exited with {proc.returncode}")
        try:
            with _NO_PROXY.open(f"{url}/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.2)
    stop_group(proc)
    raise RuntimeError("prefect server start did not answer within 180 s")


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", default=os.environ.get("LINKEDQA_DATA", str(ROOT.parent / "shared" / "data")))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lqa-bench-build-") as tmp:
        tmp = Path(tmp)
        dump = tmp / "dump.json"
        mb = make_dump(real_lines(Path(a.data)), a.mb, dump) / 1e6
        print(f"input: {mb:.0f} MB plain JSON dump of real entity lines (ids rewritten); {os.cpu_count()} cores; "
              f"kb build --shards 2 --workers 2, {a.rounds} rounds per setting, alternating")

        t0 = time.perf_counter()
        t_shard, rows_alone = _parallel(STAGE, [[str(dump), str(tmp / "alone"), "2", str(i)] for i in range(2)])
        t_alone = time.perf_counter() - t0
        print(f"staging alone (2 shards, 2 processes): slowest shard {t_shard:5.1f} s; with Python start-up "
              f"{t_alone:5.1f} s ({rows_alone:,.0f} rows)")

        existing = tmp / "existing"  # the home of the second setting; its Prefect database made by this boot
        boot_new = _boot(existing / ".prefect")
        boot_old = _boot(existing / ".prefect")
        print(f"temporary Prefect server alone, to its first health answer: {boot_new:5.1f} s creating its "
              f"database, {boot_old:5.1f} s with it")

        server, url = _start_server(tmp / "server-prefect")
        results: dict[str, list[dict]] = {s: [] for s in SETTINGS}
        try:
            for r in range(a.rounds):
                for setting in SETTINGS:
                    if setting == "new home":
                        home, srv, api = tmp / f"new-{r}", None, None
                    elif setting == "existing Prefect database":
                        home, srv, api = existing, None, None
                        shutil.rmtree(existing / "kb", ignore_errors=True)
                    else:
                        home, srv, api = tmp / f"running-{r}", psutil.Process(server.pid), url
                    res = _build(dump, home, srv, api)
                    if res["rows"] != rows_alone:
                        raise RuntimeError(f"kb build staged {res['rows']:,} rows, staging alone {rows_alone:,.0f}")
                    results[setting].append(res)
                    print(f"  round {r + 1} {setting:<26} wall {res['wall']:5.1f} s  CPU {res['cpu']:5.1f} s"
                          + (f" (+{res['server_cpu']:.1f} s in the server)" if srv else "")
                          + f"  flow {res['flow']:4.1f} s  merge {res['merge']:4.1f} s", flush=True)
        finally:
            stop_group(server)

        print(f"\n{'setting':<28}{'median wall':>12}{'median CPU':>12}{'vs slowest shard':>18}"
              f"{'vs staging processes':>22}")
        for setting, rs in results.items():
            wall = statistics.median(x["wall"] for x in rs)
            cpu = statistics.median(x["cpu"] + x["server_cpu"] for x in rs)
            print(f"{setting:<28}{wall:10.1f} s{cpu:10.1f} s{wall / t_shard:17.2f}x{wall / t_alone:21.2f}x")
        print("target: 1.5x")


if __name__ == "__main__":
    main()
