"""Depth-K (K >= 2) and conservative backfill passes on free-resource profiles (see ``passes`` for the contract).

Each blocked job, in queue order (backfill candidates in ``backfill_order``), up to K of them, reserves its
earliest fit on the profile of running jobs' estimated ends and earlier reservations; a job starts now only if
it fits for its whole limit (stretched by the walltime margin once a reservation exists) without touching any
reservation. Conservative = K unbounded: every queued job holds a reservation, rebuilt at every full pass.

A job its user's running limit holds back (``user_limits``) is noted "user_limit" and reserves nothing.

Invariant: with exact run-time estimates every job starts no later than the first reservation it got (tested).
Within a pass the profile only loses capacity, so each request shape keeps the earliest starts found per
duration as lower bounds for later searches (``_lower_bound``/``_record``): exact, and tested against a
brute-force profile search in both layouts. A job whose reservation on its real limit is "now" but whose
margin-stretched limit does not fit is reserved, not started.
"""
from __future__ import annotations

import bisect
from .. import capacity
from ..profile import Profile, ScalarProfile
from ..units import INF
from ..user_limits import REASON as USER_LIMIT
from .scan import sort_backfill, why


def profile_pass(sim, now, jobs, state):
    pool = sim.pool
    if state.stopped:
        return []
    procs = pool.cluster.procs_mode
    if state.profile is None:
        alloc = sim.alloc
        cls = ScalarProfile if procs else Profile
        future = () if not procs or not sim.health.capacity else (capacity.after(sim.health.capacity, now),)
        state.profile = cls(pool, now, ((e, alloc[j]) for e, _, j in sim.running_by_end), *future)
    else:
        state.profile.advance(now)
    prof = state.profile
    est, note = sim.limit_left, sim.waits.note
    inv = 1.0 / (1.0 - sim.cfg.walltime_margin)
    capped = sim.caps.on
    limited, over_user = sim.users.on, sim.users.over
    started = []
    jobs = iter(jobs)
    if state.blocked is None:
        head = []
        for j in jobs:
            head.append(j)
            break
        rest = sort_backfill(sim, jobs)
        order = head + list(rest) if sim.cfg.backfill_order != "queue" else _chain(head, rest)
    else:
        order = sort_backfill(sim, jobs)
    if procs and not capped:
        return _scalar_profile_loop(sim, now, order, state, prof, inv)
    if state.lower is None:
        state.lower = {}
    lower, shape = state.lower, sim.shape

    def earliest(j, nodes, g, c, m, dur):
        fr = lower.get(shape[j])
        if fr is None:
            fr = lower[shape[j]] = ([], [])
        lb = _lower_bound(fr, dur)
        if lb == INF:
            return INF, None
        t, pl = prof.earliest(nodes, sim.gang[j], g, c, m, dur, lb if lb > now else None)
        _record(fr, dur, t)
        return t, pl

    cap = sim.cfg.backfill_max_job_test
    for j in order:
        if state.blocked is not None and cap is not None:  # Slurm's bf_max_job_test
            if state.tested >= cap:
                sim.counters["backfill_cap_hits"] += 1
                break
            state.tested += 1
        if capped and sim.caps.over(j, now):
            note(j, "quota", now)
            continue
        if limited and over_user(j):  # not eligible: it reserves nothing
            note(j, USER_LIMIT, now)
            continue
        grp = sim.group[j]
        nodes = grp[1] if not sim.gang[j] else grp[2]
        g, c, m = sim.req_g[j], sim.req_c[j], sim.req_m[j]
        dur = est[j] * inv if state.nres else est[j]
        t, pl = earliest(j, nodes, g, c, m, dur)
        if t == now:  # on the nodes where the stretched limit fits (as EASY's extra resources), held for the real one
            prof.reserve(pl, now, now + est[j])
            sim.start(j, now, pl)
            started.append(j)
            continue
        if state.blocked is None:
            state.blocked = j
            state.T = t if state.nres < sim.depth else INF
        if procs:
            fg, fc, _ = prof.free_now(nodes)
            note(j, "reservation" if fg >= g and fc >= c else "resources", now)
        elif pool.place_in(grp, sim.gang[j], g, c, m) is not None:
            note(j, "reservation", now)
        else:
            note(j, why(sim, j), now)
        if state.nres >= sim.depth:
            continue
        if dur != est[j]:
            t, pl = earliest(j, nodes, g, c, m, est[j])
        state.nres += 1
        if t < INF:
            prof.reserve(pl, t, t + est[j])
            sim.note_reservation(j, t)
    return started


