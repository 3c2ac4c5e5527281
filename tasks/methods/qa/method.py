"""Entity Retrieval QA and its baselines (Shavarani & Sarkar; ../shared/papers/entity-retrieval-for-qa.md).

Methods (one LLM call per question; prompts from ``prompts/qa_prompts.json``, the paper's wording after Ram et
al. 2023: "Answer these questions:" closed-book, documents then "Based on these texts, answer these
questions:" with retrieval; no few-shot examples; greedy decoding; at most 10 new tokens, 1 for yes/no
datasets such as StrategyQA):

* ``closed-book``: the question alone. On KGQA datasets it delegates to the KGQA closed-book of
  ``tasks.methods.kgqa.agents`` (answers linked back to QIDs).
* ``bm25-rag``: top-``docs`` (4) 100-word KB passages by BM25 (tantivy) over the question.
* ``dense-rag``: top-``docs`` (4) passages by all-MiniLM-L6-v2 + FAISS (exact inner product).
* ``er`` (Entity Retrieval): the question's salient entities -> their articles -> the first ``words`` words
  of each (W in {50, 100, 300, 1000}; 0 = the whole article). Entities come from the gold annotations
  (``--set entities=gold``: ER) or from the predictions of an earlier linking run (``--set
  entities=run:<run_id>``, e.g. an ELA run: the paper's ERSp setting, and ELA-for-QA of the ELA paper's
  Table 2, whose Hit@1 of the linked entity is reported as ``hit1``).

Bad input: a question with no (linked) entity, or whose entities have no article in the KB, falls back to the
closed-book prompt for that item and is flagged (``scores.fallback = 1``, ``scores.missing_articles`` = number of
entities without an article; the run's metrics count both). Retrieved documents are stored in the trajectory
(``{"kind": "note", "retrieved": [...]}``, the top ``eval_k``) so the retrieval metrics (nDCG@k, MRR, top-k
accuracy with answer-string relevance, paper §4.3) are recomputed from stored predictions.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any, NotRequired

import duckdb
from pydantic import ValidationError
from typing_extensions import TypedDict

from storage import layout
from storage.parquet_io import part_files
from storage.run_store import RunStore
from tasks.llm.types import ChatRequest, SamplingConfig
from tasks.methods.base import Method, MethodContext, MethodSettings, UnknownSetting
from tasks.methods.kgqa.agents import closed_book_kg_agent
from tasks.methods.kgqa.method import KgOneHopMethod
from tasks.methods.kgqa.settings import KgAccessSettings, KgPromptSettings, KgqaSettings
from tasks.methods.kgqa.tools import closed_book_kg_tools, kgqa_index_paths
from tasks.methods.prompt_files import PromptFolder
from tasks.methods.records import AgentResult, note_fallback, note_retrieved
from tasks.methods.runtime import ItemContext, LLMCall, ToolCall
from tasks.metrics.runs import RETRIEVAL_METRICS
from tasks.search.kb_indexes import dense_passage_index, passage_index, passage_index_dir

PROMPTS = PromptFolder(__file__)
SQL_ARTICLES = layout.REPO_ROOT / "sql" / "er" / "articles_by_key.sql"
QA_MAX_TOKENS = 10
YESNO_MAX_TOKENS = 1
_RUN_REF = re.compile(r"^run:(?P<run>[A-Za-z0-9._-]+)$")


@cache
def prompts() -> dict[str, str]:
    """The prompt templates (``closed_book``, ``with_docs``, ``document``)."""
    return PROMPTS.json("qa_prompts.json")


def normalize_question(q: str) -> str:
    """Ram et al. (2023) question normalisation: capitalised first letter, ending with ``?``."""
    q = " ".join(q.split())
    if not q:
        return q
    q = q[0].upper() + q[1:]
    return q if q.endswith("?") else q + "?"


def qa_prompt(question: str, docs: list[dict[str, str]] | None = None) -> str:
    """The paper's prompt: closed-book without ``docs``, retrieval-augmented with them."""
    p = prompts()
    q = normalize_question(question)
    if not docs:
        return p["closed_book"].format(question=q)
    documents = "\n\n".join(p["document"].format(title=d.get("title") or "", text=d["text"]).strip() for d in docs)
    return p["with_docs"].format(documents=documents, question=q)


