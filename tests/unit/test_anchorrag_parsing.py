"""AnchorRAG / ToG prompt-output parsers, grounding score and graph views, and the ``tog`` metric family.

Pure unit tests: no KB, no model. Model outputs are the shapes of the prompts' examples
(``tasks/methods/anchorrag/prompts/anchorrag_prompts.json``; paper appendix Tables 7-8) plus the messy variants a small
chat model produces. Every expected number is computed by hand in the test.
"""

from __future__ import annotations

import json

import pytest

from tasks.methods.anchorrag.graph import (
    REVERSE,
    UNNAMED,
    Neighbour,
    RelationChoice,
    entity_name,
    grounding_score,
    neighbours_of,
    rank_anchors,
    relation_choices,
)
from tasks.methods.anchorrag.parsing import (
    norm,
    parse_choice_numbers,
    parse_entity_scores,
    parse_filtered_triples,
    parse_keywords,
    parse_relation_scores,
    parse_sufficient,
)
from tasks.methods.base import TASK_FAMILIES
from tasks.metrics import runs
from tasks.metrics.base import MetricError
from tasks.metrics.registry import EvalItem, compute_results, join_items
from tasks.metrics.tog import TOG_METRICS, answer_set, tog_extract, tog_match, tog_metrics

approx = pytest.approx


# ============================================================================================ parse_keywords
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the prompt's example answers, verbatim
        ("Leonardo DiCaprio, Jordan Belfort", ["Leonardo DiCaprio", "Jordan Belfort"]),
        ("Champions League, FIFA World Cup, Spain", ["Champions League", "FIFA World Cup", "Spain"]),
        ("Mount Everest", ["Mount Everest"]),
        ("Nobel Prize in Physics, Albert Einstein", ["Nobel Prize in Physics", "Albert Einstein"]),
        # prefixes a chat model adds
        ("Answer: Leonardo DiCaprio, Jordan Belfort", ["Leonardo DiCaprio", "Jordan Belfort"]),
        ("Topic entities: US president, Berlin Wall", ["US president", "Berlin Wall"]),
        ("topic entities:Tesla Motors", ["Tesla Motors"]),
        ("Keywords: Tesla Motors.", ["Tesla Motors"]),
        # quoted names, trailing full stop, extra spaces
        ('"Pride and Prejudice"', ["Pride and Prejudice"]),
        ("“Pride and Prejudice”, Jane Austen.", ["Pride and Prejudice", "Jane Austen"]),
        ('  "Leonardo DiCaprio" ,  "Jordan Belfort".  ', ["Leonardo DiCaprio", "Jordan Belfort"]),
        # duplicates in another case are dropped (first spelling kept), empty parts too
        ("Spain, spain, SPAIN, FIFA World Cup, fifa world cup", ["Spain", "FIFA World Cup"]),
        ("Berlin Wall, , Berlin Wall,", ["Berlin Wall"]),
    ],
)
def test_parse_keywords_shapes(text, expected):
    assert parse_keywords(text) == expected


def test_parse_keywords_first_line_only_prose_after_and_new_question_block():
    # leading blank lines are skipped; explanation after the answer line is ignored
    out = "\n\n  Leonardo DiCaprio, Jordan Belfort\nThese are the people named in the question."
    assert parse_keywords(out) == ["Leonardo DiCaprio", "Jordan Belfort"]
    # the model answers, then starts a new example block: only the first line counts
    out = ("Leonardo DiCaprio, Jordan Belfort\nQuestion: Who was the US president when the Berlin Wall fell?\n"
           "US president, Berlin Wall")
    assert parse_keywords(out) == ["Leonardo DiCaprio", "Jordan Belfort"]
    # the model echoes the question first: the echoed "Question:" line is skipped
    out = "Question: In which city was the founder of Tesla Motors born?\nTesla Motors"
    assert parse_keywords(out) == ["Tesla Motors"]


@pytest.mark.parametrize("text", ["", None, "\n \n\t\n", "...", "Answer:", "Question: who?\n\n"])
def test_parse_keywords_empty_or_garbage(text):
    assert parse_keywords(text) == []


def test_parse_keywords_cap_and_overlong_parts():
    names = "A1, B2, C3, D4, E5, F6, G7, H8"
    assert parse_keywords(names) == ["A1", "B2", "C3", "D4", "E5", "F6"]  # default max_keywords=6
    assert parse_keywords(names, max_keywords=2) == ["A1", "B2"]
    assert parse_keywords(names, max_keywords=20) == ["A1", "B2", "C3", "D4", "E5", "F6", "G7", "H8"]
    # a part longer than 120 characters is no entity name (a sentence that happened to have no comma)
    assert parse_keywords("x" * 121 + ", Berlin Wall") == ["Berlin Wall"]
    assert parse_keywords("x" * 120) == ["x" * 120]


def test_norm():
    assert norm('  "Country Of  Citizenship" ') == "country of citizenship"
    assert norm("- **place of birth**.") == "place of birth"
    assert norm("{language.human_language.main_country}") == "language.human_language.main_country"
    assert norm("place of birth (reverse)") == "place of birth (reverse"  # trailing bracket stripped


# ===================================================================================== parse_relation_scores
CANDS = ["country of citizenship", "place of birth", "member of sports team", "spouse", "award received",
         "place of birth (reverse)"]


