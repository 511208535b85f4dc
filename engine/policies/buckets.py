"""The machinery the bucket policies (``fairshare``, ``drf``) share: per-account FIFOs of funded jobs, the
unallocated-occupancy jobs after them, and each budget version's static maps (``_Plan``).

Invariants:
- job index order is (submit, job id) order; each account's FIFO is in index order (a requeued job goes back to
  its original place);
- jobs whose min runtime is 0 (unallocated occupancy) come after every funded job, in FCFS order, and a pass's
  ``hint`` lets the order skip those whose answer the pass already knows, noting the same wait reason it would;
- ``_Plan.pending`` counts, per tree node, the funded jobs pending under it (kept by ``add``/``remove``);
  ``_Plan.cursor`` holds the compiled order's arguments for that version (its tree's lists, bound at the version's
  first order; only lists the run mutates in place, never rebinds), so each budget version's orders read their
  own tree, caps and counts however often the version in force changes.
- class index (a queue whose order skips capped jobs, ``indexes_classes``, in a run with borrowing caps), kept
  only while the backlog a cap holds back is big enough to pay for it (``adapt``, below):
  ``classes[a][g]`` holds account a's funded jobs requesting g milli-GPUs, in index order, and ``dirty[a][g]``
  those of them not known to hold the wait reason "quota". A job leaves ``dirty`` only when the order notes it
  "quota", and re-enters it whenever it is queued (``add``: a new wait starts with the default reason), handed
  to a pass or its hint by the order, or examined by a pass outside the order (``touch``, which the simulator
  calls for an incremental pass's new submissions): nothing else notes a queued funded job's reason. So a job outside
  ``dirty`` holds "quota" and noting it "quota" again changes nothing; the order may skip it unseen.
- adaptive index: ``adapt`` (called by the order when it starts, the one moment no other order of this queue is
  resumed again: the simulator never continues an order once it made a newer one) builds the index when the
  orders since the last decision passed, on average, at least ``INDEX_FROM`` held-back jobs each (walked one by
  one without the index, counted per class with it), and drops it when they passed fewer than ``INDEX_UNTIL``;
  decisions come every ``INDEX_EVERY`` orders. Building it reads each funded job's reason once: ``dirty`` starts
  as exactly the jobs not holding "quota", so the invariant above holds from the first skipping order on, and an
  order without the index is the plain walk. Either way the jobs, notes and hand-overs are the plain walk's; only
  the cost differs (small backlogs pay no bookkeeping, big ones no per-pass walk).
"""
from __future__ import annotations

import bisect

from .. import fsorder
from .fcfs import FCFSQueue

SKIP = True  # tests switch it off: the orders then walk every capped job, and both must agree exactly
# The index pays for itself once the passes walk a few dozen held-back jobs each (its upkeep: a list insertion
# per enqueue / dequeue and a set insertion per job handed over); tests force 0 / 1 / huge to switch it on from
# the start, at every order, or never.
INDEX_FROM = 64    # held-back jobs passed per order, on average, that make the orders keep the index
INDEX_UNTIL = 16   # ... and below which they drop it (hysteresis: a backlog near the threshold does not flap)
INDEX_EVERY = 32   # orders between two decisions


