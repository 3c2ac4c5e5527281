"""Differential tests: linkedqa's retrieval and StrategyQA metrics against the Entity Retrieval reference rules.

Reference: repository ``shavarani/EntityRetrieval``, commit ``198cdeea24a263b17bac7067bab9a364dae70516``:

- relevance: ``text_has_answer`` in ``src/model/retrievers/prefetch_retrieval_pyserini.py`` (identical copies in
  ``prefetch_retrieval_entity_linking.py`` and ``prefetch_retrieval_oracle_entities.py``), whose ``has_answer``
  flags ``src/model/retrievers/analyze_prefetched_documents.py`` reads;
- nDCG@k, RAcc@k (top-k accuracy), MRR: ``NDCG``, ``first_non_zero_index``, ``calculate_mrr`` and ``create_plot``
  in ``src/model/retrievers/analyze_prefetched_documents.py`` (relevance rows padded to ``max_k``, k in
  ``[1, 2, 3, 4, 5, 20, max_k]``, every question of the dataset in the denominator);
- StrategyQA: ``extract_strategy_qa_answer`` in ``src/eval.py`` (repeated in ``src/generate_table_2.py`` and
  ``src/generate_table_3.py``), accuracy and ``model_answers.count('Wrong!')`` in ``generate_table_3.evaluate``.

The ``_ref_*`` functions below re-derive those rules independently of ``tasks.metrics.qa`` (numpy matrices for the
ranking metrics, as the reference builds them); each family is compared on >= 1,000 seeded random cases, with
adversarial strings (punctuation, articles, accents, unicode whitespace, empty sets, duplicates, "1,000",
booleans, dates), and must agree on every case. The reference prints percentages; linkedqa stores fractions.
"""

from __future__ import annotations

import random
import re
import string

import numpy as np
import pytest

from tasks.metrics import qa
from tasks.metrics.registry import compute

REF = "shavarani/EntityRetrieval@198cdeea24a263b17bac7067bab9a364dae70516"
N_CASES = 1200


# ------------------------------------------------------------------------------------ reference rules
def _ref_normalize(s: str) -> str:
    # lower -> drop string.punctuation characters -> articles a/an/the (whole words) to " " -> collapse spaces
    s = s.lower()
    s = s.translate({ord(c): None for c in string.punctuation})
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _ref_text_has_answer(answers, text: str) -> bool:
    if isinstance(answers, str):
        answers = [answers]
    norm_text = _ref_normalize(text)
    return any(norm_text.find(_ref_normalize(a)) >= 0 for a in answers)


def _ref_ndcg(row: np.ndarray, k: int) -> float:
    # NDCG.ndcg_at_k: k = min(len(r), k); ideal = DCG of the whole row sorted descending, cut at k
    k = min(row.size, k)

    def dcg(r: np.ndarray) -> float:
        r = r[:k].astype(float)
        return float(((2.0**r - 1.0) / np.log2(np.arange(2, r.size + 2))).sum()) if r.size else 0.0

    best = dcg(np.sort(row)[::-1])
    return dcg(row) / best if best else 0.0


