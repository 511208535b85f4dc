"""The discrete-event core: one heap of ``(time, priority, seq, payload)`` events and the job lifecycle.

At each timestamp every event is applied first, in priority order (job ends, node repairs, node failures and
drains, min-runtime expiries, submissions; ``seq`` keeps insertion order within a priority), then one
scheduling pass runs. A pass is *incremental* (only the new submissions are examined, continuing the last
pass's state) when nothing but submissions and min-runtime expiries happened since the last pass and either
the order is FCFS (new jobs queue last) or, for the other orders, at most one job arrived and the blocked head
is unchanged (EASY / no backfill): the earlier jobs' outcome cannot have changed (free resources only shrank,
the reservation stayed). Any other event makes the next pass full. A preemption round follows every pass.
The queue policy (``engine.policies``) orders the queue; the backfill rule (``engine.backfill``) supplies the pass
function, and where a whole-run kernel applies (``backfill.fastpath``: the common processor-count replay with every
other feature idle) runs the simulation in its place. The core asks both only through their traits, never their
names.

Invariants:
- A job is in exactly one state: waiting (``NEW``), queued, running or done; a running job holds ``alloc``
  on the pool and one entry in ``running_by_end`` keyed by its estimated end (start + remaining time limit).
- An end event carries the attempt number; a stale one (the job was requeued since) is ignored.
- Simulated time only moves forward; no wall clock, no randomness here (node drains drawn from the config's
  seeded generator are turned into events up front).
- Every job ends: jobs no budget version lets start are skipped up front (``over_cap``); if jobs are still
  queued when no event is left, ``run`` raises ``ConfigError`` naming them instead of returning a partial run.
- ``replay="logged"`` bypasses the scheduler (``engine.replay``). A warm start T (``engine.warm_start``) pins the jobs
  that started before T before the first event and submits the others at max(submit, T).
- ``sched_interval_s`` N > 0: passes (and preemption rounds) run only at instants k*N of the simulation clock,
  like a real scheduler's cycle; events between two cycle instants are applied at their own time (a job's end
  frees its resources then) and the next cycle's pass sees all of them (full if any was). A cycle instant is
  put on the heap only when something happened with jobs queued, so a queue nothing can start never spins.
  N = 0 is the every-event loop above, unchanged. With ``sched_cycle="backfill"`` every other event instant with
  jobs queued still gets a main pass (queue order up to the first job that does not fit, no backfill, no
  preemption round), as Slurm's event-triggered scheduler; only backfilling waits for the cycle.
- Each attempt's wait keeps its own reasons (``waits``, a ``reasons.WaitReasons``), answered per (job, attempt).
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import math

import numpy as np

from . import health, min_runtime, preempt, reasons, replay, tenants, warm_start
from .backfill import BACKFILLS, PassState
from .config import ConfigError
from .events import P_END, P_SUBMIT, P_TICK
from .intervals import Intervals
from .jobstate import DONE, NEW, QUEUED, RUNNING
from .policies import POLICIES
from .qstats import QueueStats
from .pool import Pool
from .tenants import Budgeting, Ledger
from .units import INF, UNLIMITED



class Simulator:
    """One run's state, in groups (the seams' objects own theirs):

    - the inputs: ``wl`` (``workload.Workload``), ``pool`` (free resources per node and group, ``pool.Pool``),
      ``cfg``, the chosen ``policy`` and ``backfill`` rule (registries ``policies``/``backfill``), ``depth``;
    - the queue: ``queue`` (the policy's), ``pstate`` (the last pass's ``backfill.state.PassState``), the
      request-shape tallies ``shape``/``shape_count``/``qstats``/``whole_waiting``;
    - per job, by index: ``status`` (``jobstate``), ``rem``/``limit_left`` (run time and limit left), ``alloc``,
      ``att_start``/``first_start``/``end_time``/``start_seq``/``attempt``, ``reserved``, ``preemptions``/
      ``failures``, ``run_s``; wait reasons in ``waits`` (``reasons.WaitReasons``);
    - the running set: ``running_by_end`` (estimated end, seq, job), ``version`` (bumps on every change);
    - usage tallies: ``held``/``gheld`` per account, ``ledger`` (window usage), ``charge`` (bucket policies);
    - preemption: ``preemptible``/``preemptible_in``, ``min_rt``; health events: ``health``.

    Writers outside this class: the pass kernels (``backfill``) start jobs through ``start`` and write only
    ``reserved``, ``counters`` and the reasons; ``preempt`` requeues and starts through ``requeue``/``start``,
    resets ``pstate`` and keeps its search caches; ``health`` requeues through ``requeue`` and bumps ``version``;
    ``replay`` and ``warm_start`` set pinned jobs' per-job fields and the clock before the first event;
    ``backfill.fastpath`` runs the whole loop itself and writes the per-job outputs it produces.
    """

    def __init__(self, wl, pool: Pool, cfg):
        self.wl, self.pool, self.cfg = wl, pool, cfg
        n = wl.n
        self.n = n
        self.submit, self.limit = wl.submit, wl.limit
        self.req_g, self.req_c, self.req_m = wl.req_g, wl.req_c, wl.req_m
        self.group, self.gang = wl.group, wl.gang
        self.acct, self.accounts = wl.acct, wl.accounts
        self.budgeting = Budgeting(cfg.budgets, wl.accounts, wl.origin_us)
        self.min_rt = min_runtime.per_job(wl, cfg, self.budgeting.tree)
        self.policy = policy = POLICIES[cfg.policy]
        self.backfill = BACKFILLS[cfg.backfill]
        res = pool.cluster.charge_resource
        src = self.req_g if res == "gpus" else self.req_c
        # charge per second in resource units; unallocated occupancy (min runtime 0) is free of charge
        self.charge = ([0.0 if mr == 0 else x / 1000.0 for mr, x in zip(self.min_rt, src)]
                       if policy.uses_buckets else None)
        self.capacity = (sum(pool.cap_g), sum(pool.cap_c), sum(min(m, UNLIMITED) for m in pool.cap_m))
        # per-job mutable state
        self.status = [NEW] * n
        self.rem = list(wl.run)          # actual run time still to do
        self.limit_left = list(wl.limit)  # time limit still available (the estimate passes use)
        self.first_start = [None] * n
        self.att_start = [0.0] * n
        self.attempt = [0] * n
        self.alloc = [()] * n
        self.end_time = [None] * n
        self.start_seq = [None] * n
        self.reserved = [None] * n
        self.reserved_att: dict = {}      # job -> attempt whose wait made its reservation (default: the last)
        self.burst_att: set = set()       # (job, attempt) of requeued attempts that ran as burst
        self.burst = [False] * n
        self.preemptions = [0] * n
        self.failures = [0] * n
        self.run_s = [0.0] * n
        self.killed = [False] * n         # ended without requeue by a node failure (no-requeue mode unused)
        self.intervals = Intervals()
        self.running_by_end: list[tuple] = []
        self.held = [[0, 0, 0] for _ in wl.accounts]  # account -> running (g, c, m)
        self.gheld = [0] * len(wl.accounts)             # account -> running guaranteed milli-GPUs
        self.ledger = Ledger(len(wl.accounts), cfg.lookback_s)
        self.track_usage = policy.tracks_usage
        self.queue = policy.make_queue(self)
        self.depth = cfg.depth
        self.waits = reasons.WaitReasons(n, "priority" if self.depth == 0 else "resources", self.attempt)
        self.preemptible: set[int] = set()
        self.preemptible_in: dict = {}    # placement group -> preemptible jobs holding resources on its nodes
        self.preempt_added = 0            # counts additions to ``preemptible`` (memo key of fruitless searches)
        self.preempt_on = cfg.preemption and any(m < INF for m in self.min_rt)
        # QoS preemption (Slurm preempt/qos): per job, the QoS names it may preempt (None: none), and its QoS
        pairs = cfg.qos_preempts or dict(getattr(self.budgeting.tree, "qos_preempts", ()) or ())
        self.qos = wl.qos if pairs else None
        self.qos_victims = [pairs.get(q) or None for q in self.qos] if pairs else None
        self.version = 0                  # bumps on every change of running jobs or node availability
        self.seq_counter = 0
        self.now = 0.0
        self.heap: list[tuple] = []
        self.pstate = None
        self.shape_count: dict = {}
        self.qstats = QueueStats()
        self.frag_g_seconds = 0.0
        self.whole_waiting = 0
        self.counters = {"passes": 0, "full_passes": 0, "preemption_rounds": 0, "backfill_cap_hits": 0}
        self._elig: dict = {}
        self._served_cache = (None, None)
        self._victims_failed = None       # (job, version, preemptible count) of the last fruitless search
        self._resv_key, self._resv = None, None
        self._head_order = None
        self._room_v, self._room_t, self._room = None, None, {}
        self._caps = any(c is not None for v in self.budgeting.versions for c in v.cap)
        # the fair-share order already leaves funded jobs a borrowing cap holds back out (and hands each job over
        # before anything else starts): a pass re-checks the cap only for the others
        lazy_fs = policy.order_skips_capped and cfg.backfill_order == "queue"
        self.cap_check = [not (lazy_fs and mr != 0) for mr in self.min_rt] if self._caps else None
        self.cap_all = [True] * n if self._caps else None
        self._cap_slots: dict = {}  # an incremental pass's new jobs come from no order
        self.ordered = True   # whether the running pass's jobs come from the queue order (``schedule``)
        self.health = health.Health(self)
        self.pass_fn = self.backfill.pass_for(self)

    def push(self, t, prio, payload) -> None:
        self.seq_counter += 1
        heapq.heappush(self.heap, (t, prio, self.seq_counter, payload))

    # ------------------------------------------------------------------ main loop
    def run(self) -> None:
        if self.cfg.replay == "logged":
            replay.run(self)
            return
        whole_run = self.backfill.whole_run(self)
        if whole_run is not None:
            whole_run(self)
            return
        wl, pool = self.wl, self.pool
        # the request shape decides fit (passes cache failures per shape); "whole" jobs count for fragmentation
        self.shape = list(zip([g[0] for g in wl.group], wl.gang, self.req_g, self.req_c, self.req_m))
        if pool.cluster.procs_mode:
            self.whole = [False] * self.n
        else:
            top = {key: max((pool.cap_g[k] for k in nodes), default=0) for key, nodes, _, _ in pool._groups.values()}
            self.whole = [gg or (g > 0 and g >= top[grp[0]]) for gg, g, grp in zip(wl.gang, self.req_g, wl.group)]
        T = wl.warm_s
        if T is None:
            heap = [(self.submit[i], P_SUBMIT, i, i) for i in range(self.n)]
        else:  # a job pending at the warm start T is eligible from T on (its wait still counts from its submit)
            heap = [(s if s > T else T, P_SUBMIT, i, i) for i, (s, p) in enumerate(zip(self.submit, wl.pinned)) if not p]
        self.seq_counter = self.n
        self.heap = heap
        heapq.heapify(heap)
        if T is not None:
            warm_start.setup(self)
        self.health.schedule_events()
        frag_end = INF if wl.end_s is None else wl.end_s  # fragmentation is measured inside the window
        pop = heapq.heappop
        queue = self.queue
        cycle = self.cfg.sched_interval_s
        main_on_event = cycle and self.cfg.sched_cycle == "backfill"
        tick_at = None           # the pending cycle pass (sched_interval_s > 0)
        full, new = False, []    # with a cycle, what happened since the last pass accumulates until the next one
        while heap:
            t = heap[0][0]
            if self.whole_waiting and self.pool.stranded_g and self.now < frag_end:
                self.frag_g_seconds += ((t if t < frag_end else frag_end) - self.now) * self.pool.stranded_g
            self.now = t
            if not cycle:
                full = False
                new = []
            while heap and heap[0][0] == t:
                _, prio, _, p = pop(heap)
                if prio == P_TICK:
                    tick_at = None
                elif prio == P_SUBMIT:
                    self.enqueue(p)
                    new.append(p)
                elif prio == P_END:
                    j, att = p
                    if self.status[j] == RUNNING and self.attempt[j] == att:
                        self.finish(j, t)
                        full = True
                else:
                    full = self.health.on_event(prio, p, t) or full
            if full:
                self.pstate = None  # even with an empty queue: the saved pass state describes the past
            if cycle:
                due = math.ceil(t / cycle) * cycle
                if due > t:  # not a cycle instant: the pass waits for the next one (each event asks for it once)
                    if len(queue) and tick_at is None:
                        tick_at = due
                        self.push(due, P_TICK, None)
                    if main_on_event and len(queue):
                        self.main_pass(t)
                    continue
            if len(queue):
                if not full and not self.policy.new_jobs_queue_last:
                    full = not self._same_head(t, new)
                self.schedule(t, full, new)
            if cycle:
                full, new = False, []
        if len(queue):  # no event left can start them: say which instead of returning a half-finished run
            ids = [str(self.wl.job_id[j]) for j in sorted(queue.jobs())[:3]]
            raise ConfigError(f"workload: {len(queue)} job(s) can never start (job_id {', '.join(ids)}, ...): "
                              "a budget version in force while they wait caps them below their request")

    def main_pass(self, now) -> None:
        """``sched_cycle="backfill"`` between cycle instants: Slurm's event-triggered main scheduler, which starts
        jobs in queue order up to the first that does not fit and backfills nothing (that waits for the cycle)."""
        self.counters["passes"] += 1
        depth, self.depth = self.depth, 0
        try:
            fn = BACKFILLS["none"].pass_for(self)
            started = fn(self, now, self.queue.order(now), PassState())
        finally:
            self.depth = depth
        for j in started:
            self.dequeue(j)
        self.pstate = None  # the cycle's pass starts afresh: the queue changed under it

    def _same_head(self, now, new) -> bool:
        """A non-FCFS order allows an incremental pass when at most one job arrived behind the same blocked
        head: the jobs between them all failed on the very same free resources and reservation (EASY / none)."""
        pass_state = self.pstate
        if (pass_state is None or len(new) > 1 or self.depth > 1 or pass_state.blocked is None
                or self.status[pass_state.blocked] != QUEUED):
            return False
        order = iter(self.queue.order(now))
        head = next(order, None)
        self._head_order = (now, head, order)  # a full pass at this instant continues this order (same state)
        return head == pass_state.blocked

    def schedule(self, now, full, new) -> None:
        self.counters["passes"] += 1
        ho, self._head_order = self._head_order, None
        if full or self.pstate is None:
            self.counters["full_passes"] += 1
            self.pstate = PassState()
            if ho is not None and ho[0] == now and ho[1] is not None:
                jobs = itertools.chain((ho[1],), ho[2])
            else:
                jobs = self.queue.order(now)
        else:
            jobs = new
        self.ordered = jobs is not new
        started = self.pass_fn(self, now, jobs, self.pstate)
        self.ordered = True
        for j in started:
            self.dequeue(j)
        if self.preempt_on and len(self.queue):
            preempt.rounds(self, now)

    # ------------------------------------------------------------------ queue bookkeeping
    def enqueue(self, j) -> None:
        self.status[j] = QUEUED
        self.queue.add(j)
        self.waits.begin(j, self.now)
        s = self.shape[j]
        self.shape_count[s] = self.shape_count.get(s, 0) + 1
        self.qstats.add(*s)
        if self.whole[j]:
            self.whole_waiting += 1

    def dequeue(self, j) -> None:
        self.queue.remove(j)
        s = self.shape[j]
        self.qstats.remove(*s)
        k = self.shape_count[s] - 1
        if k:
            self.shape_count[s] = k
        else:
            del self.shape_count[s]
        if self.whole[j]:
            self.whole_waiting -= 1

    # ------------------------------------------------------------------ lifecycle
    def start(self, j, now, alloc) -> None:
        """Start (or restart) job j on ``alloc``; the caller removes it from the queue after its pass."""
        self.pool.allocate(alloc)
        self.status[j] = RUNNING
        self.alloc[j] = alloc
        self.att_start[j] = now
        if self.first_start[j] is None:
            self.first_start[j] = now
        self.waits.close(j, now)
        self.seq_counter += 1
        self.start_seq[j] = self.seq_counter
        dur = min(self.rem[j], self.limit_left[j])
        heapq.heappush(self.heap, (now + dur, P_END, self.seq_counter, (j, self.attempt[j])))
        bisect.insort(self.running_by_end, (now + self.limit_left[j], self.seq_counter, j))
        a = self.acct[j]
        h = self.held[a]
        g, c, m = self.req_g[j], self.req_c[j], self.req_m[j]
        h[0] += g
        h[1] += c
        h[2] += m
        if self._caps:
            self._hold_caps(j, g)
        if self.track_usage and self.charge[j]:
            self.ledger.change(a, now, self.charge[j])  # charge is only built for fairshare / drf
        if self.preempt_on:
            preempt.on_start(self, j, now, dur)
        self.version += 1

    def _stop(self, j, now, how, useful=None) -> None:
        self.pool.release(self.alloc[j])
        k = bisect.bisect_left(self.running_by_end, (self.att_start[j] + self.limit_left[j], self.start_seq[j], j))
        del self.running_by_end[k]
        a = self.acct[j]
        h = self.held[a]
        h[0] -= self.req_g[j]
        h[1] -= self.req_c[j]
        h[2] -= self.req_m[j]
        if self._caps:
            self._hold_caps(j, -self.req_g[j])
        if self.track_usage and self.charge[j]:
            self.ledger.change(a, now, -self.charge[j])
        if j in self.preemptible:
            self.preemptible.discard(j)
            groups = self.pool._node_groups
            for n, *_ in self.alloc[j]:
                for k in groups[n]:
                    self.preemptible_in[k].discard(j)
        preempt.on_stop(self, j)
        self.intervals.add(j, self.attempt[j], self.att_start[j], now, self.alloc[j], how, useful, self.start_seq[j])
        self.run_s[j] += now - self.att_start[j]
        self.version += 1

    def finish(self, j, now) -> None:
        self._stop(j, now, "end")
        self.status[j] = DONE
        self.end_time[j] = now
        self.health.after_release(self.alloc[j], now)

    def requeue(self, j, now, cause: str) -> None:
        """Stop a running job and queue it again; work since its last checkpoint is lost."""
        elapsed = now - self.att_start[j]
        ci = self.cfg.checkpoint_interval_s
        saved = math.floor(elapsed / ci) * ci if ci else 0.0
        saved = min(saved, elapsed)
        self._stop(j, now, cause, saved)
        self.rem[j] -= saved
        self.limit_left[j] -= saved
        if cause == "fail":
            self.failures[j] += 1
        else:
            self.preemptions[j] += 1
        if self.burst[j]:
            self.burst_att.add((j, self.attempt[j]))
        if self.reserved[j] is not None and j not in self.reserved_att:
            self.reserved_att[j] = self.attempt[j]  # the first reservation belongs to this attempt's wait
        self.attempt[j] += 1
        released, self.alloc[j] = self.alloc[j], ()
        self.enqueue(j)
        self.health.after_release(released, now)

    def array(self, name, dtype=float):
        """numpy copy of a per-job list attribute, made once (metrics and result share them)."""
        cache = self.__dict__.setdefault("_arrays", {})
        a = cache.get(name)
        if a is None:
            a = cache[name] = np.asarray(getattr(self, name), dtype=dtype)
        return a

    def preempt_add(self, j) -> None:
        self.preemptible.add(j)
        self.preempt_added += 1
        groups = self.pool._node_groups
        for n, *_ in self.alloc[j]:
            for k in groups[n]:
                self.preemptible_in.setdefault(k, set()).add(j)

    # ------------------------------------------------------------------ queries used by passes
    def eligible(self, j) -> frozenset:
        grp = self.group[j]
        e = self._elig.get(grp[0])
        if e is None:
            e = self._elig[grp[0]] = frozenset(grp[1])
        return e

    def cached_reservation(self, j, compute):
        """``compute(self, j)`` (the blocked job's EASY reservation), kept until a node j may use changes.

        The reservation reads the free resources, availability and running jobs' releases on j's eligible nodes
        only (other nodes' releases are skipped), and every change there bumps the group's ``pool.gepoch``: a job
        end elsewhere leaves it valid."""
        key = (j, self.pool.gepoch[self.group[j][0]])
        if self._resv_key != key:
            self._resv_key, self._resv = key, compute(self, j)
        T, limit = self._resv
        return T, (dict(limit) if limit else limit)

    def budgeting_caps(self) -> bool:
        return self._caps

    # borrowing caps (``tenants``): functions of the simulator, bound as methods
    _hold_caps = tenants.hold_caps
    over_cap = tenants.over_cap

    def held_by_bucket(self, ten) -> dict:
        out: dict[int, list] = {}
        for a, name in enumerate(self.accounts):
            h = self.held[a]
            if h[0] or h[1] or h[2]:
                b = ten.bucket[name]
                x = out.setdefault(b, [0, 0, 0])
                x[0] += h[0]
                x[1] += h[1]
                x[2] += h[2]
        return out
