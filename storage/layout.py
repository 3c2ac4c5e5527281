"""Paths and versions under ``LINKEDQA_HOME`` (docs/architecture.md#storage-contracts).

Inputs: environment (``LINKEDQA_HOME``, ``LINKEDQA_DATA``). Outputs: paths. Nothing here creates directories
except the explicit ``ensure_dir``; building a path has no side effects.

Layout::

    <home>/kb/<kb_version>/<table>/part-00000-of-00004.parquet   + kb/<kb_version>/manifest.json (last)
    <home>/kb/<kb_version>/_staging/...                          per-shard intermediates (resumable)
    <home>/datasets/<name>/<version>/questions/part-*.parquet    + manifest.json
    <home>/runs/<run_id>/{predictions,metrics,runs}/part-*.parquet + manifest.json (last)
    <home>/indexes/<kb_version>/<index_name>/                    search indexes, versioned with the KB
    <home>/models/<model_slug>/                                  converted HF models
    <home>/cache/llm/                                            persistent LLM response cache
    <home>/reproductions/<paper>/<recorded>-<hash8>.parquet      paper figure beside the measured one, per run
    <home>/catalog.duckdb                                        views only
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._=+-]{0,199}$")


class LayoutError(ValueError):
    """A name or path that would escape LINKEDQA_HOME, or missing inputs."""


class DataRootNotFound(LayoutError):
    """No data folder where the raw inputs are read (:func:`data_root`)."""


def safe_name(name: str, what: str = "name") -> str:
    """Validate a user-supplied name used as one path component.

    Args:
        name: Candidate (dataset, run id, KB version...).
        what: What the name is, for the error message.

    Returns:
        The name unchanged.

    Raises:
        LayoutError: If it is empty, contains a path separator or ``..``, or other unsafe characters.
    """
    if not isinstance(name, str) or not _SAFE.match(name) or ".." in name:
        raise LayoutError(
            f"invalid {what} {name!r}: use letters, digits and . _ = + - (no '/', no '..', max 200 chars)"
        )
    return name


def home() -> Path:
    """The data root: ``$LINKEDQA_HOME`` or ``./warehouse`` (absolute)."""
    return Path(os.environ.get("LINKEDQA_HOME") or "warehouse").resolve()


#: The real data folder beside the checkout, when there is one.
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def data_root(required: bool = True) -> Path:
    """Where raw inputs are read.

    ``$LINKEDQA_DATA``, else ``../shared/data`` beside the repository when it exists, else ``$LINKEDQA_HOME/data``
    (where ``linkedqa data fetch`` and ``make demo`` put what they download).

    Args:
        required: Raise when the folder does not exist.

    Raises:
        LayoutError: When required and missing (tests and the demo fail loudly instead of skipping).
    """
    env = os.environ.get("LINKEDQA_DATA")
    root = Path(env) if env else SHARED_DATA if SHARED_DATA.is_dir() else home() / "data"
    root = root.resolve()
    if required and not root.is_dir():
        raise DataRootNotFound(
            f"real data folder not found: {root} (set LINKEDQA_DATA to a data folder, or fetch one: "
            "`linkedqa data fetch --kb-sample NAME..`)"
        )
    return root


def part_name(i: int, n: int) -> str:
    """File name of part ``i`` of ``n``: ``part-00003-of-00008.parquet``."""
    if not (0 <= i < n):
        raise LayoutError(f"part index {i} out of range for {n} parts")
    return f"part-{i:05d}-of-{n:05d}.parquet"


def kb_root(root: Path | None = None) -> Path:
    """Folder holding every KB version."""
    return (root or home()) / "kb"


def kb_dir(version: str, root: Path | None = None) -> Path:
    """Folder of one KB version."""
    return kb_root(root) / safe_name(version, "kb version")


def kb_table_dir(version: str, table: str, root: Path | None = None) -> Path:
    """Folder of one table in one KB version."""
    return kb_dir(version, root) / safe_name(table, "table")


def staging_dir(version: str, *parts: str, root: Path | None = None) -> Path:
    """Per-shard intermediate folder of a KB build (never read by the catalog)."""
    p = kb_dir(version, root) / "_staging"
    for part in parts:
        p = p / safe_name(part, "staging part")
    return p


def datasets_root(root: Path | None = None) -> Path:
    """Folder of all imported datasets."""
    return (root or home()) / "datasets"


def dataset_dir(name: str, version: str, root: Path | None = None) -> Path:
    """Folder of one version of one dataset's questions."""
    return datasets_root(root) / safe_name(name, "dataset name") / safe_name(version, "dataset version")


def runs_root(root: Path | None = None) -> Path:
    """Folder of all runs."""
    return (root or home()) / "runs"


