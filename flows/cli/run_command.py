"""``linkedqa run``: check the arguments, run the ``run_method`` flow, print the run's metrics and id."""

from __future__ import annotations

import argparse
import os

from flows.cli.args import parse_sets
from flows.cli.prefect_server import bind_ephemeral_server
from flows.cli.results import print_metrics

#: Where ``--backend openai`` reads its API key (``tasks.llm.types.EngineConfig.api_key_env``; a test keeps them equal).
API_KEY_ENV = "OPENAI_API_KEY"


def run_config_from_args(a: argparse.Namespace):
    """Build a RunConfig from ``linkedqa run`` arguments."""
    from tasks.runs.config import RunConfig  # heavy: the run machinery (see the top of this module)

    return RunConfig(method=a.method, dataset=a.dataset, split=a.split, limit=a.limit, shards=a.shards,
                     backend=a.backend, model=a.model, kb=a.kb, settings=parse_sets(a.set),
                     max_model_len=a.max_model_len, base_url=a.base_url, cache=not a.no_cache,
                     timeout_s=a.timeout, max_retries=a.retries, api_key_block=a.api_key_block,
                     dtype=None if a.dtype == "auto" else a.dtype, scheduler=a.scheduler,
                     api=a.api, concurrency=a.concurrency)


def check_run_args(a: argparse.Namespace):
    """The RunConfig of ``linkedqa run`` arguments, checked by the plan's own checks.

    Method, settings, dataset and task kind: :func:`tasks.runs.checks.check_run_config`; an HTTP server, its model
    and its API (``--backend openai``): :func:`tasks.runs.checks.check_run_api`, unless the API key is to come from a
    Prefect Secret block (read where the plan is made); numbers: the parser. Each is refused before a Prefect server
    or an engine starts.
    """
    from tasks.runs.checks import check_run_api, check_run_config  # heavy: the dataset loaders, every method

    cfg = run_config_from_args(a)
    _, settings, _ = check_run_config(cfg)
    if cfg.backend != "openai" or not cfg.api_key_block or os.environ.get(API_KEY_ENV):
        cfg, applied = check_run_api(cfg, settings)
        for field, why in (applied or {}).get("not_sent", {}).items():
            print(f"note: {cfg.api} API: {field} not sent ({why})")
    return cfg


def execute_run(a: argparse.Namespace, close: bool = True) -> str:
    """Validate, run and print the metrics of ``linkedqa run`` arguments; returns the run id.

    ``close=False`` keeps this process's engines for the next run (``linkedqa reproduce``; it closes them).
    """
    cfg = check_run_args(a)  # before the heavy imports: a bad argument is refused in ~1.5 s, not ~5
    from flows.run_method import run_method_on  # heavy: pulls prefect
    from tasks.runs.engine_pool import close_backends  # heavy: the LLM backends

    bind_ephemeral_server()  # a SIGKILLed run must not leave Prefect's temporary server behind
    try:
        run_id = run_method_on(cfg, a.runner, a.workers, a.dask_address)
    finally:
        if close:
            close_backends()
    print_metrics(run_id)
    return run_id


def cmd_run(a: argparse.Namespace) -> int:
    """``linkedqa run METHOD``; the last stdout line is the run id."""
    print(execute_run(a))
    return 0
