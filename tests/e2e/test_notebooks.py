"""Notebook reports execute headless (nbclient) against the catalog and write non-empty PNGs."""

from __future__ import annotations

from pathlib import Path

import jupytext
from nbclient import NotebookClient

from storage import layout

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_overview_notebook_executes(kb_home: str, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter"))
    nb = jupytext.read(NOTEBOOKS / "overview.py")
    NotebookClient(nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    png = layout.home() / "reports" / "overview_kb_counts.png"
    assert png.is_file() and png.stat().st_size > 5_000
    texts = "".join(str(o.get("data", {}).get("text/plain", "")) for c in nb.cells for o in c.get("outputs", []))
    assert "'entities'" in texts and "'claims'" in texts


def test_methods_and_errors_notebooks_execute(kb_home: str, tmp_path: Path, monkeypatch):
    """The paper-table and error notebooks run on whatever runs the session warehouse holds; PNGs are written."""
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter"))
    for name in ("methods", "errors"):
        nb = jupytext.read(NOTEBOOKS / f"{name}.py")
        NotebookClient(nb, kernel_name="python3", timeout=300,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    for png in ("methods_main_metric", "methods_tokens_vs_quality", "methods_recall_curves", "errors_per_run"):
        path = layout.home() / "reports" / f"{png}.png"
        assert path.is_file() and path.stat().st_size > 5_000, png
    texts = "".join(str(o.get("text", "")) for c in nb.cells for o in c.get("outputs", []))
    assert "predictions in" in texts
