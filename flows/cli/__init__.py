"""The ``linkedqa`` command line: parse and dispatch (docs/architecture.md#cli-contract). Every command has ``--help``.

What each command does lives in its group's module (``kb``, ``data``, ``runs``, ``results``, ``demo``); the process
around it in ``env`` (environment, Prefect API), ``prefect_server``, ``signals`` and ``errors`` (exit codes: 2 bad
usage or input, 3 unreadable data, 4 missing prerequisite, 5 no space, 1 anything else).

The method registry, the run machinery, the report code and the fetchers are imported by the commands that use
them, not here: this package is imported by every command and by every spawned worker process of a command
(multiprocessing imports the parent's ``__main__`` in each: a ``kb build`` shard worker, an export or BM25 document
worker).
"""

from __future__ import annotations

import argparse
import os
import sys

from flows.cli.args import MEMORY_HELP, languages, memory_limit, positive
from flows.cli.command_env import setup_env
from flows.cli.data import (
    check_data_import,
    check_dataset_names,
    cmd_data_fetch,
    cmd_data_import,
    cmd_data_list,
    cmd_data_load,
    cmd_models_prepare,
)
from flows.cli.demo import DEMO_LIMIT, DEMO_MAX_TOKENS_ANSWER, DEMO_SHARDS, cmd_demo
from flows.cli.errors import EXIT_USAGE, report_error
from flows.cli.kb import cmd_kb_build, cmd_kb_download, cmd_kb_export_nt, cmd_kb_index, cmd_kb_list
from flows.cli.prefect_server import spawn_ephemeral_server
from flows.cli.reproduce import check_reproduce, cmd_reproduce
from flows.cli.results import cmd_catalog, cmd_eval, cmd_report
from flows.cli.run_command import check_run_args, cmd_run
from flows.cli.signals import exit_after_interrupt, stop_on_signals
from storage import layout
from tasks.datasets.jsonl import DEFAULT_TASK, TASKS
from tasks.kb.plan import ALL_LANGUAGES, DEFAULT_LANGUAGES


