"""Capacity the log left idle while jobs waited: the evidence for outages, drains and dedicated times a log does
not state (DOMAIN.md section 10).

From the log alone (submit, logged start and end, size) and the machine's capacity N: at every instant, R(t) is
the capacity held by logged running jobs and h(t) the request of the *oldest* job submitted and not yet started
(the FCFS head). The log was *idle while its head waited* when h(t) <= N - R(t): the job every reservation-based
scheduler serves first fit the idle capacity and did not start. A cycle-driven scheduler leaves such gaps of
seconds to minutes; gaps of ``min_duration_s`` (default 1 h) or more are counted as *suspect outages*: capacity
the real machine most likely did not have (nodes down or drained, dedicated time), or a priority order that put
a younger job first (the log cannot tell the two apart). A small job waiting beside idle capacity behind an older
large one is not counted: EASY keeps capacity idle for the large one's reservation.

Invariants: pure numpy/polars over the frame given (no simulation, no store); instants are seconds on the
frame's clock (``fidelity.seconds``); intervals are maximal, disjoint and in time order; jobs without a logged
start or end are ignored; the figures cover only [t0, t1).
"""
from __future__ import annotations

import heapq

import numpy as np
import polars as pl

from .fidelity import seconds

MIN_DURATION_S = 3600.0


def idle_while_waiting(jobs: pl.DataFrame, size_col: str, capacity: float, t0: float | None = None,
                       t1: float | None = None, min_duration_s: float = MIN_DURATION_S, longest: int = 5) -> dict:
    """The suspect outages of the log over [t0, t1): their number, hours, share of the window's time, the share
    of the window's capacity they left idle, and the ``longest`` ones (start, end, idle capacity at least)."""
    out, t0, t1 = _outages(jobs, size_col, capacity, t0, t1, min_duration_s)
    span = max(t1 - t0, 0.0)
    top = sorted(out, key=lambda m: (-(m[1] - m[0]), m[0]))[:longest]
    return {"min_duration_s": float(min_duration_s), "intervals": len(out),
            "hours": float(sum(m[1] - m[0] for m in out) / 3600.0),
            "share_of_time": float(sum(m[1] - m[0] for m in out) / span) if span else None,
            "capacity_idle_share": float(sum(m[3] for m in out) / (capacity * span)) if span and capacity else None,
            "longest": [{"start_s": float(a), "end_s": float(b), "idle_at_least": float(i)} for a, b, i, _ in top]}


def suspect_outages(jobs: pl.DataFrame, size_col: str, capacity: float, t0: float | None = None,
                    t1: float | None = None, min_duration_s: float = MIN_DURATION_S) -> list[tuple]:
    """Every suspect outage over [t0, t1), in time order: (start_s, end_s, idle capacity at least)."""
    return [(a, b, i) for a, b, i, _ in _outages(jobs, size_col, capacity, t0, t1, min_duration_s)[0]]


def _outages(jobs, size_col, capacity, t0, t1, min_duration_s):
    f = jobs.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null() & pl.col(size_col).is_not_null())
    sub, st, en = seconds(f["submit"]), seconds(f["start"]), seconds(f["end"])
    size = f[size_col].cast(pl.Float64).to_numpy()
    if t0 is None:
        t0 = float(np.min(sub)) if len(sub) else 0.0
    if t1 is None:
        t1 = float(np.max(en)) if len(en) else t0
    # events at one instant apply together: ends and starts first, then submits (a job submitted and started at
    # the same instant never waited)
    ev = sorted([(s, 0, i) for i, s in enumerate(st)] + [(e, 0, ~i) for i, e in enumerate(en)]
                + [(u, 1, i) for i, u in enumerate(sub) if u < st[i]])
    running, waiting, gone = 0.0, [], set()
    segments = []  # (start, end, idle) while the oldest waiting job fit
    k = 0
    while k < len(ev):
        t = ev[k][0]
        while k < len(ev) and ev[k][0] == t:
            _, kind, i = ev[k]
            if kind == 1:
                heapq.heappush(waiting, (sub[i], i))
            elif i >= 0:
                running += size[i]
                gone.add(i)
            else:
                running -= size[~i]
            k += 1
        while waiting and waiting[0][1] in gone:
            heapq.heappop(waiting)
        nxt = ev[k][0] if k < len(ev) else t
        idle = capacity - running
        if waiting and size[waiting[0][1]] <= idle + 1e-9 and nxt > t:
            a, b = max(t, t0), min(nxt, t1)
            if b > a:
                segments.append((a, b, idle))
    merged = []  # maximal runs of touching segments; idle = the least idle capacity inside
    for a, b, idle in segments:
        if merged and merged[-1][1] == a:
            merged[-1][1], merged[-1][2] = b, min(merged[-1][2], idle)
            merged[-1][3] += (b - a) * idle
        else:
            merged.append([a, b, idle, (b - a) * idle])
    return [m for m in merged if m[1] - m[0] >= min_duration_s], t0, t1
