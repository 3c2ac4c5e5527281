"""A paper's reproduction page (``docs/reproductions/<paper>.md``) from its conditions and the measured rows.

Input: the paper's conditions (``tasks.reproduce.conditions``) and ``docs/reproductions/embedded-model.json``, the
rows ``make reproduce`` measured with the embedded model (``tests/bench/bench_reproduce.py``: the machine, the
commit, and per condition the ``reproductions`` rows of its run). Output: the Markdown of the page's generated
section: per table, the paper's figure and the measured one per row, then each row's command and what differs from
the paper's setting, then the rows linkedqa cannot run and why. ``tests.readme_sections`` keeps the pages current.
"""

from __future__ import annotations

import json
from typing import Any

from storage.layout import REPO_ROOT
from tasks.reproduce.conditions import Condition, Paper

MEASURED_FILE = REPO_ROOT / "docs" / "reproductions" / "embedded-model.json"


def measured() -> dict[str, Any]:
    """The embedded model's measured rows (``{"machine", "commit", "rows": [...]}``; empty when not measured)."""
    if not MEASURED_FILE.is_file():
        return {"rows": []}
    return json.loads(MEASURED_FILE.read_text(encoding="utf-8"))


def row_commits(rows: Any) -> str:
    """The short commits the measured rows were stored at, comma-separated."""
    return ", ".join(sorted({r["git_sha"][:7] for r in rows}))


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("<", "&lt;")


def _on_paper_scale(value: float, printed: str, scale: float) -> str:
    """A measured value written as the paper writes its figure (its scale and its number of decimals)."""
    return f"{value * scale:.{_decimals(printed)}f}"


def _decimals(printed: str) -> int:
    return len(printed.split(".", 1)[1]) if "." in printed else 0


def _no_llm_section(paper: Paper, got: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The measured rows of the conditions whose runs ask no LLM (run over the whole split), beside the paper's."""
    from tasks.reproduce.conditions import needs_llm  # heavy: every method's module

    rows = []
    for c in paper.conditions:
        if not c.runnable or needs_llm(c):
            continue
        for f in c.metrics():
            r = got.get((c.id, f.linkedqa))
            if r is not None and r["measured"] is not None:
                rows.append((c, f, r))
    if not rows:
        return []
    diffs = [r["measured"] - f.value for _, f, r in rows]
    out = ["\n### Rows that ask no LLM\n",
           f"These runs ask no model, so they ran over the whole split and depend only on the KB, the retriever or "
           f"encoder and the metric: measured minus the paper's figure ranges from {min(diffs):+.3f} to "
           f"{max(diffs):+.3f} on linkedqa's 0-1 scale.\n",
           "| row | dataset | metric | paper | measured | difference | n |", "|---|---|---|---:|---:|---:|---:|"]
    for (c, f, r), d in zip(rows, diffs, strict=True):
        out.append(f"| {_cell(c.row)} | {c.dataset} | {_cell(f.metric)} | {_cell(f.printed)} | "
                   f"{_on_paper_scale(r['measured'], f.printed, f.scale)} | {d * f.scale:+.{_decimals(f.printed)}f} | "
                   f"{r['n']} |")
    if paper.no_llm_note:
        out.append(f"\n{_cell(paper.no_llm_note)}")
    return out


def page_section(paper: Paper, data: dict[str, Any] | None = None) -> str:
    """The generated Markdown of ``paper``'s page."""
    data = measured() if data is None else data
    got = {(r["condition"], r["metric"]): r for r in data.get("rows", []) if r["paper"] == paper.id}
    commits = row_commits(got.values())
    where = (f"measured with the embedded model (Qwen2.5-Coder-0.5B-Instruct, vLLM on the CPU) on the sample KB, "
             f"{data['machine']}, commit {commits}, on the first n questions of each split (the n column)" if got
             else "not measured yet")
    out = [f"\n{paper.citation}\n",
           f"{len([c for c in paper.conditions if c.runnable])} of {len(paper.conditions)} conditions run in "
           f"linkedqa. A cell holds the paper's figure as printed, then (after `/`) the measured one on the same "
           f"scale; the measured figures are {where}: a 0.5B model on a CPU, on a sample of Wikidata, so they show "
           "that the method runs end to end, not what the paper's model reaches.\n"]
    tables: dict[str, list[Condition]] = {}
    for c in paper.conditions:
        tables.setdefault(c.table, []).append(c)
    for table, conditions in tables.items():
        metrics = list(dict.fromkeys(f.metric for c in conditions for f in c.figures))
        out += [f"\n### {table}\n",
                "| row | paper's model | dataset | " + " | ".join(_cell(m) for m in metrics) + " | n |",
                "|---|---|---|" + "---:|" * (len(metrics) + 1)]
        for c in conditions:
            cells, n = [], None
            for m in metrics:
                f = next((f for f in c.figures if f.metric == m), None)
                r = got.get((c.id, f.linkedqa)) if f is not None and f.linkedqa else None
                if f is None:
                    cells.append("")
                elif r is not None and r["measured"] is not None:
                    cells.append(f"{_cell(f.printed)} / {_on_paper_scale(r['measured'], f.printed, f.scale)}")
                    n = r["n"] if r["n"] is not None else n
                else:
                    cells.append(_cell(f.printed))
            out.append(f"| {_cell(c.row)} | {_cell(c.paper_model) or '–'} | {c.dataset or '–'} | "
                       + " | ".join(cells) + f" | {'' if n is None else n} |")
        names = {f.metric: f.linkedqa for c in conditions for f in c.figures if f.linkedqa}
        if names:
            out.append("\nlinkedqa's metrics: " + ", ".join(f"{_cell(m)} = `{v}`" for m, v in names.items()) + ".")
    out += _no_llm_section(paper, got)
    out.append("\n### Commands and what differs from the paper\n")
    for c in paper.conditions:
        if not c.runnable:
            continue
        lines = c.shell().splitlines()
        out.append(f"- **{c.id}** ({c.table}, {_cell(c.row)}): " + " then ".join(f"`{ln}`" for ln in lines))
        out += [f"    - {_cell(d)}" for d in c.differs]
    skipped = [c for c in paper.conditions if not c.runnable]
    if skipped:
        out.append("\n### Rows linkedqa does not run\n")
        out += [f"- **{c.id}** ({c.table}, {_cell(c.row)}): {_cell(c.reason)}" for c in skipped]
    return "\n".join(out) + "\n"
