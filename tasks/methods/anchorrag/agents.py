"""Open-world KGQA step machines and prompts: ``anchorrag``, its ``tog`` baseline, the ``cot`` (CoT/IO) requests.

Paper: Xu et al., "Towards Open-World Retrieval-Augmented Generation on Knowledge Graph: A Multi-Agent
Collaboration Framework" (../shared/papers/anchorrag-open-world-kgqa.md). The paper ran on Freebase; linkedqa
runs it on the KB's Wikidata graph (``kg=duckdb``, or any SPARQL endpoint with ``kg=sparql endpoint=URL``).
Prompts: ``prompts/anchorrag_prompts.json`` (the paper's Tables 7-8; see its ``_source`` note).

Here: ``Prompts`` (each step's request from the prompt texts), the retriever agents (``Retriever``,
``prune_round``), the shared keyword step (``ask_keywords``) and the step machines ``anchorrag_agent`` and
``tog_agent``. Their options are ``tasks.methods.anchorrag.settings``, their tools
``tasks.methods.anchorrag.tools``, the registered Method classes (``cot`` included) ``tasks.methods.anchorrag.method``.

``anchorrag`` (§3.3-3.5), per question:

1. **Predictor**: the keyword prompt lists the topic entities; each keyword is searched in the dense index of
   entity names and descriptions (all-MiniLM-L6-v2 + FAISS, ``kb_indexes.dense_entity_index``; ``n_candidates``
   per keyword); **relation-aware grounding** scores each candidate by Eq. 1-2 (mean of its top-``k`` 1-hop
   relation similarities to the question, ``tasks.methods.anchorrag.graph``) and keeps the top-``m`` as anchors.
2. **Retrievers**: one agent per anchor. Each round, for each of an agent's current entities: relation pruning
   prompt -> top-``b`` relations (identifier/media and visited relations removed); their neighbours; entity
   pruning prompt -> top-``b`` entities per relation (no LLM call when there are at most ``b``); then the agent's
   candidate triples go through the triple filtering prompt. An agent whose filter keeps nothing stops
   ("early stopping"); the others continue from the kept triples' entities (at most ``b`` per agent).
3. **Supervisor**: after each round, the sufficiency prompt over every active agent's kept triples: ``{Yes}``
   answers (``answered_by = retrieval``); otherwise the next round. When no agent remains or depth ``L`` is
   reached, the CoT prompt answers from the LLM's own knowledge (``answered_by = cot``).

All LLM requests of a step -- every agent's, every entity's -- go in one batched list (and the runtime merges
the lists of all questions of the shard into one ``generate`` call); all KG and SBERT lookups of a step go in one
tool call.

``tog`` (Think-on-Graph as the paper's baseline, §4.3): the keyword prompt, BM25 label search (string matching:
what typos break), the LLM picks the anchors among the hits (``anchor_select`` prompt), then ToG's beam search:
per frontier entity relation pruning (top-``width`` with scores), neighbours, entity scoring (skipped for a
single candidate), candidate score = relation score x entity score, the ``width`` best triples overall make the
next frontier; the sufficiency prompt after each depth; at depth ``depth`` (or when nothing new is found) ToG's
answer prompt over the triples gathered, or CoT when there are none.

``cot``: ToG's CoT prompt (``style=cot``, six worked examples) or IO prompt (``style=io``, the same questions with
answers only); one call.

Outputs per question: ``answer`` = the final response as generated (the ``tog`` metrics extract ``{...}``
themselves), ``answers`` = ``[extracted answer]``, ``predicted_entities`` = the anchors; trajectory notes
``{"anchors": ...}`` and ``{"answered_by": "retrieval"|"cot"}``; ``scores.parse_failures`` counts outputs no
parser could read.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Literal

from tasks.llm.types import ChatRequest, Completion, SamplingConfig
from tasks.methods.anchorrag.graph import (
    Neighbour,
    RelationChoice,
    neighbours_of,
    rank_anchors,
    relation_choices,
)
from tasks.methods.anchorrag.parsing import (
    parse_choice_numbers,
    parse_entity_scores,
    parse_filtered_triples,
    parse_keywords,
    parse_relation_scores,
    parse_sufficient,
)
from tasks.methods.anchorrag.settings import AnchorRagSettings, CotSettings, OpenWorldKgSettings, TogSettings
from tasks.methods.kg_context import approx_tokens
from tasks.methods.prompt_files import PromptFolder
from tasks.methods.records import AgentResult, note_answered_by
from tasks.methods.runtime import AgentError, AgentFn, ItemContext, LLMCall, ToolCall
from tasks.metrics.tog import tog_extract

PROMPTS = PromptFolder(__file__)
STOP_STEP = ("\nQuestion:", "\nQ:", "\n\n\n")
STOP_ANSWER = ("\nQ:", "\n\nQ")


@functools.cache
def prompts() -> dict[str, str]:
    """The prompt texts (``prompts/anchorrag_prompts.json``)."""
    return PROMPTS.json("anchorrag_prompts.json")


# ------------------------------------------------------------------------------------------------ prompts
#: Words of one guided keyword (a topic entity's name).
KEYWORD_WORDS = 8


def keywords_regex(max_keywords: int) -> str:
    """Guided keyword reply: one line of 1 to ``max_keywords`` comma-separated keywords.

    That is ``parse_keywords``' format; each keyword has 1 to ``KEYWORD_WORDS`` words with no comma, newline
    or leading/trailing space.
    """
    word = r"[^,\s]+"
    kw = rf"{word}( {word}){{0,{KEYWORD_WORDS - 1}}}"
    return rf"{kw}(, {kw}){{0,{max(0, max_keywords - 1)}}}"


class Prompts:
    """Builds each step's request from the prompt texts and the sampling settings."""

    def __init__(self, s: OpenWorldKgSettings | CotSettings):
        """Read the sampling options (``cot`` has no step bound, no triples and no guided keywords)."""
        self.p = prompts()
        kg = s if isinstance(s, OpenWorldKgSettings) else None
        steps = kg.max_tokens_step if kg else s.max_tokens
        self.step = SamplingConfig(temperature=s.temperature, max_tokens=steps, stop=STOP_STEP, seed=s.seed)
        self.keywords_sampling = SamplingConfig(temperature=s.temperature, max_tokens=min(steps, 64),
                                                stop=("\n",), seed=s.seed)
        self.final = SamplingConfig(temperature=s.temperature, max_tokens=s.max_tokens, stop=STOP_ANSWER,
                                    seed=s.seed)
        self.max_triples = kg.max_triples if kg else OpenWorldKgSettings.model_fields["max_triples"].default
        if kg and kg.guided:
            self.keywords_sampling = self.keywords_sampling.model_copy(
                update={"regex": keywords_regex(kg.max_keywords)})

    def _req(self, text: str, sampling: SamplingConfig) -> LLMCall:
        return LLMCall(ChatRequest(messages=[{"role": "user", "content": text}], sampling=sampling))

    def keywords(self, question: str) -> LLMCall:
        """Candidate-entity generation (Table 7)."""
        return self._req(self.p["keywords"].format(question=question), self.keywords_sampling)

    def relations(self, question: str, entity: str, names: list[str], b: int) -> LLMCall:
        """Relation pruning (Table 7), ``b`` relations to pick."""
        return self._req(self.p["relations"].format(b=b, question=question, entity=entity,
                                                    relations="; ".join(names)), self.step)

    def entities(self, question: str, relation: str, names: list[str]) -> LLMCall:
        """Entity pruning (Table 8)."""
        return self._req(self.p["entities"].format(question=question, relation=relation,
                                                   entities="; ".join(names)), self.step)

    def filter(self, question: str, triples: list[str]) -> LLMCall:
        """Triple filtering (Table 8)."""
        return self._req(self.p["filter"].format(question=question, triples="\n".join(triples)), self.step)

    def evaluate(self, question: str, triples: list[str]) -> LLMCall:
        """Sufficiency evaluation (Table 8): ``{Yes}. ... {answer}`` or ``{No}. ...``."""
        return self._req(self.p["evaluate"].format(question=question, triples="\n".join(self.fit(triples))),
                         self.final)

    def answer(self, question: str, triples: list[str]) -> LLMCall:
        """ToG's answer prompt over the gathered triples."""
        return self._req(self.p["answer"].format(question=question, triples="\n".join(self.fit(triples))),
                         self.final)

    def cot(self, question: str, style: str = "cot") -> LLMCall:
        """ToG's CoT (or IO) prompt: the LLM's own knowledge."""
        return self._req(self.p[style].format(question=question), self.final)

    def anchor_select(self, question: str, candidates: list[dict]) -> LLMCall:
        """ToG baseline's anchor choice among search hits (numbered ``label: description``)."""
        lines = [f"{i + 1}. {c.get('title') or c['qid']}" + (f": {c['description'][:100]}" if c.get("description")
                                                              else "") for i, c in enumerate(candidates)]
        return self._req(self.p["anchor_select"].format(question=question, candidates="\n".join(lines)),
                         self.step)

    def fit(self, triples: list[str]) -> list[str]:
        """The first triples that fit ``max_triples`` and about 2,000 tokens."""
        out, used = [], 0
        for t in triples[: self.max_triples]:
            used += approx_tokens(t) + 1
            if used > 2000:
                break
            out.append(t)
        return out


