"""Manifests: the last file written to a version or run folder; its presence means "complete".

Inputs: dicts (resolved config, input hashes, row counts, timings, per-shard status). Outputs: ``manifest.json``
written atomically. Secrets never go in: ``redact`` drops keys that look like credentials.

A manifest is the done marker (``storage.done``) of a published version or run, under the name ``manifest.json``
(a storage contract): writing, reading and checking go through ``storage.done``, the one mechanism.
``write_json_atomic`` and ``read_json`` live there too and are re-exported here for existing callers.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from storage.done import is_done, mark_done, read_done, read_json, write_json_atomic
from storage.layout import REPO_ROOT

__all__ = [
    "MANIFEST", "config_hash", "file_fingerprint", "git_sha", "manifest_done", "now_iso", "read_json",
    "read_manifest", "redact", "write_json_atomic", "write_manifest",
]

MANIFEST = "manifest.json"
_SECRET_HINTS = ("key", "token", "secret", "password", "authorization")


def now_iso() -> str:
    """Current UTC time, ISO 8601."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def redact(obj: Any) -> Any:
    """Recursively replace values under secret-looking keys with ``"***"``."""
    if isinstance(obj, dict):
        return {
            k: ("***" if any(h in str(k).lower() for h in _SECRET_HINTS) and v else redact(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def write_manifest(folder: Path, content: dict[str, Any]) -> Path:
    """Write ``manifest.json`` last, marking the folder complete.

    Args:
        folder: Version or run folder.
        content: Manifest body; ``written_at`` and ``git_sha`` are added, secrets redacted.

    Returns:
        The manifest path.
    """
    body = redact(dict(content))
    body.setdefault("written_at", now_iso())
    body.setdefault("git_sha", git_sha())
    return mark_done(folder, body, name=MANIFEST)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a folder, or None when the folder is unfinished."""
    return read_done(folder, name=MANIFEST)


def manifest_done(folder: Path) -> bool:
    """Whether the folder is done: its manifest exists (a published result)."""
    return is_done(folder, name=MANIFEST)


def git_sha() -> str:
    """Current commit of the code (``unknown`` outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def file_fingerprint(path: Path) -> dict[str, Any]:
    """Cheap identity of an input file: name, size, mtime and sha256 of its first and last MiB."""
    st = path.stat()
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read(1 << 20))
        if st.st_size > (2 << 20):
            fh.seek(-(1 << 20), os.SEEK_END)
            h.update(fh.read(1 << 20))
    return {"path": str(path), "size": st.st_size, "sha256_head_tail": h.hexdigest()}


def config_hash(obj: Any, n: int = 8) -> str:
    """Stable short hash of a JSON-serialisable object."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:n]
