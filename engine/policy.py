"""Queue orders: FCFS, priority, hierarchical fair share and DRF.

A queue holds waiting job indices; job index order is (submit, job id) order. ``order(now)`` yields the
queued jobs in policy order. A scheduling pass may stop consuming the iterator at any point (so the
fair-share and DRF orders are generated lazily) and must not add or remove jobs while it iterates; it
removes the jobs it started afterwards (``remove``).

Invariants:
- FCFS: index order, i.e. submit time then job id; a requeued job goes back to its original place.
- priority: higher ``priority`` first (the log's priority column, else the QoS rank), then FCFS.
- fairshare: jobs whose min runtime is 0 (unallocated occupancy) come after every funded job, in FCFS order.
  Jobs a borrowing cap (``max_gpus``) holds back are left out of the order (wait reason ``quota``).
  Funded jobs are merged progressively: from the root, descend into the child with pending jobs whose
  ``(window usage + usage projected for the jobs started so far this pass) / fraction`` is lowest
  (zero-fraction children last; ties by path) and offer that bucket's oldest job; if the pass starts it, its
  projected charge (charge rate x min(time limit, lookback)) is added, else the bucket keeps its standing
  and offers its next job. Under-served teams therefore come first, interleaved in proportion to their
  shares rather than one whole queue after another, and a team's unstartable jobs do not push it back.
- drf: the same merge, flat over buckets, by weighted dominant share max(gpu, cpu, mem share of the
  cluster held by the bucket's running + already-emitted jobs) / fraction.

Implementation of the fair-share merge: keys change only when a job starts, so after one descent the chosen
bucket offers its jobs in turn until one starts (or it runs out), instead of a descent per job; during a pass's
backfill the pass's ``hint`` lets the order skip jobs whose answer is already known (a shape that failed
outright, a "long" shape outside the hole, a borrowing cap), noting the same wait reason the pass would.
``tests/engine/test_engine_reference.py`` checks both against a per-job brute-force order and the plain scan.
"""
from __future__ import annotations

import bisect
import heapq

INF = float("inf")
RUNNING = 2  # core.RUNNING (not imported: core imports this module)


class FCFSQueue:
    def __init__(self):
        self.d: dict[int, None] = {}
        self._last = -1

    def __len__(self):
        return len(self.d)

    def __contains__(self, j):
        return j in self.d

    def add(self, j: int) -> None:
        if j < self._last:  # a requeued job: restore index order
            keys = sorted([*self.d, j])
            self.d = dict.fromkeys(keys)
            return
        self.d[j] = None
        self._last = j

    def remove(self, j: int) -> None:
        del self.d[j]
        if not self.d:
            self._last = -1

    def order(self, now):
        return iter(self.d)

    def jobs(self):
        return self.d.keys()


class PriorityQueue:
    def __init__(self, prio):
        self.prio = prio
        self.keys: list[tuple] = []
        self.members: set[int] = set()

    def __len__(self):
        return len(self.keys)

    def __contains__(self, j):
        return j in self.members

    def add(self, j):
        bisect.insort(self.keys, (-self.prio[j], j))
        self.members.add(j)

    def remove(self, j):
        k = (-self.prio[j], j)
        i = bisect.bisect_left(self.keys, k)
        del self.keys[i]
        self.members.discard(j)

    def order(self, now):
        return (j for _, j in self.keys)

    def jobs(self):
        return self.members