def _ref_retrieval(docs_per_q, golds_per_q, max_k: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """create_plot: a dataset_length x max_k matrix of has_answer flags, then nDCG / RAcc / MRR.

    Returns the printed aggregates (as fractions) and the per-question terms they average.
    """
    n = len(docs_per_q)
    rel = np.zeros((n, max_k), dtype=int)
    counter: dict[int, int] = {}
    ranks = []
    for i, (docs, golds) in enumerate(zip(docs_per_q, golds_per_q, strict=True)):
        hits = [int(_ref_text_has_answer(golds, d)) for d in docs[:max_k]]  # retrieve(top_k=max_k)
        if hits:
            rel[i, : len(hits)] = hits
            nz = np.flatnonzero(rel[i])
            coverage = int(nz[0]) + 1 if nz.size else 0
        else:
            coverage = 0
        ranks.append(coverage)
        if 0 < coverage < max_k + 1:
            counter[coverage] = counter.get(coverage, 0) + 1
    out: dict[str, float] = {}
    terms: dict[str, list[float]] = {}
    for k in sorted({1, 2, 3, 4, 5, 20, max_k}):
        if k > max_k:
            continue  # never printed: the reference's k list stops at max_k
        terms[f"ndcg@{k}"] = [_ref_ndcg(rel[i], k) for i in range(n)]
        out[f"ndcg@{k}"] = float(np.mean(terms[f"ndcg@{k}"]))
        out[f"topk_acc@{k}"] = sum(c for r, c in counter.items() if r <= k) / n  # RAcc@k / 100
        terms[f"topk_acc@{k}"] = [float(0 < r <= k) for r in ranks]
    out["mrr_retrieval"] = sum(1 / r for r in ranks if r) / n
    terms["mrr_retrieval"] = [1 / r if r else 0.0 for r in ranks]
    return out, terms


def _ref_strategy_answer(model_answer: str) -> str:
    low = model_answer.strip().lower()
    if low[:3] == "yes":
        return "Yes"
    if low[:2] == "no":
        return "No"
    return "Wrong!"


# ------------------------------------------------------------------------------------------ generators
WORDS = [
    "start", "started", "art", "the", "a", "an", "The", "A", "theatre", "another", "Paris", "paris", "PARIS",
    "São", "Paulo", "Sao", "café", "cafe", "Café", "naïve", "Zürich", "Zurich", "straße", "İstanbul", "ǅemal",
    "1,000", "1000", "1", "000", "3.14", "-7", "42nd", "True", "False", "true", "yes", "no", "None", "null",
    "1 January 2000", "2000-01-01", "01/02/2003", "Jan.", "U.S.A.", "USA", "rock'n'roll", "O'Brien", "e.g.",
    "New", "York", "Yorkshire", "york", "New York City", "and/or", "—", "–", "«", "»", "“quoted”", "¿qué?",
    "日本", "東京", "Ελλάδα", "ｆｕｌｌ", "x", "",
]
SEPS = [" ", "  ", "\t", "\n", "\xa0", "\u2003", "", ", ", ". ", "-", "'", '"', "(", ")", "!", "?", ";", " the ",
        " a ", " an "]


def _phrase(rng: random.Random, lo: int = 1, hi: int = 4) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    if not words:
        return ""
    out = words[0]
    for w in words[1:]:
        out += rng.choice(SEPS) + w
    return out


def _variant(rng: random.Random, s: str) -> str:
    """An adversarial rendering of ``s``: case, punctuation, articles, spacing."""
    choice = rng.randrange(7)
    if choice == 0:
        return s.upper()
    if choice == 1:
        return rng.choice(["The ", "a ", "An ", ""]) + s + rng.choice([".", "!", ",", "", "'s"])
    if choice == 2:
        return rng.choice(SEPS).join(s.split(" "))
    if choice == 3:
        return "".join(c + rng.choice(["", "", "'", "."]) for c in s)
    if choice == 4:
        return s[: max(0, len(s) - rng.randint(0, 3))]
    if choice == 5:
        return " \t" + s.lower() + "\n"
    return s


def _golds(rng: random.Random) -> list[str]:
    kind = rng.randrange(10)
    if kind == 0:
        return []  # empty gold set
    if kind == 1:
        return [rng.choice(["the", "a", "An", "...", "", " ", "?!", "the a an"])]  # normalises to ""
    golds = [_phrase(rng, 1, 3) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.2:
        golds.append(golds[0])  # duplicate alias
    return golds


def _doc(rng: random.Random, golds: list[str]) -> str:
    parts = [_phrase(rng, 0, 6) if rng.random() < 0.9 else "" for _ in range(rng.randint(1, 3))]
    if golds and rng.random() < 0.4:
        parts.insert(rng.randrange(len(parts) + 1), _variant(rng, rng.choice(golds)))
    return rng.choice(SEPS).join(parts)


# ------------------------------------------------------------------------------------------- relevance
def test_relevance_matches_text_has_answer_on_random_cases() -> None:
    rng = random.Random(16_001)
    disagreements = []
    for _ in range(N_CASES * 3):
        golds = _golds(rng)
        docs = [_doc(rng, golds) for _ in range(rng.randint(0, 4))]
        expected = [int(_ref_text_has_answer(golds, d)) for d in docs]
        got = qa.relevance(docs, golds)
        single = [int(qa.has_answer(d, golds)) for d in docs]
        if got != expected or single != expected:
            disagreements.append((golds, docs, expected, got, single))
    assert disagreements == [], f"{len(disagreements)} disagreements with {REF}, e.g. {disagreements[:3]}"
    # a single string is one answer, as in the reference
    assert qa.has_answer("the Started game", "start") is _ref_text_has_answer("start", "the Started game") is True


def test_relevance_reproducers() -> None:
    assert qa.relevance(["started"], ["start"]) == [1]  # the reference says relevant
    assert qa.relevance(["started"], ["start"], rule="token") == [0]  # whole tokens only: the *_token variants
    assert qa.relevance(["anything", ""], ["The"]) == [1, 1]  # "" is a substring of every text
    assert qa.relevance(["anything"], []) == [0]


# -------------------------------------------------------------------------------------- ranking metrics
def _dataset(rng: random.Random, n: int, max_len: int):
    golds = [_golds(rng) for _ in range(n)]
    docs = [[_doc(rng, g) for _ in range(rng.randint(0, max_len))] for g in golds]
    return docs, golds


def _compare(got: dict, expected: tuple, ids: list[str], where: str, disagreements: list) -> None:
    aggregates, terms = expected
    for name, value in aggregates.items():
        res = got[name]
        if res.value is None or abs(res.value - value) > 1e-9 or res.n != len(ids):
            disagreements.append((where, name, res.value, value))
        for qid, term in zip(ids, terms[name], strict=True):
            if abs(res.per_item[qid] - term) > 1e-12:
                disagreements.append((where, name, qid, res.per_item[qid], term))


def test_ndcg_mrr_topk_match_reference_on_random_datasets() -> None:
    rng = random.Random(16_002)
    disagreements: list = []
    cases = 0
    for t in range(120):
        n = rng.randint(1, 25)
        max_len = rng.choice([1, 2, 3, 5, 8, 20, 25])
        docs, golds = _dataset(rng, n, max_len)
        if not any(docs):
            docs[0] = [_doc(rng, golds[0])]
        cases += n
        ids = [f"q{i}" for i in range(n)]
        # inferred depth = the longest list; the reference's max_k is that depth
        depth = max(len(d) for d in docs)
        ks = (1, 2, 3, 4, 5, 20, 100, depth)
        expected = _ref_retrieval(docs, golds, depth)
        got = qa.retrieval_metrics(docs, golds, ks, ids)
        _compare(got, expected, ids, f"dataset {t} depth {depth}", disagreements)
        for k in ks:  # what the reference does not print is not reported
            if k > depth:
                for name in (f"ndcg@{k}", f"topk_acc@{k}"):
                    if (got[name].value, got[name].n, got[name].per_item) != (None, 0, {}):
                        disagreements.append((t, name, "reported above the depth"))
        # explicit depth, shorter than some lists (the reference retrieves top_k=max_k)
        cut = rng.randint(1, depth)
        expected = _ref_retrieval(docs, golds, cut)
        got = qa.retrieval_metrics(docs, golds, (1, 2, 3, 4, 5, 20, cut), ids, depth=cut)
        _compare(got, expected, ids, f"dataset {t} cut {cut}", disagreements)
    assert cases >= 1000
    assert disagreements == [], f"{len(disagreements)} disagreements with {REF}, e.g. {disagreements[:5]}"


def test_ndcg_per_list_matches_reference() -> None:
    rng = random.Random(16_003)
    bad = []
    for _ in range(N_CASES * 2):
        rels = [int(rng.random() < rng.choice([0.0, 0.1, 0.5, 0.9, 1.0])) for _ in range(rng.randint(0, 30))]
        k = rng.randint(1, 35)
        expected = _ref_ndcg(np.array(rels, dtype=int), k)
        if abs(qa.ndcg_at_k(rels, k) - expected) > 1e-12:
            bad.append((rels, k))
    assert bad == []


def test_ranking_reproducers() -> None:
    assert qa.ndcg_at_k([0, 1, 1], 2) == pytest.approx(0.387, abs=5e-4)  # the ideal counts rank 3 (top k alone: 0.631)
    assert qa.ndcg_at_k([0, 1, 1], 2) == pytest.approx(_ref_ndcg(np.array([0, 1, 1]), 2))
    # eval_k = 20 documents: @100 is not computed over 20 documents, it is not reported
    docs = [["no", "yes Paris"] + ["filler"] * 18]
    res = qa.retrieval_metrics(docs, [["Paris"]], (20, 100))
    assert res["ndcg@20"].value == pytest.approx(1 / np.log2(3))
    assert (res["ndcg@100"].value, res["ndcg@100"].n) == (None, 0)
    assert (res["topk_acc@100"].value, res["topk_acc@100"].n) == (None, 0)
    # a question whose gold normalises to "" is counted (every document relevant), as by the reference
    res = qa.retrieval_metrics([["x", "y"], ["a b", "c"]], [["The"], ["zzz"]], (1, 2))
    assert res["mrr_retrieval"].n == 2 and res["mrr_retrieval"].value == pytest.approx(0.5)
    assert res["ndcg@2"].per_item == {"0": 1.0, "1": 0.0}
    # through the registry: depth = the longest retrieved_texts list
    preds = [{"question_id": "1", "retrieved_texts": ["the start", "art"]}, {"question_id": "2", "retrieved_texts": []}]
    questions = [{"question_id": "1", "gold_answers": ["art"]}, {"question_id": "2", "gold_answers": ["the"]}]
    _, rows = compute(["ndcg@2", "ndcg@3", "topk_acc@1", "topk_acc_token@1", "mrr_retrieval"], preds, questions)
    assert rows == [
        {"metric": "ndcg@2", "value": pytest.approx(0.5), "n": 2},
        {"metric": "ndcg@3", "value": None, "n": 0},
        {"metric": "topk_acc@1", "value": 0.5, "n": 2},
        {"metric": "topk_acc_token@1", "value": 0.0, "n": 2},
        {"metric": "mrr_retrieval", "value": 0.5, "n": 2},
    ]


# ------------------------------------------------------------------------------------------- StrategyQA
ANSWER_CORES = [
    "yes", "Yes", "YES", "yEs", "no", "No", "NO", "nO", "Not", "not sure", "nope", "none", "No.", "Yes, it is",
    "yes.", "Yesterday", "noon", "y", "n", "ye", "n o", "ye s", "'yes'", '"no"', "(yes)", "- yes", "*No*",
    "Yés", "Ｙｅｓ", "ＮＯ", "İyes", "nö", "Maybe", "True", "False", "true", "1", "0", "1,000", "2000-01-01",
    "1 January 2000", "The answer is yes", "A: yes", "Answer: No", "", " ", "\n", "yes\n\nno", "no, yes",
]
PADS = ["", " ", "  ", "\t", "\n", "\xa0", "\u2003", "\u3000", "\r\n", ".", "'", "A:"]


def test_strategyqa_matches_reference_on_random_cases() -> None:
    rng = random.Random(16_004)
    preds, golds, gold_inputs = [], [], []
    for _ in range(N_CASES * 2):
        core = rng.choice(ANSWER_CORES)
        if rng.random() < 0.3:
            core = core + rng.choice(SEPS) + _phrase(rng, 0, 2)
        pred = rng.choice(PADS) + core + rng.choice(PADS)
        gold = rng.random() < 0.5
        preds.append(pred)
        golds.append(gold)
        gold_inputs.append(rng.choice([gold, "yes" if gold else "no", "True" if gold else "FALSE", [gold]]))
    ref_answers = [_ref_strategy_answer(p) for p in preds]
    expected_gold = ["Yes" if g else "No" for g in golds]  # data/loaders/sqa.py _get_answer_string
    parse_disagree = [
        (p, r) for p, r in zip(preds, ref_answers, strict=True)
        if {True: "Yes", False: "No", None: "Wrong!"}[qa.parse_yes_no(p)] != r
    ]
    assert parse_disagree == [], f"{len(parse_disagree)} disagreements with {REF}, e.g. {parse_disagree[:5]}"
    # aggregates over random datasets of several sizes
    start = 0
    while start < len(preds):
        size = rng.randint(1, 200)
        sl = slice(start, start + size)
        res = qa.strategyqa_metrics(preds[sl], gold_inputs[sl])
        m = ref_answers[sl]
        accuracy = sum(a == g for a, g in zip(m, expected_gold[sl], strict=True)) / len(m)
        assert res["strategyqa_acc"].value == pytest.approx(accuracy, abs=1e-12)
        assert res["invalid_count"].value == m.count("Wrong!")
        start += size


def test_strategyqa_reproducers() -> None:
    res = qa.strategyqa_metrics(["Not", "Yes, it is", "'yes'"], [["no"], ["yes"], ["yes"]])
    assert res["strategyqa_acc"].value == pytest.approx(2 / 3)  # starts with: "Not" is no (not 1/3)
    assert res["invalid_count"].value == 1.0  # "'yes'" only (not 2)
    assert [_ref_strategy_answer(p) for p in ["Not", "Yes, it is", "'yes'"]] == ["No", "Yes", "Wrong!"]
    assert qa.parse_yes_no(None) is None and qa.parse_yes_no("  YESTERDAY") is True
