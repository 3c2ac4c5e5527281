r"""Deterministic spelling noise for open-world question splits (AnchorRAG §4.5, appendix 6.1).

AnchorRAG's "open-world" versions of WebQSP and GrailQA rewrite the questions "to make it impossible to directly
match entities in the knowledge graph through string matching". This module does that reproducibly: it puts
small typos into the topic-entity mentions of a question.

Inputs: a question, the names of its topic entities (KB labels, e.g. ToG's ``topic_entity`` values) and a
``random.Random`` seeded per question (``random.Random(f"{seed}:{dataset}:{question_id}")``, ``seed`` =
``NOISE_SEED`` by default; string seeds are hashed with SHA-512, so the output is byte-identical across runs,
machines and ``PYTHONHASHSEED`` values).

Outputs: ``add_typos`` returns the noisy question and the noised spans; ``noisy_rows`` turns the rows of a
split into rows of a ``test-noisy`` split with the same ``question_id`` (so both splits can be joined) and
``meta`` extended with ``original_question``, ``noised_spans`` (``[{original, noisy, target}]``), ``noise_seed``
and ``noise`` (``topic``: a topic-entity mention was changed; ``fallback``: no topic name occurs in the text, so
another word was changed; ``none``: nothing could be changed and the question is kept as is).

Rules (``add_typos``):

* Every occurrence of a topic name in the question (case-insensitive, on word boundaries, any whitespace run
  between the name's tokens; overlapping occurrences keep the longest name) is a mention to noise.
* Each word (run of letters) of at least ``MIN_WORD_LEN`` = 4 letters in a mention gets exactly one typo. A
  mention with no such word (``USA``, ``The Who``) gets one typo in its longest word of at least 2 letters, so
  that every noised mention differs from the KB label.
* A typo is one of ``TYPO_KINDS``: ``swap`` two adjacent inner letters, ``drop`` an inner letter, ``double`` a
  letter, ``keyboard`` (replace a letter by a QWERTY neighbour, keeping its case). The first letter is never
  touched. The kind is drawn from the RNG; when it cannot change the word (``swap`` in ``Mississippi``-like
  runs of equal letters, ``keyboard`` on non-ASCII letters) another kind is drawn, so the result always differs
  from the original word (case-insensitively). Per word the edit distance is 1 (2 for ``swap``).
* When no topic name occurs in the question (or none of its occurrences has a letter to change), the typo goes
  to the longest capitalised word of at least 4 letters that does not start a sentence, else to the longest
  word of at least 5 letters (first one on ties); when there is none, the question is unchanged.

Example (the real output for this seed string)::

    add_typos("What country bordering France contains an airport that serves Nijmegen?",
              ["France", "Nijmegen"], random.Random("0:cwq:WebQTrn-241_dfb6c97ac9bf2f0ac07f27dd80f9edc2"))
    -> ("What country bordering Fance contains an airport that serves Nimmegen?",
        [{"original": "France", "noisy": "Fance", "target": "topic"},
         {"original": "Nijmegen", "noisy": "Nimmegen", "target": "topic"}])
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tasks.datasets.base import Row, dump_meta

NOISE_SEED = 0
NOISY_SPLIT = "test-noisy"
MIN_WORD_LEN = 4
FALLBACK_CAPITALISED_LEN = 4
FALLBACK_WORD_LEN = 5
TYPO_KINDS: tuple[str, ...] = ("swap", "drop", "double", "keyboard")

_WORD = re.compile(r"[^\W\d_]+")
_KEYBOARD = {
    "q": "wa", "w": "qesa", "e": "wrds", "r": "etfd", "t": "rygf", "y": "tuhg", "u": "yijh", "i": "uokj",
    "o": "iplk", "p": "ol", "a": "qwsz", "s": "awedxz", "d": "serfcx", "f": "drtgvc", "g": "ftyhbv",
    "h": "gyujnb", "j": "huikmn", "k": "jiolm", "l": "kop", "z": "asx", "x": "zsdc", "c": "xdfv", "v": "cfgb",
    "b": "vghn", "n": "bhjm", "m": "njk",
}


def _apply(kind: str, word: str, rng: random.Random) -> str | None:
    """One typo of ``kind`` in ``word`` at a random position, or ``None`` when the kind does not apply."""
    n = len(word)
    if kind == "swap":  # i and i+1 both inner letters: 1 <= i and i + 1 <= n - 2
        spots = [i for i in range(1, n - 2) if word[i].casefold() != word[i + 1].casefold()]
        if not spots:
            return None
        i = rng.choice(spots)
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == "drop":
        if n < 3:
            return None
        i = rng.randrange(1, n - 1)
        return word[:i] + word[i + 1:]
    if kind == "double":
        if n < 2:
            return None
        i = rng.randrange(1, n)
        return word[:i + 1] + word[i] + word[i + 1:]
    if kind == "keyboard":
        spots = [i for i in range(1, n) if word[i].lower() in _KEYBOARD]
        if not spots:
            return None
        i = rng.choice(spots)
        new = rng.choice(_KEYBOARD[word[i].lower()])
        return word[:i] + (new.upper() if word[i].isupper() else new) + word[i + 1:]
    raise ValueError(f"unknown typo kind {kind!r}; known: {', '.join(TYPO_KINDS)}")


def typo(word: str, rng: random.Random) -> str:
    """Put one typo into ``word`` (see the module docstring); ``word`` itself when none can change it.

    The kind is drawn with ``rng.choice`` among the kinds not yet tried, so a word of at least 2 letters always
    comes back changed (case-insensitively).
    """
    kinds = list(TYPO_KINDS)
    while kinds:
        kind = rng.choice(kinds)
        out = _apply(kind, word, rng)
        if out is not None and out.casefold() != word.casefold():
            return out
        kinds.remove(kind)
    return word


def name_pattern(name: str) -> re.Pattern[str] | None:
    """Case-insensitive, word-bounded regex for ``name`` (whitespace runs between tokens); ``None`` if blank."""
    tokens = name.split()
    if not tokens:
        return None
    body = r"\s+".join(re.escape(t) for t in tokens)
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def find_mentions(question: str, names: Iterable[str]) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the names' occurrences in ``question``, non-overlapping, in text order.

    Matching is case-insensitive on word boundaries; where occurrences overlap the longest one is kept (then the
    earliest).
    """
    found: list[tuple[int, int]] = []
    seen: set[str] = set()
    for name in names:
        key = " ".join(str(name or "").split()).casefold()
        pattern = name_pattern(key) if key not in seen else None
        seen.add(key)
        if pattern is not None:
            found.extend(m.span() for m in pattern.finditer(question))
    kept: list[tuple[int, int]] = []
    for start, end in sorted(set(found), key=lambda s: (s[0] - s[1], s[0])):
        if all(end <= a or start >= b for a, b in kept):
            kept.append((start, end))
    return sorted(kept)


