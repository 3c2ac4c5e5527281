"""KG facts and property lists rendered into prompt messages, bounded to the context window (paper §3.4, §3.6).

Inputs: fact dicts (``tasks.methods.kg_tools.fact_dict``) and relation rows from the KG tools. Outputs: message texts
in the paper's shapes (``Property: label (Pid)`` followed by one value per line; ``List of properties: label
(Pid), ...``) plus what was kept, so agents can log truncation and link answers to the QIDs they showed.

Filtering (paper §3.4, "a large number of 'id' properties ... was removed"): properties whose label ends in
``ID`` / contains `` ID `` (the paper's rule; not the claim datatype ``external-id``, which a SPARQL endpoint and
the DuckDB store can report differently for the same claim, so the prompts would differ between backends), the
paper's skip list (diplomatic relation, native-language name, demonym, Curlie ID, flag image) and
media/shape/table files (file names, never answers).
Budgeting: ``approx_tokens`` (characters / 3, an over-estimate for Qwen's and GPT's BPE on English and ids);
properties are taken in property-id order until the budget is spent; each shows at most ``max_values`` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

SKIP_PROPERTIES = frozenset({"P530", "P1448", "P1549", "P998", "P41"})
SKIP_DATATYPES = frozenset({"commonsMedia", "geo-shape", "tabular-data"})


def approx_tokens(text: str) -> int:
    """Rough token count of a text (characters / 3, rounded up)."""
    return len(text) // 3 + 1


def messages_tokens(messages: Iterable[dict[str, str]]) -> int:
    """Rough token count of chat messages (content plus ~4 tokens of role markup each)."""
    return sum(approx_tokens(m.get("content", "")) + 4 for m in messages)


def keep_property(pid: str, label: str | None, datatype: str | None = None) -> bool:
    """False for identifier / media / skip-listed properties (see the module docstring)."""
    if pid in SKIP_PROPERTIES or (datatype in SKIP_DATATYPES):
        return False
    lab = label or ""
    return not (lab.endswith("ID") or " ID " in lab)


def value_text(f: dict) -> str:
    """A fact's value as shown: the object's label, else its QID, else the literal."""
    if f.get("o"):
        return f.get("ol") or f["o"]
    return str(f.get("ov") or "")


@dataclass
class Rendered:
    """Messages built from facts, and what went into them.

    Attributes:
        messages: Message texts (one per property).
        shown: Property ids shown, in order.
        total: Number of properties that passed the filters.
        names: Lower-cased shown value label -> QID (for linking answers to what the LLM saw).
        qids: QIDs shown (as values, or the subject entities).
    """

    messages: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    total: int = 0
    names: dict[str, str] = field(default_factory=dict)
    qids: set[str] = field(default_factory=set)


def group_by_property(facts: Sequence[dict]) -> list[tuple[str, str, list[dict]]]:
    """``[(pid, label, facts)]`` in first-seen (property-id) order, filtered (``keep_property``)."""
    groups: dict[str, tuple[str, list[dict]]] = {}
    for f in facts:
        if not keep_property(f["p"], f.get("pl"), f.get("dt")):
            continue
        groups.setdefault(f["p"], (f.get("pl") or f["p"], []))[1].append(f)
    return [(p, lab, fs) for p, (lab, fs) in groups.items()]


def remember(r: Rendered, facts: Iterable[dict]) -> None:
    """Record the QIDs and value labels of facts shown to the LLM."""
    for f in facts:
        if f.get("o"):
            r.qids.add(f["o"])
            if f.get("ol"):
                r.names.setdefault(f["ol"].lower(), f["o"])


def property_messages(facts: Sequence[dict], budget_tokens: int, max_values: int = 10,
                      entity_prefix: str = "") -> Rendered:
    """One ``Property: label (Pid)`` message per property with its values, within ``budget_tokens``.

    Args:
        facts: Fact dicts of one or more entities.
        budget_tokens: Token budget for all messages together.
        max_values: Values shown per property (the count of the others is stated).
        entity_prefix: Text put before ``Property:`` (the paper's ``Entity: label (Qid), `` in later hops).
    """
    r = Rendered()
    groups = group_by_property(facts)
    r.total = len(groups)
    used = 0
    for pid, label, fs in groups:
        values = [value_text(f) for f in fs[:max_values]]
        more = len(fs) - len(values)
        text = f"{entity_prefix}Property: {label} ({pid})\n" + "\n".join(values)
        if more > 0:
            text += f"\n... and {more} more"
        cost = approx_tokens(text) + 4
        if used + cost > budget_tokens:
            break
        used += cost
        r.messages.append(text)
        r.shown.append(pid)
        remember(r, fs[:max_values])
    return r


def property_list(relations: Sequence[Sequence], budget_tokens: int, heading: str) -> tuple[str, dict[str, str]]:
    """The paper's ``List of properties[ for X]: label (Pid), ...`` message, filtered and within the budget.

    Args:
        relations: ``[pid, label, direction, count]`` rows (outgoing ones are listed).
        budget_tokens: Token budget of the message.
        heading: ``"List of properties"`` or ``"List of properties for X, Y"``.

    Returns:
        ``(text, {pid: label})`` of the listed properties.
    """
    listed: dict[str, str] = {}
    parts: list[str] = []
    used = approx_tokens(heading) + 6
    for pid, label, direction, _count in relations:
        if direction != "out" or pid in listed or not keep_property(pid, label):
            continue
        item = f"{label or pid} ({pid})"
        cost = approx_tokens(item) + 1
        if used + cost > budget_tokens:
            break
        used += cost
        parts.append(item)
        listed[pid] = label or pid
    return f"{heading}: " + ", ".join(parts), listed
