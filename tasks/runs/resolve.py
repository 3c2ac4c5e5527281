"""A run plan resolved once: the method class, its parsed settings, the dataset's task kind, the metric family.

``RunPlan`` (``storage.run_store``) is what is persisted (strings and numbers, ``plan.json``).
``ResolvedRun`` is what the run machinery works with: :func:`resolve_run` looks the method up in the registry,
parses the stored settings, reads the dataset's task kind and picks the metric family exactly once, and
execution (``execute_shard``), finalisation (``finalize_run``), recomputation (``recompute_metrics``,
``rewrite_metrics``) and the efficiency accounting all consume that object instead of re-resolving strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage import layout
from storage.run_store import RunStore
from tasks.datasets.registry import dataset_task
from tasks.methods.base import Method, MethodContext
from tasks.methods.registry import get_method
from tasks.runs.config import RunPlan, load_plan


@dataclass(frozen=True)
class ResolvedRun:
    """Everything a run's execution derives from its plan.

    Attributes:
        plan: The persisted plan.
        method_cls: The registered method class.
        method: The method instantiated with the plan's settings.
        task: The dataset's task kind (``el``, ``qa``, ``yesno``, ``kgqa``, ``kgqa-open``, ``ea``).
        family: The metric family scored on the run (``tasks.metrics.families.FAMILIES`` key).
        extra_metrics: Metrics beyond the family's, fixed by the method (``Method.extra_metrics``).
        root: ``LINKEDQA_HOME`` of the run.
    """

    plan: RunPlan
    method_cls: type[Method]
    method: Method
    task: str
    family: str
    extra_metrics: list[str] | None
    root: Path

    @property
    def run_id(self) -> str:
        """The run id."""
        return self.plan.run_id

    @property
    def kb_version(self) -> str | None:
        """The published KB version the run reads (None for methods without a KB)."""
        return self.plan.kb_version

    @property
    def store(self) -> RunStore:
        """The run's folder (``runs/<run_id>/`` under the run's home)."""
        return RunStore(self.plan.run_id, self.root)

    def context(self, with_run_dir: bool = True) -> MethodContext:
        """The ``MethodContext`` the method's tools and agent are built with."""
        return MethodContext(kb_version=self.plan.kb_version, root=self.root,
                             run_dir=self.store.folder if with_run_dir else None,
                             dataset=self.plan.config.dataset, task=self.task, split=self.plan.split)

    def index_paths(self) -> list[Path] | None:
        """What the run's retrieval keeps on disk (``Method.index_paths``; every KB index when unspecified)."""
        paths = self.method.index_paths(self.context(with_run_dir=False))
        if paths is None and self.plan.kb_version:
            return [self.root / "indexes" / self.plan.kb_version]
        return paths


def resolve_run(plan: RunPlan | ResolvedRun | str, root: Path | None = None) -> ResolvedRun:
    """Resolve a plan (or a run id, whose ``plan.json`` is read) once; a ``ResolvedRun`` is returned unchanged.

    Raises:
        tasks.methods.registry.UnknownMethod: The plan names a method no longer registered.
        LookupError: An unknown run id.
    """
    if isinstance(plan, ResolvedRun):
        return plan
    home = Path(root) if root is not None else layout.home()
    if isinstance(plan, str):
        plan = load_plan(plan, home)
    method_cls = get_method(plan.config.method)
    method = method_cls(method_cls.Settings(**plan.method_settings))
    task = dataset_task(plan.config.dataset, home, plan.dataset_version)
    return ResolvedRun(plan=plan, method_cls=method_cls, method=method, task=task,
                       family=method_cls.family_for(task), extra_metrics=method.extra_metrics(task), root=home)
