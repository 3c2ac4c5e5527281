"""README.md and docs/ state what the code does now: generated sections are current, and the rest is checked
against the code where it can be (index folders, make targets, command lines, method settings, folders).

The checks read README.md and every docs page as one text (:data:`TEXT`, README first), so a section is found by
its heading wherever it lives.

Fast: reads the registry, the argparse parser and source files; no engine, no Prefect, no data.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import re
import shlex

import pytest

from tests import readme_sections as gen

TEXT = "\n".join(p.read_text() for p in gen.doc_files())


def _code_blocks(text: str) -> list[str]:
    """Fenced blocks (without the fences) and 4-space indented blocks after a blank line."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    blocks += re.findall(r"(?:(?<=\n\n)(?: {4}[^\n]*\n)+)", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    return blocks


def _code_spans(text: str) -> list[str]:
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", prose)


def _section(text: str, heading: str) -> str:
    """Body of a Markdown section, up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = re.search(rf"^{re.escape(heading)}", text, flags=re.M).start()
    rest = text[start + len(heading):]
    m = re.search(rf"^#{{1,{level}}} ", rest, flags=re.M)
    return rest[:m.start()] if m else rest


def test_generated_sections_are_current():
    diff = gen.stale_diff()
    assert not diff, f"generated sections differ from what the code generates:\n{diff}\nrun: {gen.WRITE_HINT}"


def test_every_index_folder_the_code_writes_is_in_the_storage_layout():
    layout = _section(TEXT, "# Storage layout")
    named = set(re.findall(r"\b[a-z][a-z0-9-]*\.v\d+(?:-[a-z]+)?\b", layout))
    patterns = gen.index_folder_patterns()
    assert patterns, "no index_dir(...) call found in the code: the scan is broken"
    missing = {p: where for p, where in patterns.items() if not any(fnmatch.fnmatchcase(n, p) for n in named)}
    assert not missing, f"index folders the code writes but README's storage layout does not list: {missing}"
    stale = sorted(n for n in named if not any(fnmatch.fnmatchcase(n, p) for p in patterns))
    assert not stale, f"storage layout lists index folders no code writes: {stale}"


def test_storage_layout_lists_every_kb_table():
    from storage.schemas import KB_TABLES

    layout = _section(TEXT, "# Storage layout")
    assert [t for t in KB_TABLES if not re.search(rf"\b{t}\b", layout)] == []


def test_make_targets_named_in_readme_exist():
    named = set()
    for chunk in _code_blocks(TEXT) + _code_spans(TEXT):
        named |= set(re.findall(r"(?<![\w./-])make ([a-z][\w.-]*)", chunk))
    assert named, "no `make` target found in README: the scan is broken"
    assert sorted(named - gen.make_targets()) == [], f"Makefile targets: {sorted(gen.make_targets())}"


def test_make_bench_scripts_listed_are_the_ones_it_runs():
    from tests.bench.run_all import SCRIPTS

    listed = re.findall(r"^- `(bench_\w+)\.py`", gen.section(TEXT, "bench-scripts"), flags=re.M)
    assert listed == [m.rsplit(".", 1)[1] for m in SCRIPTS]


def test_bench_and_probe_scripts_named_in_readme_exist():
    bench = gen.README.parent / "tests" / "bench"
    named = set(re.findall(r"\b((?:bench|probe)_[a-z_]+)\b", TEXT))
    assert named, "no benchmark named in README: the scan is broken"
    assert sorted(n for n in named if not (bench / f"{n}.py").is_file()) == []


def _linkedqa_lines(text: str) -> list[str]:
    """``linkedqa ...`` command lines of the hand-written code blocks (generated sections excluded)."""
    for name in gen.SECTIONS:
        begin, end = gen._markers(name)
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), "", text, flags=re.S)
    lines = []
    for block in _code_blocks(text):
        block = re.sub(r"\\\n\s*", " ", block)  # a command continued with a backslash is one line
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            m = re.match(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?linkedqa\s+(.*)$", line)  # after VAR=value
            if m:
                lines.append(m.group(1))
    return lines


def test_linkedqa_commands_in_readme_exist():
    paths = gen.command_paths()
    groups = {p[0] for p in paths if len(p) > 1}
    leaves = {p[0] for p in paths if len(p) == 1}
    bad = []
    for chunk in _code_blocks(TEXT) + _code_spans(TEXT):
        for cmd, sub in re.findall(r"(?<![\w-])linkedqa\s+([a-z][\w-]*)(?:\s+([a-z][\w-]*))?", chunk):
            if cmd in leaves:
                continue
            if cmd not in groups or (sub and (cmd, sub) not in paths):
                bad.append(f"linkedqa {cmd} {sub}".strip())
    assert bad == [], f"not commands of flows.cli.build_parser(): {sorted(set(bad))}; real: {sorted(paths)}"


def test_linkedqa_command_lines_in_code_blocks_parse():
    from flows.cli import build_parser

    lines = _linkedqa_lines(TEXT)
    assert lines, "no linkedqa command line in README code blocks: the scan is broken"
    bad = []
    for line in lines:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                build_parser().parse_args(shlex.split(line))
        except SystemExit as exc:
            if exc.code:
                bad.append(f"linkedqa {line}: {err.getvalue().strip().splitlines()[0]}")
    assert bad == []


def test_no_open_issues_sentence_about_methods():
    from tasks.methods.registry import METHODS

    words = re.compile(r"\bmethods?\b|" + "|".join(re.escape(m) for m in METHODS) + r"|ReAct|KGQA|EA-Agent|ToG",
                       flags=re.I)
    text = TEXT
    for name in gen.SECTIONS:  # generated from data: the papers' own baselines that linkedqa does not implement
        begin, end = gen._markers(name)
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), "", text, flags=re.S)
    sentences = re.split(r"(?<=[.;])\s+", text)
    stale = [s for s in sentences if re.search(r"open issue|not (?:yet )?implemented", s, re.I) and words.search(s)]
    assert stale == [], "README says methods are open issues; every registered method runs end to end"


def _methods_rows() -> dict[str, str]:
    """``{method: '--set keys' cell}`` of the hand-written table under '### Methods'."""
    rows = {}
    for line in _section(TEXT, "# Methods").splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        m = re.fullmatch(r"`([a-z0-9-]+)`", cells[0]) if len(cells) == 4 else None
        if m:
            rows[m.group(1)] = cells[2]
    return rows


def test_methods_section_lists_every_registered_method():
    assert sorted(_methods_rows()) == sorted(gen.method_settings())


def test_methods_section_table_has_no_blank_line_inside():
    body = _section(TEXT, "# Methods")
    table = body[body.index("| method |"):]
    table = table[:table.index("\n\n")]
    assert len([ln for ln in table.splitlines() if ln.startswith("| `")]) == len(gen.method_settings())


def _same(text: str, default: object) -> bool:
    text = text.strip()
    if isinstance(default, bool):
        return text == str(default).lower()
    if isinstance(default, int | float):
        try:
            return float(text) == float(default)
        except ValueError:
            return False
    if default == "":
        return text in ('""', "''")
    return text == str(default)


@pytest.mark.parametrize("method", sorted(gen.method_settings()))
def test_methods_section_set_keys_and_defaults_are_real(method: str):
    settings = gen.method_settings()[method]
    cell = _methods_rows().get(method)
    assert cell is not None, f"{method} missing from the Methods table"
    bad = []
    keys_part = re.sub(r"\([^()]*\)", "", cell)  # remarks in parentheses name splits, values, ranges
    for span in re.findall(r"`([^`]+)`", keys_part):
        key, eq, value = span.partition("=")
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", key) or key.replace("_", "-") in gen.method_settings():
            continue
        if key not in settings:
            bad.append(f"{key}: not a --set key of {method}")
        elif eq and not re.search(r"\\?\||^[A-Z]+$", value) and not _same(value, settings[key]):
            bad.append(f"{key}={value}: default is {settings[key]!r}")
    assert bad == []


def _architecture_entries() -> dict[str, str]:
    """``{folder: its text}`` of the folder list in '## Architecture' (``tasks/dumps`` for indented entries)."""
    block = next(b for b in _code_blocks(_section(TEXT, "# Architecture")) if "tasks/" in b)
    entries: dict[str, str] = {}
    parent, key = "", ""
    for line in block.splitlines():
        if m := re.match(r"^([a-z][\w-]*)/\s", line):
            parent = key = m.group(1)
            entries[key] = line
        elif m := re.match(r"^  ([a-z][\w/, -]*/)(?:\s|$)", line):
            names = [n.strip().rstrip("/") for n in m.group(1).split(",") if n.strip()]
            for n in names:
                entries[f"{parent}/{n}"] = line
            key = f"{parent}/{names[-1]}"
        elif line.startswith(" " * 14) and key:
            entries[key] += "\n" + line
    return entries


def test_architecture_folders_exist_and_cover_the_tree():
    entries = _architecture_entries()
    assert "tasks" in entries and "tasks/methods" in entries, "Architecture folder list not found"
    assert sorted(k for k in entries if not (gen.ROOT / k).is_dir()) == [], "folders that do not exist"
    packages = {f"tasks/{p.name}" for p in (gen.ROOT / "tasks").iterdir() if (p / "__init__.py").exists()}
    assert sorted(packages - set(entries)) == [], "tasks/ subpackages missing from the Architecture block"
    for folder in ("flows", "tasks", "storage", "sql", "tests"):
        assert folder in entries, f"{folder}/ missing from the Architecture block"
    for folder in ("sql", "tests"):
        kids = {p.name for p in (gen.ROOT / folder).iterdir() if p.is_dir() and not p.name.startswith("__")}
        assert sorted(k for k in kids if f"{k}/" not in entries[folder]) == [], f"{folder}/ subfolders missing"
    for module in re.findall(r"\b(\w+\.py)\b", entries["storage"]):
        assert (gen.ROOT / "storage" / module).is_file(), module
