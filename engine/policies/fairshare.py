"""Hierarchical fair share: under-served teams first, by window usage over their budget fraction.

Invariants:
- jobs whose min runtime is 0 (unallocated occupancy) come after every funded job, in FCFS order; jobs a
  borrowing cap (``max_gpus``) holds back are left out of the order (wait reason ``quota``);
- funded jobs are merged progressively: from the root, descend into the child with pending jobs whose
  ``(window usage + usage projected for the jobs started so far this pass) / fraction`` is lowest
  (zero-fraction children last; ties by path) and offer that bucket's oldest job; if the pass starts it, its
  projected charge (charge rate x min(time limit, lookback)) is added, else the bucket keeps its standing
  and offers its next job. Under-served teams therefore come first, interleaved in proportion to their
  shares rather than one whole queue after another, and a team's unstartable jobs do not push it back.

Implementation: keys change only when a job starts, so after one descent the chosen bucket offers its jobs in
turn until one starts (or it runs out), instead of a descent per job; during a pass's backfill the pass's
``hint`` lets the order skip jobs whose answer is already known (a shape that failed outright, a "long" shape
outside the hole, a borrowing cap), noting the same wait reason the pass would.
``tests/engine/test_engine_reference.py`` checks both against a per-job brute-force order and the plain scan.
The usage sums, the descent and the bucket walk (outside the class-skipping segments) run in C when
``engine/fsorder.py`` selects it (``QUOTALOOP_ENGINE``); without the class index, the whole loop runs in C
(``_fsorder.Funded``, iterated by ``yield from``), which during EASY's backfill also examines and starts the
candidates (``hint.examine``) and ends the order when nothing fits any more (``halted``). The cursor's set-up is C
too: the copy of the pending counts, the usage sums up the tree and the total; its arguments for a budget version
are bound once, at the version's first order (``_Plan.cursor``), so an order's Python cost is the version lookup,
the plan, the ledger's windows and one call, whatever the tree's size. The Python loops here are the reference and the oracle
(``tests/engine/test_compiled_fairshare.py``).
"""
from __future__ import annotations

import bisect
import heapq
import itertools

from ..jobstate import RUNNING
from ..units import INF
from .buckets import BucketQueue

_ALL_WITHIN = object()  # ``_capped_segment``: no class of the bucket is held back
CURSOR = True  # tests and benchmarks switch it off: the compiled order then walks each bucket from Python (``walk``)


def python_descend(children, rem, frac, usage, paths):
    """The leaf bucket a pass offers next: from the root, the child with pending jobs (``rem``) and the lowest
    ``usage / frac`` (zero-fraction children after the others, by usage; ties by path). The reference for
    ``fsorder``'s compiled ``descend``; the trees are shallow and narrow, so a walk per descent is cheap."""
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
    return node