def clean_answer(text: str) -> str:
    """First non-empty line of a completion, without a leading ``A:`` / ``Answer:``."""
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^(?:A|Answer)\s*:\s*", "", line, flags=re.I).strip()
    return ""


def first_words(text: str, words: int) -> str:
    """The first ``words`` whitespace-separated words of ``text`` (all of it when ``words`` <= 0)."""
    toks = text.split()
    return " ".join(toks if words <= 0 else toks[:words])


def budget_docs(docs: list[dict[str, Any]], max_words: int) -> tuple[list[dict[str, Any]], bool]:
    """Keep documents in order within ``max_words`` words in all (the last one cut); ``(docs, truncated)``."""
    out, used, cut = [], 0, False
    for d in docs:
        n = len(d["text"].split())
        if used + n > max_words:
            rest = max_words - used
            if rest > 0:
                out.append({**d, "text": first_words(d["text"], rest)})
            return out, True
        out.append(d)
        used += n
    return out, cut


#: The guided answer of yes/no datasets (single tokens of the embedded model's tokenizer: fits ``max_tokens=1``).
YESNO_CHOICES = ("yes", "no")


class QASettings(MethodSettings):
    """``--set`` options shared by the QA methods."""

    max_tokens: int = 0
    """Completion bound of the answer; 0: the paper's limit (10 new tokens, 1 on yes/no datasets; on KGQA
    datasets ``kg-1hop``'s default)."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy decoding, as the paper)."""
    seed: int = 0
    """Sampling seed."""
    cot: bool | None = None
    """``closed-book`` on KGQA datasets only: reasoning before the answer (unset: on, as the QALD paper)."""
    system: str = ""
    """System message (the paper has none; e.g. "Answer with a few words.")."""
    max_doc_words: int = 2400
    """Bound on the document words of one prompt (the engine's context is finite)."""
    guided: bool = False
    """Structured outputs: on yes/no datasets (StrategyQA) the answer is the choice ``yes``/``no``; on KGQA datasets
    closed-book's JSON steps follow the KGQA JSON schemas. False: the papers' free-form prompts."""


class ClosedBookSettings(QASettings, KgAccessSettings, KgPromptSettings):
    """``--set`` options of ``closed-book``: the QA options, and on KGQA datasets also the KGQA options it uses.

    On KGQA datasets the answer is written as the KGQA paper's closed-book step and linked back to QIDs through
    the KB (``tasks.methods.kgqa.agents.closed_book_kg_agent``), so the run also reads the KG access and answer
    linking options (:class:`~tasks.methods.kgqa.settings.KgAccessSettings`) and the KGQA prompts' options
    (:class:`~tasks.methods.kgqa.settings.KgPromptSettings`); they change nothing on other datasets.
    """

    max_tokens_step: int = 0
    """KGQA datasets only: completion bound of the linking steps (0: ``min(max_tokens, 160)`` with ``max_tokens``'
    KGQA value)."""

    def kgqa(self) -> KgqaSettings:
        """These options as the KGQA family's settings (what its closed-book step machine and tools read).

        ``max_tokens=0`` is KGQA's default answer bound, ``cot`` unset is on (the QALD paper's setting).

        Raises:
            UnknownSetting: A value the KGQA steps refuse (e.g. ``max_tokens`` between 1 and 15).
        """
        d = KgqaSettings.model_fields
        max_tokens = self.max_tokens if self.max_tokens > 0 else d["max_tokens"].default
        shared = set(KgAccessSettings.model_fields) | set(KgPromptSettings.model_fields)
        try:
            return KgqaSettings(**{k: getattr(self, k) for k in shared}, temperature=self.temperature,
                                max_tokens=max_tokens,
                                max_tokens_step=self.max_tokens_step or min(max_tokens, d["max_tokens_step"].default),
                                cot=True if self.cot is None else self.cot, seed=self.seed, guided=self.guided)
        except ValidationError as exc:
            msgs = "; ".join(e["msg"] for e in exc.errors())
            raise UnknownSetting(f"invalid --set value for 'closed-book' on a KGQA dataset: {msgs}") from None