def test_parse_relation_scores_prompt_example_shape():
    out = ("1.{country of citizenship (Score: 0.5)}: This relation is highly relevant as it directly relates to "
           "the country whose president is being asked for.\n"
           "2.{place of birth (Score: 0.3)}: This relation is also relevant as it provides information on the "
           "countries.\n"
           "3.{award received (Score: 0.2)}: This relation is less relevant but still provides some context.")
    got = parse_relation_scores(out, CANDS, 3)
    assert [i for i, _ in got] == [0, 1, 4]
    assert [s for _, s in got] == approx([0.5, 0.3, 0.2])


def test_parse_relation_scores_paper_table7_shape_doubled_paren_and_bullets():
    # paper Table 7 prints "{... (Score: 0.5)) }"; small models add markdown bullets and odd case
    out = ("Here are the relations:\n"
           "- {Country of Citizenship (Score: 0.5))}: most relevant\n"
           "- {PLACE OF BIRTH (Score: 0.3) }: relevant\n"
           "-  { spouse (score:0.2) }: less relevant\n"
           "I hope this helps!")
    got = parse_relation_scores(out, CANDS, 3)
    assert got == [(0, approx(0.5)), (1, approx(0.3)), (3, approx(0.2))]


def test_parse_relation_scores_matching_rules():
    cands = ["country of citizenship", "country", "date of birth", "place of birth (reverse)"]
    # exact (after norm) wins over containment: "country" is contained in "country of citizenship"
    assert parse_relation_scores("{Country (Score: 1.0)}", cands, 3) == [(1, 1.0)]
    # quotes and a "Relation:" prefix are dropped before matching
    assert parse_relation_scores('{"Country of citizenship" (Score: 1.0)}', cands, 3) == [(0, 1.0)]
    assert parse_relation_scores("{Relation: date of birth (Score: 1.0)}", cands, 3) == [(2, 1.0)]
    # the name is part of a candidate
    assert parse_relation_scores("{citizenship (Score: 1.0)}", cands, 3) == [(0, 1.0)]
    # a candidate is part of the name
    assert parse_relation_scores("{date of birth of the person (Score: 1.0)}", cands, 3) == [(2, 1.0)]
    # the reverse relation is named with its suffix
    assert parse_relation_scores("{place of birth (reverse) (Score: 1.0)}", cands, 3) == [(3, 1.0)]


def test_parse_relation_scores_unknown_and_repeated_names_ignored():
    out = ("1.{spouse (Score: 0.4)}: yes\n"
           "2.{father (Score: 0.4)}: not a candidate\n"
           "3.{Spouse (Score: 0.1)}: repeated, the first score is kept\n"
           "4.{award received (Score: 0.2)}: yes")
    # kept: spouse 0.4, award received 0.2 -> total 0.6 -> 0.4/0.6 = 2/3, 0.2/0.6 = 1/3
    got = parse_relation_scores(out, CANDS, 3)
    assert got == [(3, approx(2 / 3)), (4, approx(1 / 3))]
    assert parse_relation_scores("{father (Score: 1.0)}", CANDS, 3) == []


def test_parse_relation_scores_top_cap_and_renormalisation():
    out = ("1.{award received (Score: 0.1)}\n2.{spouse (Score: 0.4)}\n"
           "3.{place of birth (Score: 0.3)}\n4.{country of citizenship (Score: 0.2)}")
    # best first: spouse 0.4, place of birth 0.3, country 0.2, award 0.1 (sum 1.0)
    assert parse_relation_scores(out, CANDS, 4) == [(3, approx(0.4)), (1, approx(0.3)), (0, approx(0.2)),
                                                    (4, approx(0.1))]
    # top=2: spouse 0.4 and place of birth 0.3, total 0.7 -> 0.4/0.7 = 0.571428..., 0.3/0.7 = 0.428571...
    got = parse_relation_scores(out, CANDS, 2)
    assert got == [(3, approx(0.5714285714)), (1, approx(0.4285714286))]
    assert sum(s for _, s in got) == approx(1.0)


def test_parse_relation_scores_scores_not_summing_to_one_are_renormalised():
    # a small model's scores: 0.6 + 0.3 + 0.3 = 1.2 -> 0.5, 0.25, 0.25 (ties keep reply order)
    out = "1.{spouse (Score: 0.6)}\n2.{place of birth (Score: 0.3)}\n3.{award received (Score: 0.3)}"
    assert parse_relation_scores(out, CANDS, 3) == [(3, approx(0.5)), (1, approx(0.25)), (4, approx(0.25))]
    # scores 8, 2 (a 0-10 scale): 0.8, 0.2
    out = "{spouse (Score: 8)}; {place of birth (Score: 2)}"
    assert parse_relation_scores(out, CANDS, 3) == [(3, approx(0.8)), (1, approx(0.2))]
    # all zero: equal shares
    out = "{spouse (Score: 0)}\n{place of birth (Score: 0.0)}"
    assert parse_relation_scores(out, CANDS, 3) == [(3, 0.5), (1, 0.5)]


def test_parse_relation_scores_loose_format_without_braces():
    # separated by semicolons, as the prompt asks, but no braces
    out = "Relevant relations: country of citizenship (Score: 0.6); place of birth (Score: 0.4)"
    assert parse_relation_scores(out, CANDS, 3) == [(0, approx(0.6)), (1, approx(0.4))]
    # markdown bullets, bold names
    out = "- **spouse** (Score: 0.7)\n- award received (Score: 0.3)"
    assert parse_relation_scores(out, CANDS, 3) == [(3, approx(0.7)), (4, approx(0.3))]
    # numbered lines, no braces (the example's numbering kept)
    out = "1. spouse (Score: 0.7): married to\n2. award received (Score: 0.3): prizes"
    assert parse_relation_scores(out, CANDS, 3) == [(3, approx(0.7)), (4, approx(0.3))]


