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
    for name in ("write_table", "part_writer", "json"):
        assert isinstance(report[name], list), f"{name}: {report[name]}"
        assert report[name][0] == 27, report[name]  # EFBIG ("File too large"); ENOSPC on a real full disk
    # the earlier complete versions are intact; the failed ones never became visible
    import pyarrow.parquet as pq

    assert pq.read_table(out / "t" / "part-00000-of-00001.parquet").num_rows == 3
    assert json.loads((out / "j" / "manifest.json").read_text()) == {"ok": True}
    assert not (out / "p" / "part-00000-of-00001.parquet").exists()
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert names == ["j/manifest.json", "t/part-00000-of-00001.parquet"], names  # no temp file left
