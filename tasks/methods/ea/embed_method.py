"""``ea-embed``: the embedding alignment baseline and candidate generator of ``ea-agent`` (no LLM).

Per source entity (one DBP15K question), ONE batched tool call ranks the target entities of the same split
(OpenEA convention: test sources against test targets) with :class:`tasks.methods.ea.embed.AlignmentScorer` (MiniLM
name + neighbourhood cosines, character n-grams of normalised/romanised names, seed-anchor overlap; optional
CSLS). The prediction stores the top ``k`` target ids in rank order as ``answers`` and the top one as
``predicted_entities``, so Hits@1/10, MRR and candidate recall@k are recomputed from stored predictions
(``alignment`` metric family). ``scores`` keeps the top-1 similarity and its margin over the second.

By default (``tune=true``) the four signal weights and CSLS are chosen on the ``train`` links only (a small grid,
:func:`tasks.methods.ea.embed.tune_config`; the chosen config is written to ``<run_dir>/ea_embed_config.json``): the
English-only MiniLM signals help FR-EN and hurt JA-EN/ZH-EN, so one fixed weighting does not fit all pairs.

The two graphs are read from their KB-like tables beside the stored dataset (written on first use);
MiniLM vectors and tuned configs are cached under ``datasets/<name>/<version>/kg/embeddings/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import NotRequired

import pyarrow.compute as pc
from typing_extensions import TypedDict

from storage.manifest import config_hash
from storage.parquet_io import read_table
from storage.side_files import ArtifactCache
from tasks.datasets.ea_kg import AlignmentPair, kg_dir
from tasks.datasets.store import ensure_kg, latest_dataset_folder
from tasks.methods.base import Method, MethodContext, MethodSettings
from tasks.methods.ea.embed import TUNE_GRID, AlignmentScorer, EmbedConfig, tune_config
from tasks.methods.records import AgentResult
from tasks.methods.runtime import ItemContext, Tool, ToolCall


class EaEmbedSettings(MethodSettings):
    """``--set`` options of ``ea-embed``.

    ``tune`` (default) picks the four signal weights and CSLS on the ``train`` links (grid of
    ``tasks.methods.ea.embed.TUNE_GRID``); with ``tune=false`` the ``w_*`` weights (0 disables a signal) and ``csls``
    given here are used as they are.
    """

    k: int = 50
    """Ranked target candidates stored per source entity (Hits@k, MRR and candidate recall read them)."""
    tune: bool = True
    """Choose the four signal weights and CSLS on the ``train`` links (the ``w_*`` and ``csls`` given are then
    not used)."""
    w_name: float = 1.0
    """Weight of the MiniLM name cosine (0 disables the signal)."""
    w_char: float = 1.0
    """Weight of the character n-gram cosine of normalised names (0 disables the signal)."""
    w_neighbour: float = 1.0
    """Weight of the cosine of the mean MiniLM embedding of the neighbours' names (0 disables the signal)."""
    w_anchor: float = 1.0
    """Weight of the shared seed-aligned neighbours (0 disables the signal)."""
    csls: bool = True
    """Rank by CSLS, which demotes hub targets, instead of the plain similarity."""
    csls_k: int = 10
    """Nearest neighbours on the other side whose mean similarity CSLS subtracts."""
    transliterate: bool = True
    """Romanise kana in the names of the character n-gram signal."""


def embed_config(s: EaEmbedSettings) -> EmbedConfig:
    """The generator config of ``ea-embed``'s settings (and ``ea-agent``'s, which extend them)."""
    return EmbedConfig(w_name=s.w_name, w_char=s.w_char, w_neighbour=s.w_neighbour, w_anchor=s.w_anchor,
                       csls=s.csls, csls_k=s.csls_k, transliterate=s.transliterate)


