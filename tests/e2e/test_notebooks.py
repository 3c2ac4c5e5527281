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
