"""Conservative backfill: every blocked job holds a reservation (depth unbounded, or K with
``reservation_depth``), rebuilt at every full pass on the free-resource profile (kernel: ``depth_k``).

With ``reservation_depth=1`` it is EASY, and runs EASY's kernels (and the fast path where that applies).
"""
from __future__ import annotations

from ..units import UNLIMITED
from .depth_k import profile_pass
from .easy import kernel
from .fastpath import fast_kernel


class Conservative:
    """``backfill="conservative"``."""
    name = "conservative"
    takes_depth = True

    def depth(self, reservation_depth: int | None) -> int:
        return UNLIMITED if reservation_depth is None else reservation_depth

    def pass_for(self, sim):
        return profile_pass if sim.depth >= 2 else kernel(sim)

    def whole_run(self, sim):
        return fast_kernel(sim)