def test_parse_relation_scores_loose_numbered_line_prefers_exact_name():
    # "1. country of citizenship (Score: 0.6)" names the candidate "country of citizenship" exactly; the list
    # number must not make it fall back to containment, where the shorter candidate "country" comes first.
    cands = ["country", "country of citizenship", "place of birth"]
    out = "1. country of citizenship (Score: 0.6): nationality\n2. place of birth (Score: 0.4): birthplace"
    assert parse_relation_scores(out, cands, 3) == [(1, approx(0.6)), (2, approx(0.4))]


@pytest.mark.parametrize("text", ["", None, "I don't know.", "1. spouse\n2. award received", "{spouse}"])
def test_parse_relation_scores_garbage(text):
    assert parse_relation_scores(text, CANDS, 3) == []


# ====================================================================================== parse_entity_scores
def test_parse_entity_scores_prompt_example_and_variants():
    example = ("Score: 0.0, 1.0, 0.0, 0.0, 0.0, 0.0\nThe movie that matches the given criteria is \"So Undercover\" "
               "with Miley Cyrus and produced by Tobin Armbrust. Therefore, the score for \"So Undercover\" would be "
               "1, and the scores for all other entities would be 0.")
    assert parse_entity_scores(example, 6) == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    # integers, lower case, markdown bold
    assert parse_entity_scores("score: 0, 1, 0", 3) == [0.0, 1.0, 0.0]
    assert parse_entity_scores("**Score:** 0.2, 0.8", 2) == [0.2, 0.8]
    # prose before; its "score" line has no numbers and is skipped
    out = "I will score the entities below.\nScore: 0.3, 0.7\nBecause the second one is the film."
    assert parse_entity_scores(out, 2) == [0.3, 0.7]
    # scores that do not sum to 1 are returned as given (the agent only ranks them)
    assert parse_entity_scores("Score: 0.9, 0.9, 0.1", 3) == [0.9, 0.9, 0.1]
    # no "Score" line: decimal numbers of the whole reply, when there are exactly n
    assert parse_entity_scores("0.0, 1.0, 0.0", 3) == [0.0, 1.0, 0.0]
    assert parse_entity_scores("The Resident: 0.1\nSo Undercover: 0.9", 2) == [0.1, 0.9]


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("Score: 0.5, 0.5", 3),  # wrong count
        ("Score: 0.2, 0.3, 0.5, 0.0", 3),
        ("So Undercover is the answer.", 2),
        ("0, 1", 2),  # integers without a Score line are not read
        ("", 1),
        (None, 1),
    ],
)
def test_parse_entity_scores_none(text, n):
    assert parse_entity_scores(text, n) is None


# =================================================================================== parse_filtered_triples
TRIPLES = [
    "Rift Valley Province, country, Kenya",
    "Rift Valley Province, coordinate location, UnName_Entity",
    "Kenya, currency, Kenyan shilling",
    "Kenya, capital, Nairobi",
]


def test_parse_filtered_triples_shapes():
    # copied as-is, one per line
    out = "Rift Valley Province, country, Kenya\nKenya, currency, Kenyan shilling"
    assert parse_filtered_triples(out, TRIPLES) == [0, 2]
    # in parentheses, in another order: indexes come back in shown order
    out = "(Kenya, currency, Kenyan shilling)\n(Rift Valley Province, country, Kenya)"
    assert parse_filtered_triples(out, TRIPLES) == [0, 2]
    # bullets, numbering, case, quotes, doubled spaces and prose around
    out = ("Here are the relevant triples:\n- kenya, Currency,  \"Kenyan shilling\"\n"
           "2. RIFT VALLEY PROVINCE, country, Kenya.\nThese answer the question.")
    assert parse_filtered_triples(out, TRIPLES) == [0, 2]
    # one line holding several parenthesised triples
    out = "(Kenya, capital, Nairobi), (Kenya, currency, Kenyan shilling)"
    assert parse_filtered_triples(out, TRIPLES) == [2, 3]


@pytest.mark.parametrize("text", ["", None, "None of the triples are relevant.", "Kenya", "Kenya, currency"])
def test_parse_filtered_triples_nothing_kept(text):
    assert parse_filtered_triples(text, TRIPLES) == []


