"""Multifactor priority (Slurm's priority/multifactor): a weighted sum of age, job size and fair share, highest first.

For a queued job j at time ``now`` (the weights and the two durations are ``SimConfig.priority_*``):

    priority(j) = w_age x min(now - submit_j, max_age) / max_age
                + w_size x size_j / capacity                      (negative w_size favours small jobs)
                + w_fairshare x 2 ** (-N x usage_a / total_usage)  (1 for every account while nobody used anything)

where size and capacity are in the cluster's charge resource (GPUs, else CPUs / processors), N is the number of
accounts in the workload (equal shares: a log states none), and usage_a is what account a's jobs held over the
last ``lookback_s``: the sum of size x time each of its jobs ran inside [now - lookback, now], counting the jobs a
warm start pinned (they ran as logged) and every job this run started.

Invariants:
- equal priorities keep index (submit, job id) order, so with the default weights (age only) the order is FCFS
  (ages grow at the same rate; jobs past ``max_age`` tie and fall back to index order);
- the age term uses ``now`` exactly; the fair-share term is recomputed at most every ``priority_calc_period_s``
  (Slurm's PriorityCalcPeriod, default 300 s), at the first pass at or after each period, so a run's order
  depends only on the pass instants, not on the wall clock;
- the order is computed afresh each pass (ages change it), so new submissions may overtake queued jobs
  (``new_jobs_queue_last`` False) and the processor-count fast path does not apply.

The policy reads only the simulator's per-job arrays (submit, requests, status, attempt start, end) and its
configuration: nothing in the event loop knows it exists.
"""
from __future__ import annotations

from ..jobstate import DONE, QUEUED, RUNNING


class MultifactorQueue:
    def __init__(self, sim):
        cfg = sim.cfg
        self.sim = sim
        self.w_age, self.w_size, self.w_fs = (cfg.priority_weight_age, cfg.priority_weight_size,
                                              cfg.priority_weight_fairshare)
        self.max_age = cfg.priority_max_age_s
        self.period = cfg.priority_calc_period_s
        self.lookback = cfg.lookback_s
        gpus = sim.pool.cluster.charge_resource == "gpus"
        self.size = sim.req_g if gpus else sim.req_c
        cap = sim.capacity[0] if gpus else sim.capacity[1]
        self.size_term = [self.w_size * s / cap for s in self.size] if cap and self.w_size else None
        self.members: set[int] = set()
        self.started: dict[int, None] = {}   # jobs that ran or run (insertion order: deterministic sums)
        self.seeded = False
        self.fs: list[float] | None = None   # per account: w_fairshare x factor, as of ``fs_at``
        self.fs_at = None

    def __len__(self):
        return len(self.members)

    def __contains__(self, j):
        return j in self.members

    def add(self, j):
        self.members.add(j)

    def remove(self, j):
        self.members.discard(j)
        if self.w_fs:
            self.started[j] = None

    def jobs(self):
        return self.members

    def _fairshare(self, now) -> list[float]:
        sim = self.sim
        if not self.seeded:  # the jobs a warm start pinned ran without passing through the queue
            self.seeded = True
            for j in range(sim.n):
                if sim.status[j] in (RUNNING, DONE) and j not in self.members:
                    self.started[j] = None
        if self.fs is not None and now < self.fs_at + self.period:
            return self.fs
        lo = now - self.lookback
        usage = [0.0] * len(sim.accounts)
        status, start, end, size, acct = sim.status, sim.att_start, sim.end_time, self.size, sim.acct
        gone = []
        for j in self.started:
            st = status[j]
            if st == RUNNING:
                e = now
            elif st == DONE:
                e = end[j]
            else:  # requeued (QUEUED) or not started: its earlier attempt's time is not tracked
                if st != QUEUED:
                    gone.append(j)
                continue
            if e <= lo:
                gone.append(j)
                continue
            s = start[j]
            usage[acct[j]] += size[j] * (e - (s if s > lo else lo))
        for j in gone:
            del self.started[j]
        total = sum(usage)
        n = len(usage)
        self.fs = ([self.w_fs * 2.0 ** (-n * u / total) for u in usage] if total > 0
                   else [self.w_fs] * n)
        self.fs_at = now
        return self.fs

    def order(self, now):
        sim = self.sim
        submit, max_age, w_age = sim.submit, self.max_age, self.w_age
        fs = self._fairshare(now) if self.w_fs else None
        size_term, acct = self.size_term, sim.acct
        keys = []
        for j in self.members:
            age = now - submit[j]
            p = w_age * (age if age < max_age else max_age) / max_age
            if size_term is not None:
                p += size_term[j]
            if fs is not None:
                p += fs[acct[j]]
            keys.append((-p, j))
        keys.sort()
        return (j for _, j in keys)


class Multifactor:
    """The ``multifactor`` policy (weights: ``SimConfig.priority_weight_age|size|fairshare``)."""
    name = "multifactor"
    uses_buckets = False
    tracks_usage = False       # it keeps its own usage tally: the simulator's ledger is for budget buckets
    dominant_share = False
    new_jobs_queue_last = False
    supports_fastpath = False
    order_skips_capped = False

    def make_queue(self, sim):
        return MultifactorQueue(sim)
