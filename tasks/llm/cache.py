"""Persistent LLM response cache: one SQLite file (WAL), keyed by ``ChatRequest.key(backend, model)``.

Inputs: completions from any backend. Output: ``<LINKEDQA_HOME>/cache/llm/responses.sqlite`` (default path
from :func:`default_cache_path`).

Durability and concurrency:

* WAL journal + ``synchronous=NORMAL``: every ``put_many`` is one committed transaction; a process killed
  with SIGKILL afterwards loses nothing (only an OS crash/power loss may drop the last transactions). A run
  killed in the middle of ``put_many`` loses that one batch only; the next run regenerates it.
* Several processes (parallel shards) may read and write the same file: SQLite serialises writers, readers
  never block; ``busy_timeout`` waits for the write lock instead of failing.
* One connection per process and per ``ResponseCache`` object, guarded by a lock (threads may share the
  object); a forked child transparently opens its own connection.
* Completions with ``error`` set are never stored; hits come back with ``cached=True``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from storage import layout
from tasks.llm.types import Completion

_BATCH = 900  # bound parameters per IN (...) query; well under SQLite's limit
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    completion TEXT NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID
"""


def default_cache_path(root: Path | None = None) -> Path:
    """The default cache file: ``<LINKEDQA_HOME>/cache/llm/responses.sqlite``."""
    return layout.cache_dir("llm", root) / "responses.sqlite"


class ResponseCache:
    """SQLite-backed map ``cache key -> Completion``.

    Args:
        path: The SQLite file (its folder is created); default :func:`default_cache_path`.
        busy_timeout_s: How long a writer waits for another process's write lock.
    """

    def __init__(self, path: Path | str | None = None, busy_timeout_s: float = 60.0):
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_ms = int(busy_timeout_s * 1000)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self.hits = 0
        self.misses = 0
        self.puts = 0
        self._connect()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        conn = sqlite3.connect(
            self.path, timeout=self._busy_ms / 1000, check_same_thread=False, isolation_level=None
        )
        conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
        # switching a new database to WAL takes an exclusive lock for which SQLite may not call the busy
        # handler: two processes opening the same new cache at once can get "database is locked" here
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        """Look up many keys with batched ``IN`` queries.

        Args:
            keys: Cache keys (duplicates allowed).

        Returns:
            ``{key: Completion(cached=True)}`` for the keys found; missing keys are absent.
        """
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Completion] = {}
        with self._lock:
            conn = self._connect()
            for i in range(0, len(wanted), _BATCH):
                chunk = wanted[i : i + _BATCH]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(f"SELECT key, completion FROM responses WHERE key IN ({marks})", chunk)
                for key, body in rows:
                    comp = Completion.model_validate_json(body)
                    found[key] = comp.model_copy(update={"cached": True})
            self.hits += len(found)
            self.misses += len(wanted) - len(found)
        return found

    def get(self, key: str) -> Completion | None:
        """One key; ``None`` when absent."""
        return self.get_many([key]).get(key)

    def put_many(self, items: Sequence[tuple[str, Completion]]) -> int:
        """Store completions in one transaction; items with ``error`` set are skipped.

        Args:
            items: ``(key, completion)`` pairs; a later pair with the same key wins.

        Returns:
            The number of rows written.
        """
        now = time.time()
        rows = [
            (key, comp.model_copy(update={"cached": False}).model_dump_json(), now)
            for key, comp in items
            if comp.error is None
        ]
        if not rows:
            return 0
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR REPLACE INTO responses (key, completion, created_at) VALUES (?, ?, ?)", rows
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self.puts += len(rows)
        return len(rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT count(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, object]:
        """Counters of this object plus the size of the store.

        Returns:
            ``{"path", "entries", "bytes", "hits", "misses", "puts"}`` (hits/misses/puts count this object's
            calls; ``bytes`` includes the WAL file).
        """
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {
            "path": str(self.path),
            "entries": len(self),
            "bytes": size,
            "hits": self.hits,
            "misses": self.misses,
            "puts": self.puts,
        }

    def close(self) -> None:
        """Close this process's connection (the object reconnects on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
