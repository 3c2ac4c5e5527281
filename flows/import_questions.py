"""Flow ``import_questions``: a generic questions JSONL becomes a dataset -> catalog (``linkedqa data import``)."""

from __future__ import annotations

from prefect import flow

from storage import layout
from storage.artifacts import ArtifactRef
from tasks.dataset_tasks import load_dataset_task
from tasks.kb_tasks import refresh_catalog_task


@flow(name="import_questions")
def import_questions(file: str, name: str) -> ArtifactRef:
    """Import ``file`` as dataset ``name`` (bad lines go to its ``rejects`` table with their line numbers).

    Args:
        file: JSONL of ``{id, question, gold_entities?, gold_answers?, gold_answer_qids?, gold_mentions?, sparql?}``.
        name: Dataset name.

    Returns:
        Reference to the stored questions (``extra``: ``splits``, ``n_rejects``).
    """
    layout.safe_name(name, "dataset name")
    ref = load_dataset_task(name, str(layout.data_root(required=False)), import_file=file)
    refresh_catalog_task(str(layout.home()))
    return ref