class _Parser(argparse.ArgumentParser):
    """argparse with the commands' error format: ``error: <message>``, ``hint: see `<command> --help```, exit 2.

    The subcommands' parsers are of this class too: ``add_subparsers`` makes them with the parent's class.
    """

    def error(self, message: str):
        """Print the one-line usage error and its hint; exit 2."""
        self.exit(EXIT_USAGE, f"error: {message}\nhint: see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs).

    Each command's defaults name its function (``fn``), whether it runs a flow (``flow``: a bool, or a function of
    the arguments) and the argument check made before a flow command's Prefect server is spawned (``check``).
    """
    p = _Parser(prog="linkedqa", description="Link questions to Wikidata/Wikipedia entities and "
                                "answer them at dataset scale.")
    p.add_argument("-v", "--verbose", action="store_true", help="show Prefect INFO logs")
    p.set_defaults(flow=False, check=None)
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
    b.add_argument("--languages", type=languages, default=None, metavar="CODES",
                   help=f"label languages to keep: comma-separated Wikidata codes, or {ALL_LANGUAGES} (default: "
                   f"{','.join(DEFAULT_LANGUAGES)}; {ALL_LANGUAGES} with --sample); part of the KB version")
    b.add_argument("--name", default=None, help="KB name (version = NAME-<hash8>)")
    b.add_argument("--shards", type=positive(int), default=1,
                   help="byte-range shards per input file (.gz/.bz2: of its decompressed bytes, through a seek "
                        "index; a multistream .bz2 is cut at its bzip2 stream starts instead, with no index); a .xz "
                        "Wikipedia XML file has no seek index and gets at most --workers")
    b.add_argument("--workers", type=positive(int), default=1, help="worker processes for shards")
    b.add_argument("--memory-limit", type=memory_limit, default=None, metavar="SIZE", help=MEMORY_HELP)
    b.set_defaults(fn=cmd_kb_build, flow=True)
    ke = kb.add_parser("export-nt", help="write the KB as Wikidata-style N-Triples (.nt or .nt.gz)")
    ke.add_argument("out", help="output file (.nt or .nt.gz), e.g. warehouse/exports/kb.nt.gz")
    ke.add_argument("--kb", default=None, help="KB name or version (default: newest)")
    ke.add_argument("--workers", type=positive(int), default=1,
                    help="processes writing parts of the export in parallel (claims by subject hash, entity "
                         "row groups), appended in order")
    ke.add_argument("--memory-limit", type=memory_limit, default=None, metavar="SIZE", help=MEMORY_HELP)
    ke.set_defaults(fn=cmd_kb_export_nt, flow=True)
    ki = kb.add_parser("index", help="build the search/KG indexes of a KB version (resumable; built ones are "
                       "skipped; runs build what their method needs)")
    ki.add_argument("--kb", default=None, help="KB name or version (default: newest)")
    ki.add_argument("--kind", action="append", default=[], choices=list(layout.INDEX_KINDS), metavar="K",
                    help=f"index kind, repeatable (default: all): {', '.join(layout.INDEX_KINDS)}")
    ki.add_argument("--workers", type=positive(int), default=1,
                    help="kg-oxigraph: N processes write N-Triples parts, N threads bulk-load them at once "
                         "(~2 GB of memory per load); *-bm25: N tantivy indexing threads (256 MB each) and N "
                         "processes building the documents (passage-bm25 from N = 4 on; tables of at least 2N "
                         "row groups with unique keys)")
    ki.add_argument("--memory-limit", type=memory_limit, default=None, metavar="SIZE", help=MEMORY_HELP)
    ki.set_defaults(fn=cmd_kb_index, flow=True)
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
    kd.set_defaults(fn=cmd_kb_download, flow=True)

    data = sub.add_parser("data", help="benchmark question sets").add_subparsers(dest="data_cmd", required=True,
                                                                                 metavar="SUBCOMMAND")
    dl = data.add_parser("list", help="known datasets, splits, counts")
    dl.set_defaults(fn=cmd_data_list)
    dd = data.add_parser("load", help="load known datasets into the warehouse")
    dd.add_argument("names", nargs="+")
    dd.set_defaults(fn=cmd_data_load, flow=True, check=lambda a: check_dataset_names(a.names))
    di = data.add_parser("import", help="import generic questions JSONL")
    di.add_argument("file")
    di.add_argument("--name", required=True)
    di.add_argument("--task", choices=TASKS, default=DEFAULT_TASK,
                    help="task kind of the questions: which methods accept the dataset and which gold fields each "
                         "line needs (docs/howto/own-questions.md); ea is refused (load a DBP15K pair instead)")
    di.set_defaults(fn=cmd_data_import, flow=True, check=check_data_import)
    df = data.add_parser("fetch", help="download benchmarks from their official locations (sha256-pinned, resumable)")
    df.add_argument("names", nargs="*", metavar="NAME", help="dataset names (see `linkedqa data list`)")
    df.add_argument("--all", action="store_true", help="every dataset with a public source")
    df.add_argument("--kb-sample", action="store_true",
                    help="also every input of `linkedqa kb build --sample` (from the public repositories the "
                         "shared data was collected from, pinned by commit and sha256)")
    df.add_argument("--to", default=None, metavar="DIR",
                    help="data root to fill (default: LINKEDQA_DATA, else ../shared/data beside the checkout when it "
                         "exists, else LINKEDQA_HOME/data)")
    df.add_argument("--mirror", default=None, metavar="URL",
                    help="mirror base replacing https://raw.githubusercontent.com (default: $LINKEDQA_MIRROR)")
    df.set_defaults(fn=cmd_data_fetch, flow=True)

    models = sub.add_parser("models", help="LLM weights").add_subparsers(dest="models_cmd", required=True,
                                                                         metavar="SUBCOMMAND")
    mp = models.add_parser("prepare", help="assemble and convert the embedded model (idempotent)")
    mp.add_argument("--force", action="store_true")
    mp.set_defaults(fn=cmd_models_prepare)

    r = sub.add_parser("run", help="run a method over a dataset (sharded, resumable); last line = run id")
    r.add_argument("method")
    r.add_argument("--dataset", required=True)
    r.add_argument("--split", default=None)
    r.add_argument("--limit", type=positive(int), default=None, help="first N questions by id")
    r.add_argument("--shards", type=positive(int), default=1)
    r.add_argument("--backend", default="vllm", choices=["vllm", "openai"])
    r.add_argument("--model", default="embedded",
                   help="'embedded', an HF model id, or a model directory; --backend openai: the name the server "
                        "lists (sent as given; 'embedded' is sent as qwen2.5-coder-0.5b-instruct)")
    r.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --backend openai")
    r.add_argument("--api", default=None, choices=["auto", "vllm", "openai"],
                   help="--backend openai: the server's API (default auto: asked of its GET /v1/models); vllm sends "
                        "vLLM's request extensions (repetition_penalty, structured outputs), openai only the public "
                        "API's fields (max_completion_tokens; repetition_penalty not sent; guided=true refused)")
    r.add_argument("--concurrency", type=positive(int), default=None, metavar="N",
                   help="--backend openai: requests in flight at once (default 16)")
    r.add_argument("--timeout", type=positive(float), default=None, metavar="SECONDS",
                   help="--backend openai: wall-clock limit of one HTTP attempt (default 120)")
    r.add_argument("--retries", type=positive(int, zero=True), default=None, metavar="N",
                   help="--backend openai: retries after a timeout, connection error, 429 or 5xx (default 4)")
    r.add_argument("--api-key-block", default=None, metavar="NAME",
                   help="--backend openai: Prefect Secret block holding the API key, read where shards run when "
                        "OPENAI_API_KEY is unset (the name is recorded, the key never)")
    r.add_argument("--kb", default=None, help="KB name or version (default: newest)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="method setting (repeatable)")
    r.add_argument("--max-model-len", type=positive(int), default=4096)
    r.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                   help="vLLM engine dtype; auto = bfloat16 on GPUs and on CPUs with AVX512-BF16/AMX, else float32 "
                        "(not part of the run id; recorded per shard)")
    r.add_argument("--scheduler", default="continuous", choices=["continuous", "lockstep"],
                   help="continuous: an item's next LLM call goes to the engine as soon as its previous one returns; "
                        "lockstep: one batch per step for all items (not part of the run id; recorded per shard)")
    r.add_argument("--no-cache", action="store_true", help="bypass the persistent LLM response cache")
    r.add_argument("--runner", default="thread", choices=["thread", "dask"],
                   help="where shards run: threads in this process, or a Dask cluster (one process per worker)")
    r.add_argument("--workers", type=positive(int), default=2, help="Dask worker processes for --runner dask")
    r.add_argument("--dask-address", default=None, help="scheduler of an existing Dask cluster (tcp://host:8786)")
    r.set_defaults(fn=cmd_run, flow=True, check=check_run_args)

    e = sub.add_parser("eval", help="recompute a run's metrics from its stored predictions (and store them "
                       "with --write when the metric rules changed)")
    e.add_argument("run_id", nargs="?", default=None)
    e.add_argument("--all", action="store_true", help="every finished run of LINKEDQA_HOME")
    e.add_argument("--write", action="store_true",
                   help="store the recomputed values of runs computed with an older metrics format")
    e.set_defaults(fn=cmd_eval, flow=lambda a: a.write or a.all)

    rp = sub.add_parser("report", help="metrics table across runs (from the catalog)")
    rp.add_argument("--run", default=None)
    rp.add_argument("--views", nargs="*", default=None, help="report views to print (default: all of sql/reports)")
    rp.add_argument("--stages", action="store_true",
                    help="where each run's items failed: the share of items per failure stage (view stage_summary)")
    rp.add_argument("--reproductions", action="store_true",
                    help="the papers' figures beside the measured ones (view reproduction_matrix; `linkedqa "
                         "reproduce` stores them)")
    rp.add_argument("--notebooks", action="store_true",
                    help="execute notebooks/ (overview, methods, errors) into LINKEDQA_HOME/reports as HTML + PNG")
    rp.set_defaults(fn=cmd_report)

    c = sub.add_parser("catalog", help="catalog maintenance").add_subparsers(dest="catalog_cmd", required=True,
                                                                             metavar="SUBCOMMAND")
    cr = c.add_parser("refresh", help="rebuild catalog.duckdb views")
    cr.set_defaults(fn=cmd_catalog)

    rp2 = sub.add_parser("reproduce", help="the five papers' table rows as runs: list them, print their commands, "
                         "or run them and store the paper's figures beside the measured ones")
    rp2.add_argument("paper", nargs="?", default=None, help="paper id (see --list)")
    rp2.add_argument("--list", action="store_true", help="list the conditions (every paper's without PAPER), "
                     "runnable or not, with the reason")
    rp2.add_argument("--json", action="store_true", help="--list: one JSON record per condition")
    rp2.add_argument("--condition", action="append", default=[], metavar="ID", help="only this condition "
                     "(repeatable; default: every runnable one of the paper)")
    rp2.add_argument("--dry-run", action="store_true", help="print the `linkedqa run` commands, run nothing")
    rp2.add_argument("--limit", type=positive(int), default=None, help="first N questions of each run")
    rp2.add_argument("--model", default=None, help="as `linkedqa run --model` (default: the embedded model)")
    rp2.add_argument("--backend", default=None, choices=["vllm", "openai"], help="as `linkedqa run --backend`")
    rp2.add_argument("--base-url", default=None, help="as `linkedqa run --base-url`")
    rp2.add_argument("--api", default=None, choices=["auto", "vllm", "openai"], help="as `linkedqa run --api`")
    rp2.add_argument("--concurrency", type=positive(int), default=None, metavar="N",
                     help="as `linkedqa run --concurrency`")
    rp2.add_argument("--timeout", type=positive(float), default=None, metavar="SECONDS",
                     help="as `linkedqa run --timeout`")
    rp2.add_argument("--retries", type=positive(int, zero=True), default=None, metavar="N",
                     help="as `linkedqa run --retries`")
    rp2.add_argument("--kb", default=None, help="as `linkedqa run --kb` (default: newest)")
    rp2.add_argument("--shards", type=positive(int), default=None, help="as `linkedqa run --shards`")
    rp2.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"],
                     help="as `linkedqa run --dtype`")
    rp2.add_argument("--no-cache", action="store_true", help="as `linkedqa run --no-cache`")
    rp2.set_defaults(fn=cmd_reproduce, flow=lambda a: not (a.list or a.dry_run), check=check_reproduce,
                     build_parser=build_parser)

    d = sub.add_parser("demo", help="the main job on embedded defaults: sample KB, embedded model, search recall "
                       "and ELA on WebQSP-EL test questions, then a metrics summary")
    d.add_argument("--limit", type=positive(int), default=DEMO_LIMIT, help="ELA questions (first N by id)")
    d.add_argument("--shards", type=positive(int), default=DEMO_SHARDS, help="ELA shards")
    d.add_argument("--max-tokens-answer", type=positive(int), default=DEMO_MAX_TOKENS_ANSWER,
                   help="ELA's generation limit for the answer turn (the paper's is 384)")
    d.set_defaults(fn=cmd_demo, flow=True, build_parser=build_parser)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``linkedqa`` console script."""
    args = build_parser().parse_args(argv)
    setup_env(args.verbose)
    flow = args.flow(args) if callable(args.flow) else args.flow
    with stop_on_signals() as armed:
        try:
            if flow:
                # a bad argument costs neither the server's boot (~5 CPU-s) nor the flow's imports (~3 s)
                if args.check is not None:
                    args.check(args)
                spawn_ephemeral_server()  # boots while the command imports its flow; waited for by start_prefect()
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
            return report_error(exc, args.verbose)
