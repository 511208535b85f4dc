"""Priority: higher ``priority`` first (the log's priority column, else the QoS rank), then FCFS.

Invariant: jobs of equal priority keep index (submit, job id) order.
"""
from __future__ import annotations

import bisect


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


class Priority:
    """The ``priority`` policy: each job's priority is its logged one, else ``qos_priority`` of its QoS."""
    name = "priority"
    uses_buckets = False
    tracks_usage = False
    dominant_share = False
    new_jobs_queue_last = False
    supports_fastpath = False
    order_skips_capped = False

    def make_queue(self, sim):
        qp = sim.cfg.qos_priority
        prio = [p if p is not None else float(qp.get(q, 0.0)) for p, q in zip(sim.wl.prio, sim.wl.qos)]
        return PriorityQueue(prio)
