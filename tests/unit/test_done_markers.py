"""One done-marker convention (``storage.done``) proved on every resumable unit that uses it.

For each unit: a done unit is skipped / reused on re-run; a unit with a temp leftover of a killed writer and no
marker is redone and the temp is swept; the marker is written last (a fault just before it leaves the unit not
done, and the next run redoes it); a marker of the older convention is still accepted. Units: the convention
itself, manifests, KB staging shards, merged KB tables, stored datasets, the DuckDB KG store, the Oxigraph store
(KGQA gold), HTTP downloads and the converted model folder. Inputs are real files from ``LINKEDQA_DATA`` (a small CoDEx
KB: its 71 relations and the codex-s validation triples; QALD-10; a real file served over loopback HTTP).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import types
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from storage import layout
from storage.done import (
    DONE,
    is_done,
    mark_done,
    read_done,
    sweep_temps,
    temp_pid,
    write_json_atomic,
)
from storage.manifest import MANIFEST, manifest_done, read_manifest, write_manifest
from storage.parquet_io import part_files, read_table, remove_temp_files


class Fault(RuntimeError):
    """Injected just before a marker is written."""


def _raise(*args, **kwargs):
    raise Fault("killed before the marker")


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has exited (a killed writer's)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _mtime(p: Path) -> int:
    return p.stat().st_mtime_ns


# ------------------------------------------------------------------------------ the convention itself
def test_marker_roundtrip_legacy_and_atomic_write(tmp_path: Path, monkeypatch) -> None:
    unit = tmp_path / "unit"
    assert read_done(unit) is None and not is_done(unit)
    path = mark_done(unit, {"rows": 3})
    assert path == unit / DONE and read_done(unit) == {"rows": 3} and is_done(unit)
    assert not list(unit.glob("*.tmp-*"))

    old = tmp_path / "old"
    old.mkdir()
    (old / "_done").write_text("ok\n")  # a legacy marker that is not JSON: done, without metadata
    assert read_done(old) is None
    assert read_done(old, unit="index") == {} and is_done(old, unit="index") and not is_done(old, unit="model")
    (old / "meta.json").write_text(json.dumps({"rows": 5}))
    assert read_done(old, unit="index") == {"rows": 5}
    mark_done(old, {"rows": 6})  # the current name wins over legacy ones
    assert read_done(old, unit="index") == {"rows": 6}
    with pytest.raises(ValueError, match="unknown unit kind"):
        is_done(old, unit="shard")

    # a failure inside the atomic write leaves neither a marker nor its temp file
    import storage.done as done_mod

    monkeypatch.setattr(done_mod.os, "replace", _raise)
    with pytest.raises(Fault):
        mark_done(tmp_path / "never", {"rows": 1})
    assert not is_done(tmp_path / "never") and not list((tmp_path / "never").iterdir())


def test_sweep_removes_dead_writers_temps_only(tmp_path: Path, dead_pid: int) -> None:
    d = tmp_path / "unit"
    (d / "sub").mkdir(parents=True)
    dead = [d / f"claims.parquet.tmp-{dead_pid}", d / "sub" / f"x.json.tmp-{dead_pid}", d / "_pending-00000.parquet",
            d / f".idx.building-{dead_pid}-abcd1234"]
    live = [d / f"aliases.parquet.tmp-{os.getpid()}", d / f"kg.tmp-{os.getpid()}-{threading.get_ident()}"]
    kept = [d / "part-00000-of-00001.parquet", d / DONE, d / "dest.part"]
    for p in dead[:3] + live[:1] + kept:
        p.write_text("x")
    dead[3].mkdir()
    (dead[3] / "inner.tmp-1").write_text("x")
    live[1].mkdir()
    assert [temp_pid(p.name) for p in (dead[0], dead[3], live[1])] == [dead_pid, dead_pid, os.getpid()]

    assert sweep_temps(d, recursive=False) == sorted([dead[0], dead[2], dead[3]])
    assert sweep_temps(d) == [dead[1]]  # recursive: the sub-folder's temp too
    assert all(p.exists() for p in live + kept)
    assert sorted(remove_temp_files(d)) == sorted(live)  # all_pids: the caller knows no writer is active
    assert all(p.exists() for p in kept) and sweep_temps(tmp_path / "missing") == []


def test_manifest_is_a_done_marker(tmp_path: Path, monkeypatch) -> None:
    run = tmp_path / "run"
    assert read_manifest(run) is None and not manifest_done(run)
    write_manifest(run, {"rows": 2, "api_key": "secret"})
    body = read_done(run, MANIFEST)
    assert body == read_manifest(run) and body["rows"] == 2 and body["api_key"] == "***" and "git_sha" in body
    assert manifest_done(run) and is_done(run, MANIFEST) and not is_done(run)  # manifest.json, not _done.json

    import storage.manifest as manifest_mod

    monkeypatch.setattr(manifest_mod, "mark_done", _raise)
    with pytest.raises(Fault):
        write_manifest(tmp_path / "other", {"rows": 1})
    assert not manifest_done(tmp_path / "other")


# ------------------------------------------------------------------------------ KB: stage shards, merged tables
def _codex_specs(data_root: Path):
    from tasks.kb.plan import _spec

    return [
        _spec("codex-json", data_root / "codex/relations/en/relations.json", "codex", 1),
        _spec("triples", data_root / "codex/triples/codex-s/valid.txt", "codex", 1),
    ]


def test_kb_stage_shard(home: Path, data_root: Path, dead_pid: int, monkeypatch) -> None:
    import tasks.kb.stage as stage_mod
    from tasks.kb.plan import make_plan

    specs = _codex_specs(data_root)
    plan = make_plan("done", specs)
    spec, shard = specs[1], specs[1].shards[0]
    out = stage_mod.shard_dir(plan.version, spec, shard)
    n_lines = sum(1 for _ in open(spec.path))

    # a killed writer's temp part and no marker; then a fault just before the marker: parts exist, not done
    out.mkdir(parents=True)
    stale = out / f"claims.parquet.tmp-{dead_pid}"
    stale.write_bytes(b"half a parquet file")
    monkeypatch.setattr(stage_mod, "mark_done", _raise)
    with pytest.raises(Fault):
        stage_mod.stage_shard(plan.version, spec, shard)
    assert not stale.exists() and (out / "claims.parquet").is_file() and not is_done(out)
    monkeypatch.setattr(stage_mod, "mark_done", mark_done)

    first = stage_mod.stage_shard(plan.version, spec, shard)  # redone: no marker
    assert not first["skipped"] and first["rows"]["claims"] == n_lines
    assert read_done(out)["rows"] == first["rows"]
    before = _mtime(out / "claims.parquet")
    again = stage_mod.stage_shard(plan.version, spec, shard)
    assert again["skipped"] and again["rows"] == first["rows"] and _mtime(out / "claims.parquet") == before


def _staged_plan(data_root: Path):
    from tasks.kb.plan import make_plan
    from tasks.kb.stage import stage_shard

    specs = _codex_specs(data_root)
    plan = make_plan("done", specs)
    for spec in specs:
        stage_shard(plan.version, spec, spec.shards[0])
    return plan


def test_kb_merged_tables(home: Path, data_root: Path, monkeypatch) -> None:
    import tasks.kb.merge as merge_mod

    plan = _staged_plan(data_root)
    marks = layout.staging_dir(plan.version, "_merged")
    claims_dir = layout.kb_table_dir(plan.version, "claims")
    real = merge_mod.mark_done

    def fail_on_claims(folder, meta, name=DONE):
        if name == "claims.json":
            raise Fault("killed before the claims marker")
        return real(folder, meta, name)

    monkeypatch.setattr(merge_mod, "mark_done", fail_on_claims)
    with pytest.raises(Fault):
        merge_mod.merge_and_publish(plan, log=lambda m: None)
    monkeypatch.setattr(merge_mod, "mark_done", real)
    assert part_files(claims_dir) and not is_done(marks, "claims.json") and is_done(marks, "aliases.json")
    assert read_manifest(layout.kb_dir(plan.version)) is None  # the version is not published
    # a killed attempt's pending part next to the unmarked table's parts
    (claims_dir / "_pending-00000.parquet").write_bytes(b"partial")
    aliases = part_files(layout.kb_table_dir(plan.version, "aliases"))
    aliases_mtime = [_mtime(p) for p in aliases]

    merged: list[str] = []
    counts = merge_mod.merge_and_publish(plan, log=merged.append)
    assert any(" claims " in m for m in merged) and not any(" aliases " in m for m in merged)
    assert [_mtime(p) for p in aliases] == aliases_mtime  # done table reused, not rewritten
    assert not (claims_dir / "_pending-00000.parquet").exists()  # swept with the redo
    assert read_done(marks, "claims.json")["rows"] == counts["claims"] == read_table(claims_dir).num_rows
    manifest = read_manifest(layout.kb_dir(plan.version))
    assert manifest["row_counts"] == counts
    # the seconds of the tables the first attempt merged come from their markers (the bench reads them)
    assert set(manifest["merge_seconds"]) == set(counts)
    assert manifest["merge_seconds"]["aliases"] == read_done(marks, "aliases.json")["seconds"]

    merged.clear()
    assert merge_mod.merge_and_publish(plan, log=merged.append) == counts and merged == []


# ------------------------------------------------------------------------------ stored datasets
def test_stored_dataset(home: Path, data_root: Path, dead_pid: int, monkeypatch) -> None:
    import tasks.datasets.store as store_mod

    real = store_mod.write_manifest
    monkeypatch.setattr(store_mod, "write_manifest", _raise)
    with pytest.raises(Fault):
        store_mod.store_dataset("qald-10", data_root)
    monkeypatch.setattr(store_mod, "write_manifest", real)
    assert store_mod.latest_dataset_folder("qald-10") is None  # parts written, no manifest: not done
    folder = next(layout.datasets_root().glob("qald-10/*"))
    assert (folder / "questions" / layout.part_name(0, 1)).is_file() and not manifest_done(folder)
    stale = folder / "questions" / f"{layout.part_name(0, 1)}.tmp-{dead_pid}"
    stale.write_bytes(b"partial")

    ref = store_mod.store_dataset("qald-10", data_root)
    assert not stale.exists() and read_manifest(folder)["splits"] == {"test": 394} == ref.extra["splits"]
    assert store_mod.latest_dataset_folder("qald-10") == folder
    before = _mtime(folder / MANIFEST), _mtime(folder / "questions" / layout.part_name(0, 1))
    monkeypatch.setattr(store_mod, "write_table", _raise)  # a done dataset writes nothing
    assert store_mod.store_dataset("qald-10", data_root).row_count == 394
    assert (_mtime(folder / MANIFEST), _mtime(folder / "questions" / layout.part_name(0, 1))) == before


# ------------------------------------------------------------------------------ KG stores over a small KB
@pytest.fixture(scope="module")
def codex_kb(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> tuple[Path, str]:
    """(root, version) of the small CoDEx KB, built once for the store tests."""
    root = tmp_path_factory.mktemp("done_kb") / "warehouse"
    mp = pytest.MonkeyPatch()
    mp.setenv("LINKEDQA_HOME", str(root))
    try:
        from tasks.kb.merge import merge_and_publish

        plan = _staged_plan(data_root)
        merge_and_publish(plan, threads=2, log=lambda m: None)
    finally:
        mp.undo()
    return root, plan.version


def test_duckdb_kg_store(codex_kb, dead_pid: int, monkeypatch) -> None:
    import tasks.kg.duckdb_store as store_mod

    root, version = codex_kb
    final = store_mod.index_folder(version, root)
    dead_tmp = final.with_name(f"{final.name}.tmp-{dead_pid}-1")
    (dead_tmp / "_spill").mkdir(parents=True)
    live_tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}-1")  # another thread of this process, building
    live_tmp.mkdir()

    monkeypatch.setattr(store_mod, "mark_done", _raise)
    with pytest.raises(Fault):
        store_mod.build_index(version, root)
    monkeypatch.setattr(store_mod, "mark_done", mark_done)
    assert not final.exists() and store_mod.read_index_meta(version, root) is None
    assert not dead_tmp.exists() and live_tmp.exists()  # a killed builder's folder swept, a live one's kept

    assert store_mod.build_index(version, root) == final
    meta = read_done(final)
    claims = read_table(layout.kb_table_dir(version, "claims", root)).num_rows
    assert meta == store_mod.read_index_meta(version, root) and 0 < meta["row_counts"]["kg_by_subject"] <= claims
    db_mtime = _mtime(final / "kg.duckdb")
    assert store_mod.build_index(version, root) == final and _mtime(final / "kg.duckdb") == db_mtime  # reused

    os.replace(final / DONE, final / "meta.json")  # a store built before the convention
    assert store_mod.build_index(version, root) == final and _mtime(final / "kg.duckdb") == db_mtime
    assert store_mod.read_index_meta(version, root) == meta and not (final / DONE).exists()
    subject = read_table(layout.kb_table_dir(version, "claims", root), columns=["subject"])["subject"][0].as_py()
    with store_mod.DuckDBKG(version, root=root) as kg:
        assert kg.outgoing([subject])[subject]
    live_tmp.rmdir()


def test_oxigraph_gold_store(codex_kb, dead_pid: int, monkeypatch) -> None:
    import tasks.kg.oxigraph_store as store_mod
    from tasks.methods.kgqa import kb_gold

    root, version = codex_kb
    assert kb_gold.open_store is store_mod.open_store  # the KGQA gold tool reads the one store
    final = store_mod.store_folder(version, root)
    dead_tmp = final.with_name(f"{final.name}.tmp-{dead_pid}")
    (dead_tmp / "store").mkdir(parents=True)
    monkeypatch.setattr(store_mod, "_OPEN", {})

    monkeypatch.setattr(store_mod, "mark_done", _raise)
    with pytest.raises(Fault):
        store_mod.open_store(version, root)
    monkeypatch.setattr(store_mod, "mark_done", mark_done)
    assert not final.exists() and not dead_tmp.exists() and store_mod.read_store_meta(version, root) is None

    store = store_mod.open_store(version, root)
    meta = store_mod.read_store_meta(version, root)
    assert meta == read_done(final) and meta["kb_version"] == version and meta["export"]["claims"] > 0
    assert not list(final.parent.glob(f"{final.name}.tmp-*"))
    answers = kb_gold.gold_answers(store, ["SELECT ?s WHERE { ?s ?p ?o } LIMIT 3"])
    assert answers[0]["status"] == "answered"

    monkeypatch.setattr(store_mod, "export_ntriples", _raise)  # a done store is never rebuilt
    monkeypatch.setattr(store_mod, "_OPEN", {})
    store_mod.open_store(version, root)
    os.replace(final / DONE, final / "_done")  # a store built before the convention
    (final / "_done").write_text("ok\n")
    monkeypatch.setattr(store_mod, "_OPEN", {})
    store_mod.open_store(version, root)
    assert store_mod.read_store_meta(version, root) == {} and not (final / DONE).exists()


# ------------------------------------------------------------------------------ HTTP downloads
@pytest.fixture()
def served(data_root: Path):
    """A loopback HTTP server over a real data folder; yields (base url, served file)."""
    folder = data_root / "codex" / "relations" / "en"
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder / "relations.json"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_http_download(tmp_path: Path, served, dead_pid: int, monkeypatch) -> None:
    import tasks.fetch.http as http_mod

    base, src = served
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    dest = tmp_path / "relations.json"
    sidecar = http_mod.meta_path(dest)
    stale = sidecar.with_name(f"{sidecar.name}.tmp-{dead_pid}")
    stale.write_text("{")
    get = partial(http_mod.download, f"{base}/relations.json", dest, expected_sha256=sha, progress=False)

    monkeypatch.setattr(http_mod, "mark_done", _raise)
    with pytest.raises(Fault):
        get()
    monkeypatch.setattr(http_mod, "mark_done", mark_done)
    assert dest.read_bytes() == src.read_bytes() and not sidecar.exists() and not stale.exists()

    dest.unlink()
    first = get()
    assert not first.skipped and read_done(tmp_path, sidecar.name) == first.meta and first.meta["size"] == len(
        src.read_bytes())
    again = get()
    assert again.skipped and again.meta == first.meta and again.requests == 0


# ------------------------------------------------------------------------------ converted model folder
def test_model_folder(tmp_path: Path, data_root: Path, monkeypatch) -> None:
    import tasks.llm.models as models

    parts = tuple(sorted((data_root / "codex" / "relations" / "en").glob("*.json")))[:1] + (
        data_root / "codex" / "triples" / "codex-s" / "valid.txt",)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()
    src = models.GgufSource("tiny-test", parts, digest)
    root = tmp_path / "models"

    def convert(gguf: Path, out: Path) -> dict:
        (out / "config.json").write_text("{}")
        return {"load_s": 0.0}

    monkeypatch.setattr(models, "convert_gguf", convert)
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(__version__="stub"))
    root.mkdir()
    stale = [root / ".tmp-tiny-test-1-deadbeef", root / f".tmp-tiny-test-{os.getpid()}-cafe0000"]
    for p in stale:
        p.mkdir()

    monkeypatch.setattr(models, "mark_done", _raise)
    with pytest.raises(Fault):
        models.prepare_model(src, root)
    monkeypatch.setattr(models, "mark_done", mark_done)
    final = models.model_dir(src.slug, root)
    assert not final.exists() and not any(p.exists() for p in stale)  # swept under the lock, whatever the pid
    assert len(list(root.glob(".tmp-tiny-test-*"))) == 1  # the faulted attempt's own folder, left unmarked

    assert models.prepare_model(src, root) == final
    assert models.model_done(final) and models.read_marker(final)["gguf_sha256"] == digest
    assert not list(root.glob(".tmp-tiny-test-*"))
    monkeypatch.setattr(models, "assemble_gguf", _raise)  # a prepared folder is reused
    assert models.prepare_model(src, root) == final
    os.replace(final / DONE, final / "prepared.json")  # prepared before the convention
    assert models.prepare_model(src, root) == final and models.read_marker(final)["gguf_sha256"] == digest
    with pytest.raises(FileNotFoundError):
        models.read_marker(tmp_path)


def test_write_json_atomic_is_the_shared_writer() -> None:
    """``storage.manifest`` re-exports the one atomic JSON writer (callers of either module get the same code)."""
    import storage.manifest as manifest_mod

    assert manifest_mod.write_json_atomic is write_json_atomic
