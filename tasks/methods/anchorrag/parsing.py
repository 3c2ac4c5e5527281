"""Parsers of the AnchorRAG / ToG prompt outputs (``tasks/methods/anchorrag/prompts/anchorrag_prompts.json``).

Every parser takes the raw completion text and returns plain values; none raises on garbage (an agent step that
gets nothing usable logs it and moves on, as the paper's agents do: a retriever with no relation or no triple
stops). Shapes expected, as in the prompts' examples:

* keywords: ``Leonardo DiCaprio, Jordan Belfort`` (first non-empty line, comma separated);
* relations: ``1.{country of citizenship (Score: 0.5)}: ...`` per line (ToG's ``{name (Score: x)}``);
* entities: ``Score: 0.0, 1.0, 0.0`` (one number per candidate, in order);
* triple filtering: the kept triples copied as-is, one per line (``(subject, relation, object)``);
* sufficiency: ``{Yes}. ... the answer is {De Smet}.`` / ``{No}. ...``;
* anchor choice (ToG baseline): numbers of the chosen candidates, ``2, 1``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_PREFIX = re.compile(r"^\s*(?:answer|topic entities|entities|keywords|output)\s*:\s*", re.I)
_REL = re.compile(r"\{\s*([^{}]+?)\s*\(\s*Score\s*:\s*([0-9]*\.?[0-9]+)\s*\)+\s*\}", re.I)
_REL_LOOSE = re.compile(r"([^{}\n;:]+?)\s*\(\s*Score\s*:\s*([0-9]*\.?[0-9]+)\s*\)", re.I)
_NUMBER = re.compile(r"\d+\.\d+|\d+")
_BRACE = re.compile(r"\{\s*([^{}]*?)\s*\}")
_SPACES = re.compile(r"\s+")
_ENUM = re.compile(r"^\s*(?:\d+\s*[.)]|[-*\u2022])\s*")
_VERDICT = re.compile(r"^\W*(yes|no)\b", re.I)


def norm(text: str) -> str:
    """Lower-case, quotes and brackets dropped, whitespace collapsed (for matching names the LLM copied)."""
    text = text.lower().replace('"', "").replace("'", "").replace("`", "")
    return _SPACES.sub(" ", text.strip(" .*-\t\n()[]{}")).strip()


def parse_keywords(text: str, max_keywords: int = 6) -> list[str]:
    """Topic-entity keywords: the first non-empty line, split on commas, de-duplicated (case-insensitive)."""
    for line in (text or "").splitlines():
        line = _PREFIX.sub("", _ENUM.sub("", line)).strip().strip(".")
        if not line or line.lower().startswith("question") or line.endswith(":"):
            continue  # blank, an echoed question, or a preamble such as "Here are the topic entities:"
        out: list[str] = []
        seen: set[str] = set()
        for part in line.split(","):
            word = part.strip().strip('"“”.').strip()
            if word and word.lower() not in seen and len(word) <= 120:
                seen.add(word.lower())
                out.append(word)
        return out[:max_keywords]
    return []


def parse_relation_scores(text: str, candidates: Sequence[str], top: int) -> list[tuple[int, float]]:
    """Relations the LLM picked, as ``(candidate index, score)``, best first, at most ``top``.

    Names are matched to ``candidates`` after ``norm`` (exact first, then a candidate containing the name or
    the reverse); names matching no candidate are ignored, as in ToG. Scores are renormalised to sum to 1.
    """
    keys = [norm(c) for c in candidates]
    found: dict[int, float] = {}
    pairs = _REL.findall(text or "") or _REL_LOOSE.findall(text or "")
    for name, score in pairs:
        n = _ENUM.sub("", norm(name)).removeprefix("relation").strip(" .:")
        idx = keys.index(n) if n in keys else next(
            (i for i, k in enumerate(keys) if k and n and (n in k or k in n)), None)
        if idx is None or idx in found:
            continue
        try:
            found[idx] = float(score)
        except ValueError:
            continue
    ranked = sorted(found.items(), key=lambda kv: -kv[1])[:top]
    total = sum(s for _, s in ranked)
    return [(i, (s / total) if total > 0 else 1.0 / len(ranked)) for i, s in ranked]


def parse_entity_scores(text: str, n: int) -> list[float] | None:
    """The ``Score: a, b, c`` list for ``n`` candidates, or None when it is missing or has another length."""
    for line in (text or "").splitlines():
        if "score" in line.lower():
            nums = [float(x) for x in _NUMBER.findall(line.split(":", 1)[-1])]
            if len(nums) == n:
                return nums
    nums = [float(x) for x in re.findall(r"\d+\.\d+", text or "")]
    return nums if len(nums) == n else None


def parse_filtered_triples(text: str, triples: Sequence[str]) -> list[int]:
    """Indexes of the shown ``triples`` the LLM returned, in shown order.

    A triple counts when its normalised text occurs in the output (parentheses and bullets ignored).
    """
    out = norm(text or "").replace("(", "").replace(")", "")
    kept = []
    for i, t in enumerate(triples):
        key = norm(t).replace("(", "").replace(")", "")
        if key and key in out:
            kept.append(i)
    return kept


def parse_sufficient(text: str) -> bool | None:
    """The ``{Yes}``/``{No}`` verdict of the sufficiency prompt (first braces; else a leading yes/no), or None."""
    m = _BRACE.search(text or "")
    v = _VERDICT.match(m.group(1) if m else (text or "").replace("*", "").strip())
    if v is None:
        return None
    return v.group(1).lower() == "yes"


def parse_choice_numbers(text: str, n: int, top: int) -> list[int]:
    """0-based indexes of the numbered candidates (1..n) the LLM chose, in its order, at most ``top``."""
    out: list[int] = []
    for tok in re.findall(r"\d+", (text or "").split("\n\n")[0]):
        i = int(tok) - 1
        if 0 <= i < n and i not in out:
            out.append(i)
    return out[:top]
