"""Shared fixtures: real data root (fails loudly when missing), an isolated LINKEDQA_HOME per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import layout

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The real shared data folder (LINKEDQA_DATA); a missing folder is an error, never a skip."""
    root = layout.data_root(required=False)
    if not root.is_dir():
        pytest.fail(f"real data not found at {root}: set LINKEDQA_DATA to ../shared/data", pytrace=False)
    return root


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh LINKEDQA_HOME for one test."""
    h = tmp_path / "warehouse"
    monkeypatch.setenv("LINKEDQA_HOME", str(h))
    return h
