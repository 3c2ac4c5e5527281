"""Execute the report notebooks headless and write them as self-contained HTML (``linkedqa report --notebooks``).

Inputs: the jupytext notebooks in ``notebooks/*.py`` (``overview``, ``methods``, ``errors``), the catalog of
``LINKEDQA_HOME``. Outputs: ``<LINKEDQA_HOME>/reports/<name>.html`` (code, text and table outputs, PNG figures
inlined) next to the PNGs the notebooks save themselves. Rendering is a small built-in converter (nbconvert is
not in the pinned stack); a notebook that fails still gets its HTML, with the traceback, and the command exits
non-zero.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from storage import layout

NOTEBOOKS = layout.REPO_ROOT / "notebooks"
REPORT_NOTEBOOKS = ("overview", "methods", "errors")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _output_html(o: dict) -> str:
    data = o.get("data", {})
    if o.get("output_type") == "error":
        tb = _ANSI.sub("", "\n".join(o.get("traceback", [])))
        return f"<pre class='error'>{html.escape(tb)}</pre>"
    if "image/png" in data:
        return f"<img src='data:image/png;base64,{data['image/png']}'/>"
    if "text/html" in data:
        return "".join(data["text/html"]) if isinstance(data["text/html"], list) else data["text/html"]
    text = o.get("text") or data.get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    return f"<pre>{html.escape(_ANSI.sub('', text))}</pre>" if text else ""


def to_html(nb, title: str) -> str:
    """A self-contained HTML page of an executed notebook."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}pre{background:#f6f6f6;padding:6px;"
             "overflow-x:auto}pre.code{background:#eef}pre.error{background:#fee}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(f"<div class='md'><pre>{html.escape(cell.source)}</pre></div>")
        elif cell.cell_type == "code":
            parts.append(f"<pre class='code'>{html.escape(cell.source)}</pre>")
            parts.extend(_output_html(o) for o in cell.get("outputs", []))
    parts.append("</body></html>")
    return "\n".join(parts)


def execute_notebooks(names: tuple[str, ...] = REPORT_NOTEBOOKS, out_dir: Path | None = None,
                      timeout_s: int = 600) -> dict[str, Path | Exception]:
    """Execute each notebook against the current ``LINKEDQA_HOME`` and write ``<name>.html``.

    Returns:
        ``{name: html path}``, or the exception for notebooks that failed (their HTML is written anyway).
    """
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out_dir = out_dir or layout.home() / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MPLBACKEND", "Agg")
    results: dict[str, Path | Exception] = {}
    for name in names:
        nb = jupytext.read(NOTEBOOKS / f"{name}.py")
        client = NotebookClient(nb, kernel_name="python3", timeout=timeout_s,
                                resources={"metadata": {"path": str(layout.REPO_ROOT)}})
        error: Exception | None = None
        try:
            client.execute()
        except CellExecutionError as exc:
            error = exc
        path = out_dir / f"{name}.html"
        tmp = path.with_suffix(".html.tmp")
        tmp.write_text(to_html(nb, f"linkedqa {name}"), encoding="utf-8")
        tmp.replace(path)
        results[name] = error if error is not None else path
    return results
