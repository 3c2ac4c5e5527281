"""A run id hashes its own method's prompts only (so an ELA prompt edit does not restart AnchorRAG runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasks.methods import prompt_files
from tasks.methods.registry import METHODS
from tasks.runs.config import RunConfig, make_run_id

ROOT = Path(prompt_files.__file__).resolve().parent
ALL_PROMPTS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/prompts/*") if p.is_file())
TASKS = ("el", "qa", "yesno", "kgqa", "kgqa-open", "ea")


def _ids(monkeypatch, copy: Path) -> dict[tuple[str, str], str]:
    """Run id of every (method, task) it accepts, prompts read from ``copy``."""
    monkeypatch.setattr(prompt_files, "METHODS_ROOT", copy)
    out = {}
    for name, cls in METHODS.items():
        for task in cls.tasks or TASKS:
            cfg = RunConfig(method=name, dataset="d")
            out[name, task] = make_run_id(cfg, {}, "v1", "test", None, cls.prompt_hashes(task))
    return out


@pytest.fixture()
def prompt_copy(tmp_path: Path) -> Path:
    """A copy of every family's prompts/ folder (edited by the tests, never the repository's)."""
    for rel in ALL_PROMPTS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_every_prompt_file_is_read_by_some_method():
    claimed = {f for cls in METHODS.values() for t in (cls.tasks or TASKS) for f in cls.prompt_files_for(t)}
    assert sorted(set(ALL_PROMPTS) - claimed) == [], "prompt files no method declares"
    assert sorted(claimed - set(ALL_PROMPTS)) == [], "declared prompt files that do not exist"


@pytest.mark.parametrize("rel", ALL_PROMPTS)
def test_editing_a_prompt_changes_exactly_the_run_ids_of_the_methods_that_read_it(monkeypatch, prompt_copy, rel):
    before = _ids(monkeypatch, prompt_copy)
    with (prompt_copy / rel).open("a", encoding="utf-8") as fh:
        fh.write("\n")
    after = _ids(monkeypatch, prompt_copy)
    changed = {k for k in before if before[k] != after[k]}
    readers = {(name, t) for name, cls in METHODS.items() for t in (cls.tasks or TASKS)
               if rel in cls.prompt_files_for(t)}
    assert readers, f"{rel} is read by no method"
    assert changed == readers


def test_ela_prompt_edit_leaves_anchorrag_resumable(monkeypatch, prompt_copy):
    before = _ids(monkeypatch, prompt_copy)
    (prompt_copy / "ela/prompts/ela_system.txt").write_text("edited", encoding="utf-8")
    after = _ids(monkeypatch, prompt_copy)
    assert before["ela", "el"] != after["ela", "el"]
    assert before["anchorrag", "kgqa-open"] == after["anchorrag", "kgqa-open"]
    assert before["ea-agent", "ea"] == after["ea-agent", "ea"]


def test_closed_book_on_kgqa_hashes_the_kgqa_prompts_it_delegates_to():
    cb = METHODS["closed-book"]
    assert cb.prompt_files_for("kgqa") == ["kgqa/prompts/kgqa_prompts.json"]
    assert cb.prompt_files_for("qa") == ["qa/prompts/qa_prompts.json"]


def test_methods_without_prompts_read_none():
    for name in ("search-recall", "ea-embed"):
        assert METHODS[name].prompt_hashes(METHODS[name].tasks[0]) == {}
