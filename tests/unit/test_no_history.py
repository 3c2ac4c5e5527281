"""Code comments say why; history belongs in git.

A comment that cites a commit of this repository, an issue or a session number narrates how the code came to be,
which ``git log`` and the issue tracker already hold, and goes stale as the code moves on. Hashes of other
repositories (the reference scripts' commits the metrics cite) are not commits of this one, so they pass.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The tracked files whose comments and docstrings are checked.
PATTERNS = ("*.py", "*.sql", "*.rq", "Makefile", "*.yaml", "*.yml", "*.toml", "*.sh", ".ci/*")
#: A word of 7-12 lowercase hex digits with at least one letter: how a short commit hash is written.
HEX = re.compile(r"(?<![0-9A-Za-z_])(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![0-9A-Za-z_])")
NUMBERED = re.compile(r"\b(?:issue|session) \d+\b", re.IGNORECASE)
SELF = "tests/unit/test_no_history.py"


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.split("\n")


def _lines():
    """(path, line number, line) of every checked tracked file."""
    for path in filter(None, _git("ls-files", "--", *PATTERNS)):
        file = ROOT / path
        if not file.is_file():  # deleted in the work tree, not yet in the index
            continue
        for no, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            yield path, no, line


def test_no_commit_hash_of_this_repository() -> None:
    commits = {h for h in _git("log", "--all", "--format=%H") if h}
    assert commits, "no commits in `git log --all`: the hashes cannot be checked"
    prefixes = {h[:n] for h in commits for n in range(7, 13)}
    hits = [f"{path}:{no}: {m.group(0)}" for path, no, line in _lines() for m in HEX.finditer(line)
            if m.group(0) in prefixes]
    print("\n".join(hits))
    assert hits == [], f"{len(hits)} commit hashes of this repository (say why, not which commit):\n" + "\n".join(hits)


def test_no_issue_or_session_numbers() -> None:
    hits = [f"{path}:{no}: {m.group(0)}" for path, no, line in _lines() if path != SELF
            for m in NUMBERED.finditer(line)]
    print("\n".join(hits))
    assert hits == [], f"{len(hits)} issue or session numbers (say why, not which issue):\n" + "\n".join(hits)
