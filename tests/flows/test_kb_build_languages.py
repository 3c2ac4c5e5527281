"""``linkedqa kb build --languages`` end to end: the real CLI parser, the ``build_kb_from_inputs`` flow (real
Prefect API), the real readers and merge on the real Wikidata dump samples, then the run planner.

A dump build keeps ``en,mul`` by default: its labels table holds only those languages while its entities, claims,
properties and aliases are exactly those of an ``all`` build of the same inputs; the two KB versions differ, and so
do the run ids planned on them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from flows.cli import build_parser
from storage import layout
from storage.catalog import MEMORY_LIMIT_ENV, auto_memory_limit
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from tasks.runs.config import RunConfig
from tasks.runs.planning import plan_run
from tests.flows.test_flow_commands import api, linkedqa  # noqa: F401 - the harness API fixture

WIKIDATA = [
    "wikidata-entities/wikibase-dump-filter/entities.gz",
    "wikidata-entities/opentapioca/sample_wikidata_items.json.bz2",
    "wikidata-entities/opentapioca/short_stream.json.bz2",
    "wikidata-entities/qwikidata/wd_Q42.json",
]
KGTK = "kgtk-arnold/aliases.en.tsv.gz"


def _rows(version: str, table: str) -> list[tuple]:
    tbl = read_table(layout.kb_table_dir(version, table), table)
    return sorted(tuple(str(v) for v in r.values()) for r in tbl.to_pylist())


def _build(capsys, data_root: Path, *extra: str) -> str:
    files = [str(data_root / f) for f in WIKIDATA]
    out = linkedqa(capsys, "kb", "build", "--wikidata", *files, "--kgtk", str(data_root / KGTK), "--name", "langs",
                   *extra)
    return re.search(r"^KB (\S+) ready in", out, re.MULTILINE).group(1)


def test_languages_option_end_to_end(api, home: Path, data_root: Path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)  # the default build below runs at the auto default
    default = _build(capsys, data_root)  # a dump build: en,mul
    every = _build(capsys, data_root, "--languages", "all", "--memory-limit", "700MB")
    assert default != every
    assert read_manifest(layout.kb_dir(default))["config"]["languages"] == "en,mul"
    # --memory-limit reaches the merge (and is not part of the version); the environment is put back after
    assert read_manifest(layout.kb_dir(default))["merge_memory_limit"] == auto_memory_limit(1)  # the size it ran at
    assert read_manifest(layout.kb_dir(every))["merge_memory_limit"] == "700MB"
    assert MEMORY_LIMIT_ENV not in os.environ
    assert "languages" not in read_manifest(layout.kb_dir(every))["config"]
    assert _build(capsys, data_root, "--languages", "MUL,en") == default  # same choice, same version: skipped
    listing = {ln.split()[0]: ln for ln in linkedqa(capsys, "kb", "list").splitlines()}
    assert "languages=en,mul " in listing[default] and "languages=all " in listing[every]

    labels = read_table(layout.kb_table_dir(default, "labels"), "labels").to_pylist()
    all_labels = read_table(layout.kb_table_dir(every, "labels"), "labels").to_pylist()
    assert {r["lang"] for r in labels} <= {"en", "mul"} and len({r["lang"] for r in all_labels}) > 300
    assert sorted((r["qid"], r["lang"], r["label"]) for r in labels) == sorted(
        (r["qid"], r["lang"], r["label"]) for r in all_labels if r["lang"] in ("en", "mul"))
    assert len(all_labels) > 5 * len(labels)
    for table in ("entities", "claims", "properties", "aliases"):
        assert _rows(default, table) == _rows(every, table), table

    # the KB version is part of the run id: one run config, two KBs, two runs
    plans = [plan_run(RunConfig(method="search-recall", dataset="webqsp-el", split="test", limit=2, kb=v),
                      data_root=data_root) for v in (default, every)]
    assert [p.kb_version for p in plans] == [default, every]
    assert plans[0].run_id != plans[1].run_id and plans[0].question_ids == plans[1].question_ids


def test_bad_language_code_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["kb", "build", "--sample", "--languages", "en,en_GB"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --languages: 'en_GB': not a Wikidata language code" in err