# ========================================================================================= parse_sufficient
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{Yes}. Based on the given knowledge triplets, the author of The Long Winter, Laura Ingalls Wilder, lived "
         "in De Smet. Therefore, the answer to the question is {De Smet}.", True),
        ("{No}. Based on the given knowledge triplets, it's not sufficient to answer the entire question.", False),
        ("{yes}", True),
        ("{ NO }.", False),
        ("Answer: {Yes}. The answer is {Kenyan shilling}.", True),
        ("{{Yes}}. The answer is {{De Smet}}.", True),  # template braces copied
        ("Yes, the triplets are sufficient. The answer is Kenyan shilling.", True),
        ("Yes", True),
        ("No. The triplets do not mention the coach.", False),
        ("  no, more knowledge is needed", False),
        ("I cannot determine that from the triplets.", None),
        ("Based on the given knowledge triplets, Laura Ingalls Wilder lived in De Smet.", None),
        ("The answer is {De Smet}.", None),  # braces hold no verdict
        ("{}", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_sufficient(text, expected):
    assert parse_sufficient(text) is expected


@pytest.mark.parametrize("text", ["Now, let me look at the triplets again.",
                                  "Note: the triplets only mention Laura Ingalls Wilder."])
def test_parse_sufficient_leading_word_is_not_a_verdict(text):
    # "a leading yes/no" is the word, not any word starting with "no" ("Now", "Note")
    assert parse_sufficient(text) is None


# ==================================================================================== parse_choice_numbers
@pytest.mark.parametrize(
    ("text", "n", "top", "expected"),
    [
        ("2, 1", 3, 3, [1, 0]),
        ("1", 3, 3, [0]),
        ("Chosen entities: 3, 1", 3, 3, [2, 0]),
        ("4, 2, 0, 7", 3, 3, [1]),  # out of range (0 and above n) dropped
        ("2, 2, 1, 2", 3, 3, [1, 0]),  # duplicates dropped
        ("3, 1, 2", 3, 2, [2, 0]),  # top cap
        ("- 2\n- 3", 3, 3, [1, 2]),
        ("1, 3\n\nQuestion: Who directed Titanic?\nChosen entities: 2", 3, 3, [0, 2]),  # new block ignored
        ("2\n\nEntity 1 is a disambiguation page.", 3, 3, [1]),
        ("none of them", 3, 3, []),
        ("", 3, 3, []),
        (None, 3, 3, []),
    ],
)
def test_parse_choice_numbers(text, n, top, expected):
    assert parse_choice_numbers(text, n, top) == expected


# ========================================================================================== grounding (Eq. 2)
def test_grounding_score_hand_computed():
    # top-5 of [0.61, 0.12, 0.47, 0.33, 0.05, 0.29] = 0.61 + 0.47 + 0.33 + 0.29 + 0.12 = 1.82; / 5 = 0.364
    assert grounding_score([0.61, 0.12, 0.47, 0.33, 0.05, 0.29], 5) == approx(0.364)
    # fewer than k relations: still divided by k: (0.6 + 0.2) / 5 = 0.16
    assert grounding_score([0.6, 0.2], 5) == approx(0.16)
    # k = 1: the best relation
    assert grounding_score([0.61, 0.12, 0.47], 1) == approx(0.61)
    # k = 2 with a negative cosine among the rest: (0.5 + 0.1) / 2 = 0.3
    assert grounding_score([-0.2, 0.1, 0.5], 2) == approx(0.3)
    # all of them, negatives included, when fewer than k: (0.3 - 0.1) / 4 = 0.05
    assert grounding_score([0.3, -0.1], 4) == approx(0.05)
    # generators are accepted
    assert grounding_score((x / 10 for x in range(10)), 3) == approx((0.9 + 0.8 + 0.7) / 3)
    assert grounding_score([], 5) == 0.0


@pytest.mark.parametrize("k", [0, -1])
def test_grounding_score_bad_k(k):
    with pytest.raises(ValueError):
        grounding_score([0.5], k)


def test_rank_anchors_order_ties_and_cap():
    candidates = [("Q1", 0.90), ("Q2", 0.50), ("Q3", 0.70), ("Q4", 0.60), ("Q5", 0.60), ("Q6", 0.99),
                  ("Q1", 0.10)]
    sims = {
        "Q1": [0.2, 0.2],  # k=2: (0.2 + 0.2) / 2 = 0.2
        "Q2": [0.8, 0.6, 0.1],  # (0.8 + 0.6) / 2 = 0.7
        "Q3": [0.5],  # 0.5 / 2 = 0.25
        "Q4": [0.4, 0.4],  # 0.4, tie with Q5 and Q6 ... (same lists: exactly equal floats)
        "Q5": [0.4, 0.4],  # 0.4, same dense similarity as Q4: input order decides
        "Q6": [0.4, 0.4],  # 0.4, highest dense similarity of the three
    }
    got = rank_anchors(candidates, sims, k=2, m=10)
    assert [q for q, _ in got] == ["Q2", "Q6", "Q4", "Q5", "Q3", "Q1"]
    assert [s for _, s in got] == approx([0.7, 0.4, 0.4, 0.4, 0.25, 0.2])
    # m caps the anchors
    assert rank_anchors(candidates, sims, k=2, m=3) == [("Q2", approx(0.7)), ("Q6", approx(0.4)),
                                                        ("Q4", approx(0.4))]
    assert rank_anchors(candidates, sims, k=2, m=0) == []


def test_rank_anchors_missing_relations_and_first_occurrence():
    # Q9 has no relation row: score 0; the repeated Q7 keeps its first dense similarity (0.3), so Q8 (0.4)
    # wins the 0-score tie, not Q7 with 0.95
    candidates = [("Q7", 0.3), ("Q8", 0.4), ("Q7", 0.95), ("Q9", 0.2)]
    got = rank_anchors(candidates, {"Q7": [], "Q8": []}, k=5, m=3)
    assert got == [("Q8", 0.0), ("Q7", 0.0), ("Q9", 0.0)]
    assert rank_anchors([], {}, k=5, m=3) == []


# ============================================================================================ graph views
def test_relation_choices_filters_and_names():
    rows = [
        ["P27", "country of citizenship", "out", 1],
        ["P214", "VIAF ID", "out", 1],  # identifier property
        ["P646", "Freebase ID", "out", 1],
        ["P530", "diplomatic relation", "out", 12],  # skip list
        ["P1448", "official name", "out", 1],  # skip list
        ["P41", "flag image", "out", 1],  # skip list
        ["P19", "place of birth", "out", 1],
        ["P26", "spouse", "out", 1],  # visited
        ["P9999", "country of citizenship", "out", 1],  # duplicate name
        ["P4000", None, "out", 1],  # unlabeled property: its pid
        ["P19", "place of birth", "in", 5],
        ["P26", "spouse", "in", 1],  # only the outgoing P26 was visited
        ["P161", "cast member", "in", 40],
        ["P161", "cast member", "in", 40],  # repeated row
    ]
    got = relation_choices(rows, visited={("P26", "out"), ("P161", "out")})
    assert got == [
        RelationChoice("P27", "out", "country of citizenship", "country of citizenship"),
        RelationChoice("P19", "out", "place of birth", "place of birth"),
        RelationChoice("P4000", "out", "P4000", "P4000"),
        RelationChoice("P19", "in", "place of birth (reverse)", "place of birth"),
        RelationChoice("P26", "in", "spouse (reverse)", "spouse"),
        RelationChoice("P161", "in", "cast member (reverse)", "cast member"),
    ]
    assert REVERSE == " (reverse)"
    # visited incoming pair
    names = [c.name for c in relation_choices(rows, visited={("P161", "in"), ("P19", "out")})]
    assert names == ["country of citizenship", "spouse", "P4000", "place of birth (reverse)",
                     "spouse (reverse)"]
    # limit, in row order
    assert [c.pid for c in relation_choices(rows, limit=2)] == ["P27", "P19"]
    assert relation_choices([]) == []


def test_entity_name():
    assert entity_name("Q65", "Los Angeles") == "Los Angeles"
    assert entity_name("Q65", None) == UNNAMED == "UnName_Entity"
    assert entity_name(None, None) == ""


def test_neighbours_of_outgoing():
    rel = RelationChoice("P19", "out", "place of birth", "place of birth")
    facts = [
        {"s": "Q38111", "sl": "Leonardo DiCaprio", "p": "P19", "pl": "place of birth", "o": "Q65",
         "ol": "Los Angeles", "ov": None},
        {"s": "Q38111", "p": "P19", "o": "Q999", "ol": None, "ov": None},  # no English label
        {"s": "Q38111", "p": "P19", "o": "Q998", "ol": None, "ov": None},  # another unlabeled entity: kept
        {"s": "Q38111", "p": "P19", "o": None, "ov": "1974-11-11"},  # literal
        {"s": "Q38111", "p": "P19", "o": "Q65", "ol": "Los Angeles", "ov": None},  # repeated entity
        {"s": "Q38111", "p": "P19", "o": None, "ov": "1974-11-11"},  # repeated literal
        {"s": "Q38111", "p": "P19", "o": None, "ov": None},  # nothing to show
    ]
    got = neighbours_of("Q38111", "Leonardo DiCaprio", rel, facts, limit=10)
    assert got == [
        Neighbour("Q38111", "Q65", "Los Angeles", "Leonardo DiCaprio, place of birth, Los Angeles"),
        Neighbour("Q38111", "Q999", "UnName_Entity", "Leonardo DiCaprio, place of birth, UnName_Entity"),
        Neighbour("Q38111", "Q998", "UnName_Entity", "Leonardo DiCaprio, place of birth, UnName_Entity"),
        Neighbour("Q38111", None, "1974-11-11", "Leonardo DiCaprio, place of birth, 1974-11-11"),
    ]
    assert [n.qid for n in neighbours_of("Q38111", "Leonardo DiCaprio", rel, facts, limit=2)] == ["Q65", "Q999"]
    assert neighbours_of("Q38111", "Leonardo DiCaprio", rel, [], limit=5) == []


def test_neighbours_of_incoming_uses_label_not_reverse_name():
    rel = RelationChoice("P161", "in", "cast member (reverse)", "cast member")
    facts = [
        {"s": "Q44578", "sl": "Titanic", "p": "P161", "o": "Q38111", "ol": "Leonardo DiCaprio"},
        {"s": "Q1000", "sl": None, "p": "P161", "o": "Q38111", "ol": "Leonardo DiCaprio"},
        {"s": "Q44578", "sl": "Titanic", "p": "P161", "o": "Q38111", "ol": "Leonardo DiCaprio"},
        {"s": "Q110", "sl": "The Wolf of Wall Street", "p": "P161", "o": "Q38111"},
    ]
    got = neighbours_of("Q38111", "Leonardo DiCaprio", rel, facts, limit=10)
    assert [n.triple for n in got] == [
        "Titanic, cast member, Leonardo DiCaprio",
        "UnName_Entity, cast member, Leonardo DiCaprio",
        "The Wolf of Wall Street, cast member, Leonardo DiCaprio",
    ]
    assert [(n.source, n.qid, n.name) for n in got] == [
        ("Q38111", "Q44578", "Titanic"), ("Q38111", "Q1000", "UnName_Entity"),
        ("Q38111", "Q110", "The Wolf of Wall Street")]
    # the triple texts round-trip through the filter parser
    triples = [n.triple for n in got]
    out = "(Titanic, cast member, Leonardo DiCaprio)\n- The Wolf of Wall Street, cast member, Leonardo DiCaprio"
    assert parse_filtered_triples(out, triples) == [0, 2]


# ============================================================================================= tog metrics
@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("{Yes}. Based on the triplets ... the answer is {Kenyan shilling}.", "Kenyan shilling"),
        ("{Yes}. Based on the given knowledge triplets ... Therefore, the answer to the question is {De Smet}.",
         "De Smet"),
        ("{No}. Not enough, but I think it is { Baltimore Ravens }.", "Baltimore Ravens"),
        ("First, ... The answer is {Heroin}.", "Heroin"),
        ("The answer is {Georgia} or maybe {Russia}.", "Georgia"),  # first braces
        ("{Yes}.", "Yes"),  # a lone verdict is the first brace
        ("  Kenyan shilling \n", "Kenyan shilling"),  # no braces: the whole text
        ("", ""),
        (None, ""),
    ],
)
def test_tog_extract(response, expected):
    assert tog_extract(response) == expected


