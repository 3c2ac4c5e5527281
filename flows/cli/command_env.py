"""The process environment of a ``linkedqa`` command: Prefect, vLLM and torch settings, and its Prefect API."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from flows.cli.prefect_server import bind_ephemeral_server
from tasks.llm.env import configure_runtime_env


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


def start_prefect() -> None:
    """Start the command's temporary Prefect API, tied to this process (no-op with ``PREFECT_API_URL`` set).

    Every command that writes to the warehouse runs a flow; a SIGKILLed command must not leave the server behind.
    """
    bind_ephemeral_server()
