"""KGQA step machines and prompt building: ``kg-1hop``, ``react-kg``, KGQA ``closed-book``, answer linking.

Paper: Cuellar, Allard and Payano, ../shared/papers/qald10-react-wikidata.md.

Here: ``Prompter`` (the paper's conversation for every step, from ``prompts/``), the shared steps
(``link_main_entity``, ``answer_question``, ``link_answers``, ``local_gold``) and the step machines
``kg_one_hop_agent``, ``react_kg_agent`` (with ``traverse``) and ``closed_book_kg_agent``. Their options are
``tasks.methods.kgqa.settings``, their tools ``tasks.methods.kgqa.tools``, the registered Method classes
``tasks.methods.kgqa.method``.

Every LLM step uses the paper's prompts (``prompts/kgqa_prompts.json``), answers in JSON, with chain of thought
(a ``reason`` / ``information_requested`` field written before the answer; ``cot=false`` drops it) and the
paper's one-shot example (``What is the capital of France?``; ``one_shot=false`` drops it).

* ``kg-1hop`` (§3.4-3.5): the LLM names the question's main entity -> exact label/alias match in the KG
  (``kg_link``; LLM disambiguation when several entities match) -> every 1-hop property of that entity
  (identifier/media properties filtered, one message per property, bounded to the context window) -> answer.
* ``react-kg`` (§3.6): from the main entity, repeat: *action* list the current entities' properties ->
  *observation* the LLM picks one -> its values are fetched -> *thought* when they are entities and the depth
  allows, the LLM judges the tentative answer (``correct`` / ``require_more_details`` / ``wrong``): correct
  answers now, otherwise the values become the current entities one hop deeper (``max_depth``, default 3).
* closed-book (§4.2): the same QA prompt with no KG context (``closed_book_kg_tools`` /
  ``closed_book_kg_agent``, called by ``tasks.methods.qa.method`` for KGQA datasets).

Answers are post-processed to the datasets' formats (``tasks.methods.kgqa.answers``) and entity answers are linked back
to QIDs (§3.7): first to an entity shown in the LLM's context with that label (no search needed), else by exact
label/alias match in the KG, else by BM25 over the KB's labels and aliases (``link_search_k`` candidates); one
candidate is taken as is, several go to the paper's answer-linking disambiguation prompt. Unlinked answers stay
text. A main entity with no match is answered without KG context, as in the paper.

Inputs: question rows; tools ``kg_link``, ``kg_facts``, ``kg_relations``, ``kg_neighbours``
(``tasks.methods.kg_tools``) and ``entity_search`` (``tasks.search.kb_indexes``). Outputs: ``predicted_entities``
(the linked main entity), ``answer`` (the formatted text answers) and ``answers`` (QIDs or literals, compared
with ``gold_answer_qids`` / ``gold_answers`` by the ``qald`` metrics).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Generator
from typing import Any

from tasks.llm.types import ChatRequest, Completion, SamplingConfig
from tasks.methods.base import MethodContext
from tasks.methods.kg_context import (
    Rendered,
    approx_tokens,
    messages_tokens,
    property_list,
    property_messages,
    remember,
)
from tasks.methods.kgqa.answers import format_answers, is_literal_answer
from tasks.methods.kgqa.kb_gold import STATUS_CODES
from tasks.methods.kgqa.parsing import (
    ANSWER_STATUSES,
    parse_answer_status,
    parse_entity_label,
    parse_item_choice,
    parse_property_choice,
    parse_qa,
)
from tasks.methods.kgqa.settings import KgqaSettings, ReactKgSettings
from tasks.methods.kgqa.tools import _can_link
from tasks.methods.prompt_files import PromptFolder
from tasks.methods.records import AgentResult
from tasks.methods.runtime import AgentError, AgentFn, ItemContext, LLMCall, ToolCall
from tasks.metrics.qald import entity_iri, qald_prf, qids_as_entities

PROMPTS = PromptFolder(__file__)
STOP = ("}",)  # every step answers one flat JSON object; the parser re-closes it
MARGIN_TOKENS = 96
MAX_ANSWERS = 20
MAX_TYPES_SHOWN = 3


def step_schema(fields: list[tuple[str, dict[str, Any]]]) -> str:
    """JSON Schema (serialized) of one step's flat JSON object: the fields in order, all required, no others."""
    return json.dumps({"type": "object", "properties": dict(fields), "required": [k for k, _ in fields],
                       "additionalProperties": False})


