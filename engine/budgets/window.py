"""Entitled, demanded and received resource-hours per budget-tree row over a window: the one tally behind
attainment from logs (``queries.analytics.budgets``) and from a simulated run (``engine.attainment``).

A window is added segment by segment (the tree is constant inside a segment, ``BudgetTree.segments``), each
with its capacity in resource-hours and the (account, demanded hours, received hours) of the accounts active
in it. Per segment: demand goes to the account's demand bucket (``bucket``) for the water-filling and to the
bucket and every node above it (``ancestors``) for the rows; entitled = ``entitlements`` of the capacity over
the buckets' demand, static = ``static_entitlements``. Rows are the tree's ``frontier`` at ``level``.

Invariants: the sums do not depend on the order accounts arrive in; a frontier row of a segment is present in
the result even with no demand (an idle team still has an entitlement), except a "direct" bucket with neither
demand nor receipt, which is not a team; ``unbudgeted`` sorts last.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

from . import tree as bt


class WindowTally:
    def __init__(self, level: str = "leaf"):
        self.level = level
        self._totals: dict[str, list[float]] = {}  # key -> [entitled, static, demanded, received] hours
        self._meta: dict[str, tuple[str, int]] = {}  # key -> (kind, depth)

    def add_segment(self, root: bt.BudgetNode, capacity_hours: float, hours: float,
                    usage: Iterable[tuple[str, float, float]]) -> None:
        """Add one segment: ``usage`` rows of (account, demanded hours, received hours)."""
        need: dict[str, float] = {}  # per demand bucket, for the water-filling
        demanded: dict[str, float] = {}  # per bucket and every node above it
        received: dict[str, float] = {}
        for account, dem_h, rec_h in usage:
            key = bt.bucket(root, account)
            need[key] = need.get(key, 0.0) + dem_h
            for k in bt.ancestors(key):
                demanded[k] = demanded.get(k, 0.0) + dem_h
                received[k] = received.get(k, 0.0) + rec_h
        entitled = bt.entitlements(root, capacity_hours, need, window_hours=hours)
        static = bt.static_entitlements(root, capacity_hours)
        for key, kind, depth in bt.frontier(root, self.level):
            acc = self._totals.setdefault(key, [0.0, 0.0, 0.0, 0.0])
            acc[0] += entitled.get(key, 0.0)
            acc[1] += static.get(key, 0.0)
            acc[2] += demanded.get(key, 0.0)
            acc[3] += received.get(key, 0.0)
            self._meta[key] = (kind, depth)

    def rows(self) -> list[tuple]:
        """(key, kind, depth, entitled, static, demanded, received, attainment, attainment_static) per row,
        by key with ``unbudgeted`` last; ``attainment`` of (received, demanded, entitled / static)."""
        out = []
        for key in sorted(self._totals, key=lambda k: (k == bt.UNBUDGETED, k)):
            ent, stat, dem, rec = self._totals[key]
            kind, depth = self._meta[key]
            if kind == "direct" and dem == 0 and rec == 0:
                continue
            out.append((key, kind, depth, ent, stat, dem, rec, attainment(rec, dem, ent), attainment(rec, dem, stat)))
        return out


def attainment(received: float, demanded: float, entitled: float) -> float | None:
    """received / min(entitled, demanded): the share of what a team could use of its entitlement that it got.

    The one definition, for the log path (``queries.analytics.budgets``) and a simulated run (``engine.attainment``) alike;
    pass the static entitlement for ``attainment_static``. None when the divisor is 0 (no demand, or an
    unfunded bucket with nothing left over): not a number a mean may average."""
    den = min(entitled, demanded)
    return received / den if den > 1e-12 else None


def summary(rows: Iterable[tuple[str, str, float | None]], threshold: float = 0.95) -> dict:
    """The distribution of attainment over a window's rows ``(key, kind, attainment)``: the one summary behind
    the log path and a simulated run (each names the keys its callers read).

    Over "node" rows that have an attainment: ``teams``, ``mean`` of attainment capped at 1 (a team receiving more
    than its share is counted in ``over_entitled``, not used to hide another's shortfall; an exact sum),
    ``worst`` (uncapped min; ties: the smallest key) and ``worst_node``, ``at_least`` (attainment >= threshold)."""
    vals = sorted((a, key) for key, kind, a in rows if kind == "node" and a is not None)
    if not vals:
        return {"teams": 0, "mean": None, "worst": None, "worst_node": None, "at_least": 0, "over_entitled": 0}
    return {"teams": len(vals), "mean": math.fsum(min(a, 1.0) for a, _ in vals) / len(vals), "worst": vals[0][0],
            "worst_node": vals[0][1], "at_least": sum(1 for a, _ in vals if a >= threshold),
            "over_entitled": sum(1 for a, _ in vals if a > 1.0 + 1e-9)}
