"""The one min-runtime resolver: which preemption contract a job runs under, and why.

A job's min runtime is how long it runs before it may be preempted (DOMAIN.md section 6). Four sources can
give one; the first that does wins:

1. **scenario override** (``SimConfig.min_runtime_by_class``: job class -> seconds, or ``"default"`` for every
   class it does not name; ``simulate --min-runtime``, ``scenario min-runtime``, the Fair share page). It is
   the question the user is asking ("what if training jobs had a 4 h contract?"), so it wins over everything
   below. A warm start's pinned jobs (started before T) ran as logged: no override reaches them.
2. **log value** (the job's own ``min_runtime_s`` column). It ranks below the override, or a what-if on a
   log that records contracts would silently change nothing; and above the budget file, because a job's own
   recorded contract is more specific than a per-class policy (as Slurm's per-job value beats a partition
   default).
3. **budget file** (``budgets.toml``'s ``[min_runtime]`` tables: ``BudgetTree.min_runtime``, the deepest
   table on the account's path naming the class or ``default``, then the top-level table).
4. **default** (``SimConfig.min_runtime_s``).

"No contract" has one meaning: ``None`` = no source gives a value = the job is never preempted (the engine
holds it as ``inf``; jobs.parquet writes null). ``0`` is a contract: preemptible at once (unallocated
occupancy, free of fair-share charge).

Invariants: ``resolve`` is the precedence, written once; ``per_job`` applies it to a workload (cached per
distinct input) and every caller, the engine, the CLI and the page, goes through one of them. Values are
seconds end to end; hours appear only at a UI edge.
"""
from __future__ import annotations

import math

from .budgets import JOB_CLASSES, BudgetTree
from .config import ConfigError, parse_duration

NEVER = math.inf  # the engine's "no contract": never preempted
DEFAULT = "default"  # the override key for every class it does not name (as in budgets.toml)


def resolve(job_class: str | None, account: str | None, *, logged_s: float | None = None,
            override_s: dict | None = None, tree: BudgetTree | None = None, default_s: float | None = None,
            pinned: bool = False) -> float | None:
    """Seconds of the job's min runtime by the precedence above, or None (no contract: never preempted)."""
    if override_s and not pinned:
        for key in (job_class, DEFAULT):
            if key is not None and key in override_s:
                return _seconds(override_s[key])
    if logged_s is not None and logged_s == logged_s and logged_s >= 0:  # NaN and negatives are "not logged"
        return float(logged_s)
    if tree is not None:
        from_file = tree.min_runtime(job_class, account)
        if from_file is not None:
            return float(from_file)
    return _seconds(default_s)


def _seconds(v) -> float | None:
    return None if v is None else float(v)


def per_job(wl, cfg, tree: BudgetTree | None) -> list[float]:
    """Per job of workload ``wl`` under ``cfg``: ``resolve`` in seconds, ``NEVER`` for no contract."""
    override = cfg.min_runtime_by_class
    if (not override and tree is None and
            ("min_runtime_s" not in wl.frame.columns or wl.frame["min_runtime_s"].null_count() == wl.n)):
        one = _seconds(cfg.min_runtime_s)  # no override, no file, nothing logged: one contract for all
        return [NEVER if one is None else one] * wl.n
    pinned = wl.pinned if override else [False] * wl.n
    cache: dict = {}
    out = []
    for v, cls, a, pin in zip(wl.log_min_rt, wl.job_class, wl.acct, pinned):
        key = (cls, a, bool(pin), v if v is not None and v == v else None)
        r = cache.get(key)
        if r is None:
            got = resolve(cls, wl.accounts[a], logged_s=v, override_s=override, tree=tree,
                          default_s=cfg.min_runtime_s, pinned=bool(pin))
            r = cache[key] = NEVER if got is None else got
        out.append(r)
    return out


def parse_overrides(items, flag: str = "--min-runtime") -> dict[str, float | None]:
    """An override from the command line: each item ``CLASS=DURATION`` (one class) or a bare ``DURATION``
    (every class the others do not name: the ``default`` key); ``none`` as the duration = no contract."""
    out: dict[str, float | None] = {}
    for item in items:
        cls, sep, raw = item.partition("=")
        cls, raw = (cls.strip(), raw) if sep else (DEFAULT, item)
        if cls not in JOB_CLASSES and cls != DEFAULT:
            raise ConfigError(f"{flag} {item!r}: unknown job class {cls!r}; known: {', '.join(JOB_CLASSES)}")
        raw = raw.strip()
        out[cls] = None if raw.lower() == "none" else parse_duration(raw, f"{flag} {cls}=" if sep else flag)
    return out
