"""The state one scheduling pass leaves for the incremental passes continuing it (``Simulator.pstate``).

Invariant: a fresh ``PassState`` is a full pass's start; an incremental pass (only new submissions examined)
continues the saved one, and gives what a full pass would (see ``backfill``).
"""
from __future__ import annotations

from ..units import INF


class PassState:
    __slots__ = ("blocked", "stopped", "T", "extra", "limit", "failed", "n_failed_short", "profile", "nres",
                 "now", "lower", "tested")

    def __init__(self):
        self.blocked = None
        self.stopped = False
        self.T = INF
        self.extra = 0
        self.limit = None
        self.failed = {}
        self.n_failed_short = 0
        self.profile = None
        self.lower = None  # depth_k: request shape -> earliest-start lower bounds by duration
        self.nres = 0
        self.tested = 0    # backfill candidates examined so far (``backfill_max_job_test``)
        self.now = None
