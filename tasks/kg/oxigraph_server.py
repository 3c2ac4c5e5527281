"""A local Oxigraph SPARQL server on loopback (``OxigraphServer``), for tests, benchmarks and users.

Inputs: N-Triples files (``linkedqa kb export-nt``; ``.nt`` or ``.nt.gz``) and an optional store folder.
Outputs: a running ``oxigraph serve`` process on ``127.0.0.1:<free port>`` whose ``query_url`` any SPARQL
client (``tasks.kg.sparql.SparqlKG``) can use; stopped by PID on exit (SIGTERM, then SIGKILL after 5 s).

Loading: ``load_ntriples(path, method=...)``.

* ``"cli"`` (default): stop the server, run ``oxigraph load --location DIR --file F --lenient`` (Oxigraph's bulk
  loader writes sorted SST files directly), restart the server on the same port.
* ``"http"``: ``POST /store?default`` with ``Content-Type: application/n-triples``, in chunks of ``chunk_lines``
  lines (N-Triples is line-based, so any line boundary is a valid split), so memory stays bounded per request.

Measured with ``tests/bench/bench_kg.py`` on the sample KB export (976k triples, 12 MB gzip, 2-core machine):
``cli`` 7.0-7.7 s (127-140k triples/s, server restart included) vs ``http`` 17.9-21.8 s (45-54k triples/s),
so ``cli`` is the default; ``http`` is for loading into a server another process owns.

Large KBs (full Wikidata truthy, Freebase): use Virtuoso (Debian ``virtuoso-opensource``). Bulk load, in
``isql 1111 dba <password>``, with the export folder listed in ``DirsAllowed`` of ``virtuoso.ini``::

    ld_dir('/data/export', '*.nt.gz', 'http://www.wikidata.org/');
    rdf_loader_run();          -- run several in parallel isql sessions, one per core, for speed
    checkpoint;
    SELECT COUNT(*) FROM DB.DBA.load_list WHERE ll_error IS NOT NULL;   -- must be 0

then point ``SparqlKG`` at ``http://127.0.0.1:8890/sparql`` (set ``MaxQueryExecutionTime`` and
``ResultSetMaxRows`` in ``[SPARQL]`` of ``virtuoso.ini`` high enough for ``max_rows``).
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def oxigraph_bin() -> str:
    """Path of the ``oxigraph`` CLI of this interpreter's environment (PyPI package ``oxigraph``)."""
    local = Path(sys.executable).parent / "oxigraph"
    if local.is_file():
        return str(local)
    found = shutil.which("oxigraph")
    if found is None:
        raise FileNotFoundError("oxigraph CLI not found: install the PyPI package 'oxigraph' in this environment")
    return found


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (asked from the OS)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _open_text(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _line_chunks(path: Path, chunk_lines: int) -> Iterator[bytes]:
    buf: list[bytes] = []
    with _open_text(path) as fh:
        for line in fh:
            buf.append(line)
            if len(buf) >= chunk_lines:
                yield b"".join(buf)
                buf = []
    if buf:
        yield b"".join(buf)


class OxigraphServer:
    """``oxigraph serve`` on a free loopback port, as a context manager.

    Example:
        >>> with OxigraphServer() as srv:  # doctest: +SKIP
        ...     srv.load_ntriples(Path("kb.nt.gz"))
        ...     SparqlKG(srv.query_url).labels(["Q42"])
    """

    def __init__(self, store_dir: Path | str | None = None, port: int | None = None, start_timeout_s: float = 30):
        """Configure the server (started by ``start()`` or ``with``).

        Args:
            store_dir: Oxigraph data folder (kept); default a temp folder removed on exit.
            port: TCP port on 127.0.0.1 (default: a free one).
            start_timeout_s: How long to wait for the server to answer.
        """
        self._own_dir = store_dir is None
        self.store_dir = Path(store_dir) if store_dir else None
        self.port = port
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def query_url(self) -> str:
        """SPARQL query endpoint."""
        return f"{self.base_url}/query"

    @property
    def update_url(self) -> str:
        """SPARQL update endpoint."""
        return f"{self.base_url}/update"

    def start(self) -> OxigraphServer:
        """Start the server and wait until it answers.

        Returns:
            self.

        Raises:
            RuntimeError: When the process exits or does not answer within ``start_timeout_s``.
        """
        if self.store_dir is None:
            self.store_dir = Path(tempfile.mkdtemp(prefix="linkedqa-oxigraph-"))
        self.store_dir.mkdir(parents=True, exist_ok=True)
        if self.port is None:
            self.port = free_port()
        if self._log is None:
            self._log = tempfile.TemporaryFile()
        cmd = [oxigraph_bin(), "serve", "--location", str(self.store_dir), "--bind", f"127.0.0.1:{self.port}"]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"oxigraph serve exited with {self.proc.returncode}: {self._log_tail()}")
            if self._answers():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"oxigraph serve did not answer on {self.base_url} within {self.start_timeout_s}s")

    def _answers(self) -> bool:
        req = urllib.request.Request(f"{self.query_url}?query=ASK%7B%7D", headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=1) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def stop(self) -> None:
        """Stop the server by its PID: SIGTERM, then SIGKILL after 5 s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def load_ntriples(self, path: Path | str, method: str = "cli", chunk_lines: int = 500_000) -> float:
        """Load an N-Triples file (``.nt`` or ``.nt.gz``) into the default graph.

        Args:
            path: The file.
            method: ``"cli"`` (bulk loader while the server is stopped, then restart) or ``"http"`` (chunked
                ``POST /store?default`` to the running server).
            chunk_lines: Lines per HTTP request (``"http"`` only).

        Returns:
            Seconds spent loading.

        Raises:
            RuntimeError: When the loader fails or the server rejects a chunk.
        """
        path = Path(path)
        t0 = time.perf_counter()
        if method == "cli":
            running = self.proc is not None
            self.stop()
            if self.store_dir is None:
                self.store_dir = Path(tempfile.mkdtemp(prefix="linkedqa-oxigraph-"))
            cmd = [oxigraph_bin(), "load", "--location", str(self.store_dir), "--lenient", "--format", "nt"]
            with tempfile.TemporaryFile() as log:  # a file, not a pipe: a chatty loader can never block us
                if path.name.endswith(".gz"):
                    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
                    try:
                        with gzip.open(path, "rb") as fh:
                            shutil.copyfileobj(fh, proc.stdin, 1 << 20)
                    except BrokenPipeError:
                        pass  # the loader died; its exit code and output say why
                    finally:
                        proc.stdin.close()
                    code = proc.wait()
                else:
                    code = subprocess.run([*cmd, "--file", str(path)], stdout=log, stderr=subprocess.STDOUT).returncode
                log.seek(0)
                err = log.read()
            if code != 0:
                raise RuntimeError(f"oxigraph load of {path} failed ({code}): {err.decode(errors='replace')[-2000:]}")
            if running:
                self.start()
        elif method == "http":
            if self.proc is None:
                raise RuntimeError("server not running: use it as a context manager or call start()")
            for body in _line_chunks(path, chunk_lines):
                req = urllib.request.Request(f"{self.base_url}/store?default", data=body, method="POST",
                                             headers={"Content-Type": "application/n-triples"})
                try:
                    with urllib.request.urlopen(req, timeout=600) as resp:
                        if resp.status not in (200, 201, 204):
                            raise RuntimeError(f"load rejected: HTTP {resp.status}")
                except urllib.error.HTTPError as exc:
                    raise RuntimeError(f"load rejected: HTTP {exc.code}: {exc.read()[:500]!r}") from exc
        else:
            raise ValueError(f"unknown load method {method!r}: use 'cli' or 'http'")
        return time.perf_counter() - t0

    def __enter__(self) -> OxigraphServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_dir and self.store_dir is not None:
            shutil.rmtree(self.store_dir, ignore_errors=True)
