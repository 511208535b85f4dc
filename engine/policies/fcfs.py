"""First come, first served: job index order, i.e. submit time then job id.

Invariant: a requeued job goes back to its original place; new submissions queue last (so a pass over only the
new jobs continues the last one exactly, and the processor-count fast path applies).
"""
from __future__ import annotations


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


class FCFS:
    """The ``fcfs`` policy."""
    name = "fcfs"
    uses_buckets = False
    tracks_usage = False
    dominant_share = False
    new_jobs_queue_last = True
    supports_fastpath = True
    order_skips_capped = False

    def make_queue(self, sim):
        return FCFSQueue()
