"""Free resources per node and job placement (best fit on one node, gangs of whole nodes).

Units are integers so that sums never drift: milli-GPUs, milli-CPUs and MiB of memory (``UNLIMITED`` when a
node's memory is unknown). An allocation is a tuple of ``(node, g, c, m)`` rows.

Invariants:
- ``0 <= free[n] <= cap[n]`` in every resource, always (``allocate`` asserts it); a node that is down or
  draining (``avail[n]`` false) takes no new work but keeps its running jobs' allocations until they leave.
- A job of up to one node's size (in every resource, on a node it may use) is placed on exactly one node:
  the feasible node with the least GPUs left, then CPUs, then memory, then the lowest index (best fit).
  Larger jobs take whole idle nodes, largest first (then lowest index), until every resource is covered;
  each such node is allocated entirely (exclusive gang).
- ``_index[group]`` maps each free-GPU amount to the set of available nodes of the group with exactly that many
  free (kept on every change): ``place_in`` finds the single-node best fit from the smallest class that can hold
  the request instead of scanning every node, with the same answer as ``place``.
- Processor-count mode under capacity events (``engine.capacity``): ``drained`` units are out of service and
  ``free - debt == cap - drained - allocated`` always, with ``free >= 0``, ``debt >= 0`` and at most one of them
  non-zero: a drain takes what is free and owes the rest, which ending jobs pay back before anything is freed
  (running jobs keep running through a drain). Without capacity events both stay 0, and in node mode always
  (so ``release``'s repayment has no node-mode C twin to keep in step).
- ``stranded_g`` = free milli-GPUs on available nodes that are partly allocated (the fragmentation measure of
  DOMAIN.md section 7 counts it while a whole-node job waits); kept exact on every change.
- In node mode ``nodepool.bind`` rebinds ``bounds``, ``place``, ``place_in``, ``allocate``, ``release`` and
  ``_move`` on the instance to their C twins (``_nodecore.c``) over these same lists (unless
  ``QUOTALOOP_ENGINE=python``): the methods below are the reference; change both together.
"""
from __future__ import annotations

import math

from . import nodepool
from .units import UNLIMITED


def milli(x) -> int:
    return 0 if x is None or x != x else int(round(float(x) * 1000))


def mib_up(x) -> int:
    return 0 if x is None or x != x or x <= 0 else int(math.ceil(float(x) / (1 << 20) - 1e-9))


