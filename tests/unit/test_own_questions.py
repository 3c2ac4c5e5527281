"""``linkedqa data import --task``: the gold each task kind needs, the kind stored with the dataset and read back by
``linkedqa run``'s check, and the documented lines (docs/howto/own-questions.md), one per kind, imported with their
kind and compared with the registered dataset's question.

The records are real questions: the page's lines, copied from the benchmark files, and variations of them that
lack what a kind needs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from storage import layout
from storage.manifest import read_manifest
from storage.parquet_io import conform
from tasks.datasets.jsonl import EA_REFUSED, TASKS, import_jsonl
from tasks.datasets.registry import dataset_task, load_dataset
from tasks.datasets.store import latest_dataset_folder, store_dataset

PAGE = layout.REPO_ROOT / "docs" / "howto" / "own-questions.md"
#: The registered dataset (and split) each documented line comes from.
SOURCES = {"el": ("webqsp-el", "test"), "qa": ("popqa", "longtail"), "yesno": ("strategyqa", "dev"),
           "kgqa": ("qald-10", "test"), "kgqa-open": ("cwq", "test")}
GOLD = ("gold_entities", "gold_answers", "gold_answer_qids", "gold_mentions", "sparql")


def documented_lines() -> dict[str, str]:
    """``{kind: line}``: the one-line ```json block under each ``### `kind` `` heading of the page."""
    text = PAGE.read_text()
    found = re.findall(r"^### `([a-z-]+)`\n(?:(?!^#).*\n)*?```json\n(.*)\n```", text, flags=re.M)
    out = dict(found)
    assert len(out) == len(found), "a task kind has two example lines"
    return out


def _write(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _import(tmp_path: Path, kind: str, *records: dict | str):
    path = tmp_path / f"{kind}.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return import_jsonl(path, f"own-{kind}", kind)


def test_the_page_has_one_line_per_importable_kind() -> None:
    assert sorted(documented_lines()) == sorted(k for k in TASKS if k != "ea") == sorted(SOURCES)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_each_documented_line_imports_with_its_kind_as_the_benchmark_has_it(kind, tmp_path, data_root) -> None:
    line = documented_lines()[kind]
    ds = _import(tmp_path, kind, line)
    assert ds.rejects == []
    (row,) = list(ds.rows())
    conform([row], "questions")
    name, split = SOURCES[kind]
    record = json.loads(line)
    assert row["split"] == record.get("split", "test") == split
    real = next(r for r in load_dataset(name, data_root).rows(split) if r["question_id"] == str(record["id"]))
    assert row["question"] == real["question"]
    for col in GOLD:  # every gold field the line gives is the benchmark's, as its loader stores it
        if col in record:
            assert row[col] == real[col], col
    meta, real_meta = json.loads(row["meta"]), json.loads(real["meta"])
    assert meta == {k: real_meta[k] for k in meta}


def test_el_needs_gold_entities_as_qids(tmp_path) -> None:
    el = json.loads(documented_lines()["el"])
    ds = _import(tmp_path, "el", el, {k: v for k, v in el.items() if k != "gold_entities"} | {"id": "no-gold"},
                 el | {"id": "label", "gold_entities": ["Jamaica"]},
                 el | {"id": "mention", "gold_mentions": [el["gold_mentions"][0] | {"qid": "m.03_r3"}]},
                 el | {"id": "no-mentions", "gold_mentions": []})
    assert [r["question_id"] for r in ds.rows()] == ["WebQTest-0", "no-mentions"]
    assert [r["reason"] for r in ds.rejects] == [
        "line 2: task el needs gold_entities (the QIDs of the entities the question mentions)",
        "line 3: task el: gold_entities item 0 'Jamaica' is not a Wikidata QID (Q followed by digits)",
        "line 4: task el: gold_mentions[0] qid 'm.03_r3' is not a Wikidata QID",
    ]


def test_kgqa_needs_answers_and_keeps_its_literals_for_qald(tmp_path) -> None:
    kgqa = json.loads(documented_lines()["kgqa"])
    bare = {k: v for k, v in kgqa.items() if k != "gold_answer_qids"}
    ds = _import(tmp_path, "kgqa", kgqa, bare | {"id": "no-answers"},
                 bare | {"id": "text-only", "gold_answers": ["Kyoto City University of Arts"]},
                 kgqa | {"id": "labels", "gold_answers": ["Kyoto City University of Arts"], "gold_literals": []},
                 kgqa | {"id": "bad-literals", "gold_literals": "KCUA"},
                 kgqa | {"id": "label-qid", "gold_answer_qids": ["Kyoto City University of Arts"]},
                 kgqa | {"id": "no-sparql", "sparql": None})
    rows = {r["question_id"]: r for r in ds.rows()}
    assert sorted(rows) == ["9", "labels", "no-sparql", "text-only"]
    assert json.loads(rows["labels"]["meta"]) == {"gold_literals": []}  # QALD F1: the QID alone, not the label
    assert rows["no-sparql"]["sparql"] is None and rows["text-only"]["gold_answer_qids"] == []
    assert [r["reason"] for r in ds.rejects] == [
        "line 2: task kgqa needs gold_answers or gold_answer_qids",
        "line 5: field 'gold_literals' must be a list, got str",
        "line 6: task kgqa: gold_answer_qids item 0 'Kyoto City University of Arts' is not a Wikidata QID "
        "(Q followed by digits)",
    ]


def test_kgqa_open_needs_gold_answers(tmp_path) -> None:
    cwq = json.loads(documented_lines()["kgqa-open"])
    ds = _import(tmp_path, "kgqa-open", cwq, cwq | {"id": "no-answers", "gold_answers": []},
                 cwq | {"id": "no-topic", "gold_entities": []})
    assert [r["question_id"] for r in ds.rows()] == [cwq["id"], "no-topic"]
    assert [r["reason"] for r in ds.rejects] == ["line 2: task kgqa-open needs gold_answers"]


def test_yesno_needs_exactly_one_yes_or_no(tmp_path) -> None:
    sq = json.loads(documented_lines()["yesno"])
    ds = _import(tmp_path, "yesno", sq, sq | {"id": 1, "gold_answers": ["Yes"]},
                 sq | {"id": 2, "gold_answers": ["TRUE"]}, sq | {"id": 3, "gold_answers": []},
                 sq | {"id": 4, "gold_answers": [True, False]}, sq | {"id": 5, "gold_answers": ["maybe"]},
                 sq | {"id": 6, "gold_answers": [1]})
    assert {r["question_id"]: r["gold_answers"] for r in ds.rows()} == {"916": ["no"], "1": ["yes"], "2": ["yes"]}
    need = 'task yesno needs exactly one gold_answers item: true, false, "yes" or "no"'
    assert [r["reason"] for r in ds.rejects] == [
        f"line 4: {need} (got [])", f'line 5: {need} (got ["true", "false"])',
        f'line 6: {need} (got ["maybe"])', f'line 7: {need} (got ["1"])',
    ]


def test_qa_needs_nothing_more(tmp_path) -> None:
    """The default kind: ``id`` and ``question`` are enough, and other fields are taken as they are."""
    qa = json.loads(documented_lines()["qa"])
    ds = import_jsonl(_write(tmp_path, [{"id": qa["id"], "question": qa["question"]},
                                        qa | {"id": "label", "gold_entities": ["Henry Feilden"]}]), "own-qa")
    assert ds.rejects == [] and [r["question_id"] for r in ds.rows()] == ["4382392", "label"]


def test_ea_and_unknown_kinds_are_refused_before_the_file_is_read(tmp_path) -> None:
    absent = tmp_path / "absent.jsonl"
    with pytest.raises(ValueError, match="DBP15K") as exc:
        import_jsonl(absent, "own-ea", "ea")
    assert str(exc.value) == EA_REFUSED
    with pytest.raises(ValueError, match="unknown task kind 'kbqa'; task kinds: el, qa, yesno, kgqa, kgqa-open, ea"):
        import_jsonl(absent, "own-x", "kbqa")


def test_the_kind_is_stored_with_the_version_and_read_back_by_the_run_check(tmp_path, data_root) -> None:
    from tasks.methods.base import UnknownSetting
    from tasks.runs.checks import check_run_config
    from tasks.runs.config import RunConfig

    home = tmp_path / "wh"
    lines = documented_lines()
    path = tmp_path / "mine.jsonl"
    path.write_text(lines["kgqa"] + "\n" + lines["el"] + "\n")

    as_kgqa = store_dataset("mine", data_root, path, root=home, task="kgqa")
    assert as_kgqa.extra["task"] == "kgqa" and as_kgqa.extra["splits"] == {"test": 1}  # the el line: no answers
    assert read_manifest(layout.dataset_dir("mine", as_kgqa.version, home))["task"] == "kgqa"
    assert dataset_task("mine", home) == "kgqa"
    _, _, task = check_run_config(RunConfig(method="kg-1hop", dataset="mine"), home)
    assert task == "kgqa"
    with pytest.raises(UnknownSetting, match=r"does not apply to dataset 'mine' \(task 'kgqa'\); it accepts "
                                             r"datasets of task\(s\) qa, yesno"):
        check_run_config(RunConfig(method="bm25-rag", dataset="mine"), home)

    # the same file as qa: another version, now the current one; the first keeps its kind
    as_qa = store_dataset("mine", data_root, path, root=home)
    assert as_qa.version != as_kgqa.version
    assert as_qa.extra == as_kgqa.extra | {"task": "qa", "splits": {"test": 2}, "n_rejects": 0}
    assert dataset_task("mine", home) == "qa" and dataset_task("mine", home, as_kgqa.version) == "kgqa"
    assert check_run_config(RunConfig(method="bm25-rag", dataset="mine"), home)[2] == "qa"
    # importing the file as kgqa again makes that version the current one again
    again = store_dataset("mine", data_root, path, root=home, task="kgqa")
    assert again.version == as_kgqa.version
    assert latest_dataset_folder("mine", home).name == as_kgqa.version and dataset_task("mine", home) == "kgqa"
    # a registered dataset's kind is its registry entry's, whatever is stored
    assert dataset_task("qald-10", home) == "kgqa" and dataset_task("not-stored", home) == "qa"
