"""Method contract: what the run flow needs from a method (settings, resources, agent, metrics).

A method is a small class registered in ``tasks.methods.registry.METHODS``. The run machinery (``tasks.runs``)
owns sharding, the backend, caching, persistence and metrics; a method only says:

* ``Settings``: a frozen pydantic model of its ``--set key=value`` options (unknown keys are rejected with
  the list of valid keys);
* ``build_tools(ctx)``: the batched tools its agent may call (search indexes are built/opened here);
* ``agent``: the step-machine generator (see ``tasks.methods.runtime``);
* ``metric_family``: which metrics ``tasks.metrics`` computes from its stored predictions; ``None`` for methods
  that serve several tasks (``closed-book``): the family then follows the dataset's task
  (``TASK_FAMILIES``: el -> linking, qa -> qa, yesno -> strategyqa, kgqa -> qald, kgqa-open -> tog,
  ea -> alignment).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from storage import layout
from tasks.methods.prompt_files import PromptFolder, file_hashes
from tasks.methods.records import ItemOutput
from tasks.methods.runtime import AgentFn, Tool


class UnknownSetting(ValueError):
    """A ``--set`` key the method does not know, or a value of the wrong type."""


class MethodSettings(BaseModel):
    """Base of every method's settings (frozen, unknown keys forbidden).

    Each field's docstring (the string literal under it) is its pydantic ``description``: the meaning that
    docs/reference/configuration.md shows for the ``--set`` key, which a test requires of every field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


TASK_FAMILIES: dict[str, str] = {"el": "linking", "qa": "qa", "yesno": "strategyqa", "kgqa": "qald",
                                 "kgqa-open": "tog", "ea": "alignment"}


@dataclass
class MethodContext:
    """What a method may use to build its tools and agent.

    Attributes:
        kb_version: Published KB version the run reads (None for methods without a KB).
        root: ``LINKEDQA_HOME``.
        run_dir: The run folder (side outputs such as SFT exports go under it).
        dataset: Dataset name of the run.
        task: The dataset's task kind (``tasks.datasets.registry.dataset_task``).
        split: The split the run reads (None outside a run).
        extra: Free slot for state a method computes in ``build_tools`` and its agent reads.
        side_outputs: Files ``build_tools`` wants under the run folder (``name.json``: a value, ``name.jsonl``: a
            list of records); the run machinery writes them (``storage.side_files``): methods write no files.
    """

    kb_version: str | None
    root: Path
    run_dir: Path | None = None
    dataset: str = ""
    task: str = "qa"
    split: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    side_outputs: dict[str, Any] = field(default_factory=dict)


class Method:
    """Base class of a registered method."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Settings: ClassVar[type[MethodSettings]] = MethodSettings
    needs_llm: ClassVar[bool] = True
    needs_kb: ClassVar[bool] = True
    metric_family: ClassVar[str | None] = "linking"
    #: Task kinds the method accepts (None: any); ``linkedqa run`` refuses other datasets with a clear error.
    tasks: ClassVar[tuple[str, ...] | None] = None
    #: Prompt files the method reads, relative to ``tasks/methods`` (None: every file of the ``prompts/``
    #: folder beside the module that defines the method). Only these enter the method's run ids.
    prompt_files: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, settings: MethodSettings):
        self.settings = settings

    @classmethod
    def parse_settings(cls, raw: dict[str, str]) -> MethodSettings:
        """Validate ``--set`` pairs against the method's settings model.

        Raises:
            UnknownSetting: Listing the valid keys and their defaults.
        """
        valid = cls.Settings.model_fields
        unknown = sorted(set(raw) - set(valid))
        listing = ", ".join(f"{k} (default {f.default!r})" for k, f in valid.items())
        if unknown:
            raise UnknownSetting(f"unknown --set key(s) {unknown} for method {cls.name!r}; valid keys: {listing}")
        try:
            return cls.Settings(**raw)
        except ValidationError as exc:
            msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise UnknownSetting(f"invalid --set value for {cls.name!r}: {msgs}") from None

    @classmethod
    def needs_kb_for(cls, task: str) -> bool:
        """Whether a run on a dataset of kind ``task`` needs a published KB (default: ``needs_kb``)."""
        return cls.needs_kb

    @classmethod
    def family_for(cls, task: str) -> str:
        """Metric family of this method on a dataset of kind ``task``."""
        return cls.metric_family or TASK_FAMILIES[task]

    @classmethod
    def prompt_files_for(cls, task: str) -> list[str]:
        """Prompt files a run on a dataset of kind ``task`` reads (relative to ``tasks/methods``)."""
        if cls.prompt_files is not None:
            return list(cls.prompt_files)
        return PromptFolder(inspect.getfile(cls)).files()

    @classmethod
    def prompt_hashes(cls, task: str) -> dict[str, str]:
        """sha256[:12] of each prompt file the method reads on ``task`` (part of the run id and manifest)."""
        return file_hashes(cls.prompt_files_for(task))

    def extra_metrics(self, task: str) -> list[str] | None:
        """Metrics beyond the family's, fixed by the method and its settings (not by the data).

        ``None`` lets ``tasks.metrics.runs`` infer the ``qa`` extras from the rows; methods that log retrieval
        or predict entities on QA datasets say so here, so every shard scores the same metrics.
        """
        return None

    @classmethod
    def check_task(cls, dataset: str, task: str) -> None:
        """Refuse a dataset whose task kind the method does not serve.

        Raises:
            UnknownSetting: Naming the dataset, its task and the tasks the method accepts.
        """
        if cls.tasks is not None and task not in cls.tasks:
            raise UnknownSetting(f"method {cls.name!r} does not apply to dataset {dataset!r} (task {task!r}); "
                                 f"it accepts datasets of task(s) {', '.join(cls.tasks)}")

    @property
    def uses_llm(self) -> bool:
        """Whether a run with these settings asks an LLM (``needs_llm``, unless a setting turns the LLM off)."""
        return type(self).needs_llm

    @classmethod
    def check_inputs(cls, settings: MethodSettings, dataset: str, root: Path | None) -> None:
        """Refuse, before a run starts, settings that name inputs which do not exist (none by default).

        Raises:
            LookupError: Naming the missing input.
        """

    def build_tools(self, ctx: MethodContext) -> dict[str, Tool]:
        """Open or build the batched tools the agent uses."""
        return {}

    def agent(self, ctx: MethodContext) -> AgentFn:
        """The step-machine generator function (called after ``build_tools``)."""
        raise NotImplementedError

    def index_paths(self, ctx: MethodContext) -> list[Path] | None:
        """Files/folders the method's retrieval needs on disk (for the ``index_disk_mb`` metric).

        ``None`` (the default) counts every index of the run's KB version; ``[]`` means none.
        """
        return None if ctx.kb_version else []

    def postprocess(self, outputs: list[ItemOutput], questions: list[dict], ctx: MethodContext,
                    shard: int) -> dict[str, Any] | None:
        """Optional per-shard side outputs (e.g. SFT exports) as ``{relative name: value}``.

        The run machinery writes them under the run folder (``*.jsonl``: a list of records, ``*.json``: a value).
        """
        return None


def source_index_paths(source: str, ctx: MethodContext) -> list[Path]:
    """The BM25 index an entity-search source reads: labels + aliases (``wikidata``) or titles (``wikipedia``)."""
    if not ctx.kb_version:
        return []
    return [layout.index_kind_dir(ctx.kb_version, "entity-bm25" if source == "wikidata" else "title-bm25", ctx.root)]
