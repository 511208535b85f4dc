"""EASY backfill (reservation depth 1), and the no-backfill pass that is its depth-0 case, in both modes.

The rule (``Easy``): start queue heads in order while they fit; the first job that does not fit (the blocked
job) gets a reservation, the earliest time it fits once running jobs release their resources at their
estimated ends (all ends at that instant count); a later job may start now if it fits the free resources and
either ends, by its limit stretched by the walltime margin, no later than the reservation, or fits on what the
reserved job leaves unused (EASY's "extra" resources). With ``reservation_depth`` K >= 2 the rule runs the
depth-K kernel (``depth_k``). At depth 0 (``none``) a pass stops at the first blocked job.

Kernels here, one meaning (tests check they agree with each other and with ``depth_k`` at depth 1, and
``fastpath`` with them):
- ``scalar_pass``: processor-count mode without borrowing caps, plain integers;
- ``node_pass``/``_backfill``: node placement: the reservation and the extra resources are per node.

A job whose user already runs ``max_running_jobs_per_user`` jobs (``user_limits``) is skipped with the reason
"user_limit" wherever it is examined: it neither starts nor becomes the blocked job (no reservation), as a job a
borrowing cap holds back.

``backfill_max_job_test`` (Slurm's bf_max_job_test; default None = all) stops each pass after that many
backfill candidates (counted after the first blocked job, across the incremental passes continuing it; cut
passes are counted in ``metrics["scheduler"]["backfill_cap_hits"]``); a capped scan takes none of the
shortcuts below, so which jobs are tested does not depend on them.

Invariants: a pass examines jobs in policy order (backfill candidates in ``backfill_order`` after the first
blocked job), never starts a job that does not fit its placement, and leaves ``state`` (``PassState``) such
that an incremental pass over newly submitted FCFS jobs gives what a full pass would. The node pass computes a
blocked job's reservation lazily once it already has one recorded (``reservation_time``): nothing starts before
it is needed, so it is the value an eager computation gives. The scan hint a lazy order may use answers exactly
as ``_backfill`` would (tested: hinted == plain); ``hint.spec`` carries what it reads, so the compiled fair-share
walk (``engine/_fsorder.c``) evaluates it without calling it (tested: ``tests/engine/test_compiled_preempt.py``),
and ``hint.examine`` what ``_backfill`` calls for a job the hint hands over, so the compiled order's cursor
(``_fsorder.Funded``) examines and starts such jobs itself, the same calls in the same order (tested:
``tests/engine/test_compiled_fairshare.py``); ``_backfill`` then sees only the jobs after the funded order.

Per pass cost outside the jobs it examines: the node pass binds what it reads of the run once per run
(``PassBindings``, built at the run's first node pass and kept by the simulator, ``sim.pass_bindings``) and
resets that one object, which is also the pass's hint, with the pass's clock, state, shape count and cap column
(a few attribute stores and two tuple concatenations for ``spec``/``examine``) instead of building a closure and
its 16- and 8-tuples at every pass; the decisions are the same (tested against bindings rebuilt at every pass and
against ``QUOTALOOP_ENGINE=python``: ``tests/engine/test_compiled_pass.py``).
"""
from __future__ import annotations

from .. import capacity
from ..units import INF, UNLIMITED
from ..user_limits import REASON as USER_LIMIT
from .depth_k import profile_pass
from .fastpath import fast_kernel
from .scan import sort_backfill, tested, why

HINTS = True  # tests switch it off: hinted and unhinted scans must agree exactly


