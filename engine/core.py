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

Cost per event (one pass per event instant): fair share with borrowing caps walks, per pass, the tree descents
to the buckets it offers (O(depth x width) each), per visited capped bucket its request classes (O(accounts x
classes x log queue)), the jobs it hands to the backfill scan or its hint (stopped early by the scan's failed
shapes and ``qstats.nothing_fits``), and the held-back jobs not yet noted "quota" since they were queued or last
handed over (each once), sorted: never the whole backlog a cap holds back (``policies.buckets`` class index;
before it, every pass walked every queued job of every capped bucket, O(queue)). Enqueue / dequeue add O(class
size) list moves (``bisect``). The index is adaptive (``BucketQueue.adapt``): it is kept only while the passes
pass, on average, at least ``buckets.INDEX_FROM`` held-back jobs each (decided every ``INDEX_EVERY`` passes, dropped
below ``INDEX_UNTIL``); without it a pass walks the held-back jobs it meets, fewer than ``INDEX_FROM`` per pass on
average (a constant), and enqueue / dequeue pay nothing for it; building it reads the queue once, O(queue), at
most once per ``INDEX_EVERY`` passes. ``tests/benchmarks/bench_engine_scale.py`` (backlog growth) shows the time per pass
about flat as the capped backlog grows 10x. Not covered: the other orders (FCFS, priority, multifactor, DRF)
still test every capped job against its cap at every pass, and jobs whose request shape already failed in the
pass (fits no node group now) are skipped per shape by the scan's hint but still visited: O(queue) cheap visits
per full pass in the compiled walk, 75 % of all visits on 8,192 GPUs (README, "Speed of the simulator").
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import math

import numpy as np

from . import health, min_runtime, preempt, reasons, replay, warm_start
from .backfill import BACKFILLS, PassState
from .caps import CapLedger
from .config import ConfigError
from .events import P_END, P_SUBMIT, P_TICK
from .intervals import Intervals
from .jobstate import DONE, NEW, QUEUED, RUNNING
from .policies import POLICIES
from .qstats import QueueStats
from .pool import Pool
from .tenants import Budgeting, Ledger
from .units import INF, UNLIMITED
from .user_limits import UserLedger