_TEXT: dict[str, Any] = {"type": "string"}


@functools.cache
def prompts() -> dict[str, str]:
    """The paper's prompt texts (``prompts/kgqa_prompts.json``)."""
    return PROMPTS.json("kgqa_prompts.json")


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


class Prompter:
    """Builds the paper's conversations for every step from the KGQA settings."""

    def __init__(self, settings: KgqaSettings):
        """Read the prompt and sampling options."""
        self.cot = settings.cot
        self.one_shot = settings.one_shot
        self.context_tokens = settings.context_tokens
        self.max_values = settings.max_values
        self.current_date = settings.current_date
        self.qa_sampling = SamplingConfig(temperature=settings.temperature, max_tokens=settings.max_tokens, stop=STOP,
                                          seed=settings.seed)
        self.step_sampling = SamplingConfig(temperature=settings.temperature, max_tokens=settings.max_tokens_step,
                                            stop=STOP, seed=settings.seed)
        self.p = prompts()
        self.guided = settings.guided

    def _req(self, msgs: list[dict[str, str]], sampling: SamplingConfig,
             fields: list[tuple[str, dict[str, Any]]]) -> ChatRequest:
        """The request; with ``guided`` its JSON object constrained to ``fields`` (``reason`` only with cot)."""
        if self.guided:
            kept = [(k, v) for k, v in fields if self.cot or k not in ("reason", "information_requested")]
            sampling = sampling.model_copy(update={"json_schema": step_schema(kept)})
        return ChatRequest(messages=msgs, sampling=sampling)

    def _v(self, key: str) -> str:
        return self.p[f"{key}_{'cot' if self.cot else 'direct'}"]

    def system(self, yes_no: bool = True) -> dict[str, str]:
        """The paper's system message (current date, date format, yes/no rule)."""
        text = self.p["qa_system"].replace("{current_date}", self.current_date)
        if not yes_no:
            text = text.rsplit(" Answer with either", 1)[0]
        return {"role": "system", "content": text}

    def budget(self, messages: list[dict[str, str]], sampling: SamplingConfig) -> int:
        """Tokens left for context messages once ``messages`` and the completion are accounted for."""
        return self.context_tokens - sampling.max_tokens - messages_tokens(messages) - MARGIN_TOKENS

    def identify(self, question: str) -> ChatRequest:
        """Main-entity step (prompt ``identify_entities``)."""
        msgs: list[dict[str, str]] = []
        if self.one_shot:
            msgs += [_user(f"History: [{self.p['identify_entities_example_question']}]"),
                     {"role": "assistant", "content": f"History: [{self._v('identify_entities_example_answer')}]"}]
        msgs += [_user(f"Previous user's question: {question}"), _user(self._v("identify_entities"))]
        return self._req(msgs, self.step_sampling, [("reason", _TEXT), ("main_entity_label", _TEXT)])

    def disambiguate(self, question: str, mention: str, candidates: list[dict]) -> ChatRequest:
        """Main-entity disambiguation (prompt ``disambiguate_entities``)."""
        msgs = [_user(items_text(candidates)), _user(f"Main entity: {mention}, Question: {question}"),
                _user(self.p["disambiguate_entities"])]
        return self._req(msgs, self.step_sampling, [("reason", _TEXT), ("main_entity_item_id", _qids(candidates))])

    def qa_base(self, question: str, with_info: bool) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        """The answer step around the info messages: (messages before them, messages after them)."""
        head = [self.system()]
        if self.one_shot:
            head += [_user(f"Example question: [{self.p['qa_example_question']}]"),
                     {"role": "assistant", "content": f"Example answer: [{self._v('qa_example_answer')}]"}]
        use_info = f" {self.p['qa_use_previous_info']}" if with_info else ""
        tail = [_user(f"Question: {question}"), _user(f"{self.p['qa_intro']}{use_info} {self._v('qa_content')}")]
        return head, tail

    def qa(self, question: str, info: list[str]) -> ChatRequest:
        """Answer step (prompts ``qa_*``) with the info messages (KG facts; none for closed-book)."""
        head, tail = self.qa_base(question, bool(info))
        return self._req(head + [_user(t) for t in info] + tail, self.qa_sampling,
                         [("reason", _TEXT), ("answers", {"type": "array", "items": _TEXT}),
                          ("answers_datatype", _TEXT)])

    def choose_property(self, question: str, info: list[str], step: int, entity_names: list[str],
                        allowed: dict[str, Any] | None = None) -> ChatRequest:
        """Observation step (prompts ``choose_entity_property_*``).

        ``allowed``: the listed property ids (with ``guided``, the ``property_id`` enum).
        """
        if step == 1:
            task = self.p["choose_entity_property_first_step" + ("" if self.cot else "_direct")]
        else:
            task = self.p["choose_entity_property_step_x" + ("" if self.cot else "_direct")]
            task = task.replace("{entities_name}", ", ".join(entity_names))
        prompt = f"{self.p['choose_entity_property_intro']} {task} {self._v('choose_entity_property_content')}"
        msgs = [self.system(yes_no=False), _user(f"Question: {question}"), *(_user(t) for t in info), _user(prompt)]
        pid = {"enum": list(allowed)} if allowed else _TEXT
        return self._req(msgs, self.step_sampling, [("information_requested", _TEXT), ("property_id", pid),
                                                    ("property_name", _TEXT), ("reason", _TEXT)])

    def status(self, question: str, info: list[str], tentative: str) -> ChatRequest:
        """Thought step (prompt ``has_enough_information``)."""
        msgs = [self.system(yes_no=False), *(_user(t) for t in info), _user(f"Question: {question}"),
                _user(f"Tentative answer: {tentative}"), _user(self._v("has_enough_information"))]
        return self._req(msgs, self.step_sampling, [("answer_status", {"enum": list(ANSWER_STATUSES)}),
                                                    ("reason", _TEXT)])

    def link_answer(self, question: str, answer: str, candidates: list[dict], reason: str,
                    steps: list[str] | None) -> ChatRequest:
        """Answer-linking disambiguation (prompt ``disambiguate_entities_answer_linking``)."""
        explanation = self.p["react_explanation"] if steps else ""
        prompt = self.p["disambiguate_entities_answer_linking"].replace("{react_explanation}", explanation)
        msgs = [_user(items_text(candidates))]
        if steps:
            msgs.append(_user("Step by step process: " + " ".join(steps)))
        msgs += [_user(f"Question: {question}, Reasoning: {reason}, Answer entity: '{answer}'"), _user(prompt)]
        return self._req(msgs, self.step_sampling, [("reason", _TEXT), ("answer_entity_item_id", _qids(candidates))])