# ---------------------------------------------------------------------- processor-count mode
def scalar_pass(sim, now, jobs, state):
    pool = sim.pool
    res = pool.free_c if pool.cluster.resource == "cpus" else pool.free_g
    use_c = pool.cluster.resource == "cpus"
    size = sim.req_c if use_c else sim.req_g
    est = sim.limit_left
    note = sim.waits.note
    start = sim.start
    started = []
    if state.stopped:
        return started
    limited, over_user = sim.users.on, sim.users.over
    it = iter(jobs)
    if state.blocked is None:
        for j in it:
            if limited and over_user(j):  # not eligible: no reservation either
                note(j, USER_LIMIT, now)
                continue
            s = size[j]
            if s <= res[0]:
                start(j, now, ((0, 0, s, 0),) if use_c else ((0, s, 0, 0),))
                started.append(j)
                continue
            note(j, "resources", now)
            state.blocked = j
            if sim.depth == 0:
                state.stopped = True
                return started
            avail = res[0]
            T = INF
            run = sim.running_by_end
            k, nr = 0, len(run)
            if sim.health.capacity:  # processors drained over time: the reservation reads their schedule
                T, avail = capacity.reservation(sim, j, now)
                k = nr
            while k < nr:
                t = run[k][0]
                while k < nr and run[k][0] == t:
                    avail += size[run[k][2]]
                    k += 1
                if avail >= s:
                    T = t
                    break
            state.T, state.extra = T, avail - s
            if T < INF:
                sim.note_reservation(j, T)
            break
        else:
            return started
    T, extra = state.T, state.extra
    inv = 1.0 / (1.0 - sim.cfg.walltime_margin)
    free = res[0]
    exact = sim.cfg.backfill_max_job_test is None  # a capped scan takes no shortcut: every tested job counts
    for j in tested(sim, state, sort_backfill(sim, it)):
        if free <= 0 and exact:
            break
        if limited and over_user(j):
            note(j, USER_LIMIT, now)
            continue
        s = size[j]
        if s > free:
            note(j, "resources", now)
            continue
        if now + est[j] * inv <= T:
            start(j, now, ((0, 0, s, 0),) if use_c else ((0, s, 0, 0),))
            started.append(j)
            free -= s
        elif s <= extra:
            start(j, now, ((0, 0, s, 0),) if use_c else ((0, s, 0, 0),))
            started.append(j)
            free -= s
            extra -= s
        else:
            note(j, "reservation", now)
    state.extra = extra
    return started


# ---------------------------------------------------------------------- node placement, EASY
def _reservation(sim, j):
    """(T, limit) for the blocked job j: earliest fit as running jobs release at their estimated ends."""
    if sim.health.capacity:  # a processor-count pool with drains over time
        return capacity.node_reservation(sim, j)
    pool = sim.pool
    _, nodes, gang_order, _ = sim.group[j]
    gang = sim.gang[j]
    if pool.ops is not None:  # the compiled node pool's twin of this function (engine/_nodecore.c): same answer
        return pool.ops.reservation(sim.running_by_end, sim.alloc, sim.eligible(j), gang_order, gang,
                                    sim.req_g[j], sim.req_c[j], sim.req_m[j])
    g, c, m = sim.req_g[j], sim.req_c[j], sim.req_m[j]
    fg, fc, fm = list(pool.free_g), list(pool.free_c), list(pool.free_m)
    elig = sim.eligible(j)
    avail = pool.avail
    run = sim.running_by_end
    alloc = sim.alloc
    cap_g, cap_c, cap_m = pool.cap_g, pool.cap_c, pool.cap_m
    if gang:  # a gang fits exactly when the idle eligible nodes' capacities add up to it: keep the sums
        ig = ic = im = 0
        for n in elig:
            if avail[n] and fg[n] == cap_g[n] and fc[n] == cap_c[n] and fm[n] == cap_m[n]:
                ig, ic, im = ig + cap_g[n], ic + cap_c[n], im + min(cap_m[n], UNLIMITED)
    k, nr = 0, len(run)
    while k < nr:
        t = run[k][0]
        touched = set()
        while k < nr and run[k][0] == t:
            for n, a, b, d in alloc[run[k][2]]:
                if avail[n]:
                    fg[n] += a
                    fc[n] += b
                    fm[n] += d
                    if n in elig:
                        touched.add(n)
            k += 1
        if not touched:
            continue
        if gang:
            became = [n for n in touched if cap_g[n] == fg[n] and cap_c[n] == fc[n] and cap_m[n] == fm[n]]
            if not became:
                continue
            for n in became:
                ig, ic, im = ig + cap_g[n], ic + cap_c[n], im + min(cap_m[n], UNLIMITED)
            if ig < g or ic < c or im < m:
                continue
            pl = pool.place(gang_order, True, g, c, m, free=(fg, fc, fm))
        else:
            pl = pool.place(sorted(touched), False, g, c, m, free=(fg, fc, fm))
        if pl is not None:
            return t, {n: (fg[n] - a, fc[n] - b, fm[n] - d) for n, a, b, d in pl}
    return INF, None


