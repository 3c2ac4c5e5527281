"""The demo is built from the same parser as the commands it shows, so it cannot drift from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows import cli
from flows.cli import data, demo, kb, run_command
from tasks.llm.env import BF16_CPU_FLAGS, cpu_flags, resolve_dtype
from tasks.runs.checks import check_run_config


def test_every_demo_step_is_a_real_command_line():
    parser = cli.build_parser()
    args = parser.parse_args(["demo"])
    assert (args.limit, args.shards, args.max_tokens_answer) == (demo.DEMO_LIMIT, demo.DEMO_SHARDS,
                                                                 demo.DEMO_MAX_TOKENS_ANSWER)
    steps = demo.demo_steps(args)
    fns = []
    for _, argv in steps:
        ns = parser.parse_args(argv)  # SystemExit here = a demo step the CLI does not accept
        fns.append(ns.fn)
        if ns.fn is run_command.cmd_run:
            check_run_config(run_command.run_config_from_args(ns))  # method, settings and dataset are known
    assert fns == [kb.cmd_kb_build, data.cmd_models_prepare, run_command.cmd_run, run_command.cmd_run]
    ela = parser.parse_args(steps[-1][1])
    assert (ela.method, ela.limit, ela.shards) == ("ela", demo.DEMO_LIMIT, demo.DEMO_SHARDS)
    assert ela.set == [f"max_tokens_answer={demo.DEMO_MAX_TOKENS_ANSWER}"]


def test_demo_options_reach_the_ela_step():
    parser = cli.build_parser()
    ela = parser.parse_args(demo.demo_steps(parser.parse_args(["demo", "--limit", "3", "--shards", "1",
                                                               "--max-tokens-answer", "64"]))[-1][1])
    assert (ela.limit, ela.shards, ela.set) == (3, 1, ["max_tokens_answer=64"])
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--limit", "0"])


@pytest.mark.parametrize(
    ("flags", "is_cpu", "asked", "expected"),
    [
        ({"avx2", "fma"}, True, "auto", "float32"),  # AVX2-only CPU: bf16 would be emulated
        ({"avx512f", "avx512_bf16"}, True, "auto", "bfloat16"),
        ({"amx_bf16", "amx_tile"}, True, "auto", "bfloat16"),
        ({"avx2"}, False, "auto", "auto"),  # GPU: vLLM picks the model's dtype
        ({"avx2"}, True, "bfloat16", "bfloat16"),  # an explicit choice always wins
        ({"avx512_bf16"}, True, "float32", "float32"),
    ],
)
def test_engine_dtype_follows_the_cpu(flags, is_cpu, asked, expected):
    assert resolve_dtype(asked, is_cpu, frozenset(flags)) == expected


def test_unknown_dtype_is_a_usage_error():
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        resolve_dtype("fp8", True, frozenset())
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "ela", "--dataset", "webqsp-el", "--dtype", "fp8"])


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\nbugs\t\t: x\n")
    assert cpu_flags(f) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(tmp_path / "missing") == frozenset()
    assert BF16_CPU_FLAGS & cpu_flags(f)


def test_dtype_is_operational_not_part_of_the_run_id():
    from tasks.runs.config import OPERATIONAL_FIELDS, RunConfig
    from tasks.runs.engine_pool import engine_config

    assert "dtype" in OPERATIONAL_FIELDS
    assert engine_config(RunConfig(method="ela", dataset="webqsp-el")).dtype == "auto"
    assert engine_config(RunConfig(method="ela", dataset="webqsp-el", dtype="float32")).dtype == "float32"


def test_efficiency_metric_names_are_the_stored_ones():
    """The demo summary splits quality from cost metrics by this list: it must name what is stored."""
    import inspect

    from tasks.runs import finalize

    src = inspect.getsource(finalize.efficiency_metrics)
    stored = set(__import__("re").findall(r'"metric": "([a-z_@0-9]+)"', src))
    assert stored == finalize.EFFICIENCY_METRICS
