"""EA-Agent reward (paper §4.4, Eq. 3-6): ``gamma = gamma_mu + c * gamma_ref + gamma_e``.

Inputs: final prediction, gold target, the executed tool path, and the initial (pre-Reflector) prediction.
Outputs: :class:`Reward` with every term.

* ``gamma_mu`` (Eq. 4): 1 if the final prediction is the gold target, else 0.
* ``c``: 1 when the Reflector ran, else 0 (then ``gamma_ref`` does not count).
* ``gamma_ref`` (Eq. 5): +1 initial wrong -> refined right; ``-alpha`` right -> right (unneeded reflection);
  -1 right -> wrong. Eq. 5 leaves wrong -> wrong undefined; it is 0 here (the reflection neither helped nor
  broke anything; the path-length term already charges for the call).
* ``gamma_e`` (Eq. 6): ``exp(-beta * l)`` with ``l`` the number of tools in the path.

Hyper-parameters (Appendix E): ``alpha = 0.5``, ``beta = 0.2``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.5
BETA = 0.2


@dataclass(frozen=True)
class Reward:
    """All terms of Eq. 3."""

    gamma_mu: float
    c: int
    gamma_ref: float
    gamma_e: float

    @property
    def total(self) -> float:
        """``gamma_mu + c * gamma_ref + gamma_e``."""
        return self.gamma_mu + self.c * self.gamma_ref + self.gamma_e


def reflector_term(initial: str | None, refined: str | None, gold: str, alpha: float = ALPHA) -> float:
    """``gamma_ref`` of Eq. 5 (0 for the case the paper leaves undefined: wrong -> wrong)."""
    init_ok, ref_ok = initial == gold, refined == gold
    if not init_ok and ref_ok:
        return 1.0
    if init_ok and ref_ok:
        return -alpha
    if init_ok and not ref_ok:
        return -1.0
    return 0.0


def compute_reward(final: str | None, gold: str, path: Sequence[str], initial: str | None = None,
                   reflected: bool = False, alpha: float = ALPHA, beta: float = BETA) -> Reward:
    """Reward of one executed path (Eq. 3-6).

    Args:
        final: Final prediction (after the Reflector when it ran); ``None`` when nothing was predicted.
        gold: Gold target id.
        path: Executed tool names (its length is ``l``).
        initial: Entity Alignment Tool prediction before reflection (needed when ``reflected``).
        reflected: Whether the Reflector ran (``c``).
        alpha: Mild penalty for an unneeded reflection.
        beta: Path-length coefficient.

    Returns:
        The reward terms.
    """
    gamma_mu = 1.0 if final is not None and final == gold else 0.0
    gamma_ref = reflector_term(initial, final, gold, alpha) if reflected else 0.0
    return Reward(gamma_mu, int(reflected), gamma_ref, math.exp(-beta * len(path)))
