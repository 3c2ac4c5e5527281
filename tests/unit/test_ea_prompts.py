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
    label_key,
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


# ---------------------------------------------------------------- a candidate named by its label (real DBP15K)
@pytest.fixture(scope="module")
def fr_en(data_root):
    from tasks.datasets.ea_kg import read_pair_cached

    return read_pair_cached(data_root, "fr_en")


@pytest.fixture(scope="module")
def shown(fr_en) -> tuple[dict, list[dict]]:
    """FR-EN's first test entity and the 10 candidates the generator shows for it (as ``ea-agent`` with
    ``w_name=0, w_neighbour=0``)."""
    from tasks.datasets.dbp15k import split_of
    from tasks.methods.ea.embed import EmbedConfig
    from tasks.methods.ea.embed_method import CandidateTool

    labels = split_of(len(fr_en.links))
    links = {s: [lk for lk, x in zip(fr_en.links, labels, strict=True) if x == s] for s in ("train", "test")}
    cand = CandidateTool(fr_en, links, EmbedConfig(w_name=0.0, w_neighbour=0.0), None)
    (res,) = cand([{"source": sorted(s for s, _ in links["test"])[0], "split": "test", "k": 10}])
    assert len(res["candidates"]) == 10 and len({label_key(c["name"]) for c in res["candidates"]}) == 10
    return res["source"], res["candidates"]


def test_a_reply_naming_a_shown_candidate_by_its_label_names_it(shown):
    src, cands = shown
    c, other = cands[2], cands[0]
    local = c["iri"].rsplit("/", 1)[1]  # the label as the DBpedia IRI ends: underscores, percent-escapes
    for reply in (f"[{c['name']}]", f"[{local}]", f"[{c['name'].upper()}]", c["name"], f" {c['name']}.\n",
                  f"`{c['name']}`", f'"{c["name"]}"', f"**{c['name']}**", f"Answer: [{c['name']}]"):
        assert parse_choice(reply, cands) == c["id"], reply
    # an IRI wins over a label
    assert parse_choice(f"[{c['name']}] [{other['iri']}]", cands) == other["id"]
    # a label inside a sentence, the source's own name, the placeholder: no candidate
    for reply in (f"The best match is {c['name']}.", f"[{src['name']}]", "[IRI]", c["name"][:-1]):
        assert parse_choice(reply, cands) is None, reply


def test_a_percent_escaped_label_and_the_first_bracket_that_names_a_candidate(fr_en, shown):
    _, cands = shown
    kg = fr_en.kg2
    row = next(i for i, iri in enumerate(kg.iris) if iri.endswith("%3F"))  # e.g. .../Where_Is_My_Mind%3F
    q = {"id": kg.ids[row], "iri": kg.iris[row], "name": kg.names[row]}
    assert q["name"].endswith("?")
    with_q = [*cands, q]
    assert parse_choice(f"[{q['iri'].rsplit('/', 1)[1]}]", with_q) == q["id"]
    assert parse_choice(q["name"], with_q) == q["id"]
    assert parse_choice(f"[not a candidate] [{q['name']}] [{cands[0]['name']}]", with_q) == q["id"]


def test_a_label_two_shown_candidates_share_is_refused(data_root):
    from tasks.datasets.ea_kg import read_pair_cached

    kg = read_pair_cached(data_root, "ja_en").kg1  # ANDROID and Android: two entities, one label up to case
    both = [{"id": i, "iri": kg.iris[kg.index[i]], "name": kg.names[kg.index[i]]} for i in ("ja:4146", "ja:24382")]
    assert [c["name"] for c in both] == ["ANDROID", "Android"]
    for reply in ("[Android]", "ANDROID", "[android]"):
        assert parse_choice(reply, both) is None, reply
    assert parse_choice(f"[{both[1]['iri']}]", both) == "ja:24382"
    assert parse_choice("[Android]", both[1:]) == "ja:24382"  # unique among the candidates shown: named