def _text(c: Completion, step: str) -> str:
    if c.error:
        raise AgentError(f"LLM error at {step} step: {c.error}")
    return c.text


def _tool(result: Any, tool: str) -> Any:
    if isinstance(result, dict) and "error" in result:
        raise AgentError(f"error in {tool}: {result['error']}")
    return result


def _final(response: str, source: Literal["retrieval", "cot"], anchors: list[str], ictx: ItemContext,
           failures: int) -> AgentResult:
    ictx.log(note_answered_by(source))
    answer = tog_extract(response)
    return AgentResult(answer=response, answers=[answer] if answer else [], predicted_entities=anchors,
                       scores={"parse_failures": float(failures)})


# ------------------------------------------------------------------------------------------------ retrieval
@dataclass
class Retriever:
    """One retriever agent: its anchor, current entities, visited relations, and kept triples."""

    anchor: str
    frontier: list[tuple[str, str]]
    visited: set[tuple[str, str]] = field(default_factory=set)
    kept: list[str] = field(default_factory=list)
    active: bool = True
    fresh: bool = False


def _relations_by_entity(result: dict, qids: list[str]) -> dict[str, list]:
    rels = _tool(result, "kg_relations")["relations"]
    return {q: rels.get(q, []) for q in qids}


def prune_round(p: Prompts, question: str, agents: list[Retriever], b: int, s: OpenWorldKgSettings,
                use_filter: bool, ictx: ItemContext) -> Generator[Any, Any, int]:
    """One AnchorRAG retrieval round for every active agent (relation -> entity pruning -> triple filtering).

    Updates the agents in place (``fresh``: the agent kept triples this round; ``active``: it has entities to
    continue from); returns the number of unreadable LLM outputs.
    """
    failures = 0
    active = [a for a in agents if a.active and a.frontier]
    qids = list(dict.fromkeys(q for a in active for q, _ in a.frontier))
    rels = _relations_by_entity((yield ToolCall("kg_relations", {"qids": qids})), qids) if qids else {}
    # relation pruning: one request per (agent, current entity) with candidate relations
    slots: list[tuple[Retriever, str, str, list[RelationChoice]]] = []
    for a in active:
        for q, name in a.frontier:
            choices = relation_choices(rels.get(q, []), a.visited, s.max_relations)
            if choices:
                slots.append((a, q, name, choices))
    picked: list[tuple[Retriever, str, str, RelationChoice, float]] = []
    if slots:
        outs = yield [p.relations(question, name, [c.name for c in ch], b) for _, _, name, ch in slots]
        for (a, q, name, ch), out in zip(slots, outs, strict=True):
            chosen = parse_relation_scores(_text(out, "relation pruning"), [c.name for c in ch], b)
            failures += not chosen
            for idx, score in chosen:
                a.visited.add((ch[idx].pid, ch[idx].direction))
                picked.append((a, q, name, ch[idx], score))
    # neighbours of every picked relation, one KG call
    cands: list[tuple[Retriever, RelationChoice, float, list[Neighbour]]] = []
    if picked:
        pairs = [[q, rel.pid, rel.direction] for _, q, _, rel, _ in picked]
        facts = _tool((yield ToolCall("kg_neighbours", {"pairs": pairs})), "kg_neighbours")["facts"]
        for (a, q, name, rel, score), fs in zip(picked, facts, strict=True):
            nb = neighbours_of(q, name, rel, fs, s.max_entities_shown)
            if nb:
                cands.append((a, rel, score, nb))
    # entity pruning where a relation has more than b neighbours
    ranked: dict[int, list[tuple[Neighbour, float]]] = {}
    need = [i for i, (_, _, _, nb) in enumerate(cands) if len(nb) > b]
    if need:
        outs = yield [p.entities(question, cands[i][1].name, [n.name for n in cands[i][3]]) for i in need]
        for i, out in zip(need, outs, strict=True):
            nb = cands[i][3]
            scores = parse_entity_scores(_text(out, "entity pruning"), len(nb))
            failures += scores is None
            scores = scores or [1.0 / len(nb)] * len(nb)
            order = sorted(range(len(nb)), key=lambda j: -scores[j])[:b]
            ranked[i] = [(nb[j], cands[i][2] * scores[j]) for j in order]
    for i, (_, _, score, nb) in enumerate(cands):
        ranked.setdefault(i, [(n, score) for n in nb])
    # triple filtering per agent
    per_agent: dict[int, list[tuple[Neighbour, float]]] = {}
    for i, (a, _, _, _) in enumerate(cands):
        per_agent.setdefault(id(a), []).extend(ranked[i])
    filt = [a for a in active if per_agent.get(id(a))]
    kept: dict[int, list[tuple[Neighbour, float]]] = {}
    if filt and use_filter:
        shown = {id(a): per_agent[id(a)][: s.max_triples] for a in filt}
        outs = yield [p.filter(question, [n.triple for n, _ in shown[id(a)]]) for a in filt]
        for a, out in zip(filt, outs, strict=True):
            idx = parse_filtered_triples(_text(out, "triple filtering"), [n.triple for n, _ in shown[id(a)]])
            kept[id(a)] = [shown[id(a)][j] for j in idx]
    elif filt:
        kept = {id(a): per_agent[id(a)] for a in filt}
    for a in agents:
        a.fresh = False
    for a in active:
        mine = kept.get(id(a), [])
        a.fresh = bool(mine)
        if not mine:
            a.active = False  # early stop: nothing relevant on this path
            a.frontier = []
            continue
        a.kept.extend(t for t in (n.triple for n, _ in mine) if t not in a.kept)
        nxt = sorted((x for x in mine if x[0].qid), key=lambda x: -x[1])
        a.frontier = list(dict.fromkeys((n.qid, n.name) for n, _ in nxt))[:b]
        a.active = bool(a.frontier)
    ictx.log({"round": [{"anchor": a.anchor, "active": a.active, "kept": len(a.kept)} for a in agents]})
    return failures


