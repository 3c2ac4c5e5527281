"""A real `linkedqa kb build` SIGKILLed during staging, during the merge and just before its manifest.

Guarantee: after each kill no KB version is visible (`linkedqa kb list`, the catalog's views, the manifest
scan); re-running the same command finishes the build, and the published tables equal, row for row, those of
an uninterrupted build of the same inputs. No temp part is left in the published version.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from faultkit import KILLED, PLANTED_KEY, files_containing, kb_args, leftovers, read_json, table_digest

from storage import layout
from storage.catalog import done_kb_versions, refresh_catalog
from storage.schemas import KB_TABLES


def _assert_nothing_published(home: Path, vdir: Path) -> None:
    assert not (vdir / "manifest.json").exists()
    assert done_kb_versions(home) == []
    con = duckdb.connect(str(refresh_catalog(home)), read_only=True)
    try:
        for table in ("entities", "claims", "labels"):
            assert con.execute(f"select count(*) from {table}").fetchall()[0][0] == 0, table
    finally:
        con.close()


@pytest.mark.timeout(400)
def test_kb_build_killed_at_three_points_resumes_to_identical_tables(cli, ref_kb, data_root, tmp_path):
    """SIGKILL after 2 staged shards, after the claims table's parts (before its marker), before the manifest."""
    ref_home, version = ref_kb
    home = tmp_path / "warehouse"
    vdir = layout.kb_dir(version, home)
    staging = vdir / "_staging"
    args = kb_args(data_root)

    # 1. during staging: some shards done, the rest not; nothing merged
    rc, out = cli(home, "stage:2", args)
    assert rc == KILLED, out[-2000:]
    assert len(list(staging.glob("*/s*of*/_done.json"))) >= 2
    assert not (staging / "_merged").exists() or not list((staging / "_merged").glob("*.json"))
    _assert_nothing_published(home, vdir)

    # 2. during the merge: aliases merged and marked, claims written but not marked
    rc, out = cli(home, "merge-after:claims", args)
    assert rc == KILLED, out[-2000:]
    assert len(list(staging.glob("*/s*of*/_done.json"))) == 6
    assert (staging / "_merged" / "aliases.json").is_file()
    assert not (staging / "_merged" / "claims.json").exists()
    assert list((vdir / "claims").glob("part-*.parquet"))
    _assert_nothing_published(home, vdir)

    # 3. every table merged, the manifest not yet written: still invisible, also to `linkedqa kb list`
    rc, out = cli(home, "kb-manifest", args)
    assert rc == KILLED, out[-2000:]
    assert {p.stem for p in (staging / "_merged").glob("*.json")} >= {"claims", "entities", "labels"}
    _assert_nothing_published(home, vdir)
    rc, out = cli(home, "none", ["kb", "list"])
    assert rc == 0 and "no KB built yet" in out and version not in out, out[-2000:]

    # 4. the re-run completes; every table equals the uninterrupted build's
    rc, out = cli(home, "none", args)
    assert rc == 0, out[-3000:]
    assert [v for v, _ in done_kb_versions(home)] == [version]
    ref_dir = layout.kb_dir(version, ref_home)
    for table in KB_TABLES:
        assert table_digest(vdir / table, table) == table_digest(ref_dir / table, table), table
    assert read_json(vdir / "manifest.json")["row_counts"] == read_json(ref_dir / "manifest.json")["row_counts"]
    assert not staging.exists() and leftovers(vdir) == []
    rc, out = cli(home, "none", ["kb", "list"])
    assert rc == 0 and version in out

    # secrets: the planted key in every process's environment reached no file under LINKEDQA_HOME
    assert files_containing(home, PLANTED_KEY) == []
