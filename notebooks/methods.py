# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # linkedqa methods: paper-style tables
# Every number in the **measured** columns is read from the catalog (`latest_metrics`, `efficiency`): the latest
# finished run of each method on each dataset in this warehouse, whatever model and KB it used (both shown).
# The **published** columns are the papers' own headline figures (`notebooks/paper_numbers.json`, with the line
# of the paper each comes from). They were obtained with other models (Llama-3 8B, GPT-4o-mini, ...) on full
# knowledge bases; linkedqa's defaults run a 0.5B model on a sample KB, so the columns are side by side for
# orientation, not as a reproduction claim. A missing measured value means no such run exists yet.
# Measured values are computed with the benchmarks' reference rules (README "Metrics and their reference
# scripts"); `metrics_format` says which version of the rules each value was computed with: a value below the
# current version comes from a run stored before a correction (`linkedqa eval --all --write` recomputes it).

# %%
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from storage import layout  # noqa: E402
from storage.catalog import connect  # noqa: E402

pl.Config.set_tbl_rows(200)
pl.Config.set_tbl_cols(14)
pl.Config.set_fmt_str_lengths(48)
con = connect()
out_dir = layout.home() / "reports"
out_dir.mkdir(parents=True, exist_ok=True)
numbers_file = layout.REPO_ROOT / "notebooks" / "paper_numbers.json"
published = pl.DataFrame(json.loads(Path(numbers_file).read_text()), infer_schema_length=None)
# ER rows differ by document length W and entity source (gold annotations vs a linking run): both are keys
measured = con.sql(
    "select m.method, m.dataset, m.split, m.metric, m.value, m.n, m.metrics_format, r.model, r.kb_version, m.run_id, "
    "try_cast(json_extract_string(r.config, '$.settings.words') as bigint) as words, "
    "case when json_extract_string(r.config, '$.settings.entities') like 'run:%' then 'run' "
    "else json_extract_string(r.config, '$.settings.entities') end as entities "
    "from latest_metrics m join latest_runs r using (run_id)"
).pl()
published = published.with_columns(pl.col("setting").struct.field("words").alias("words"),
                                   pl.col("setting").struct.field("entities").alias("entities"))
from tasks.metrics.base import METRICS_FORMAT  # noqa: E402

stale = measured.filter(pl.col("metrics_format") < METRICS_FORMAT)["run_id"].unique().to_list()
print(f"{published.height} published figures, {measured.height} measured metric rows "
      f"from {measured['run_id'].n_unique()} latest runs; metric rules version {METRICS_FORMAT}"
      + (f"; {len(stale)} run(s) stored under older rules: {', '.join(stale)}" if stale else ""))


# %%
def side_by_side(paper: str) -> pl.DataFrame:
    """Published rows of one paper joined with the measured value of the same method/dataset/metric."""
    pub = published.filter(pl.col("paper") == paper).select(
        "table", "method", "linkedqa_method", "dataset", "split", "metric", pl.col("value").alias("published"),
        "model", "words", "entities", "note",
    )
    meas = measured.select(
        pl.col("method").alias("linkedqa_method"), "dataset", "metric", "words", "entities",
        pl.col("value").alias("measured"), pl.col("n").alias("n_measured"), "metrics_format",
        pl.col("model").alias("our_model"),
    )
    keys = ["linkedqa_method", "dataset", "metric", "words", "entities"]
    return pub.join(meas, on=keys, how="left", nulls_equal=True).sort("table", "method", "split")


# %% [markdown]
# ## ELA (entity linking; ELA paper Table 1)

# %%
side_by_side("ela")

# %% [markdown]
# ## Entity Retrieval QA (ER paper Tables 1, 2, 4, 5)

# %%
side_by_side("er")

# %% [markdown]
# ER paper Table 5 rebuilt from the catalog: retrieval time, index disk and peak memory per retrieval method
# (the paper reports minutes / GB for 2,203 FactoidQA questions; here seconds / MB for whatever runs exist).

# %%
table5 = con.sql(
    "select method, dataset, n_questions, round(retrieval_s, 3) as retrieval_s, round(wall_s, 1) as wall_s, "
    "round(index_disk_mb, 2) as index_disk_mb, round(peak_rss_mb) as peak_rss_mb, tokens_per_item, model "
    "from efficiency where method in ('closed-book', 'bm25-rag', 'dense-rag', 'er') order by dataset, method"
).pl()
table5

# %% [markdown]
# ## KGQA over Wikidata (QALD ReAct paper), AnchorRAG (Table 1), EA-Agent (Table 1)

# %%
side_by_side("qald-react")

# %%
side_by_side("anchorrag")

# %%
side_by_side("ea-agent")

# %% [markdown]
# ## Plots: main metric per method, tokens vs quality, recall@k curves

# %%
MAIN = ["accuracy", "em", "strategyqa_acc", "qald_macro_f1_gerbil", "hit1_tog", "hits@1", "recall@50"]
main = (measured.filter(pl.col("metric").is_in(MAIN))
        .with_columns(pl.format("{} / {}", "method", "dataset").alias("run"))
        .sort("run"))
fig, ax = plt.subplots(figsize=(8, max(2.5, 0.35 * max(main.height, 1))))
if main.height:
    ax.barh(main["run"].to_list(), main["value"].to_list())
    for y, (v, m) in enumerate(zip(main["value"].to_list(), main["metric"].to_list(), strict=True)):
        ax.text(v, y, f" {m} {v:.3f}", va="center", fontsize=8)
ax.set_xlim(0, 1.15)
ax.set_title("main metric of the latest run per method / dataset (measured)")
fig.tight_layout()
fig.savefig(out_dir / "methods_main_metric.png", dpi=100)

# %%
eff = con.sql("select method, dataset, tokens_per_item from efficiency").pl()
tq = main.join(eff, on=["method", "dataset"], how="inner").filter(pl.col("tokens_per_item") > 0)
fig, ax = plt.subplots(figsize=(6, 4))
ax.scatter(tq["tokens_per_item"].to_list(), tq["value"].to_list())
for x, y, label in zip(tq["tokens_per_item"].to_list(), tq["value"].to_list(), tq["run"].to_list(), strict=True):
    ax.annotate(label, (x, y), fontsize=7)
ax.set_xscale("symlog")
ax.set_xlabel("LLM tokens per question (prompt + completion)")
ax.set_ylabel("main metric")
ax.set_title("tokens vs quality (measured)")
fig.tight_layout()
fig.savefig(out_dir / "methods_tokens_vs_quality.png", dpi=100)

# %%
curves = (measured.filter(pl.col("metric").str.contains(r"^(recall|topk_acc)@\d+$"))
          .with_columns(pl.col("metric").str.extract(r"@(\d+)$").cast(pl.Int32).alias("k"),
                        pl.format("{} / {} ({})", "method", "dataset",
                                  pl.col("metric").str.extract(r"^([a-z_]+)@")).alias("curve"))
          .sort("curve", "k"))
fig, ax = plt.subplots(figsize=(6, 4))
for (name,), part in curves.group_by(["curve"], maintain_order=True):
    ax.plot(part["k"].to_list(), part["value"].to_list(), marker="o", label=name)
ax.set_xscale("log")
ax.set_xlabel("k")
ax.set_ylabel("recall@k / top-k accuracy")
ax.set_ylim(0, 1)
ax.set_title("candidate recall and retrieval top-k accuracy (measured)")
if curves.height:
    ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out_dir / "methods_recall_curves.png", dpi=100)
