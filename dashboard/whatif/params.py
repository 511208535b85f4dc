"""Scenario parameters: their canonical (hashable) form and the checks every kind's ``check`` uses.

Invariants: ``canon`` turns dicts into sorted tuples and numbers into floats, so equal settings are equal however
they were produced, and ``plain`` turns them back; a failed check raises ``ScenarioError`` with one line naming
the parameter.
"""
from __future__ import annotations

import math


class ScenarioError(ValueError):
    """A scenario that cannot be built: one line naming the parameter."""


def canon(v):
    if isinstance(v, dict):
        return tuple(sorted((str(k), canon(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(canon(x) for x in v)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    raise ScenarioError(f"unsupported parameter value {v!r}")


def plain(v):
    """Back from the canonical form: tuples of pairs -> dicts."""
    if isinstance(v, tuple) and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in v):
        return {k: plain(x) for k, x in v}
    return v


def number(name, x, lo=0.0, hi=math.inf, none=False) -> None:
    """``ScenarioError`` unless ``x`` is a finite number in [lo, hi] (or None when ``none``)."""
    if x is None and none:
        return
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not lo <= x <= hi:
        raise ScenarioError(f"{name}: must be a number in [{lo:g}, {hi:g}], got {x!r}")


def one_of(name, x, allowed) -> None:
    if x not in allowed:
        raise ScenarioError(f"{name}: {x!r} is not one of {'|'.join(allowed)}")
