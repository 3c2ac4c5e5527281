"""Persist a loaded dataset as versioned Parquet (``datasets/<name>/<version>/questions/``).

Inputs: a dataset name known to ``tasks.datasets.registry`` (or a generic JSONL file and its task kind). Outputs:
one questions part per split folder... (one part file for all splits), a rejects part, and ``manifest.json`` (last)
with counts per split, the task kind and the input fingerprints. The version is the hash of the inputs and the
loader format (and of an import's task kind), so re-loading unchanged files is a no-op; re-importing a file makes
its version the newest again, the one runs read. ``manifest.json`` is the folder's done marker (``storage.done``):
a folder without it is rewritten, after the temp files of a killed write are swept.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from storage import layout
from storage.artifacts import ArtifactRef
from storage.catalog import done_dataset_versions
from storage.done import sweep_temps
from storage.manifest import config_hash, file_fingerprint, read_manifest, write_manifest
from storage.parquet_io import write_table
from storage.schemas import QUESTIONS, fingerprint
from tasks.datasets.dbp15k import DATASETS as DBP15K_DATASETS
from tasks.datasets.ea_kg import AlignmentPair, read_kg_tables, read_pair_cached, write_kg_tables
from tasks.datasets.jsonl import DEFAULT_TASK
from tasks.datasets.registry import get_spec, import_jsonl, load_dataset

LOADER_FORMAT = 2


def dataset_version(name: str, sources: list[Path], task: str | None = None) -> str:
    """Content-addressed version of a dataset's inputs.

    An import's task kind other than the default ``qa`` enters the hash: the same file imported as another kind
    is another version.
    """
    fps = [{k: v for k, v in file_fingerprint(p).items() if k != "path"} | {"name": p.name} for p in sources]
    key = {"name": name, "inputs": fps}
    if task not in (None, DEFAULT_TASK):
        key["task"] = task
    return f"v{LOADER_FORMAT}-{config_hash(key)}"


def _precise_now() -> str:
    """The ``written_at`` of an import: UTC to the microsecond.

    Two imports of a dataset within one second keep their order (``done_dataset_versions`` sorts by it; the
    newest is the one runs read).
    """
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def store_dataset(name: str, data_root: Path, import_file: Path | None = None,
                  root: Path | None = None, task: str = DEFAULT_TASK) -> ArtifactRef:
    """Load and persist a dataset unless the same version is already stored.

    An import of a version stored before rewrites its manifest with a new ``written_at``: the version becomes the
    dataset's newest again, the one runs read (``latest_dataset_folder``).

    Args:
        name: Dataset name (registry name, or the ``--name`` of an import).
        data_root: ``LINKEDQA_DATA``.
        import_file: Generic JSONL to import instead of a registry loader.
        root: Data root.
        task: Task kind of an import (``tasks.datasets.jsonl.TASKS``); a registered dataset has its registry's.

    Returns:
        Reference to the stored questions (``extra``: ``dataset``, ``splits``, ``n_rejects``, ``task``).
    """
    layout.safe_name(name, "dataset name")
    if import_file:
        loaded = import_jsonl(import_file, name, task)
    else:
        loaded = load_dataset(name, data_root)
        task = get_spec(name).task
    version = dataset_version(name, list(loaded.sources), task if import_file else None)
    folder = layout.dataset_dir(name, version, root)
    m = read_manifest(folder)
    if m is None:
        sweep_temps(folder)
        rows = [r for split in sorted(loaded.questions) for r in loaded.questions[split]]
        write_table(rows, "questions", folder / "questions" / layout.part_name(0, 1))
        write_table(list(loaded.rejects), "rejects", folder / "rejects" / layout.part_name(0, 1))
        m = {
            "kind": "dataset",
            "dataset": name,
            "dataset_version": version,
            "splits": {s: len(v) for s, v in sorted(loaded.questions.items())},
            "n_rejects": len(loaded.rejects),
            "task": task,
            "inputs": [str(p) for p in loaded.sources],
            "schema": fingerprint(QUESTIONS),
        }
        write_manifest(folder, m | ({"written_at": _precise_now()} if import_file else {}))
    elif import_file and latest_dataset_folder(name, root) != folder:
        write_manifest(folder, m | {"written_at": _precise_now()})
    return ArtifactRef(table="questions", version=version, row_count=sum(m["splits"].values()),
                       paths=[str(folder / "questions" / layout.part_name(0, 1))],
                       schema_fingerprint=fingerprint(QUESTIONS),
                       extra={"dataset": name, "splits": m["splits"], "n_rejects": m["n_rejects"],
                              "task": m.get("task", task)})


def latest_dataset_folder(name: str, root: Path | None = None) -> Path | None:
    """Folder of the newest stored version of a dataset, or None."""
    found = [v for d, v, _ in done_dataset_versions(root) if d == name]
    return layout.dataset_dir(name, found[-1], root) if found else None


def ensure_kg(dataset: str, root: Path | None = None, data_root: Path | None = None) -> AlignmentPair:
    """The two graphs of a stored DBP15K dataset, writing their KB-like tables on first use.

    The dataset is stored first when needed (``tasks.datasets.store``); the raw files must be the ones the
    stored version was built from (same content-addressed version), else the tables would not match it.

    Args:
        dataset: ``dbp15k-fr-en`` / ``dbp15k-ja-en`` / ``dbp15k-zh-en``.
        root: ``LINKEDQA_HOME``.
        data_root: ``LINKEDQA_DATA``.

    Returns:
        The pair read from the stored tables (``links`` empty: gold links live in the questions).

    Raises:
        KeyError: Not a DBP15K dataset.
        RuntimeError: The raw files changed since the dataset version was stored.
    """
    if dataset not in DBP15K_DATASETS:
        raise KeyError(f"{dataset!r} is not a DBP15K dataset; known: {', '.join(DBP15K_DATASETS)}")
    pair = DBP15K_DATASETS[dataset]
    data_root = Path(data_root) if data_root is not None else layout.data_root()
    folder = latest_dataset_folder(dataset, root)
    if folder is None:
        store_dataset(dataset, data_root, root=root)
        folder = latest_dataset_folder(dataset, root)
    try:
        return read_kg_tables(folder, pair)
    except FileNotFoundError:
        pass
    sources = [Path(data_root) / "dbp15k" / pair / f for f in
               ("ent_ids_1.gz", "ent_ids_2.gz", "triples_1.gz", "triples_2.gz", "ref_ent_ids.gz")]
    if dataset_version(dataset, sources) != folder.name:
        raise RuntimeError(f"raw DBP15K files under {data_root} differ from stored version {folder.name}; "
                           f"re-load it first (linkedqa data load {dataset})")
    ap = read_pair_cached(data_root, pair)
    write_kg_tables(ap, folder, sources)
    # same content as the stored tables (read from the same files); links belong to the questions
    return AlignmentPair(pair, ap.kg1, ap.kg2)
