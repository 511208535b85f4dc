"""Weighted dominant-resource fairness (DRF): buckets merged flat by dominant share over their fraction.

Invariants: funded jobs come in the order of a merge, flat over buckets, by weighted dominant share
max(gpu, cpu, mem share of the cluster held by the bucket's running + already-emitted jobs) / fraction (ties by
path); jobs whose min runtime is 0 (unallocated occupancy) come after every funded job, in FCFS order.
"""
from __future__ import annotations

import heapq

from ..units import INF
from .buckets import BucketQueue


class DRFQueue(BucketQueue):
    def funded_order(self, now):
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


class DRF:
    """The ``drf`` policy: no usage window; preemption compares dominant shares held now."""
    name = "drf"
    uses_buckets = True
    tracks_usage = False
    dominant_share = True
    new_jobs_queue_last = False
    supports_fastpath = False
    order_skips_capped = False

    def make_queue(self, sim):
        return DRFQueue(sim)
