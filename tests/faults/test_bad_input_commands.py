"""Bad input for every ``linkedqa`` command, generated from ``flows.cli.build_parser()``.

For every leaf command of the parser, each argument of a kind below gets one bad value:

* every command: an option it does not have -> exit 2;
* a number (an argparse ``type`` that parses numbers): ``-1`` -> exit 2, ``must be > 0`` / ``>= 0``; a number
  argument without a range check fails this module (:func:`test_every_number_has_a_range_check`);
* an input file or folder (metavar ``F`` / ``DIR``, or the argument ``file``; not an output,
  :data:`OUTPUTS`): a path that does not exist -> exit 4 (a missing prerequisite, as a missing KB or run),
  the path in the message;
* a name (method, dataset, KB, run, report view): one nothing has -> exit 2 (an unknown method or dataset: the
  registries list them) or 4 (a KB or run that is not there), the name in the message;
* ``--set``: a pair without ``=`` -> exit 2.

Each answer is the commands' error format, exactly two lines: ``error: <message>`` and ``hint: <what to do>``;
no traceback, and nothing written under ``LINKEDQA_HOME``. A new command needs one :data:`BASE` row (the
smallest valid arguments its bad values are put into); a new argument of a listed kind is covered as it is.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli import build_parser
from tests.cli_env import user_shell_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("cli_session_api")

#: The smallest valid arguments of each leaf command; ``{dest}`` stands for a positional argument (its valid value
#: in :data:`VALID`, or the bad value of a case), ``{missing}`` for a path that does not exist.
BASE: dict[tuple[str, ...], list[str]] = {
    ("kb", "build"): [],
    ("kb", "export-nt"): ["{out}"],
    ("kb", "index"): [],
    ("kb", "list"): [],
    ("kb", "download"): [],
    ("data", "list"): [],
    ("data", "load"): ["{names}"],
    ("data", "import"): ["{file}", "--name", "imported"],
    ("data", "fetch"): ["{names}"],
    ("models", "prepare"): [],
    ("run",): ["{method}", "--dataset", "webqsp-el"],
    ("eval",): [],
    ("report",): [],
    ("catalog", "refresh"): [],
    ("demo",): [],
    ("reproduce",): ["{paper}", "--dry-run"],
}
#: Valid values of the positional arguments.
VALID = {"{names}": "webqsp-el", "{file}": "{missing}", "{method}": "ela", "{paper}": "ela"}
#: Arguments naming something (dest -> what the message calls it); exit 2 for what a registry lists, 4 otherwise.
NAMES: dict[str, tuple[str, int]] = {"method": ("method", 2), "dataset": ("dataset", 2), "names": ("dataset", 2),
                                     "kb": ("KB", 4), "run_id": ("run", 4), "run": ("run", 4),
                                     "views": ("report view", 4), "paper": ("paper", 2),
                                     "condition": ("condition", 2)}
#: Folders and files a command writes (``--to``, ``out``): created when missing, so not bad input.
OUTPUTS = {"to", "out"}
#: Arguments of the commands that are neither names nor inputs, nor numbers, and take any text (checked here so
#: that a new argument is looked at: add it to one of the kinds above, or here with the reason).
FREE_TEXT = {"split", "model", "base_url", "api_key_block", "dask_address", "mirror", "to", "name", "out",
             "languages", "memory_limit", "wikidata_date", "wikipedia_date", "backend", "dtype", "scheduler",
             "runner", "kind", "task", "api",
             "wikidata", "wikipedia"}  # kb download's dump dates (its own check: latest or YYYYMMDD)


def leaves(parser: argparse.ArgumentParser | None = None, prefix: tuple[str, ...] = ()):
    """``(command words, parser)`` of every leaf command."""
    parser = parser or build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sub in subs[0].choices.items():
        yield from leaves(sub, (*prefix, name))


def _args(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def _is_number(a: argparse.Action) -> bool:
    return a.type in (int, float) or getattr(a.type, "__qualname__", "").startswith("positive")


def _is_input(a: argparse.Action) -> bool:
    return (a.metavar in ("F", "DIR") or a.dest == "file") and a.dest not in OUTPUTS


def _put(base: list[str], a: argparse.Action, value: str) -> list[str]:
    """``base`` with ``a`` set to ``value`` (an option appended, a positional in its place or appended)."""
    if a.option_strings:
        return [*base, a.option_strings[-1], value]
    slot = "{" + a.dest + "}"
    return [value if tok == slot else tok for tok in base] if slot in base else [*base, value]


def cases() -> list[tuple[str, list[str], int, str]]:
    """``(id, argv, exit code, text the error line must hold)`` for every command and argument kind."""
    out = []
    for cmd, parser in leaves():
        base = BASE[cmd]
        acts = _args(parser)
        name = " ".join(cmd)
        out.append((f"{name}: unknown option", [*cmd, *base, "--no-such-option"], 2, "--no-such-option"))
        for a in acts:
            if _is_number(a):
                out.append((f"{name}: {a.dest}=-1", [*cmd, *_put(base, a, "-1")], 2, "must be"))
            elif _is_input(a):
                out.append((f"{name}: missing {a.dest}", [*cmd, *_put(base, a, "{missing}")], 4, "{missing}"))
            elif a.dest in NAMES:
                what, code = NAMES[a.dest]
                out.append((f"{name}: unknown {what}", [*cmd, *_put(base, a, "no-such-name")], code, "no-such-name"))
            elif a.dest == "set":
                out.append((f"{name}: --set without =", [*cmd, *base, "--set", "novalue"], 2, "novalue"))
    return out


def test_every_argument_is_of_a_known_kind() -> None:
    """A new argument is looked at: it is a number, an input, a name, ``--set``, a flag or listed free text."""
    unknown = [(" ".join(cmd), a.dest) for cmd, p in leaves() for a in _args(p)
               if not (_is_number(a) or _is_input(a) or a.dest in NAMES or a.dest in ("set", "verbose")
                       or a.nargs == 0 or a.dest in FREE_TEXT)]
    assert not unknown, f"arguments of no bad-input kind (add them to a kind or FREE_TEXT): {unknown}"
    assert set(BASE) == {cmd for cmd, _ in leaves()}, "every leaf command needs a BASE row"


def test_every_number_has_a_range_check() -> None:
    """Numbers are parsed by ``flows.cli.args.positive`` (a range), never by a bare ``int``/``float``."""
    bare = [(" ".join(cmd), a.dest) for cmd, p in leaves() for a in _args(p) if a.type in (int, float)]
    assert not bare, f"numbers without a range check: {bare}"


CASES = cases()


@pytest.mark.parametrize(("argv", "code", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_two_lines_and_writes_nothing(tmp_path: Path, argv: list[str], code: int, needle: str) -> None:
    home = tmp_path / "wh"
    missing = str(tmp_path / "no-such-dir" / "no-such-file.gz")
    argv = [VALID.get(x, x) for x in argv]
    argv = [x.replace("{missing}", missing).replace("{out}", str(tmp_path / "out.nt")) for x in argv]
    needle = needle.replace("{missing}", missing)
    out = subprocess.run([sys.executable, "-m", "flows.cli", *argv], cwd=ROOT, env=user_shell_env(home),
                         capture_output=True, text=True, timeout=300)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == code, out.stderr[-2000:]
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), out.stderr[-2000:]
    assert needle in lines[0], out.stderr
    written = [p for p in home.rglob("*") if p.is_file()] if home.exists() else []
    assert not written, written
    assert not (tmp_path / "out.nt").exists()
