"""The suite's own layout: pytest imports test modules by basename (the test folders have no ``__init__.py``), so
two ``test_*.py`` files of one name in different folders stop the whole collection ("import file mismatch")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert len(names) > 100
    assert [n for n, k in names.items() if k > 1] == []
