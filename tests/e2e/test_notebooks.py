"""Notebook reports execute headless (nbconvert) against the catalog, write non-empty PNGs and nbconvert HTML."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from storage import layout
from tasks.reports.notebooks import execute_notebooks


@pytest.fixture()
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter"))


def _page(path: Path) -> BeautifulSoup:
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    gen = soup.find("meta", attrs={"name": "generator"})
    assert gen is not None and gen["content"].startswith("nbconvert "), path
    assert soup.find("script") is None and soup.find("link") is None, path  # offline, self-contained
    return soup


def _inlined(soup: BeautifulSoup, png: Path) -> bool:
    return f"data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}" in [
        i["src"] for i in soup.find_all("img")]


def test_overview_notebook_executes(kb_home: str, tmp_path: Path, kernel_env):
    res = execute_notebooks(("overview",), out_dir=tmp_path / "html", timeout_s=300)
    assert res == {"overview": tmp_path / "html" / "overview.html"}, res
    png = layout.home() / "reports" / "overview_kb_counts.png"
    assert png.is_file() and png.stat().st_size > 5_000
    soup = _page(res["overview"])
    assert _inlined(soup, png)
    texts = " ".join(o.get_text(" ") for o in soup.select(".jp-OutputArea-output"))
    assert "'entities'" in texts and "'claims'" in texts
    assert soup.select(".jp-OutputArea-output table")  # the polars tables as HTML


def test_methods_and_errors_notebooks_execute(kb_home: str, tmp_path: Path, kernel_env):
    """The paper-table and error notebooks run on whatever runs the session warehouse holds; PNGs are written."""
    res = execute_notebooks(("methods", "errors"), out_dir=tmp_path / "html", timeout_s=300)
    assert all(isinstance(r, Path) for r in res.values()), res
    pages = {name: _page(path) for name, path in res.items()}
    for png in ("methods_main_metric", "methods_tokens_vs_quality", "methods_recall_curves", "errors_per_run"):
        path = layout.home() / "reports" / f"{png}.png"
        assert path.is_file() and path.stat().st_size > 5_000, png
        assert _inlined(pages[png.split("_")[0]], path), png
    texts = " ".join(o.get_text(" ") for o in pages["errors"].select(".jp-OutputArea-output"))
    assert "predictions in" in texts