def reproductions_root(root: Path | None = None) -> Path:
    """Folder of the reproduction rows (``linkedqa reproduce``): one folder per paper, one file per invocation."""
    return (root or home()) / "reproductions"


def run_dir(run_id: str, root: Path | None = None) -> Path:
    """Folder of one run."""
    return runs_root(root) / safe_name(run_id, "run id")


#: A run's plan (``runs/<run_id>/plan.json``): written first; the run is planned once it exists.
PLAN = "plan.json"


def run_shard_part(run_id: str, i: int, n: int, root: Path | None = None) -> Path:
    """The predictions part of shard ``i`` of ``n`` of a run (its presence marks the shard done)."""
    return run_dir(run_id, root) / "predictions" / part_name(i, n)


def run_shard_record(run_id: str, i: int, root: Path | None = None) -> Path:
    """The record (timings, LLM statistics) of shard ``i`` of a run, written just before its part."""
    return run_dir(run_id, root) / "shards" / f"shard-{i:05d}.json"


def index_dir(kb_version: str, index_name: str, root: Path | None = None) -> Path:
    """Folder of one search index built for one KB version."""
    return (root or home()) / "indexes" / safe_name(kb_version, "kb version") / safe_name(index_name, "index")


# Bump when what goes into a search index changes (new folder => rebuilt; part of every run id).
INDEX_FORMAT = 2
#: Folder version of the dense kinds: 3 adds the memory-mapped side table (``docs.arrow``) that searches read
#: payloads from. Same vectors in the same order as format 2, so the same hits: not part of run ids; the new folder
#: name only makes a finished format-2 folder (no side table) count as not built.
DENSE_FORMAT = 3

#: Every index kind built per KB version -> its folder name under ``indexes/<kb_version>/`` (the one table;
#: ``linkedqa kb index --kind K`` takes these keys).
INDEX_KINDS: dict[str, str] = {
    "entity-bm25": f"entity-bm25.v{INDEX_FORMAT}",      # labels + aliases (ELA "Wikidata" source), tantivy
    "title-bm25": f"title-bm25.v{INDEX_FORMAT}",        # Wikipedia titles + lead (ELA "Wikipedia" source)
    "passage-bm25": f"passage-bm25.v{INDEX_FORMAT}",    # the KB's 100-word passages (BM25 RAG, ER baseline)
    "passage-dense": f"passage-dense.v{DENSE_FORMAT}",  # the same passages, all-MiniLM-L6-v2 + FAISS
    "entity-dense": f"entity-dense.v{DENSE_FORMAT}",    # KG entities' names/descriptions (AnchorRAG), FAISS
    "kg-duckdb": "kg-duckdb.v1",                        # sorted KG tables + ART indexes (KG tools)
    "kg-oxigraph": "kg-oxigraph.v1",                    # Oxigraph store of the KB (KGQA gold SPARQL answers)
}


def index_kind_dir(kb_version: str, kind: str, root: Path | None = None) -> Path:
    """Folder of the index of kind ``kind`` (an :data:`INDEX_KINDS` key) of one KB version.

    Raises:
        LayoutError: An unknown kind.
    """
    if kind not in INDEX_KINDS:
        raise LayoutError(f"unknown index kind {kind!r}; known: {', '.join(INDEX_KINDS)}")
    return index_dir(kb_version, INDEX_KINDS[kind], root)


def index_kind_of(path: Path, root: Path | None = None) -> str | None:
    """The :data:`INDEX_KINDS` key of an index folder (``indexes/<kb_version>/<folder>``), else ``None``."""
    path = Path(path)
    if path.parent.parent != (root or home()) / "indexes":
        return None
    return next((k for k, name in INDEX_KINDS.items() if name == path.name), None)


def models_root(root: Path | None = None) -> Path:
    """Folder of converted models: ``$LINKEDQA_MODELS`` when set (share 1.3 GB across homes), else ``<home>/models``."""
    env = os.environ.get("LINKEDQA_MODELS")
    if env and root is None:
        return Path(env).resolve()
    return (root or home()) / "models"


def cache_dir(kind: str, root: Path | None = None) -> Path:
    """Folder of a persistent cache (``llm``...)."""
    return (root or home()) / "cache" / safe_name(kind, "cache")


def catalog_path(root: Path | None = None) -> Path:
    """The DuckDB catalog file."""
    return (root or home()) / "catalog.duckdb"


def ensure_dir(path: Path) -> Path:
    """Create a folder (and parents) and return it."""
    path.mkdir(parents=True, exist_ok=True)
    return path


def inside_home(path: Path, root: Path | None = None) -> bool:
    """Whether ``path`` resolves inside the data root (the only place linkedqa writes)."""
    base = (root or home()).resolve()
    try:
        path.resolve().relative_to(base)
        return True
    except ValueError:
        return False
