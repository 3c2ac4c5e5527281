"""docs/reference/configuration.md covers the code: every ``--set`` key of every registered method, and every
``LINKEDQA_*`` variable named anywhere in flows/, tasks/, storage/, tests/, the Makefile, .ci/ and prefect.yaml.

Keys and variables are found by reading the code, not listed here: a new settings field without a docstring, or a
new variable without an entry in ``storage/env_vars.py``, fails these tests until it is documented.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.env_vars import ENV_VARS
from tests import readme_sections as gen

ROOT = gen.ROOT
PAGE = gen.DOCS / gen.CONFIG_PAGE
#: Where the code that reads environment variables lives (files and folders, relative to the repository).
SCANNED = ("flows", "tasks", "storage", "tests", "Makefile", ".ci", "prefect.yaml")
NAME = re.compile(r"\bLINKEDQA_[A-Z0-9_]+")


def _source_files() -> Iterator[tuple[Path, str]]:
    """``(path, text)`` of every text file under :data:`SCANNED` (tracked or not: work in progress counts too)."""
    for entry in SCANNED:
        path = ROOT / entry
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts:
                continue
            try:
                yield f, f.read_text()
            except (UnicodeDecodeError, OSError):
                continue


def env_names_in_source() -> dict[str, list[str]]:
    """``{LINKEDQA_* name: [files that name it]}`` over :data:`SCANNED`."""
    found: dict[str, list[str]] = {}
    for path, text in _source_files():
        for name in sorted(set(NAME.findall(text))):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def _page_sections() -> dict[str, str]:
    """``{heading text: body}`` of the page's ``###`` sections."""
    text = PAGE.read_text()
    parts = re.split(r"^### (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _table_rows(body: str) -> dict[str, list[str]]:
    """``{first cell without backticks: cells}`` of the Markdown table rows of a section."""
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells and re.fullmatch(r"`[^`]+`", cells[0]):
            rows[cells[0].strip("`")] = cells
    return rows


# ------------------------------------------------------------------------------------------- environment variables
def test_the_scan_finds_variables_where_they_are_read():
    names = env_names_in_source()
    assert "storage/layout.py" in names["LINKEDQA_HOME"] and "tests/conftest.py" in names["LINKEDQA_TEST_SESSION"]
    assert ".ci/run" in names["LINKEDQA_DATA"] and "prefect.yaml" in names["LINKEDQA_REPO"]


def test_every_variable_the_code_names_is_in_the_registry():
    missing = {n: where[:3] for n, where in env_names_in_source().items() if n not in ENV_VARS}
    assert not missing, f"add these to storage/env_vars.py ENV_VARS (default, meaning, read_by): {missing}"


def test_every_registered_variable_is_read_where_the_registry_says():
    names = env_names_in_source()
    stale = sorted(n for n in ENV_VARS if n not in names)
    assert stale == [], f"storage/env_vars.py lists variables no code names: {stale}"
    bad = []
    for name, var in ENV_VARS.items():
        assert var.default.strip() and var.meaning.strip() and var.read_by, name
        bad += [f"{name}: {p}" for p in var.read_by if not (ROOT / p).is_file() or name not in (ROOT / p).read_text()]
    assert bad == [], f"read_by names a file that does not exist or does not name the variable: {bad}"


def test_registry_defaults_agree_with_the_code():
    from storage.catalog import AUTO_MEMORY
    from tasks.progress import PLAIN_INTERVAL_S
    from tasks.search.dense_ann import FLAT_MAX_VECTORS

    assert ENV_VARS["LINKEDQA_DUCKDB_MEMORY"].default.startswith(f"`{AUTO_MEMORY}`")
    assert ENV_VARS["LINKEDQA_PROGRESS_INTERVAL"].default == f"`{PLAIN_INTERVAL_S:g}`"
    assert f"{FLAT_MAX_VECTORS:,}" in ENV_VARS["LINKEDQA_DENSE_INDEX"].default


def test_every_variable_is_on_the_page_under_its_audience():
    sections = _page_sections()
    user = _table_rows(sections["Read by linkedqa"])
    tests = _table_rows(sections["Read by the test suite only"])
    for name, var in ENV_VARS.items():
        assert name in (tests if var.test_only else user), f"{name} missing from {PAGE.relative_to(ROOT)}"
    assert sorted(set(user) | set(tests)) == sorted(ENV_VARS)


# ------------------------------------------------------------------------------------------- method settings
def test_every_settings_field_of_every_method_has_a_meaning():
    from tasks.methods.registry import METHODS

    missing = [f"{name}: {key}" for name, cls in METHODS.items()
               for key, f in cls.Settings.model_fields.items() if not (f.description or "").strip()]
    assert missing == [], f"settings fields without a docstring (the --set key's meaning): {missing}"


@pytest.mark.parametrize("method", sorted(gen.method_settings()))
def test_every_set_key_of_the_method_is_on_the_page(method: str):
    from tasks.methods.registry import METHODS

    fields = METHODS[method].Settings.model_fields
    rows = _table_rows(_page_sections()[f"`{method}`"])
    assert sorted(rows) == sorted(fields), f"{method}: the page's keys differ from the settings model's"
    for key, f in fields.items():
        assert rows[key][2] == gen._md_cell(gen._value_text(f.default)), f"{method}.{key}: default on the page"


def test_the_methods_page_links_every_method_section():
    from tasks.methods.registry import METHODS

    links = set(re.findall(rf"\({re.escape(gen.CONFIG_PAGE)}#([a-z0-9-]+)\)", (gen.DOCS / "methods.md").read_text()))
    assert set(METHODS) <= links and links - set(METHODS) <= {"method-settings-set"}


def test_the_page_is_current():
    old = PAGE.read_text()
    new = gen.render(old, gen.FILES[str(PAGE.relative_to(ROOT))])
    assert new == old, f"{PAGE.relative_to(ROOT)} is stale; run: {gen.WRITE_HINT}"
