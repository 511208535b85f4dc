"""Warm-started replays (``SimConfig(warm_start=T)``): the simulation starts from the logged cluster state at T.

Real simulators start from the logged state: a replay of a window that starts on an empty cluster is barely
contended, so every what-if comparison on it is meaningless. With a warm start T:

- a job whose logged start is before T is *pinned*: it runs exactly as logged (``replay.logged_runs``: logged
  start, nodes, allocation, run time; the output keeps its logged state). One that ended by T is history: it
  feeds the fair-share usage ledger (charged from its logged start to its logged end, so fair share knows who
  was served before T) and the output, nothing else. One still running at T holds its logged nodes from T
  until its logged end: the pool is allocated, the scheduler sees a running job whose estimated end is its
  logged start + time limit (not before T); it is charged, counted against borrowing caps, guarantees and DRF
  shares, and never preempted (it is not the scheduler's to move);
- if a running pinned job's logged allocation does not fit the layout at T (an unknown node, or more than a node
  holds once the earlier pinned jobs are placed) it is placed by the engine's best fit for its request
  (``replaced``); if nothing fits it stays off the cluster (``not_placed``; charged until T) but keeps its row;
- every other job is simulated: submitted at max(submit, T), its wait still counted from its real submit;
- metrics and attainment cover [T, window end) (``engine.metrics``, ``engine.attainment``).

Invariants: pinning happens before the first event at or after T, in logged start order (ties by index); the
ledger receives every pinned job's charge changes in time order before any simulated change; a pinned job has
one attempt (0) unless a node failure or drain requeues it, which makes it an ordinary simulated job from then.
"""
from __future__ import annotations

import datetime as dt

import polars as pl

from . import replay


def setup(sim) -> tuple[dict, set]:
    """Pin the jobs that started before T = ``sim.now`` (``wl.pinned``): history, or running on the pool from T.

    Returns the counts (``metrics["warm_start"]``) and the running pinned jobs placed by the engine instead of on
    their logged nodes. Every per-job write goes through the simulator's ``pin_*`` methods."""
    wl, pool = sim.wl, sim.pool
    T = sim.now
    procs = pool.cluster.procs_mode
    stats = {"jobs_pinned": 0, "jobs_running": 0, "jobs_history": 0, "replaced": 0, "not_placed": 0,
             "jobs_pending": sum(1 for j in range(sim.n) if not wl.pinned[j] and sim.submit[j] < T)}
    moved = set()
    ledger = []      # (t, j, +1 start / -1 end): the usage the ledger must have seen by T
    history = []     # (end, seq, j)
    for s, j, run_s, alloc, (g, c, _m) in replay.logged_runs(sim, [j for j in range(sim.n) if wl.pinned[j]]):
        stats["jobs_pinned"] += 1
        e = s + run_s
        sim.charge_as_logged(j, g, c)
        sim.pin_start(j, s)
        if procs:  # one pool of the sizing resource
            alloc = ((0, g, 0, 0),) if pool.cluster.resource == "gpus" else ((0, 0, c, 0),)
        if e <= T:
            stats["jobs_history"] += 1
            sim.pin_done(j, alloc, e, run_s)
            history.append((e, sim.start_seq[j], j))
            ledger += [(s, j, 1), (e, j, -1)]
            continue
        stats["jobs_running"] += 1
        if not _fits(pool, alloc):
            grp = sim.group[j]
            placed = pool.place_in(grp, sim.gang[j], sim.req_g[j], sim.req_c[j], sim.req_m[j]) \
                if _valid(grp, pool) else None
            stats["replaced" if placed else "not_placed"] += 1
            if not placed:
                sim.pin_done(j, (), e, run_s)
                ledger += [(s, j, 1), (T, j, -1)]
                continue
            alloc = placed
            moved.add(j)
        ledger.append((s, j, 1))
        sim.pin_running(j, s, e, run_s, alloc)
    for e, _, j in sorted(history):
        sim.intervals.add(j, 0, sim.first_start[j], e, sim.alloc[j], "end", seq=sim.start_seq[j])
    if sim.track_usage:
        for t, j, sign in sorted(ledger):
            if sim.charge[j]:
                sim.ledger.change(sim.acct[j], t, sign * sim.charge[j])
    return stats, moved


def _valid(grp, pool) -> bool:
    return bool(grp[1]) and grp[0] in pool._index


def _fits(pool, alloc) -> bool:
    if not alloc:
        return False
    need: dict = {}
    for n, g, c, m in alloc:
        x = need.setdefault(n, [0, 0, 0])
        x[0] += g
        x[1] += c
        x[2] += m
    return all(pool.avail[n] and pool.free_g[n] >= g and pool.free_c[n] >= c and pool.free_m[n] >= m
               for n, (g, c, m) in need.items())


def window_filter(start, end, lookback_s: float = 7 * 86400.0):
    """A polars predicate over canonical ``jobs`` (datetime columns): the jobs a replay of [start, end) (``end``
    None: unbounded) warm-started at ``start`` needs. Those that ran before ``start`` and stopped after ``start - lookback_s``
    (pinned: running at ``start``, or history for the fair-share ledger), those pending at ``start`` and those
    submitted in [start, end)."""
    run_us = (pl.col("elapsed_s").cast(pl.Float64) * 1e6).round().cast(pl.Int64)
    stop = pl.coalesce(pl.col("end"), pl.col("start") + pl.duration(microseconds=run_us))
    since = start - dt.timedelta(seconds=lookback_s)
    pinned = (pl.col("start") < start) & (stop.is_null() | (stop > since))
    pending = (pl.col("submit") < start) & (pl.col("start").is_null() | (pl.col("start") >= start)) & \
        (pl.col("end").is_null() | (pl.col("end") > start))
    submitted = pl.col("submit") >= start
    keep = (pinned | pending | submitted).fill_null(False)
    return keep if end is None else keep & (pl.col("submit") < end)