class RagSettings(QASettings):
    """``--set`` options of ``bm25-rag`` / ``dense-rag``."""

    docs: int = 4
    """Passages in the prompt, best first (paper: 4)."""
    eval_k: int = 20
    """Passages kept in the trajectory for the retrieval metrics nDCG/MRR/top-k (paper: k up to 100)."""
    answer: bool = True
    """False: retrieval only, no LLM call (the answer stays empty): a run then measures the retrieval metrics alone,
    as the ER paper's Table 1 does."""


class ERSettings(QASettings):
    """``--set`` options of ``er``."""

    words: int = 100
    """First words of each entity's article in the prompt (paper: 50, 100, 300, 1000; 0: the whole article)."""
    entities: str = "gold"
    """Where the salient entities come from: ``gold`` (the dataset's annotations) or ``run:<run_id>`` (the entities
    an earlier linking run predicted, e.g. an ELA run)."""
    max_entities: int = 4
    """Entities per question whose articles enter the prompt."""
    answer: bool = True
    """False: retrieval only, no LLM call (the answer stays empty): a run then measures the retrieval metrics alone,
    as the ER paper's Table 1 does."""


def _sampling(settings: QASettings, task: str) -> SamplingConfig:
    limit = settings.max_tokens or (YESNO_MAX_TOKENS if task == "yesno" else QA_MAX_TOKENS)
    choice = YESNO_CHOICES if settings.guided and task == "yesno" else None
    return SamplingConfig(temperature=settings.temperature, max_tokens=limit, seed=settings.seed, choice=choice)


def _answer_step(item: dict, ctx: ItemContext, prompt: str, sampling: SamplingConfig, system: str = ""):
    """Ask the LLM and return the cleaned answer (sub-generator)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    c = yield LLMCall(ChatRequest(messages=messages, sampling=sampling))
    if c.error:
        raise RuntimeError(f"LLM error: {c.error}")
    answer = clean_answer(c.text)
    ctx.log({"answer": answer})
    return answer


# ------------------------------------------------------------------------------------------ closed-book
class ClosedBookMethod(Method):
    """``linkedqa run closed-book``: the question alone (KGQA datasets: delegated to ``tasks.methods.kgqa.agents``)."""

    name = "closed-book"
    description = "closed-book baseline: 'Answer these questions:' + the question (KGQA: answers linked to QIDs)"
    Settings = ClosedBookSettings
    needs_kb = False
    metric_family = None
    tasks = ("qa", "yesno", "kgqa", "kgqa-open")

    @classmethod
    def needs_kb_for(cls, task: str) -> bool:
        """KGQA answers are linked back to QIDs through the KB; text QA needs none."""
        return task == "kgqa"

    @classmethod
    def prompt_files_for(cls, task: str) -> list[str]:
        """The QA prompts; on KGQA datasets the KGQA family's prompts, which the delegated agent reads."""
        if task == "kgqa":
            return KgOneHopMethod.prompt_files_for(task)
        return super().prompt_files_for(task)

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """Nothing for text QA; the answer-linking indexes on KGQA datasets."""
        if ctx.task == "kgqa":
            return kgqa_index_paths(self.settings, ctx)
        return []

    def extra_metrics(self, task: str) -> list[str]:
        """None: the family's metrics only."""
        return []

    def build_tools(self, ctx: MethodContext) -> dict[str, Any]:
        """No tools, except on KGQA datasets (answer linking)."""
        if ctx.task == "kgqa":
            return closed_book_kg_tools(self.settings.kgqa(), ctx)
        return {}

    def agent(self, ctx: MethodContext):
        """One LLM call per question."""
        if ctx.task == "kgqa":
            return closed_book_kg_agent(self.settings.kgqa(), ctx)
        sampling = _sampling(self.settings, ctx.task)

        def agent(item: dict, ictx: ItemContext):
            answer = yield from _answer_step(item, ictx, qa_prompt(item["question"]), sampling, self.settings.system)
            return AgentResult(answer=answer)

        return agent


