"""``kb export-nt --workers N``: the parallel export writes exactly the one-process export's triples.

On the sample KB built from every real sample file: its claims carry preferred, normal, deprecated and truthy
ranks (so a subject's preferred claims must meet its other claims in the same hash partition), and its entity
table has several Parquet row groups (so the entities are cut into several units).
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storage import layout
from storage.parquet_io import part_files
from tasks.kg.export_nt import _units, export_ntriples, export_ntriples_parts


def test_parallel_export_equals_the_one_process_export(kb_home: str, tmp_path: Path) -> None:
    root = layout.home()
    claims = pq.read_table(part_files(layout.kb_table_dir(kb_home, "claims", root)),
                           columns=["subject", "property", "rank"]).to_pylist()
    ranks: dict[tuple[str, str], set[str]] = {}
    for c in claims:
        ranks.setdefault((c["subject"], c["property"]), set()).add(c["rank"])
    # the truthy rule is live: some (subject, property) has a preferred claim that hides a normal one
    assert any({"preferred", "normal"} <= r for r in ranks.values())
    assert any("deprecated" in r for r in ranks.values())
    units = _units(kb_home, root, 3)
    assert [u.part for u in units if u.table == "claims"] == [0, 1, 2]
    assert sum(u.table == "entities" for u in units) > 1  # the entity row groups are spread over workers

    one = export_ntriples(kb_home, tmp_path / "one.nt", root=root)
    three = export_ntriples(kb_home, tmp_path / "three.nt.gz", root=root, workers=3)
    assert three == one and one["claims"] > 0 and one["labels"] > 0 and one["properties"] > 0
    serial = (tmp_path / "one.nt").read_text(encoding="utf-8").splitlines()
    with gzip.open(tmp_path / "three.nt.gz", "rt", encoding="utf-8") as fh:  # concatenated gzip members
        parallel = fh.read().splitlines()
    assert len(parallel) == one["triples"]
    assert sorted(parallel) == sorted(serial)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.nt", "three.nt.gz"]  # no parts or temps left


def test_workers_below_one_is_an_error(kb_home: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workers must be >= 1"):
        export_ntriples(kb_home, tmp_path / "x.nt", root=layout.home(), workers=0)
    assert not list(tmp_path.iterdir())


def test_what_a_killed_export_left_is_swept_by_the_next(kb_home: str, tmp_path: Path) -> None:
    """A SIGKILLed export leaves its temp output and its parts folder; the next export of that file removes them
    (their pid no longer runs), and leaves a live writer's alone."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead, live = proc.pid, os.getpid()
    (tmp_path / f"kb.nt.tmp-{dead}").write_text("torn")
    parts = tmp_path / f".kb.nt.building-{dead}-x1y2"
    parts.mkdir()
    (parts / "part-00000.nt").write_text("half")
    (tmp_path / f".kb.nt.building-{live}-busy").mkdir()
    (tmp_path / f".other.nt.building-{dead}-x").mkdir()  # another file's: not this export's to remove
    export_ntriples(kb_home, tmp_path / "kb.nt", root=layout.home(), workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["kb.nt", f".kb.nt.building-{live}-busy", f".other.nt.building-{dead}-x"])


def test_a_failed_unit_stops_the_export_and_leaves_nothing(kb_home: str, tmp_path: Path) -> None:
    """A claims unit that fails (here: a memory limit DuckDB refuses) ends the export with its error; the other
    workers are stopped and no part, spill folder or temp output is left."""
    with pytest.raises(Exception, match="(?i)memory"):
        export_ntriples(kb_home, tmp_path / "kb.nt", root=layout.home(), workers=2, memory_limit="lots")
    assert not list(tmp_path.iterdir())


def test_parts_whose_claims_query_spills_are_written(kb_home: str, tmp_path: Path) -> None:
    """kg-oxigraph's parts (``export_ntriples_parts``) with a memory limit the claims query must spill under.

    DuckDB creates its spill folder only when it first spills, and only the last level of it; the parts' spill
    folders live under ``<folder>/.spill``, which nothing created, so a build that spilled failed ("Failed to
    create directory .../.spill/duckdb-1"): seen at 1 M entities in ``make bench-scale``. On the sample KB, 32 MB
    per worker makes the claims query spill (64 MB does not); the parts must hold the one-process export's triples
    and the spill folder must be gone."""
    one = export_ntriples(kb_home, tmp_path / "one.nt", root=layout.home())
    parts, counts = export_ntriples_parts(kb_home, tmp_path / "parts", root=layout.home(), memory_limit="32MB",
                                          workers=2)
    assert counts == one
    lines = [line for p in parts for line in p.read_text(encoding="utf-8").splitlines()]
    assert sorted(lines) == sorted((tmp_path / "one.nt").read_text(encoding="utf-8").splitlines())
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == sorted(p.name for p in parts)
