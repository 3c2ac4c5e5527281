"""``linkedqa data ...`` and ``linkedqa models prepare``: datasets and the embedded model."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from flows.cli.command_env import start_prefect
from storage import layout
from storage.catalog import done_dataset_versions
from storage.parquet_io import read_table
from tasks.datasets.jsonl import DEFAULT_TASK, check_task


def cmd_data_list(a: argparse.Namespace) -> int:
    """``linkedqa data list``: known datasets and what is stored."""
    from tasks.datasets.registry import known_datasets  # heavy: the dataset loaders (see the top of this module)

    stored = {d: m for d, _, m in done_dataset_versions()}
    for name, desc in known_datasets().items():
        m = stored.pop(name, None)
        splits = ", ".join(f"{s}={n:,}" for s, n in m["splits"].items()) if m else "not loaded"
        print(f"{name:<20} {splits:<44} {desc}")
    for name, m in stored.items():
        splits = ", ".join(f"{s}={n:,}" for s, n in m["splits"].items())
        print(f"{name:<20} {splits:<44} (imported, task {m.get('task', DEFAULT_TASK)})")
    return 0


def check_dataset_names(names: list[str]) -> None:
    """Refuse a dataset name that is not a safe folder name (``data load`` / ``data import``)."""
    for name in names:
        layout.safe_name(name, "dataset name")


def cmd_data_load(a: argparse.Namespace) -> int:
    """``linkedqa data load NAME..``: the ``load_benchmarks`` flow (known datasets into the warehouse)."""
    check_dataset_names(a.names)  # a bad name is refused before Prefect is imported or started
    from flows.load_benchmarks import load_benchmarks  # heavy: pulls prefect

    start_prefect()
    load_benchmarks(names=list(a.names))
    return 0


def check_data_import(a: argparse.Namespace) -> None:
    """Refuse a bad ``data import`` name or task kind (``ea``) before Prefect is imported or started."""
    check_dataset_names([a.name])
    check_task(a.task)


def cmd_data_import(a: argparse.Namespace) -> int:
    """``linkedqa data import FILE --name NAME --task KIND``: the ``import_questions`` flow; bad lines are listed."""
    check_data_import(a)
    from flows.import_questions import import_questions  # heavy: pulls prefect

    start_prefect()
    ref = import_questions(file=str(Path(a.file).resolve()), name=a.name, task=a.task)
    splits = ref.extra["splits"]
    where = f" ({', '.join(f'{s}={n:,}' for s, n in splits.items())})" if splits else ""
    print(f"{a.name}: {sum(splits.values()):,} question(s) imported{where}, {ref.extra['n_rejects']} line(s) "
          f"rejected; task {ref.extra['task']}")
    if ref.extra["n_rejects"]:
        folder = layout.dataset_dir(a.name, ref.version)
        for r in read_table(folder / "rejects", "rejects").to_pylist()[:20]:
            reason = r["reason"]
            print(f"  {reason}" if reason.startswith(f"line {r['line']}:") else f"  line {r['line']}: {reason}")
    return 0


def cmd_data_fetch(a: argparse.Namespace) -> int:
    """``linkedqa data fetch NAME..``: the ``fetch_benchmarks`` flow (official locations into LINKEDQA_DATA)."""
    from flows.fetch_benchmarks import fetch_benchmarks  # heavy: pulls prefect

    if not a.names and not a.all and not a.kb_sample:
        raise ValueError("give dataset names, --all or --kb-sample (see `linkedqa data list`)")
    root = Path(a.to).resolve() if a.to else layout.data_root(required=False)
    start_prefect()
    results = fetch_benchmarks(names=list(a.names), all_datasets=a.all, to=str(root), mirror=a.mirror,
                               kb_sample=a.kb_sample)
    for name, files in results.items():
        got = sum(f.action == "downloaded" for f in files)
        print(f"{name}: {len(files)} file(s) verified ({got} downloaded, {len(files) - got} already present)")
    print(f"data root: {root}" + ("" if root == layout.data_root(required=False) else
                                  f"  (use it with LINKEDQA_DATA={root})"))
    return 0


def cmd_models_prepare(a: argparse.Namespace) -> int:
    """``linkedqa models prepare``: assemble + convert the embedded model (idempotent)."""
    from tasks.llm.models import prepare_embedded_model  # heavy: the model preparation (torch, on demand)

    t0 = time.perf_counter()
    path = prepare_embedded_model(force=a.force)
    print(f"embedded model ready at {path} ({time.perf_counter() - t0:.1f}s)")
    return 0