class Simulator:
    """One run's state, in groups. This class is the only writer of its attributes (checked by
    ``tests/architecture/test_engine_state.py``); each seam's object owns and writes its own group:

    - the inputs: ``wl`` (``workload.Workload``), ``pool`` (free resources per node and group, ``pool.Pool``),
      ``cfg``, the chosen ``policy`` and ``backfill`` rule (registries ``policies``/``backfill``), ``depth``;
    - the queue: ``queue`` (the policy's), ``pstate`` (the last pass's ``backfill.state.PassState``), the
      request-shape tallies ``shape``/``shape_count``/``qstats``/``whole_waiting``;
    - per job, by index: ``status`` (``jobstate``), ``rem``/``limit_left`` (run time and limit left), ``alloc``,
      ``att_start``/``first_start``/``end_time``/``start_seq``/``attempt``, ``reserved`` (the first reservation),
      ``preemptions``/``failures``, ``run_s``;
    - the running set: ``running_by_end`` (estimated end, seq, job), ``version`` (bumps on every change);
    - usage tallies: ``held`` per account, ``ledger`` (window usage, ``tenants.Ledger``), ``charge`` (bucket
      policies);
    - owned by the seams: ``caps`` (``caps.CapLedger``: borrowing caps), ``users`` (``user_limits.UserLedger``:
      per-user running limits), ``preempting`` (``preempt.PreemptState``:
      victims, burst, guaranteed tallies, memos), ``health`` (``health.Health``: node events), ``waits``
      (``reasons.WaitReasons``: wait reasons per attempt), ``intervals`` (the attempts' log);
    - ``counters``: the run's tallies (passes, preemption rounds, backfill cap hits), the one group any kernel
      may bump.

    Writers from outside go through methods: the pass kernels (``backfill``) start jobs with ``start`` and record
    a reservation with ``note_reservation``; ``preempt`` requeues with ``requeue``, starts with ``start`` and
    re-plans with ``replan``; ``health`` requeues and calls ``set_node_available``; ``replay`` and ``warm_start``
    pin logged jobs with ``pin_start``/``pin_done``/``pin_running``/``charge_as_logged`` before the first event;
    a whole-run kernel (``backfill.fastpath``) fills the per-job lists it was handed in place (an inlined twin of
    ``start``/``finish``, tested equal) and reports the rest with ``adopt_whole_run``.
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
        self.preemptions = [0] * n
        self.failures = [0] * n
        self.run_s = [0.0] * n
        self.killed = [False] * n         # ended without requeue by a node failure (no-requeue mode unused)
        self.intervals = Intervals()
        self.running_by_end: list[tuple] = []
        self.held = [[0, 0, 0] for _ in wl.accounts]  # account -> running (g, c, m)
        self.ledger = Ledger(len(wl.accounts), cfg.lookback_s)
        self.track_usage = policy.tracks_usage
        self.queue = policy.make_queue(self)
        self._touch = getattr(self.queue, "touch", None)  # optional: jobs a pass examines outside the order
        self.depth = cfg.depth
        self.waits = reasons.WaitReasons(n, "priority" if self.depth == 0 else "resources", self.attempt)
        self.preempting = preempt.PreemptState(self)
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
        self.warm_stats, self.warm_moved = None, set()  # a warm start's counts, and pinned jobs it had to move
        self._elig: dict = {}
        self._resv_key, self._resv = None, None
        self._pass_bindings = None  # the EASY node pass's per-run bindings (``pass_bindings``)
        self._head_order = None
        self.caps = CapLedger(self.budgeting, wl, self.min_rt, policy, cfg)
        self.users = UserLedger(wl, cfg)  # per-user running limits (off: nothing reads it)
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
            self.now = T
            self.warm_stats, self.warm_moved = warm_start.setup(self)
            self.version += 1
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
            if self._touch is not None:
                self._touch(new)
        self.ordered = jobs is not new
        started = self.pass_fn(self, now, jobs, self.pstate)
        self.ordered = True
        for j in started:
            self.dequeue(j)
        if self.preempting.on and len(self.queue):
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
        if self.caps.on:
            self.caps.hold(j, g)
        if self.users.on:
            self.users.hold(j, 1)
        if self.track_usage and self.charge[j]:
            self.ledger.change(a, now, self.charge[j])  # charge is only built for fairshare / drf
        if self.preempting.on:
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
        if self.caps.on:
            self.caps.hold(j, -self.req_g[j])
        if self.users.on:
            self.users.hold(j, -1)
        if self.track_usage and self.charge[j]:
            self.ledger.change(a, now, -self.charge[j])
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
        preempt.on_requeue(self, j)
        if self.reserved[j] is not None and j not in self.reserved_att:
            self.reserved_att[j] = self.attempt[j]  # the first reservation belongs to this attempt's wait
        self.attempt[j] += 1
        released, self.alloc[j] = self.alloc[j], ()
        self.enqueue(j)
        self.health.after_release(released, now)

    def note_reservation(self, j, t) -> None:
        """j's first reservation is part of the output (``reserved``); later ones are not recorded."""
        if self.reserved[j] is None:
            self.reserved[j] = t

    def set_node_available(self, n, up: bool) -> None:
        """Node n comes back (``up``) or stops taking work (``health``: a failure or drain)."""
        self.pool.set_avail(n, up)
        self.version += 1

    def change_capacity(self, units) -> None:
        """Processor-count mode: ``units`` drained (< 0) or back (> 0) (``health``, ``engine.capacity``)."""
        if units < 0:
            self.pool.drain_units(-units)
        else:
            self.pool.return_units(units)
        self.version += 1

    def replan(self, now) -> None:
        """A full pass at ``now`` from a fresh pass state (after a preemption changed the running set)."""
        self.pstate = PassState()
        for j in self.pass_fn(self, now, self.queue.order(now), self.pstate):
            self.dequeue(j)

    # ------------------------------------------------------------------ logged history (replay, warm start)
    def pin_start(self, j, start_s) -> None:
        """j started at ``start_s`` in the log: its first start and its place in the start sequence."""
        self.seq_counter += 1
        self.start_seq[j] = self.seq_counter
        self.first_start[j] = self.att_start[j] = start_s

    def pin_done(self, j, alloc, end_s, run_s) -> None:
        """j (pinned by ``pin_start``) ran ``run_s`` on ``alloc`` and ended at ``end_s``, as logged."""
        self.alloc[j] = alloc
        self.end_time[j] = end_s
        self.run_s[j] = run_s
        self.status[j] = DONE

    def pin_running(self, j, start_s, end_s, run_s, alloc) -> None:
        """j (pinned by ``pin_start``) runs [start_s, end_s) on ``alloc``, allocated at the warm start ``now``;
        it ends by an ordinary end event (``finish``)."""
        T = self.now
        self.pool.allocate(alloc)
        self.status[j] = RUNNING
        self.alloc[j] = alloc
        limit = self.limit[j]
        if limit is None or limit != limit or limit <= 0:
            limit = run_s
        # the scheduler's estimate of its end: logged start + limit, or "any moment now" if that has passed
        self.limit_left[j] = max(start_s + limit, T) - start_s
        self.rem[j] = run_s
        heapq.heappush(self.heap, (end_s, P_END, self.start_seq[j], (j, 0)))
        bisect.insort(self.running_by_end, (start_s + self.limit_left[j], self.start_seq[j], j))
        h = self.held[self.acct[j]]
        h[0] += self.req_g[j]
        h[1] += self.req_c[j]
        h[2] += self.req_m[j]
        if self.caps.on:
            self.caps.hold(j, self.req_g[j])
        if self.users.on:  # a job running at the warm start counts against its user
            self.users.hold(j, 1)
        preempt.on_pin(self, j, T)

    def charge_as_logged(self, j, g, c) -> None:
        """A pinned job is charged by what it held in the log (milli-GPUs g, milli-CPUs c); unfunded work stays free."""
        if self.charge is not None:
            res = self.pool.cluster.charge_resource
            self.charge[j] = 0.0 if self.min_rt[j] == 0 else (g if res == "gpus" else c) / 1000.0

    def adopt_whole_run(self, now, seq, passes, full_passes, start_s, end_s) -> None:
        """A whole-run kernel (``backfill.fastpath``) finished at ``now``: its tallies, and the start / end times
        it produced as arrays (it wrote the per-job lists in place)."""
        self.now = now
        self.seq_counter = seq
        self.counters["passes"] += passes
        self.counters["full_passes"] += full_passes
        self.__dict__.setdefault("_arrays", {}).update(first_start=start_s, end_time=end_s)
        self.run_s = end_s - start_s

    def array(self, name, dtype=float):
        """numpy copy of a per-job list attribute, made once (metrics and result share them)."""
        cache = self.__dict__.setdefault("_arrays", {})
        a = cache.get(name)
        if a is None:
            a = cache[name] = np.asarray(getattr(self, name), dtype=dtype)
        return a

    # ------------------------------------------------------------------ queries used by passes
    def eligible(self, j) -> frozenset:
        grp = self.group[j]
        e = self._elig.get(grp[0])
        if e is None:
            e = self._elig[grp[0]] = frozenset(grp[1])
        return e

    def pass_bindings(self, build):
        """The node pass's bindings for this run (``backfill.easy.PassBindings``), built by ``build(self)`` at the
        first pass that asks (``self.shape`` exists from ``run`` on) and kept for the run's later passes."""
        b = self._pass_bindings
        if b is None:
            b = self._pass_bindings = build(self)
        return b

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