class Pool:
    def __init__(self, cluster):
        self.cluster = cluster
        self.n = cluster.size
        self.names = list(cluster.names)
        self.cap_g = [milli(v) for v in cluster.gpus]
        self.cap_c = [milli(v) for v in cluster.cpus]
        self.cap_m = [UNLIMITED if v is None else int(float(v) // (1 << 20)) for v in cluster.mem_bytes]
        self.free_g, self.free_c, self.free_m = list(self.cap_g), list(self.cap_c), list(self.cap_m)
        self.avail = [True] * self.n
        self.drained = self.debt = 0  # processor-count mode: units drained, and drained units still in use
        self.stranded_g = 0
        self._stranded = [0] * self.n
        self.track_stranded = not cluster.procs_mode and any(self.cap_g)
        self.epoch = 0          # bumps on every change of free resources or availability
        self.gepoch: dict = {}  # group key -> bumps when a node of the group changes
        self._node_groups = [[] for _ in range(self.n)]
        self._agg: dict = {}    # group key -> running bounds (``bounds``)
        self._groups: dict = {}
        self._index: dict = {}  # group key -> {free milli-GPUs: set of available nodes} (``place_in``)
        self._parts = {p for p in cluster.partition if p}
        self._types = {t for t in cluster.gpu_type if t}
        self.ops = None         # node mode: the compiled routines bound on this pool (``nodepool``), if any
        nodepool.bind(self)

    # ------------------------------------------------------------------ eligibility
    def group(self, partition, gpu_type) -> tuple:
        """Eligible nodes for a (partition, gpu_type) request as ``(key, single_nodes, gang_order, max_cap)``.

        A partition or GPU type the cluster does not know is not a constraint (a uniform cluster has none)."""
        key = (partition if partition in self._parts else None, gpu_type if gpu_type in self._types else None)
        g = self._groups.get(key)
        if g is None:
            part, gtype = key
            nodes = [n for n in range(self.n)
                     if (part is None or self.cluster.partition[n] == part)
                     and (gtype is None or self.cluster.gpu_type[n] == gtype)]
            gang = sorted(nodes, key=lambda n: (-self.cap_g[n], -self.cap_c[n], -min(self.cap_m[n], UNLIMITED), n))
            total = (sum(self.cap_g[n] for n in nodes), sum(self.cap_c[n] for n in nodes),
                     sum(min(self.cap_m[n], UNLIMITED) for n in nodes))
            g = (key, nodes, gang, total)
            self._groups[key] = g
            self.gepoch[key] = 0
            idx = self._index[key] = {}
            self._agg[key] = [0] * 9 + [-1, -1, -1]
            for n in nodes:
                self._node_groups[n].append(key)
                if self.avail[n]:
                    idx.setdefault(self.free_g[n], set()).add(n)
            for n in nodes:  # maxima start unknown (-1): only the sums are added
                self._shift(n, 1, (key,))
        return g

    def _shift(self, n, sign: int, groups=None) -> None:
        """Add (``sign`` 1) or take (-1) node n's free resources to / from the running sums and maxima of its
        groups (or of ``groups``): taken before its free resources or availability change, added after. The
        sums are exact integers, so taking undoes adding; a maximum is only counted down, and one whose last
        node left is recomputed when asked (count -1, which adding then leaves alone)."""
        if not self.avail[n]:
            return
        a, b, d = self.free_g[n], self.free_c[n], self.free_m[n]
        dm = min(d, UNLIMITED)
        idle = a == self.cap_g[n] and b == self.cap_c[n] and d == self.cap_m[n]
        for k in self._node_groups[n] if groups is None else groups:
            A = self._agg[k]
            A[0], A[1], A[2] = A[0] + sign * a, A[1] + sign * b, A[2] + sign * dm
            if idle:
                A[3], A[4], A[5] = A[3] + sign * a, A[4] + sign * b, A[5] + sign * dm
            for vi, v in ((6, a), (7, b), (8, d)):
                ci = vi + 3
                if sign < 0:
                    if A[ci] > 0 and v == A[vi]:
                        A[ci] -= 1
                        if A[ci] == 0:
                            A[ci] = -1  # the last node at the maximum left: recomputed when asked
                elif A[ci] >= 0:
                    if v > A[vi]:
                        A[vi], A[ci] = v, 1
                    elif v == A[vi]:
                        A[ci] += 1

    def _touch(self, n) -> None:
        self.epoch += 1
        ge = self.gepoch
        for k in self._node_groups[n]:
            ge[k] += 1

    def bounds(self, grp) -> tuple:
        """Upper bounds on what a group can take now: the largest free g, c, m on any available node (each
        separately), the summed capacity of its idle nodes (a gang above it cannot be placed) and the summed
        free resources (a request within them that does not fit is blocked by fragmentation).

        Kept as running sums and maxima with the number of nodes at each maximum (``_shift`` on
        every change); a maximum is recomputed only after the last node holding it changed."""
        A = self._agg[grp[0]]
        if A[9] < 0 or A[10] < 0 or A[11] < 0:
            fg, fc, fm, av = self.free_g, self.free_c, self.free_m, self.avail
            for vi, free in ((6, fg), (7, fc), (8, fm)):
                if A[vi + 3] >= 0:
                    continue
                best, count = 0, 0
                for n in grp[1]:
                    if av[n]:
                        v = free[n]
                        if v > best:
                            best, count = v, 1
                        elif v == best:
                            count += 1
                A[vi], A[vi + 3] = best, count
        return (A[6], A[7], A[8], A[3], A[4], A[5], A[0], A[1], A[2])

    def fits_one_node(self, nodes, g, c, m) -> bool:
        return any(self.cap_g[n] >= g and self.cap_c[n] >= c and self.cap_m[n] >= m for n in nodes)

    # ------------------------------------------------------------------ placement
    def place(self, nodes, gang, g, c, m, free=None, limit=None):
        """Best-fit placement on ``free`` (default: the live free lists), or ``None``.

        ``limit`` maps node -> (g, c, m) further capping what may be used there (EASY's extra resources)."""
        fg, fc, fm = free or (self.free_g, self.free_c, self.free_m)
        avail = self.avail
        if not gang:
            best = None
            bkey = None
            for n in nodes:
                a, b, d = fg[n], fc[n], fm[n]
                if limit is not None and n in limit:
                    lg, lc, lm = limit[n]
                    a, b, d = min(a, lg), min(b, lc), min(d, lm)
                if a >= g and b >= c and d >= m and avail[n]:
                    key = (a - g, b - c, d - m)
                    if bkey is None or key < bkey:
                        best, bkey = n, key
            return None if best is None else ((best, g, c, m),)
        return self._gang(nodes, g, c, m, fg, fc, fm, limit)

    def place_in(self, grp, gang, g, c, m, limit=None):
        """``place(grp's nodes, gang, g, c, m, limit=limit)`` on the live free lists, single-node requests by the
        free-GPU index: the best fit is in the smallest free-GPU class that can hold g, least CPUs then memory
        left, lowest index. The nodes ``limit`` caps (EASY's extra resources: the reserved job's few nodes) are
        left out of the index's walk and compared one by one, so a capped placement costs what an uncapped one
        does, not a scan of the group."""
        if gang:
            return self._gang(grp[2], g, c, m, self.free_g, self.free_c, self.free_m, limit or None)
        key = grp[0]
        idx = self._index[key]
        fc, fm = self.free_c, self.free_m
        best = None  # (g, c, m left, node)
        for v in sorted(idx):
            if v < g:
                continue
            for n in idx[v]:
                if limit and n in limit:
                    continue
                b, d = fc[n], fm[n]
                if b >= c and d >= m:
                    k = (v - g, b - c, d - m, n)
                    if best is None or k < best:
                        best = k
            if best is not None:
                break
        if limit:
            fg, avail, groups = self.free_g, self.avail, self._node_groups
            for n, (lg, lc, lm) in limit.items():
                if not avail[n] or key not in groups[n]:
                    continue
                a, b, d = min(fg[n], lg), min(fc[n], lc), min(fm[n], lm)
                if a >= g and b >= c and d >= m:
                    k = (a - g, b - c, d - m, n)
                    if best is None or k < best:
                        best = k
        return None if best is None else ((best[3], g, c, m),)

    def _reindex(self, n, old_g) -> None:
        """Move node n to its free-GPU class (out of every class while it is not available)."""
        new_g = self.free_g[n] if self.avail[n] else None
        index = self._index
        for k in self._node_groups[n]:
            idx = index[k]
            s = idx.get(old_g)
            if s is not None and n in s:
                s.discard(n)
                if not s:
                    del idx[old_g]
            if new_g is not None:
                s = idx.get(new_g)
                if s is None:
                    idx[new_g] = {n}
                else:
                    s.add(n)

    def _gang(self, order, g, c, m, fg, fc, fm, limit):
        cap_g, cap_c, cap_m, avail = self.cap_g, self.cap_c, self.cap_m, self.avail
        out, sg, sc, sm = [], 0, 0, 0
        for n in order:
            if not avail[n] or fg[n] != cap_g[n] or fc[n] != cap_c[n] or fm[n] != cap_m[n]:
                continue
            if limit is not None and n in limit and tuple(limit[n]) != (cap_g[n], cap_c[n], cap_m[n]):
                continue
            out.append((n, cap_g[n], cap_c[n], cap_m[n]))
            sg, sc, sm = sg + cap_g[n], sc + cap_c[n], sm + min(cap_m[n], UNLIMITED)
            if sg >= g and sc >= c and sm >= m:
                return tuple(out)
        return None

    def free_total(self, nodes) -> tuple:
        """Free resources summed over available eligible nodes (to tell fragmentation from a full machine)."""
        fg, fc, fm, av = self.free_g, self.free_c, self.free_m, self.avail
        return (sum(fg[n] for n in nodes if av[n]), sum(fc[n] for n in nodes if av[n]),
                sum(min(fm[n], UNLIMITED) for n in nodes if av[n]))

    # ------------------------------------------------------------------ bookkeeping
    def allocate(self, alloc) -> None:
        for n, g, c, m in alloc:
            self._move(n, -g, -c, -m)

    def release(self, alloc) -> None:
        for n, g, c, m in alloc:
            if self.debt:  # a drain is waiting for these units: they pay it back before being freed
                if self.cluster.resource == "cpus":
                    pay = min(self.debt, c)
                    c -= pay
                else:
                    pay = min(self.debt, g)
                    g -= pay
                self.debt -= pay
            self._move(n, g, c, m)

    def drain_units(self, units: int) -> None:
        """Processor-count mode: take ``units`` (milli-processors) out of service now; what running jobs hold of
        them is owed (``debt``) until they end."""
        free = self.free_c if self.cluster.resource == "cpus" else self.free_g
        take = min(units, free[0])
        self.drained += units
        self.debt += units - take
        self._touch(0)
        if take:
            self._units(-take)

    def return_units(self, units: int) -> None:
        """Processor-count mode: ``units`` drained earlier come back (first cancelling what is still owed)."""
        pay = min(self.debt, units)
        self.drained -= units
        self.debt -= pay
        self._touch(0)
        if units - pay:
            self._units(units - pay)

    def _units(self, delta) -> None:
        if self.cluster.resource == "cpus":
            self._move(0, 0, delta, 0)
        else:
            self._move(0, delta, 0, 0)

    def _move(self, n, dg, dc, dm) -> None:
        """Change node n's free resources by (dg, dc, dm) and keep every derived structure exact in one pass
        over its groups: epochs, running bounds (``_shift`` out, then in), the free-GPU index, stranded GPUs."""
        self.epoch += 1
        fg, fc, fm = self.free_g, self.free_c, self.free_m
        a0, b0, d0 = fg[n], fc[n], fm[n]
        a1, b1, d1 = a0 + dg, b0 + dc, d0 + dm
        cg, cc, cm = self.cap_g[n], self.cap_c[n], self.cap_m[n]
        assert a1 >= 0 and b1 >= 0 and d1 >= 0, "node over-allocated"
        assert a1 <= cg and b1 <= cc, "node over-released"
        fg[n], fc[n], fm[n] = a1, b1, d1
        ge = self.gepoch
        if not self.avail[n]:  # out of the bounds and the index until it returns
            for k in self._node_groups[n]:
                ge[k] += 1
        else:
            idle0 = a0 == cg and b0 == cc and d0 == cm
            idle1 = a1 == cg and b1 == cc and d1 == cm
            m0, m1 = min(d0, UNLIMITED), min(d1, UNLIMITED)
            index = self._index
            for k in self._node_groups[n]:
                ge[k] += 1
                A = self._agg[k]
                A[0], A[1], A[2] = A[0] + a1 - a0, A[1] + b1 - b0, A[2] + m1 - m0
                if idle0:
                    A[3], A[4], A[5] = A[3] - a0, A[4] - b0, A[5] - m0
                if idle1:
                    A[3], A[4], A[5] = A[3] + a1, A[4] + b1, A[5] + m1
                for vi, v0, v1 in ((6, a0, a1), (7, b0, b1), (8, d0, d1)):
                    ci = vi + 3
                    if A[ci] > 0 and v0 == A[vi]:
                        A[ci] -= 1
                        if A[ci] == 0:
                            A[ci] = -1  # the last node at the maximum left: recomputed when asked
                    if A[ci] >= 0:
                        if v1 > A[vi]:
                            A[vi], A[ci] = v1, 1
                        elif v1 == A[vi]:
                            A[ci] += 1
                if dg:
                    idx = index[k]
                    st = idx.get(a0)
                    if st is not None and n in st:
                        st.discard(n)
                        if not st:
                            del idx[a0]
                    st = idx.get(a1)
                    if st is None:
                        idx[a1] = {n}
                    else:
                        st.add(n)
        if self.track_stranded:
            self._restrand(n)

    def idle(self, n) -> bool:
        return self.free_g[n] == self.cap_g[n] and self.free_c[n] == self.cap_c[n] and self.free_m[n] == self.cap_m[n]

    def set_avail(self, n, up: bool) -> None:
        self._touch(n)
        self._shift(n, -1)
        was = self.avail[n]
        self.avail[n] = up
        self._shift(n, 1)
        if was != up:
            self._reindex(n, self.free_g[n])
        if self.track_stranded:
            self._restrand(n)

    def _restrand(self, n) -> None:
        v = self.free_g[n] if self.avail[n] and not self.idle(n) else 0
        self.stranded_g += v - self._stranded[n]
        self._stranded[n] = v