def _scalar_profile_loop(sim, now, order, state, prof, inv):
    """``profile_pass`` for processor-count mode with the profile scan and update inlined."""
    use_c = prof.k == 2
    size = sim.req_c if use_c else sim.req_g
    est, note, reserved = sim.limit_left, sim.waits.note, sim.reserved
    ts, fs = prof.times, prof.free
    depth = sim.depth
    limited, over_user = sim.users.on, sim.users.over
    started = []
    bisect_right, bisect_left = bisect.bisect_right, bisect.bisect_left
    if state.lower is None:
        state.lower = {}
    lower = state.lower
    cap = sim.cfg.backfill_max_job_test
    for j in order:
        if state.blocked is not None and cap is not None:  # Slurm's bf_max_job_test
            if state.tested >= cap:
                sim.counters["backfill_cap_hits"] += 1
                break
            state.tested += 1
        if limited and over_user(j):  # not eligible: it reserves nothing
            note(j, USER_LIMIT, now)
            continue
        s = size[j]
        e_j = est[j]
        dur = e_j * inv if state.nres else e_j
        # earliest start: first run of slots with free >= s covering dur, from the size's lower bound on
        fr = lower.get(s)
        if fr is None:
            fr = lower[s] = ([], [])
        lb = _lower_bound(fr, dur)
        last = len(ts) - 1
        k = bisect_left(ts, lb) if lb > now else 0
        t0 = INF
        while k <= last:
            if fs[k] < s:
                k += 1
                continue
            t0 = ts[k]
            e = k
            end = t0 + dur
            while e < last and ts[e + 1] < end:
                e += 1
                if fs[e] < s:
                    break
            else:
                break
            k = e + 1
            t0 = INF
        _record(fr, dur, t0)
        if t0 == now:
            t = now
        else:
            if state.blocked is None:
                state.blocked = j
                state.T = t0 if state.nres < depth else INF
            note(j, "reservation" if fs[0] >= s else "resources", now)
            if state.nres >= depth:
                continue
            state.nres += 1
            if dur != e_j:
                t, _ = prof.earliest(None, False, s, s, 0, e_j)
            else:
                t = t0
            if t == INF:
                continue
            if reserved[j] is None:
                reserved[j] = t
        # reserve [t, t + est): split the slots, subtract
        t1 = t + e_j
        k0 = bisect_right(ts, t) - 1
        if ts[k0] != t:
            k0 += 1
            ts.insert(k0, t)
            fs.insert(k0, fs[k0 - 1])
        k1 = bisect_right(ts, t1) - 1
        if ts[k1] != t1:
            k1 += 1
            ts.insert(k1, t1)
            fs.insert(k1, fs[k1 - 1])
        for k in range(k0, k1):
            fs[k] -= s
        if t0 == now:  # started only when the margin-stretched limit fits now (a reservation at now may not)
            sim.start(j, now, ((0, 0, s, 0),) if use_c else ((0, s, 0, 0),))
            started.append(j)
    return started


# Within a pass (and the incremental passes continuing it) the profile only loses capacity, so the earliest start
# found for a request shape and duration d is a lower bound for the same shape with any duration >= d: each
# shape keeps that frontier (durations and earliest starts, both strictly increasing) and searches start there.
def _lower_bound(fr, dur) -> float:
    durs, ts = fr
    i = bisect.bisect_right(durs, dur)
    return ts[i - 1] if i else -INF


def _record(fr, dur, t) -> None:
    durs, ts = fr
    i = bisect.bisect_right(durs, dur)
    if i and ts[i - 1] >= t:
        return  # implied by a shorter or equal duration already
    if i and durs[i - 1] == dur:
        i -= 1
    k = i
    while k < len(durs) and ts[k] <= t:
        k += 1
    durs[i:k] = [dur]
    ts[i:k] = [t]


def _chain(head, rest):
    yield from head
    yield from rest
