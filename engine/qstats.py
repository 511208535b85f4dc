"""Per placement group, the smallest request waiting in the queue: lets a pass stop as soon as nothing left in
the queue can possibly fit (a busy cluster's passes would otherwise examine every queued job to no avail).

Invariants:
- ``counts[key]`` holds, per resource (GPUs, CPUs, memory), a value -> number-of-queued-jobs map of the
  single-node requests of that group; ``gangs[key]`` counts its queued gang requests.
- ``nothing_fits(pool)`` is True only when no queued job could be placed now: every single-node request
  exceeds, in some resource, the largest free amount of that resource on any available node of its group
  (a necessary condition for a fit, so the answer is never a false "nothing"), and no group with queued gangs
  has an idle node.
"""
from __future__ import annotations

from .units import INF


class QueueStats:
    def __init__(self):
        self.counts: dict = {}
        self.mins: dict = {}
        self.gangs: dict = {}

    def add(self, key, gang, g, c, m) -> None:
        if gang:
            self.gangs[key] = self.gangs.get(key, 0) + 1
            return
        cs = self.counts.get(key)
        if cs is None:
            cs = self.counts[key] = ({}, {}, {})
            self.mins[key] = [g, c, m]
        mn = self.mins[key]
        for k, v in enumerate((g, c, m)):
            cs[k][v] = cs[k].get(v, 0) + 1
            if v < mn[k]:
                mn[k] = v

    def remove(self, key, gang, g, c, m) -> None:
        if gang:
            self.gangs[key] -= 1
            return
        cs, mn = self.counts[key], self.mins[key]
        for k, v in enumerate((g, c, m)):
            left = cs[k][v] - 1
            if left:
                cs[k][v] = left
            else:
                del cs[k][v]
                if v == mn[k]:
                    mn[k] = min(cs[k]) if cs[k] else INF

    def nothing_fits(self, pool) -> bool:
        groups = pool._groups
        for key, mn in self.mins.items():
            if not self.counts[key][0]:
                continue
            b = pool.bounds(groups[key])
            if mn[0] <= b[0] and mn[1] <= b[1] and mn[2] <= b[2]:
                return False
        for key, k in self.gangs.items():
            if k and pool.bounds(groups[key])[3] + pool.bounds(groups[key])[4] > 0:
                return False
        return True