class TenantQueue:
    """Per-bucket FIFOs merged by fair share (``drf=False``) or weighted DRF (``drf=True``)."""

    def __init__(self, sim, drf: bool):
        self.sim = sim
        self.drf = drf
        self.funded: dict[int, dict[int, None]] = {}   # account -> FIFO of funded jobs
        self.free: FCFSQueue = FCFSQueue()             # unallocated-occupancy jobs (min runtime 0)
        self.members: set[int] = set()
        self.hint = None  # set by a pass: j -> failure reason (skip j), False (stop) or None (hand j over)
        self._plans: dict = {}  # id(Tenants) -> _Plan: the version's static maps and live pending counts

    def __len__(self):
        return len(self.members)

    def __contains__(self, j):
        return j in self.members

    def jobs(self):
        return self.members

    def add(self, j):
        self.members.add(j)
        if self.sim.min_rt[j] == 0:
            self.free.add(j)
            return
        a = self.sim.acct[j]
        for plan in self._plans.values():
            plan.count(a, 1)
        q = self.funded.setdefault(a, {})
        if q and j < next(reversed(q)):
            items = sorted([*q, j])
            q.clear()
            q.update(dict.fromkeys(items))
        else:
            q[j] = None

    def remove(self, j):
        self.members.discard(j)
        if j in self.free:
            self.free.remove(j)
            return
        a = self.sim.acct[j]
        for plan in self._plans.values():
            plan.count(a, -1)
        del self.funded[a][j]

    def order(self, now):
        yield from (self._drf(now) if self.drf else self._fairshare(now))
        reason, note = self.sim.reason, self.sim.note
        seen = failed = shape = state = None
        n_shapes = 0
        for j in self.free.order(now):
            hint = self.hint
            if hint is not None:
                if hint is not seen:
                    seen, failed, shape, state, n_shapes = hint, hint.failed, hint.shape, hint.state, hint.n_shapes
                # hint(j) with its commonest answer inlined: a shape that already failed outright this pass
                if state.n_failed_short >= n_shapes:
                    return
                r = failed.get(shape[j])
                if r is None or r == "long":
                    r = hint(j)
                    if r is False:
                        return
                if r is not None:
                    if reason[j] != r:
                        note(j, r)
                    continue
            yield j

    # ------------------------------------------------------------------ fair share
    def _plan(self, ten) -> "_Plan":
        plan = self._plans.get(id(ten))
        if plan is None:
            plan = self._plans[id(ten)] = _Plan(ten, self.sim.accounts, self.funded)
        return plan

    def _fairshare(self, now):
        sim = self.sim
        ten = sim.budgeting.at(now)
        plan = self._plan(ten)
        n = len(ten.paths)
        usage = [0.0] * n
        for u, chain in zip(sim.ledger.window_all(now), plan.acct_chain):
            if u:
                for i in chain:
                    usage[i] += u
        rem = list(plan.pending)  # funded jobs pending per tree node (this pass consumes its copy)
        children = ten.children
        total = sum(rem[c] for c in children[0])
        if not total:
            return
        funded, bucket_accts = self.funded, plan.bucket_accts
        frac, paths = ten.frac, ten.paths
        horizon = sim.cfg.lookback_s
        charge, est = sim.charge, sim.limit_left
        capped, held, capf, req_g = ten.capped_chain, ten.held_g, ten.cap_floor, sim.req_g
        reason, note, status = sim.reason, sim.note, sim.status
        chains = ten.depth_chain
        heads: dict = {}
        seen = failed = shape = state = None
        n_shapes = 0
        while total > 0:
            # descend from the root into the child with pending jobs and the lowest key (usage / fraction;
            # zero-fraction children after the others; ties by path): the trees are shallow and narrow
            node = 0
            while children[node]:
                best = bkey = None
                for c in children[node]:
                    if rem[c] > 0:
                        f = frac[c]
                        k = (0, usage[c] / f, paths[c]) if f > 0 else (1, usage[c], paths[c])
                        if bkey is None or k < bkey:
                            best, bkey = c, k
                node = best
            # nothing changes the keys until a job starts, so the descent would pick this bucket again: offer
            # its jobs in order until one starts (or it has none left)
            cn = capped[node]
            # integer milli-GPUs: held + g > cap  <=>  g > floor(cap) - held, for the tightest cap on the path
            if cn:
                room = INF
                for i in cn:
                    r = capf[i] - held[i]
                    if r < room:
                        room = r
            else:
                room = None
            taken = 0
            started = False
            it = heads.get(node)
            if it is None:  # the bucket's FIFOs (one account: its dict; several: an index-ordered merge)
                qs = [q for q in (funded.get(a) for a in bucket_accts[node]) if q]
                it = heads[node] = iter(qs[0]) if len(qs) == 1 else heapq.merge(*qs)
            for j in it:
                taken += 1
                if room is not None and req_g[j] > room:
                    # held back by a borrowing cap: left out of this pass's order
                    if reason[j] != "quota":
                        note(j, "quota")
                    continue
                hint = self.hint
                if hint is not None:  # the pass already knows this job cannot start: skip it cheaply
                    if hint is not seen:
                        seen, failed, shape, state, n_shapes = hint, hint.failed, hint.shape, hint.state, hint.n_shapes
                    if state.n_failed_short >= n_shapes:  # as in the unallocated queue below
                        return
                    r = failed.get(shape[j])
                    if r is None or r == "long":
                        r = hint(j)
                        if r is False:
                            return
                    if r is not None:
                        if reason[j] != r:
                            note(j, r)
                        continue
                yield j
                if status[j] == RUNNING:
                    started = True
                    break
            total -= taken
            chain = chains[node]
            for i in chain:
                rem[i] -= taken
            if not started:
                rem[node] = 0  # exhausted (the counts already say so; kept explicit for the descent)
                continue
            proj = charge[j] * (est[j] if est[j] < horizon else horizon)
            for i in chain:
                usage[i] += proj

    # ------------------------------------------------------------------ DRF
    def _drf(self, now):
        sim = self.sim
        ten = sim.budgeting.at(now)
        held = sim.held_by_bucket(ten)  # bucket -> [g, c, m] of running jobs
        tot = sim.capacity
        buckets: dict[int, list] = {}
        for a, q in self.funded.items():
            if q:
                buckets.setdefault(ten.bucket[sim.accounts[a]], []).append(a)
        heap = []
        heads = {}
        for b, accts in buckets.items():
            heads[b] = _Merge([self.funded[a] for a in accts])
            h = list(held.get(b, (0, 0, 0)))
            heap.append((_dominant(h, tot, ten.frac[b]), ten.paths[b], b, h))
        heapq.heapify(heap)
        while heap:
            _, path, b, h = heapq.heappop(heap)
            m = heads[b]
            j = m.pop()
            yield j
            h[0] += sim.req_g[j]
            h[1] += sim.req_c[j]
            h[2] += sim.req_m[j]
            if m.left:
                heapq.heappush(heap, (_dominant(h, tot, ten.frac[b]), path, b, h))