def split_links(dataset_folder: Path) -> dict[str, list[tuple[str, str]]]:
    """Gold links ``(source id, target id)`` of each split of a stored DBP15K dataset (sorted by source)."""
    tbl = read_table(Path(dataset_folder) / "questions", "questions", ["split", "question_id", "gold_entities"])
    out: dict[str, list[tuple[str, str]]] = {}
    for split in sorted(set(tbl["split"].to_pylist())):
        sub = tbl.filter(pc.equal(tbl["split"], split))
        out[split] = sorted((q, g[0]) for q, g in zip(sub["question_id"].to_pylist(),
                                                        sub["gold_entities"].to_pylist(), strict=True) if g)
    return out


class CandidatesPayload(TypedDict):
    """The ``ea_candidates`` payload: a source entity, its split (the candidate space) and how many candidates."""

    source: str
    split: str
    k: NotRequired[int]


class SourceStats(TypedDict):
    """The statistics block of paper §4.2 for one source entity."""

    attr_cnt_all: int
    attr_cnt: int
    rel_cnt_all: int
    rel_cnt: int
    signal_attr: bool


class SourceEntity(TypedDict):
    """The source entity of an ``ea_candidates`` result."""

    id: str
    iri: str
    name: str
    stats: SourceStats


class AlignmentCandidate(TypedDict):
    """One target candidate: the combined score ranks, ``similarity`` is the name/neighbour cosine."""

    id: str
    iri: str
    name: str
    score: float
    similarity: float


class CandidatesResult(TypedDict):
    """The ``ea_candidates`` result of one payload, candidates best first."""

    source: SourceEntity
    candidates: list[AlignmentCandidate]


def source_stats(ap: AlignmentPair, source: str) -> SourceStats:
    """The statistics block of paper §4.2 for one source entity (this DBP15K copy has no attribute triples)."""
    row = ap.kg1.index[source]
    triples = ap.kg1.entity_triples(row)
    return {"attr_cnt_all": 0, "attr_cnt": 0, "rel_cnt_all": len(triples),
            "rel_cnt": len({r for _, r, _ in triples}), "signal_attr": False}


class CandidateTool:
    """Batched ``ea_candidates`` tool: payloads ``{"source", "split", "k"}`` -> ``{"source", "candidates"}``.

    One scorer per split is built on first use (candidate space = that split's targets; anchors = the
    ``train`` links).

    Example payload and result::

        {"source": "fr:2", "split": "test", "k": 3}
        -> {"source": {"id": "fr:2", "iri": "http://fr.dbpedia.org/...", "name": "...", "stats": {...}},
            "candidates": [{"id": "en:10502", "iri": "...", "name": "...", "score": 0.61, "similarity": 0.83}, ...]}
    """

    def __init__(self, ap: AlignmentPair, links: dict[str, list[tuple[str, str]]], cfg: EmbedConfig,
                 cache_dir: Path | None):
        self.ap = ap
        self.links = links
        self.cfg = cfg
        self.cache_dir = cache_dir
        self.scorers: dict[str, AlignmentScorer] = {}

    def scorer(self, split: str) -> AlignmentScorer:
        """The scorer of ``split`` (built once)."""
        if split not in self.scorers:
            if split not in self.links:
                raise KeyError(f"no links for split {split!r}; splits: {', '.join(self.links)}")
            links = self.links[split]
            self.scorers[split] = AlignmentScorer(self.ap, [s for s, _ in links], [t for _, t in links],
                                                  self.links.get("train", []), self.cfg, self.cache_dir)
        return self.scorers[split]

    def __call__(self, payloads: Sequence[CandidatesPayload]) -> list[CandidatesResult]:
        """Rank every payload's source (one scoring call per split present in the batch)."""
        out: list[CandidatesResult | None] = [None] * len(payloads)
        by_split: dict[str, list[int]] = {}
        for i, p in enumerate(payloads):
            by_split.setdefault(p["split"], []).append(i)
        kg1, kg2 = self.ap.kg1, self.ap.kg2
        for split, idx in by_split.items():
            k = max(int(payloads[i].get("k", 10)) for i in idx)
            ranked = self.scorer(split).rank([payloads[i]["source"] for i in idx], k)
            for i, cands in zip(idx, ranked, strict=True):
                src = payloads[i]["source"]
                row = kg1.index[src]
                ki = int(payloads[i].get("k", 10))
                out[i] = {
                    "source": {"id": src, "iri": kg1.iris[row], "name": kg1.names[row],
                               "stats": source_stats(self.ap, src)},
                    "candidates": [{"id": c.id, "iri": kg2.iris[kg2.index[c.id]], "name": kg2.names[kg2.index[c.id]],
                                    "score": round(c.score, 6), "similarity": round(c.similarity, 6)}
                                   for c in cands[:ki]],
                }
        return out  # type: ignore[return-value]


