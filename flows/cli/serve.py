"""Serve the deployments of ``prefect.yaml`` from one local process (``make serve``, ``python -m flows.cli.serve``).

Inputs: ``prefect.yaml`` at the repository root (the file ``prefect deploy --all`` reads too, so there is one
source of truth for names, entrypoints, parameters, descriptions and cron schedules) and the Prefect API at
``PREFECT_API_URL``. Outputs: the deployments registered with that API with their schedules; their runs execute
as subprocesses of this process (``prefect.serve``), so no work pool or worker is involved.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from flows.cli.command_env import setup_env

REPO_ROOT = Path(__file__).resolve().parents[2]
PREFECT_YAML = REPO_ROOT / "prefect.yaml"


def load_deployment_specs(path: Path = PREFECT_YAML) -> list[dict[str, Any]]:
    """The ``deployments:`` entries of a ``prefect.yaml``.

    Args:
        path: The project file.

    Returns:
        One dict per deployment (``name``, ``entrypoint``, ``parameters``, ``schedules``, ...).
    """
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return list(data.get("deployments") or [])


def resolve_entrypoint(entrypoint: str, base: Path = REPO_ROOT) -> str:
    """``flows/x.py:fn`` relative to the project folder as an absolute ``/.../flows/x.py:fn``."""
    file, _, fn = entrypoint.rpartition(":")
    if not file or not fn:
        raise ValueError(f"entrypoint {entrypoint!r} is not of the form path/to/file.py:flow_function")
    return f"{(Path(base) / file).resolve()}:{fn}"


def schedules_of(spec: dict[str, Any]) -> list:
    """The cron schedules of one deployment entry as Prefect ``Cron`` objects.

    Raises:
        ValueError: A schedule that is not a cron schedule (this project uses cron only).
    """
    from prefect.schedules import Cron  # heavy: prefect

    out = []
    for s in spec.get("schedules") or []:
        if "cron" not in s:
            raise ValueError(f"deployment {spec.get('name')!r}: only cron schedules are supported, got {s}")
        out.append(Cron(s["cron"], timezone=s.get("timezone"), active=s.get("active", True)))
    return out


def build_deployments(specs: list[dict[str, Any]], only: list[str] | None = None, base: Path = REPO_ROOT) -> list:
    """``flow.to_deployment(...)`` objects for the given ``prefect.yaml`` entries.

    Args:
        specs: Entries from :func:`load_deployment_specs`.
        only: Deployment names to keep (default: all).
        base: Folder the entrypoints are relative to.

    Returns:
        ``RunnerDeployment`` objects ready for ``prefect.serve``.

    Raises:
        ValueError: An unknown name in ``only``.
    """
    from prefect.flows import load_flow_from_entrypoint  # heavy: prefect

    names = [s["name"] for s in specs]
    unknown = sorted(set(only or []) - set(names))
    if unknown:
        raise ValueError(f"unknown deployment(s) {', '.join(unknown)}; prefect.yaml has {', '.join(names)}")
    deployments = []
    for spec in specs:
        if only and spec["name"] not in only:
            continue
        flow = load_flow_from_entrypoint(resolve_entrypoint(spec["entrypoint"], base), use_placeholder_flow=False)
        deployments.append(flow.to_deployment(
            name=spec["name"], description=spec.get("description"), tags=spec.get("tags"),
            parameters=spec.get("parameters") or {}, schedules=schedules_of(spec),
        ))
    return deployments


def main(argv: list[str] | None = None) -> int:
    """Serve the deployments of ``prefect.yaml`` until interrupted (Ctrl-C / SIGTERM).

    Args:
        argv: ``[--file prefect.yaml] [--only NAME ...] [--limit N]``.

    Returns:
        Exit code.
    """
    p = argparse.ArgumentParser(prog="python -m flows.cli.serve", description=__doc__.splitlines()[0])
    p.add_argument("--file", type=Path, default=PREFECT_YAML, help="project file (default: the repo's prefect.yaml)")
    p.add_argument("--only", action="append", default=None, metavar="NAME", help="serve only this deployment "
                   "(repeatable; default: all)")
    p.add_argument("--limit", type=int, default=None, help="most flow runs at once (default: no limit)")
    a = p.parse_args(argv)


    setup_env(verbose=True)  # before prefect is imported: PREFECT_HOME etc. inside LINKEDQA_HOME unless exported
    import prefect  # heavy: prefect

    deployments = build_deployments(load_deployment_specs(a.file), a.only, base=a.file.resolve().parent)
    for d in deployments:
        crons = ", ".join(f"{s.schedule.cron} {s.schedule.timezone or ''}".strip() for s in d.schedules or [])
        print(f"serving {d.flow_name}/{d.name}: {crons or 'on demand'}", flush=True)
    prefect.serve(*deployments, limit=a.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
