"""The sample KB's row counts that docs/data.md quotes are those of the sample KB this code builds from the real
data (the session's build: every real sample file, every label language, as ``linkedqa kb build --sample``)."""

from __future__ import annotations

import re

from storage import layout
from storage.manifest import read_manifest


def _count(text: str, pattern: str) -> int:
    m = re.search(pattern, text, flags=re.S)
    assert m, f"docs/data.md no longer has {pattern!r}: update this test with the sentence"
    return int(m.group(1).replace(",", ""))


def test_data_page_quotes_the_sample_kb_counts(kb_home: str):
    rows = read_manifest(layout.kb_dir(kb_home))["row_counts"]
    text = (layout.REPO_ROOT / "docs" / "data.md").read_text()
    quoted = {"entities": _count(text, r"sample\s+KB has ([\d,]+) entities"),
              "claims": _count(text, r"entities and ([\d,]+) claims"),
              "labels": _count(text, r"the sample KB's `labels` table\s+([\d,]+) →")}
    assert quoted == {k: rows[k] for k in quoted}
