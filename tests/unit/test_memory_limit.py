"""The DuckDB memory limit of the bounded-memory batch queries: ``$LINKEDQA_DUCKDB_MEMORY`` and ``--memory-limit``.

Every such query (KB merge, kg-duckdb build, N-Triples export and kg-oxigraph's parts, BM25 key checks) has a
fixed default (2 GB, or 1 GB per export process) sized for the 2-core / 24 GB machines the suite runs on; the
variable replaces it, and ``kb build`` / ``kb index`` / ``kb export-nt --memory-limit`` set the variable while they
run. The merge records the limit in the KB manifest (``tests/flows/test_kb_build_languages.py`` checks it through
the CLI) and the kg-duckdb build in its done marker (here, on a real LitWD1K KB).
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from kbkit import build_litwd1k_kb

from flows.cli import _with_memory_limit, build_parser
from storage.catalog import MEMORY_LIMIT_ENV, duckdb_memory_limit, parse_memory_limit, spilling_connection
from storage.done import read_done
from tasks.kg.duckdb_store import build_index


@pytest.mark.parametrize("text", ["8GB", " 512MiB ", "1.5gb", "700 MB", "2TiB", "100MB", "0.1GB"])
def test_memory_sizes_are_accepted(text: str) -> None:
    assert parse_memory_limit(text) == text.strip()


@pytest.mark.parametrize("text", ["lots", "8", "-1GB", "GB", "8 G B", "8GB; SET threads = 1", "", "\u0668GB"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="memory size"):
        parse_memory_limit(text)


@pytest.mark.parametrize("text", ["0GB", "1B", "99MB", "95MiB", "0.09GB"])
def test_a_size_too_small_to_run_the_queries_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="at least 100MB"):
        parse_memory_limit(text)


def test_the_variable_replaces_each_default_and_a_bad_value_names_the_variable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert duckdb_memory_limit("2GB") == "2GB" and duckdb_memory_limit("1GB") == "1GB"
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "  ")
    assert duckdb_memory_limit("2GB") == "2GB"
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "3GB")
    assert duckdb_memory_limit("2GB") == duckdb_memory_limit("1GB") == "3GB"
    con, ref = spilling_connection(duckdb_memory_limit("2GB"), tmp_path / "spill"), duckdb.connect()
    try:  # what DuckDB holds is what it makes of 3GB itself
        ref.execute("SET memory_limit = '3GB'")
        held = [c.execute("SELECT current_setting('memory_limit')").fetchone()[0] for c in (con, ref)]
        assert held[0] == held[1] != duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        con.close()
        ref.close()
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(ValueError, match=MEMORY_LIMIT_ENV):
        duckdb_memory_limit("2GB")


def test_the_option_parses_on_the_three_commands_and_refuses_a_non_size(capsys: pytest.CaptureFixture) -> None:
    p = build_parser()
    assert p.parse_args(["kb", "build", "--sample", "--memory-limit", "16GB"]).memory_limit == "16GB"
    assert p.parse_args(["kb", "index", "--memory-limit", "8GB"]).memory_limit == "8GB"
    assert p.parse_args(["kb", "export-nt", "x.nt", "--memory-limit", "4GB"]).memory_limit == "4GB"
    assert p.parse_args(["kb", "index"]).memory_limit is None
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["kb", "index", "--memory-limit", "lots"])
    assert exc.value.code == 2 and "memory size" in capsys.readouterr().err


def test_a_command_sees_its_limit_while_it_runs_and_the_environment_is_put_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []
    cmd = _with_memory_limit(lambda a: seen.append(os.environ.get(MEMORY_LIMIT_ENV)) or 0)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "5GB")
    assert cmd(argparse.Namespace(memory_limit="9GB")) == 0 and os.environ[MEMORY_LIMIT_ENV] == "5GB"
    assert cmd(argparse.Namespace(memory_limit=None)) == 0
    monkeypatch.delenv(MEMORY_LIMIT_ENV)
    assert cmd(argparse.Namespace(memory_limit="9GB")) == 0 and MEMORY_LIMIT_ENV not in os.environ
    assert seen == ["9GB", "5GB", "9GB"]

    # without the option a bad variable is refused before the command starts (not after hours of staging)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(ValueError, match=MEMORY_LIMIT_ENV):
        cmd(argparse.Namespace(memory_limit=None))
    assert seen == ["9GB", "5GB", "9GB"]
    assert cmd(argparse.Namespace(memory_limit="9GB")) == 0 and os.environ[MEMORY_LIMIT_ENV] == "plenty"
    monkeypatch.delenv(MEMORY_LIMIT_ENV)

    def fails(a: argparse.Namespace) -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        _with_memory_limit(fails)(argparse.Namespace(memory_limit="9GB"))
    assert MEMORY_LIMIT_ENV not in os.environ


def test_the_kg_duckdb_build_runs_under_the_variable_and_records_it(
        tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "warehouse"
    monkeypatch.setenv("LINKEDQA_HOME", str(root))
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    version = build_litwd1k_kb(root, data_root, "memlimit")
    assert read_done(build_index(version, root))["memory_limit"] == "2GB"
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "300MB")
    folder = build_index(version, root, layout_name="parquet")
    assert read_done(folder)["memory_limit"] == "300MB"
    shutil.rmtree(folder)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(ValueError, match=MEMORY_LIMIT_ENV):
        build_index(version, root, layout_name="parquet")
