"""Claims of the docs that the code decides: the tutorial runs the demo's commands, the architecture page names
real ``sql/`` folders, the Python files that hold SQL and every registered method, the storage page every catalog
view, and LICENSE is the Apache License 2.0 text without another project's name.

Fast: reads the docs, the parser, the registry and source files; the catalog views come from a catalog built over
an empty folder.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

from tests import readme_sections as gen

ROOT = gen.ROOT
DOCS = gen.DOCS


def _code_lines(path: Path) -> list[str]:
    """Lines of the fenced code blocks of a Markdown file, comments after `` #`` removed."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", path.read_text(), flags=re.S | re.M)
    return [line.split(" #")[0].strip() for b in blocks for line in b.splitlines()]


def _block_entry(block: str, folder: str) -> str:
    """The text of a folder's entry in a folder-list code block: its line and the indented lines after it."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{folder}/"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def _architecture_blocks() -> list[str]:
    """The code blocks of docs/architecture.md that list the repository's folders."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", (DOCS / "architecture.md").read_text(), flags=re.S | re.M)
    return [b for b in blocks if re.search(r"^sql/", b, flags=re.M)]


# ------------------------------------------------------------------------------------------------- tutorial
def test_the_tutorial_runs_the_demos_commands():
    """Steps 1 and 2 of the tutorial are the demo's build and run steps, argument for argument, so after `make
    demo` they reuse its KB version and runs."""
    from flows.cli import build_parser
    from flows.cli.demo import demo_steps

    demo = [argv for _, argv in demo_steps(build_parser().parse_args(["demo"]))]
    tutorial = [shlex.split(m.group(1)) for line in _code_lines(DOCS / "tutorial.md")
                if (m := re.match(r"^(?:\S*/)?linkedqa\s+(.*)$", line))]
    runs = [argv for argv in demo if argv[0] == "run"]
    assert [a for a in tutorial if a[0] == "run"] == runs
    assert ["kb", "build", "--sample"] in demo and ["kb", "build", "--sample"] in tutorial
    ela = next(a for a in runs if a[1] == "ela")
    assert "--set" in ela, "the demo's ELA step sets max_tokens_answer: the tutorial must too"


# ------------------------------------------------------------------------------------------------- architecture
def test_every_sql_folder_the_docs_name_exists():
    named = set()
    for page in gen.doc_files():
        named |= set(re.findall(r"\bsql/([a-z_]+)/", page.read_text()))
    for block in _architecture_blocks():
        entry = _block_entry(block, "sql")
        named |= set(re.findall(r"(?<![\w/.*])([a-z_]+)/(?![\w*])", entry.split("/", 1)[1])) - {"sql"}
        named |= set(re.findall(r"(?<![\w/.])([a-z_]+)/\*", entry))
    assert {"kb", "reports", "checks", "sparql"} <= named, f"the scan is broken: {sorted(named)}"
    assert sorted(n for n in named if not (ROOT / "sql" / n).is_dir()) == []


_SQL = re.compile(r"^\s*(?:SELECT|CREATE|DROP|PRAGMA|INSERT|DELETE|UPDATE|CHECKPOINT|BEGIN|COMMIT|ROLLBACK|COPY)\b"
                  r"|^\s*SET\s+\w+\s*=|^\s*select\s.+\sfrom\s", flags=re.S)


def python_files_with_sql() -> set[str]:
    """Python files of flows/, tasks/ and storage/ with a string (not a docstring) that starts a SQL statement."""
    out = set()
    for path in sorted([*ROOT.glob("flows/**/*.py"), *ROOT.glob("tasks/**/*.py"), *ROOT.glob("storage/**/*.py")]):
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                text = node.values[0].value
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                text = node.value
            else:
                continue
            if _SQL.match(text):
                out.add(str(path.relative_to(ROOT)))
    return out


def test_the_architecture_names_every_python_file_that_holds_sql():
    """The Layout contract says which SQL stays in Python and where; a new file with SQL must be named there (or
    its SQL moved to sql/)."""
    found = python_files_with_sql()
    assert {"storage/catalog.py", "tasks/llm/cache.py"} <= found, f"the scan is broken: {sorted(found)}"
    named = set()
    for block in _architecture_blocks():
        named |= set(re.findall(r"\b((?:flows|tasks|storage)/[\w/]+\.py)\b", _block_entry(block, "sql")))
    assert sorted(found - named) == [], "Python files with SQL that docs/architecture.md's sql/ entry leaves out"
    assert sorted(named - found) == [], "docs/architecture.md's sql/ entry names files without SQL"


def test_the_architecture_lists_every_registered_method():
    from tasks.methods.registry import METHODS

    text = (DOCS / "architecture.md").read_text()
    bullet = re.search(r"^- Methods: (.*?)(?=^- |^$)", text, flags=re.S | re.M).group(1)
    listed = re.findall(r"`([a-z0-9-]+)`", bullet)
    assert sorted(listed) == sorted(METHODS)


# ------------------------------------------------------------------------------------------------- storage
def test_every_catalog_view_is_on_the_storage_page():
    names = gen.catalog_view_names()
    assert {"entities", "latest_metrics", "stages", "failure_stages", "stage_summary", "question_stages"} <= set(names)
    page = (DOCS / "storage.md").read_text()
    assert sorted(n for n in names if f"`{n}`" not in page) == []
    reports = {p.stem for p in (ROOT / "sql" / "reports").glob("*.sql")}
    assert sorted(reports - set(names)) == [], "report views of sql/reports that the catalog does not build"


# ------------------------------------------------------------------------------------------------- licence
def test_license_is_the_apache_text_with_no_other_projects_name():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("Copyright ")]
    assert lines and set(lines) <= {"Copyright [yyyy] [name of copyright owner]",
                                    "Copyright 2026 the linkedqa authors"}, lines
