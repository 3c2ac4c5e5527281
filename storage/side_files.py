"""Side files of runs and method caches, written atomically by the storage layer (never by method code).

Methods compute; they do not open files for writing. A method hands the run machinery its side outputs
(``Method.postprocess`` returns them, ``MethodContext.side_outputs`` collects those of ``build_tools``) and
:func:`write_side_outputs` writes them under the run folder. Expensive intermediate results a method reuses across
runs (MiniLM vectors, tuned configurations) go through an :class:`ArtifactCache` the storage layer owns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from storage.done import temp_path
from storage.manifest import read_json, write_json_atomic


def write_jsonl_atomic(path: Path, records: list[dict]) -> None:
    """Write ``records`` as JSON Lines: temp file, fsync, rename (readers never see a partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def save_npy_atomic(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as ``.npy`` to ``path``: temp file (``storage.done.temp_path``), then rename."""
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as fh:
            np.save(fh, array)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_side_outputs(folder: Path, outputs: Mapping[str, Any] | None) -> list[Path]:
    """Write a method's side outputs under ``folder``: ``*.jsonl`` names take a list of records, ``*.json`` a value.

    Raises:
        ValueError: A name that is absolute, climbs out of ``folder`` or has another suffix.
    """
    written = []
    for name, value in (outputs or {}).items():
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts or rel.suffix not in (".json", ".jsonl"):
            raise ValueError(f"side output {name!r}: want a relative path ending in .json or .jsonl")
        path = folder.joinpath(*rel.parts)
        if rel.suffix == ".jsonl":
            write_jsonl_atomic(path, list(value))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, value)
        written.append(path)
    return written


class ArtifactCache:
    """A folder of content-keyed, atomically written intermediate results (JSON values and NumPy arrays).

    Args:
        folder: Where the artifacts live (created on the first write); None disables caching.
    """

    def __init__(self, folder: Path | None):
        self.folder = Path(folder) if folder is not None else None

    def array(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``<key>.npy`` when cached, else ``compute()`` stored under that name."""
        if self.folder is None:
            return compute()
        path = self.folder / f"{key}.npy"
        if path.is_file():
            return np.load(path)
        value = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        save_npy_atomic(path, value)
        return value

    def json(self, key: str, compute: Callable[[], Any]) -> Any:
        """``<key>.json`` when cached, else ``compute()`` stored under that name."""
        if self.folder is None:
            return compute()
        path = self.folder / f"{key}.json"
        stored = read_json(path)
        if stored is not None:
            return stored
        value = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, value)
        return value