class PassBindings:
    """What ``node_pass`` reads of a run, bound once per run (at its first node pass, ``bindings``) instead of at
    every pass, and the pass's scan hint: the object itself, called as ``hint(j)``, which each pass resets (``now``,
    ``state``, ``failed``, ``n_shapes``, the cap column of the pass, ``spec``, ``examine``) before publishing it.

    Only fields the run never rebinds are kept: the simulator's per-job lists, its ``waits``, ``caps``, ``users``
    and ``qstats``, the pool's methods (``nodepool.bind`` rebinds them when the pool is built, before any pass) and
    the configuration; what may change between passes (the clock, the pass state, the number of request shapes,
    ``sim.ordered``, ``sim.depth``, ``HINTS``) is read by every pass. A queue order reads the hint's fields when it
    first sees the hint (``hint is not seen``), and no order outlives its pass (the simulator makes a new one for
    every pass), so reusing the object across passes hands each order the fields of its own pass."""

    __slots__ = ("sim", "pool", "est", "note", "shape", "req_g", "req_c", "req_m", "group", "gangs", "capped",
                 "needs_ordered", "needs_all", "limited", "over_user", "inv", "bounds", "over_cap", "procs",
                 "nothing_fits", "exact", "hintable", "start", "spec_ordered", "spec_all", "examine_tail", "reason",
                 "place_in",
                 "now", "state", "failed", "n_shapes", "needs_cap", "spec", "examine")

    def __init__(self, sim):
        pool = sim.pool
        self.sim, self.pool = sim, pool
        # the request shape of each job as a small int (equal shapes, equal keys): the failures by shape are
        # looked up for most jobs a pass or its hint examines, and an int hashes for free where the shape tuple
        # (placement key, gang, g, c, m) is hashed element by element at every lookup
        keys: dict = {}
        self.shape = [keys.setdefault(s, len(keys)) for s in sim.shape]
        self.est, self.note, self.reason = sim.limit_left, sim.waits.note, sim.waits.reason
        self.place_in = pool.place_in
        self.req_g, self.req_c, self.req_m, self.group, self.gangs = sim.req_g, sim.req_c, sim.req_m, sim.group, sim.gang
        self.capped = sim.caps.on
        self.needs_ordered, self.needs_all = sim.caps.needs(True), sim.caps.needs(False)
        self.limited, self.over_user = sim.users.on, sim.users.over
        self.inv = 1.0 / (1.0 - sim.cfg.walltime_margin)
        self.bounds, self.over_cap = pool.bounds, sim.caps.over
        self.procs = pool.cluster.procs_mode
        self.nothing_fits = sim.qstats.nothing_fits
        self.exact = sim.cfg.backfill_max_job_test is None  # a capped scan takes no shortcut: every tested job counts
        self.hintable = self.exact and sim.cfg.backfill_order == "queue" and hasattr(sim.queue, "hint")
        self.start = sim.start
        # everything ``__call__`` reads but the clock, for the compiled order (engine/_fsorder.c ``walk``), which
        # evaluates the hint without its frame: the same checks in the same order, calling ``over_cap``/
        # ``over_user``/``bounds``; one tail per cap column (``caps.needs``: ordered pass or not)
        tail = (self.est, self.inv, self.capped)
        rest = (self.over_cap, self.limited, self.over_user, self.req_g, self.req_c, self.req_m, self.group,
                self.gangs, self.bounds, self.procs, USER_LIMIT)
        self.spec_ordered = tail + (self.needs_ordered,) + rest
        self.spec_all = tail + (self.needs_all,) + rest
        # what ``_backfill`` does with a job the hint hands over, but the pass's started list, for the compiled
        # fair-share order's cursor (``_fsorder.Funded``), which then examines it, and starts it, itself
        self.examine_tail = (pool.place_in, self.nothing_fits, pool, reservation_time, sim)
        self.now = self.state = self.failed = self.needs_cap = self.spec = self.examine = None
        self.n_shapes = 0

    def __call__(self, j):
        """What examining j would certainly give without placing it: a failure reason, False to stop the scan,
        or None (examine it). Lets a lazy queue order skip such jobs without handing them over."""
        state = self.state
        if state.n_failed_short >= self.n_shapes:
            return False
        sh = self.shape[j]
        f = self.failed.get(sh)
        now = self.now
        if f is not None:  # _backfill's answers, in its order: a known failure, then the cap, then the fit
            if f != "long":
                return f
            if now + self.est[j] * self.inv > state.T:  # a "long" entry means a job was examined: T is known
                return "reservation"
        if self.capped and self.needs_cap[j] and self.over_cap(j, now):
            return "quota"
        if self.limited and self.over_user(j):
            return USER_LIMIT
        g, c, m = self.req_g[j], self.req_c[j], self.req_m[j]
        b = self.bounds(self.group[j])
        if (g > b[3] or c > b[4] or m > b[5]) if self.gangs[j] else (g > b[0] or c > b[1] or m > b[2]):
            r = "fragmentation" if not self.procs and g <= b[6] and c <= b[7] and m <= b[8] else "resources"
            self.failed[sh] = r
            state.n_failed_short += 1
            return r
        return None


