"""Prompt files of a method family: one way to read them, one way to hash them.

Every family keeps its prompt texts in ``tasks/methods/<family>/prompts/``. Method modules read them through
``PromptFolder(__file__)`` (cached, UTF-8), and a run id hashes only the files its own method reads
(``tasks.methods.base.Method.prompt_hashes``): editing ELA's system prompt changes ELA's run ids and leaves an
unfinished AnchorRAG run resumable.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

METHODS_ROOT = Path(__file__).resolve().parent


@functools.cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


class PromptFolder:
    """The ``prompts/`` folder beside a method module.

    Args:
        module_file: ``__file__`` of a module inside ``tasks/methods/<family>/``.
    """

    def __init__(self, module_file: str | Path):
        self.path = Path(module_file).resolve().parent / "prompts"

    def text(self, name: str) -> str:
        """Text of ``prompts/<name>``."""
        return _read(self.path / name)

    def json(self, name: str) -> Any:
        """Parsed JSON of ``prompts/<name>`` (a fresh object on every call: callers may change it)."""
        return json.loads(_read(self.path / name))

    def files(self) -> list[str]:
        """Every prompt file of the folder, as paths relative to ``tasks/methods`` (sorted)."""
        if not self.path.is_dir():
            return []
        family = self.path.parent.name
        return sorted(f"{family}/prompts/{p.name}" for p in self.path.iterdir() if p.is_file())


def file_hashes(relative_paths: list[str] | tuple[str, ...]) -> dict[str, str]:
    """sha256[:12] of prompt files given relative to ``tasks/methods`` (recorded in run ids and manifests).

    Raises:
        FileNotFoundError: A declared prompt file does not exist (a method/prompt mismatch).
    """
    root = METHODS_ROOT
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest()[:12] for rel in sorted(relative_paths)}