class FairShareQueue(BucketQueue):
    indexes_classes = True

    def funded_order(self, now):
        self.halted = False
        self.adapt()  # build or drop the class index now, while no other order is running
        sim = self.sim
        ten = sim.budgeting.at(now)
        plan = self._plan(ten)
        fast = self.compiled  # the same sums and descents in C (engine/fsorder.py); these loops are the oracle
        if fast is not None and CURSOR and not self.indexed:  # the whole loop below in C, one call per job handed over
            cursor = plan.cursor  # this budget version's arguments, bound at its first order
            if cursor is None:
                cursor = plan.cursor = (
                    ten.children, ten.frac, ten.paths, ten.capped_chain, ten.held_g, ten.cap_floor, ten.depth_chain,
                    plan.bucket_accts, self.funded, sim.charge, sim.limit_left, sim.cfg.lookback_s, sim.status,
                    RUNNING, sim.acct, sim.req_g, sim.waits.reason, sim.waits.note, heapq.merge, plan.acct_chain,
                    len(ten.paths))
            # the pending counts' copy, the usage sums and the total are the cursor's set-up (the lines below)
            yield from fast.Funded(self, cursor, plan.pending, sim.ledger.window_all(now), now)
            return
        n = len(ten.paths)
        if fast is not None:
            usage = fast.tree_usage(sim.ledger.window_all(now), plan.acct_chain, n)
            descend, walk, st = fast.descend, fast.walk, [0, 0]
        else:
            descend = python_descend
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
        reason, note, status = sim.waits.reason, sim.waits.note, sim.status
        chains = ten.depth_chain
        heads: dict = {}
        pos_of: dict = {}  # capped bucket -> the last job it offered that started (class-skipping segments)
        indexed = self.indexed
        dirty, acct, classes = self.dirty, sim.acct, self.classes
        seen = failed = shape = state = None
        n_shapes = 0
        n_held = 0  # held-back jobs walked since the last flush into ``held_seen`` (before every yield and return)
        while total > 0:
            # descend from the root into the child with pending jobs and the lowest key (usage / fraction;
            # zero-fraction children after the others; ties by path): the trees are shallow and narrow
            node = descend(children, rem, frac, usage, paths)
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
            mark = tracked = cn and indexed
            if mark:  # a class over the room: skip the classes it holds back, unseen (``_capped_segment``)
                for a in bucket_accts[node]:
                    top = classes.get(a)
                    if top and max(top) > room:
                        break
                else:
                    mark = False
            if mark:
                res = yield from self._capped_segment(node, room, pos_of, bucket_accts[node], now)
                if res is None:
                    self.held_seen += n_held
                    return
                if res is not _ALL_WITHIN:
                    heads.pop(node, None)  # the plain iterator (below) no longer continues where this left off
                    started, taken, j = res
                    total -= taken
                    chain = chains[node]
                    for i in chain:
                        rem[i] -= taken
                    if not started:
                        rem[node] = 0
                        continue
                    proj = charge[j] * (est[j] if est[j] < horizon else horizon)
                    for i in chain:
                        usage[i] += proj
                    continue
            taken = 0
            started = False
            it = heads.get(node)
            if it is None:  # the bucket's FIFOs (one account: its dict; several: an index-ordered merge)
                qs = [q for q in (funded.get(a) for a in bucket_accts[node]) if q]
                it = iter(qs[0]) if len(qs) == 1 else heapq.merge(*qs)
                pos = pos_of.get(node, -1) if tracked else -1
                if pos >= 0:  # continue after the last job a class-skipping segment offered
                    it = itertools.dropwhile(pos.__ge__, it)
                heads[node] = it
            if fast is not None:  # the same walk with the per-job loop in C (``walk``): the loop below is its oracle
                st[0], st[1] = 0, n_held
                while True:
                    hint = self.hint
                    if hint is not None and hint is not seen:
                        seen, failed, shape, state, n_shapes = hint, hint.failed, hint.shape, hint.state, hint.n_shapes
                    j = walk(it, st, room, dirty if tracked else None, acct, req_g, reason, note, now, hint, failed,
                             shape, state, n_shapes)
                    if j is None:
                        break
                    if j is False:
                        self.held_seen += st[1]
                        return
                    if st[1]:
                        self.held_seen += st[1]
                        st[1] = 0
                    yield j
                    if status[j] == RUNNING:
                        started = True
                        if tracked:
                            pos_of[node] = j
                        break
                taken, n_held = st[0], st[1]
                it = ()  # walked: the loop below has nothing left to do
            for j in it:
                taken += 1
                if tracked:  # every class is within the room: the same walk, noting what it hands over
                    dirty[acct[j]][req_g[j]].add(j)
                if room is not None and req_g[j] > room:
                    # held back by a borrowing cap: left out of this pass's order
                    n_held += 1
                    if reason[j] != "quota":
                        note(j, "quota", now)
                    continue
                hint = self.hint
                if hint is not None:  # the pass already knows this job cannot start: skip it cheaply
                    if hint is not seen:
                        seen, failed, shape, state, n_shapes = hint, hint.failed, hint.shape, hint.state, hint.n_shapes
                    if state.n_failed_short >= n_shapes:  # as in the unallocated queue below
                        self.held_seen += n_held
                        return
                    r = failed.get(shape[j])
                    if r is None or r == "long":
                        r = hint(j)
                        if r is False:
                            self.held_seen += n_held
                            return
                    if r is not None:
                        if reason[j] != r:
                            note(j, r, now)
                        continue
                if n_held:
                    self.held_seen += n_held
                    n_held = 0
                yield j
                if status[j] == RUNNING:
                    started = True
                    if tracked:
                        pos_of[node] = j
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
        self.held_seen += n_held

    def _capped_segment(self, node, room, pos_of, accts, now):
        """Offer capped bucket ``node``'s funded jobs after the last one it offered this pass (``heads[node]``),
        as the plain loop does, but walking only the request classes within ``room`` (milli-GPUs under the
        tightest cap) and, of the others, only the jobs not yet noted "quota" (``BucketQueue.dirty``): every job
        the plain loop would note "quota" already holds it. Notes and hand-overs keep the plain loop's order
        (index order), so a pass that stops anywhere leaves the same reasons. Returns (started, jobs consumed,
        the started job), None when the pass's hint stops the order, or ``_ALL_WITHIN`` (before offering anything)
        when the room holds no class back: the plain loop then walks the bucket's FIFOs, which is cheaper."""
        sim = self.sim
        reason, note, status, acct, req_g = sim.waits.reason, sim.waits.note, sim.status, sim.acct, sim.req_g
        classes, dirty = self.classes, self.dirty
        pos = pos_of.get(node, -1)
        lists, vis, held_back, held_lists = [], [], [], []
        left = 0
        skips = False
        for a in accts:
            cls = classes.get(a)
            if not cls:
                continue
            dcls = dirty[a]
            for g, lst in cls.items():
                k = bisect.bisect_right(lst, pos) if pos >= 0 else 0
                n = len(lst)
                if k == n:
                    continue
                lists.append(lst)
                left += n - k
                if g <= room:
                    vis.append(map(lst.__getitem__, range(k, n)))
                else:
                    skips = True
                    held_lists.append(lst)
                    self.held_seen += n - k  # passed unseen (less those after a job that starts, below)
                    d = dcls[g]
                    if d:
                        held_back.extend(x for x in d if x > pos)
        if not skips:
            return _ALL_WITHIN
        held_back.sort()
        di, nd = 0, len(held_back)
        it = vis[0] if len(vis) == 1 else heapq.merge(*vis)
        seen = failed = shape = state = None
        n_shapes = 0
        for j in it:
            while di < nd and held_back[di] < j:  # held back by the cap: noted as the plain loop would
                x = held_back[di]
                di += 1
                if reason[x] != "quota":
                    note(x, "quota", now)
                dirty[acct[x]][req_g[x]].discard(x)
            dirty[acct[j]][req_g[j]].add(j)  # handed over or hinted: its reason may change
            hint = self.hint
            if hint is not None:
                if hint is not seen:
                    seen, failed, shape, state, n_shapes = hint, hint.failed, hint.shape, hint.state, hint.n_shapes
                if state.n_failed_short >= n_shapes:
                    return None
                r = failed.get(shape[j])
                if r is None or r == "long":
                    r = hint(j)
                    if r is False:
                        return None
                if r is not None:
                    if reason[j] != r:
                        note(j, r, now)
                    continue
            yield j
            if status[j] == RUNNING:
                pos_of[node] = j
                after = 0
                for lst in lists:
                    after += len(lst) - bisect.bisect_right(lst, j)
                for lst in held_lists:
                    self.held_seen -= len(lst) - bisect.bisect_right(lst, j)
                return True, left - after, j
        while di < nd:
            x = held_back[di]
            di += 1
            if reason[x] != "quota":
                note(x, "quota", now)
            dirty[acct[x]][req_g[x]].discard(x)
        pos_of[node] = INF
        return False, left, None


class FairShare:
    """The ``fairshare`` policy: window usage is tracked and charged; preemption compares usage-served ratios."""
    name = "fairshare"
    uses_buckets = True
    tracks_usage = True
    dominant_share = False
    new_jobs_queue_last = False
    supports_fastpath = False
    order_skips_capped = True

    def make_queue(self, sim):
        return FairShareQueue(sim)
