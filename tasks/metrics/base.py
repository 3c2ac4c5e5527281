"""The value type every metric returns, and how shard results merge.

Inputs: nothing. Outputs: :class:`MetricResult` — per-item scores, the aggregate, the number of items it is
computed over, and additive sufficient statistics (``state``) from which the aggregate is recomputed; so
results of several shards merge exactly (:func:`merge_results`) without re-reading the predictions.

Aggregate kinds (``kind``), with their state:

- ``mean``:  state ``(sum of item scores, n)``; value = sum / n.
- ``count``: state ``(count, n)``; value = count (e.g. ``invalid_count``).
- ``micro_precision`` / ``micro_recall`` / ``micro_f1``: state ``(sum |p∩g|, sum |p|, sum |g|, n)``.
- ``harmonic_macro``: state ``(sum P_i, sum R_i, n)``; value = harmonic mean of macro P and macro R
  (GERBIL "Macro F1 QALD").

A value is ``None`` when no item was scored (``n == 0``): there is nothing to average, which is not zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

#: Version of the metric rules. A run's manifest records the version its stored values were computed with
#: (runs finished before the field existed are version 1); ``linkedqa eval RUN_ID --write`` recomputes a stored
#: run's values under the current rules, and the catalog's metric views show the version of every value.
#:
#: * 1: linkedqa's own rules;
#: * 2: each metric reproduces its benchmark's reference evaluation script under the paper's name (docs/metrics.md);
#:   other conventions are extra metrics with names of their own;
#: * 3: adds ``oracle_*``, the score of a perfect choice among what each item retrieved (its failure stage);
#: * 4: QALD metrics type a value as an entity only when it is given as one (a gold QID, a predicted QID, a
#:   Wikidata IRI), so a literal spelled like an id (``"L1"``) is a literal, as in GERBIL; the ToG family's
#:   ``oracle_hit1_tog`` counts an item whose gold has a blank alias as reached (stage rules version 2).
METRICS_FORMAT = 4


class MetricError(ValueError):
    """Inputs a metric cannot score (bad gold format, unknown question, unknown metric...)."""


def _mean(state: tuple[float, ...]) -> float | None:
    total, n = state
    return total / n if n else None


def _count(state: tuple[float, ...]) -> float | None:
    return float(state[0]) if state[1] else None


def _micro_p(state: tuple[float, ...]) -> float | None:
    inter, npred, ngold, n = state
    if not n:
        return None
    if npred == 0:
        return 1.0 if ngold == 0 else 0.0
    return inter / npred


def _micro_r(state: tuple[float, ...]) -> float | None:
    inter, npred, ngold, n = state
    if not n:
        return None
    if ngold == 0:
        return 1.0 if npred == 0 else 0.0
    return inter / ngold


def _micro_f1(state: tuple[float, ...]) -> float | None:
    p, r = _micro_p(state), _micro_r(state)
    if p is None or r is None:
        return None
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _harmonic_macro(state: tuple[float, ...]) -> float | None:
    sum_p, sum_r, n = state
    if not n:
        return None
    p, r = sum_p / n, sum_r / n
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


FINALIZERS: dict[str, Callable[[tuple[float, ...]], float | None]] = {
    "mean": _mean,
    "count": _count,
    "micro_precision": _micro_p,
    "micro_recall": _micro_r,
    "micro_f1": _micro_f1,
    "harmonic_macro": _harmonic_macro,
}


@dataclass(frozen=True)
class MetricResult:
    """One metric over a set of items.

    Attributes:
        name: Metric name (docs/architecture.md#cli-contract), e.g. ``"f1"`` or ``"recall@10"``.
        value: The aggregate; ``None`` when ``n == 0``.
        n: Number of items scored (items the metric does not apply to are not counted).
        per_item: Item id -> that item's score (only scored items).
        kind: Aggregate kind (a key of ``FINALIZERS``).
        state: Additive sufficient statistics of the aggregate.
    """

    name: str
    value: float | None
    n: int
    per_item: dict[str, float] = field(repr=False)
    kind: str
    state: tuple[float, ...]

    def merge(self, other: MetricResult) -> MetricResult:
        """Combine with the result of the same metric on disjoint items (another shard).

        Raises:
            MetricError: Different metric or kind, or the same item scored in both.
        """
        if (self.name, self.kind) != (other.name, other.kind):
            raise MetricError(f"cannot merge {self.name}/{self.kind} with {other.name}/{other.kind}")
        overlap = self.per_item.keys() & other.per_item.keys()
        if overlap:
            raise MetricError(f"{self.name}: items scored in both shards, e.g. {sorted(overlap)[:3]}")
        state = tuple(a + b for a, b in zip(self.state, other.state, strict=True))
        return make_result(self.name, self.kind, state, {**self.per_item, **other.per_item})


def make_result(
    name: str, kind: str, state: tuple[float, ...], per_item: Mapping[str, float]
) -> MetricResult:
    """Build a :class:`MetricResult`, computing the value from the state."""
    if kind not in FINALIZERS:
        raise MetricError(f"unknown aggregate kind {kind!r}")
    return MetricResult(name, FINALIZERS[kind](state), int(state[-1]), dict(per_item), kind, tuple(state))


def mean_result(name: str, per_item: Mapping[str, float]) -> MetricResult:
    """A ``mean`` result from per-item scores."""
    return make_result(name, "mean", (float(sum(per_item.values())), len(per_item)), per_item)


def merge_results(shards: Iterable[Mapping[str, MetricResult]]) -> dict[str, MetricResult]:
    """Merge per-shard ``{name: MetricResult}`` dicts into one (same names in every shard).

    Raises:
        MetricError: Shards disagree on the metric names, or an item appears in two shards.
    """
    merged: dict[str, MetricResult] = {}
    names: set[str] | None = None
    for shard in shards:
        if names is None:
            names = set(shard)
        elif set(shard) != names:
            raise MetricError(f"shards have different metrics: {sorted(names ^ set(shard))}")
        for name, res in shard.items():
            merged[name] = merged[name].merge(res) if name in merged else res
    return merged


def item_ids(ids: Iterable[str] | None, n: int) -> list[str]:
    """Item ids as strings: the given ones (checked for length and uniqueness) or ``"0".."n-1"``."""
    if ids is None:
        return [str(i) for i in range(n)]
    out = [str(i) for i in ids]
    if len(out) != n:
        raise MetricError(f"{len(out)} ids for {n} items")
    if len(set(out)) != n:
        raise MetricError("item ids repeat")
    return out
