"""The pin count that the install page and pyproject.toml state is the lock's (requirements/lock.txt)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stated_pin_counts_match_the_lock():
    lock = [line for line in (ROOT / "requirements/lock.txt").read_text().splitlines() if "==" in line]
    readme = re.findall(r"fully pinned, tested stack: (\d+) pins", (ROOT / "docs/install.md").read_text())
    pyproject = re.findall(r"full transitive lock \((\d+) pins\)", (ROOT / "pyproject.toml").read_text())
    assert readme and pyproject
    assert {int(n) for n in readme + pyproject} == {len(lock)}, f"the lock has {len(lock)} pins"