def bindings(sim) -> PassBindings:
    """The run's ``PassBindings`` (built at its first node pass: ``sim.shape`` exists from ``Simulator.run`` on)."""
    return sim.pass_bindings(PassBindings)  # the simulator owns its attributes (tests/architecture)


def node_pass(sim, now, jobs, state):
    started = []
    if state.stopped:
        return started
    b = bindings(sim)
    pool = b.pool
    note = b.note
    capped = b.capped
    ordered = sim.ordered
    needs_cap = b.needs_ordered if ordered else b.needs_all
    limited, over_user = b.limited, b.over_user
    it = iter(jobs)
    if state.blocked is None:
        req_g, req_c, req_m, group, gangs = b.req_g, b.req_c, b.req_m, b.group, b.gangs
        for j in it:
            if capped and needs_cap[j] and b.over_cap(j, now):
                note(j, "quota", now)
                continue
            if limited and over_user(j):  # not eligible: no reservation either
                note(j, USER_LIMIT, now)
                continue
            grp = group[j]
            pl = _place(pool, grp, gangs[j], req_g[j], req_c[j], req_m[j], None)
            if pl is not None:
                sim.start(j, now, pl)
                started.append(j)
                continue
            note(j, why(sim, j), now)
            state.blocked = j
            if sim.depth == 0:
                state.stopped = True
                return started
            if sim.reserved[j] is None:  # its first reservation is part of the output
                state.T, state.limit = sim.cached_reservation(j, _reservation)
                if state.T < INF:
                    sim.note_reservation(j, state.T)
            else:
                state.T = None  # computed when first needed (``reservation_time``)
            break
        else:
            return started
    T = state.T
    failed = state.failed  # shape key -> "long" (fails only beyond the reservation) or the reason it fails outright
    n_shapes = len(sim.shape_count)
    exact = b.exact
    if exact and b.nothing_fits(pool):
        return started
    # the pass's hint: the run's bindings object, reset for this pass (``PassBindings.__call__``)
    b.now, b.state, b.failed, b.n_shapes, b.needs_cap = now, state, failed, n_shapes, needs_cap
    b.spec = (now,) + (b.spec_ordered if ordered else b.spec_all)
    b.examine = (b.start, started) + b.examine_tail
    hinted = HINTS and b.hintable
    if hinted:
        sim.queue.hint = b
    try:
        _backfill(sim, b, now, it, state, started, T, failed, n_shapes)
    finally:
        if hinted:
            sim.queue.hint = None
    return started


