r"""QALD answer-set metrics: GERBIL "Macro F1 QALD", GERBIL's "Macro F1"/"Macro Precision" columns, per question.

Reference: GERBIL QA — dice-group/gerbil, branch ``QuestionAnswering`` (the QA version behind
gerbil-qa.aksw.org and the QALD-9/QALD-10 leaderboards), commit ``794c41a14d73ba554ae28a397d415db0d68ae67b``:
``src/main/java/org/aksw/gerbil/evaluate/impl/FMeasureCalculator.java`` (``calculateMeasuresQALD``,
``calculateF1QALD``, ``calculateMeasures``, ``calculateMacroFMeasure``),
``src/main/java/org/aksw/gerbil/matching/impl/QAMatchingsCounter.java`` (``countMatchings``) and
``src/main/java/org/aksw/gerbil/qa/QAUtils.java`` (``translateQuestion``, ``transformToAnnotations``).

Inputs: predicted and gold answer collections per question. A value is an **entity** exactly when it is given
as a Wikidata entity IRI (``http://www.wikidata.org/entity/Q42``; also ``https``, ``<...>`` or ``/wiki/``;
``Q``, ``P`` and ``L`` ids); every other value is a **literal**, including a bare id such as ``"Q5"``, ``"P31"``
or ``"L1"`` — as in GERBIL, which compares the gold file's and the system's values as strings, where a Wikidata
entity is its IRI and a literal spelled like an id is a string without a ``:``. linkedqa's tables write entity
answers as bare QIDs (``gold_answer_qids``; a prediction's ``answers``), so callers type those first:
:func:`entity_iri` for a value known to be an entity, :func:`qids_as_entities` for a prediction's answers (a bare
QID there is an entity). Each value is then canonicalised (:func:`canonical_answer`: an entity as
``http://www.wikidata.org/entity/<id>``, a literal as stripped text with the Wikidata literal serialisations
written the way QALD systems answer); ``None`` values are dropped from predictions and are ``""`` in the gold set
(GERBIL turns a null gold value into ``""``). Outputs: :class:`~tasks.metrics.base.MetricResult` objects.

**Gold answers** (GERBIL, and QALD's JSON): the gold answer set of a question is every value of every binding
of its gold SPARQL result — entities and literals together. In linkedqa's ``questions`` rows that is
``gold_answer_qids`` (entities) ∪ the literal answers (``meta.gold_literals`` when the row has it, else
``gold_answers``); see ``tasks.metrics.registry``. The loaders keep a gold binding of type ``uri`` as its IRI
(a Wikidata lexeme or property too), so it stays an entity.

**Counts** (``QAMatchingsCounter`` with no literal-to-resource converter registered, GERBIL's default when
``org.aksw.gerbil.dataset.converter.domain`` is unset: a system literal missing from the gold set is one
false positive): ``translateQuestion`` keeps an answer set as IRIs (*annotations*) when every value passes
``transformToAnnotations``' IRI test, else as plain strings (an empty set is an IRI set). An entity's IRI
passes it; a literal passes when it matches ``[^\s]+:[^\s]+`` somewhere and parses as a ``java.net.URI``
(:func:`gerbil_is_iri`), so a literal spelled like an id (``"L1"``, no ``:``) is a string. Then
tp = |p∩g|, fp = |p - g|, fn = |g - p| — except when the gold set is a string set and the system answered a
non-empty IRI set: IRIs are matched only against gold IRIs and strings only against gold strings, so tp = 0,
fp = |p|, fn = |g| (e.g. gold {entity Q1, "5"}, answer {entity Q1}). Gold {"L1", "5"} and answer {"L1"}, all
literals, are two string sets: tp = 1, fp = 0, fn = 1.

Per-question measures from (tp, fp, fn):

====================================  ===========  ===========  =====  ============================
case                                  P            R            F      P in ``calculateMeasures``
====================================  ===========  ===========  =====  ============================
tp = fp = fn = 0 (both empty)         1            1            1      1
tp = 0, fp = 0, fn > 0 (no answer)    1            0            0      0
tp = 0 otherwise                      0            0            0      0
tp > 0                                tp/(tp+fp)   tp/(tp+fn)   harm.  same
====================================  ===========  ===========  =====  ============================

- ``qald_macro_f1_gerbil``: GERBIL "Macro F1 QALD" (``calculateF1QALD``): 2·mP·mR / (mP + mR), mP and mR
  the means of the per-question P and R of ``calculateMeasuresQALD`` (GERBIL returns NaN when both are 0;
  0.0 here).
- ``qald_macro_f1_mean``: the mean of the per-question F — GERBIL's "Macro F1 score" column (F is the same
  under both per-question rules).
- ``qald_macro_precision_qald``: mP, the precision behind "Macro F1 QALD" (an unanswered question counts as
  P = 1).
- ``qald_macro_precision_gerbil``: GERBIL's displayed "Macro Precision" column (``calculateMeasures``: an
  unanswered question counts as P = 0; the NLIWOD/QALD-10 challenge page states this rule too).
- ``qald_macro_recall``: mR ("Macro Recall"; the same under both rules).

Deviations from GERBIL: answers are canonicalised first (above); GERBIL's production configuration registers a
DBpedia label lookup as literal-to-resource converter (a wrong literal then counts once per DBpedia resource
with that label, zero times when there is none) — not reproducible offline, the no-converter rule is used.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from tasks.metrics.base import MetricError, MetricResult, item_ids, make_result, mean_result

QALD_METRICS = ("qald_macro_f1_gerbil", "qald_macro_f1_mean", "qald_macro_precision_qald",
                "qald_macro_precision_gerbil", "qald_macro_recall")
#: How GERBIL (and the QALD files) spell a Wikidata entity: the canonical form of an entity answer.
ENTITY_PREFIX = "http://www.wikidata.org/entity/"
_WD_ENTITY = re.compile(r"^<?https?://(?:www\.)?wikidata\.org/(?:entity|wiki)/((?:Q|P|L)\d+)>?$")
_BARE_ID = re.compile(r"^[QPL]\d+$")
_BARE_QID = re.compile(r"^Q\d+$")


_MIDNIGHT_DATE = re.compile(r"^(-?\d{4,}-\d\d-\d\d)T00:00:00Z$")
_SIGNED_NUMBER = re.compile(r"^\+(\d+(?:\.\d+)?)$")


def entity_iri(value: object) -> str:
    """A value known to be an entity (a bare ``Q``/``P``/``L`` id or a Wikidata IRI) as its canonical IRI.

    Raises:
        MetricError: The value is neither.
    """
    text = str(value).strip()
    if _BARE_ID.match(text):
        return ENTITY_PREFIX + text
    m = _WD_ENTITY.match(text)
    if m is None:
        raise MetricError(f"not a Wikidata entity id or IRI: {value!r}")
    return ENTITY_PREFIX + m.group(1)


def qids_as_entities(values: Iterable[object]) -> list[object]:
    """A prediction's answers typed for the QALD metrics: each bare QID as an entity, other values unchanged.

    linkedqa's methods write entity answers as QIDs; a bare ``P``/``L`` id is no answer they link, so it stays a
    literal.
    """
    return [entity_iri(v) if isinstance(v, str) and _BARE_QID.match(v.strip()) else v for v in values]


def canonical_answer(value: object) -> str:
    """An answer value as compared: a Wikidata entity IRI in its canonical spelling, anything else stripped text.

    Wikidata's serialisations of literals are written the way the QALD systems answer (the paper's
    post-processing): ``xsd:dateTime`` at midnight -> ``YYYY-MM-DD``, a leading ``+`` on a number dropped,
    ``True``/``False`` -> ``true``/``false``. A bare id (``"Q5"``) is a literal and stays as it is.
    """
    text = str(value).strip()
    m = _WD_ENTITY.match(text)
    if m:
        return ENTITY_PREFIX + m.group(1)
    m = _MIDNIGHT_DATE.match(text) or _SIGNED_NUMBER.match(text)
    if m:
        return m.group(1)
    return text.lower() if text in ("True", "False", "TRUE", "FALSE") else text


_IRI_PATTERN = re.compile(r"[^\s]+:[^\s]+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")
_HEX = frozenset("0123456789abcdefABCDEF")
_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'()")
_URIC = _UNRESERVED | frozenset(";/?:@&=+$,[]")
_PATH = _UNRESERVED | frozenset(":@&=+$,;/")
_AUTHORITY = _UNRESERVED | frozenset("$,;:@&=+[]")


def _uri_chars(text: str, allowed: frozenset[str]) -> bool:
    """``java.net.URI``'s ``checkChars``: allowed ASCII, ``%HH`` escapes, visible non-ASCII characters."""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            if len(text) < i + 3 or text[i + 1] not in _HEX or text[i + 2] not in _HEX:
                return False
            i += 3
            continue
        if ord(c) < 128:
            if c not in allowed:
                return False
        elif c.isspace() or unicodedata.category(c) in ("Cc", "Zs", "Zl", "Zp"):
            return False
        i += 1
    return True


