"""The papers' table rows as reproduction conditions: which ``linkedqa run`` corresponds to which row.

Input: one YAML file per paper beside this module (``papers/<paper id>.yaml``)::

    paper: {id: ela, title: ..., citation: ..., source: ela-entity-linking-agent.md}
    conditions:
      - id: t1-webqsp-llama70b
        table: Table 1                      # as printed
        row: "ELA w/ Llama-3.3-70B"         # the row label as printed (a column group too, where it names one)
        paper_model: Llama-3.3-70B-Instruct
        method: ela                         # a linkedqa method, or null when linkedqa has none for the row
        dataset: webqsp-el                  # a registered dataset (linkedqa data list)
        split: test
        settings: {k: "50"}                 # the method's --set keys, as strings
        figures:                            # the paper's figures of the row, as printed
          - {metric: Acc, printed: "78.20", scale: 100, linkedqa: accuracy}
        differs: ["Wikidata sample KB (140 k entities) instead of the full Wikidata dump"]
        runnable: true                      # false: `reason` says why (a commercial linker, a checkpoint, ...)

A figure's value is ``printed / scale`` (a percentage printed as ``78.20`` with ``scale: 100`` is 0.782, the scale
of linkedqa's metrics); ``linkedqa: null`` marks a figure linkedqa does not compute (the row may still be
runnable for its other figures). Outputs: :class:`Paper` objects (``load_papers``), the ``linkedqa run`` command
of a condition (:meth:`Condition.command`) and its checks against the method and dataset registries
(:func:`check_condition`).
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

PAPERS_DIR = Path(__file__).with_name("papers")
_ID = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")


class ConditionError(ValueError):
    """A conditions file that does not describe runnable conditions correctly (the message names the entry)."""


class Figure(BaseModel):
    """One figure of a paper's row, as printed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The paper's metric name (column header), as printed.
    metric: str
    #: The figure exactly as printed (``"78.20"``, ``"0.812"``, ``"-"`` for an empty cell).
    printed: str
    #: What ``printed`` is divided by to be on linkedqa's scale (100 for a percentage, 1 for a fraction).
    scale: float = 100.0
    #: The linkedqa metric it corresponds to (``accuracy``, ``hit1_tog``, ...); None: linkedqa does not compute it.
    linkedqa: str | None = None

    @property
    def value(self) -> float | None:
        """``printed / scale``, or None for a cell without a number."""
        try:
            return float(self.printed.replace(",", "")) / self.scale
        except ValueError:
            return None


class Step(BaseModel):
    """A run a condition needs first, on the same dataset and split (``before:``): its run id fills ``{run}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str
    settings: dict[str, str] = Field(default_factory=dict)


#: Where a condition's settings take the run id of its ``before`` step.
RUN_SLOT = "{run}"


class Condition(BaseModel):
    """One table row of a paper (on one dataset) and the ``linkedqa run`` that corresponds to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    table: str
    row: str
    paper_model: str | None = None
    method: str | None = None
    dataset: str | None = None
    split: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    figures: list[Figure]
    differs: list[str] = Field(default_factory=list)
    runnable: bool = True
    reason: str | None = None
    #: A run to make first (same dataset, split and run options), whose id fills ``{run}`` in ``settings``
    #: (ELA-for-QA: an ``ela`` run, then ``er --set entities=run:{run}``).
    before: Step | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Condition:
        if not _ID.match(self.id):
            raise ValueError(f"condition id {self.id!r}: lower-case letters, digits and . + - only")
        if not self.figures:
            raise ValueError(f"condition {self.id}: no figures")
        if self.runnable and (self.method is None or self.dataset is None):
            raise ValueError(f"condition {self.id}: a runnable condition names its method and dataset")
        if not self.runnable and not self.reason:
            raise ValueError(f"condition {self.id}: not runnable, but no reason")
        if (self.before is not None) != any(RUN_SLOT in v for v in self.settings.values()):
            raise ValueError(f"condition {self.id}: a `before` run and a {RUN_SLOT} setting go together")
        return self

    def command(self, *, limit: int | None = None, run_args: tuple[str, ...] = (), run_id: str = "$RUN"
                ) -> list[str]:
        """The ``linkedqa`` argv of this condition (``run METHOD --dataset D [--split S] [--set k=v]...``).

        Args:
            limit: ``--limit N`` (first N questions by id).
            run_args: More ``linkedqa run`` options (``--model M --backend openai --base-url URL``...).
            run_id: The run id of the ``before`` step (default: the shell variable ``shell()`` sets).

        Raises:
            ConditionError: The condition is not runnable.
        """
        if not self.runnable:
            raise ConditionError(f"condition {self.id} is not runnable: {self.reason}")
        settings = {k: v.replace(RUN_SLOT, run_id) for k, v in self.settings.items()}
        return _run_argv(str(self.method), str(self.dataset), self.split, settings, limit, run_args)

    def metrics(self) -> list[Figure]:
        """The figures linkedqa computes (those with a ``linkedqa`` metric name)."""
        return [f for f in self.figures if f.linkedqa]

    def before_command(self, *, limit: int | None = None, run_args: tuple[str, ...] = ()) -> list[str] | None:
        """The argv of the ``before`` step (same dataset, split, limit and run options), or None."""
        if self.before is None:
            return None
        return _run_argv(self.before.method, str(self.dataset), self.split, self.before.settings, limit, run_args)

    def shell(self, *, limit: int | None = None, run_args: tuple[str, ...] = ()) -> str:
        """The condition as shell lines: the ``before`` step's run id caught in ``RUN``, then the run."""
        line = "linkedqa " + _shell_join(self.command(limit=limit, run_args=run_args))
        first = self.before_command(limit=limit, run_args=run_args)
        return line if first is None else f"RUN=$(linkedqa {_shell_join(first)} | tail -n 1)\n{line}"