@pytest.mark.parametrize(
    ("answer", "gold", "expected"),
    [
        ("Kenyan shilling", "kenyan Shilling (KES)", True),  # gold contains answer
        ("De Smet", "DeSmet", True),  # spaces removed
        ("PARIS", "paris", True),
        ("Smet", "De Smet", True),
        ("De Smet, South Dakota", "De Smet", True),  # answer contains gold
        ("Paris", "London", False),
        ("Kenyan shilling", "Kenya", True),  # containment is loose on purpose (ToG's test)
        ("", "Paris", False),
        ("   ", "Paris", False),
        ("Paris", "", False),
        ("", "", False),
    ],
)
def test_tog_match(answer, gold, expected):
    assert tog_match(answer, gold) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Malia Obama, Sasha Obama", {"malia obama", "sasha obama"}),
        ("Malia and Sasha; Barack | Michelle", {"malia", "sasha", "barack", "michelle"}),
        ("The Beatles", {"beatles"}),
        ("Sandy Koufax and Andrew", {"sandy koufax", "andrew"}),  # "and" only as a word
        ("Malia Obama, malia obama.", {"malia obama"}),
        (", ;", set()),
        ("", set()),
        (None, set()),
    ],
)
def test_answer_set(text, expected):
    assert answer_set(text) == expected