def _qids(candidates: list[dict]) -> dict[str, Any]:
    """The enum of a disambiguation's QID field (the candidates shown)."""
    return {"enum": list(dict.fromkeys(c["qid"] for c in candidates))}


def items_text(candidates: list[dict]) -> str:
    """The paper's ``Wikidata items:`` listing (``Id: Q.., label: .., description: ..``)."""
    lines = ["Wikidata items:"]
    for c in candidates:
        desc = c.get("description") or (f"instance of {', '.join(c['types'][:MAX_TYPES_SHOWN])}"
                                        if c.get("types") else "")
        line = f"Id: {c['qid']}, label: {c.get('label') or c['qid']}"
        lines.append(line + (f", description: {desc[:120]}" if desc else ""))
    return "\n".join(lines)


def _checked(c: Completion, step: str) -> str:
    if c.error:
        raise AgentError(f"LLM error at {step} step: {c.error}")
    return c.text


def _tool_ok(result: Any, tool: str) -> dict:
    if not isinstance(result, dict) or "error" in result:
        msg = result.get("error") if isinstance(result, dict) else repr(result)
        raise AgentError(f"KG error in {tool}: {msg}")
    return result


# ------------------------------------------------------------------------------------------------ shared steps
def link_main_entity(p: Prompter, question: str, ctx: ItemContext) -> Generator[Any, Any, tuple[str | None, str]]:
    """Identify the main entity, match it exactly in the KG, disambiguate with the LLM when several match.

    Returns:
        ``(qid or None, the label the LLM named)``.
    """
    text = _checked((yield LLMCall(p.identify(question))), "identify-entity")
    label = parse_entity_label(text)
    if not label:
        raise AgentError("no main_entity_label in the identify-entity output")
    res = _tool_ok((yield ToolCall("kg_link", {"texts": [label]})), "kg_link")
    cands = res["candidates"][0]
    ctx.log({"step": "main_entity", "label": label, "candidates": [c["qid"] for c in cands]})
    if not cands:
        return None, label
    if len(cands) == 1:
        return cands[0]["qid"], label
    text = _checked((yield LLMCall(p.disambiguate(question, label, cands))), "disambiguation")
    qid = parse_item_choice(text, "main_entity_item_id", [c["qid"] for c in cands])
    if qid is None:
        raise AgentError(f"the disambiguation output names none of the {len(cands)} candidates")
    ctx.log({"step": "main_entity_disambiguated", "qid": qid})
    return qid, label