def _noise_words(text: str, rng: random.Random, *, min_len: int) -> str:
    """Typo in every word of ``text`` with ``min_len`` letters or more; else in its longest word (>= 2 letters)."""
    words = list(_WORD.finditer(text))
    targets = [w for w in words if len(w.group()) >= min_len]
    if not targets:
        short = [w for w in words if len(w.group()) >= 2]
        targets = [max(short, key=lambda w: len(w.group()))] if short else []
    out, pos = [], 0
    for w in targets:
        out.append(text[pos:w.start()])
        out.append(typo(w.group(), rng))
        pos = w.end()
    out.append(text[pos:])
    return "".join(out)


def _starts_sentence(question: str, start: int) -> bool:
    before = question[:start].rstrip()
    return not before or before[-1] in ".!?"


def _fallback_word(question: str) -> re.Match[str] | None:
    words = list(_WORD.finditer(question))
    caps = [w for w in words if len(w.group()) >= FALLBACK_CAPITALISED_LEN and w.group()[0].isupper()
            and not _starts_sentence(question, w.start())]
    pool = caps or [w for w in words if len(w.group()) >= FALLBACK_WORD_LEN]
    return max(pool, key=lambda w: len(w.group())) if pool else None


def add_typos(question: str, names: list[str], rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """Rewrite ``question`` so that its topic-entity mentions no longer match the names by string.

    Args:
        question: The question text.
        names: Topic-entity names (KB labels); blank names are ignored.
        rng: The per-question generator, e.g. ``random.Random(f"{NOISE_SEED}:{dataset}:{question_id}")``.

    Returns:
        ``(noisy_question, spans)``: ``spans`` lists ``{"original", "noisy", "target"}`` for each changed
        mention in text order, ``target`` being ``"topic"`` (a topic-name occurrence) or ``"fallback"`` (the
        fallback word when no topic name occurs). An empty list means the question was left unchanged.
    """
    spans: list[dict[str, Any]] = []
    pieces: list[str] = []
    pos = 0
    for start, end in find_mentions(question, names):
        original = question[start:end]
        noisy = _noise_words(original, rng, min_len=MIN_WORD_LEN)
        pieces.append(question[pos:start])
        pieces.append(noisy)
        pos = end
        if noisy != original:
            spans.append({"original": original, "noisy": noisy, "target": "topic"})
    pieces.append(question[pos:])
    if spans:
        return "".join(pieces), spans
    word = _fallback_word(question)
    if word is None:
        return question, []
    noisy = typo(word.group(), rng)
    if noisy == word.group():
        return question, []
    return question[:word.start()] + noisy + question[word.end():], [
        {"original": word.group(), "noisy": noisy, "target": "fallback"}
    ]


def noisy_rows(dataset: str, rows: Iterable[Row], names: Mapping[str, Iterable[str]], *,
               split: str = NOISY_SPLIT, seed: int = NOISE_SEED) -> list[Row]:
    """The noisy copy of a split: one row per input row, same ``question_id``, question rewritten by ``add_typos``.

    Args:
        dataset: Dataset name (part of the RNG seed string).
        rows: ``questions`` rows of the clean split.
        names: ``question_id`` -> topic-entity names (a question without an entry gets the fallback noise).
        split: Split name of the output rows.
        seed: Noise seed; the RNG of a question is ``random.Random(f"{seed}:{dataset}:{question_id}")``.

    Returns:
        New rows (gold lists copied; ``gold_mentions`` emptied since their offsets refer to the clean text) whose
        ``meta`` adds ``original_question``, ``noised_spans``, ``noise_seed`` and ``noise``
        (``topic`` | ``fallback`` | ``none``).
    """
    out: list[Row] = []
    for row in rows:
        qid = row["question_id"]
        rng = random.Random(f"{seed}:{dataset}:{qid}")
        question, spans = add_typos(row["question"], list(names.get(qid, ())), rng)
        meta = json.loads(row["meta"]) if row.get("meta") else {}
        meta.update(original_question=row["question"], noised_spans=spans, noise_seed=seed,
                    noise=spans[0]["target"] if spans else "none")
        new = {k: list(v) if isinstance(v, list) else v for k, v in row.items()}
        new.update(split=split, question=question, gold_mentions=[], meta=dump_meta(meta))
        out.append(new)
    return out
