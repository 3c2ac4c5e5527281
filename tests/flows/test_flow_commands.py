"""Every ``linkedqa`` command that writes to the warehouse runs a Prefect flow (the CLI parses and dispatches),
so it shows in Prefect and a deployment can call the same flow.

The commands are parsed by the real parser and dispatched in-process against the session's ephemeral Prefect
API; each must add a flow run of its flow. Read-only commands (``eval RUN`` without ``--write``) add none. The
run flow builds the indexes its method reads as a ``build_indexes`` subflow before its shards.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flows.cli import build_parser
from storage import layout
from tasks.methods.base import MethodContext
from tasks.methods.registry import METHODS, register
from tests.flows.test_fetch import DUMP_DATE, MirrorServer, mirror  # noqa: F401 - the loopback mirror fixture
from tests.flows.test_method_plugin import LastWordMethod

Q42 = "wikidata-entities/qwikidata/wd_Q42.json"  # one real Special:EntityData document


class IndexedLastWordMethod(LastWordMethod):
    """The plug-in test method, reading a KB whose entity BM25 index it declares (``index_paths``)."""

    name = "test-last-word-indexed"
    needs_kb = True

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """The entity BM25 index of the run's KB."""
        return [layout.index_kind_dir(ctx.kb_version, "entity-bm25", ctx.root)]


@pytest.fixture()
def indexed_method():
    register(IndexedLastWordMethod)
    try:
        yield IndexedLastWordMethod
    finally:
        METHODS.pop(IndexedLastWordMethod.name, None)


@pytest.fixture()
def api(prefect_harness, monkeypatch: pytest.MonkeyPatch) -> str:
    """The harness's API in the environment too, so the commands reuse it (``bind_ephemeral_server`` no-ops)."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    monkeypatch.setenv("PREFECT_API_URL", url)
    return url


def flow_runs(name: str) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with get_client(sync_client=True) as client:
        return len(client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[name])), limit=200))


def linkedqa(capsys: pytest.CaptureFixture, *argv: str) -> str:
    """Parse and dispatch one command line in-process; returns its stdout (exit code 0 asserted)."""
    ns = build_parser().parse_args(list(argv))
    capsys.readouterr()
    assert ns.fn(ns) == 0, argv
    return capsys.readouterr().out


def adds_runs(flows: dict[str, int], *names: str) -> None:
    for name in names:
        assert flow_runs(name) == flows.get(name, 0) + 1, f"no new flow run of {name}"


def test_commands_that_write_run_as_prefect_flows(api, home: Path, data_root: Path, tmp_path: Path, capsys,
                                                  indexed_method, mirror: MirrorServer):  # noqa: F811
    names = ("build_kb_from_inputs", "build_kb", "build_indexes", "export_kb_ntriples", "import_questions",
             "load_benchmarks", "run_method", "evaluate_run", "fetch_benchmarks", "download_dumps")

    def before() -> dict[str, int]:
        return {n: flow_runs(n) for n in names}

    # kb build: the one planning path (build_kb_from_inputs plans any input kind, build_kb as its subflow)
    runs = before()
    out = linkedqa(capsys, "kb", "build", "--wikidata", str(data_root / Q42), "--name", "q42")
    adds_runs(runs, "build_kb_from_inputs", "build_kb")
    (version,) = [v.name for v in layout.kb_root().iterdir()]
    assert f"KB {version} ready" in out and "entities" in out

    # a run builds the indexes its method reads before its shards, as a build_indexes subflow
    entity_bm25 = layout.index_kind_dir(version, "entity-bm25")
    assert not entity_bm25.exists()
    runs = before()
    out = linkedqa(capsys, "run", IndexedLastWordMethod.name, "--dataset", "popqa", "--limit", "3")
    adds_runs(runs, "run_method", "build_indexes")
    assert "index entity-bm25" in out and "built in" in out
    assert (entity_bm25 / "_done.json").is_file() or (entity_bm25 / "meta.json").is_file()
    run_id = out.strip().splitlines()[-1]

    # kb index: the requested kinds; a built one is left alone, a second call is a no-op
    runs = before()
    out = linkedqa(capsys, "kb", "index", "--kind", "entity-bm25", "--kind", "kg-duckdb")
    adds_runs(runs, "build_indexes")
    assert re.search(r"index entity-bm25 +already built", out) and re.search(r"index kg-duckdb +built in", out)
    assert "1 index(es) built, 1 already present" in out
    out = linkedqa(capsys, "kb", "index", "--kb", "q42", "--kind", "kg-duckdb", "--kind", "entity-bm25")
    assert "0 index(es) built, 2 already present" in out

    # kb export-nt
    runs = before()
    nt = tmp_path / "out" / "kb.nt"
    out = linkedqa(capsys, "kb", "export-nt", str(nt), "--workers", "2")
    adds_runs(runs, "export_kb_ntriples")
    assert nt.is_file() and f"from KB {version}" in out
    triples = int(re.search(r"triples=([\d,]+)", out).group(1).replace(",", ""))
    assert sum(1 for _ in nt.open(encoding="utf-8")) == triples > 0  # the two workers' parts, appended

    # data import / data load
    real = json.loads((data_root / "webqsp-el/webqsp.test.entities.with_classes.json").read_text())[:2]
    qfile = tmp_path / "qs.jsonl"
    qfile.write_text("".join(json.dumps({"id": r["question_id"], "question": r["utterance"]}) + "\n" for r in real))
    runs = before()
    out = linkedqa(capsys, "data", "import", str(qfile), "--name", "mine")
    adds_runs(runs, "import_questions")
    assert "mine: 2 question(s) imported (test=2), 0 line(s) rejected" in out
    out = linkedqa(capsys, "data", "load", "qald-10")
    adds_runs(runs, "load_benchmarks")
    assert out.startswith("qald-10: {") and (home / "datasets" / "qald-10").is_dir()

    # eval: reading is direct (no flow run), --write and --all go through evaluate_run
    runs = before()
    out = linkedqa(capsys, "eval", run_id)
    assert flow_runs("evaluate_run") == runs["evaluate_run"]
    assert f"{run_id}: stored with metrics format" in out and "MISMATCH" not in out
    assert linkedqa(capsys, "eval", run_id, "--write") == out  # same format: nothing to store, same table
    adds_runs(runs, "evaluate_run")
    assert f"{run_id}: stored with metrics format" in linkedqa(capsys, "eval", "--all")

    # data fetch / kb download (from the loopback mirror of the official locations)
    runs = before()
    out = linkedqa(capsys, "data", "fetch", "qald-9-plus", "--mirror", mirror.url, "--to", str(tmp_path / "data"))
    adds_runs(runs, "fetch_benchmarks")
    assert "qald-9-plus: 2 file(s) verified (2 downloaded, 0 already present)" in out
    out = linkedqa(capsys, "kb", "download", "--wikidata", DUMP_DATE, "--to", str(tmp_path / "dl"), "--mirror",
                   mirror.url)
    adds_runs(runs, "download_dumps")
    assert Path(out.strip().splitlines()[-1]).is_file()
