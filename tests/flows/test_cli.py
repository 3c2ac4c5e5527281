"""The ``linkedqa`` command line as users call it: --help everywhere, one-line errors, exit codes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli import build_parser
from tests.cli_env import user_shell_env

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("cli_session_api")  # tests/cli_env.py


def cli(*args: str, home: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=user_shell_env(home),
                          capture_output=True, text=True, timeout=timeout)


def _subcommands(parser, prefix=()):
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _subcommands(sub, (*prefix, name))


def test_every_command_has_help(tmp_path: Path, capsys):
    commands = list(_subcommands(build_parser()))
    assert ("kb", "build") in commands and ("run",) in commands and ("eval",) in commands
    for cmd in commands:
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args([*cmd, "--help"])
        assert exc.value.code == 0
        assert "usage: linkedqa" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["run", "bogus", "--dataset", "webqsp-el"], 2, "valid methods: anchorrag, bm25-rag, closed-book, cot"),
        (["run", "ela", "--dataset", "webqsp-el", "--set", "nope=1"], 2, "valid keys: source"),
        (["run", "ela", "--dataset", "webqsp-el", "--set", "k=many"], 2, "invalid --set value"),
        (["run", "ela", "--dataset", "../etc"], 2, "invalid dataset name"),
        (["run", "ela", "--dataset", "no-such-set"], 2, "unknown dataset 'no-such-set'"),
        (["eval", "no-such-run"], 4, "unknown run"),
        (["run", "anchorrag", "--dataset", "factoidqa"], 2, "does not apply to dataset 'factoidqa' (task 'qa')"),
        (["run", "search-recall", "--dataset", "webqsp-el", "--runner", "dask", "--workers", "0"], 2,
         "argument --workers: must be > 0, got 0"),
    ],
)
def test_bad_usage_is_one_readable_line(tmp_path: Path, args, code, needle):
    out = cli(*args, home=tmp_path / "wh")
    assert out.returncode == code, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and needle in lines[0], out.stderr
    assert lines[1].startswith("hint: ") and len(lines) == 2


@pytest.mark.parametrize("args", [["run", "bogus", "--dataset", "webqsp-el"], ["run", "ela", "--dataset", "nope"],
                                  ["run", "anchorrag", "--dataset", "factoidqa"], ["data", "load", "../x"],
                                  ["data", "import", "q.jsonl", "--name", "../x"]])
def test_bad_arguments_of_a_flow_command_start_no_server_and_import_no_prefect(tmp_path: Path, args):
    """A flow command's arguments are checked before its Prefect server is spawned and its flow imported: a bad
    one costs neither (~1.5 s on 2 cores, against ~5 s with them)."""
    code = ("import sys\nfrom flows.cli import prefect_server\nfrom flows.cli import main\n"
            f"rc = main({args!r})\n"
            "print('RESULT', rc, prefect_server._SERVER.proc is not None, 'prefect' in sys.modules)")
    env = user_shell_env(tmp_path / "wh")
    env.pop("PREFECT_API_URL", None)  # a user's shell: the command would start its own server
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "RESULT 2 False False", (out.stdout, out.stderr)
    assert out.stderr.startswith("error: "), out.stderr


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [("--timeout", "0", "must be > 0, got 0"), ("--timeout", "soon", "expected a number, got 'soon'"),
     ("--retries", "-1", "must be >= 0, got -1"), ("--retries", "2.5", "expected an integer, got '2.5'")],
)
def test_bad_timeout_or_retries_is_an_argparse_usage_error(capsys, flag, value, needle):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["run", "closed-book", "--dataset", "popqa", flag, value])
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err.strip().splitlines()[0]


def test_data_import_reports_bad_lines(tmp_path: Path, data_root: Path):
    real = json.loads((data_root / "webqsp-el/webqsp.test.entities.with_classes.json").read_text())[:3]
    lines = [json.dumps({"id": r["question_id"], "question": r["utterance"], "gold_entities": [r["main_entity"]]})
             for r in real]
    lines.insert(1, "{not json")
    lines.append(json.dumps({"id": "x", "gold_entities": []}))  # no question
    f = tmp_path / "qs.jsonl"
    f.write_text("\n".join(lines) + "\n")
    out = cli("data", "import", str(f), "--name", "mine", home=tmp_path / "wh")
    assert out.returncode == 0, out.stderr
    assert "3 question(s) imported (test=3), 2 line(s) rejected" in out.stdout
    assert "line 2:" in out.stdout and "line 5:" in out.stdout


def test_truncated_dump_is_a_clear_error_and_publishes_nothing(tmp_path: Path, data_root: Path):
    raw = gzip.decompress((data_root / "wikidata-entities/wikibase-dump-filter/entities.gz").read_bytes())
    bad = tmp_path / "latest-all.json.gz"
    bad.write_bytes(gzip.compress(raw)[: len(gzip.compress(raw)) // 2])
    home = tmp_path / "wh"
    out = cli("kb", "build", "--wikidata", str(bad), "--name", "broken", home=home)
    assert out.returncode == 3, out.stderr
    first = out.stderr.strip().splitlines()[0]
    assert first.startswith("error: ") and "latest-all.json.gz" in first and "offset" in first
    assert not list((home / "kb").glob("*/manifest.json"))


def test_the_cli_module_imports_no_command_machinery() -> None:
    """Every command, and every spawned worker of one (multiprocessing imports the parent's ``__main__``),
    imports ``flows.cli``: the method registry, the run machinery, reports, notebooks and fetchers are imported
    by the commands that use them (~0.9 s less per process on 2 cores)."""
    heavy = ("tasks.methods.registry", "tasks.runs.shard", "tasks.runs.engine_pool", "tasks.reports.notebooks",
             "tasks.reports.views", "flows.cli.demo_summary", "tasks.fetch.http", "tasks.llm.models", "prefect")
    code = f"import sys, flows.cli; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_errors_of_modules_imported_by_commands_get_their_exit_code_and_hint() -> None:
    """``error_kind`` knows these errors by name (``module:Class``, their defining module): each name must
    still resolve, and give its exit code once the module is imported."""
    from flows.cli.errors import EXIT_DATA, EXIT_MISSING, EXIT_USAGE, error_kind, loaded
    from tasks.datasets.registry import UnknownDataset
    from tasks.dumps.errors import DumpError
    from tasks.fetch.http import ChecksumMismatch, FetchError
    from tasks.fetch.sources import DumpNotFound
    from tasks.methods.base import UnknownSetting
    from tasks.methods.registry import UnknownMethod

    names = {"tasks.fetch.sources:DumpNotFound": DumpNotFound, "tasks.fetch.http:ChecksumMismatch": ChecksumMismatch,
             "tasks.fetch.http:FetchError": FetchError, "tasks.dumps.errors:DumpError": DumpError,
             "tasks.methods.registry:UnknownMethod": UnknownMethod, "tasks.methods.base:UnknownSetting": UnknownSetting,
             "tasks.datasets.registry:UnknownDataset": UnknownDataset}
    for name, cls in names.items():
        assert loaded(name) == (cls,)
    assert loaded("no.such.module:Error") == ()
    codes = {cls: error_kind(cls.__new__(cls))[0] for cls in names.values()}  # instances without their __init__
    assert codes == {DumpNotFound: EXIT_MISSING, ChecksumMismatch: EXIT_DATA, FetchError: EXIT_DATA,
                     DumpError: EXIT_DATA, UnknownMethod: EXIT_USAGE, UnknownSetting: EXIT_USAGE,
                     UnknownDataset: EXIT_USAGE}
