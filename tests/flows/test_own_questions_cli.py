"""``linkedqa data import --task`` as users call it (docs/howto/own-questions.md): the page's console blocks are what
the commands print, ``--task ea`` is refused before anything starts, and a method without an LLM runs on an
imported ``el`` set through ``linkedqa run`` (a KB built from one real Wikidata entity file).

The commands run as subprocesses against the session's Prefect test API (``tests/cli_env.py``).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import read_table
from tasks.datasets.jsonl import EA_REFUSED
from tests.cli_env import user_shell_env
from tests.unit.test_own_questions import PAGE, documented_lines

pytestmark = pytest.mark.usefixtures("cli_session_api")

#: Two WebQSP-EL test questions about Scotland (Q22), the entity of the real single-entity dump file below.
SCOTLAND_QUESTIONS = ("WebQTest-1364", "WebQTest-1652")
Q22 = "wikidata-entities/wikibase-dump-filter/Q22.json"


def cli(*args: str, home: Path, data_root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=layout.REPO_ROOT,
                          env=user_shell_env(home, LINKEDQA_DATA=str(data_root)), capture_output=True, text=True,
                          timeout=600)


def console_blocks() -> list[tuple[list[str], list[str]]]:
    """``(command words after linkedqa, printed lines)`` of each ```console block of the page."""
    out = []
    for block in re.findall(r"^```console\n(.*?)^```", PAGE.read_text(), flags=re.M | re.S):
        command, *printed = block.rstrip("\n").split("\n")
        words = shlex.split(command.removeprefix("$ "))
        assert words[0] == "linkedqa", command
        out.append((words[1:], printed))
    return out


def test_the_documented_import_and_refusal_are_what_the_commands_print(tmp_path: Path, data_root: Path):
    (imp, imp_printed), (run, run_printed) = console_blocks()
    lines = documented_lines()
    (tmp_path / "my-kgqa.jsonl").write_text(lines["kgqa"] + "\n" + lines["el"] + "\n")  # as the page says
    home = tmp_path / "wh"
    ran = cli(*[str(tmp_path / w) if w.endswith(".jsonl") else w for w in imp], home=home, data_root=data_root)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines() == imp_printed
    (version,) = [p for p in (home / "datasets" / "my-kgqa").iterdir()]
    assert read_manifest(version)["task"] == "kgqa"
    rej = read_table(version / "rejects", "rejects").to_pylist()
    assert [(r["line"], r["offset"]) for r in rej] == [(2, len(lines["kgqa"]) + 1)]

    ran = cli(*run, home=home, data_root=data_root)
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert ran.stderr.splitlines() == run_printed
    assert not (home / "runs").exists()

    listed = cli("data", "list", home=home, data_root=data_root)
    assert listed.returncode == 0, listed.stderr[-3000:]
    (mine,) = [line for line in listed.stdout.splitlines() if line.startswith("my-kgqa ")]
    assert re.fullmatch(r"my-kgqa +test=1 +\(imported, task kgqa\)", mine)


def test_task_ea_is_refused_before_anything_starts(tmp_path: Path, data_root: Path):
    f = tmp_path / "pairs.jsonl"
    f.write_text(documented_lines()["el"] + "\n")
    home = tmp_path / "wh"
    ran = cli("data", "import", str(f), "--name", "pairs", "--task", "ea", home=home, data_root=data_root)
    assert ran.returncode == 2
    assert ran.stderr.splitlines() == [f"error: {EA_REFUSED}", "hint: see `linkedqa --help`"]
    assert not home.exists() or not [p for p in home.rglob("*") if p.is_file()]


def test_search_recall_runs_on_an_imported_el_set(tmp_path: Path, data_root: Path):
    """Real WebQSP-EL questions imported as ``el`` (one of them without gold entities: a reject), a KB of the real
    Q22 dump line: search-recall finds each question's gold mention, and its run is an ``el`` run."""
    recs = {r["question_id"]: r for r in json.loads(
        (data_root / "webqsp-el/webqsp.test.entities.with_classes.json").read_text())}
    records = []
    for qid in SCOTLAND_QUESTIONS:
        r = recs[qid]
        s, e = r["main_entity_pos"]
        records.append({"id": qid, "question": r["utterance"], "gold_entities": r["entities"],
                        "gold_mentions": [{"start": s, "end": e, "qid": r["main_entity"]}]})
    records.insert(1, {"id": "WebQTest-0", "question": recs["WebQTest-0"]["utterance"]})
    f = tmp_path / "scotland.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in records))
    home = tmp_path / "wh"

    ran = cli("data", "import", str(f), "--name", "my-el", "--task", "el", home=home, data_root=data_root)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines() == [
        "my-el: 2 question(s) imported (test=2), 1 line(s) rejected; task el",
        "  line 2: task el needs gold_entities (the QIDs of the entities the question mentions)"]
    ran = cli("kb", "build", "--wikidata", str(data_root / Q22), "--name", "scotland", home=home,
              data_root=data_root)
    assert ran.returncode == 0, ran.stderr[-3000:]
    ran = cli("run", "search-recall", "--dataset", "my-el", home=home, data_root=data_root)
    assert ran.returncode == 0, ran.stderr[-3000:]
    run_id = ran.stdout.strip().splitlines()[-1]

    from tasks.runs.evaluate import recompute_metrics
    from tasks.runs.resolve import resolve_run

    run = resolve_run(run_id, home)
    assert (run.task, run.family) == ("el", "search")
    preds = read_table(layout.run_dir(run_id, home) / "predictions", "predictions").to_pylist()
    assert sorted(p["question_id"] for p in preds) == list(SCOTLAND_QUESTIONS)
    assert all(p["error"] is None and p["predicted_entities"] == ["Q22"] for p in preds), preds
    recomputed, stored = recompute_metrics(run_id, home)
    by_name = {m["metric"]: m for m in stored}
    assert by_name["recall@1"]["value"] == 1.0 and by_name["recall@1"]["n"] == 2
    assert {m["metric"]: m["value"] for m in recomputed} == {m: by_name[m]["value"] for m in
                                                             {r["metric"] for r in recomputed}}