def build_candidate_tool(ctx: MethodContext, cfg: EmbedConfig, tune: bool = True
                         ) -> tuple[CandidateTool, AlignmentPair]:
    """The candidate tool of the run's DBP15K dataset (KG tables written on first use).

    With ``tune``, the weights and CSLS of ``cfg`` are replaced by the ones chosen on the train links; the config
    used becomes the side output ``ea_embed_config.json`` of the run.
    """
    ap = ensure_kg(ctx.dataset, ctx.root)
    folder = latest_dataset_folder(ctx.dataset, ctx.root)
    links = split_links(folder)
    cache = ArtifactCache(kg_dir(folder) / "embeddings")
    if tune:
        cfg = tuned_config(ap, links.get("train", []), cfg, cache)
    ctx.side_outputs["ea_embed_config.json"] = {"tuned": tune, **asdict(cfg)}
    return CandidateTool(ap, links, cfg, cache), ap


def tuned_config(ap: AlignmentPair, train: list[tuple[str, str]], base: EmbedConfig,
                 cache: ArtifactCache) -> EmbedConfig:
    """:func:`tasks.methods.ea.embed.tune_config` on the train links, cached as JSON beside the MiniLM vectors."""
    if not train:
        raise ValueError("tune=true needs the train split's seed links; none are stored")
    key = config_hash({"base": asdict(base), "train": train, "grid": TUNE_GRID}, 16)

    def tune() -> dict:
        cfg, results = tune_config(ap, train, base, cache)
        return {"config": asdict(cfg), "grid": results}

    return EmbedConfig(**cache.json(f"tuned-{key}", tune)["config"])


def ea_embed_agent(settings: EaEmbedSettings):
    """Step machine: one batched candidate ranking per item."""

    def agent(item: dict, ctx: ItemContext):
        res = yield ToolCall("ea_candidates", {"source": item["question_id"], "split": item["split"],
                                               "k": settings.k})
        cands = res["candidates"]
        ids = [c["id"] for c in cands]
        sims = [c["similarity"] for c in cands]
        scores = {"top1_similarity": sims[0]} if sims else {}
        if len(sims) > 1:
            scores["top1_margin"] = sims[0] - sims[1]
        return AgentResult(predicted_entities=ids[:1], answers=ids, scores=scores)

    return agent


class EaEmbedMethod(Method):
    """``linkedqa run ea-embed --dataset dbp15k-fr-en``."""

    prompt_files = ()  # no prompts
    name = "ea-embed"
    description = "embedding entity alignment (MiniLM names + neighbours, char n-grams, seed anchors, CSLS)"
    Settings = EaEmbedSettings
    needs_llm = False
    needs_kb = False
    metric_family = "alignment"
    tasks = ("ea",)

    def build_tools(self, ctx: MethodContext) -> dict[str, Tool]:
        """The candidate ranking tool over the dataset's two graphs."""
        tool, _ = build_candidate_tool(ctx, embed_config(self.settings), self.settings.tune)
        return {"ea_candidates": tool}

    def agent(self, ctx: MethodContext):
        """The step machine."""
        return ea_embed_agent(self.settings)
