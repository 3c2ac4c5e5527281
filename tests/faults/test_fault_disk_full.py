"""Disk full, simulated with a file-size limit (``RLIMIT_FSIZE``) in a subprocess: a write past the limit fails
with EFBIG (SIGXFSZ ignored), exactly where a full disk would fail with ENOSPC.

Guarantee: ``write_table`` (every published part), ``PartWriter`` (KB staging and merge parts) and
``write_json_atomic`` (markers, plans, manifests) raise a clear ``OSError``, the final file never appears (an
earlier complete version of it is kept intact), and no temp file is left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from storage import layout

CHILD = textwrap.dedent(r"""
    import errno, json, os, resource, signal, sys
    from pathlib import Path
    from storage.manifest import write_json_atomic
    from storage.parquet_io import PartWriter, write_table

    out = Path(sys.argv[1])
    rows = [{"run_id": os.urandom(32).hex(), "method": "m", "dataset": "d", "split": "s",
             "metric": os.urandom(32).hex(),
             "value": float(i), "n": i} for i in range(20_000)]
    small = rows[:3]
    # complete older versions, written before the "disk" fills up
    write_table(small, "metrics", out / "t" / "part-00000-of-00001.parquet")
    write_json_atomic(out / "j" / "manifest.json", {"ok": True})
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))
    report = {}

    def attempt(name, fn):
        try:
            fn()
            report[name] = "no error"
        except OSError as exc:
            report[name] = [exc.errno, str(exc)]

    attempt("write_table", lambda: write_table(rows, "metrics", out / "t" / "part-00000-of-00001.parquet"))

    def stream():
        with PartWriter("metrics", out / "p" / "part-00000-of-00001.parquet", batch_rows=1000) as w:
            w.extend(rows)

    attempt("part_writer", stream)

    def at_close():  # every row buffered: the disk fills in close() (the with-block itself succeeded)
        with PartWriter("metrics", out / "c" / "part-00000-of-00001.parquet", batch_rows=100_000) as w:
            w.extend(rows)

    attempt("part_writer_close", at_close)
    attempt("json", lambda: write_json_atomic(out / "j" / "manifest.json", {"rows": rows}))
    print(json.dumps(report))
