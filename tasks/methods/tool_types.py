"""Checking tools against the payload and result types they declare.

A tool is a batched function ``tool(payloads: list[P]) -> list[R]`` (or an object whose ``__call__`` is one); ``P``
and ``R`` are the typed dicts declared beside it (``tasks.methods.records`` lists where). :func:`checked_tools`
wraps each tool so that every payload and result of a call is validated against those annotations with pydantic;
a tool without them, with a loose one (``dict``, ``dict[str, Any]``, ``Any``), or a value that does not match
raises :class:`ToolTypeError` naming the tool and the field. A run checks its tools when
``LINKEDQA_CHECK_TOOL_TYPES=1`` (:func:`checks_enabled`); the method matrix (``tests/e2e/test_method_matrix.py``)
runs every (method, task kind) pair with it, so the declared types are held to what the tools really exchange.
Extra keys in a typed dict are not reported.
"""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

#: Environment variable that turns the check on for a run (``1``).
ENV = "LINKEDQA_CHECK_TOOL_TYPES"


class ToolTypeError(TypeError):
    """A tool declares no usable types, or a payload or result does not match them."""


def checks_enabled() -> bool:
    """Whether runs check their tools' types (``$LINKEDQA_CHECK_TOOL_TYPES`` is ``1``)."""
    return os.environ.get(ENV, "") == "1"


def _loose(tp: Any) -> bool:
    """``Any``, a bare ``dict`` or a ``dict[..., Any]``: a type that checks nothing."""
    if tp is Any or tp is dict:
        return True
    return typing.get_origin(tp) is dict and Any in typing.get_args(tp)


def declared_types(name: str, tool: Callable[[list[Any]], list[Any]]) -> tuple[Any, Any]:
    """The element types ``(P, R)`` of a tool annotated ``(payloads: list[P]) -> list[R]`` (or ``Sequence``).

    Raises:
        ToolTypeError: The annotations are missing, not lists, or loose.
    """
    fn = tool if inspect.isfunction(tool) or inspect.ismethod(tool) else type(tool).__call__
    hints = typing.get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    found = [hints.get(params[0]) if params else None, hints.get("return")]
    elems = []
    for what, tp in zip(("payloads", "results"), found, strict=True):
        if typing.get_origin(tp) not in (list, Sequence) or len(typing.get_args(tp)) != 1:
            raise ToolTypeError(f"tool {name!r} declares no {what} type: annotate it `list[T]` with a typed dict T "
                                f"(found {tp!r})")
        elem = typing.get_args(tp)[0]
        if _loose(elem):
            raise ToolTypeError(f"tool {name!r} declares loose {what} ({elem!r}): declare a typed dict")
        elems.append(elem)
    return elems[0], elems[1]


def _validate(name: str, what: str, adapter: TypeAdapter, values: list[Any]) -> None:
    for k, value in enumerate(values):
        try:
            adapter.validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ToolTypeError(f"tool {name!r}: {what}[{k}] does not match its declared type at {where or '.'}: "
                                f"{first['msg']} (got {str(first.get('input'))[:120]!r})") from None


def checked_tools(tools: dict[str, Callable[[list[Any]], list[Any]]]) -> dict[str, Callable[[list[Any]], list[Any]]]:
    """The tools wrapped to validate every payload and result against their declared types.

    Raises:
        ToolTypeError: At wrapping time, a tool whose types are missing or loose (:func:`declared_types`); at call
            time, a payload or result that does not match.
    """
    out = {}
    for name, tool in tools.items():
        p_type, r_type = declared_types(name, tool)

        def checked(payloads: list[Any], _name: str = name, _tool: Callable = tool,
                    _p: TypeAdapter = TypeAdapter(p_type), _r: TypeAdapter = TypeAdapter(r_type)) -> list[Any]:
            _validate(_name, "payloads", _p, payloads)
            results = _tool(payloads)
            _validate(_name, "results", _r, results)
            return results

        out[name] = checked
    return out