def answer_question(p: Prompter, question: str, info: list[str], known_qids: set[str],
                    ctx: ItemContext) -> Generator[Any, Any, tuple[list[str], str]]:
    """The answer step: prompt, parse, post-process.

    Returns:
        ``(formatted answers, reason)``.
    """
    text = _checked((yield LLMCall(p.qa(question, info))), "answer")
    parsed = parse_qa(text)
    if parsed is None:
        raise AgentError("no answers field in the answer output")
    answers = format_answers(parsed["answers"], parsed["answers_datatype"], known_qids)[:MAX_ANSWERS]
    ctx.log({"step": "answer", "raw_answers": parsed["answers"][:MAX_ANSWERS], "answers": answers,
             "datatype": parsed["answers_datatype"]})
    return answers, parsed["reason"]


def link_answers(p: Prompter, question: str, answers: list[str], shown: Rendered | None, reason: str,
                 steps: list[str] | None, search_k: int, ctx: ItemContext) -> Generator[Any, Any, list[str]]:
    """Link entity answers back to QIDs (paper §3.7); literals, booleans, dates and QIDs pass unchanged.

    Order: a value label shown in the context -> exact label/alias match in the KG -> BM25 top ``search_k``;
    one candidate is taken, several are disambiguated by the LLM (all of an item's answers in one step).
    """
    out = list(answers)
    todo: dict[int, str] = {}
    how: dict[str, str] = {}
    for i, a in enumerate(answers):
        if is_literal_answer(a):
            continue
        q = shown.names.get(a.lower()) if shown is not None else None
        if q:
            out[i], how[a] = q, "context"
        else:
            todo[i] = a
    pending: dict[int, list[dict]] = {}
    if todo:
        res = _tool_ok((yield ToolCall("kg_link", {"texts": list(todo.values())})), "kg_link")
        no_match: list[int] = []
        for (i, a), cands in zip(todo.items(), res["candidates"], strict=True):
            if len(cands) == 1:
                out[i], how[a] = cands[0]["qid"], "exact"
            elif cands:
                pending[i] = cands
            else:
                no_match.append(i)
        if no_match and search_k > 0:
            hits = yield ToolCall("entity_search", {"queries": [todo[i] for i in no_match], "k": search_k})
            if isinstance(hits, list):
                for i, cands in zip(no_match, hits, strict=True):
                    if cands:
                        pending[i] = [{"qid": c["qid"], "label": c.get("title"), "description": c.get("description")}
                                      for c in cands if c.get("qid")]
    if pending:
        order = list(pending)
        calls = [LLMCall(p.link_answer(question, todo[i], pending[i], reason, steps)) for i in order]
        replies = yield calls
        for i, c in zip(order, replies, strict=True):
            qid = None if c.error else parse_item_choice(c.text, "answer_entity_item_id",
                                                         [x["qid"] for x in pending[i]])
            if qid:
                out[i], how[todo[i]] = qid, "disambiguated"
            else:
                how[todo[i]] = "unlinked"
    linked: list[str] = []
    for a in out:
        if a not in linked:
            linked.append(a)
    if how:
        ctx.log({"step": "answer_linking", "how": how, "answers": linked})
    return linked


def _entity_header(qid: str, label: str | None, facts: list[dict]) -> str:
    types = [f.get("ol") or f["o"] for f in facts if f["p"] == "P31" and f.get("o")][:MAX_TYPES_SHOWN]
    text = f"Wikidata id:{qid}, label: {label or qid}"
    return text + (f", instance of: {', '.join(types)}" if types else "")


