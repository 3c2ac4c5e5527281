"""The DuckDB memory limit of the bounded-memory batch queries: ``$LINKEDQA_DUCKDB_MEMORY`` and ``--memory-limit``.

Every such query (KB merge, kg-duckdb build, N-Triples export and kg-oxigraph's parts, BM25 key checks) runs at
``auto`` by default: a quarter of the machine's (or its container's) memory, shared by a step's DuckDB processes.
The variable replaces it, and ``kb build`` / ``kb index`` / ``kb export-nt --memory-limit`` set the variable while
they run. The merge records the limit in the KB manifest (``tests/flows/test_kb_build_languages.py`` checks it through
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

from flows.cli import build_parser
from flows.cli.args import with_memory_limit
from storage.catalog import (
    MEMORY_LIMIT_ENV,
    auto_memory_limit,
    duckdb_memory_limit,
    machine_memory,
    memory_limit_bytes,
    parse_memory_limit,
    spilling_connection,
)
from storage.done import read_done
from tasks.kg.duckdb_store import build_index


@pytest.mark.parametrize("text", ["8GB", " 512MiB ", "1.5gb", "700 MB", "2TiB", "100MB", "0.1GB"])
def test_memory_sizes_are_accepted(text: str) -> None:
    assert parse_memory_limit(text) == text.strip()


@pytest.mark.parametrize(("text", "size"), [("8GB", 8 * 10**9), (" 6300MB ", 6_300 * 10**6), ("1.5gb", 1_500_000_000),
                                           ("512MiB", 512 * 2**20), ("2TiB", 2 * 2**40), ("100 MB", 10**8)])
def test_memory_sizes_convert_to_bytes(text: str, size: int) -> None:
    assert memory_limit_bytes(text) == size


@pytest.mark.parametrize("text", ["auto", "8", "8 GiBs", ""])
def test_only_sizes_convert_to_bytes(text: str) -> None:
    with pytest.raises(ValueError, match="expected a memory size"):
        memory_limit_bytes(text)


@pytest.mark.parametrize("text", ["auto", " AUTO ", "Auto"])
def test_auto_is_accepted(text: str) -> None:
    assert parse_memory_limit(text) == "auto"


GB = 10**9


@pytest.mark.parametrize(("memory", "processes", "limit"), [
    (24 * GB, 1, "6GB"), (64 * GB, 1, "16GB"), (64 * GB, 16, "1GB"), (24 * GB, 2, "3GB"),
    (24 * 2**30, 1, "6400MB"),  # 24 GiB: rounded down to 100 MB
    (8 * GB, 3, "600MB"), (GB, 8, "100MB"),  # never below the smallest limit the queries run at
])
def test_auto_is_a_quarter_of_the_memory_shared_by_the_processes(memory: int, processes: int, limit: str) -> None:
    assert auto_memory_limit(processes, memory) == limit
    assert parse_memory_limit(limit) == limit  # a size DuckDB takes, as the option would


def test_the_machine_memory_is_the_containers_when_lower(tmp_path: Path) -> None:
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert machine_memory(tmp_path / "none") == physical
    (tmp_path / "memory.max").write_text("max\n")  # cgroup v2, no limit
    assert machine_memory(tmp_path) == physical
    (tmp_path / "memory.max").write_text(f"{3 * GB}\n")
    assert machine_memory(tmp_path) == 3 * GB
    (tmp_path / "memory.max").write_text(f"{physical * 2}\n")  # a limit above the machine's memory changes nothing
    assert machine_memory(tmp_path) == physical
    (tmp_path / "memory.max").unlink()
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # cgroup v1, no limit
    assert machine_memory(tmp_path) == physical
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{2 * GB}\n")
    assert machine_memory(tmp_path) == 2 * GB


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
    assert duckdb_memory_limit() == auto_memory_limit(1) and duckdb_memory_limit(processes=4) == auto_memory_limit(4)
    assert duckdb_memory_limit("2GB") == "2GB" and duckdb_memory_limit(" Auto", processes=2) == auto_memory_limit(2)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "  ")
    assert duckdb_memory_limit() == auto_memory_limit(1)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "auto")
    assert duckdb_memory_limit(processes=3) == auto_memory_limit(3)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "3GB")
    assert duckdb_memory_limit() == duckdb_memory_limit(processes=8) == "3GB"  # a size is per process
    assert duckdb_memory_limit("700MB") == "700MB"  # an explicit argument wins
    con, ref = spilling_connection(duckdb_memory_limit(), tmp_path / "spill"), duckdb.connect()
    try:  # what DuckDB holds is what it makes of 3GB itself
        ref.execute("SET memory_limit = '3GB'")
        held = [c.execute("SELECT current_setting('memory_limit')").fetchone()[0] for c in (con, ref)]
        assert held[0] == held[1] != duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        con.close()
        ref.close()
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(ValueError, match=MEMORY_LIMIT_ENV):
        duckdb_memory_limit()


def test_the_option_parses_on_the_three_commands_and_refuses_a_non_size(capsys: pytest.CaptureFixture) -> None:
    p = build_parser()
    assert p.parse_args(["kb", "build", "--sample", "--memory-limit", "16GB"]).memory_limit == "16GB"
    assert p.parse_args(["kb", "index", "--memory-limit", "8GB"]).memory_limit == "8GB"
    assert p.parse_args(["kb", "export-nt", "x.nt", "--memory-limit", "4GB"]).memory_limit == "4GB"
    assert p.parse_args(["kb", "index"]).memory_limit is None
    assert p.parse_args(["kb", "build", "--sample", "--memory-limit", "Auto"]).memory_limit == "auto"
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["kb", "index", "--memory-limit", "lots"])
    assert exc.value.code == 2 and "memory size" in capsys.readouterr().err


def test_a_command_sees_its_limit_while_it_runs_and_the_environment_is_put_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []
    cmd = with_memory_limit(lambda a: seen.append(os.environ.get(MEMORY_LIMIT_ENV)) or 0)
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
        with_memory_limit(fails)(argparse.Namespace(memory_limit="9GB"))
    assert MEMORY_LIMIT_ENV not in os.environ


def test_the_kg_duckdb_build_runs_under_the_variable_and_records_it(
        tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "warehouse"
    monkeypatch.setenv("LINKEDQA_HOME", str(root))
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    version = build_litwd1k_kb(root, data_root, "memlimit")
    assert read_done(build_index(version, root))["memory_limit"] == auto_memory_limit(1)  # the size, not "auto"
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "300MB")
    folder = build_index(version, root, layout_name="parquet")
    assert read_done(folder)["memory_limit"] == "300MB"
    shutil.rmtree(folder)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(ValueError, match=MEMORY_LIMIT_ENV):
        build_index(version, root, layout_name="parquet")