# Six questions, hand-scored (ids a..f). Columns: response, gold answers, predicted anchors, gold topic
# entities, answer source.
TOG_ROWS = [
    ("a", "{Yes}. Based on the given knowledge triplets, Rift Valley Province is located in Kenya, which uses the "
          "Kenyan shilling. Therefore, the answer to the question is {Kenyan shilling}.",
     ["Kenyan shilling"], ["Q114"], ["Q114"], "retrieval"),
    ("b", "First, Barack Obama has two daughters. The answer is {Malia Obama}.",
     ["Malia Obama", "Sasha Obama"], ["Q76"], ["Q76", "Q13133"], "cot"),
    ("c", "Based on the triplets, the answer is Barack Obama.",
     ["Barack Obama"], [], None, None),
    ("d", "{Yes}. The answer is {}.",
     ["Heroin"], ["Q5"], ["Q42"], "retrieval"),
    ("e", "{Georgia}",
     None, ["Q230"], [], "cot"),
    ("f", "{Sasha Obama and Malia Obama}",
     ["Malia Obama", "Sasha Obama", "Barack Obama"], ["Q76"], ["Q76"], "retrieval"),
]
# Per item, by hand (reference rule = AnchorRAG eval_utils; "lenient" = tog.tog_extract / tog_match; "togeval" =
# ToG eval/eval.py, which always reads the first brace):
#   a: "Kenyan shilling" = gold -> hit 1, acc 1/1, em 1, f1 1; anchor Q114 in gold -> 1; retrieval.
#      togeval reads "{Yes}" -> 0.
#   b: "Malia Obama" matches 1 of 2 -> hit 1, acc 0.5, em 1; f1 {malia obama} vs {malia, sasha}: P=1, R=1/2
#      -> 2/3; anchor 1; cot.
#   c: no braces -> whole sentence; it contains "barackobama" -> hit 1, acc 1; em 0; answer set
#      {"based on triplets", "answer is barack obama"} shares nothing -> f1 0; no gold topic -> no anchor_acc;
#      no source -> no split metrics.
#   d: "{Yes}" then an empty "{}" -> "" is contained in every gold answer -> hit 1, acc 1 (both references);
#      lenient: "" never matches -> 0/0; togeval reads "{Yes}" -> 0; em 0, f1 0; anchor Q5 vs Q42 -> 0.
#   e: no gold answers -> no answer metrics; gold topics [] -> no anchor_acc; cot -> cot_rate 1 only.
#   f: "sashaobamaandmaliaobama" contains 2 of 3 golds -> hit 1, acc 2/3; em 0; f1 {sasha, malia} vs 3 golds:
#      P=1, R=2/3 -> 2*(2/3)/(5/3) = 0.8; anchor 1; retrieval.
EXPECTED_PER_ITEM = {
    "a": {"hit1_tog": 1.0, "acc_tog": 1.0, "em_strict": 1.0, "f1_set": 1.0, "anchor_acc": 1.0,
          "hit1_tog_retrieval": 1.0, "hit1_tog_cot": 0.0, "cot_rate": 0.0, "hit1_tog_answerable": 1.0,
          "acc_tog_answerable": 1.0, "hit1_tog_lenient": 1.0, "acc_tog_lenient": 1.0, "hit1_tog_togeval": 0.0},
    "b": {"hit1_tog": 1.0, "acc_tog": 0.5, "em_strict": 1.0, "f1_set": 2 / 3, "anchor_acc": 1.0,
          "hit1_tog_retrieval": 0.0, "hit1_tog_cot": 1.0, "cot_rate": 1.0, "hit1_tog_answerable": 1.0,
          "acc_tog_answerable": 0.5, "hit1_tog_lenient": 1.0, "acc_tog_lenient": 0.5, "hit1_tog_togeval": 1.0},
    "c": {"hit1_tog": 1.0, "acc_tog": 1.0, "em_strict": 0.0, "f1_set": 0.0, "hit1_tog_answerable": 1.0,
          "acc_tog_answerable": 1.0, "hit1_tog_lenient": 1.0, "acc_tog_lenient": 1.0, "hit1_tog_togeval": 1.0},
    "d": {"hit1_tog": 1.0, "acc_tog": 1.0, "em_strict": 0.0, "f1_set": 0.0, "anchor_acc": 0.0,
          "hit1_tog_retrieval": 1.0, "hit1_tog_cot": 0.0, "cot_rate": 0.0, "hit1_tog_answerable": 1.0,
          "acc_tog_answerable": 1.0, "hit1_tog_lenient": 0.0, "acc_tog_lenient": 0.0, "hit1_tog_togeval": 0.0},
    "e": {"cot_rate": 1.0},
    "f": {"hit1_tog": 1.0, "acc_tog": 2 / 3, "em_strict": 0.0, "f1_set": 0.8, "anchor_acc": 1.0,
          "hit1_tog_retrieval": 1.0, "hit1_tog_cot": 0.0, "cot_rate": 0.0, "hit1_tog_answerable": 1.0,
          "acc_tog_answerable": 2 / 3, "hit1_tog_lenient": 1.0, "acc_tog_lenient": 2 / 3, "hit1_tog_togeval": 1.0},
}
# Summary (value, n), by hand from the table above.
EXPECTED_SUMMARY = {
    "hit1_tog": (5 / 5, 5),  # a b c d f
    "acc_tog": ((1 + 0.5 + 1 + 1 + 2 / 3) / 5, 5),  # 25/30 = 0.8333...
    "hit1_tog_answerable": (5 / 5, 5),  # every scored question has a gold answer
    "acc_tog_answerable": (25 / 30, 5),
    "hit1_tog_lenient": (4 / 5, 5),  # a b c f of a b c d f
    "acc_tog_lenient": ((1 + 0.5 + 1 + 0 + 2 / 3) / 5, 5),  # 19/30 = 0.6333...
    "hit1_tog_togeval": (3 / 5, 5),  # b c f
    "em_strict": (2 / 5, 5),  # a b
    "f1_set": ((1 + 2 / 3 + 0 + 0 + 0.8) / 5, 5),  # 37/75 = 0.4933...
    "anchor_acc": (3 / 4, 4),  # a b d f scored; a b f hit
    "hit1_tog_retrieval": (3 / 4, 4),  # a b d f: a, d, f hit by retrieval
    "hit1_tog_cot": (1 / 4, 4),  # b hit by CoT
    "cot_rate": (2 / 5, 5),  # a b d e f have a source; b e are CoT
}


