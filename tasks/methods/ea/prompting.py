"""EA-Agent prompts (paper Appendix F): rendering from ``tasks/methods/ea/prompts/ea_*`` and parsing the replies.

Inputs: the template files (tool pool, path planning, Entity Alignment Tool, Reflector, path rewriting), the
entity statistics and the selected triples. Outputs: prompt texts; parsed tool paths and chosen IRIs.

Templates use ``{name}`` placeholders filled by plain replacement (the tool pool itself contains braces).
Parsing is lenient where the intent is unambiguous and strict otherwise:

* a tool path is the sequence of known tool names in the reply (spaces/case ignored, repeats dropped), put in
  the pipeline order the paper executes (selectors -> EntityAlignmentTool -> Reflector); a missing
  EntityAlignmentTool is added (the paper's step 2 is mandatory). A reply naming no tool is unparseable.
* an alignment reply must name one of the candidates: its IRI (bracketed or bare, the earliest mention wins)
  or, failing that, its label (:func:`parse_choice`). Anything else is unparseable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from tasks.methods.prompt_files import PromptFolder

PROMPTS = PromptFolder(__file__)

ATTR = "AttributeTripleSelector"
REL = "RelationTripleSelector"
ALIGN = "EntityAlignmentTool"
REFLECT = "Reflector"
TOOLS = (ATTR, REL, ALIGN, REFLECT)
SELECTORS = (ATTR, REL)

_TOOL_RE = re.compile(
    r"attribute\s*triple\s*selector|relation\s*triple\s*selector|entity\s*alignment\s*tool|reflector", re.I
)
_CANON = {re.sub(r"\s+", "", t).lower(): t for t in TOOLS}
_BRACKET = re.compile(r"\[([^\[\]\n]{1,300})\]")
#: Characters around a reply that is a bare label (quotes, backticks, markdown bold).
_AROUND_LABEL = "\"'`*\u201c\u201d"


def template(name: str) -> str:
    """Text of ``tasks/methods/ea/prompts/<name>``."""
    return PROMPTS.text(name)


def fill(text: str, values: Mapping[str, object]) -> str:
    """Replace every ``{key}`` of ``values`` in ``text``.

    Raises:
        KeyError: A placeholder of ``values`` is absent from the template (a template/code mismatch).
    """
    for key, value in values.items():
        token = "{" + key + "}"
        if token not in text:
            raise KeyError(f"placeholder {token} not in the template")
        text = text.replace(token, str(value))
    return text


@dataclass(frozen=True)
class ParsedPath:
    """A parsed tool path: tools in execution order, and what was repaired."""

    tools: tuple[str, ...]
    repairs: tuple[str, ...] = ()


def parse_path(text: str) -> ParsedPath | None:
    """Tool path from a planning or rewriting reply (see the module docstring); ``None`` if no tool is named."""
    named: list[str] = []
    for m in _TOOL_RE.finditer(text or ""):
        tool = _CANON[re.sub(r"\s+", "", m.group(0)).lower()]
        if tool not in named:
            named.append(tool)
    if not named:
        return None
    repairs = []
    ordered = [t for t in named if t in SELECTORS] + [ALIGN] + ([REFLECT] if REFLECT in named else [])
    if ALIGN not in named:
        repairs.append("added EntityAlignmentTool")
    elif named != ordered:
        repairs.append("reordered to selectors -> EntityAlignmentTool -> Reflector")
    return ParsedPath(tuple(ordered), tuple(repairs))


def path_regex(max_tools: int = len(TOOLS)) -> str:
    """Guided planning / rewriting reply: ``1. <ToolName>`` lines (1 to ``max_tools``) over the tool pool."""
    names = "(" + "|".join(TOOLS) + ")"
    lines = [rf"1\. {names}"] + [rf"(\n{i}\. {names}" for i in range(2, max_tools + 1)]
    return "".join(lines) + ")?" * (max_tools - 1)


def choice_options(candidates: Sequence[Mapping[str, object]]) -> tuple[str, ...]:
    """Guided alignment reply: exactly one candidate as ``[IRI]`` (the prompts' output format)."""
    return tuple(dict.fromkeys(f"[{c['iri']}]" for c in candidates))


def path_text(tools: Sequence[str]) -> str:
    """A path in the paper's output format (``1. <ToolName>`` per line)."""
    return "\n".join(f"{i}. {t}" for i, t in enumerate(tools, 1))


def parse_choice(text: str, candidates: Sequence[Mapping[str, str]]) -> str | None:
    """The candidate id named by an Entity Alignment Tool / Reflector reply, or ``None``.

    The paper's prompts (Appendix F, Entity Alignment and Reflection Prompts) show each candidate as
    ``IRI: <iri>`` and ask for "the IRI that best matches ... using the following format: [IRI]". The reply names
    a candidate by:

    1. its IRI, bracketed or bare (the earliest mention wins; a longer IRI it is the prefix of does not count);
    2. else its label, exactly (case-insensitive, underscores read as spaces, percent-escapes decoded): the text
       of the reply's first ``[...]`` that is a shown candidate's label (the prompt's format with the IRI
       shortened to the label its DBpedia resource IRI ends with, ``[Paris_FC]`` or ``[Paris FC]`` for
       ``http://dbpedia.org/resource/Paris_FC``), or the whole reply (quotes, backticks, ``*`` and a final period
       around it ignored). A label two shown candidates share names neither: the reply is refused.

    A label inside a sentence is not taken (``Paris`` is in ``Paris FC``). The paper's own code
    (anonymous.4open.science/r/EA-Agent-5696, the link the paper gives; not on GitHub) could not be read, so the
    paper's prompts are the reference for what a reply may be.

    Args:
        text: The reply.
        candidates: The shown candidates, ``{"id", "iri", "name"}`` dicts (``name``: the label,
            ``tasks.datasets.ea_kg.name_from_iri``).
    """
    text = text or ""
    best: tuple[int, int, str] | None = None  # (position, -len(iri), id)
    for c in candidates:
        iri = c["iri"]
        pos = text.find(iri)
        while pos >= 0:
            if _ends_iri(text, pos + len(iri)):
                key = (pos, -len(iri), c["id"])
                if best is None or key < best:
                    best = key
                break
            pos = text.find(iri, pos + 1)
    if best is not None:
        return best[2]
    by_label: dict[str, list[str]] = {}
    for c in candidates:
        key = label_key(c["name"])
        if key and c["id"] not in by_label.setdefault(key, []):
            by_label[key].append(c["id"])
    bare = text.strip().strip(_AROUND_LABEL).strip()
    for named in [*(m.group(1) for m in _BRACKET.finditer(text)), bare, bare.removesuffix(".")]:
        ids = by_label.get(label_key(named))
        if ids:
            return ids[0] if len(ids) == 1 else None
    return None


def label_key(label: str) -> str:
    """A label as :func:`parse_choice` compares it (``Paris_FC`` and ``paris fc`` are one key).

    Percent-escapes decoded, underscores as spaces, whitespace collapsed, case-folded.
    """
    return " ".join(unquote(label).replace("_", " ").split()).casefold()


def _ends_iri(text: str, end: int) -> bool:
    """Whether an IRI match ending at ``end`` is complete (not the prefix of a longer IRI: ``.../Paris_FC``)."""
    if end >= len(text) or text[end].isspace() or text[end] in "]>\"'`":
        return True
    return text[end] in ".,;)" and (end + 1 >= len(text) or text[end + 1].isspace() or text[end + 1] in "]>\"")


def render_triples(triples: Sequence[Sequence[str]]) -> str:
    """``(subject, predicate, object)`` lines."""
    return "\n".join(f"({s}, {p}, {o})" for s, p, o in triples)


def entity_block(selected: Mapping[str, object]) -> str:
    """Triples text of one entity from the selector tool's output (notes when nothing was kept)."""
    lines = []
    for kind in ("attribute", "relation"):
        sel = selected.get(kind)
        if sel is None:
            continue
        triples = sel.get("triples") or []
        if triples:
            lines.append(render_triples(triples))
        else:
            lines.append(f"({kind} triples: {sel.get('note') or 'none'})")
    return "\n".join(lines) if lines else "(no triples selected)"


def candidate_blocks(candidates: Sequence[Mapping[str, object]], selected: Mapping[str, Mapping[str, object]]
                     ) -> str:
    """The ``{candidate_blocks}`` text: each candidate's IRI and similarity, then its selected triples."""
    blocks = []
    for c in candidates:
        head = f"IRI: {c['iri']} (similarity {float(c['similarity']):.3f})"
        body = entity_block(selected.get(str(c["id"]), {}))
        blocks.append(head + "\n" + body)
    return "\n\n".join(blocks)
