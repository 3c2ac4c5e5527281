"""Execute the report notebooks headless and export them as self-contained HTML (``linkedqa report --notebooks``).

Inputs: the jupytext notebooks in ``notebooks/*.py`` (``overview``, ``methods``, ``errors``), the catalog of
``LINKEDQA_HOME``. Outputs: ``<LINKEDQA_HOME>/reports/<name>.html`` next to the PNGs the notebooks save themselves.

Execution is nbconvert's ``ExecutePreprocessor`` (nbclient, kernel ``python3``, working directory the repo root);
export is nbconvert's ``HTMLExporter`` with its ``lab`` template, CSS inlined. The notebooks draw with Agg and
``savefig`` their figures instead of displaying them, so every PNG a cell writes into the reports folder is
attached to that cell as an ``image/png`` output and ends up inlined (``data:`` URI) under it. The template drops
the lab page's script tags (require.js, MathJax, mermaid, widgets: all CDN loads, none needed for tables, text or
images), so the page references nothing outside itself and reads offline. A notebook that fails still gets its
HTML, with the traceback in the failing cell's output, and is reported as the exception (the command exits
non-zero).
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

from jinja2 import DictLoader
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbformat.v4 import new_markdown_cell, new_output

from storage import layout

NOTEBOOKS = layout.REPO_ROOT / "notebooks"
REPORT_NOTEBOOKS = ("overview", "methods", "errors")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# nbconvert's lab template without its <script> loads (all from a CDN); a generator tag says what made the page
_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
<meta name="generator" content="nbconvert {{ resources.nbconvert_version }} (linkedqa offline lab template)">
{%- endblock html_head_css -%}
"""


def _png_state(dirs: list[Path]) -> dict[Path, tuple[int, int]]:
    """``{png: (mtime_ns, size)}`` of the PNGs directly in ``dirs``."""
    state: dict[Path, tuple[int, int]] = {}
    for d in dirs:
        for p in d.glob("*.png") if d.is_dir() else ():
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            state[p] = (st.st_mtime_ns, st.st_size)
    return state


def _executor(timeout_s: int, watch: list[Path]):
    """An ``ExecutePreprocessor`` that attaches the PNGs each cell writes into ``watch`` to that cell."""
    from nbconvert.preprocessors import ExecutePreprocessor  # heavy: nbconvert

    class _Executor(ExecutePreprocessor):
        def preprocess_cell(self, cell, resources, index):
            before = _png_state(watch)
            try:
                return super().preprocess_cell(cell, resources, index)
            finally:  # also for the failing cell: the figures it saved before raising
                after = _png_state(watch)
                for png in sorted(p for p, s in after.items() if before.get(p) != s):
                    data = base64.b64encode(png.read_bytes()).decode("ascii")
                    cell.outputs.append(new_output("display_data", data={"image/png": data, "text/plain": png.name},
                                                   metadata={"linkedqa": {"saved_png": str(png)}}))

    return _Executor(timeout=timeout_s, kernel_name="python3")


def to_html(nb, title: str, path: Path | None = None) -> str:
    """A self-contained HTML page of an executed notebook (nbconvert ``HTMLExporter``, offline lab template).

    ``path`` is the folder that relative image links in markdown cells are read from (they are embedded too).
    """
    import nbconvert  # heavy: nbconvert
    from nbconvert import HTMLExporter  # heavy: nbconvert

    exporter = HTMLExporter(template_name="lab", template_file="linkedqa_offline.html.j2", embed_images=True,
                            extra_loaders=[DictLoader({"linkedqa_offline.html.j2": _OFFLINE_TEMPLATE})])
    resources = {"metadata": {"name": title, "path": str(path or layout.REPO_ROOT)},
                 "nbconvert_version": nbconvert.__version__}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return body


def execute_notebooks(names: tuple[str, ...] | None = None, out_dir: Path | None = None, timeout_s: int = 600,
                      notebooks_dir: Path | None = None) -> dict[str, Path | Exception]:
    """Execute each notebook against the current ``LINKEDQA_HOME`` and write ``<name>.html``.

    Args:
        names: Notebook names (default: overview, methods, errors).
        out_dir: Where the HTML goes (default ``<LINKEDQA_HOME>/reports``).
        timeout_s: Per-cell execution timeout.
        notebooks_dir: Folder of the jupytext ``<name>.py`` notebooks (default ``notebooks/`` of the repo).

    Returns:
        ``{name: html path}``, or the exception for notebooks that failed (their HTML is written anyway).
    """
    import jupytext  # heavy: jupytext

    names = tuple(names or REPORT_NOTEBOOKS)
    notebooks_dir = notebooks_dir or NOTEBOOKS
    out_dir = out_dir or layout.home() / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    watch = list(dict.fromkeys([out_dir, layout.home() / "reports"]))  # where the notebooks save their PNGs
    os.environ.setdefault("MPLBACKEND", "Agg")
    results: dict[str, Path | Exception] = {}
    for name in names:
        nb = jupytext.read(notebooks_dir / f"{name}.py")
        error: Exception | None = None
        try:
            _executor(timeout_s, watch).preprocess(nb, {"metadata": {"path": str(layout.REPO_ROOT)}})
        except CellExecutionError as exc:  # the traceback is already the failing cell's error output
            error = exc
        except (CellTimeoutError, DeadKernelError) as exc:  # no traceback in the notebook: say so at its end
            error = exc
            nb.cells.append(new_markdown_cell(f"**Execution stopped** ({type(exc).__name__}):\n\n```\n{exc}\n```"))
        path = out_dir / f"{name}.html"
        tmp = path.with_suffix(".html.tmp")
        tmp.write_text(to_html(nb, f"linkedqa {name}", notebooks_dir), encoding="utf-8")
        tmp.replace(path)
        results[name] = error if error is not None else path
    return results
