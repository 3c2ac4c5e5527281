"""docs/howto/schedule.md: every parameter set the page shows is one its flow takes, and every deployment it names
is in prefect.yaml.

The ``cfg`` field table is ``RunConfig``'s fields with their defaults and the ``linkedqa run`` options that set them;
``my-run.json`` is the same ``RunConfig`` as the ``linkedqa run`` line beside it; each ``prefect deployment run``
command's parameters, merged into its deployment's as the Prefect server merges them (by top-level name), pass the
flow's signature, the parameter schema the server enforces and ``linkedqa run``'s own checks, except the one the
page shows being refused; the ``prefect.yaml`` entry the page shows loads as ``make serve`` loads it. The commands
themselves run against a real Prefect server in ``tests/flows/test_howto_schedule_commands.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import yaml

from flows.cli.serve import PREFECT_YAML, load_deployment_specs, resolve_entrypoint
from tests import readme_sections as gen

PAGE = gen.DOCS / "howto" / "schedule.md"
#: The file the page saves its JSON example as, read by ``--params - < my-run.json``.
RUN_FILE = "my-run.json"


def _blocks(lang: str, text: str | None = None) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", PAGE.read_text() if text is None else text, flags=re.S | re.M)


def _after(marker: str) -> str:
    text = PAGE.read_text()
    return text[text.index(marker):]


def _strip_env(line: str) -> str:
    """A command line without its leading ``NAME=value`` assignments."""
    return re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", line.strip())


def command_lines(prefix: str = "prefect ") -> list[str]:
    """The page's command lines that start with ``prefix`` (after any ``NAME=value``): lines of its bash blocks
    (continuations joined), ``$`` lines of its console blocks and inline code spans, whitespace collapsed."""
    text = PAGE.read_text()
    lines = [line.removeprefix("$ ").split(" #")[0]
             for block in _blocks("bash") + _blocks("console") for line in block.replace("\\\n", " ").splitlines()]
    lines += re.findall(r"`([^`]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    return [flat for flat in (" ".join(_strip_env(line).split()) for line in lines) if flat.startswith(prefix)]


def deployments() -> dict[str, tuple[dict, object]]:
    """``{"flow/name": (prefect.yaml entry, flow)}``."""
    from prefect.flows import load_flow_from_entrypoint

    out = {}
    for spec in load_deployment_specs():
        flow = load_flow_from_entrypoint(resolve_entrypoint(spec["entrypoint"]), use_placeholder_flow=False)
        out[f"{flow.name}/{spec['name']}"] = (spec, flow)
    return out


def run_file() -> dict:
    """The JSON block right after the ``same-run`` marker: ``my-run.json``."""
    return json.loads(_blocks("json", _after("<!-- same-run -->"))[0])


def given_parameters(argv: list[str]) -> dict:
    """The parameters of a ``prefect deployment run`` argument list, as Prefect's CLI builds them."""
    from prefect.cli._utilities import load_json_key_values

    params, multi = [], {}
    it = iter(argv)
    for arg in it:
        if arg in ("--param", "-p"):
            params.append(next(it))
        elif arg == "--params":
            value = next(it)
            multi = run_file() if value == "-" else json.loads(value)
    return {**multi, **load_json_key_values(params, "parameter")}


def schema_errors(flow, params: dict) -> list:
    """What the Prefect server's parameter-schema check says of ``params`` ([] = accepted)."""
    from prefect.utilities.callables import parameter_schema
    from prefect.utilities.schema_tools import validate

    return validate(params, parameter_schema(flow.fn).model_dump_for_openapi(), raise_on_error=False)


def check_flow_parameters(flow, params: dict, data_root: Path) -> None:
    """``params`` pass the flow's signature, the server's schema and, for a run, ``linkedqa run``'s checks."""
    from tasks.datasets.registry import load_dataset
    from tasks.runs.checks import check_run_config

    validated = flow.validate_parameters(params)
    assert schema_errors(flow, params) == []
    if flow.name == "run_method":
        cfg = validated["cfg"]
        check_run_config(cfg)
        if cfg.split is not None:
            assert cfg.split in load_dataset(cfg.dataset, data_root).counts()