def _dominant(h, tot, frac) -> float:
    s = max(h[i] / tot[i] if tot[i] else 0.0 for i in range(3))
    return s / frac if frac > 0 else INF if s > 0 else 1e300


class _Plan:
    """One budget version seen from the queue: each account's chain of tree nodes, the accounts of each bucket,
    and the number of funded jobs pending under every node (kept by ``add``/``remove``)."""

    def __init__(self, ten, accounts, funded):
        self.acct_chain = [ten.depth_chain[ten.bucket[name]] for name in accounts]
        self.bucket_accts: dict[int, list] = {}
        for a, name in enumerate(accounts):
            self.bucket_accts.setdefault(ten.bucket[name], []).append(a)
        self.pending = [0] * len(ten.paths)
        for a, q in funded.items():
            self.count(a, len(q))

    def count(self, a, k) -> None:
        pending = self.pending
        for i in self.acct_chain[a]:
            pending[i] += k


class _Merge:
    """Index-ordered merge of several FIFO dicts (accounts sharing one bucket)."""

    def __init__(self, queues):
        self.left = sum(len(q) for q in queues)
        if len(queues) == 1:
            self._it = iter(queues[0])
        else:
            self._it = heapq.merge(*queues)

    def pop(self) -> int:
        self.left -= 1
        return next(self._it)


def make_queue(sim, policy: str):
    if policy == "fcfs":
        return FCFSQueue()
    if policy == "priority":
        return PriorityQueue(sim.prio)
    return TenantQueue(sim, drf=(policy == "drf"))
