"""EA-Agent (../shared/papers/ea-agent-entity-alignment.md): planned tool paths for entity alignment.

Per source entity (one DBP15K question), batched across entities at every step:

1. ``ea_candidates`` tool: the ``ea-embed`` generator's top-``k`` candidates (paper: TEA top-10) and the
   source's statistics block (§4.2; this DBP15K copy has no attribute triples: counts 0, no name attribute).
2. Path planning (round 0): the Source Entity Prompt with the tool pool -> a tool path (``parse_path``).
3. Tool calling: the selectors named in the path run as ONE ``ea_select`` tool call over the source and its
   candidates (Attribute Triple Selector: Eq. 1, reports ``no attributes`` here; Relation Triple Selector:
   Eq. 2; <= 5 triples each); then the Entity Alignment Tool prompt; then the Reflector prompt when the path
   has it.
4. Reward (Eq. 3-6, alpha 0.5, beta 0.2) against the gold target, and the Path Rewriting prompt (``rewrite``),
   giving a policy-update record ``(query, path, reward, rewritten path)``.
5. Rounds (``rounds``, Algorithm 1): round ``r + 1`` executes the path rewritten in round ``r``. Without
   fine-tuning this is the path the SFT-updated policy is trained to emit for the same query (Eq. 7), so the
   rounds loop runs on its own and the exported data are what LoRA training would consume. Rounds use gold
   rewards, so ``rounds > 1`` is refused on splits other than ``train`` (it would tune test predictions on
   test labels).

Outputs: ``predicted_entities`` = [final target of the last round], ``answers`` = the generator's candidate ids
(rank order, ``candidate_k`` of them) so Hits@k / MRR / candidate recall come from stored predictions;
``scores``: ``planning_s``, ``alignment_s`` (each item's share of its batched LLM calls), ``planning_tokens``,
``alignment_tokens``, ``rewrite_tokens``, and per round ``r<r>_path_length``, ``r<r>_reflected``,
``r<r>_initial_correct``, ``r<r>_correct``, ``r<r>_reward``. ``postprocess`` writes the SFT JSONL of every
round to ``runs/<run_id>/sft/round-<r>/part-<shard>.jsonl`` (chat ``messages``: planning prompt -> rewritten
path). An unparseable planning / alignment / reflection reply or an LLM error is a per-item ``AgentError``;
an unparseable rewrite keeps the old path and is logged (it is training data, not the prediction).

Fine-tuning on the export is optional and needs a GPU machine with ``peft``/``trl`` (not installed here, and
not executed in this repository). Appendix E's setting, with TRL's SFT trainer over one round's export::

    ds = datasets.load_dataset("json", data_files="runs/<run_id>/sft/round-<r>/*.jsonl")["train"]
    peft_cfg = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.05, target_modules=["q_proj", "v_proj"],
                               bias="none", task_type="CAUSAL_LM")
    args = trl.SFTConfig(output_dir="lora-round-<r>", learning_rate=2e-4, num_train_epochs=3,
                         per_device_train_batch_size=1, gradient_accumulation_steps=8, bf16=True,
                         max_length=1024, optim="adamw_torch")
    trl.SFTTrainer(model="<base model>", train_dataset=ds, args=args, peft_config=peft_cfg).train()

(the ``messages`` field is the chat format SFTTrainer reads); serve the adapter with ``vllm serve ...
--enable-lora`` and run the next round with ``--backend openai``.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from tasks.datasets.ea_kg import AlignmentPair
from tasks.llm.types import ChatRequest, Completion, SamplingConfig
from tasks.methods.base import Method, MethodContext, UnknownSetting
from tasks.methods.ea.embed_method import EaEmbedSettings, build_candidate_tool, embed_config
from tasks.methods.ea.prompting import (
    ATTR,
    REFLECT,
    REL,
    SELECTORS,
    candidate_blocks,
    choice_options,
    entity_block,
    fill,
    parse_choice,
    parse_path,
    path_regex,
    path_text,
    template,
)
from tasks.methods.ea.reward import ALPHA, BETA, compute_reward
from tasks.methods.ea.selectors import MAX_TRIPLES, relation_scores, select_attribute_triples, select_relation_triples
from tasks.methods.records import AgentResult, ItemOutput
from tasks.methods.runtime import AgentError, ItemContext, LLMCall, Tool, ToolCall


class EaAgentSettings(EaEmbedSettings):
    """``--set`` options of ``ea-agent`` (plus the candidate generator's, inherited from ``ea-embed``)."""

    k: int = 10
    """Candidates shown to the LLM per source entity (paper: TEA's top 10)."""
    candidate_k: int = 20
    """Candidates of the generator stored in rank order: Hits@10 and MRR (after the chosen target) and candidate
    recall@10/@20 read them."""
    max_triples: int = MAX_TRIPLES
    """Triples each selector keeps per entity (paper: 5)."""
    rounds: int = 1
    """Optimisation rounds: round r + 1 runs the path rewritten in round r (paper: 3); above 1 only on ``train``,
    as the rewards use the gold."""
    rewrite: bool = True
    """Ask the Path Rewriting prompt after each reward and export the policy-update records as SFT JSONL."""
    alpha: float = ALPHA
    """Penalty of an unneeded reflection in the reward, Eq. 5 (paper: 0.5)."""
    beta: float = BETA
    """Path-length coefficient of the reward, Eq. 6 (paper: 0.2)."""
    temperature: float = 0.1
    """Sampling temperature (paper: 0.1 for its Qwen models)."""
    top_p: float = 1.0
    """Nucleus sampling top-p."""
    seed: int = 0
    """Sampling seed."""
    max_tokens_plan: int = 48
    """Completion bound of path planning and path rewriting."""
    max_tokens_align: int = 96
    """Completion bound of the Entity Alignment Tool and the Reflector."""
    guided: bool = False
    """Structured outputs: planning and rewriting are ``1. <ToolName>`` lines over the tool pool, the Entity
    Alignment Tool and the Reflector reply with exactly one shown candidate as ``[IRI]``. False: the paper's
    free-form prompts."""


class SelectPayload(TypedDict):
    """The ``ea_select`` payload: entity ids and the selectors to run on each (``attribute``, ``relation``)."""

    entities: list[str]
    selectors: list[str]


class Selection(TypedDict):
    """One selector's triples for one entity, best first, of ``total`` candidates (``note`` says why few)."""

    triples: list[list[str]]
    scores: list[float]
    total: int
    note: str


#: The ``ea_select`` result of one payload: entity id -> selector name -> its selection.
SelectResult = dict[str, dict[str, Selection]]


def selector_tool(ap: AlignmentPair, k: int) -> Tool:
    """Batched ``ea_select`` tool: one :data:`SelectResult` per :class:`SelectPayload`.

    Only the selectors asked for are run. Attribute triples do not exist in this DBP15K copy, so the attribute
    selection is empty with note ``no attributes``.
    """
    scores = {ap.kg1.lang: relation_scores(ap.kg1), ap.kg2.lang: relation_scores(ap.kg2)}
    kgs = {ap.kg1.lang: ap.kg1, ap.kg2.lang: ap.kg2}

    def tool(payloads: list[SelectPayload]) -> list[SelectResult]:
        out = []
        for p in payloads:
            res: SelectResult = {}
            for eid in p["entities"]:
                kg = kgs[eid.split(":", 1)[0]]
                row = kg.index[eid]
                ent: dict[str, Selection] = {}
                if ATTR in p["selectors"]:
                    sel = select_attribute_triples([], [], k=k)
                    ent["attribute"] = {"triples": sel.triples, "scores": sel.scores, "total": sel.total,
                                        "note": sel.note}
                if REL in p["selectors"]:
                    _, sel = select_relation_triples(kg, row, k=k, scores=scores[kg.lang])
                    ent["relation"] = {"triples": [list(t) for t in sel.triples],
                                       "scores": [round(s, 4) for s in sel.scores], "total": sel.total,
                                       "note": sel.note}
                res[eid] = ent
            out.append(res)
        return out

    return tool


def _spent(c: Completion) -> tuple[float, int]:
    return c.latency_s, c.prompt_tokens + c.completion_tokens


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def plan_prompt(src: dict[str, Any], sims: list[float], tool_pool: str) -> str:
    """The Source Entity (path planning) prompt of one entity."""
    st = src["stats"]
    return fill(template("ea_plan.txt"), {
        "tool_pool": tool_pool, "entity_iri": src["iri"], "attr_cnt_all": st["attr_cnt_all"],
        "attr_cnt": st["attr_cnt"], "rel_cnt_all": st["rel_cnt_all"], "rel_cnt": st["rel_cnt"],
        "signal_attr": st["signal_attr"], "top1_score": f"{sims[0]:.3f}", "top2_score": f"{sims[1]:.3f}",
        "top3_score": f"{sims[2]:.3f}",
    })


def ea_agent(settings: EaAgentSettings):
    """Build the EA-Agent step machine for given settings."""
    tool_pool = template("ea_tool_pool.json").strip()
    t_align, t_reflect, t_rewrite = template("ea_align.txt"), template("ea_reflect.txt"), template("ea_rewrite.txt")

    def sampling(max_tokens: int) -> SamplingConfig:
        return SamplingConfig(temperature=settings.temperature, top_p=settings.top_p, max_tokens=max_tokens,
                              seed=settings.seed)

    s_plan, s_align = sampling(settings.max_tokens_plan), sampling(settings.max_tokens_align)
    if settings.guided:
        s_plan = s_plan.model_copy(update={"regex": path_regex()})

    def align_sampling(shown: list[dict[str, Any]]) -> SamplingConfig:
        return s_align.model_copy(update={"choice": choice_options(shown)}) if settings.guided else s_align

    def agent(item: dict, ctx: ItemContext):
        gold = (item.get("gold_entities") or [None])[0]
        res = yield ToolCall("ea_candidates", {"source": item["question_id"], "split": item["split"],
                                               "k": max(settings.k, settings.candidate_k)})
        src, all_cands = res["source"], res["candidates"]
        shown = all_cands[: settings.k]
        if not shown:
            raise AgentError("no candidates")
        sims = [c["similarity"] for c in shown[:3]] + [0.0] * max(0, 3 - len(shown))
        query = plan_prompt(src, sims, tool_pool)
        scores: dict[str, float] = {"planning_s": 0.0, "alignment_s": 0.0, "planning_tokens": 0.0,
                                    "alignment_tokens": 0.0, "rewrite_tokens": 0.0}
        rounds: list[dict[str, Any]] = []
        path: tuple[str, ...] = ()
        final = None
        for r in range(settings.rounds):
            if r == 0:
                c = yield LLMCall(ChatRequest(messages=_user(query), sampling=s_plan))
                if c.error:
                    raise AgentError(f"LLM error at path planning: {c.error}")
                dt, tok = _spent(c)
                scores["planning_s"] += dt
                scores["planning_tokens"] += tok
                parsed = parse_path(c.text)
                if parsed is None:
                    raise AgentError(f"planning reply names no tool: {c.text[:120]!r}")
                path = parsed.tools
                ctx.log({"step": "plan", "round": r, "path": list(path), "repairs": list(parsed.repairs)})
            selectors = [t for t in path if t in SELECTORS]
            selected: dict[str, Any] = {}
            if selectors:
                selected = yield ToolCall("ea_select", {"entities": [src["id"]] + [x["id"] for x in shown],
                                                        "selectors": selectors})
            values = {"source_iri": src["iri"], "source_triples": entity_block(selected.get(src["id"], {})),
                      "candidate_blocks": candidate_blocks(shown, selected)}
            c = yield LLMCall(ChatRequest(messages=_user(fill(t_align, values)), sampling=align_sampling(shown)))
            if c.error:
                raise AgentError(f"LLM error at EntityAlignmentTool: {c.error}")
            dt, tok = _spent(c)
            scores["alignment_s"] += dt
            scores["alignment_tokens"] += tok
            initial = parse_choice(c.text, shown)
            if initial is None:
                raise AgentError(f"EntityAlignmentTool reply names no candidate: {c.text[:120]!r}")
            final = initial
            reflected = REFLECT in path
            if reflected:
                iri = next(x["iri"] for x in shown if x["id"] == initial)
                c = yield LLMCall(ChatRequest(messages=_user(fill(t_reflect, {**values, "initial_choice": iri})),
                                              sampling=align_sampling(shown)))
                if c.error:
                    raise AgentError(f"LLM error at Reflector: {c.error}")
                dt, tok = _spent(c)
                scores["alignment_s"] += dt
                scores["alignment_tokens"] += tok
                final = parse_choice(c.text, shown)
                if final is None:
                    raise AgentError(f"Reflector reply names no candidate: {c.text[:120]!r}")
            ctx.log({"step": "align", "round": r, "initial": initial, "final": final, "reflected": reflected})
            rec: dict[str, Any] = {"round": r, "path": list(path), "initial": initial, "final": final,
                                   "reflected": reflected}
            p = f"r{r}_"
            scores[p + "path_length"] = float(len(path))
            scores[p + "reflected"] = float(reflected)
            next_path = path
            if gold is not None:
                rw = compute_reward(final, gold, path, initial, reflected, settings.alpha, settings.beta)
                rec["reward"] = {"total": rw.total, "gamma_mu": rw.gamma_mu, "c": rw.c, "gamma_ref": rw.gamma_ref,
                                 "gamma_e": rw.gamma_e}
                scores[p + "initial_correct"] = float(initial == gold)
                scores[p + "correct"] = rw.gamma_mu
                scores[p + "reward"] = rw.total
                if settings.rewrite:
                    prompt = fill(t_rewrite, {"entity": src["iri"], "top1_score": f"{sims[0]:.3f}",
                                              "top2_score": f"{sims[1]:.3f}", "top3_score": f"{sims[2]:.3f}",
                                              "old_tools": " -> ".join(path), "reward": f"{rw.total:.3f}"})
                    c = yield LLMCall(ChatRequest(messages=_user(prompt), sampling=s_plan))
                    scores["rewrite_tokens"] += c.prompt_tokens + c.completion_tokens
                    rewritten = parse_path(c.text) if not c.error else None
                    if rewritten is None:
                        ctx.log({"step": "rewrite", "round": r, "unparsed": (c.error or c.text)[:200]})
                    else:
                        next_path = rewritten.tools
                        rec["rewritten_path"] = list(next_path)
                        ctx.log({"step": "rewrite", "round": r, "path": list(next_path),
                                 "repairs": list(rewritten.repairs)})
            rounds.append(rec)
            path = next_path
        return AgentResult(predicted_entities=[final] if final else [], answers=[x["id"] for x in all_cands],
                           scores=scores, side={"query": query, "rounds": rounds})

    return agent


class EaAgentMethod(Method):
    """``linkedqa run ea-agent --dataset dbp15k-fr-en [--set rounds=3]``."""

    name = "ea-agent"
    description = "EA-Agent: embedding candidates -> planned tool path (selectors, EA tool, reflector) -> reward"
    Settings = EaAgentSettings
    needs_kb = False
    metric_family = "alignment"
    tasks = ("ea",)

    def build_tools(self, ctx: MethodContext) -> dict[str, Tool]:
        """Candidate generator and triple selectors over the dataset's two graphs.

        Raises:
            UnknownSetting: ``rounds > 1`` on a split other than ``train`` (gold rewards would steer test
                predictions).
        """
        s = self.settings
        if s.rounds < 1 or s.k < 1 or s.candidate_k < 1:
            raise UnknownSetting("rounds, k and candidate_k must be >= 1")
        if s.rounds > 1 and ctx.split is not None and ctx.split != "train":
            raise UnknownSetting(f"rounds={s.rounds} optimises paths with gold rewards: run it on --split "
                                 f"train, not {ctx.split!r} (inference on test uses rounds=1)")
        cand, ap = build_candidate_tool(ctx, embed_config(s), s.tune)
        return {"ea_candidates": cand, "ea_select": selector_tool(ap, s.max_triples)}

    def agent(self, ctx: MethodContext):
        """The EA-Agent step machine."""
        return ea_agent(self.settings)

    def postprocess(self, outputs: list[ItemOutput], questions: list[dict], ctx: MethodContext,
                    shard: int) -> dict[str, Any] | None:
        """The policy-update records of every round as SFT JSONL side outputs of the run."""
        if not self.settings.rewrite:
            return None
        return sft_side_outputs(outputs, shard, self.settings.rounds)


def sft_records(outputs: list[ItemOutput], n_rounds: int) -> dict[int, list[dict[str, Any]]]:
    """Round -> policy-update records ``(query, path, reward, rewritten path)`` with SFT chat messages.

    Items that errored or whose rewrite could not be parsed contribute no record for that round.
    """
    per: dict[int, list[dict[str, Any]]] = {r: [] for r in range(n_rounds)}
    for o in outputs:
        ea = o["side"]
        if not ea or o.get("error"):
            continue
        for rec in ea["rounds"]:
            if "rewritten_path" not in rec or "reward" not in rec:
                continue
            target = path_text(rec["rewritten_path"])
            per[rec["round"]].append({
                "question_id": o["question_id"], "round": rec["round"], "query": ea["query"],
                "path": rec["path"], "reward": rec["reward"]["total"], "reward_terms": rec["reward"],
                "rewritten_path": rec["rewritten_path"], "prediction": rec["final"],
                "messages": [{"role": "user", "content": ea["query"]}, {"role": "assistant", "content": target}],
            })
    return per


def sft_side_outputs(outputs: list[ItemOutput], shard: int, n_rounds: int) -> dict[str, Any]:
    """``sft/round-<r>/part-<shard>.jsonl`` (records) and ``.json`` (counts) for every round."""
    out: dict[str, Any] = {}
    for r, recs in sft_records(outputs, n_rounds).items():
        stem = f"sft/round-{r}/part-{shard:05d}"
        out[f"{stem}.jsonl"] = recs
        out[f"{stem}.json"] = {"records": len(recs), "items": len(outputs), "round": r}
    return out
