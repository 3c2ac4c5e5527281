"""``linkedqa run``: check the arguments, run the ``run_method`` flow, print the run's metrics and id."""

from __future__ import annotations

import argparse

from flows.cli.args import parse_sets
from flows.cli.prefect_server import bind_ephemeral_server
from flows.cli.results import print_metrics


def run_config_from_args(a: argparse.Namespace):
    """Build a RunConfig from ``linkedqa run`` arguments."""
    from tasks.runs.config import RunConfig  # heavy: the run machinery (see the top of this module)

    return RunConfig(method=a.method, dataset=a.dataset, split=a.split, limit=a.limit, shards=a.shards,
                     backend=a.backend, model=a.model, kb=a.kb, settings=parse_sets(a.set),
                     max_model_len=a.max_model_len, base_url=a.base_url, cache=not a.no_cache,
                     timeout_s=a.timeout, max_retries=a.retries, api_key_block=a.api_key_block,
                     dtype=None if a.dtype == "auto" else a.dtype, scheduler=a.scheduler)


def check_run_args(a: argparse.Namespace):
    """The RunConfig of ``linkedqa run`` arguments, checked by the plan's own check.

    Method, settings, dataset and task kind: :func:`tasks.runs.checks.check_run_config`; numbers: the parser.
    """
    from tasks.runs.checks import check_run_config  # heavy: the dataset loaders and every method's module

    cfg = run_config_from_args(a)
    check_run_config(cfg)
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
    print_metrics(run_id)
    return run_id


def cmd_run(a: argparse.Namespace) -> int:
    """``linkedqa run METHOD``; the last stdout line is the run id."""
    print(execute_run(a))
    return 0