def _java_hierarchical(text: str) -> bool:
    rest, _, frag = text.partition("#")
    if "#" in text and not _uri_chars(frag, _URIC):
        return False
    rest, sep, query = rest.partition("?")
    if sep and not _uri_chars(query, _URIC):
        return False
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if not authority and not (slash or sep or "#" in text):
            return False
        return _uri_chars(authority, _AUTHORITY) and _uri_chars(slash + path, _PATH)
    return _uri_chars(rest, _PATH)


def _java_uri(text: str) -> bool:
    """Whether ``java.net.URI.create(text)`` accepts ``text`` (its grammar, simplified for IPv6 hosts)."""
    stop = min((i for i in (text.find(c) for c in ":/?#") if i >= 0), default=-1)
    if stop >= 0 and text[stop] == ":":
        if not _SCHEME.match(text[:stop]):
            return False
        rest = text[stop + 1:]
        if rest.startswith("/"):
            return _java_hierarchical(rest)
        ssp, _, frag = rest.partition("#")
        return bool(ssp) and _uri_chars(ssp, _URIC) and ("#" not in rest or _uri_chars(frag, _URIC))
    return _java_hierarchical(text)


def gerbil_is_iri(answer: str) -> bool:
    """Whether GERBIL's ``transformToAnnotations`` takes a canonical answer for an IRI (entities: always)."""
    return bool(_IRI_PATTERN.search(answer)) and _java_uri(answer)


