"""Flow ``import_questions``: a generic questions JSONL becomes a dataset -> catalog (``linkedqa data import``)."""

from __future__ import annotations

from prefect import flow

from storage import layout
from storage.artifacts import ArtifactRef
from tasks.dataset_tasks import load_dataset_task
from tasks.datasets.jsonl import DEFAULT_TASK, check_task
from tasks.kb_tasks import refresh_catalog_task


@flow(name="import_questions")
def import_questions(file: str, name: str, task: str = DEFAULT_TASK) -> ArtifactRef:
    """Import ``file`` as dataset ``name`` (bad lines go to its ``rejects`` table with their line numbers).

    Args:
        file: JSONL of ``{id, question, gold_entities?, gold_answers?, gold_answer_qids?, gold_mentions?, sparql?}``.
        name: Dataset name.
        task: Task kind of the questions (``tasks.datasets.jsonl.TASKS`` but ``ea``); a record without the gold
            its kind needs is a reject (docs/howto/own-questions.md).

    Returns:
        Reference to the stored questions (``extra``: ``splits``, ``n_rejects``, ``task``).
    """
    layout.safe_name(name, "dataset name")
    check_task(task)
    ref = load_dataset_task(name, str(layout.data_root(required=False)), import_file=file, task=task)
    refresh_catalog_task(str(layout.home()))
    return ref
