"""The error type of unreadable dump input.

Shared by the readers (``tasks.dumps.base``, which re-exports it) and the seek index (``tasks.dumps.seekable``)
without an import cycle between them. Prefect-free; no imports.
"""

from __future__ import annotations


class DumpError(RuntimeError):
    """Unreadable input (truncated gzip/bz2 stream, I/O error): names the file and the offset reached."""
