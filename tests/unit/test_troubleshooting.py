"""docs/howto/troubleshooting.md quotes real messages with their real exit codes.

Every ``error:`` line of the page's ``text`` blocks must be a message the code builds: a string or f-string of
``flows``, ``tasks`` or ``storage`` (or of a vLLM file the page names), where the page writes ``<name>`` or ``...``
for what a field fills in. A field may stand for a value (a name, a path, a URL: at most :data:`MAX_VALUE`
characters besides placeholders); longer text in a field must itself be such a message (an exception's text
inside another's). The exit code the page gives is the one ``flows.cli.errors.error_kind`` gives the exception
class the message is raised with (or built in). Nothing runs: the source is read.
"""

from __future__ import annotations

import ast
import builtins
import errno
import importlib
import importlib.util
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from storage.layout import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "howto" / "troubleshooting.md"
SOURCES = ("flows", "tasks", "storage")
#: Fixed characters a string needs to count as a message (``f"{a}: {b}"`` does not).
MIN_FIXED = 12
#: Longest text (placeholders aside) a field may stand for without being a message of its own.
MAX_VALUE = 40
_PLACEHOLDER = re.compile(r"<[^<>\n]+>|\.\.\.")


@dataclass(frozen=True)
class Template:
    """A message the code builds: its parts (text, or ``None`` for a field) and where it is built."""

    parts: tuple[str | None, ...]
    path: Path
    line: int
    raised_with: str | None  # class named by the enclosing ``raise X(...)``
    in_class: str | None  # enclosing class (a message built in an exception's ``__init__``)
    in_function: str | None

    @property
    def fixed(self) -> str:
        return "".join(p for p in self.parts if p is not None)

    @property
    def regex(self) -> re.Pattern:
        return re.compile("".join("(.*?)" if p is None else re.escape(p) for p in self.parts), flags=re.S)

    @property
    def anchor(self) -> str:
        """The longest fixed piece (a fast filter before the regex)."""
        return max((p for p in self.parts if p), key=len)


