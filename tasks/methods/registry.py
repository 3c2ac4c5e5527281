"""Explicit method registry (``linkedqa run METHOD``): name -> Method class.

Adding a method is one folder (``tasks/methods/<family>/`` with its ``Method`` subclass and ``prompts/``) plus one
line in ``METHODS`` below; :func:`register` does the same at run time (plugins, tests).
"""

from __future__ import annotations

from tasks.methods.anchorrag.method import AnchorRagMethod, CotMethod, TogMethod
from tasks.methods.base import Method
from tasks.methods.ea.agent_method import EaAgentMethod
from tasks.methods.ea.embed_method import EaEmbedMethod
from tasks.methods.ela.method import ElaMethod
from tasks.methods.kgqa.method import KgOneHopMethod, ReactKgMethod
from tasks.methods.qa.method import BM25RagMethod, ClosedBookMethod, DenseRagMethod, ERMethod
from tasks.methods.search_recall.method import SearchRecallMethod

METHODS: dict[str, type[Method]] = {
    ElaMethod.name: ElaMethod,
    SearchRecallMethod.name: SearchRecallMethod,
    KgOneHopMethod.name: KgOneHopMethod,
    ReactKgMethod.name: ReactKgMethod,
    ClosedBookMethod.name: ClosedBookMethod,
    BM25RagMethod.name: BM25RagMethod,
    DenseRagMethod.name: DenseRagMethod,
    ERMethod.name: ERMethod,
    EaEmbedMethod.name: EaEmbedMethod,
    EaAgentMethod.name: EaAgentMethod,
    AnchorRagMethod.name: AnchorRagMethod,
    TogMethod.name: TogMethod,
    CotMethod.name: CotMethod,
}


class UnknownMethod(KeyError):
    """A method name not in the registry."""

    def __str__(self) -> str:
        return str(self.args[0])


def register(cls: type[Method]) -> type[Method]:
    """Add a method class to the registry under ``cls.name`` (usable as a class decorator).

    Raises:
        ValueError: No name, or the name is taken by another class.
    """
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    if METHODS.get(cls.name, cls) is not cls:
        raise ValueError(f"method name {cls.name!r} is already registered by {METHODS[cls.name].__qualname__}")
    METHODS[cls.name] = cls
    return cls


def get_method(name: str) -> type[Method]:
    """Method class by name.

    Raises:
        UnknownMethod: Listing the valid methods.
    """
    try:
        return METHODS[name]
    except KeyError:
        raise UnknownMethod(f"unknown method {name!r}; valid methods: {', '.join(sorted(METHODS))}") from None