def _tog_columns():
    ids, resp, gold, pred, gold_e, src = (list(c) for c in zip(*TOG_ROWS, strict=True))
    return ids, resp, gold, pred, gold_e, src


def test_expected_summary_is_the_mean_of_expected_per_item():
    # guards the hand computation itself
    for metric, (value, n) in EXPECTED_SUMMARY.items():
        scores = [s[metric] for s in EXPECTED_PER_ITEM.values() if metric in s]
        assert (sum(scores) / len(scores), len(scores)) == (approx(value), n)
    assert EXPECTED_SUMMARY["acc_tog"][0] == approx(25 / 30)
    assert EXPECTED_SUMMARY["acc_tog_lenient"][0] == approx(19 / 30)
    assert EXPECTED_SUMMARY["f1_set"][0] == approx(37 / 75)


def test_tog_metrics_hand_computed():
    ids, resp, gold, pred, gold_e, src = _tog_columns()
    res = tog_metrics(resp, gold, pred, gold_e, src, ids)
    assert list(res) == list(TOG_METRICS)
    for metric, (value, n) in EXPECTED_SUMMARY.items():
        assert (res[metric].value, res[metric].n) == (approx(value), n), metric
        expected_items = {q: s[metric] for q, s in EXPECTED_PER_ITEM.items() if metric in s}
        assert res[metric].per_item == approx(expected_items), metric
    # the Fig. 3 split adds up to Hit@1 over the items with a logged source (a b d f)
    for q in ("a", "b", "d", "f"):
        assert (res["hit1_tog_retrieval"].per_item[q] + res["hit1_tog_cot"].per_item[q]
                == res["hit1_tog"].per_item[q])
    assert res["hit1_tog_retrieval"].value + res["hit1_tog_cot"].value == approx(4 / 4)


def test_tog_metrics_default_ids_and_empty_scoring():
    res = tog_metrics(["{Paris}", "{Rome}"], [["Paris"], ["", None]], [None, None], [None, ["Q1"]], [None, None])
    # positions as ids; the second question's gold list is [""] (None entries ignored): the references'
    # substring test finds "" in every answer -> a hit; the lenient rule drops blank aliases -> not scored
    assert res["hit1_tog"].per_item == {"0": 1.0, "1": 1.0}
    assert res["hit1_tog_lenient"].per_item == {"0": 1.0}
    assert res["anchor_acc"].per_item == {"1": 0.0}  # predicted anchors None -> no match
    for m in ("hit1_tog_retrieval", "hit1_tog_cot", "cot_rate"):
        assert (res[m].value, res[m].n) == (None, 0)
    res = tog_metrics([], [], [], [], [])
    assert all((r.value, r.n) == (None, 0) for r in res.values())