def _variants(node: ast.AST) -> list[list[str | None]]:
    """The text of a string expression as parts (``None`` for a field), one list per way it can read."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [[node.value]]
    if isinstance(node, ast.JoinedStr):
        return [[v.value if isinstance(v, ast.Constant) else None for v in node.values]]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a, b in itertools.product(_variants(node.left), _variants(node.right))][:16]
    if isinstance(node, ast.IfExp):
        return _variants(node.body) + _variants(node.orelse)
    return [[None]]


def _merged(parts: list[str | None]) -> tuple[str | None, ...]:
    """Adjacent texts joined, adjacent fields as one, empty texts dropped."""
    out: list[str | None] = []
    for p in parts:
        if p == "":
            continue
        if out and p is not None and out[-1] is not None:
            out[-1] += p
        elif not (out and p is None and out[-1] is None):
            out.append(p)
    return tuple(out)


def templates_of(path: Path) -> list[Template]:
    """Every string expression of a source file with enough fixed text, with its enclosing raise, class and
    function."""
    found: list[Template] = []

    def visit(node: ast.AST, raised: str | None, cls: str | None, fn: str | None) -> None:
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            raised = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        elif isinstance(node, ast.ClassDef):
            cls, raised = node.name, None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            fn = node.name
        if isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp | ast.IfExp):
            for parts in _variants(node):
                merged = _merged(parts)
                if len("".join(p for p in merged if p)) >= MIN_FIXED:
                    found.append(Template(merged, path, node.lineno, raised, cls, fn))
        for child in ast.iter_child_nodes(node):
            visit(child, raised, cls, fn)

    visit(ast.parse(path.read_text()), None, None, None)
    return found


def vllm_files(text: str) -> list[Path]:
    """The files of the installed vLLM package that the page names (``vllm/....py``)."""
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations, "vLLM is not installed"
    base = Path(next(iter(spec.submodule_search_locations))).parent
    return [base / name for name in sorted(set(re.findall(r"\bvllm/[\w/]+\.py\b", text)))]


def all_templates(text: str) -> list[Template]:
    paths = [p for d in SOURCES for p in sorted((REPO_ROOT / d).rglob("*.py"))] + vllm_files(text)
    return [t for p in paths for t in templates_of(p)]


def match(message: str, templates: list[Template], depth: int = 0) -> tuple[Template, int] | None:
    """The template that builds ``message`` and the fixed characters it (and those in its fields) accounts for."""
    best = None
    for t in templates:
        if t.anchor not in message or (m := t.regex.fullmatch(message)) is None:
            continue
        covered = len(t.fixed)
        for field in m.groups():
            if len(_PLACEHOLDER.sub("", field)) <= MAX_VALUE:
                continue
            inner = match(field, templates, depth + 1) if depth < 2 else None
            if inner is None:
                break
            covered += inner[1]
        else:
            if best is None or covered > best[1]:
                best = (t, covered)
    return best


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)


def exit_code(t: Template) -> int:
    """What ``error_kind`` gives the exception class ``t`` is raised with or built in."""
    from flows.cli import errors

    if t.path == REPO_ROOT / "flows/cli/errors.py" and t.in_function == "no_space_message":
        return errors.error_kind(OSError(errno.ENOSPC, "No space left on device"))[0]
    name = t.raised_with or t.in_class
    assert name, f"{t.path}:{t.line}: the message is neither raised nor built in an exception class"
    cls = getattr(builtins, name, None)
    if not isinstance(cls, type):
        cls = getattr(importlib.import_module(_module_name(t.path)), name)
    assert issubclass(cls, BaseException), f"{t.path}:{t.line}: {name} is not an exception"
    return errors.error_kind(cls.__new__(cls))[0]


@dataclass(frozen=True)
class Entry:
    """One ``text`` block of ``error:`` lines and the exit codes of the paragraph after it."""

    messages: list[str]
    codes: list[int]
    paragraph: str


def entries(text: str) -> list[Entry]:
    out = []
    for m in re.finditer(r"^```text\n(.*?)^```\n", text, flags=re.S | re.M):
        lines = m.group(1).splitlines()
        if not any(line.startswith("error: ") for line in lines):
            continue
        assert all(line.startswith("error: ") for line in lines), m.group(1)
        para = text[m.end():].lstrip("\n").split("\n\n", 1)[0]
        sentence = re.match(r"Exit code ([^.]*)\.", para)
        assert sentence, f"no 'Exit code N.' after {lines[0]!r}"
        codes = [int(c) for c in re.findall(r"\b\d+\b", sentence.group(1))]
        codes = codes * len(lines) if len(codes) == 1 else codes
        assert len(codes) == len(lines), f"{len(lines)} messages, exit codes {codes}"
        out.append(Entry([line.removeprefix("error: ") for line in lines], codes, para))
    return out


def test_the_page_quotes_at_least_ten_messages_each_with_cause_and_fix():
    found = entries(PAGE.read_text())
    assert sum(len(e.messages) for e in found) >= 10
    assert [e.messages[0] for e in found if "**Cause:**" not in e.paragraph and len(e.paragraph) > 200] == []
    assert [e.messages[0] for e in found if "**Fix:**" not in e.paragraph] == []


def test_every_quoted_message_is_built_by_the_code_with_the_exit_code_the_page_gives():
    text = PAGE.read_text()
    templates = all_templates(text)
    assert len(templates) > 500, "the source scan found too few messages: it is broken"
    bad = []
    for entry in entries(text):
        for message, code in zip(entry.messages, entry.codes, strict=True):
            found = match(message, templates)
            if found is None:
                bad.append(f"not in the source: {message}")
                continue
            t, _ = found
            if exit_code(t) != code:
                bad.append(f"exit code {exit_code(t)} ({t.path.name}:{t.line}), the page says {code}: {message}")
    assert bad == []


def test_the_scan_refuses_what_the_code_does_not_say():
    """A message with a word changed, or a long made-up text in a field, is not found."""
    text = PAGE.read_text()
    templates = all_templates(text)
    real = "no KB built yet: run `linkedqa kb build --sample` first"
    assert match(real, templates) is not None
    assert match(real.replace("built", "made"), templates) is None
    made_up = "a sentence long enough to need a message of its own, which no code writes"
    assert match(f"unknown method '{made_up}'; valid methods: ...", templates) is None
    assert match("unknown method '<name>'; valid methods: ...", templates) is not None
