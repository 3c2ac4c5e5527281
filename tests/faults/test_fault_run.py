"""A real sharded `linkedqa run search-recall` (no LLM) SIGKILLed while a shard's part is half written, between
shards, before and during metrics.

Guarantee: after each kill the run is not visible (no manifest, absent from the catalog); the re-run finishes
it with every planned question exactly once, parts finished by earlier attempts byte-identical, stored metrics
equal to a recomputation, and predictions equal to an uninterrupted run's in a fresh warehouse.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from faultkit import KILLED, PLANTED_KEY, files_containing, leftovers

from storage import layout
from storage.catalog import done_runs, refresh_catalog
from storage.manifest import read_manifest
from storage.parquet_io import part_files, read_table

N, SHARDS = 24, 3


def _run_args(version: str) -> list[str]:
    return ["run", "search-recall", "--dataset", "webqsp-el", "--split", "test", "--limit", str(N),
            "--shards", str(SHARDS), "--kb", version]


def _invisible(home: Path, run_id: str) -> None:
    assert read_manifest(layout.run_dir(run_id, home)) is None
    assert run_id not in {r for r, _ in done_runs(home)}
    con = duckdb.connect(str(refresh_catalog(home)), read_only=True)
    try:
        for table in ("predictions", "metrics", "runs"):
            n = con.execute(f"select count(*) from {table} where run_id = ?", [run_id]).fetchall()[0][0]
            assert n == 0, table
    finally:
        con.close()


def _stable(rows: list[dict]) -> dict[str, tuple]:
    return {r["question_id"]: (r["shard"], r["predicted_entities"], r["answers"],
                               sorted(dict(r["scores"] or {}).items()), r["error"]) for r in rows}


@pytest.mark.timeout(400)
def test_run_killed_between_shards_and_during_metrics_resumes_exactly(cli, ref_kb, tmp_path):
    """Kill mid-write of shard 1's part, after shard 1's part, after shard 2's part, at finalize start, after the
    metrics part."""
    home, version = ref_kb
    args = _run_args(version)
    runs = layout.runs_root(home)
    before = {p.name for p in runs.iterdir()} if runs.is_dir() else set()

    rc, out = cli(home, "shard-torn:1", args)  # killed while writing shard 0's part: a torn temp file, no part
    assert rc == KILLED, out[-2000:]
    (run_id,) = {p.name for p in runs.iterdir()} - before
    rdir = layout.run_dir(run_id, home)
    assert part_files(rdir / "predictions") == [] and len(leftovers(rdir)) == 1
    _invisible(home, run_id)

    rc, out = cli(home, "shard-written:1", args)
    assert rc == KILLED, out[-2000:]
    rdir = layout.run_dir(run_id, home)
    preds = rdir / "predictions"
    first = part_files(preds)
    assert len(first) == 1
    kept = {p.name: p.read_bytes() for p in first}
    _invisible(home, run_id)

    rc, out = cli(home, "shard-written:1", args)  # shard 0 is skipped, so this kill follows shard 1's part
    assert rc == KILLED, out[-2000:]
    assert len(part_files(preds)) == 2
    assert all((preds / n).read_bytes() == b for n, b in kept.items())
    kept = {p.name: p.read_bytes() for p in part_files(preds)}
    _invisible(home, run_id)

    rc, out = cli(home, "finalize", args)  # every shard done, no metrics yet
    assert rc == KILLED, out[-2000:]
    assert len(part_files(preds)) == SHARDS and not part_files(rdir / "metrics")
    _invisible(home, run_id)

    rc, out = cli(home, "metrics-written", args)  # metrics part published, runs part and manifest not
    assert rc == KILLED, out[-2000:]
    assert part_files(rdir / "metrics") and not part_files(rdir / "runs")
    _invisible(home, run_id)

    rc, out = cli(home, "none", args)
    assert rc == 0, out[-3000:]
    assert run_id in out.split(), out[-2000:]  # the run id line (Prefect may log after it)
    manifest = read_manifest(rdir)
    assert manifest["row_counts"]["predictions"] == N and manifest["n_errors"] == 0
    assert all((preds / n).read_bytes() == b for n, b in kept.items())  # finished shards never rewritten
    assert len(part_files(preds)) == SHARDS and leftovers(rdir) == []
    from tasks.runs.config import load_plan
    from tasks.runs.evaluate import recompute_metrics

    rows = read_table(preds, "predictions").to_pylist()
    ids = [r["question_id"] for r in rows]
    assert len(ids) == len(set(ids)) == N and sorted(ids) == sorted(load_plan(run_id, home).question_ids)
    recomputed, stored = recompute_metrics(run_id, home)
    stored_by = {r["metric"]: r["value"] for r in stored}
    for r in recomputed:
        assert stored_by[r["metric"]] == pytest.approx(r["value"]), r["metric"]
    con = duckdb.connect(str(layout.catalog_path(home)), read_only=True)
    try:
        assert con.execute("select count(*) from predictions where run_id = ?", [run_id]).fetchall()[0][0] == N
    finally:
        con.close()

    # the same run, uninterrupted, in a fresh warehouse holding a copy of the KB: identical predictions.
    # It runs with HOME, TMPDIR and the working directory pointed at empty folders: files only under LINKEDQA_HOME
    fresh = tmp_path / "fresh"
    shutil.copytree(layout.kb_dir(version, home), layout.kb_dir(version, fresh))
    outside = {name: tmp_path / "outside" / name for name in ("home", "tmp", "cwd")}
    for d in outside.values():
        d.mkdir(parents=True)
    rc, out = cli(fresh, "none", args, cwd=outside["cwd"],
                  env={"HOME": str(outside["home"]), "TMPDIR": str(outside["tmp"]), "PYTHONDONTWRITEBYTECODE": "1",
                       **{f"XDG_{k}_HOME": str(outside["home"] / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}})
    assert rc == 0, out[-3000:]
    assert {n: sorted(p.name for p in d.rglob("*")) for n, d in outside.items()} == {n: [] for n in outside}
    assert run_id in out.split(), out[-2000:]  # the run id line (Prefect may log after it)
    ref_rows = read_table(layout.run_dir(run_id, fresh) / "predictions", "predictions").to_pylist()
    assert _stable(ref_rows) == _stable(rows)

    # secrets: the planted key (in every subprocess's environment) is in no file under either warehouse
    assert files_containing(home, PLANTED_KEY) == [] and files_containing(fresh, PLANTED_KEY) == []
