"""EA-Agent prompt templates (paper Appendix F) and reply parsing."""

from __future__ import annotations

import json
import re

import pytest

from tasks.methods.ea.prompting import (
    ALIGN,
    ATTR,
    REFLECT,
    REL,
    candidate_blocks,
    entity_block,
    fill,
    parse_choice,
    parse_path,
    path_text,
    template,
)

CANDS = [
    {"id": "en:1", "iri": "http://dbpedia.org/resource/Paris", "name": "Paris", "similarity": 0.9},
    {"id": "en:2", "iri": "http://dbpedia.org/resource/Paris_FC", "name": "Paris FC", "similarity": 0.8},
    {"id": "en:3", "iri": "http://dbpedia.org/resource/Paris,_Texas", "name": "Paris, Texas", "similarity": 0.7},
]


def test_templates_have_exactly_the_paper_placeholders():
    expected = {
        "ea_plan.txt": {"tool_pool", "entity_iri", "attr_cnt_all", "attr_cnt", "rel_cnt_all", "rel_cnt",
                        "signal_attr", "top1_score", "top2_score", "top3_score"},
        "ea_align.txt": {"source_iri", "source_triples", "candidate_blocks"},
        "ea_reflect.txt": {"source_iri", "source_triples", "candidate_blocks", "initial_choice"},
        "ea_rewrite.txt": {"entity", "top1_score", "top2_score", "top3_score", "old_tools", "reward"},
    }
    for name, keys in expected.items():
        assert set(re.findall(r"\{(\w+)\}", template(name))) == keys, name
    pool = json.loads(template("ea_tool_pool.json"))
    assert [t["name"] for t in pool] == [ATTR, REL, ALIGN, REFLECT]
    with pytest.raises(KeyError):
        fill("no placeholders", {"x": 1})


@pytest.mark.parametrize(
    ("text", "tools", "repaired"),
    [
        ("1. RelationTripleSelector\n2. EntityAlignmentTool\n3. Reflector", (REL, ALIGN, REFLECT), False),
        ("1. <AttributeTripleSelector>\n2. <Relation Triple Selector>\n3. <EntityAlignmentTool>",
         (ATTR, REL, ALIGN), False),
        ("1. Reflector\n2. EntityAlignmentTool\n3. RelationTripleSelector", (REL, ALIGN, REFLECT), True),
        ("1. RelationTripleSelector", (REL, ALIGN), True),
        ("EntityAlignmentTool EntityAlignmentTool", (ALIGN,), False),
    ],
)
def test_parse_path(text, tools, repaired):
    p = parse_path(text)
    assert p is not None and p.tools == tools and bool(p.repairs) == repaired


def test_unparseable_path_and_format():
    assert parse_path("I would align it with Paris.") is None
    assert path_text([REL, ALIGN]) == "1. RelationTripleSelector\n2. EntityAlignmentTool"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[http://dbpedia.org/resource/Paris_FC]", "en:2"),
        ("[http://dbpedia.org/resource/Paris]", "en:1"),
        ("The best match is http://dbpedia.org/resource/Paris.", "en:1"),
        ("[http://dbpedia.org/resource/Paris,_Texas]", "en:3"),
        ("[Paris FC]", "en:2"),
        ("[2]", None),
        ("http://dbpedia.org/resource/Paris_(disambiguation)", None),
        ("", None),
    ],
)
def test_parse_choice(text, expected):
    assert parse_choice(text, CANDS) == expected


def test_candidate_blocks_show_iri_similarity_and_selected_triples():
    selected = {"en:1": {"attribute": {"triples": [], "note": "no attributes"},
                         "relation": {"triples": [["Paris", "r7", "France"]], "note": ""}}}
    text = candidate_blocks(CANDS[:2], selected)
    assert "IRI: http://dbpedia.org/resource/Paris (similarity 0.900)" in text
    assert "(attribute triples: no attributes)" in text and "(Paris, r7, France)" in text
    assert "(no triples selected)" in text  # en:2 had no selection
    assert entity_block({}) == "(no triples selected)"
