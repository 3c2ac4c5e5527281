"""Print the catalog's report views (``sql/reports/*.sql``) as aligned text tables, for ``linkedqa report``.

Inputs: a DuckDB connection with the catalog views (``storage.catalog.connect()``) and the names of report
views. Outputs: text on a stream. The views themselves live in ``sql/reports``; nothing here builds SQL.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import duckdb

from storage.catalog import SQL_DIR

#: Summary views first, then the per-question ones (long); any other report view follows in name order.
PREFERRED_ORDER = (
    "metrics_by_method",
    "efficiency",
    "error_slices",
    "kb_summary",
    "question_comparison_wide",
    "question_comparison",
    "correctness",
)


def report_view_names() -> list[str]:
    """Names of the report views (one per ``sql/reports/*.sql``), summaries first."""
    names = {p.stem for p in (SQL_DIR / "reports").glob("*.sql")}
    first = [n for n in PREFERRED_ORDER if n in names]
    return first + sorted(names - set(first))


def check_view_names(names: list[str]) -> None:
    """Refuse names that are not report views.

    Raises:
        LookupError: Naming them and the known views.
    """
    known = report_view_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise LookupError(f"unknown report view(s) {', '.join(unknown)}; known: {', '.join(known)}")


def format_cell(value: Any, max_width: int = 40) -> str:
    """One cell as text: floats with 4 decimals, NULL as empty, long text cut with an ellipsis.

    Args:
        value: Cell value as returned by DuckDB.
        max_width: Longest cell kept whole.

    Returns:
        The text (at most ``max_width`` characters).
    """
    if value is None:
        text = ""
    elif isinstance(value, float):
        text = "nan" if math.isnan(value) else f"{value:.4f}"
    else:
        text = str(value)
    text = " ".join(text.split()) if "\n" in text or "\t" in text else text
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int = 40) -> list[str]:
    """Aligned text lines (header, rule, rows); numbers are right-aligned, everything else left-aligned."""
    cells = [[format_cell(v, max_width) for v in r] for r in rows]
    heads = [format_cell(c, max_width) for c in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(heads)]
    numeric = [
        bool(rows) and all(r[i] is None or (isinstance(r[i], int | float) and not isinstance(r[i], bool)) for r in rows)
        for i in range(len(heads))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    return [line(heads), "  ".join("-" * w for w in widths), *(line(r) for r in cells)]


def print_report(con: duckdb.DuckDBPyConnection, names: list[str] | None = None, max_rows: int = 20,
                 max_width: int = 40, out: TextIO | None = None) -> None:
    """Print report views as aligned tables.

    Example: ``print_report(storage.catalog.connect(), ["metrics_by_method", "efficiency"])`` prints::

        == metrics_by_method (2 rows) ==
        method         dataset    split  ...

    Args:
        con: Connection with the catalog views.
        names: Report views to print, in order (default: every view in ``sql/reports``, summaries first).
        max_rows: Rows printed per view (the count of the rest is printed after them).
        max_width: Longest cell printed whole; longer cells are cut.
        out: Stream (default ``sys.stdout``).

    Raises:
        LookupError: A name that is not a report view.
    """
    out = out or sys.stdout
    known = report_view_names()
    names = known if names is None else list(names)
    check_view_names(names)
    for i, name in enumerate(names):
        rel = con.table(name)
        total = rel.aggregate("count(*)").fetchall()[0][0]
        rows = rel.limit(max_rows).fetchall() if total else []
        if i:
            print(file=out)
        print(f"== {name} ({total} row{'' if total == 1 else 's'}) ==", file=out)
        if not total:
            print("(no rows)", file=out)
            continue
        for text in format_table(rel.columns, rows, max_width):
            print(text, file=out)
        if total > len(rows):
            print(f"... {total - len(rows)} more row(s): SELECT * FROM {name}", file=out)
