"""Downloading real data on a connected machine (benchmarks, Wikimedia dumps): resumable and checksum-verified.

Modules: ``http`` (``download``: resumable, verified, atomic, with a ``.meta.json`` sidecar) and ``sources``
(registry of official locations with sha256 pins, Wikimedia URL builders, ``latest`` resolution, mirrors).
Prefect-free (library code); the ``linkedqa data fetch`` and ``linkedqa kb download`` commands call it.
"""

from tasks.fetch.http import ChecksumMismatch, DownloadError, DownloadResult, FetchError, download

__all__ = ["ChecksumMismatch", "DownloadError", "DownloadResult", "FetchError", "download"]
