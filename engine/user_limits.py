"""Per-user running limits during a run (``SimConfig.max_running_jobs_per_user``; Maui's MAXJOB, Slurm's
``MaxJobsPerUser`` on a QOS or association): a job whose user already runs L jobs does not start, in the main
pass or by backfill, and waits with the reason "user_limit" (Slurm's ``QOSMaxJobsPerUserLimit``).

``UserLedger`` is the one writer of the per-user running counts: the simulator calls ``hold`` when a job starts
(+1), stops (-1: an end, a requeue by preemption or a node failure) or is pinned running at a warm start (+1).
The pass kernels (``backfill``) and the preemption search (``preempt.rounds``) ask ``over(j)`` before placing j.

Invariants:
- ``on`` is False when the limit is 0; then nothing else here is used (callers test ``on`` first) and every
  output is byte-identical to a build without the limit (the fast path, ``backfill.fastpath``, runs only then).
- ``running[u]`` = the number of user u's jobs running now; ``over(j)`` <=> ``running[user of j] >= limit``.
- A job whose ``user`` is null (or a workload without the column) belongs to no user and is never limited.
- Like a borrowing cap, a limited job is not eligible: it never becomes a pass's blocked job, so it takes no
  reservation (Slurm's backfill skips jobs held by a limit). Counts only grow between two full passes (an end
  or requeue makes the next pass full), so an incremental pass may keep skipping the jobs an earlier one skipped.
"""
from __future__ import annotations

REASON = "user_limit"


class UserLedger:
    __slots__ = ("limit", "on", "user", "running")

    def __init__(self, wl, cfg):
        self.limit = int(cfg.max_running_jobs_per_user or 0)
        self.on = self.limit > 0
        self.user: list = []
        self.running: list = []
        if not self.on:
            return
        frame = wl.frame
        names = frame["user"].to_list() if "user" in frame.columns else [None] * frame.height
        index: dict = {}
        for name in names:
            if name is not None and name not in index:  # a user id of any type: equal ids are one user
                index[name] = len(index)
        self.user = [-1 if name is None else index[name] for name in names]
        self.running = [0] * len(index)

    def hold(self, j, k: int) -> None:
        """Job j starts (k = +1) or stops (k = -1)."""
        u = self.user[j]
        if u >= 0:
            self.running[u] += k

    def over(self, j) -> bool:
        """Would starting j take its user past the limit?"""
        u = self.user[j]
        return u >= 0 and self.running[u] >= self.limit
