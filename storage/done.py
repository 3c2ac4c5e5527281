"""The one done-marker convention of every resumable unit (KB shard, merged table, dataset, index, store, run...).

A unit of work writes its outputs first (each atomically: temp name, fsync, rename), then, LAST, a small JSON
marker holding the unit's metadata (row counts, timings, inputs). The marker is itself written atomically
(``<name>.tmp-<pid>``, fsync, ``os.replace``), so a reader sees either no marker or a complete one:

* **done** = the marker exists (:func:`is_done`, :func:`read_done`); a done unit is skipped / reused on re-run;
* **not done** = no marker, whatever else lies in the folder; the unit is redone from scratch, after
  :func:`sweep_temps` has removed the temp files and folders an interrupted write left behind.

Marker names: :data:`DONE` (``_done.json``) by default; published versions and runs keep ``manifest.json``
(``storage.manifest`` writes it through :func:`mark_done`). The marker names of older layouts are listed in one
table, :data:`LEGACY_MARKERS`, read here alone (``unit=``), so that units finished under an older convention are
not rebuilt; only the current name is ever written.

Temp names (what :func:`sweep_temps` recognises, :data:`TEMP_PATTERNS`): ``<name>.tmp-<pid>[-...]`` (atomic
files, temp build folders), ``.<name>.building-<pid>-...`` (hidden index build folders), ``_pending-*``
(parts not yet renamed). A temp whose name carries the pid of a running process may belong to a writer that is
still at work and is kept unless the caller says no writer can be active (``all_pids=True``).

Prefect-free; standard library only.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: Default marker file name of a finished unit.
DONE = "_done.json"
#: Glob patterns (on a file or folder name) of the temps an interrupted atomic write or build leaves behind.
TEMP_PATTERNS: tuple[str, ...] = ("*.tmp-*", ".*.building-*", "_pending-*")
#: Marker names of layouts older than this convention, per kind of unit (``read_done(..., unit=...)``): accepted on
#: read, never written. Every other kind of unit knows only its current marker.
LEGACY_MARKERS: dict[str, tuple[str, ...]] = {
    "index": ("meta.json", "_done"),  # search indexes and KG stores: the index's metadata file, Oxigraph's flag
    "model": ("prepared.json",),  # a converted embedded model
}
_PID = re.compile(r"(?:\.tmp|\.building)-(\d+)(?=$|[-.])")


def temp_path(path: Path) -> Path:
    """The temp name an atomic write of ``path`` uses: ``<name>.tmp-<pid>`` in the same folder."""
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (a rename inside it) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` via temp file + fsync + rename (no temp file survives a failure).

    Args:
        path: Final file (its folder is created).
        obj: JSON-serialisable value (other values go through ``str``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, sort_keys=True, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # disk full, unserialisable value...: leave no temp file behind
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def read_json(path: Path) -> Any:
    """The parsed content of a JSON file, or ``None`` when it does not exist."""
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def mark_done(folder: Path, meta: Mapping[str, Any], name: str = DONE) -> Path:
    """Mark a unit finished: write its marker ``folder/name`` atomically. Call it LAST, after every output.

    Args:
        folder: The unit's folder (created if missing).
        meta: The unit's metadata (row counts, timings, inputs...); stored as given.
        name: Marker file name (``manifest.json`` for published versions and runs).

    Returns:
        The marker path.
    """
    path = Path(folder) / name
    write_json_atomic(path, dict(meta))
    return path


def _legacy(unit: str | None) -> tuple[str, ...]:
    if unit is None:
        return ()
    try:
        return LEGACY_MARKERS[unit]
    except KeyError:
        raise ValueError(f"unknown unit kind {unit!r}; known: {', '.join(LEGACY_MARKERS)}") from None


def read_done(folder: Path, name: str = DONE, unit: str | None = None) -> dict[str, Any] | None:
    """The marker of a finished unit, or ``None`` when the unit is not done.

    Args:
        folder: The unit's folder.
        name: Current marker name.
        unit: The kind of unit (a key of :data:`LEGACY_MARKERS`) whose older marker names are accepted too
            (checked in order after ``name``). A legacy marker that is not a JSON object (e.g. ``_done`` holding
            ``ok``) reads as ``{}``: done, without metadata. Test the result with ``is None``.

    Returns:
        The marker's content, or ``None``.
    """
    folder = Path(folder)
    found = read_json(folder / name)
    if found is not None:
        return found
    for old in _legacy(unit):
        path = folder / old
        if not path.is_file():
            continue
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            return {}
        return value if isinstance(value, dict) else {}
    return None


def is_done(folder: Path, name: str = DONE, unit: str | None = None) -> bool:
    """Whether the unit in ``folder`` is finished (its marker, or a legacy one of its ``unit`` kind, exists)."""
    folder = Path(folder)
    return any((folder / n).is_file() for n in (name, *_legacy(unit)))


def temp_pid(name: str) -> int | None:
    """The pid of the writer that a temp name carries (``x.tmp-<pid>``, ``.x.building-<pid>-...``), or ``None``."""
    m = _PID.search(name)
    return int(m.group(1)) if m else None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid is running (``True`` when it exists but belongs to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def sweep_temps(folder: Path, patterns: Iterable[str] = TEMP_PATTERNS, *, recursive: bool = True,
                all_pids: bool = False) -> list[Path]:
    """Remove the temp files and folders an interrupted write left under ``folder``; return what was removed.

    Call it before redoing a unit that is not done. A temp is removed when its name matches one of ``patterns``
    and either ``all_pids`` is set, or its name carries no pid, or the pid is not a running process (this
    process counts as running: another of its threads may be writing). Matching folders are removed whole and
    not searched further.

    Args:
        folder: Where to look (a missing folder sweeps nothing).
        patterns: Glob patterns on names (default :data:`TEMP_PATTERNS`).
        recursive: Search sub-folders too (default), or only ``folder``'s own entries.
        all_pids: The caller knows no writer can be active under ``folder`` (it holds a lock, or every part of
            the unit is finished): remove matching temps whatever pid they carry.

    Returns:
        The removed paths.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    pats = tuple(patterns)
    removed: list[Path] = []

    def stale(name: str) -> bool:
        if not any(fnmatch.fnmatchcase(name, p) for p in pats):
            return False
        if all_pids:
            return True
        pid = temp_pid(name)
        return pid is None or not pid_alive(pid)

    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath)
        for d in list(dirnames):
            if stale(d):
                dirnames.remove(d)
                shutil.rmtree(base / d, ignore_errors=True)
                removed.append(base / d)
        for f in filenames:
            if stale(f):
                (base / f).unlink(missing_ok=True)
                removed.append(base / f)
        if not recursive:
            break
    return sorted(removed)