def test_the_field_table_is_run_config() -> None:
    from flows.cli import build_parser
    from tasks.runs.config import RunConfig

    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in _after("<!-- run-config-fields -->").split("\n\n")[0].splitlines()[3:]]
    assert [r[0] for r in rows] == [f"`{name}`" for name in RunConfig.model_fields]
    run = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    options = {o for a in run._actions for o in a.option_strings} | {"METHOD"}
    for field, option, default, _ in rows:
        info = RunConfig.model_fields[field.strip("`")]
        want = "required" if info.is_required() else f"`{json.dumps(info.get_default(call_default_factory=True))}`"
        assert default == want, field
        assert option.strip("`").split()[0] in options, option
    from tasks.llm.types import EngineConfig

    meaning, engine = {r[0].strip("`"): r[3] for r in rows}, EngineConfig()  # what a null HTTP field falls back to
    assert f"`null`: {engine.timeout_s:g}" in meaning["timeout_s"]
    assert f"`null`: {engine.max_retries}" in meaning["max_retries"]
    assert f"`null`: {engine.max_concurrency}" in meaning["concurrency"]
    for option in ("--runner", "--workers", "--dask-address"):  # the options the page says have no field
        assert option in options and f"`{option}`" in PAGE.read_text()


def test_the_run_file_is_the_linkedqa_run_command_beside_it() -> None:
    from flows.cli import build_parser
    from flows.cli.run_command import run_config_from_args
    from tasks.runs.config import RunConfig

    block = _blocks("bash", _after("<!-- same-run -->"))[0].replace("\\\n", " ")
    argv = shlex.split(block)
    assert argv[0] == "linkedqa"
    cfg = run_config_from_args(build_parser().parse_args(argv[1:]))
    assert cfg == RunConfig.model_validate(run_file()["cfg"])
    assert cfg.backend == "openai" and cfg.api == "auto" and cfg.concurrency == 8


def test_every_json_example_is_a_run(data_root: Path) -> None:
    blocks = _blocks("json")
    assert blocks, "no JSON example on the page: the scan is broken"
    _, flow = deployments()["run_method/nightly-ela"]
    for block in blocks:
        check_flow_parameters(flow, json.loads(block), data_root)


def test_every_deployment_run_command_takes_its_parameters(data_root: Path) -> None:
    deps = deployments()
    runs = [shlex.split(line)[3:] for line in command_lines("prefect deployment run ")]
    runs = [argv for argv in runs if argv]  # "`prefect deployment run`" named in the prose
    assert len(runs) >= 4, runs
    refused = 0
    for argv in runs:
        spec, flow = deps[argv[0]]
        given = given_parameters(argv[1:])
        assert set(given) <= set(flow.parameters.properties), argv
        merged = {**(spec.get("parameters") or {}), **given}  # the server's merge: by top-level name
        if schema_errors(flow, merged):  # the page's refused example: a cfg without its method
            refused += 1
            assert given == {"cfg": {"limit": 20}} and "'method' is a required property" in PAGE.read_text()
            continue
        check_flow_parameters(flow, merged, data_root)
    assert refused == 1


def test_the_prefect_yaml_entry_loads_as_make_serve_loads_it(data_root: Path) -> None:
    from prefect.client.schemas.schedules import CronSchedule

    from flows.cli.serve import build_deployments, schedules_of

    (block,) = _blocks("yaml")
    specs = yaml.safe_load(block)
    deps = {s["name"]: s for s in load_deployment_specs()}
    for spec in specs:
        assert spec["entrypoint"] == deps[spec["name"]]["entrypoint"]  # an entry of the file, edited
        ((_, flow),) = [v for k, v in deployments().items() if k.endswith("/" + spec["name"])]
        check_flow_parameters(flow, spec["parameters"], data_root)
        wanted = [(s["cron"], s["timezone"]) for s in spec["schedules"]]
        assert [(s.cron, s.timezone) for s in schedules_of(spec)] == wanted
        for s in spec["schedules"]:
            CronSchedule(cron=s["cron"], timezone=s["timezone"])
        (built,) = build_deployments([spec], base=PREFECT_YAML.parent)
        assert built.parameters == spec["parameters"]
    cfg = specs[0]["parameters"]["cfg"]
    assert "limit" not in cfg and cfg["shards"] == 8 and cfg["backend"] == "openai"  # as the page describes it


def test_every_deployment_the_page_names_exists() -> None:
    deps = deployments()
    names = {n.split("/")[1] for n in deps}
    flat = " ".join(PAGE.read_text().split())
    used = set(re.findall(r"`([a-z_]+/[a-z0-9-]+)`", flat))  # flow/deployment in code spans
    for line in command_lines():
        argv = shlex.split(line)
        if argv[1:3] == ["deployment", "run"] and len(argv) > 3:
            used.add(argv[3])
        if argv[1:4] == ["deployment", "schedule", "create"]:
            used.add(argv[4])
        if argv[1] == "deploy" and "--name" in argv:
            assert argv[argv.index("--name") + 1] in names, line
    assert used and used <= set(deps), sorted(used - set(deps))
    for name in re.findall(r"--only ([a-z0-9-]+)", flat) + re.findall(r"`(nightly-[a-z-]+|weekly[a-z-]*)`", flat):
        assert name in names, name
