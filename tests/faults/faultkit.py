"""Shared helpers of the fault-injection tests (constants, inputs, content digests, secret grep)."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

PLANTED_KEY = "sk-test-PLANTED-123"
INJECT = Path(__file__).with_name("inject.py")
KILLED = -signal.SIGKILL


def kb_args(data: Path) -> list[str]:
    """A small explicit KB input set (6 shards: 3 files x 2 byte shards; the KGTK .gz by decompressed bytes)."""
    return ["kb", "build", "--name", "faults",
            "--triples", str(data / "codex/triples/codex-s/valid.txt"), str(data / "codex/triples/codex-s/test.txt"),
            "--kgtk", str(data / "kgtk-arnold/labels.en.tsv.gz"), "--shards", "2"]


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``needle`` (gzip/zstd payloads are not unpacked)."""
    raw = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and raw in p.read_bytes()]


def read_json(path: Path) -> dict:
    """JSON file contents."""
    return json.loads(path.read_text())


def table_digest(folder: Path, table: str) -> tuple[int, str]:
    """(rows, sha256 of the sorted rows) of every complete part of a table folder (order-independent)."""
    from storage.parquet_io import read_table

    rows = read_table(folder, table).to_pylist()
    h = hashlib.sha256()
    for line in sorted(json.dumps(r, sort_keys=True, default=str) for r in rows):
        h.update(line.encode())
        h.update(b"\n")
    return len(rows), h.hexdigest()


def leftovers(root: Path) -> list[Path]:
    """Temp files of atomic writes (``*.tmp-<pid>``, ``_pending-*``) anywhere under ``root``."""
    return [p for p in root.rglob("*") if ".tmp-" in p.name or p.name.startswith("_pending-")]