def test_tog_metrics_exact_comma_answer_scores_full_set_f1():
    # the CoT prompt's own example answer "{Washington, D.C.}" equals the gold answer exactly: em_strict is 1,
    # and a set F1 between identical answers must be 1 as well
    res = tog_metrics(["The answer is {Washington, D.C.}."], [["Washington, D.C."]], [[]], [None], [None])
    assert res["hit1_tog"].value == 1.0
    assert res["em_strict"].value == 1.0
    assert res["f1_set"].value == approx(1.0)


def test_tog_metrics_errors():
    with pytest.raises(MetricError, match="differ in length"):
        tog_metrics(["{a}", "{b}"], [["a"]], [None, None], [None, None], [None, None])
    with pytest.raises(MetricError, match="unknown answer source"):
        tog_metrics(["{a}"], [["a"]], [None], [None], ["kb"])
    with pytest.raises(MetricError):
        tog_metrics(["{a}", "{b}"], [["a"], ["b"]], [None, None], [None, None], [None, None], ids=["x", "x"])


# ================================================================================ registry / runs wiring
def _traj(*steps) -> str:
    return json.dumps(list(steps))


def _pred_rows() -> list[dict]:
    (ra, rb, rc, rd, re_, rf) = TOG_ROWS
    return [
        {"question_id": "a", "answer": ra[1], "predicted_entities": ra[3],
         "trajectory": _traj({"kind": "llm", "text": "..."}, {"kind": "note", "answered_by": "retrieval"})},
        # the last answered_by note wins
        {"question_id": "b", "answer": rb[1], "predicted_entities": json.dumps(rb[3]),
         "trajectory": _traj({"kind": "note", "answered_by": "retrieval"}, {"kind": "note", "answered_by": "cot"})},
        # no trajectory at all
        {"question_id": "c", "answer": rc[1], "predicted_entities": rc[3]},
        # an answered_by outside a note is not read
        {"question_id": "d", "answer": rd[1], "predicted_entities": rd[3],
         "trajectory": _traj({"kind": "tool", "answered_by": "cot"}, {"kind": "note", "answered_by": "retrieval"})},
        {"question_id": "e", "answer": re_[1], "predicted_entities": re_[3],
         "trajectory": _traj({"kind": "note", "keywords": ["Georgia"]}, {"kind": "note", "answered_by": "cot"})},
        {"question_id": "f", "answer": rf[1], "predicted_entities": rf[3],
         "trajectory": _traj({"kind": "note", "answered_by": "retrieval"})},
    ]


def _question_rows() -> list[dict]:
    return [{"question_id": r[0], "question": f"question {r[0]}", "gold_answers": r[2], "gold_entities": r[4]}
            for r in reversed(TOG_ROWS)] + [{"question_id": "zz", "gold_answers": ["unused"]}]


def test_task_family_of_open_kgqa_is_tog():
    assert TASK_FAMILIES["kgqa-open"] == "tog"
    assert list(runs.FAMILIES["tog"].metrics) == list(TOG_METRICS)


def test_answer_source_from_trajectory():
    rows = _pred_rows()
    assert [runs.answer_source(r.get("trajectory")) for r in rows] == ["retrieval", "cot", None, "retrieval",
                                                                       "cot", "retrieval"]
    assert runs.answer_source(None) is None
    assert runs.answer_source("[]") is None


def test_summary_metrics_tog_family():
    summary = runs.summary_metrics("tog", _pred_rows(), _question_rows())
    assert [r["metric"] for r in summary] == list(TOG_METRICS)  # no flag sums: no scores in the rows
    got = {r["metric"]: (r["value"], r["n"]) for r in summary}
    for metric, (value, n) in EXPECTED_SUMMARY.items():
        assert got[metric] == (approx(value), n), metric


def test_per_item_scores_tog_family():
    per_item = runs.per_item_scores("tog", _pred_rows(), _question_rows())
    assert set(per_item) == set(EXPECTED_PER_ITEM)
    for q, scores in EXPECTED_PER_ITEM.items():
        assert per_item[q] == approx(scores), q


def test_registry_join_carries_answer_source():
    preds = [{**p, "answer_source": runs.answer_source(p.get("trajectory"))} for p in _pred_rows()]
    items = join_items(preds, _question_rows())
    assert [it.answer_source for it in items] == ["retrieval", "cot", None, "retrieval", "cot", "retrieval"]
    assert items[1] == EvalItem(question_id="b", predicted_entities=["Q76"], answer=TOG_ROWS[1][1],
                                gold_entities=["Q76", "Q13133"], gold_answers=["Malia Obama", "Sasha Obama"],
                                answer_source="cot")
    # any single tog metric name computes through the family
    res = compute_results(["cot_rate", "hit1_tog"], preds, _question_rows())
    assert list(res) == ["cot_rate", "hit1_tog"]
    assert (res["cot_rate"].value, res["cot_rate"].n) == (approx(0.4), 5)
    assert (res["hit1_tog"].value, res["hit1_tog"].n) == (approx(1.0), 5)


def test_runs_unknown_answer_source_raises():
    preds = _pred_rows()
    preds[0] = {**preds[0], "trajectory": _traj({"kind": "note", "answered_by": "kb_lookup"})}
    with pytest.raises(MetricError, match="unknown answer source"):
        runs.summary_metrics("tog", preds, _question_rows())
