"""The documentation holds together: the site builds strictly, every link and anchor resolves, the README stays a
front door (size budget, no commit hashes), and every ``docs/...#anchor`` the code cites exists.

Headings and their anchors follow the site's Markdown (python-markdown's ``toc`` slugs, ``{#id}`` attributes).
"""

from __future__ import annotations

import ast
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from tests import readme_sections as gen

ROOT = gen.ROOT
#: README.md's size budget (bytes): a front door, the reference lives in docs/.
README_BUDGET = 15_000
_FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks and inline code spans."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file: an explicit ``{#id}`` or the slug of each heading's text."""
    out = set()
    for line in _FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"^#{1,6} (.*?)\s*$", line)
        if not m:
            continue
        title = m.group(1)
        explicit = re.search(r"\{#([\w-]+)\}$", title)
        if explicit:
            out.add(explicit.group(1))
            continue
        plain = re.sub(r"`([^`]*)`", r"\1", title)
        out.add(slugify(plain, "-"))
    return out


def links(path: Path) -> list[str]:
    """Relative link targets of a Markdown file (web links and mail addresses left out)."""
    return [t for t in _LINK.findall(_prose(path.read_text())) if not re.match(r"^[a-z]+:", t)]


def test_every_relative_link_and_anchor_resolves() -> None:
    bad = []
    for page in gen.doc_files() + [ROOT / "CHANGELOG.md"]:
        for target in links(page):
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if not dest.exists():
                bad.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{page.relative_to(ROOT)}: {target} (no such anchor)")
    assert not bad, bad


def test_every_docs_anchor_the_code_cites_exists() -> None:
    cited = subprocess.run(["git", "grep", "-n", "-o", "-E", r"docs/[a-z_/-]+\.md(#[a-z0-9-]+)?", "--",
                            "*.py", "*.sql", "Makefile", "*.toml", "*.yaml"],
                           cwd=ROOT, capture_output=True, text=True, check=False).stdout.splitlines()
    assert cited, "no docs/ reference found in the code: the scan is broken"
    bad = []
    for hit in cited:
        where, ref = hit.rsplit(":", 1)
        file_part, _, anchor = ref.partition("#")
        dest = ROOT / file_part
        if not dest.is_file() or (anchor and anchor not in anchors(dest)):
            bad.append(f"{where}: {ref}")
    assert not bad, bad


def _reason_texts(node: ast.expr) -> list[str]:
    """The fixed text of a reason expression: a string, an f-string up to its first field, either of a ``x if c else
    y``."""
    if isinstance(node, ast.IfExp):
        return _reason_texts(node.body) + _reason_texts(node.orelse)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        fixed = itertools.takewhile(lambda v: isinstance(v, ast.Constant), node.values)
        return ["".join(v.value for v in fixed)]
    raise AssertionError(f"line {node.lineno}: a reject reason the scan cannot read: {ast.unparse(node)}")


def reject_reasons(module: Path) -> set[str]:
    """The fixed text of every reason a reader gives ``reject(path, reason, ...)``: the reason itself, or what the
    name it passes is assigned in the same function."""
    reasons = set()
    for fn in ast.walk(ast.parse(module.read_text())):
        if not isinstance(fn, ast.FunctionDef):
            continue
        assigned = {n.targets[0].id: n.value for n in ast.walk(fn)
                    if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
        for call in ast.walk(fn):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "reject":
                reason = call.args[1]
                reasons.update(_reason_texts(assigned.get(reason.id, reason) if isinstance(reason, ast.Name)
                                             else reason))
    return {r.strip() for r in reasons}


def test_every_wikipedia_reject_reason_is_in_the_bad_input_table() -> None:
    """Each reason the Wikipedia reader stores in ``rejects`` is quoted (its fixed text starting a code span) in
    docs/errors.md."""
    reasons = reject_reasons(ROOT / "tasks/dumps/wikipedia_xml.py")
    assert "no text left after markup removal (" in reasons and len(reasons) >= 8, reasons  # the scan works
    quoted = re.findall(r"`([^`\n]+)`", (ROOT / "docs/errors.md").read_text())
    assert sorted(r for r in reasons if not any(q.startswith(r) for q in quoted)) == []


def test_readme_is_a_front_door() -> None:
    text = gen.README.read_text()
    size = len(text.encode())
    assert size <= README_BUDGET, f"README.md is {size:,} bytes, budget {README_BUDGET:,}: move reference to docs/"
    hashes = re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", _FENCE.sub("", text))
    assert not hashes, f"commit hashes in README.md (history belongs in git): {hashes}"


def test_every_docs_page_is_in_the_site_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if p not in nav] == []


def test_readme_lists_every_docs_page() -> None:
    """Every top-level page, and the index of every folder (whose pages its index lists)."""
    listed = {t.partition("#")[0] for t in links(gen.README)}
    docs = ROOT / "docs"
    pages = {str(p.relative_to(ROOT)) for p in [*docs.glob("*.md"), *docs.glob("*/index.md")]} - {"docs/index.md"}
    assert sorted(pages - listed) == []


@pytest.mark.timeout(300)
def test_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link or anchor, or a page missing from the nav, fails the build."""
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=240,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "cli" / "index.html").is_file()
