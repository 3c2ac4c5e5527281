"""A loopback HTTP mirror of the official locations, filled from the real files of ``../shared/data``.

It is laid out like raw.githubusercontent.com (``<owner>/<repo>/<commit>/<path>``) and dumps.wikimedia.org, speaks
HTTP Range (206 / 416), can cut a response after N bytes, and logs every request (``tests/flows/test_fetch.py``, the
demo's test without a data folder).
"""

from __future__ import annotations

import gzip
import re
import threading
from collections.abc import Iterable
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tasks.fetch.sources import FILES, Gzip
from tests import procs


class MirrorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path):
        super().__init__(("127.0.0.1", 0), MirrorHandler)
        self.root = root
        self.log: list[dict] = []  # one entry per GET: path, range header, status, bytes sent
        self.cut: dict[str, int] = {}  # path -> bytes of the body to send before dropping the connection (once)
        self.ignore_range: set[str] = set()  # paths answered with 200 even to a Range request
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def requests_for(self, path: str) -> list[dict]:
        """The requests for `path`, each once its handler has finished: a client can read the last byte
        and return before the handler thread records what it sent (CI saw `sent` 0 for a full body)."""
        with self.lock:
            entries = [e for e in self.log if e["path"] == path]
        for e in entries:
            assert e["done"].wait(10), f"the mirror's handler for {e['path']} did not finish"
        return entries


class MirrorHandler(BaseHTTPRequestHandler):
    server: MirrorServer

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        entry = {"path": path, "range": self.headers.get("Range"), "status": None, "sent": 0,
                 "done": threading.Event()}
        with self.server.lock:
            self.server.log.append(entry)
        try:
            self._get(path, entry)
        finally:
            entry["done"].set()

    def _get(self, path: str, entry: dict) -> None:
        fs = (self.server.root / path.lstrip("/")).resolve()
        if not fs.is_relative_to(self.server.root.resolve()) or not fs.exists():
            return self._plain(entry, 404, b"not found\n")
        if fs.is_dir():
            # like the nginx autoindex of dumps.wikimedia.org
            links = "".join(f'<a href="{p.name}{"/" if p.is_dir() else ""}">{p.name}</a>\n'
                            for p in sorted(fs.iterdir()))
            return self._plain(entry, 200, f"<html><body><pre>\n{links}</pre></body></html>\n".encode(),
                               "text/html")
        data = fs.read_bytes()
        size = len(data)
        etag = f'"{size:x}-{int(fs.stat().st_mtime):x}"'
        start, status = 0, 200
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if_range = self.headers.get("If-Range")
        if m and path not in self.server.ignore_range and (if_range is None or if_range == etag):
            start = int(m.group(1))
            if start >= size:
                entry["status"] = 416
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        body = data[start:]
        entry["status"] = status
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", formatdate(fs.stat().st_mtime, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        with self.server.lock:
            cut = self.server.cut.pop(path, None)
        if cut is not None:
            body = body[:cut]
        self.wfile.write(body)
        self.wfile.flush()
        entry["sent"] = len(body)
        if cut is not None:
            self.close_connection = True  # the client sees fewer bytes than Content-Length announced

    def _plain(self, entry: dict, status: int, body: bytes, ctype: str = "text/plain") -> None:
        entry["status"] = status
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        entry["sent"] = len(body)


def mirror_path(url: str) -> str:
    """Path of an official URL on the mirror (the mirror replaces scheme + host)."""
    return unquote(urlsplit(url).path)


def put(root: Path, path: str, data: bytes) -> None:
    dest = root / path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def upstream_bytes(data_root: Path, rel: str) -> bytes:
    """What the official location serves for a registry file (the collector gzip'd some of them)."""
    data = (data_root / rel).read_bytes()
    return gzip.decompress(data) if isinstance(FILES[rel].post, Gzip) else data


def put_registry_files(root: Path, data_root: Path, paths: Iterable[str]) -> None:
    """Put the upstream bytes of registered files (``tasks.fetch.sources.FILES``) where the mirror serves them."""
    for rel in paths:
        put(root, mirror_path(FILES[rel].url), upstream_bytes(data_root, rel))


def serving(root: Path):
    """A mirror of the tree under ``root`` on a free loopback port, for the duration of a ``with`` block."""
    return procs.serving(MirrorServer(root))