class BucketQueue:
    """Per-account FIFOs of funded jobs, merged by a subclass's ``funded_order(now)``, then the unallocated
    jobs in FCFS order (skipped with the pass's ``hint``)."""

    indexes_classes = False  # a subclass whose order skips capped request classes sets it

    def __init__(self, sim):
        self.sim = sim
        self.funded: dict[int, dict[int, None]] = {}   # account -> FIFO of funded jobs
        self.free: FCFSQueue = FCFSQueue()             # unallocated-occupancy jobs (min runtime 0)
        self.members: set[int] = set()
        self.hint = None  # set by a pass: j -> failure reason (skip j), False (stop) or None (hand j over)
        self.halted = False  # the compiled order examined a job whose start left nothing that fits: the pass ends
        self._plans: dict = {}  # id(Tenants) -> _Plan: the version's static maps and live pending counts
        self.indexed = False    # the class index is kept (``adapt`` decides)
        self.held_seen = 0      # held-back jobs the orders passed since the last decision (walked or skipped)
        self.n_orders = 0       # orders started since the last decision
        self.classes: dict[int, dict[int, list]] = {}  # account -> milli-GPUs -> funded jobs, index order
        self.dirty: dict[int, dict[int, set]] = {}     # account -> milli-GPUs -> jobs maybe not noted "quota"
        self.compiled = fsorder.routines()  # the compiled walk (engine/fsorder.py), or None: the Python loops

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
        if self.indexed:
            g = self.sim.req_g[j]
            lst = self.classes.setdefault(a, {}).setdefault(g, [])
            if lst and j < lst[-1]:
                bisect.insort(lst, j)
            else:
                lst.append(j)
            self.dirty.setdefault(a, {}).setdefault(g, set()).add(j)
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
        if self.indexed:
            g = self.sim.req_g[j]
            cls, lst = self.classes[a], self.classes[a][g]
            del lst[bisect.bisect_left(lst, j)]
            self.dirty[a][g].discard(j)
            if not lst:
                del cls[g]
                del self.dirty[a][g]

    def touch(self, jobs) -> None:
        """A pass examines ``jobs`` outside ``order`` (an incremental pass's new submissions): their reasons may
        change, so the class index no longer knows them to hold "quota"."""
        if self.indexed:
            acct, req_g, members, min_rt, dirty = self.sim.acct, self.sim.req_g, self.members, self.sim.min_rt, self.dirty
            for j in jobs:
                if j in members and min_rt[j] != 0:
                    dirty[acct[j]][req_g[j]].add(j)

    def adapt(self) -> None:
        """An order starts: every ``INDEX_EVERY`` orders, build or drop the class index by the held-back jobs the
        orders passed since the last decision (module docstring)."""
        self.n_orders += 1
        if self.n_orders < INDEX_EVERY:
            return
        per_order = self.held_seen / self.n_orders
        self.held_seen = self.n_orders = 0
        if self.indexed:
            if per_order < INDEX_UNTIL:
                self.indexed = False
                self.classes, self.dirty = {}, {}
        elif per_order >= INDEX_FROM and SKIP and self.indexes_classes and self.sim.caps.on:
            self._build_index()

    def _build_index(self) -> None:
        """Every funded job into its (account, milli-GPUs) class, in index order; ``dirty``: those whose current
        reason is not "quota" (the others may be skipped unseen: noting "quota" again changes nothing)."""
        reason, req_g = self.sim.waits.reason, self.sim.req_g
        classes, dirty = {}, {}
        for a, q in self.funded.items():
            if not q:
                continue
            cls = classes[a] = {}
            d = dirty[a] = {}
            for j in q:  # index order: each class list comes out sorted
                g = req_g[j]
                lst = cls.get(g)
                if lst is None:
                    lst = cls[g] = []
                    d[g] = set()
                lst.append(j)
                if reason[j] != "quota":
                    d[g].add(j)
        self.classes, self.dirty, self.indexed = classes, dirty, True

    def order(self, now):
        yield from self.funded_order(now)
        if self.halted:  # the pass ended inside the funded order (``_fsorder.Funded`` with ``hint.examine``)
            return
        waits = self.sim.waits
        reason, note = waits.reason, waits.note
        seen = failed = shape = state = None
        n_shapes = 0
        it = self.free.order(now)
        if self.compiled is not None:  # the loop below in C (``_fsorder.walk``, uncapped, no class index): its oracle
            walk, st, req_g = self.compiled.walk, [0, 0], self.sim.req_g
            while True:
                hint = self.hint
                if hint is not None and hint is not seen:
                    seen, failed, shape, state, n_shapes = hint, hint.failed, hint.shape, hint.state, hint.n_shapes
                j = walk(it, st, None, None, None, req_g, reason, note, now, hint, failed, shape, state, n_shapes)
                if j is None or j is False:
                    return
                yield j
        for j in it:
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
                        note(j, r, now)
                    continue
            yield j

    def funded_order(self, now):
        """The funded jobs in the policy's merge order (lazy: a pass may stop consuming it at any point)."""
        raise NotImplementedError

    def _plan(self, ten) -> "_Plan":
        plan = self._plans.get(id(ten))
        if plan is None:
            plan = self._plans[id(ten)] = _Plan(ten, self.sim.accounts, self.funded)
        return plan


class _Plan:
    """One budget version seen from the queue: each account's chain of tree nodes, the accounts of each bucket,
    and the number of funded jobs pending under every node (kept by ``add``/``remove``)."""

    def __init__(self, ten, accounts, funded):
        self.cursor = None  # the compiled order's arguments for this version (``FairShareQueue.funded_order``)
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