def _shell_join(argv: list[str]) -> str:
    """``shlex.join``, but ``$RUN`` stays a variable (its word in double quotes)."""
    return " ".join(f'"{t}"' if "$RUN" in t else shlex.quote(t) for t in argv)


def _run_argv(method: str, dataset: str, split: str | None, settings: dict[str, str], limit: int | None,
              run_args: tuple[str, ...]) -> list[str]:
    argv = ["run", method, "--dataset", dataset]
    if split:
        argv += ["--split", split]
    for k, v in settings.items():
        argv += ["--set", f"{k}={v}"]
    if limit is not None:
        argv += ["--limit", str(limit)]
    return [*argv, *run_args]


class Paper(BaseModel):
    """A paper and its conditions (one YAML file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    title: str
    citation: str
    source: str
    #: How close the conditions that ask no LLM come to the paper's figures, and why not closer (their page says it
    #: under their measured figures).
    no_llm_note: str | None = None
    conditions: list[Condition]

    @model_validator(mode="after")
    def _unique(self) -> Paper:
        ids = [c.id for c in self.conditions]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"paper {self.id}: duplicate condition ids {dup}")
        return self

    def condition(self, cid: str) -> Condition:
        """The condition with this id.

        Raises:
            ConditionError: With the paper's condition ids.
        """
        for c in self.conditions:
            if c.id == cid:
                return c
        raise ConditionError(f"paper {self.id} has no condition {cid!r}; see `linkedqa reproduce --list {self.id}`")


def read_paper(path: Path) -> Paper:
    """One conditions file.

    Raises:
        ConditionError: Unreadable YAML or a wrong field, naming the file.
    """
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Paper.model_validate({**raw["paper"], "conditions": raw.get("conditions") or []})
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise ConditionError(f"{path.name}: {exc}") from exc


@cache
def load_papers() -> dict[str, Paper]:
    """Every paper's conditions, by paper id (file order within a paper)."""
    papers = {}
    for path in sorted(PAPERS_DIR.glob("*.yaml")):
        paper = read_paper(path)
        if paper.id != path.stem:
            raise ConditionError(f"{path.name}: paper id {paper.id!r} is not the file's name")
        papers[paper.id] = paper
    return papers


def get_paper(pid: str) -> Paper:
    """A paper by id.

    Raises:
        ConditionError: Unknown id, with the known ones.
    """
    papers = load_papers()
    if pid not in papers:
        raise ConditionError(f"unknown paper {pid!r}; papers: {', '.join(papers)}")
    return papers[pid]


def check_condition(c: Condition) -> None:
    """Check a runnable condition against the method and dataset registries (a dry run: nothing is loaded).

    The method exists and takes its ``--set`` keys, the dataset is registered and of a task kind the method
    serves, and every ``linkedqa`` metric of its figures is one the method's runs store (its family's, its own
    extra ones, or the efficiency metrics every run stores).

    Raises:
        ConditionError: Naming the condition and what is wrong.
    """
    from tasks.datasets.registry import get_spec  # heavy: the dataset loaders
    from tasks.methods.registry import get_method  # heavy: every method's module
    from tasks.metrics.runs import FAMILIES
    from tasks.runs.finalize import EFFICIENCY_METRICS  # heavy: the run machinery

    if not c.runnable:
        return
    try:
        task = get_spec(str(c.dataset)).task
        if c.before is not None:
            first = get_method(c.before.method)
            first.check_task(str(c.dataset), task)
            first.parse_settings(c.before.settings)
        cls = get_method(str(c.method))
        settings = cls.parse_settings({k: v.replace(RUN_SLOT, "ela-run-id") for k, v in c.settings.items()})
        cls.check_task(str(c.dataset), task)
    except Exception as exc:  # noqa: BLE001 - any refusal is this condition's error
        raise ConditionError(f"condition {c.id}: {exc}") from exc
    known = (set(FAMILIES[cls.family_for(task)].metrics) | set(cls(settings).extra_metrics(task) or [])
             | EFFICIENCY_METRICS)
    unknown = [f.linkedqa for f in c.metrics() if f.linkedqa not in known]
    if unknown:
        raise ConditionError(f"condition {c.id}: {c.method} on {c.dataset} stores no metric {unknown}; it stores "
                             f"{sorted(known)}")


def needs_llm(c: Condition) -> bool:
    """Whether a runnable condition's run asks an LLM (its ``before`` step's included).

    Raises:
        ConditionError: The condition is not runnable.
    """
    from tasks.methods.registry import get_method  # heavy: every method's module

    if not c.runnable:
        raise ConditionError(f"condition {c.id} is not runnable: {c.reason}")
    steps = [(str(c.method), {k: v.replace(RUN_SLOT, "ela-run-id") for k, v in c.settings.items()})]
    if c.before is not None:
        steps.append((c.before.method, c.before.settings))
    return any(get_method(m)(get_method(m).parse_settings(s)).uses_llm for m, s in steps)
