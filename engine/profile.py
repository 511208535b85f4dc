"""Free-resource profiles over future time, per node: the substrate of conservative / depth-K backfill.

A profile starts at ``now`` from the pool's free resources and adds back each running job's allocation at
its estimated end (start + time limit: jobs are killed there, so the estimate is never exceeded).
Reservations subtract a placement over ``[t, t + duration)``.

Invariants:
- Per node, ``times`` is strictly increasing, ``times[0] == now``, and ``free[k]`` holds from ``times[k]``
  to ``times[k + 1]`` (the last slot lasts forever); values never go negative (a reservation is only made
  where ``earliest`` found room), except on a processor pool while drained processors are still in use
  (``engine.capacity``: the slots until running jobs pay them back, where nothing can be reserved).
- Only available nodes take part; a node that is down or draining is treated as absent until it returns,
  which triggers a full re-plan.
- ``earliest`` returns the earliest start >= now at which the request fits for the whole duration and the
  best-fit placement at that start (same tie rules as ``Pool.place``, on the window's minimum free).
"""
from __future__ import annotations

import bisect

from . import capacity
from .units import INF


class Profile:
    def __init__(self, pool, now, running):
        """``running``: iterable of (est_end, alloc) sorted by est_end."""
        self.pool = pool
        self.now = now
        av = pool.avail
        self.times = {n: [now] for n in range(pool.n) if av[n]}
        self.free = {n: [(pool.free_g[n], pool.free_c[n], pool.free_m[n])] for n in self.times}
        for end, alloc in running:
            for n, g, c, m in alloc:
                ts = self.times.get(n)
                if ts is None:
                    continue
                fs = self.free[n]
                a, b, d = fs[-1]
                if ts[-1] == end or end <= now:
                    fs[-1] = (a + g, b + c, d + m)
                else:
                    ts.append(end)
                    fs.append((a + g, b + c, d + m))

    # ------------------------------------------------------------------ queries
    def _node_earliest(self, n, g, c, m, dur, start, bound=INF):
        """Earliest t >= start (and <= bound) with free >= (g, c, m) on node n over [t, t + dur);
        (t, window-min) or None."""
        ts, fs = self.times[n], self.free[n]
        last = len(ts) - 1
        k = bisect.bisect_right(ts, start) - 1 if start > ts[0] else 0  # the slot holding ``start``
        while k <= last:
            if ts[k] > bound:
                return None
            a, b, d = fs[k]
            if a < g or b < c or d < m:
                k += 1
                continue
            t0 = ts[k] if ts[k] > start else start
            end = t0 + dur
            mg, mc, mm = a, b, d
            e = k
            ok = True
            while e < last and ts[e + 1] < end:
                e += 1
                a, b, d = fs[e]
                if a < g or b < c or d < m:
                    ok = False
                    break
                if a < mg:
                    mg = a
                if b < mc:
                    mc = b
                if d < mm:
                    mm = d
            if ok:
                return t0, (mg, mc, mm)
            k = e + 1
        return None

    def _node_idle_from(self, n, dur, start):
        """Start times >= start at which node n is entirely free for ``dur`` (earliest of each idle run)."""
        p = self.pool
        cap = (p.cap_g[n], p.cap_c[n], p.cap_m[n])
        ts, fs = self.times[n], self.free[n]
        out = []
        last = len(ts) - 1
        k = bisect.bisect_right(ts, start) - 1 if start > ts[0] else 0
        while k <= last:
            if fs[k] != cap:
                k += 1
                continue
            e = k
            while e < last and fs[e + 1] == cap:
                e += 1
            t0 = max(ts[k], start)
            end = ts[e + 1] if e < last else INF
            if end - t0 >= dur:
                out.append((t0, end))
            k = e + 1
        return out

    def earliest(self, nodes, gang, g, c, m, dur, start=None):
        """(t, alloc) for the earliest feasible start, or (INF, None) when it never fits on the up nodes."""
        start = self.now if start is None else start
        if not gang:
            best_t, best_key, best_n = INF, None, None
            times = self.times
            for n in nodes:
                if n not in times:
                    continue
                r = self._node_earliest(n, g, c, m, dur, start, best_t)
                if r is None:
                    continue
                t, (a, b, d) = r
                key = (a - g, b - c, d - m)
                if t < best_t or (t == best_t and key < best_key):
                    best_t, best_key, best_n = t, key, n
            if best_n is None:
                return INF, None
            return best_t, ((best_n, g, c, m),)
        p = self.pool
        cap_g, cap_c, cap_m = p.cap_g, p.cap_c, p.cap_m
        wins = []  # gang order (largest nodes first): (node, window starts, windows)
        tg = tc = tm = 0
        times = self.times
        for n in nodes:
            if n in times:
                ws = self._node_idle_from(n, dur, start)
                if ws:
                    wins.append((n, [a for a, _ in ws], ws))
                    tg, tc, tm = tg + cap_g[n], tc + cap_c[n], tm + cap_m[n]
        if tg < g or tc < c or tm < m:  # not even every node idle at some time would be enough
            return INF, None
        bisect_right = bisect.bisect_right
        for t in sorted({a for _, starts, _ in wins for a in starts}):
            out, sg, sc, sm = [], 0, 0, 0
            for n, starts, ws in wins:
                # idle runs are disjoint and sorted: only the last one starting by t can hold [t, t + dur)
                i = bisect_right(starts, t) - 1
                if i < 0 or t + dur > ws[i][1]:
                    continue
                out.append((n, cap_g[n], cap_c[n], cap_m[n]))
                sg, sc, sm = sg + cap_g[n], sc + cap_c[n], sm + cap_m[n]
                if sg >= g and sc >= c and sm >= m:
                    return t, tuple(out)
        return INF, None

    def free_now(self, nodes) -> tuple:
        fg = fc = fm = 0
        for n in nodes:
            if n in self.free:
                a, b, d = self.free[n][0]
                fg, fc, fm = fg + a, fc + b, fm + d
        return fg, fc, fm

    # ------------------------------------------------------------------ updates
    def _split(self, n, t) -> int:
        ts, fs = self.times[n], self.free[n]
        lo, hi = 0, len(ts)
        while lo < hi:
            mid = (lo + hi) // 2
            if ts[mid] <= t:
                lo = mid + 1
            else:
                hi = mid
        k = lo - 1
        if ts[k] == t:
            return k
        ts.insert(k + 1, t)
        fs.insert(k + 1, fs[k])
        return k + 1

    def reserve(self, alloc, t0, t1) -> None:
        for n, g, c, m in alloc:
            if n not in self.times:
                continue
            k0 = self._split(n, t0)
            k1 = self._split(n, t1) if t1 < INF else len(self.times[n])
            fs = self.free[n]
            for k in range(k0, k1):
                a, b, d = fs[k]
                fs[k] = (a - g, b - c, d - m)
                assert fs[k][0] >= 0 and fs[k][1] >= 0 and fs[k][2] >= 0, "reservation over-commits a node"

    def advance(self, now) -> None:
        """Drop the past: the profile now starts at ``now`` (used by incremental passes)."""
        if now <= self.now:
            return
        for n, ts in self.times.items():
            k = 0
            while k + 1 < len(ts) and ts[k + 1] <= now:
                k += 1
            if k:
                del ts[:k]
                del self.free[n][:k]
            ts[0] = now
        self.now = now


