"""Every ``LINKEDQA_*`` environment variable the code, the tests and the build files read: default and meaning.

docs/reference/configuration.md#environment-variables is generated from :data:`ENV_VARS`; a test scans flows/,
tasks/, storage/, tests/, the Makefile, .ci/ and prefect.yaml for ``LINKEDQA_*`` names and fails for a name missing
here, so a new variable is documented where it is added. The modules that read a variable keep their own constant
for its name; this table only describes them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    """One environment variable.

    Attributes:
        default: What applies when it is unset (text for the reference page).
        meaning: What it sets.
        read_by: The files that read it (paths relative to the repository).
        test_only: Read by the test suite only, not by a ``linkedqa`` command, a flow or a worker.
    """

    default: str
    meaning: str
    read_by: tuple[str, ...]
    test_only: bool = False


ENV_VARS: dict[str, EnvVar] = {
    "LINKEDQA_HOME": EnvVar(
        "`./warehouse` (`make`: `warehouse/` of the checkout)",
        "The data root: KB versions, datasets, indexes, runs, models, caches, reports and `catalog.duckdb`. "
        "Nothing is written outside it except by explicit flags.",
        ("storage/layout.py", "flows/cli/command_env.py", "Makefile")),
    "LINKEDQA_DATA": EnvVar(
        "`../shared/data` beside the checkout",
        "Where raw inputs are read: benchmark files (`data load`), the sample dumps (`kb build --sample`); "
        "`data fetch` writes there.",
        ("storage/layout.py", ".ci/run")),
    "LINKEDQA_MIRROR": EnvVar(
        "unset: the official locations",
        "Mirror base URL replacing `https://dumps.wikimedia.org` and `https://raw.githubusercontent.com` in "
        "downloads, paths kept (`--mirror` overrides it).",
        ("tasks/fetch/sources.py",)),
    "LINKEDQA_DUCKDB_MEMORY": EnvVar(
        "`auto`: a quarter of the machine's memory, split between the processes of a step",
        "DuckDB memory limit of the bounded-memory batch queries (KB merge, kg-duckdb build, N-Triples export, "
        "BM25 key checks), per process: a size such as `8GB` or `512MiB` (at least 100 MB), or `auto`. "
        "`--memory-limit` sets it for one command.",
        ("storage/catalog.py", "flows/cli/args.py")),
    "LINKEDQA_MODELS": EnvVar(
        "`<LINKEDQA_HOME>/models`",
        "Folder of converted models: set it to share the embedded model (1.3 GB) between homes.",
        ("storage/layout.py",)),
    "LINKEDQA_DENSE_INDEX": EnvVar(
        "`auto`: exact (flat) up to 1,000,000 vectors, IVF-PQ above",
        "Structure of the dense FAISS indexes: `auto`, `flat`, `ivfpq`, or `ivfpq:` / `auto:` followed by "
        "`nlist=N,m=M,nbits=B,nprobe=P,ef_search=E` (any subset). An index of another structure is rebuilt.",
        ("tasks/search/dense_ann.py",)),
    "LINKEDQA_PROGRESS": EnvVar(
        "`auto`: a live bar on a terminal, plain lines otherwise",
        "Progress display of long steps: `tty`, `plain` or `off`.",
        ("tasks/progress.py",)),
    "LINKEDQA_PROGRESS_INTERVAL": EnvVar(
        "`30`",
        "Seconds between the time-based lines of plain progress (besides one line per 10 %).",
        ("tasks/progress.py",)),
    "LINKEDQA_TORCH_THREADS": EnvVar(
        "every core the process may run on",
        "Torch CPU threads for MiniLM encoding (dense indexes, entity-alignment embeddings).",
        ("tasks/search/passages.py",)),
    "LINKEDQA_SEARCH_THREADS": EnvVar(
        "every core the process may run on",
        "Threads of a batched BM25 search (entity, title and passage indexes): the queries of one agent step are "
        "searched on that many threads. The hits are the same for any number.",
        ("tasks/search/bm25.py",)),
    "LINKEDQA_CHECK_TOOL_TYPES": EnvVar(
        "unset: off",
        "`1`: a run validates every tool payload and result against the types the tool declares and refuses "
        "untyped tools (the method matrix test runs with it).",
        ("tasks/methods/tool_types.py",)),
    "LINKEDQA_REPO": EnvVar(
        "none: a worker needs it",
        "The checkout a Prefect worker runs the deployments' flows from (`prefect.yaml`'s pull step).",
        ("prefect.yaml",)),
    "LINKEDQA_MODELS_CACHE": EnvVar(
        "`warehouse/models` of the checkout",
        "Where the test session converts the embedded model once and keeps it for later sessions.",
        ("tests/e2e/conftest.py",), test_only=True),
    "LINKEDQA_GPU_MODEL": EnvVar(
        "`embedded`",
        "Model of the GPU test (`pytest -m gpu`): a local folder or a Hugging Face id in the local cache.",
        ("tests/e2e/test_gpu.py",), test_only=True),
    "LINKEDQA_GPU_N": EnvVar(
        "`64`",
        "ELA questions the GPU test runs.",
        ("tests/e2e/test_gpu.py",), test_only=True),
    "LINKEDQA_TEST_SESSION": EnvVar(
        "set by the session (its pid and start time)",
        "Tag every process of a pytest session inherits, so the check for servers left running looks only at "
        "its own session's.",
        ("tests/conftest.py", "tests/flows/leak_probe.py", "tests/flows/test_pytest_harness.py"), test_only=True),
    "LINKEDQA_TEST_LEAK_TRACE": EnvVar(
        "unset: no trace",
        "A file the server-leak check appends what it looked at to (the pytest harness test reads it).",
        ("tests/conftest.py",), test_only=True),
    "LINKEDQA_TEST_LEAK_GRACE_S": EnvVar(
        "`30`",
        "Seconds the server-leak check waits for a left-over server to exit before it kills it and fails the "
        "session.",
        ("tests/conftest.py",), test_only=True),
}
