"""Capacity over time on a processor-count pool (``--procs``): drains of a number of processors for a span.

A ``config.CapacityEvent`` (k processors over [t0, t1)) is two heap events (``health``): at t0 the pool's
capacity for *new* work drops by k (``Pool.drain_units``: running jobs keep running, as under a Slurm drain, so
free capacity may go negative until they end: ending jobs pay the drained processors back first), at t1 the k
come back (``Pool.return_units``). Both make the next pass full.

Reservations see the schedule. The profile a reservation is computed on starts from the free capacity minus
what is still owed, adds each running job's processors at its estimated end and every future step of the
schedule (-k at a later t0, +k at each t1 after now). EASY (``reservation``, depth 1) reserves the first
instant at which the blocked job fits that capacity, the instant it would start as the queue's head: one
computed before t0 for an instant inside the outage counts the drained processors out, one computed during an
outage counts their return at t1; its extra processors are the capacity left at that instant. EASY starts a
job on the capacity free now (it may run into a later drain and keep running, as on a node drained under it).
Depth-K and conservative (``profile.ScalarProfile``) plan every job, a start now included, on the same profile
for its whole time limit, so with them no job starts or is promised a span that the drained processors would
be needed for. Node drains (``health``, ``NodeEvent``) differ, kept as they are: a node-mode reservation
foresees neither a drain nor a return; it is re-planned when either happens.

On a cluster of named nodes the same events become node drains (``node_drains``: the last nodes holding at most k
processors, as ``calibrate.drain_events`` chooses them), so a calibration fitted under ``--procs`` also applies
to a store's node layout (scenario, the Fair share page, the report); they then follow node-drain rules.

Invariants: without capacity events nothing here runs (outputs are byte-identical to a run without this
module); events are on the simulation clock; with a warm start T an outage is clipped to [T, t1) (one that
ended by T is dropped) so simulated time never moves back; the fast path (``backfill.fastpath``) does not run
when there is any (``health.events`` is not empty), the generic Python loop does.
"""
from __future__ import annotations

import bisect

from .units import INF

PROCS = "procs"  # the kind of a capacity event on the heap (``health``)


def outages(sim, clock) -> list[tuple]:
    """``sim.cfg.capacity_events`` as (t0, t1, units) on the simulation clock (``clock(sim, instant, i)``),
    clipped to the warm start, in the order given."""
    warm = sim.wl.warm_s
    out = []
    for i, e in enumerate(sim.cfg.capacity_events):
        t0, t1 = clock(sim, e.time_s, i), clock(sim, e.until, i)
        if warm is not None:
            t0 = max(t0, warm)
        if t1 > t0:
            out.append((t0, t1, int(e.procs) * 1000))  # the pool counts milli-processors
    return out


def steps(spans) -> tuple[list, list]:
    """The schedule as two sorted lists: step instants and capacity changes (units; -k at t0, +k at t1)."""
    pairs = sorted([(t0, -u) for t0, _, u in spans] + [(t1, u) for _, t1, u in spans])
    return [t for t, _ in pairs], [d for _, d in pairs]


def after(schedule, now) -> list[tuple]:
    """The steps strictly after ``now`` (those at ``now`` are applied before the pass)."""
    times, deltas = schedule
    k = bisect.bisect_right(times, now)
    return list(zip(times[k:], deltas[k:]))


def profile(pool, now, running, future) -> tuple[list, list]:
    """Slots (times, free) of the capacity for new work: free now minus what is owed, each running job's
    allocation back at its estimated end, each future step; ``running`` is (end, units) sorted by end."""
    free0 = (pool.free_c[0] if pool.cluster.resource == "cpus" else pool.free_g[0]) - pool.debt
    merged = sorted([(max(e, now), u) for e, u in running] + list(future))
    ts, fs = [now], [free0]
    for t, d in merged:
        if t == ts[-1]:
            fs[-1] += d
        else:
            ts.append(t)
            fs.append(fs[-1] + d)
    return ts, fs


def reservation(sim, j, now) -> tuple[float, float]:
    """EASY's reservation for the blocked job j under capacity events: (T, free at T), the first instant at
    which the capacity for new work, as running jobs end and the schedule steps, holds j (free at T - j's size
    are EASY's extra processors); (INF, the profile's last value) when none does."""
    pool = sim.pool
    k = 2 if pool.cluster.resource == "cpus" else 1
    alloc = sim.alloc
    ts, fs = profile(pool, now, [(e, alloc[i][0][k]) for e, _, i in sim.running_by_end],
                     after(sim.health.capacity, now))
    s = sim.req_c[j] if k == 2 else sim.req_g[j]
    for t, free in zip(ts, fs):
        if free >= s:
            return t, free
    return INF, fs[-1]


def node_reservation(sim, j) -> tuple[float, dict | None]:
    """``easy._reservation``'s answer (T, per-node limit) for a processor-count pool under capacity events
    (the node kernel runs there when borrowing caps are on)."""
    pool = sim.pool
    T, free = reservation(sim, j, sim.now)
    if T == INF:
        return INF, None
    extra = free - (sim.req_c[j] if pool.cluster.resource == "cpus" else sim.req_g[j])
    if pool.cluster.resource == "cpus":
        return T, {0: (pool.free_g[0], extra, pool.free_m[0])}
    return T, {0: (extra, pool.free_c[0], pool.free_m[0])}


def node_drains(sim, clock) -> list[tuple]:
    """On a cluster of named nodes (a calibration fitted under ``--procs`` replayed on the store's layout): each
    drain of k processors as ``health`` node drains (t0, node, "drain", t1) of the last nodes whose capacity adds
    up to at most k (nodes without the resource skipped), ``calibrate.drain_events``' rule."""
    pool = sim.pool
    cap = pool.cap_g if pool.cluster.charge_resource == "gpus" else pool.cap_c
    out = []
    for t0, t1, units in outages(sim, clock):
        left, n = units, pool.n - 1
        while n >= 0 and cap[n] <= left:
            if cap[n]:
                out.append((t0, n, "drain", t1))
                left -= cap[n]
            n -= 1
    return out
