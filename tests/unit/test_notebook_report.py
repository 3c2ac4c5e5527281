"""Notebook reports: nbconvert execution + HTML export on tiny jupytext notebooks (no KB, one kernel each)."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import nbconvert
import pytest
from bs4 import BeautifulSoup
from nbclient.exceptions import CellExecutionError

from tasks.reports import notebooks as notebook_report
from tasks.reports.notebooks import execute_notebooks

_BAD = '''# %% [markdown]
# # A failing report
# Some *markdown* before the figure.

# %%
import os
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = pathlib.Path(os.environ["LINKEDQA_HOME"]) / "reports"
out.mkdir(parents=True, exist_ok=True)
fig, ax = plt.subplots(figsize=(2, 2))
ax.plot([1, 3, 2])
fig.savefig(out / "bad_fig.png", dpi=40)

# %%
import polars as pl

pl.DataFrame({"col_x": [1, 2], "col_y": ["u", "v"]})

# %%
raise ZeroDivisionError("boom-" + "linkedqa")

# %%
print("after-" + "fail")
'''

_OK = '''# %%
print("all-" + "good")
'''


@pytest.fixture()
def nb_env(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of jupytext notebooks (bad, ok) and kernel state kept inside ``tmp_path``."""
    for var, sub in (("MPLCONFIGDIR", "mpl"), ("IPYTHONDIR", "ipython"), ("JUPYTER_RUNTIME_DIR", "jupyter")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    (nbs / "bad.py").write_text(_BAD)
    (nbs / "ok.py").write_text(_OK)
    return nbs


def _outputs_text(soup: BeautifulSoup) -> str:
    return " ".join(o.get_text(" ") for o in soup.select(".jp-OutputArea-output"))


def test_failing_notebook_gets_nbconvert_html_with_traceback_and_inlined_figure(nb_env: Path, home: Path):
    res = execute_notebooks(("bad",), notebooks_dir=nb_env, timeout_s=120)
    assert isinstance(res["bad"], CellExecutionError)
    assert "ZeroDivisionError: boom-linkedqa" in notebook_report._ANSI.sub("", str(res["bad"]))
    page = (home / "reports" / "bad.html").read_text(encoding="utf-8")
    assert not (home / "reports" / "bad.html.tmp").exists()
    soup = BeautifulSoup(page, "html.parser")
    # made by nbconvert's HTMLExporter (lab template)
    gen = soup.find("meta", attrs={"name": "generator"})
    assert gen is not None and gen["content"].startswith(f"nbconvert {nbconvert.__version__}")
    assert "jp-Notebook" in soup.body["class"] and soup.title.string == "linkedqa bad"
    assert soup.select(".jp-MarkdownCell h1") and soup.select(".jp-CodeCell")
    # the traceback is in the failing cell's output; the cell after it did not run
    errors = soup.select(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert any("ZeroDivisionError" in e.get_text() and "boom-linkedqa" in e.get_text() for e in errors)
    outputs = _outputs_text(soup)
    assert "after-fail" not in outputs and "after-" in page  # its source is shown, no output
    # the table output and the figure the notebook saved, inlined as data: URI
    assert "col_x" in outputs and soup.select(".jp-OutputArea-output table")
    png = (home / "reports" / "bad_fig.png").read_bytes()
    imgs = [i["src"] for i in soup.find_all("img")]
    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in imgs
    # self-contained and offline: nothing loaded from elsewhere
    assert soup.find("script") is None and soup.find("link") is None
    refs = [t.get(a, "") for t in soup.find_all(True) for a in ("src", "href")]
    assert all(r.startswith(("data:", "#")) for r in refs if r), refs


def test_report_command_exits_non_zero_when_a_notebook_fails(nb_env: Path, home: Path, capsys,
                                                             monkeypatch: pytest.MonkeyPatch):
    from flows.cli.errors import EXIT_OTHER
    from flows.cli.results import cmd_report

    monkeypatch.setattr(notebook_report, "NOTEBOOKS", nb_env)
    monkeypatch.setattr(notebook_report, "REPORT_NOTEBOOKS", ("ok", "bad"))
    code = cmd_report(argparse.Namespace(notebooks=True, run=None, views=None))
    out, err = capsys.readouterr()
    assert code == EXIT_OTHER
    assert "error: notebook bad failed (see its HTML): ZeroDivisionError: boom-linkedqa" in err
    assert f"ok         {home / 'reports' / 'ok.html'}" in out
    ok = BeautifulSoup((home / "reports" / "ok.html").read_text(encoding="utf-8"), "html.parser")
    assert "all-good" in _outputs_text(ok)
    assert (home / "reports" / "bad.html").is_file()
