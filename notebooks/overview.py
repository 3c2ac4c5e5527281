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
# # linkedqa overview
# What is in the warehouse: KB table sizes per version, stored datasets, and the latest metrics per method.
# Reads only through the DuckDB catalog (`catalog.connect()` builds the same views in memory).

# %%
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from storage import layout  # noqa: E402
from storage.catalog import connect  # noqa: E402

con = connect()
out_dir = layout.home() / "reports"
out_dir.mkdir(parents=True, exist_ok=True)

# %%
tables = ["entities", "aliases", "labels", "claims", "properties", "articles", "passages", "redirects", "rejects"]
counts = {t: con.sql(f"select count(*) from latest_{t}").fetchall()[0][0] for t in tables}
counts

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.barh(list(counts), list(counts.values()))
ax.set_xscale("symlog")
ax.set_title("latest KB: rows per table")
fig.tight_layout()
fig.savefig(out_dir / "overview_kb_counts.png", dpi=100)

# %%
con.sql("select dataset, split, count(*) as questions from latest_questions group by all order by all").pl()

# %%
con.sql(
    "select method, dataset, split, metric, round(value, 4) as value, n from latest_metrics "
    "where metric in ('precision', 'recall', 'accuracy', 'micro_f1', 'recall@50', 'wall_s', 'error_count') "
    "order by all"
).pl()

# %%
print("LINKEDQA_HOME =", os.environ.get("LINKEDQA_HOME", layout.home()))
