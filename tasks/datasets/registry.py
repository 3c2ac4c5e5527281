"""Dataset registry: dataset name -> loader (an explicit dict; no guessing from file names or contents).

Inputs: a dataset name (docs/architecture.md#cli-contract) and the data root (``LINKEDQA_DATA``).
Outputs: a ``LoadedDataset`` (questions per split, rejects, source files).

Adding a dataset: write ``load(data_root: Path) -> LoadedDataset`` in a module of this package (use
``tasks.datasets.base.DatasetBuilder`` and ``question_row``) and add one ``DatasetSpec`` line to ``REGISTRY``.
User files go through ``import_jsonl`` instead (``linkedqa data import``); their task kind is stored in the
manifest of the dataset version (``tasks.datasets.store``) and read back by :func:`dataset_task`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage import layout
from storage.catalog import done_dataset_versions
from storage.manifest import read_manifest
from tasks.datasets import dbp15k, entity_qa, jsonl, lcquad2, qald, simplequestions, tog_kgqa, webqsp_el
from tasks.datasets.base import LoadedDataset

__all__ = ["REGISTRY", "DatasetSpec", "UnknownDataset", "import_jsonl", "known_datasets", "load_dataset"]


@dataclass(frozen=True)
class DatasetSpec:
    """One registered dataset.

    Attributes:
        name: Dataset name used on the command line and in the ``dataset`` column.
        description: One line for ``linkedqa data list``.
        loader: ``loader(data_root) -> LoadedDataset``.
        task: What the questions ask for, which picks the default metric family of methods that serve several
            tasks (``closed-book``): ``el`` (entity linking), ``qa`` (short text answers), ``yesno``
            (StrategyQA), ``kgqa`` (answer sets over Wikidata), ``ea`` (entity alignment), ``kgqa-open``
            (open-world KGQA with text answers, ToG format: metric family ``tog``).
    """

    name: str
    description: str
    loader: Callable[[Path], LoadedDataset]
    task: str = "qa"


REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(webqsp_el.NAME, webqsp_el.DESCRIPTION, webqsp_el.load, "el"),
        DatasetSpec(qald.QALD10, qald.QALD10_DESCRIPTION, qald.load_qald10, "kgqa"),
        DatasetSpec(qald.QALD9P, qald.QALD9P_DESCRIPTION, qald.load_qald9_plus, "kgqa"),
        DatasetSpec(simplequestions.NAME, simplequestions.DESCRIPTION, simplequestions.load, "kgqa"),
        DatasetSpec(lcquad2.NAME, lcquad2.DESCRIPTION, lcquad2.load, "kgqa"),
        *(DatasetSpec(name, entity_qa.DESCRIPTIONS[name], loader, task) for name, loader, task in (
            (entity_qa.ENTITYQUESTIONS, entity_qa.load_entityquestions, "qa"),
            (entity_qa.POPQA, entity_qa.load_popqa, "qa"),
            (entity_qa.FACTOIDQA, entity_qa.load_factoidqa, "qa"),
            (entity_qa.STRATEGYQA, entity_qa.load_strategyqa, "yesno"),
            (entity_qa.TWOWIKI, entity_qa.load_2wiki, "qa"),
            (entity_qa.TRIVIAQA, entity_qa.load_triviaqa, "qa"),
        )),
        *(DatasetSpec(name, tog_kgqa.DESCRIPTIONS[name], tog_kgqa.LOADERS[name], "kgqa-open")
          for name in tog_kgqa.DATASETS),
        *(DatasetSpec(name, dbp15k.DESCRIPTIONS[name], dbp15k.LOADERS[name], "ea") for name in dbp15k.DATASETS),
    )
}


class UnknownDataset(KeyError):
    """A dataset name that is not registered; the message lists the valid names."""

    def __init__(self, name: str):
        self.name = name
        self.message = f"unknown dataset {name!r}; known datasets: {', '.join(REGISTRY)}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def known_datasets() -> dict[str, str]:
    """Registered dataset names with their one-line descriptions, in registry order."""
    return {name: spec.description for name, spec in REGISTRY.items()}


TASKS = jsonl.TASKS


def dataset_task(name: str, root: Path | None = None, version: str | None = None) -> str:
    """The task kind of a dataset.

    Args:
        name: Dataset name.
        root: ``LINKEDQA_HOME`` (for an imported dataset).
        version: The stored version of an imported dataset (default: its newest, the one a run reads).

    Returns:
        A registered dataset's ``DatasetSpec.task``; an imported one's ``task`` from its version's manifest
        (``linkedqa data import --task``), ``qa`` when the manifest names none or nothing is stored.
    """
    spec = REGISTRY.get(name)
    if spec is not None:
        return spec.task
    if version is not None:
        manifest = read_manifest(layout.dataset_dir(name, version, root))
    else:
        stored = [m for d, _, m in done_dataset_versions(root) if d == name]
        manifest = stored[-1] if stored else None
    return (manifest or {}).get("task", jsonl.DEFAULT_TASK)


def get_spec(name: str) -> DatasetSpec:
    """The registry entry of ``name``.

    Raises:
        UnknownDataset: When ``name`` is not registered.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownDataset(name) from None


def load_dataset(name: str, data_root: Path | str | None = None) -> LoadedDataset:
    """Load a registered benchmark from the raw files.

    Args:
        name: Dataset name (see ``known_datasets()``).
        data_root: The shared data folder; defaults to ``storage.layout.data_root()`` (which fails loudly when
            it does not exist).

    Returns:
        Questions per split (rows with exactly the ``questions`` columns), rejects, and the input files read.

    Raises:
        UnknownDataset: When ``name`` is not registered.
        FileNotFoundError: When a required input file is missing.
        tasks.datasets.base.DatasetError: When an input file cannot be parsed as a whole.
    """
    spec = get_spec(name)
    root = Path(data_root) if data_root is not None else layout.data_root()
    return spec.loader(root)


def import_jsonl(path: Path, name: str, task: str = jsonl.DEFAULT_TASK) -> LoadedDataset:
    """``linkedqa data import``: a generic JSONL file as dataset ``name`` of kind ``task`` (``tasks.datasets.jsonl``).

    Raises:
        storage.layout.LayoutError: When ``name`` is not a safe name.
        ValueError: When ``name`` is a built-in dataset's name, or ``task`` is unknown or ``ea``.
        FileNotFoundError: When the file does not exist.
        tasks.datasets.base.DatasetError: When a compressed file is truncated or unreadable.
    """
    layout.safe_name(name, "dataset name")
    if name in REGISTRY:
        raise ValueError(f"{name!r} is a built-in dataset; import under another name")
    return jsonl.import_jsonl(path, name, task)