class ScalarProfile:
    """The same contract for processor-count mode: one pool, one resource (``res_index`` 1 = GPUs,
    2 = CPUs in an allocation row), plain integers."""

    def __init__(self, pool, now, running, future=None):
        """``future``: the capacity schedule's steps after ``now`` (``engine.capacity``), None without one."""
        self.now = now
        use_c = pool.cluster.resource == "cpus"
        self.k = 2 if use_c else 1
        if future is not None:  # capacity events: free now minus what is owed, and the schedule's steps
            self.times, self.free = capacity.profile(pool, now, ((e, a[0][self.k]) for e, a in running), future)
            return
        self.times = [now]
        self.free = [pool.free_c[0] if use_c else pool.free_g[0]]
        ts, fs, k = self.times, self.free, self.k
        for end, alloc in running:
            amount = alloc[0][k]
            if ts[-1] == end or end <= now:
                fs[-1] += amount
            else:
                ts.append(end)
                fs.append(fs[-1] + amount)

    def earliest(self, nodes, gang, g, c, m, dur, start=None):
        s = c if self.k == 2 else g
        ts, fs = self.times, self.free
        start = self.now if start is None else start
        k, last = 0, len(ts) - 1
        while k < last and ts[k + 1] <= start:
            k += 1
        while k <= last:
            if fs[k] < s:
                k += 1
                continue
            t0 = ts[k] if ts[k] > start else start
            e = k
            end = t0 + dur
            while e < last and ts[e + 1] < end:
                e += 1
                if fs[e] < s:
                    break
            else:
                return t0, ((0, g, c, m),)
            k = e + 1
        return INF, None

    def free_now(self, nodes) -> tuple:
        return (0, self.free[0], 0) if self.k == 2 else (self.free[0], 0, 0)

    def reserve(self, alloc, t0, t1) -> None:
        amount = alloc[0][self.k]
        k0 = self._split(t0)
        k1 = self._split(t1) if t1 < INF else len(self.times)
        fs = self.free
        for k in range(k0, k1):
            fs[k] -= amount
            assert fs[k] >= 0, "reservation over-commits the pool"

    def _split(self, t) -> int:
        ts = self.times
        k = bisect.bisect_right(ts, t) - 1
        if ts[k] == t:
            return k
        ts.insert(k + 1, t)
        self.free.insert(k + 1, self.free[k])
        return k + 1

    def advance(self, now) -> None:
        if now <= self.now:
            return
        ts = self.times
        k = bisect.bisect_right(ts, now) - 1
        if k > 0:
            del ts[:k]
            del self.free[:k]
        ts[0] = now
        self.now = now