# ----------------------------------------------------------------------------------------- passage RAG
class RetrievePayload(TypedDict):
    """The ``retrieve`` payload: the question and how many passages."""

    query: str
    k: int


class PassageHit(TypedDict):
    """One retrieved passage (``id``: its passage id), best first."""

    id: str
    title: str | None
    text: str
    qid: str | None
    score: float


def _passage_dicts(hits: list[Any]) -> list[PassageHit]:
    return [{"id": h.passage_id, "title": h.title, "text": h.text, "qid": h.qid, "score": round(float(h.score), 4)}
            for h in hits]


class _RagMethod(Method):
    Settings = RagSettings
    metric_family = None
    tasks = ("qa", "yesno")

    def extra_metrics(self, task: str) -> list[str]:
        """Retrieval metrics on QA datasets (answer-string relevance means nothing for yes/no)."""
        return list(RETRIEVAL_METRICS) if task == "qa" else []

    @property
    def uses_llm(self) -> bool:
        """No LLM with ``answer=false``."""
        return self.settings.answer

    def retriever(self, ctx: MethodContext):  # pragma: no cover - overridden
        raise NotImplementedError

    def build_tools(self, ctx: MethodContext) -> dict[str, Any]:
        """The batched ``retrieve`` tool: payload ``{"query", "k"}`` -> passage dicts."""
        return {"retrieve": self.retriever(ctx)}

    def agent(self, ctx: MethodContext):
        """Retrieve, store the ranking, answer from the top ``docs`` passages."""
        s: RagSettings = self.settings
        sampling = _sampling(s, ctx.task)
        k = max(s.docs, s.eval_k)

        def agent(item: dict, ictx: ItemContext):
            hits = yield ToolCall("retrieve", {"query": item["question"], "k": k})
            ictx.log(note_retrieved(hits[:k]))
            docs, truncated = budget_docs(hits[: s.docs], s.max_doc_words)
            if not s.answer:
                return AgentResult(answer="", scores={"docs_truncated": float(truncated)})
            answer = yield from _answer_step(item, ictx, qa_prompt(item["question"], docs), sampling, s.system)
            return AgentResult(answer=answer, scores={"docs_truncated": float(truncated)})

        return agent


class BM25RagMethod(_RagMethod):
    """``linkedqa run bm25-rag``."""

    name = "bm25-rag"
    description = "BM25 (tantivy) top-4 100-word KB passages + 'Based on these texts, answer these questions:'"

    def retriever(self, ctx: MethodContext):
        """BM25 over the KB passages, all queries of a step in one call."""
        index = passage_index(ctx.kb_version, ctx.root)

        def tool(payloads: list[RetrievePayload]) -> list[list[PassageHit]]:
            k = max((int(p["k"]) for p in payloads), default=4)
            hits = index.search_many([p["query"] for p in payloads], k=k)
            return [_passage_dicts(h[: int(p["k"])]) for p, h in zip(payloads, hits, strict=True)]

        return tool

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """The passage BM25 index."""
        return [passage_index_dir(ctx.kb_version, "bm25", ctx.root)]


class DenseRagMethod(_RagMethod):
    """``linkedqa run dense-rag``."""

    name = "dense-rag"
    description = "all-MiniLM-L6-v2 + FAISS top-4 100-word KB passages + the retrieval-augmented prompt"

    def retriever(self, ctx: MethodContext):
        """Dense retrieval over the KB passages, all queries of a step encoded and searched in one call."""
        index = dense_passage_index(ctx.kb_version, ctx.root)

        def tool(payloads: list[RetrievePayload]) -> list[list[PassageHit]]:
            k = max((int(p["k"]) for p in payloads), default=4)
            hits = index.search_many([p["query"] for p in payloads], k=k)
            out: list[list[PassageHit]] = []
            for p, hs in zip(payloads, hits, strict=True):
                hs = hs[: int(p["k"])]
                out.append([{"id": h.id, "title": d["title"], "text": d["text"], "qid": d["qid"],
                             "score": round(float(h.score), 4)} for h, d in zip(hs, index.payload(hs), strict=True)])
            return out

        return tool

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """The dense passage index (FAISS vectors + ids)."""
        return [passage_index_dir(ctx.kb_version, "dense", ctx.root)]


