"""Exit codes and the one-line error of a failed ``linkedqa`` command.

2 = bad usage or input (unknown method/dataset/--set key, bad name), 3 = unreadable data (truncated dump, failed or
checksum-mismatched download), 4 = missing prerequisite (no KB built, unknown run, no dump of that date), 5 = no space
left on the device, 1 = anything else.
"""

from __future__ import annotations

import errno
import shutil
import sys
import traceback

from pydantic import ValidationError

from storage import layout
from storage.layout import LayoutError

EXIT_USAGE, EXIT_DATA, EXIT_MISSING, EXIT_OTHER, EXIT_NO_SPACE = 2, 3, 4, 1, 5


NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def no_space_message(exc: OSError) -> str:
    """``no space left on device under <home> (<free> free): <strerror> [<file>]`` for a full disk or quota."""
    home = layout.home()
    probe = home if home.exists() else home.parent
    try:
        free = f"{shutil.disk_usage(probe).free / 2**20:,.1f} MiB free"
    except OSError:
        free = "free space unknown"
    where = f" writing {exc.filename}" if exc.filename else ""
    return f"no space left under LINKEDQA_HOME={home} ({free}){where}: {exc.strerror or exc}"


def loaded(*names: str) -> tuple[type, ...]:
    """The classes ``module:Class`` among ``names`` whose defining module is imported.

    The modules that define the errors :func:`error_kind` knows are imported by the commands that can raise
    them, not by this module (its start-up); an exception of a class whose module was never imported cannot
    have been raised, so checking only the loaded ones loses nothing.
    """
    out = []
    for name in names:
        module, _, cls = name.partition(":")
        if module in sys.modules:
            out.append(getattr(sys.modules[module], cls))
    return tuple(out)


def error_kind(exc: BaseException) -> tuple[int, str]:
    """The exit code and the hint line of a failed command's exception."""
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return EXIT_NO_SPACE, ("free space there (or point LINKEDQA_HOME at a larger disk) and re-run the same "
                               "command: finished shards are kept, nothing partial was published")
    if isinstance(exc, loaded("tasks.fetch.sources:DumpNotFound")):
        return EXIT_MISSING, "pick a date listed at https://dumps.wikimedia.org/ (or use latest)"
    if isinstance(exc, loaded("tasks.fetch.http:ChecksumMismatch")):
        return EXIT_DATA, "the corrupt download was deleted; re-run to fetch it again (or check --mirror)"
    if isinstance(exc, loaded("tasks.fetch.http:FetchError")):
        return EXIT_DATA, "re-run the same command: verified files are skipped and a partial download resumes"
    if isinstance(exc, loaded("tasks.dumps.errors:DumpError")):
        return EXIT_DATA, "the input file is truncated or corrupt; nothing was published (re-download it)"
    if isinstance(exc, loaded("tasks.methods.registry:UnknownMethod", "tasks.methods.base:UnknownSetting",
                               "tasks.datasets.registry:UnknownDataset")):
        return EXIT_USAGE, "see `linkedqa run --help`"
    if isinstance(exc, loaded("tasks.reproduce.conditions:ConditionError")):
        return EXIT_USAGE, "see `linkedqa reproduce --list` for the papers and their conditions"
    if isinstance(exc, layout.DataRootNotFound):
        return EXIT_MISSING, "or `linkedqa data fetch --to DIR ...` and LINKEDQA_DATA=DIR (docs/data.md)"
    if isinstance(exc, LayoutError):
        return EXIT_USAGE, "names may use letters, digits and . _ = + -"
    if isinstance(exc, loaded("tasks.runs.shard:MixedDtypeError")):
        return EXIT_USAGE, ("re-run with the --dtype it names (or remove the run's folder): a plain re-run is "
                            "refused again")
    if isinstance(exc, LookupError | FileNotFoundError):
        return EXIT_MISSING, "check `linkedqa kb list` / `linkedqa data list`"
    if isinstance(exc, ValueError):
        return EXIT_USAGE, "see `linkedqa --help`"
    return EXIT_OTHER, "re-run with -v for Prefect logs; a re-run resumes where it stopped"


def one_line(exc: BaseException) -> str:
    """The first line of an error's message; for a pydantic validation error, each field and what is wrong."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or exc.title}: {e['msg']}" for e in exc.errors())
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def report_error(exc: BaseException, verbose: bool = False) -> int:
    """Print a failed command's ``error:`` line and ``hint:`` line (the traceback too with ``-v``); its exit code."""
    code, hint = error_kind(exc)
    msg = no_space_message(exc) if code == EXIT_NO_SPACE else one_line(exc)
    print(f"error: {msg}\nhint: {hint}", file=sys.stderr)
    if verbose:
        traceback.print_exc()
    return code
