"""ELA: the entity-linking agent (Luo et al.; ../shared/papers/ela-entity-linking-agent.md, Figure 2).

Workflow per question: ``<link>q</link>`` -> the LLM emits ``<search> Search(m1) Search(m2) </search>`` ->
ONE batched BM25 search for every mention of every active question -> candidates shown as
``[i] title: description`` (top-K=50 per mention, global indexes across mentions) -> the LLM answers
``<think>...</think> <answer>[i][j]</answer>``; an empty answer is allowed. Sampling T=0.7, top_p=0.8,
repetition penalty 1.05 (paper, Implementation Details). Sources: ``wikidata`` (labels+aliases BM25,
description = Wikidata description) and ``wikipedia`` (article-title BM25, description = lead paragraph).

Inputs: question rows. Outputs: ``predicted_entities`` (QIDs), the trajectory, and optionally SFT records
(self-play export: trajectories whose predicted set equals gold).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from tasks.llm.types import ChatRequest, SamplingConfig
from tasks.methods.base import Method, MethodContext, MethodSettings, source_index_paths
from tasks.methods.prompt_files import PromptFolder
from tasks.methods.records import AgentResult, ItemOutput
from tasks.methods.runtime import AgentError, ItemContext, LLMCall, ToolCall
from tasks.search.kb_indexes import search_tool

PROMPTS = PromptFolder(__file__)
SOURCE_NAMES = {"wikidata": "Wikidata", "wikipedia": "Wikipedia"}
MAX_MENTIONS = 6
DESC_CHARS = 100
#: Bound of the guided ``<think>`` in whitespace-separated words, so the answer fits ``max_tokens_answer``
#: (~1.3 tokens per word; a character bound like ``[^<]{0,600}`` makes xgrammar's compile time explode).
GUIDED_THINK_WORDS = 60

_SEARCH_BLOCK = re.compile(r"<search>(.*?)(?:</search>|$)", re.S | re.I)
_SEARCH_CALL = re.compile(r"Search\(((?:[^()\n]|\([^()\n]*\))*)\)", re.I)
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S | re.I)
_THINK_BLOCK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S | re.I)
_INDEX = re.compile(r"\[\s*(\d+)\s*\]")


class ElaSettings(MethodSettings):
    """``--set`` options of ``ela`` (sampling and ``k``: the paper's Implementation Details)."""

    source: Literal["wikidata", "wikipedia"] = "wikidata"
    """Knowledge source searched: ``wikidata`` (BM25 over labels and aliases, Wikidata descriptions) or
    ``wikipedia`` (BM25 over article titles, lead paragraphs as descriptions)."""
    k: int = 50
    """Candidates shown per mention (paper: 50)."""
    temperature: float = 0.7
    """Sampling temperature (paper: 0.7)."""
    top_p: float = 0.8
    """Nucleus sampling top-p (paper: 0.8)."""
    repetition_penalty: float = 1.05
    """Repetition penalty (paper: 1.05)."""
    max_tokens_search: int = 96
    """Completion bound of the search step (``<search> Search(m) ... </search>``)."""
    max_tokens_answer: int = 384
    """Completion bound of the answer step (``<think> ... <answer>[i][j]</answer>``)."""
    seed: int = 0
    """Sampling seed."""
    fewshot: bool = True
    """The paper's few-shot turns after the system prompt."""
    export_sft: bool = False
    """Write the self-play data: trajectories whose linked set equals the gold set, as
    ``runs/<run_id>/sft/part-*.jsonl``."""
    answer_followup_tokens: int = 32
    """Completion bound of the one follow-up asked when the answer step hits ``max_tokens_answer`` without an
    ``<answer>`` (recorded in the trajectory, counted in the tokens). 0 turns it off: the paper's behaviour, where
    such an item ends with an error."""
    guided: bool = False
    """Structured outputs: the answer step is ``<think>`` of at most ``GUIDED_THINK_WORDS`` words then ``<answer>``
    with up to ``MAX_MENTIONS`` indexes of the candidates shown; the follow-up is ``<answer>...</answer>`` alone.
    False: the paper's free-form prompting."""


def load_prompt(source: str, fewshot: bool = True) -> list[dict[str, str]]:
    """System prompt (paper Figure 2) plus the few-shot turns."""
    system = PROMPTS.text("ela_system.txt").replace("{source_name}", SOURCE_NAMES[source])
    msgs = [{"role": "system", "content": system}]
    if fewshot:
        msgs += PROMPTS.json("ela_fewshot.json")
    return msgs


def parse_search(text: str) -> list[str] | None:
    """Mentions from ``<search> Search(x) Search(y) </search>``.

    Lenient where the intent is clear: a missing closing tag, brackets or quotes around the mention
    (``Search([Paris])``), duplicates. Returns ``[]`` for an explicit empty ``<search></search>`` and
    ``None`` when the output contains neither a search block nor a ``Search(...)`` call.
    """
    block = _SEARCH_BLOCK.search(text)
    scope = block.group(1) if block else text
    calls = _SEARCH_CALL.findall(scope)
    if not calls and block is None:
        return None
    mentions: list[str] = []
    for raw in calls:
        m = raw.strip().strip("[]\"'` ").strip()
        if m and m.lower() not in (x.lower() for x in mentions):
            mentions.append(m)
    return mentions[:MAX_MENTIONS]


def parse_answer(text: str) -> list[int] | None:
    """Candidate indexes from ``<answer>[i][j]</answer>``; ``[]`` for an empty answer, None if absent."""
    block = _ANSWER_BLOCK.search(text)
    if block is None:
        return None
    out: list[int] = []
    for m in _INDEX.findall(block.group(1)):
        i = int(m)
        if i not in out:
            out.append(i)
    return out


def parse_think(text: str) -> str:
    """The ``<think>`` rationale, or an empty string."""
    m = _THINK_BLOCK.search(text)
    return m.group(1).strip() if m else ""


def answer_regex(n_candidates: int, think: bool = True) -> str:
    """Guided-answer regex over candidate indexes ``0..n_candidates-1`` (xgrammar's regex dialect).

    ``think=True``: ``<think> w1 w2 ... </think> <answer>[i][j]</answer>`` (the answer step);
    ``think=False``: ``<answer>[i][j]</answer>`` (the follow-up). At most ``MAX_MENTIONS`` indexes; an empty
    answer stays allowed, as in the free-form prompt.
    """
    idx = "|".join(str(i) for i in range(n_candidates)) if n_candidates else None
    answer = r"<answer>" + (rf"(\[({idx})\]){{0,{MAX_MENTIONS}}}" if idx else "") + r"</answer>"
    if not think:
        return r"\s?" + answer
    return rf"<think>\s?([^<\s]+\s){{0,{GUIDED_THINK_WORDS}}}</think>\s?" + answer


def format_candidates(mentions: list[str], results: list[list[dict]]) -> tuple[str, list[dict]]:
    """Render candidate lists with global indexes; returns the text and the flat candidate list."""
    lines: list[str] = []
    flat: list[dict] = []
    for mention, cands in zip(mentions, results, strict=True):
        lines.append(f"Search({mention}):")
        if not cands:
            lines.append("(no results)")
        for c in cands:
            desc = (c.get("description") or "").replace("\n", " ").strip()
            if len(desc) > DESC_CHARS:
                desc = desc[:DESC_CHARS].rsplit(" ", 1)[0] + "..."
            lines.append(f"[{len(flat)}] {c.get('title') or c.get('qid')}: {desc or 'no description'}")
            flat.append(c)
    return "\n".join(lines), flat


def link_messages(base: list[dict[str, str]], question: str) -> list[dict[str, str]]:
    """The first turn: system prompt and few-shot turns (``base``), then ``<link>question</link>``."""
    return base + [{"role": "user", "content": f"<link>{question}</link>"}]


def answer_messages(first: list[dict[str, str]], search_output: str, listing: str) -> list[dict[str, str]]:
    """The answer turn: the first turn, the model's search output (closed), the candidate listing."""
    return first + [{"role": "assistant", "content": _close(search_output, "</search>")},
                    {"role": "user", "content": listing}]


def _sampling(settings: ElaSettings, max_tokens: int, stop: str) -> SamplingConfig:
    """The run's sampling settings with one step's token budget and stop string."""
    return SamplingConfig(temperature=settings.temperature, top_p=settings.top_p,
                          repetition_penalty=settings.repetition_penalty, max_tokens=max_tokens, stop=(stop,),
                          seed=settings.seed)


def search_sampling(settings: ElaSettings) -> SamplingConfig:
    """Sampling of the first (search) step."""
    return _sampling(settings, settings.max_tokens_search, "</search>")


def answer_sampling(settings: ElaSettings) -> SamplingConfig:
    """Sampling of the answer step (before the guided regex, which depends on the candidates)."""
    return _sampling(settings, settings.max_tokens_answer, "</answer>")


def ela_agent(settings: ElaSettings):
    """Build the ELA step machine for given settings."""
    base = load_prompt(settings.source, settings.fewshot)
    s_search = search_sampling(settings)
    s_answer = answer_sampling(settings)
    s_followup = (None if settings.answer_followup_tokens <= 0
                  else _sampling(settings, settings.answer_followup_tokens, "</answer>"))

    def agent(item: dict, ctx: ItemContext):
        msgs = link_messages(base, item["question"])
        first = yield LLMCall(ChatRequest(messages=msgs, sampling=s_search))
        if first.error:
            raise AgentError(f"LLM error at search step: {first.error}")
        mentions = parse_search(first.text)
        ctx.log({"step": "search", "parsed": mentions})
        if mentions is None:
            raise AgentError("no <search> block or Search() call in output")
        if not mentions:
            return AgentResult()
        results = yield ToolCall("entity_search", {"queries": mentions, "k": settings.k})
        listing, flat = format_candidates(mentions, results)
        msgs2 = answer_messages(msgs, first.text, listing)
        sa = s_answer.model_copy(update={"regex": answer_regex(len(flat))}) if settings.guided else s_answer
        second = yield LLMCall(ChatRequest(messages=msgs2, sampling=sa))
        if second.error:
            raise AgentError(f"LLM error at answer step: {second.error}")
        idx = _answer_indexes(second.text)
        followed_up = False
        if idx is None and second.finish_reason == "length" and s_followup is not None:
            # the reasoning ran out of tokens before the answer: ask once, with a small bound, for the answer only
            msgs3 = msgs2 + [{"role": "assistant", "content": second.text},
                             {"role": "user", "content": PROMPTS.text("ela_answer_followup.txt").strip()}]
            sf = (s_followup.model_copy(update={"regex": answer_regex(len(flat), think=False)})
                  if settings.guided else s_followup)
            third = yield LLMCall(ChatRequest(messages=msgs3, sampling=sf))
            if third.error:
                raise AgentError(f"LLM error at answer follow-up: {third.error}")
            idx = _answer_indexes(third.text)
            followed_up = True
            ctx.log({"step": "answer-followup", "reason": "max_tokens_answer reached without <answer>",
                     "parsed": idx})
            if idx is None:
                raise AgentError("no <answer> in output (also after the answer follow-up)")
        if idx is None:
            raise AgentError("no <answer> in output")
        valid = [i for i in idx if 0 <= i < len(flat)]
        if len(valid) < len(idx):
            ctx.log({"step": "answer", "out_of_range": [i for i in idx if i not in valid]})
        qids: list[str] = []
        for i in valid:
            q = flat[i].get("qid")
            if q and q not in qids:
                qids.append(q)
        ctx.log({"step": "answer", "parsed": valid, "qids": qids})
        sft = msgs2 + [{"role": "assistant", "content": _close(second.text, "</answer>")}]
        # a cut-off reasoning is no demonstration to train on: no self-play record after a follow-up
        return AgentResult(
            predicted_entities=qids, answers=[flat[i].get("title") or "" for i in valid],
            side=None if followed_up else {"messages": sft, "cot": parse_think(second.text), "mentions": mentions})

    return agent


def _answer_indexes(text: str) -> list[int] | None:
    """``parse_answer``, lenient where the intent is clear: a bare ``[i][j]`` with no tags also counts."""
    idx = parse_answer(text)
    if idx is None and re.fullmatch(r"(\s*\[\s*\d+\s*\]\s*)+", text.strip()):
        idx = [int(x) for x in _INDEX.findall(text)]
    return idx


def _close(text: str, tag: str) -> str:
    """Re-append a stop sequence vLLM stripped, so the conversation history stays well-formed."""
    t = text.rstrip()
    return t if t.endswith(tag) else f"{t} {tag}"


class ElaMethod(Method):
    """The ELA method (``linkedqa run ela``)."""

    name = "ela"
    description = "ELA entity-linking agent: Search() -> top-K candidates -> <think> -> <answer>[i][j]"
    Settings = ElaSettings
    metric_family = "linking"
    tasks = ("el", "kgqa", "qa")

    def build_tools(self, ctx: MethodContext) -> dict[str, Any]:
        """Entity search over the KB: labels+aliases (wikidata) or article titles (wikipedia)."""
        return {"entity_search": search_tool(ctx.kb_version, ctx.root, self.settings.source)}

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """The entity-search index of the ``source`` setting (built before the shards by the run flow)."""
        return source_index_paths(self.settings.source, ctx)

    def agent(self, ctx: MethodContext):
        """The ELA step machine."""
        return ela_agent(self.settings)

    def postprocess(self, outputs: list[ItemOutput], questions: list[dict], ctx: MethodContext,
                    shard: int) -> dict[str, Any] | None:
        """Self-play export: keep trajectories whose predicted set equals the gold set (paper §Implementation).

        Returns:
            ``sft/part-<shard>.jsonl`` (the kept records) and ``sft/part-<shard>.json`` (counts).
        """
        if not self.settings.export_sft:
            return None
        gold = {q["question_id"]: set(q.get("gold_entities") or []) for q in questions}
        texts = questions_by_id(questions)
        kept = []
        for o in outputs:
            sft = o["side"]
            if sft and not o.get("error") and set(o.get("predicted_entities") or []) == gold.get(o["question_id"]):
                kept.append({"question_id": o["question_id"], "query": texts[o["question_id"]],
                             "cot": sft["cot"], "answer": o["predicted_entities"], "messages": sft["messages"]})
        return {f"sft/part-{shard:05d}.jsonl": kept,
                f"sft/part-{shard:05d}.json": {"kept": len(kept), "total": len(outputs)}}


def questions_by_id(questions: list[dict]) -> dict[str, str]:
    """Map question_id -> question text."""
    return {q["question_id"]: q["question"] for q in questions}