# --------------------------------------------------------------------------------------- Entity Retrieval
class ArticlesPayload(TypedDict):
    """The ``articles`` payload: entities as parallel QIDs and titles (either may be None).

    ``source`` is the article a dataset question was written on, when it names one.
    """

    qids: list[str | None]
    titles: list[str | None]
    source: NotRequired[str | None]


class Article(TypedDict):
    """One article of the KB's ``articles`` table."""

    page_id: int
    title: str
    qid: str | None
    source: str | None
    text: str


class ArticleStore:
    """Batched article lookup over a KB's ``articles`` table (DuckDB over the Parquet parts)."""

    def __init__(self, kb_version: str, root: Path):
        self.files = [str(p) for p in part_files(layout.kb_table_dir(kb_version, "articles", root))]
        self.sql = SQL_ARTICLES.read_text()

    def lookup(self, requests: list[ArticlesPayload]) -> list[list[Article | None]]:
        """Per request ``{"qids", "titles", "source"}``: one article (or None) per QID/title asked for.

        An exact ``source`` (the article a dataset question was written on) wins for the first entity; a
        QID prefers a real Wikipedia page (positive page id) over article texts from other sources.
        """
        qids = sorted({q for r in requests for q in r.get("qids", []) if q})
        titles = sorted({t.casefold() for r in requests for t in r.get("titles", []) if t})
        sources = sorted({r["source"] for r in requests if r.get("source")})
        by_qid: dict[str, Article] = {}
        by_title: dict[str, Article] = {}
        by_source: dict[str, Article] = {}
        if self.files and (qids or titles or sources):
            con = duckdb.connect()
            try:
                rows = con.execute(self.sql, {"files": self.files, "qids": qids, "titles": titles,
                                              "sources": sources}).fetchall()
            finally:
                con.close()
            for page_id, title, qid, source, text in rows:
                art: Article = {"page_id": page_id, "title": title, "qid": qid, "source": source, "text": text or ""}
                if qid:
                    by_qid.setdefault(qid, art)
                by_title.setdefault(title.casefold(), art)
                if source:
                    by_source.setdefault(source, art)
        out = []
        for r in requests:
            found: list[Article | None] = []
            for i, (q, t) in enumerate(zip(r.get("qids", []), r.get("titles", []), strict=True)):
                art = by_source.get(r.get("source") or "") if i == 0 else None
                art = art or (by_qid.get(q) if q else None) or (by_title.get(t.casefold()) if t else None)
                found.append(art)
            out.append(found)
        return out


def gold_entity_refs(item: dict) -> tuple[list[str | None], list[str | None], str | None]:
    """``(qids, titles, source)`` of a question's gold salient entities (QIDs, Wikipedia titles, article file)."""
    meta = json.loads(item.get("meta") or "{}")
    qids: list[str | None] = list(item.get("gold_entities") or [])
    title = meta.get("wikipedia_title")
    titles: list[str | None] = [title] + [None] * (len(qids) - 1) if qids else ([title] if title else [])
    if not qids and title:
        qids = [None]
    source = f"factoidqa-cmu/{meta['article_file']}" if meta.get("article_file") else None
    return qids, titles, source