""")


@pytest.mark.timeout(120)
def test_writes_fail_cleanly_when_the_disk_is_full(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out)], cwd=layout.REPO_ROOT, capture_output=True,
                          text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("write_table", "part_writer", "part_writer_close", "json"):
        assert isinstance(report[name], list), f"{name}: {report[name]}"
        assert report[name][0] == 27, report[name]  # EFBIG ("File too large"); ENOSPC on a real full disk
    # the earlier complete versions are intact; the failed ones never became visible
    import pyarrow.parquet as pq

    assert pq.read_table(out / "t" / "part-00000-of-00001.parquet").num_rows == 3
    assert json.loads((out / "j" / "manifest.json").read_text()) == {"ok": True}
    assert not (out / "p" / "part-00000-of-00001.parquet").exists()
    assert not (out / "c" / "part-00000-of-00001.parquet").exists()
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert names == ["j/manifest.json", "t/part-00000-of-00001.parquet"], names  # no temp file left


# ---------------------------------------------------------------- a real full filesystem (tmpfs, ENOSPC)
# The script runs in a private user + mount namespace (`unshare -rm`, no root needed where unprivileged user
# namespaces are enabled), so the tmpfs is invisible to the rest of the machine and vanishes with the script.
# After each step it copies the warehouse to real disk for the assertions below.
TMPFS_SCRIPT = r"""
set -u
M="$1"; OUT="$2"; shift 2
mount -t tmpfs -o size=1m tmpfs "$M" || exit 90
export LINKEDQA_HOME="$M/wh"
# step NAME POINT ARGS... (POINT: inject.py's fault point, "none" here): run the CLI, record its exit code
# and output, copy the warehouse out
step() {
    local name="$1"; shift
    "$PYTHON" "$INJECT" "$@" >"$OUT/$name.log" 2>&1; echo $? >"$OUT/$name.rc"
    mkdir -p "$OUT/$name"; cp -a "$M/wh/." "$OUT/$name/" 2>/dev/null
    df -k "$M" | tail -1 >"$OUT/$name.df"
}
step kb-full "${KB_ARGS[@]}"
mount -o remount,size=64m "$M"
step kb-ok "${KB_ARGS[@]}"
used=$(df -k --output=used "$M" | tail -1)
mount -o remount,size=$((used + 64))k "$M"   # 64 KiB of headroom: the run's first table write cannot fit
step run-full "${RUN_ARGS[@]}"
mount -o remount,size=64m "$M"
step run-ok "${RUN_ARGS[@]}"
"""


def _namespaces_available() -> str | None:
    """None when `unshare -rm` can mount a tmpfs here, else the reason."""
    import shutil as sh

    if sh.which("unshare") is None:
        return "no unshare(1) (util-linux)"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True, timeout=30)
    return None if probe.returncode == 0 else f"no user+mount namespaces: {probe.stderr.strip()[:200]}"


@pytest.mark.timeout(400)
def test_kb_build_and_run_on_a_really_full_tmpfs(cli, ref_kb, data_root, tmp_path):
    """ENOSPC from a 1 MiB tmpfs: `kb build` and `run` exit 5 with a one-line error, publish nothing, leave no
    temp file; after the filesystem grows, the same commands finish (KB tables equal the reference build)."""
    reason = _namespaces_available()
    if reason:
        pytest.skip(f"real-tmpfs check needs a private mount namespace ({reason}); RLIMIT test above still runs")
    import duckdb
    from faultkit import INJECT, kb_args, leftovers, table_digest

    from storage.catalog import done_kb_versions, done_runs, refresh_catalog
    from storage.manifest import read_manifest
    from storage.parquet_io import read_table
    from storage.schemas import KB_TABLES

    ref_home, version = ref_kb
    mnt, out = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    out.mkdir()
    run_args = ["run", "search-recall", "--dataset", "webqsp-el", "--split", "test", "--limit", "24",
                "--kb", version]
    script = ("KB_ARGS=(" + " ".join(f"'{a}'" for a in ["none", *kb_args(data_root)]) + ")\n"
              + "RUN_ARGS=(" + " ".join(f"'{a}'" for a in ["none", *run_args]) + ")\n" + TMPFS_SCRIPT)
    # the user's default Prefect log level (the fault fixtures' WARNING would add Prefect's task tracebacks)
    env = {**cli.env, "PYTHON": sys.executable, "INJECT": str(INJECT), "PREFECT_LOGGING_LEVEL": "CRITICAL"}
    proc = subprocess.run(["unshare", "-rm", "bash", "-c", script, "tmpfs", str(mnt), str(out)],
                          cwd=layout.REPO_ROOT, env=env, capture_output=True, text=True, timeout=380)
    assert proc.returncode == 0, proc.stderr[-3000:]

    def result(step: str) -> tuple[int, str]:
        return int((out / f"{step}.rc").read_text()), (out / f"{step}.log").read_text(errors="replace")

    def no_space_error(log: str) -> None:
        errors = [line for line in log.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "no space left under LINKEDQA_HOME=" in errors[0], log[-2000:]
        assert "Traceback" not in log and "hint: free space there" in log, log[-2000:]

    # 1. the KB build fills the disk: exit 5, one line, no version published, no temp file
    rc, log = result("kb-full")
    assert rc == 5, log[-3000:]
    no_space_error(log)
    full = out / "kb-full"
    assert done_kb_versions(full) == [] and leftovers(full) == []
    assert not list(full.rglob("manifest.json"))

    # 2. room again: the same command finishes; its tables equal the reference build's
    rc, log = result("kb-ok")
    assert rc == 0, log[-3000:]
    ok = out / "kb-ok"
    assert [v for v, _ in done_kb_versions(ok)] == [version]
    for table in KB_TABLES:
        assert table_digest(layout.kb_dir(version, ok) / table, table) == \
            table_digest(layout.kb_dir(version, ref_home) / table, table), table
    assert leftovers(ok) == []

    # 3. a run on a disk with 64 KiB left: exit 5, the run invisible, the KB intact
    rc, log = result("run-full")
    assert rc == 5, log[-3000:]
    no_space_error(log)
    full = out / "run-full"
    assert done_runs(full) == [] and leftovers(full) == []
    assert not list(full.glob("runs/*/manifest.json"))
    assert [v for v, _ in done_kb_versions(full)] == [version]

    # 4. room again: the run finishes with every question exactly once, and the catalog shows it
    rc, log = result("run-ok")
    assert rc == 0, log[-3000:]
    ok = out / "run-ok"
    ((run_id, manifest),) = done_runs(ok)
    assert run_id in log.split() and manifest["row_counts"]["predictions"] == 24
    ids = [r["question_id"] for r in read_table(layout.run_dir(run_id, ok) / "predictions",
                                                  "predictions").to_pylist()]
    assert len(ids) == len(set(ids)) == 24 and leftovers(ok) == []
    con = duckdb.connect(str(refresh_catalog(ok)), read_only=True)
    try:
        assert con.execute("select count(*) from predictions where run_id = ?", [run_id]).fetchall()[0][0] == 24
    finally:
        con.close()
    assert read_manifest(layout.run_dir(run_id, ok))["n_errors"] == 0
