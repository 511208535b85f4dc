"""What a log says about per-user running limits (Maui's MAXJOB, Slurm's MaxJobsPerUser), the evidence beside the
``max_running_jobs_per_user`` calibration knob (``engine.calibrate``; DOMAIN.md section 10).

From the log alone (user, submit, logged start and end, size) and the machine's capacity N: each user's
*ceiling* is the largest number of their jobs running at once over [t0, t1). A limit of L shows in a log as users
sitting exactly at L while another of their jobs waits and the idle capacity N - R(t) could have run it: the
scheduler had room and did not use it for that user. This module measures, per user, the time spent *at the
ceiling with a fitting job waiting* and the waiting job-seconds of those fitting jobs (the wait a limit at the
ceiling would explain), against all waiting job-seconds of the window. It is evidence, not a fit: a user whose
ceiling is their own habit (they never submitted more at once) is never "at the ceiling with a job waiting".

Invariants: pure numpy/polars over the frame given (no simulation, no store, no duckdb); instants are seconds on
the frame's clock (``fidelity.seconds``); jobs without a user, a logged start, an end or a size are ignored;
events at one instant apply together (ends, then starts, then submits: back-to-back jobs never count as two at
once, and a job submitted and started at the same instant never waited); the figures cover only [t0, t1).
"""
from __future__ import annotations

import bisect
from collections import Counter

import numpy as np
import polars as pl

from .fidelity import seconds


def user_limit_evidence(jobs: pl.DataFrame, size_col: str, capacity: float, t0: float | None = None,
                        t1: float | None = None) -> dict:
    """Per-user ceilings over [t0, t1) and how much waiting they explain: the distribution of ceilings (ceiling
    -> number of users), the users found at their ceiling with a fitting job waiting, the most common ceiling
    among them (ties: the smaller), the ceiling whose users' explained wait is largest, and the share of all
    waiting job-seconds of the window that were spent by fitting jobs of users at their ceiling."""
    empty = {"users": 0, "ceilings": {}, "users_held_at_ceiling": 0, "most_common_held_ceiling": None,
             "ceiling_most_wait_explained": None, "held_user_seconds": 0.0, "wait_s_total": 0.0,
             "wait_s_explained": 0.0, "share_wait_explained": None}
    if "user" not in jobs.columns or size_col not in jobs.columns:
        return empty
    f = jobs.filter(pl.col("user").is_not_null() & pl.col("start").is_not_null() & pl.col("end").is_not_null()
                    & pl.col(size_col).is_not_null() & (pl.col("end") >= pl.col("start")))
    if f.height == 0:
        return empty
    sub, st, en = seconds(f["submit"]), seconds(f["start"]), seconds(f["end"])
    size = f[size_col].cast(pl.Float64).to_numpy()
    names = f["user"].cast(pl.String).to_list()
    index = {u: k for k, u in enumerate(sorted(set(names)))}
    user = [index[u] for u in names]
    if t0 is None:
        t0 = float(np.min(sub))
    if t1 is None:
        t1 = float(np.max(en))
    n_users = len(index)
    # a job of zero run time ends and starts at one instant: its count nets to 0 there
    ev = sorted([(e, 0, i) for i, e in enumerate(en)] + [(s, 1, i) for i, s in enumerate(st)]
                + [(u, 2, i) for i, u in enumerate(sub) if u < st[i]])

    # pass 1: each user's ceiling inside [t0, t1): the count after an instant's events holds until the next one;
    # at the first interval reaching into the window every user's count is read (jobs running at t0 count), after
    # it only the users an instant touched
    running = [0] * n_users
    ceiling = [0] * n_users
    touched: set = set()
    inside = False

    def apply(kind, i):
        if kind == 0:
            running[user[i]] -= 1
        elif kind == 1:
            running[user[i]] += 1
        touched.add(user[i])

    for _t, nxt in _instants(ev, t0, t1, apply):
        if nxt > t0:
            for u in (range(n_users) if not inside else touched):
                if running[u] > ceiling[u]:
                    ceiling[u] = running[u]
            inside = True
        touched.clear()

    # pass 2: time at the ceiling with a fitting job waiting, and the wait those fitting jobs spent there
    running = [0] * n_users
    held = 0.0                               # capacity held by running jobs
    waiting: list = [[] for _ in range(n_users)]  # per user: sorted sizes of their waiting jobs
    n_waiting = 0
    waiting_users: set = set()
    wait_total = 0.0
    held_s = [0.0] * n_users
    explained_by = [0.0] * n_users

    def apply2(kind, i):
        nonlocal held, n_waiting
        u = user[i]
        if kind == 0:
            running[u] -= 1
            held -= size[i]
        elif kind == 1:
            running[u] += 1
            held += size[i]
            if sub[i] < st[i]:  # it waited: it leaves the queue now
                w = waiting[u]
                del w[bisect.bisect_left(w, size[i])]
                n_waiting -= 1
                if not w:
                    waiting_users.discard(u)
        else:
            bisect.insort(waiting[u], size[i])
            n_waiting += 1
            waiting_users.add(u)

    for t, nxt in _instants(ev, t0, t1, apply2):
        a, b = max(t, t0), min(nxt, t1)
        if b <= a:
            continue
        dt = b - a
        wait_total += n_waiting * dt
        idle = capacity - held + 1e-9
        for u in waiting_users:
            if ceiling[u] and running[u] == ceiling[u]:
                fit = bisect.bisect_right(waiting[u], idle)
                if fit:
                    held_s[u] += dt
                    explained_by[u] += fit * dt
    held_users = [u for u in range(n_users) if held_s[u] > 0]
    held_user_s = float(sum(held_s))
    wait_explained = float(sum(explained_by))
    active = [c for c in ceiling if c > 0]
    by_ceiling: Counter = Counter()
    for u in held_users:
        by_ceiling[ceiling[u]] += explained_by[u]
    common = Counter(ceiling[u] for u in held_users)
    return {"users": len(active), "ceilings": {int(c): k for c, k in sorted(Counter(active).items())},
            "users_held_at_ceiling": len(held_users),
            "most_common_held_ceiling": (min(common, key=lambda c: (-common[c], c)) if common else None),
            "ceiling_most_wait_explained": (min(by_ceiling, key=lambda c: (-by_ceiling[c], c)) if by_ceiling
                                            else None),
            "held_user_seconds": held_user_s, "wait_s_total": float(wait_total),
            "wait_s_explained": wait_explained,
            "share_wait_explained": wait_explained / wait_total if wait_total > 0 else None}


def _instants(ev, t0, t1, apply):
    """Apply each instant's events (``apply(kind, i)``) and yield (instant, next instant): the state after an
    instant holds until the next one. Events after ``t1`` are not applied."""
    k, n = 0, len(ev)
    while k < n:
        t = ev[k][0]
        if t >= t1:
            return
        while k < n and ev[k][0] == t:
            apply(ev[k][1], ev[k][2])
            k += 1
        yield t, (ev[k][0] if k < n else t1)