def _result(main: str | None, answers: list[str], linked: list[str], gold: dict | None = None) -> AgentResult:
    scores = {}
    if gold is not None:
        local = [*map(entity_iri, gold["qids"]), *gold["literals"]]
        scores = {**gold["scores"],
                  "kb_gold_answer_f1": qald_prf(qids_as_entities(linked), local)[2] if local else 0.0}
    return AgentResult(predicted_entities=[main] if main else [], answer="; ".join(answers), answers=linked,
                       scores=scores)


def local_gold(enabled: bool, item: dict, ctx: ItemContext) -> Generator[Any, Any, dict | None]:
    """The local KB's answers to the item's gold query (``kb_gold=true``), with its per-question scores."""
    if not enabled:
        return None
    res = yield ToolCall("kb_gold", {"sparql": item.get("sparql")})
    local = res["qids"] + res["literals"]
    gold = [*map(entity_iri, item.get("gold_answer_qids") or [])] or list(item.get("gold_answers") or [])
    typed = [*map(entity_iri, res["qids"]), *res["literals"]]
    scores = {"kb_gold_status": STATUS_CODES[res["status"]], "kb_gold_n": float(len(local)),
              "kb_gold_f1": qald_prf(typed, gold)[2] if res["status"] == "answered" else 0.0}
    ctx.log({"step": "kb_gold", "status": res["status"], "answers": local[:MAX_ANSWERS]})
    return {**res, "scores": scores}


# ------------------------------------------------------------------------------------------------ agents
def kg_one_hop_agent(settings: KgqaSettings) -> AgentFn:
    """The ``kg-1hop`` step machine (paper §3.4-3.5)."""
    p = Prompter(settings)
    search_k = settings.link_search_k

    def agent(item: dict, ctx: ItemContext):
        question = item["question"]
        gold = yield from local_gold(settings.kb_gold, item, ctx)
        qid, label = yield from link_main_entity(p, question, ctx)
        info: list[str] = []
        shown = Rendered()
        if qid is not None:
            res = _tool_ok((yield ToolCall("kg_facts", {"qids": [qid]})), "kg_facts")
            facts = res["facts"].get(qid, [])
            header = _entity_header(qid, res["labels"].get(qid) or label, facts)
            head, tail = p.qa_base(question, True)
            budget = p.budget(head + tail + [_user(header)], p.qa_sampling)
            shown = property_messages(facts, budget, settings.max_values)
            shown.qids.add(qid)
            info = [header, *shown.messages]
            ctx.log({"step": "facts", "qid": qid, "facts": len(facts), "properties_total": shown.total,
                     "properties_shown": len(shown.shown)})
        answers, reason = yield from answer_question(p, question, info, shown.qids, ctx)
        linked = answers
        if settings.link_answers:
            linked = yield from link_answers(p, question, answers, shown, reason, None, search_k, ctx)
        return _result(qid, answers, linked, gold)

    return agent


def react_kg_agent(settings: ReactKgSettings) -> AgentFn:
    """The ``react-kg`` step machine (paper §3.6, Figure 1), up to ``max_depth`` hops."""
    p = Prompter(settings)

    def agent(item: dict, ctx: ItemContext):
        question = item["question"]
        gold = yield from local_gold(settings.kb_gold, item, ctx)
        qid, label = yield from link_main_entity(p, question, ctx)
        info: list[str] = []
        steps: list[str] = []
        shown = Rendered()
        if qid is not None:
            info, steps, shown = yield from traverse(p, settings, question, qid, label, ctx)
        answers, reason = yield from answer_question(p, question, info, shown.qids, ctx)
        linked = answers
        if settings.link_answers:
            linked = yield from link_answers(p, question, answers, shown, reason, steps, settings.link_search_k, ctx)
        return _result(qid, answers, linked, gold)

    return agent