class ERMethod(Method):
    """``linkedqa run er``."""

    name = "er"
    description = "Entity Retrieval: salient entities (gold or a linking run) -> first W words of their articles"
    Settings = ERSettings
    metric_family = None
    tasks = ("qa", "yesno")

    @classmethod
    def parse_settings(cls, raw: dict[str, str]) -> ERSettings:
        """Validate, including the ``entities`` source (``gold`` or ``run:<run_id>``)."""
        s = super().parse_settings(raw)
        if s.entities != "gold" and not _RUN_REF.match(s.entities):
            raise UnknownSetting(f"invalid --set entities={s.entities!r}: use 'gold' or 'run:<run_id>'")
        return s

    @classmethod
    def check_inputs(cls, settings: ERSettings, dataset: str, root: Path | None) -> None:
        """A ``run:<run_id>`` entity source must be a finished run on the same dataset."""
        m = _RUN_REF.match(settings.entities)
        if m:
            linked_entities(m.group("run"), root or layout.home(), dataset)

    @property
    def uses_llm(self) -> bool:
        """No LLM with ``answer=false``."""
        return self.settings.answer

    def extra_metrics(self, task: str) -> list[str]:
        """Retrieval metrics over the ER documents (QA datasets), and ``hit1`` when entities come from a run."""
        out = list(RETRIEVAL_METRICS) if task == "qa" else []
        return out + (["hit1"] if _RUN_REF.match(self.settings.entities) else [])

    def build_tools(self, ctx: MethodContext) -> dict[str, Any]:
        """The batched ``articles`` tool, and the linked entities of the source run when one is named."""
        store = ArticleStore(ctx.kb_version, ctx.root)
        m = _RUN_REF.match(self.settings.entities)
        if m:
            ctx.extra["linked"] = linked_entities(m.group("run"), ctx.root, ctx.dataset)
        return {"articles": store.lookup}

    def agent(self, ctx: MethodContext):
        """Entities -> articles -> first W words -> answer; closed-book fallback, flagged, when none."""
        s: ERSettings = self.settings
        sampling = _sampling(s, ctx.task)
        linked: dict[str, list[str]] | None = ctx.extra.get("linked")

        def agent(item: dict, ictx: ItemContext):
            if linked is None:
                qids, titles, source = gold_entity_refs(item)
            else:
                qids, titles, source = list(linked.get(item["question_id"], [])), [], None
                titles = [None] * len(qids)
            qids, titles = qids[: s.max_entities], titles[: s.max_entities]
            docs: list[dict] = []
            missing = 0
            if qids:
                found = yield ToolCall("articles", {"qids": qids, "titles": titles, "source": source})
                for q, t, art in zip(qids, titles, found, strict=True):
                    if art is None:
                        missing += 1
                        ictx.log({"missing_article": q or t})
                    elif art["page_id"] not in {d["page_id"] for d in docs}:
                        docs.append({"page_id": art["page_id"], "title": art["title"], "qid": art["qid"],
                                     "text": first_words(art["text"], s.words)})
            ictx.log(note_retrieved([{"id": d["page_id"], "title": d["title"], "text": d["text"]} for d in docs]))
            docs_in, truncated = budget_docs(docs, s.max_doc_words)
            answer = ""
            if s.answer:
                if not docs_in:
                    reason = "no linked entity" if not qids else "no article for the linked entities"
                    ictx.log(note_fallback("closed-book", reason))
                answer = yield from _answer_step(item, ictx, qa_prompt(item["question"], docs_in or None), sampling,
                                                s.system)
            # predicted_entities only for linked entities (ERSp / ELA-for-QA): gold ones are not predictions
            return AgentResult(answer=answer, predicted_entities=[q for q in qids if q] if linked is not None else [],
                               scores={"fallback": float(not docs_in), "missing_articles": float(missing),
                                       "docs_truncated": float(truncated)})

        return agent

    def index_paths(self, ctx: MethodContext) -> list[Path]:
        """ER reads the KB's articles table (no search index)."""
        return [layout.kb_table_dir(ctx.kb_version, "articles", ctx.root)]


def linked_entities(run_id: str, root: Path, dataset: str) -> dict[str, list[str]]:
    """``{question_id: predicted QIDs}`` of a finished linking run on the same dataset.

    Raises:
        LookupError: Unknown or unfinished run, or a run on another dataset.
    """
    store = RunStore(run_id, root)
    manifest = store.read_manifest()
    if manifest is None:
        raise LookupError(f"--set entities=run:{run_id}: no finished run with that id under {root / 'runs'}")
    if manifest.config["dataset"] != dataset:
        raise LookupError(f"--set entities=run:{run_id}: that run is on dataset {manifest.config['dataset']!r}, "
                          f"not {dataset!r}")
    preds = store.read_table("predictions", ["question_id", "predicted_entities"]).to_pylist()
    return {p["question_id"]: list(p["predicted_entities"] or []) for p in preds}