def _backfill(sim, bd, now, it, state, started, T, failed, n_shapes):
    """EASY's scan after the blocked job, with the run's bindings ``bd`` (``PassBindings``, reset for this pass)."""
    pool, est, note, shape, inv, procs, capped = bd.pool, bd.est, bd.note, bd.shape, bd.inv, bd.procs, bd.capped
    req_g, req_c, req_m, group, gangs = bd.req_g, bd.req_c, bd.req_m, bd.group, bd.gangs
    reason, bounds, place_in, over_cap = bd.reason, bd.bounds, bd.place_in, bd.over_cap
    nothing_fits, exact, needs_cap, limited, over_user = bd.nothing_fits, bd.exact, bd.needs_cap, bd.limited, bd.over_user
    for j in tested(sim, state, sort_backfill(sim, it)):
        if exact and state.n_failed_short >= n_shapes:
            break
        if T is None:
            T = reservation_time(sim, state)
        sh = shape[j]
        short = now + est[j] * inv <= T
        f = failed.get(sh)
        if f is not None and (f != "long" or not short):
            r = "reservation" if f == "long" else f
            if reason[j] != r:
                note(j, r, now)
            continue
        if capped and needs_cap[j] and over_cap(j, now):
            note(j, "quota", now)
            continue
        if limited and over_user(j):
            note(j, USER_LIMIT, now)
            continue
        grp = group[j]
        g, c, m, gang = req_g[j], req_c[j], req_m[j], gangs[j]
        b = bounds(grp)  # constant-time rejection: most candidates of a busy pass fail here
        if (g > b[3] or c > b[4] or m > b[5]) if gang else (g > b[0] or c > b[1] or m > b[2]):
            pl = fits_now = None
        else:
            # a job ending after T may use only EASY's extra resources on the reserved job's nodes (the limit)
            pl = place_in(grp, gang, g, c, m, None if short else state.limit)
            fits_now = pl if short or pl is not None else place_in(grp, gang, g, c, m)
        if pl is not None:
            sim.start(j, now, pl)
            started.append(j)
            if not short and state.limit:
                for n, a, bb, d in pl:
                    if n in state.limit:
                        x = state.limit[n]
                        state.limit[n] = (x[0] - a, x[1] - bb, x[2] - d)
            if exact and nothing_fits(pool):
                break
            continue
        if fits_now is None:
            r = "fragmentation" if not procs and g <= b[6] and c <= b[7] and m <= b[8] else "resources"
            failed[sh] = r
            state.n_failed_short += 1
        else:
            failed[sh] = "long"
            r = "reservation"
        if reason[j] != r:
            note(j, r, now)


def reservation_time(sim, state) -> float:
    """The blocked job's reservation T (node passes compute it lazily: many passes examine no other job).

    Nothing started since the job blocked (a start needs T first), so the free resources and running jobs are
    those it blocked on and the value is the one an eager computation would have given."""
    if state.T is None:
        state.T, state.limit = sim.cached_reservation(state.blocked, _reservation)
    return state.T


def _place(pool, grp, gang, g, c, m, limit):
    """``Pool.place_in`` behind a constant-time rejection by the group's bounds (most requests in a busy pass)."""
    b = pool.bounds(grp)
    if gang:
        if g > b[3] or c > b[4] or m > b[5]:
            return None
    elif g > b[0] or c > b[1] or m > b[2]:
        return None
    return pool.place_in(grp, gang, g, c, m, limit)


def kernel(sim):
    """The depth-0/1 pass for ``sim``: the plain-integer one in processor-count mode without borrowing caps."""
    if sim.pool.cluster.procs_mode and not sim.caps.on:
        return scalar_pass
    return node_pass


class Easy:
    """``backfill="easy"``: one reservation per pass, or K with ``reservation_depth``."""
    name = "easy"
    takes_depth = True

    def depth(self, reservation_depth: int | None) -> int:
        return 1 if reservation_depth is None else reservation_depth

    def pass_for(self, sim):
        return profile_pass if sim.depth >= 2 else kernel(sim)

    def whole_run(self, sim):
        return fast_kernel(sim)