def traverse(p: Prompter, settings: ReactKgSettings, question: str, qid: str, label: str,
             ctx: ItemContext) -> Generator[Any, Any, tuple[list[str], list[str], Rendered]]:
    """The action / observation / thought loop from the main entity.

    Returns:
        ``(info messages for the answer step, step summaries for answer linking, what was shown)``.
    """
    frontier = [qid]
    names: dict[str, str] = {qid: label}
    info: list[str] = []
    steps: list[str] = []
    shown = Rendered(qids={qid})
    for depth in range(1, settings.max_depth + 1):
        res = _tool_ok((yield ToolCall("kg_relations", {"qids": frontier})), "kg_relations")
        names.update({q: lab for q, lab in res["labels"].items() if lab})
        if depth == 1:
            info = [f"Current entity: {names.get(qid, label)} ({qid})"]
        rels = [r for q in frontier for r in res["relations"].get(q, [])]
        entity_names = [f"{names.get(q, q)} ({q})" for q in frontier]
        heading = "List of properties" if depth == 1 else f"List of properties for {', '.join(entity_names)}"
        base = p.choose_property(question, info, depth, entity_names)
        listing, listed = property_list(rels, p.budget(list(base.messages), p.step_sampling), heading)
        if not listed:
            ctx.log({"step": f"hop{depth}", "note": "no properties to traverse"})
            break
        text = _checked((yield LLMCall(p.choose_property(question, [*info, listing], depth, entity_names, listed))),
                        f"choose-property (hop {depth})")
        pid, requested, _reason = parse_property_choice(text, listed)
        if pid is None:
            raise AgentError(f"hop {depth}: the chosen property is not among the {len(listed)} listed ones")
        got = _tool_ok((yield ToolCall("kg_neighbours", {"pairs": [[q, pid, "out"] for q in frontier]})),
                       "kg_neighbours")
        facts = [f for fs in got["facts"] for f in fs]
        children = list(dict.fromkeys(f["o"] for f in facts if f.get("o")))
        query = f"Query: {', '.join(names.get(q, q) for q in frontier)} => {listed[pid]} ({pid})"
        values = [f"{f.get('ol') or f['o']} ({f['o']})" if f.get("o") else str(f.get("ov"))
                  for f in facts[: settings.max_values]]
        ctx.log({"step": f"hop{depth}", "property": pid, "values": len(facts), "entities": len(children)})
        if children and depth < settings.max_depth:
            step_info = [f"Step {depth} : {requested}" if requested else f"Step {depth}", query]
            tentative = ", ".join(f.get("ol") or f["o"] for f in facts if f.get("o"))[:1500]
            text = _checked((yield LLMCall(p.status(question, step_info, tentative))), f"thought (hop {depth})")
            status = parse_answer_status(text)
            if status is None:
                raise AgentError(f"hop {depth}: no answer_status in the thought output")
            ctx.log({"step": f"hop{depth}", "answer_status": status})
            if status != "correct":
                steps += [step_info[0], f"{query}, Results: {', '.join(values)}"]
                info = [*steps]
                remember(shown, facts)
                frontier = children[: settings.max_frontier]
                names.update({f["o"]: f["ol"] for f in facts if f.get("o") and f.get("ol")})
                continue
        steps += [f"Step {depth} : {requested}" if requested else f"Step {depth}", query]
        head, tail = p.qa_base(question, True)
        budget = p.budget(head + tail + [_user(t) for t in info], p.qa_sampling)
        for q in frontier:
            per = [f for f in facts if f["s"] == q]
            prefix = f"Entity: {names.get(q, q)} ({q}), " if depth > 1 else ""
            r = property_messages(per, budget, settings.max_values, prefix)
            budget -= sum(approx_tokens(m) + 4 for m in r.messages)
            info.extend(r.messages)
            shown.names.update(r.names)
            shown.qids |= r.qids
        break
    return info, steps, shown


def closed_book_kg_agent(settings: KgqaSettings, ctx: MethodContext) -> AgentFn:
    """The KGQA closed-book step machine (paper §4.2 "LLM only", then answer linking as §3.7).

    Args:
        settings: ``closed-book``'s options as KGQA settings (``ClosedBookSettings.kgqa``).
        ctx: The method context.

    Returns:
        An agent returning ``{"answer", "answers", "predicted_entities": []}``.
    """
    p = Prompter(settings)
    link = settings.link_answers and _can_link(settings, ctx)
    search_k = settings.link_search_k if ctx.kb_version else 0  # no KB: no BM25 index (kgqa_tools adds none)

    def agent(item: dict, ictx: ItemContext):
        answers, reason = yield from answer_question(p, item["question"], [], set(), ictx)
        linked = answers
        if link:
            linked = yield from link_answers(p, item["question"], answers, None, reason, None, search_k, ictx)
        return _result(None, answers, linked)

    return agent
