"""Differential tests: linkedqa's ToG/AnchorRAG Hit@1 and QALD P/R/F1 against the reference scripts' rules.

Each reference rule is re-derived here, from the reference code, in an implementation of its own (no code of
``tasks.metrics`` is used on the reference side), and run against linkedqa's implementation on seeded random
cases (adversarial ones included), asserting zero disagreement:

* AnchorRAG (the paper's own evaluation; default ``hit1_tog``/``acc_tog``): Jayson3831/AnchorRAG,
  ``freebase_qa/eval.py`` (``eval_em``) and ``freebase_qa/utils/eval_utils.py`` (``clean_results``,
  ``exact_match``, ``eval_hit``, ``eval_acc``, ``align``), commit 2904493d974d73587e9b953bd32eaa35d24767da.
* ToG (``hit1_tog_togeval``): IDEA-FinAI/ToG, ``eval/eval.py`` and ``eval/utils.py`` (``clean_results``,
  ``exact_match``, ``align``), commit 7ccbb92e17579f934bb778386230de47eca0ab67.
* GERBIL QA (``qald_*``): dice-group/gerbil, branch ``QuestionAnswering``, commit
  794c41a14d73ba554ae28a397d415db0d68ae67b, ``src/main/java/org/aksw/gerbil/evaluate/impl/FMeasureCalculator.java``,
  ``src/main/java/org/aksw/gerbil/matching/impl/QAMatchingsCounter.java``,
  ``src/main/java/org/aksw/gerbil/qa/QAUtils.java``. GERBIL sees every answer as a string: a Wikidata entity as its
  IRI, a literal as itself (so a literal spelled like an id, ``"L1"``, is a string without ``:``).

How the two ToG-family references differ (both score every question, a question without gold answers being a
miss, and both use the same ``exact_match``): AnchorRAG reads the first ``{...}`` regex match, or the second
when the first is exactly ``Yes``; ToG's ``eval.py`` reads ``s[s.find("{") + 1 : s.find("}")]`` (always the
first brace, so a ``{Yes}. ... {X}`` verdict scores ``yes``; quirks with an unclosed or reversed brace) and
counts a ``{NULL}`` answer as neither right nor wrong. AnchorRAG's rule is linkedqa's default (``hit1_tog``);
ToG's is ``hit1_tog_togeval``.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import re

import pytest
from pytest import approx

from tasks.metrics import registry, tog
from tasks.metrics.qald import QALD_METRICS, entity_iri, qald_metrics, qald_prf

N_CASES = 2000
SEED = 16

# =========================================================================================== ToG family
ANSWER_WORDS = [
    "Germany", "germany", "GERMANY", "Federal Republic of Germany", "Washington, D.C.", "Washington D.C.",
    "The Beatles", "Beatles", "the beatles", "Café de Flore", "Cafe de Flore", "José Martí", "Jose Marti",
    "  Paris ", "Paris", "Par is", "İstanbul", "istanbul", "Straße", "STRASSE", "1,000", "1000", "1 000",
    "true", "True", "False", "yes", "Yes", "No", "1990-01-01", "January 1, 1990", "1990", "Jamaican English",
    "English", "Kenyan shilling", "kenyan Shilling (KES)", "", " ", "NULL", "Malia Obama", "Sasha Obama",
    "Obama", "a", "e", "Ç", "\u00a0Rome", "Rome\t", "Q42", "3.14", "-7", "{x}", "United\nStates",
]
VERDICTS = ["Yes", "yes", " Yes ", "YES", "No", "no", "Yes.", "NULL", ""]


def _gen_response(rng: random.Random) -> str:
    w = rng.choice(ANSWER_WORDS)
    w2 = rng.choice(ANSWER_WORDS)
    v = rng.choice(VERDICTS)
    forms = [
        f"{{{v}}}. Based on the given knowledge triplets, the answer is {{{w}}}.",
        f"{{{v}}}. The answer is {{{w}}} and also {{{w2}}}.",
        f"{{{v}}}. No answer given.",
        f"The answer is {{{w}}}.",
        f"{{{w}}}",
        f"The answer is {w}.",
        w,
        "{}",
        f"{{{v}}}. The answer is {{}}.",
        f"}} oops {{{w}}}",
        f"unclosed {{{w}",
        f"{{{w}\n}} then {{{w2}}}",
        f"{{{w}}}{{{w2}}}",
        f"  {{ {w} }}  ",
        "",
        f"{{{w}{{{w2}}}",
        f"\t{w}\n",
    ]
    return rng.choice(forms)


def _gen_golds(rng: random.Random) -> list[str]:
    k = rng.choice([0, 0, 1, 1, 1, 2, 3, 4])
    golds = [rng.choice(ANSWER_WORDS) for _ in range(k)]
    if golds and rng.random() < 0.2:
        golds.append(rng.choice(golds))  # duplicates
    return golds


# --- reference: AnchorRAG freebase_qa/eval.py + utils/eval_utils.py (own re-derivation) ---------------
def _ar_brace_matches(s: str) -> list[str]:
    """All matches of ``re.findall(r"\\{(.*?)\\}", s)``, scanned by hand: from each ``{`` the shortest run up
    to a ``}`` without a line break (``.`` does not match ``\\n``); the scan resumes after the match."""
    out, i = [], 0
    while i < len(s):
        if s[i] != "{":
            i += 1
            continue
        j = i + 1
        while j < len(s) and s[j] not in "}\n":
            j += 1
        if j < len(s) and s[j] == "}":
            out.append(s[i + 1:j])
            i = j + 1
        else:
            i += 1
    return out


def _ar_clean_results(string: str) -> str:
    matches = _ar_brace_matches(string)
    if not matches:
        return string
    if matches[0] == "Yes":
        return matches[1] if len(matches) > 1 else string
    return matches[0]


def _squash_ref(x: str) -> str:
    return "".join(x.strip().split(" ")).lower()


def _ref_exact_match(response: str, answer: str) -> bool:
    r, a = _squash_ref(response), _squash_ref(answer)
    return r == a or r in a or a in r


def anchorrag_eval(outputs: list[tuple[str, list[str]]]) -> tuple[list[int], list[float], float, float]:
    """``eval_em``: per-question hit and acc, and the Hit / Accuracy the script prints (as fractions)."""
    hits, accs = [], []
    for results, gold in outputs:
        answers = list(set(gold))  # align() returns list(set(answer_list))
        response = _ar_clean_results(results) if "{" in results else results
        # (the constraints_refuse branch re-tests "{" on a string without "{": never taken)
        hits.append(1 if any(_ref_exact_match(response, a) for a in answers) else 0)
        accs.append(0 if not answers else sum(_ref_exact_match(response, a) for a in answers) / len(answers))
    return hits, accs, sum(hits) / len(hits), sum(accs) / len(accs)


# --- reference: ToG eval/eval.py + eval/utils.py (own re-derivation) --------------------------------
def tog_eval(outputs: list[tuple[str, list[str]]]) -> tuple[list[int], float]:
    """ToG ``eval.py``: per-question right (1) / error-or-skipped (0) and ``num_right / len(output_datas)``."""
    right = []
    for results, gold in outputs:
        answers = list(set(gold))
        if "{" in results:
            open_at = results.index("{")
            close_at = results.find("}")  # -1 when absent: the slice then stops before the last character
            stop = close_at if close_at >= 0 else len(results) - 1
            response = results[open_at + 1:stop] if stop > open_at + 1 else ""
            if response == "NULL":
                right.append(0)  # neither num_right nor num_error, still in the denominator
                continue
        else:
            response = results
        right.append(1 if any(_ref_exact_match(response, a) for a in answers) else 0)
    return right, sum(right) / len(right)


def _tog_cases(seed: int) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    return [(_gen_response(rng), _gen_golds(rng)) for _ in range(N_CASES)]


def _linkedqa_tog(cases):
    n = len(cases)
    return tog.tog_metrics([c[0] for c in cases], [c[1] for c in cases], [None] * n, [None] * n, [None] * n)


def test_hit1_tog_reproduces_anchorrag_eval_on_random_cases() -> None:
    cases = _tog_cases(SEED)
    hits, accs, hit, acc = anchorrag_eval(cases)
    res = _linkedqa_tog(cases)
    got_hits = [res["hit1_tog"].per_item[str(i)] for i in range(len(cases))]
    got_accs = [res["acc_tog"].per_item[str(i)] for i in range(len(cases))]
    bad = [(cases[i], hits[i], got_hits[i]) for i in range(len(cases)) if hits[i] != got_hits[i]]
    assert not bad, bad[:5]
    bad = [(cases[i], accs[i], got_accs[i]) for i in range(len(cases)) if accs[i] != approx(got_accs[i])]
    assert not bad, bad[:5]
    assert (res["hit1_tog"].value, res["hit1_tog"].n) == (approx(hit), len(cases))
    assert res["acc_tog"].value == approx(acc)
    # the cases exercise the rules that matter: unanswerable questions, hits and misses, "Yes" verdicts
    assert 0 < sum(hits) < len(hits) and any(not g for _, g in cases)
    assert sum(1 for r, _ in cases if r.startswith("{Yes}")) > 50


def test_hit1_tog_togeval_reproduces_tog_eval_on_random_cases() -> None:
    cases = _tog_cases(SEED + 1)
    right, exact_match = tog_eval(cases)
    res = _linkedqa_tog(cases)
    got = [res["hit1_tog_togeval"].per_item[str(i)] for i in range(len(cases))]
    bad = [(cases[i], right[i], got[i]) for i in range(len(cases)) if right[i] != got[i]]
    assert not bad, bad[:5]
    assert (res["hit1_tog_togeval"].value, res["hit1_tog_togeval"].n) == (approx(exact_match), len(cases))
    # where the references differ: a "{Yes}. ... {X}" verdict
    cases = [("{Yes}. The answer is {Germany}.", ["Germany"])]
    assert anchorrag_eval(cases)[0] == [1] and tog_eval(cases)[0] == [0]


def test_answerable_and_lenient_extras_on_random_cases() -> None:
    cases = _tog_cases(SEED + 2)
    hits, _accs, _, _ = anchorrag_eval(cases)
    res = _linkedqa_tog(cases)
    answerable = {str(i): float(hits[i]) for i, (_, g) in enumerate(cases) if g}
    assert res["hit1_tog_answerable"].per_item == answerable
    # the lenient rule scores questions with a non-blank gold answer and never matches an empty answer
    lenient_items = {str(i) for i, (_, g) in enumerate(cases) if any(x.strip() for x in g)}
    assert set(res["hit1_tog_lenient"].per_item) == lenient_items
    for i, (r, _g) in enumerate(cases):
        if str(i) in lenient_items and not tog.tog_extract(r).strip():
            assert res["hit1_tog_lenient"].per_item[str(i)] == 0.0


def test_tog_issue_reproducers_exact() -> None:
    # a question without gold answers is a miss in the denominator (both references)
    res = tog.tog_metrics(["{Germany}"] * 2, [["Germany"], []], [None] * 2, [None] * 2, [None] * 2)
    assert (res["hit1_tog"].value, res["hit1_tog"].n) == (0.5, 2)
    assert (res["acc_tog"].value, res["acc_tog"].n) == (0.5, 2)
    assert (res["hit1_tog_togeval"].value, res["hit1_tog_togeval"].n) == (0.5, 2)
    assert (res["hit1_tog_answerable"].value, res["hit1_tog_answerable"].n) == (1.0, 1)
    assert (res["hit1_tog_lenient"].value, res["hit1_tog_lenient"].n) == (1.0, 1)
    # verdict braces: only an exact "{Yes}" gives the second brace (AnchorRAG clean_results)
    assert tog.anchorrag_extract("{No}. {Germany}") == "No"
    assert tog.anchorrag_extract("{yes}. {Germany}") == "yes"
    assert tog.anchorrag_extract("{ Yes }. {Germany}") == " Yes "
    assert tog.anchorrag_extract("{Yes}. {Germany}") == "Germany"
    assert tog.anchorrag_extract("{Yes}. nothing else") == "{Yes}. nothing else"
    assert tog.tog_extract("{No}. {Germany}") == "Germany"  # the lenient (old) extraction
    # blank gold aliases: "" is contained in every answer (both references)
    res = tog.tog_metrics(["{Paris}"], [["", "Rome"]], [None], [None], [None])
    assert (res["hit1_tog"].value, res["acc_tog"].value) == (1.0, 0.5)
    assert (res["hit1_tog_lenient"].value, res["acc_tog_lenient"].value) == (0.0, 0.0)
    # duplicated gold strings count once in acc (align returns list(set(...)))
    res = tog.tog_metrics(["{Paris}"], [["Paris", "Paris", "Rome"]], [None], [None], [None])
    assert res["acc_tog"].value == 0.5 and res["acc_tog_lenient"].value == approx(2 / 3)


def test_tog_no_response_and_errors_are_misses() -> None:
    # None (no output) is a miss, although "" would match every gold answer under the reference rule
    res = tog.tog_metrics([None, ""], [["Paris"], ["Paris"]], [None] * 2, [None] * 2, [None] * 2)
    assert res["hit1_tog"].per_item == {"0": 0.0, "1": 1.0}
    preds = [{"question_id": "a", "answer": "", "error": "TimeoutError: ..."},
             {"question_id": "b", "answer": "{Paris}", "error": None}]
    qs = [{"question_id": "a", "gold_answers": ["Paris"]}, {"question_id": "b", "gold_answers": ["Paris"]},
          {"question_id": "c", "gold_answers": None}]
    per_item, summary = registry.compute(["hit1_tog", "hit1_tog_togeval"], preds, qs)
    assert per_item == {"a": {"hit1_tog": 0.0, "hit1_tog_togeval": 0.0},
                        "b": {"hit1_tog": 1.0, "hit1_tog_togeval": 1.0}}
    assert summary[0] == {"metric": "hit1_tog", "value": 0.5, "n": 2}
    # gold None = not annotated: not scored; None entries of a gold list are ignored
    res = tog.tog_metrics(["{Paris}", "{Paris}"], [None, [None, "Paris"]], [None] * 2, [None] * 2, [None] * 2)
    assert res["hit1_tog"].per_item == {"1": 1.0}


# --- the ToG-format datasets' gold, as the references read the files -----------------------------------
def _reference_golds(name: str, records: list[dict]) -> dict[str, list[str]]:
    """question id -> the gold list ``align`` returns (own re-derivation; ``list(set(...))`` keeps raw strings)."""
    out = {}
    for i, rec in enumerate(records):
        if name == "webquestions":
            key, answers = str(i), rec["answers"]
        elif name == "cwq":
            key, answers = rec["ID"], [rec["answer"]]
        elif name == "grailqa":
            key = str(rec["qid"])
            answers = [a["entity_name"] if "entity_name" in a else a["answer_argument"] for a in rec["answer"]]
        else:  # webqsp, a record with Parses
            key = rec["QuestionId"]
            answers = [a["AnswerArgument"] if a["EntityName"] is None else a["EntityName"]
                       for parse in rec["Parses"] for a in parse["Answers"]]
        out[key] = list(set(answers))
    return out


@pytest.mark.parametrize(("name", "blank"), [("webquestions", 17), ("cwq", 0), ("grailqa", 0), ("webqsp", 0)])
def test_tog_datasets_gold_scores_as_the_references_score_it(name: str, blank: int, data_root) -> None:
    """The loaders' stored gold, scored by linkedqa, against each reference reading the dataset file itself.

    Gold reading (``align``), read in Jayson3831/AnchorRAG ``freebase_qa/utils/eval_utils.py`` at commit
    2caa1930f14961363b9f65baae6b24ce8c61d462 and IDEA-FinAI/ToG ``eval/utils.py`` at commit
    d31dd39ab747281928a440177629faeb0df6a6b4 (the same branches in both for these files): WebQuestions
    ``answers``; GrailQA ``entity_name`` when the key is present, else ``answer_argument``; WebQSP each parse's
    ``EntityName``, ``AnswerArgument`` when it is None (the files here have Parses for the 100-question sample
    only); CWQ ``[answer]`` (AnchorRAG; ToG's CWQ branch reads another file layout). Both return
    ``list(set(answers))``: a blank alias is kept and, by the match rules re-derived above (AnchorRAG commit
    2904493d974d73587e9b953bd32eaa35d24767da, ToG commit 7ccbb92e17579f934bb778386230de47eca0ab67), matches every
    response.
    """
    from tasks.datasets import tog_kgqa
    from tasks.datasets.registry import load_dataset

    files = {"webquestions": tog_kgqa.WEBQUESTIONS_FILE, "cwq": tog_kgqa.CWQ_FILE, "grailqa": tog_kgqa.GRAILQA_FILE,
             "webqsp": tog_kgqa.WEBQSP_SAMPLE_FILE}
    path = data_root / files[name]
    raw = path.read_bytes()
    records = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    golds = _reference_golds(name, records)
    rows = {r["question_id"]: r for r in load_dataset(name, data_root).questions["test"] if r["question_id"] in golds}
    assert len(rows) == len(golds)
    rng = random.Random(f"{SEED}:{name}")
    ids, cases = sorted(golds), []
    for qid in ids:
        named = [g for g in golds[qid] if g.strip()] or ["nothing"]
        cases.append((rng.choice([f"{{{rng.choice(named)}}}", f"{{Yes}}. The answer is {{{rng.choice(named)}}}.",
                                  f"{{{rng.choice(ANSWER_WORDS)}}}", "{}", "I do not know."]), golds[qid]))
    hits, accs, _, _ = anchorrag_eval(cases)
    right, _ = tog_eval(cases)
    preds = [{"question_id": qid, "answer": response, "error": None}
             for qid, (response, _) in zip(ids, cases, strict=True)]
    per_item, _ = registry.compute(["hit1_tog", "acc_tog", "hit1_tog_togeval"], preds, list(rows.values()))
    got = [per_item[qid] for qid in ids]
    bad = [(ids[i], cases[i], got[i]) for i in range(len(ids))
           if (got[i]["hit1_tog"], got[i]["hit1_tog_togeval"]) != (hits[i], right[i])
           or got[i]["acc_tog"] != approx(accs[i])]
    assert not bad, bad[:5]
    with_blank = [i for i, qid in enumerate(ids) if any(not g.strip() for g in golds[qid])]
    assert len(with_blank) == blank
    assert all(hits[i] == 1 and right[i] == 1 for i in with_blank)  # whatever the response
    if blank:  # some of them only through the blank alias
        assert any(not any(_ref_exact_match(_ar_clean_results(cases[i][0]), g) for g in golds[ids[i]] if g.strip())
                   for i in with_blank)


# ========================================================================================== QALD family
WD = "http://www.wikidata.org/entity/"
# Literals a QALD system or gold file may hold. Each is written as linkedqa stores it after canonicalisation
# (checked below: canonical_answer leaves it unchanged), so the GERBIL side gets the same string.
LITERALS = [
    "5", "05", "1,000", "1000", "1 000", "3.14", "-7", "true", "false", "1990-01-01", "1990-01-01T10:00:00Z",
    "Paris", "paris", "Café", "Cafe", "José Martí", "Jose Marti", "İstanbul", "Straße", "Washington, D.C.",
    "the Beatles", "The Beatles", "New  York", "a b", "", "Q42 and Q5", "10:30", "ratio 3:1", "Note: x",
    # literals spelled like Wikidata ids (a string answer, a lexeme's or property's id typed as text)
    "Q5", "Q42", "P31", "L1", "L30607", "P0767793405",
]
ID_LIKE = ["Q5", "Q42", "P31", "L1", "L30607", "P0767793405"]
# Literals containing ":" and GERBIL's verdict on each (QAUtils.transformToAnnotations: IRI_PATTERN
# "[^\\s]+:[^\\s]+" found, then java.net.URI.create succeeds), worked out by hand from java.net.URI's grammar.
URI_LIKE = {
    "http://example.org/x": True,
    "https://de.wikipedia.org/wiki/Köln": True,  # visible non-ASCII characters are allowed ("other")
    "mailto:someone@example.org": True,  # opaque URI
    "urn:isbn:0451450523": True,
    "a:b": True,
    "x/y:z": True,  # no scheme (a "/" comes first): a relative path, where ":" is legal
    "10:30": False,  # "10" is not a scheme name (must start with a letter)
    "1990-01-01T10:00:00Z": False,  # same: "1990-01-01T10" starts with a digit
    "http://example.org/a b": False,  # a space
    "ftp://x/%zz": False,  # malformed escape
    "ratio 3:1": False,  # IRI_PATTERN matches "3:1" but the whole string has a space
    "Note: x": False,  # no non-space character right after ":"... and a space
    "http://example.org/{x}": False,  # "{" is illegal in a path
    "urn:a b": False,
}
LITERALS += [u for u in URI_LIKE if u not in LITERALS]
QIDS = ["Q1", "Q5", "Q42", "Q90", "Q183", "Q64"]
OTHER_ENTITIES = ["P31", "L1", "L30607"]  # a property and lexemes, given as IRIs


def _gerbil_is_iri(s: str) -> bool:
    """The reference's IRI test on a GERBIL-side string (entities are Wikidata IRIs)."""
    if s.startswith(WD) and s[len(WD):] in QIDS + OTHER_ENTITIES:
        return True
    if ":" not in s:
        return False  # IRI_PATTERN needs a ":"
    assert s in URI_LIKE, f"add {s!r} to URI_LIKE"
    return URI_LIKE[s]


def _gen_answers(rng: random.Random, *, gold: bool) -> tuple[list, set[str]]:
    """(linkedqa values, GERBIL strings) for one answer set.

    linkedqa gets an entity as a Wikidata IRI in one of its spellings, or as a bare id declared an entity with
    ``entity_iri``; a literal as itself, id-like ones included.
    """
    k = rng.choice([0, 0, 1, 1, 1, 2, 2, 3, 4])
    kind = rng.random()
    values, strings = [], set()
    for _ in range(k):
        if kind < 0.4 or (kind < 0.7 and rng.random() < 0.5):
            q = rng.choice(QIDS + OTHER_ENTITIES)
            values.append(rng.choice([entity_iri(q), WD + q, f"<{WD}{q}>", f"https://www.wikidata.org/wiki/{q}"]))
            strings.add(WD + q)
        else:
            lit = rng.choice(LITERALS + ID_LIKE)  # id-like literals drawn more often
            values.append(lit)
            strings.add(lit)
    if gold and rng.random() < 0.05:
        values.append(None)  # a null gold value: GERBIL counts it as ""
        strings.add("")
    if values and rng.random() < 0.15:
        values.append(values[0])  # duplicates
    return values, strings


# --- reference: GERBIL QA QAMatchingsCounter + FMeasureCalculator (own re-derivation) -----------------
def gerbil_counts(annotator: set[str], gold: set[str]) -> tuple[int, int, int]:
    """``countMatchings`` with no literal-to-resource converter registered (Literal2ResourceManager then
    returns the literal itself, so every forced annotation is one annotation of the same string)."""
    # translateQuestion: an answer set is an annotation set iff transformToAnnotations accepts every value
    gold_ann = all(_gerbil_is_iri(g) for g in gold)
    ann_ann = all(_gerbil_is_iri(a) for a in annotator)
    gs_annotations = set(gold) if gold_ann else set()
    gs_strings = set() if gold_ann else set(gold)
    ar_annotations = list(annotator) if ann_ann else []
    ar_strings = set() if ann_ann else set(annotator)
    # string comparison first; its false positives are zeroed and re-examined as annotations
    string_tp = len(ar_strings & gs_strings)
    string_fn = len(gs_strings) - string_tp
    ar_annotations += sorted(ar_strings - gs_strings)  # forceAnnotationCreation
    # meaning matching (EqualsBasedMatchingsSearcher): each system annotation takes one equal gold annotation
    taken: set[str] = set()
    ann_tp = ann_fp = 0
    for a in ar_annotations:
        if a in gs_annotations and a not in taken:
            taken.add(a)
            ann_tp += 1
        else:
            ann_fp += 1
    ann_fn = len(gs_annotations) - len(taken)
    return string_tp + ann_tp, ann_fp, ann_fn + string_fn


def gerbil_measures(tp: int, fp: int, fn: int, qald: bool) -> tuple[float, float, float]:
    """``calculateMeasuresQALD`` (qald=True) / ``calculateMeasures`` (qald=False)."""
    if tp == 0:
        if fp == 0 and fn == 0:
            return 1.0, 1.0, 1.0
        if qald and fp == 0:
            return 1.0, 0.0, 0.0  # "Annotator has no answer"
        return 0.0, 0.0, 0.0
    p = tp / (tp + fp)
    r = tp / (tp + fn)
    return p, r, 2 * p * r / (p + r)


def gerbil_macro(questions: list[tuple[set[str], set[str]]]) -> dict[str, float]:
    """``calculateMacroFMeasure`` + ``calculateF1QALD`` over one experiment."""
    n = len(questions)
    plain = [gerbil_measures(*gerbil_counts(a, g), qald=False) for a, g in questions]
    qald = [gerbil_measures(*gerbil_counts(a, g), qald=True) for a, g in questions]
    mp, mr = sum(m[0] for m in qald) / n, sum(m[1] for m in qald) / n
    f1_qald = (2 * mp * mr) / (mp + mr) if mp + mr else math.nan
    return {
        "Macro Precision": sum(m[0] for m in plain) / n,
        "Macro Recall": sum(m[1] for m in plain) / n,
        "Macro F1 score": sum(m[2] for m in plain) / n,
        "Macro F1 QALD": f1_qald,
        "_qald_p": mp,
        "_qald_r": mr,
    }


def _qald_cases(seed: int) -> list[tuple[list, set[str], list, set[str]]]:
    rng = random.Random(seed)
    return [(*_gen_answers(rng, gold=False), *_gen_answers(rng, gold=True)) for _ in range(N_CASES)]


def test_literal_vocabulary_is_canonical() -> None:
    from tasks.metrics.qald import canonical_answer
    for lit in LITERALS:
        assert canonical_answer(lit) == lit, lit


def test_qald_prf_reproduces_gerbil_on_random_cases() -> None:
    cases = _qald_cases(SEED)
    bad = []
    for pv, ps, gv, gs in cases:
        ref = gerbil_measures(*gerbil_counts(ps, gs), qald=True)
        got = qald_prf(pv, gv)
        if got != approx(ref):
            bad.append((pv, gv, ref, got))
    assert not bad, bad[:5]
    # the cases reach every branch of calculateMeasuresQALD and the IRI-vs-string split
    kinds = {gerbil_measures(*gerbil_counts(ps, gs), qald=True)[:2] for _, ps, _, gs in cases}
    assert {(1.0, 1.0), (1.0, 0.0), (0.0, 0.0)} <= kinds
    split = [c for c in cases if c[1] and all(map(_gerbil_is_iri, c[1])) and not all(map(_gerbil_is_iri, c[3]))]
    assert len(split) > 20
    # ... and literals spelled like ids, matched as strings
    id_hits = [c for c in cases if set(ID_LIKE) & c[1] & c[3]]
    assert len(id_hits) >= 5 and any(gerbil_counts(c[1], c[3])[0] for c in id_hits)


def test_qald_macro_metrics_reproduce_gerbil_on_random_experiments() -> None:
    cases = _qald_cases(SEED + 1)
    for start in range(0, len(cases), 40):  # 50 experiments of 40 questions
        chunk = cases[start:start + 40]
        ref = gerbil_macro([(ps, gs) for _, ps, _, gs in chunk])
        res = qald_metrics([c[0] for c in chunk], [c[2] for c in chunk])
        assert res["qald_macro_precision_gerbil"].value == approx(ref["Macro Precision"])
        assert res["qald_macro_recall"].value == approx(ref["Macro Recall"])
        assert res["qald_macro_recall"].value == approx(ref["_qald_r"])  # recall: the same under both rules
        assert res["qald_macro_f1_mean"].value == approx(ref["Macro F1 score"])
        assert res["qald_macro_precision_qald"].value == approx(ref["_qald_p"])
        expected_f1 = 0.0 if math.isnan(ref["Macro F1 QALD"]) else ref["Macro F1 QALD"]  # GERBIL: NaN
        assert res["qald_macro_f1_gerbil"].value == approx(expected_f1)


def test_qald_registry_typing_reproduces_gerbil_on_random_rows() -> None:
    """Stored rows typed as GERBIL sees a QALD system's and the gold file's answers (GERBIL QA, dice-group/gerbil,
    branch QuestionAnswering, commit 794c41a14d73ba554ae28a397d415db0d68ae67b, ``qa/QAUtils.java``
    ``transformToAnnotations``: an answer is an IRI only when it has a ``:`` and parses as a URI).

    Gold: ``gold_answer_qids`` are entities (``uri`` bindings, GERBIL: their IRIs); ``meta.gold_literals`` are
    literals (``literal`` bindings, GERBIL: the strings themselves, ``"Q5"`` and ``"L1"`` included) except a
    Wikidata IRI, which the loaders keep for a lexeme or property ``uri`` binding. Prediction ``answers``: a bare
    QID is an entity (linkedqa's methods write entity answers as QIDs), any other value a literal.
    """
    rng = random.Random(SEED + 3)
    pred_literals = [lit for lit in LITERALS if not re.fullmatch(r"Q\d+", lit)]
    preds, questions, ref = [], [], []
    for i in range(N_CASES):
        qids = rng.sample(QIDS, rng.choice([0, 0, 1, 2]))
        literals = rng.sample(LITERALS + ID_LIKE, rng.choice([0, 0, 1, 1, 2]))
        if rng.random() < 0.1:
            literals.append(WD + rng.choice(OTHER_ENTITIES))
        answer_qids = rng.sample(QIDS, rng.choice([0, 1, 1, 2]))
        answer_literals = rng.sample(pred_literals + ["P31", "L1", "L30607"], rng.choice([0, 0, 1, 2]))
        answers = answer_qids + answer_literals
        rng.shuffle(answers)
        qid = f"q{i}"
        questions.append({"question_id": qid, "gold_answer_qids": qids, "gold_answers": ["a label"],
                          "meta": json.dumps({"gold_literals": literals})})
        preds.append({"question_id": qid, "answers": answers})
        ref.append(({WD + q for q in answer_qids} | set(answer_literals), {WD + q for q in qids} | set(literals)))
    per_item, summary = registry.compute(list(QALD_METRICS), preds, questions)
    expected = [gerbil_measures(*gerbil_counts(*r), qald=False)[2] for r in ref]
    bad = [(preds[i], questions[i], ref[i]) for i in range(N_CASES)
           if per_item[f"q{i}"]["qald_macro_f1_mean"] != approx(expected[i])]
    assert not bad, bad[:5]
    macro = gerbil_macro(ref)
    values = {r["metric"]: r["value"] for r in summary}
    assert values["qald_macro_f1_mean"] == approx(macro["Macro F1 score"])
    assert values["qald_macro_precision_gerbil"] == approx(macro["Macro Precision"])
    assert values["qald_macro_recall"] == approx(macro["Macro Recall"])
    assert values["qald_macro_f1_gerbil"] == approx(macro["Macro F1 QALD"])
    # the cases hold gold literals spelled like QIDs, and answers that are the same QID as an entity
    clash = [i for i, (a, g) in enumerate(ref) if any(WD + x in a and x in g for x in ("Q5", "Q42"))]
    assert len(clash) > 10


def test_qald_issue_reproducers_exact() -> None:
    # gold = gold QIDs ∪ literal gold answers (GERBIL: every value of the gold bindings)
    per_item, summary = registry.compute(
        ["qald_macro_f1_mean"], [{"question_id": "x", "answers": ["Q1", "5"]}],
        [{"question_id": "x", "gold_answer_qids": ["Q1"], "gold_answers": ["5"]}])
    assert summary == [{"metric": "qald_macro_f1_mean", "value": 1.0, "n": 1}]
    # the loaders' layout: meta.gold_literals holds the literals; gold_answers adds the entities' labels
    q = {"question_id": "x", "gold_answer_qids": ["Q1"], "gold_answers": ["5", "Berlin", "Berlin city"],
         "meta": json.dumps({"gold_literals": ["5"], "answer_labels": {"Q1": ["Berlin"]}})}
    _, summary = registry.compute(["qald_macro_f1_mean"], [{"question_id": "x", "answers": ["Q1", "5"]}], [q])
    assert summary[0]["value"] == 1.0
    # GERBIL's typing: IRI answers are never matched against a gold set that mixes IRIs and literals
    _, summary = registry.compute(["qald_macro_f1_mean", "qald_macro_recall"],
                                  [{"question_id": "x", "answers": ["Q1"]}], [q])
    assert [r["value"] for r in summary] == [0.0, 0.0]
    assert qald_prf(["Q1", "6"], ["Q1", "5"]) == approx((0.5, 0.5, 0.5))
    # a literal spelled like an id is a literal (GERBIL: a string without ":"); an entity only when given as one
    res = qald_metrics([["L1"]], [["L1", "5"]])
    assert res["qald_macro_f1_mean"].value == approx(2 / 3)
    assert gerbil_macro([({"L1"}, {"L1", "5"})])["Macro F1 score"] == approx(2 / 3)
    assert qald_metrics([[WD + "L1"]], [[WD + "L1", "5"]])["qald_macro_f1_mean"].value == 0.0  # entity vs strings
    row = {"question_id": "x", "gold_answer_qids": [], "gold_answers": ["Q5", "5"],
           "meta": json.dumps({"gold_literals": ["Q5", "5"]})}
    _, summary = registry.compute(["qald_macro_f1_mean"], [{"question_id": "x", "answers": ["Q5"]}], [row])
    assert summary[0]["value"] == 0.0  # the answer Q5 is an entity, the gold "Q5" a string
    _, summary = registry.compute(["qald_macro_f1_mean"], [{"question_id": "x", "answers": ["5"]}], [row])
    assert summary[0]["value"] == approx(2 / 3)
    with pytest.raises(registry.MetricError, match="x: gold_answer_qids: not a Wikidata entity"):
        registry.compute(["qald_macro_f1_mean"], [{"question_id": "x", "answers": []}],
                         [{"question_id": "x", "gold_answer_qids": ["Paris"], "gold_answers": None}])
    # not annotated at all -> not scored; an empty QID list alone is an (empty) gold set
    assert registry._qald_gold(registry.EvalItem("x")) is None
    assert registry._qald_gold(registry.EvalItem("x", gold_answer_qids=[])) == []
    # a null / empty gold answer is an answer (GERBIL counts it as "")
    assert qald_prf([], [""]) == (1.0, 0.0, 0.0)
    assert qald_prf([], [None]) == (1.0, 0.0, 0.0)
    assert qald_prf([""], [""]) == (1.0, 1.0, 1.0)
    assert qald_prf([], []) == (1.0, 1.0, 1.0)
    # the two precisions: an unanswered question is P = 1 behind "Macro F1 QALD", P = 0 in "Macro Precision"
    res = qald_metrics([[], ["Q1"]], [["Q1"], ["Q1"]])
    assert res["qald_macro_precision_qald"].value == 1.0
    assert res["qald_macro_precision_gerbil"].value == 0.5
    assert res["qald_macro_recall"].value == 0.5
    assert res["qald_macro_f1_gerbil"].value == approx(2 * 1.0 * 0.5 / 1.5)


@pytest.mark.parametrize("literal, expected", sorted(URI_LIKE.items()))
def test_gerbil_iri_test_on_uri_like_literals(literal: str, expected: bool) -> None:
    from tasks.metrics.qald import gerbil_is_iri
    assert gerbil_is_iri(literal) is expected