# ------------------------------------------------------------------------------------------------ agents
def ask_keywords(p: Prompts, question: str, max_keywords: int) -> Generator[Any, Any, tuple[list[str], int]]:
    """The keyword step shared by ``anchorrag`` and ``tog``: ``(keywords, failures)``.

    An unreadable reply counts one parse failure and searches the whole question instead.
    """
    kw = parse_keywords(_text((yield p.keywords(question)), "keywords"), max_keywords)
    return (kw, 0) if kw else ([question], 1)


def anchorrag_agent(s: AnchorRagSettings) -> AgentFn:
    """The AnchorRAG step machine (see the module docstring)."""
    p = Prompts(s)

    def agent(item: dict, ictx: ItemContext):
        q = item["question"]
        kw, failures = yield from ask_keywords(p, q, s.max_keywords)
        hits = _tool((yield ToolCall("entity_dense_search", {"queries": kw, "k": s.n_candidates})),
                     "entity_dense_search")
        pool: dict[str, tuple[float, str]] = {}
        for per_kw in hits:
            for h in per_kw:
                if h["qid"] not in pool or h["score"] > pool[h["qid"]][0]:
                    pool[h["qid"]] = (h["score"], h.get("label") or h["qid"])
        candidates = sorted(pool.items(), key=lambda kv: -kv[1][0])
        if s.grounding and candidates:
            qids = [c for c, _ in candidates]
            rels = _relations_by_entity((yield ToolCall("kg_relations", {"qids": qids})), qids)
            labels = {c: [r.label for r in relation_choices(rels[c], limit=10_000)] for c in qids}
            sims = _tool((yield ToolCall("relation_similarity", {"query": q, "texts": labels})),
                         "relation_similarity")
            top = rank_anchors([(c, v[0]) for c, v in candidates], sims, s.k, s.m)
        else:
            top = [(c, v[0]) for c, v in candidates[: s.m]]
        names = {c: v[1] for c, v in candidates}
        anchors = [c for c, _ in top]
        ictx.log({"keywords": kw, "candidates": len(candidates),
                  "anchors": [{"qid": c, "label": names.get(c), "score": round(sc, 4)} for c, sc in top]})
        agents = [Retriever(c, [(c, names.get(c) or c)]) for c in anchors]
        for _depth in range(1, s.depth + 1):
            failures += yield from prune_round(p, q, agents, s.width, s, s.filter, ictx)
            live = [a for a in agents if a.fresh]  # agents whose path yielded triples this round
            if not live:
                break
            triples = list(dict.fromkeys(t for a in live for t in a.kept))
            out = _text((yield p.evaluate(q, triples)), "sufficiency")
            verdict = parse_sufficient(out)
            failures += verdict is None
            if verdict:
                return _final(out, "retrieval", anchors, ictx, failures)
        out = _text((yield p.cot(q)), "CoT fallback")
        return _final(out, "cot", anchors, ictx, failures)

    return agent


