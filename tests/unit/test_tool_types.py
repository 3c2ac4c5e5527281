"""Tools are held to the payload and result types they declare (``tasks.methods.tool_types``).

The declared types of every real tool are checked on real data by the method matrix, which runs with the check on;
here: what the checker refuses, and that a run of a real tool passes it.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Any

import pytest
from typing_extensions import TypedDict

from tasks.methods.kgqa.kb_gold import GoldAnswers, gold_answers
from tasks.methods.qa.method import RetrievePayload
from tasks.methods.tool_types import ToolTypeError, checked_tools, declared_types
from tasks.search.kb_indexes import SearchCandidate, SearchPayload, index_search_tool
from tasks.search.title_index import TitleIndex


class _Hit(TypedDict):
    id: str
    score: float


def _typed(payloads: list[RetrievePayload]) -> list[list[_Hit]]:
    return [[{"id": p["query"], "score": 1}] for p in payloads]


def test_declared_types_are_read_from_the_annotations():
    assert declared_types("retrieve", _typed) == (RetrievePayload, list[_Hit])


@pytest.mark.parametrize("tool", [
    lambda payloads: payloads,  # no annotations
    lambda payloads: payloads.__class__,
])
def test_a_tool_without_types_is_refused_when_wrapped(tool):
    with pytest.raises(ToolTypeError, match="declares no payloads type"):
        checked_tools({"bare": tool})


def _loose(payloads: list[dict]) -> list[dict[str, Any]]:
    return payloads


def _any_result(payloads: list[RetrievePayload]) -> list[Any]:
    return payloads


@pytest.mark.parametrize(("tool", "what"), [(_loose, "payloads"), (_any_result, "results")])
def test_a_loose_declaration_is_refused(tool, what):
    with pytest.raises(ToolTypeError, match=f"declares loose {what}"):
        checked_tools({"loose": tool})


def test_payloads_and_results_are_validated_per_call():
    tool = checked_tools({"retrieve": _typed})["retrieve"]
    assert tool([{"query": "Paris", "k": 4}]) == [[{"id": "Paris", "score": 1}]]
    with pytest.raises(ToolTypeError, match=r"tool 'retrieve': payloads\[1\] does not match .* at k: Field required"):
        tool([{"query": "Paris", "k": 4}, {"query": "Rome"}])

    def broken(payloads: list[RetrievePayload]) -> list[list[_Hit]]:
        return [[{"id": 42, "score": "high"}] for _ in payloads]

    with pytest.raises(ToolTypeError, match=r"results\[0\] does not match .* at 0\.id: Input should be a valid str"):
        checked_tools({"retrieve": broken})["retrieve"]([{"query": "Paris", "k": 4}])


def test_a_real_search_tool_passes_its_own_types(tmp_path: Path, data_root: Path):
    path = data_root / "wikipedia-vital-articles" / "vital_articles_entities_2019.csv.gz"
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        rows = [{"qid": r[0], "title": r[1]} for r, _ in zip(csv.reader(fh, delimiter=";"), range(300), strict=False)
                if len(r) >= 2]
    rows.append({"qid": None, "title": "Zabriskie Point"})  # a title with no known QID: qid None in its hits
    tool = index_search_tool(TitleIndex.build(tmp_path / "titles", rows))
    assert declared_types("entity_search", tool) == (SearchPayload, list[list[SearchCandidate]])
    out = checked_tools({"entity_search": tool})["entity_search"](
        [{"queries": [rows[0]["title"], "zzz", "Zabriskie Point"], "k": 3}])
    assert out[0][0][0]["qid"] == rows[0]["qid"] and out[0][1] == []
    assert out[0][2][0]["title"] == "Zabriskie Point" and out[0][2][0]["qid"] is None


def test_kb_gold_statuses_fit_their_declared_literal():
    answers: list[GoldAnswers] = gold_answers(None, [None, "SELECT ?x WHERE { ?x p:P31 ?s }"])
    assert [a["status"] for a in answers] == ["no_query", "unsupported"]
    from pydantic import TypeAdapter

    TypeAdapter(list[GoldAnswers]).validate_python(answers)
    with pytest.raises(Exception, match="status"):
        TypeAdapter(GoldAnswers).validate_python({"status": "maybe", "qids": [], "literals": []})
