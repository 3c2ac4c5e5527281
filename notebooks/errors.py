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
# # linkedqa errors: what failed, and how
# Item errors (LLM garbage, context overflow, tool failures) and wrong answers of the latest runs, with the
# trajectory that led to them, read from the catalog (`latest_predictions` joined with `latest_questions`).
# A wrong answer is a prediction whose per-item main score (stored in `predictions.scores`) is 0.

# %%
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from storage import layout  # noqa: E402
from storage.catalog import connect  # noqa: E402

con = connect()
out_dir = layout.home() / "reports"
out_dir.mkdir(parents=True, exist_ok=True)
MAIN = ["accuracy", "em", "strategyqa_acc", "qald_macro_f1_mean", "hit1_tog", "hits@1", "recall@50"]
score_sql = "coalesce(" + ", ".join(f"p.scores['{m}']" for m in MAIN) + ")"
preds = con.sql(
    "select p.run_id, p.method, p.dataset, p.split, p.question_id, q.question, p.answer, p.predicted_entities, "
    f"q.gold_entities, q.gold_answers, p.error, p.trajectory, {score_sql} as score, p.error is not null as is_error "
    "from latest_predictions p join latest_questions q using (dataset, split, question_id)"
).pl()
print(f"{preds.height} predictions in {preds['run_id'].n_unique()} latest runs")

# %%
summary = (preds.group_by("method", "dataset", "split")
           .agg(pl.len().alias("items"), pl.col("is_error").sum().alias("errors"),
                (pl.col("score") == 0).sum().alias("wrong"), pl.col("score").mean().alias("mean_main_score"))
           .sort("method", "dataset"))
summary

# %% [markdown]
# ## Error kinds (first words of the error message)

# %%
kinds = (preds.filter(pl.col("is_error"))
         .with_columns(pl.col("error").str.extract(r"^([^:(]{1,60})").alias("kind"))
         .group_by("method", "kind").agg(pl.len().alias("n")).sort("n", descending=True))
kinds

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
if summary.height:
    labels = [f"{m} / {d}" for m, d in zip(summary["method"].to_list(), summary["dataset"].to_list(), strict=True)]
    ax.barh(labels, summary["errors"].to_list(), label="item errors")
    ax.barh(labels, summary["wrong"].to_list(), left=summary["errors"].to_list(), label="wrong (main score 0)")
    ax.legend(fontsize=8)
ax.set_title("failures per latest run")
fig.tight_layout()
fig.savefig(out_dir / "errors_per_run.png", dpi=100)


# %% [markdown]
# ## Where items failed (failure stages)
# Each latest run's items by the first stage they failed (`stage_summary`; rules in docs/metrics.md#failure-stages),
# as shares of the run's scored items, so retrieval losses (the early stages) and choice losses (the late ones)
# compare across methods.

# %%
stages = con.sql(
    "select s.method, s.dataset, s.family, s.stage, s.stage_rank, s.share from stage_summary s "
    "join latest_runs r using (run_id) order by s.dataset, s.method, s.stage_rank"
).pl()
stages

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
if stages.height:
    runs = stages.select("method", "dataset").unique(maintain_order=True).rows()
    labels = [f"{m}\n{d}" for m, d in runs]
    bottoms = [0.0] * len(runs)
    for stage in stages.sort("stage_rank")["stage"].unique(maintain_order=True).to_list():
        shares = [stages.filter((pl.col("method") == m) & (pl.col("dataset") == d) & (pl.col("stage") == stage))
                  ["share"].sum() for m, d in runs]
        ax.bar(labels, shares, bottom=bottoms, label=stage)
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    ax.set_ylabel("share of items")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
ax.set_title("failure stages of the latest runs")
fig.tight_layout()
fig.savefig(out_dir / "errors_failure_stages.png", dpi=100)

# %% [markdown]
# ### Questions where methods end at different stages (`question_stages`)

# %%
con.sql("select * from question_stages where methods_disagree order by dataset, question_id limit 20").pl()

# %% [markdown]
# ## Examples with their trajectories (up to 3 per method: errors first, then wrong answers)

# %%
def show(row: dict) -> None:
    """Print one prediction and the steps of its trajectory (long texts cut)."""
    print(f"--- {row['method']} / {row['dataset']} / {row['question_id']}: {row['question']}")
    print(f"    gold: {row['gold_answers'] or row['gold_entities']}  predicted: {row['answer']!r} "
          f"{row['predicted_entities'] or ''}  error: {row['error']}")
    for step in json.loads(row["trajectory"] or "[]"):
        kind = step.get("kind")
        if kind == "llm":
            print(f"    [llm] -> {str(step.get('raw_output', ''))[:200]!r}")
        elif kind == "tool":
            print(f"    [tool {step.get('tool')}] {str(step.get('payload'))[:120]}")
        else:
            print(f"    [{kind}] {str({k: v for k, v in step.items() if k != 'kind'})[:200]}")


examples = (preds.filter(pl.col("is_error") | (pl.col("score") == 0))
            .sort("is_error", descending=True)
            .group_by("method", maintain_order=True).head(3))
for r in examples.iter_rows(named=True):
    show(r)