def tog_agent(s: TogSettings) -> AgentFn:
    """The ToG baseline step machine (see the module docstring)."""
    p = Prompts(s)

    def agent(item: dict, ictx: ItemContext):
        q = item["question"]
        kw, failures = yield from ask_keywords(p, q, s.max_keywords)
        hits = _tool((yield ToolCall("entity_search", {"queries": kw, "k": s.search_k})), "entity_search")
        cands = list({c["qid"]: c for per_kw in hits for c in per_kw}.values())
        anchors: list[str] = []
        if cands:
            out = _text((yield p.anchor_select(q, cands)), "anchor choice")
            idx = parse_choice_numbers(out, len(cands), s.max_anchors)
            failures += not idx
            anchors = [cands[i]["qid"] for i in idx]
        names = {c["qid"]: c.get("title") or c["qid"] for c in cands}
        ictx.log({"keywords": kw, "candidates": len(cands),
                  "anchors": [{"qid": a, "label": names[a]} for a in anchors]})
        frontier = [(a, names[a]) for a in anchors]
        visited: set[tuple[str, str, str]] = set()
        chain: list[str] = []
        for _depth in range(1, s.depth + 1):
            if not frontier:
                break
            qids = [f for f, _ in frontier]
            rels = _relations_by_entity((yield ToolCall("kg_relations", {"qids": qids})), qids)
            slots = []
            for e, name in frontier:
                ch = [c for c in relation_choices(rels.get(e, []), set(), s.max_relations)
                      if (e, c.pid, c.direction) not in visited]
                if ch:
                    slots.append((e, name, ch))
            picked = []
            if slots:
                outs = yield [p.relations(q, name, [c.name for c in ch], s.width) for _, name, ch in slots]
                for (e, name, ch), out in zip(slots, outs, strict=True):
                    chosen = parse_relation_scores(_text(out, "relation pruning"), [c.name for c in ch], s.width)
                    failures += not chosen
                    for i, sc in chosen:
                        visited.add((e, ch[i].pid, ch[i].direction))
                        picked.append((e, name, ch[i], sc))
            scored: list[tuple[Neighbour, float]] = []
            if picked:
                pairs = [[e, rel.pid, rel.direction] for e, _, rel, _ in picked]
                facts = _tool((yield ToolCall("kg_neighbours", {"pairs": pairs})), "kg_neighbours")["facts"]
                groups = [(rel, sc, neighbours_of(e, name, rel, fs, s.max_entities_shown))
                          for (e, name, rel, sc), fs in zip(picked, facts, strict=True)]
                many = [g for g in groups if len(g[2]) > 1]
                ent_scores: dict[int, list[float]] = {}
                if many:
                    outs = yield [p.entities(q, rel.name, [n.name for n in nb]) for rel, _, nb in many]
                    for g, out in zip(many, outs, strict=True):
                        sc = parse_entity_scores(_text(out, "entity scoring"), len(g[2]))
                        failures += sc is None
                        ent_scores[id(g)] = sc or [1.0 / len(g[2])] * len(g[2])
                for g in groups:
                    rel, rsc, nb = g
                    for n, esc in zip(nb, ent_scores.get(id(g), [1.0] * len(nb)), strict=True):
                        scored.append((n, rsc * esc))
            best = [x for x in sorted(scored, key=lambda x: -x[1]) if x[1] > 0][: s.width]
            if not best:
                break
            chain.extend(t for t in (n.triple for n, _ in best) if t not in chain)
            out = _text((yield p.evaluate(q, chain)), "sufficiency")
            verdict = parse_sufficient(out)
            failures += verdict is None
            if verdict:
                return _final(out, "retrieval", anchors, ictx, failures)
            frontier = list(dict.fromkeys((n.qid, n.name) for n, _ in best if n.qid))
        if chain:
            out = _text((yield p.answer(q, chain)), "answer")
            return _final(out, "retrieval", anchors, ictx, failures)
        out = _text((yield p.cot(q)), "CoT")
        return _final(out, "cot", anchors, ictx, failures)

    return agent
