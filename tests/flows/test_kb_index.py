"""``linkedqa kb index``: builds the requested indexes of the sample KB, skips built ones, and a build killed
with SIGKILL halfway leaves no index (only its temp folder, swept by the next call, which builds it whole)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage import layout
from tests.cli_env import user_shell_env

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("cli_session_api")  # tests/cli_env.py


def cli(*args: str, home: Path, data: Path) -> subprocess.Popen:
    # a user's shell pointed at the session's Prefect API (tests/cli_env.py), in a process group of its own
    env = user_shell_env(home, LINKEDQA_DATA=str(data), LINKEDQA_PROGRESS="plain")
    return subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: int = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def test_kb_index_builds_skips_and_resumes_after_a_kill(sample_kb: str, session_home: Path, data_root: Path,
                                                        tmp_path: Path):
    # a home of its own that sees the session's sample KB (its indexes are built here, not in the session's)
    home = tmp_path / "wh"
    (home / "kb").mkdir(parents=True)
    (home / "kb" / sample_kb).symlink_to(session_home / "kb" / sample_kb)
    folder = layout.index_kind_dir(sample_kb, "entity-bm25", home)
    base = folder.parent

    # SIGKILL while the entity index is being built (its temp folder exists): nothing is published
    proc = cli("kb", "index", "--kind", "entity-bm25", home=home, data=data_root)
    deadline = time.monotonic() + 240
    temps: list[Path] = []
    while not temps:
        assert proc.poll() is None, finish(proc)
        assert time.monotonic() < deadline, "the build never started"
        temps = list(base.glob(f".{folder.name}.building-*")) if base.is_dir() else []
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert not folder.exists(), "a killed build published an index"
    assert [p.name for p in base.glob(f".{folder.name}.building-*")] == [temps[0].name]

    # the same command again: the dead build's temp is swept, the index built whole, then skipped
    code, out, err = finish(cli("kb", "index", "--kind", "entity-bm25", "--kind", "passage-bm25", home=home,
                                data=data_root))
    assert code == 0, err
    assert f"indexes of KB {sample_kb}: entity-bm25, passage-bm25" in out
    assert re.search(r"index entity-bm25 +built in", out) and re.search(r"index passage-bm25 +built in", out)
    assert "2 index(es) built, 0 already present" in out
    assert not list(base.glob(".*.building-*")), "temp folder left behind"
    from tasks.search.entity_index import EntityIndex
    from tasks.search.passages import PassageIndex

    assert len(EntityIndex.open(folder)) > 100_000
    assert len(PassageIndex.open(layout.index_kind_dir(sample_kb, "passage-bm25", home))) > 1000
    marker = next(folder / m for m in ("_done.json", "meta.json") if (folder / m).is_file())
    stamp = marker.stat().st_mtime_ns

    code, out, err = finish(cli("kb", "index", "--kb", "sample", "--kind", "entity-bm25", home=home,
                                data=data_root))
    assert code == 0, err
    assert re.search(r"index entity-bm25 +already built", out) and "0 index(es) built, 1 already present" in out
    assert marker.stat().st_mtime_ns == stamp

    # usage errors stay one line: an unknown kind is refused by the parser, a missing KB is exit 4
    code, out, err = finish(cli("kb", "index", "--kind", "nope", home=home, data=data_root))
    assert code == 2 and "invalid choice: 'nope'" in err
    code, out, err = finish(cli("kb", "index", "--kb", "no-such-kb", home=home, data=data_root))
    assert code == 4, err
    assert err.startswith("error: no published KB named 'no-such-kb'") and len(err.strip().splitlines()) == 2


def test_an_index_built_before_the_done_marker_convention_is_not_rebuilt(tmp_path: Path):
    from tasks.search.bm25 import is_built, read_meta
    from tasks.search.entity_index import EntityIndex
    from tasks.search.kb_indexes import ensure_index

    root, version = tmp_path / "wh", "old-00000000"
    folder = layout.index_kind_dir(version, "entity-bm25", root)
    rows = [{"qid": "Q42", "label": "Douglas Adams", "aliases": ["Douglas Noel Adams"], "description": "writer"},
            {"qid": "Q5", "label": "human", "aliases": [], "description": None}]
    EntityIndex.build(folder, rows)
    meta = read_meta(folder)
    assert (folder / "_done.json").is_file() and not (folder / "meta.json").exists()
    os.replace(folder / "_done.json", folder / "meta.json")  # what a warehouse built before holds
    assert is_built(folder) and read_meta(folder) == meta
    stamp = (folder / "meta.json").stat().st_mtime_ns
    # the KB of that version does not even exist: a rebuild would fail, a skip does not read it
    assert ensure_index(version, "entity-bm25", root)["built"] is False
    assert (folder / "meta.json").stat().st_mtime_ns == stamp and not (folder / "_done.json").exists()
    assert [c.qid for c in EntityIndex.open(folder).search("douglas adams", 1)] == ["Q42"]
