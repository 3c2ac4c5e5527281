"""The in-process Oxigraph store of a KB version: its N-Triples export bulk-loaded once, then read only.

Inputs: ``kb/<kb_version>/{claims,entities,properties}`` (through ``tasks.kg.export_nt``). Output:
``indexes/<kb_version>/kg-oxigraph.v1/store/`` (a RocksDB folder of the ``pyoxigraph`` package), built under a
temp name (``<name>.tmp-<pid>``) and renamed, its done marker (``storage.done``: ``_done.json`` with the export's
triple counts) written last inside it. Stores built before that convention carry ``_done``, still accepted;
temp folders of killed builders are swept by the next build. Meant for KBs that fit one machine (the sample KB:
seconds).

Used by the KGQA methods' local-KB gold (``tasks.methods.kgqa.kb_gold``) and by the index build step; it lives in
the KG layer because it writes files, which method packages never do.
"""

from __future__ import annotations

import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyoxigraph

from storage import layout
from storage.done import DONE, is_done, mark_done, read_done, sweep_temps
from tasks.kg.export_nt import export_ntriples, export_ntriples_parts

INDEX_NAME = layout.INDEX_KINDS["kg-oxigraph"]
#: Marker names of stores built before the ``storage.done`` convention (accepted on read, never written).
_OPEN: dict[str, Any] = {}
_LOCK = threading.Lock()
_BUILD_LOCK = threading.Lock()


def store_folder(kb_version: str, root: Path | None = None) -> Path:
    """Folder of the Oxigraph store of a KB version (``indexes/<kb_version>/kg-oxigraph.v1``)."""
    return layout.index_dir(kb_version, INDEX_NAME, root or layout.home())


def read_store_meta(kb_version: str, root: Path | None = None) -> dict | None:
    """The done marker of a built store (export counts; ``{}`` for a legacy marker), or ``None`` when not built."""
    return read_done(store_folder(kb_version, root), DONE, unit="index")


def open_store(kb_version: str, root: Path | None = None, workers: int = 1):
    """The read-only Oxigraph store of a KB version, shared by every caller of this process.

    Built first when it is not (:func:`ensure_built`, which gets ``workers``).
    """
    final = store_folder(kb_version, root)
    with _LOCK:
        if str(final) not in _OPEN:
            ensure_built(kb_version, root, workers)
            _OPEN[str(final)] = pyoxigraph.Store.read_only(str(final / "store"))
        return _OPEN[str(final)]


def ensure_built(kb_version: str, root: Path | None = None, workers: int = 1) -> tuple[Path, bool]:
    """Build the Oxigraph store of a KB version from its N-Triples export unless it is built.

    The one place the store is decided built: the index step and :func:`open_store` both come here.

    Args:
        kb_version: Published KB version.
        root: Data root (default ``LINKEDQA_HOME``).
        workers: With more than 1, the N-Triples export is written by that many processes as parts (``workers``
            claims parts plus the entity and property parts, ``tasks.kg.export_nt``), bulk-loaded by that many
            threads into the one store, several at once (as Oxigraph's own CLI loads several files; each load
            takes Oxigraph's default of 2 threads and ~2 GB, so memory grows with ``workers``). A failed load
            surfaces once the loads already started have finished (they cannot be interrupted). On 2 cores
            (``bench_kg --build-only``): 1.48x against one file on the sample KB, 1.06x at 300k entities, where
            one load already fills both cores.

    Returns:
        The store folder (with its ``_done.json`` marker), and whether this call built it.
    """
    final = store_folder(kb_version, root)
    with _BUILD_LOCK:
        if is_done(final, DONE, unit="index"):
            return final, False
        sweep_temps(final.parent, (f"{final.name}.tmp-*",), recursive=False)  # killed builders' folders
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        store = pyoxigraph.Store(str(tmp / "store"))
        if workers > 1:
            parts, counts = export_ntriples_parts(kb_version, tmp / "parts", root or layout.home(), workers=workers)
            with ThreadPoolExecutor(workers) as pool:  # bulk_load releases the GIL
                list(pool.map(lambda p, s=store: s.bulk_load(path=str(p), format=pyoxigraph.RdfFormat.N_TRIPLES),
                              parts))
        else:
            nt = tmp / "kb.nt"
            counts = export_ntriples(kb_version, nt, root=root or layout.home())
            store.bulk_load(path=str(nt), format=pyoxigraph.RdfFormat.N_TRIPLES)
        store.flush()
        del store
        shutil.rmtree(tmp / "parts", ignore_errors=True)
        (tmp / "kb.nt").unlink(missing_ok=True)
        mark_done(tmp, {"index": INDEX_NAME, "kb_version": kb_version, "export": counts}, DONE)  # last
        try:
            os.replace(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process published it first
            return final, False
        return final, True
