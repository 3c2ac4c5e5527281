"""``ArtifactRef``: the small frozen reference tasks return instead of data (CONVENTIONS.md §2)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ArtifactRef(BaseModel):
    """Reference to a persisted table/version/run.

    Example:
        ``ArtifactRef(table="entities", version="sample-1a2b3c4d", paths=[".../part-00000-of-00001.parquet"],
        row_count=114021, schema_fingerprint="9f0c...", content_hash="1a2b3c4d")``
    """

    model_config = ConfigDict(frozen=True)

    table: str
    version: str
    paths: list[str] = []
    row_count: int = 0
    schema_fingerprint: str = ""
    content_hash: str = ""
    extra: dict = {}
