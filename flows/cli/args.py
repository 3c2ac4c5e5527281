"""Argument types and option helpers of the ``linkedqa`` parser: a bad value is a one-line usage error (exit 2)."""

from __future__ import annotations

import argparse
import functools
import os

from storage.catalog import MEMORY_LIMIT_ENV, duckdb_memory_limit, parse_memory_limit
from tasks.kb.plan import ALL_LANGUAGES, parse_languages


def positive(kind: type, zero: bool = False):
    """An argparse ``type=`` parser: a number > 0 (or >= 0 with ``zero``), else a one-line usage error."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be {'>= 0' if zero else '> 0'}, got {text}")
        return value

    return parse


def languages(text: str) -> str:
    """An argparse ``type=`` parser of ``--languages``: ``en,mul`` (normalised) or ``all``, else a usage error."""
    try:
        langs = parse_languages(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return ALL_LANGUAGES if langs is None else ",".join(langs)


def memory_limit(text: str) -> str:
    """An argparse ``type=`` parser of ``--memory-limit``: a DuckDB memory size (``8GB``), else a usage error."""
    try:
        return parse_memory_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


MEMORY_HELP = (f"DuckDB memory limit of each bounded-memory query (KB merge, kg-duckdb build, N-Triples export and "
                f"kg-oxigraph's parts, key checks), per process, e.g. 16GB, or auto; they spill to disk beyond it "
                f"(default: ${MEMORY_LIMIT_ENV}, else auto: a quarter of the machine's or container's memory, shared "
                f"by a step's DuckDB processes)")


def with_memory_limit(fn):
    """A command whose ``--memory-limit`` is ``$LINKEDQA_DUCKDB_MEMORY`` while it runs.

    Its own queries and the workers it starts (they inherit the environment) see it; it is put back after.
    Without the option, a set variable that is not a size is refused (ValueError) before the command starts.
    """

    @functools.wraps(fn)
    def run(a: argparse.Namespace) -> int:
        value = getattr(a, "memory_limit", None)
        if not value:
            duckdb_memory_limit()  # a bad $LINKEDQA_DUCKDB_MEMORY is an error now, not after hours of staging
            return fn(a)
        old = os.environ.get(MEMORY_LIMIT_ENV)
        os.environ[MEMORY_LIMIT_ENV] = value
        try:
            return fn(a)
        finally:
            if old is None:
                os.environ.pop(MEMORY_LIMIT_ENV, None)
            else:
                os.environ[MEMORY_LIMIT_ENV] = old

    return run


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` pairs as a dict (a later key wins); a pair without ``=`` is a ValueError."""
    out: dict[str, str] = {}
    for p in pairs or []:
        if "=" not in p:
            raise ValueError(f"--set expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def parse_wiki_spec(spec: str) -> tuple[str, str]:
    """``enwiki:latest`` / ``enwiki:20250101`` (a bare date or ``latest`` means enwiki) -> (wiki, date)."""
    wiki, sep, date = spec.partition(":")
    if not sep:
        wiki, date = "enwiki", spec
    if not wiki or not date:
        raise ValueError(f"--wikipedia expects WIKI:DATE (e.g. enwiki:latest or enwiki:20250101), got {spec!r}")
    return wiki, date