def answer_set(values: Iterable[object] | None, *, gold: bool = False) -> set[str]:
    """Canonical answers as a set (``None`` -> empty).

    ``""`` is an answer like any literal (GERBIL compares it as a string). A ``None`` value is dropped from a
    prediction and is ``""`` in a gold set (``QAMatchingsCounter``: a null gold value counts as ``""``).

    Raises:
        MetricError: A bare string (it would be split into characters).
    """
    if values is None:
        return set()
    if isinstance(values, str):
        raise MetricError(f"expected a collection of answers, got the string {values!r}")
    if gold:
        return {"" if v is None else canonical_answer(v) for v in values}
    return {canonical_answer(v) for v in values if v is not None}


def gerbil_counts(pred: Iterable[object] | None, gold: Iterable[object] | None) -> tuple[int, int, int]:
    """GERBIL ``QAMatchingsCounter`` (tp, fp, fn) of one question (see the module docstring)."""
    p, g = answer_set(pred), answer_set(gold, gold=True)
    if p and not all(gerbil_is_iri(a) for a in g) and all(gerbil_is_iri(a) for a in p):
        return 0, len(p), len(g)  # IRI answers vs a string gold set: nothing can match
    tp = len(p & g)
    return tp, len(p) - tp, len(g) - tp


def measures(tp: int, fp: int, fn: int, *, qald: bool = True) -> tuple[float, float, float]:
    """(P, R, F1) from counts: ``calculateMeasuresQALD`` (``qald=True``) or ``calculateMeasures``."""
    if tp == 0:
        if fp == 0 and fn == 0:
            return 1.0, 1.0, 1.0
        if fp == 0 and qald:
            return 1.0, 0.0, 0.0
        return 0.0, 0.0, 0.0
    prec, rec = tp / (tp + fp), tp / (tp + fn)
    return prec, rec, 2 * prec * rec / (prec + rec)


def qald_prf(pred: Iterable[object] | None, gold: Iterable[object] | None) -> tuple[float, float, float]:
    """Per-question (P, R, F1) with GERBIL QA's ``calculateMeasuresQALD`` rules (see the module docstring)."""
    return measures(*gerbil_counts(pred, gold))


def qald_metrics(
    preds: Sequence[Iterable[object] | None],
    golds: Sequence[Iterable[object] | None],
    ids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """All QALD aggregates at once.

    Args:
        preds: System answers per question.
        golds: Gold answers per question (entities and literals together).
        ids: Question ids.

    Returns:
        Every name in ``QALD_METRICS``; ``qald_macro_f1_gerbil``'s per-item score is the question's F.
    """
    if len(preds) != len(golds):
        raise MetricError(f"{len(preds)} predictions for {len(golds)} gold answer sets")
    keys = item_ids(ids, len(preds))
    ps: dict[str, float] = {}
    ps_shown: dict[str, float] = {}
    rs: dict[str, float] = {}
    fs: dict[str, float] = {}
    for key, pred, gold in zip(keys, preds, golds, strict=True):
        counts = gerbil_counts(pred, gold)
        ps[key], rs[key], fs[key] = measures(*counts)
        ps_shown[key] = measures(*counts, qald=False)[0]
    state = (sum(ps.values()), sum(rs.values()), len(keys))
    return {
        "qald_macro_f1_gerbil": make_result("qald_macro_f1_gerbil", "harmonic_macro", state, fs),
        "qald_macro_f1_mean": mean_result("qald_macro_f1_mean", fs),
        "qald_macro_precision_qald": mean_result("qald_macro_precision_qald", ps),
        "qald_macro_precision_gerbil": mean_result("qald_macro_precision_gerbil", ps_shown),
        "qald_macro_recall": mean_result("qald_macro_recall", rs),
    }


def qald_macro_f1_gerbil(
    preds: Sequence[Iterable[object] | None],
    golds: Sequence[Iterable[object] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """GERBIL "Macro F1 QALD": harmonic mean of macro precision and macro recall."""
    return qald_metrics(preds, golds, ids)["qald_macro_f1_gerbil"]


def qald_macro_f1_mean(
    preds: Sequence[Iterable[object] | None],
    golds: Sequence[Iterable[object] | None],
    ids: Sequence[str] | None = None,
) -> MetricResult:
    """Mean of per-question F1: GERBIL's "Macro F1 score" column (same F under both per-question rules)."""
    return qald_metrics(preds, golds, ids)["qald_macro_f1_mean"]
