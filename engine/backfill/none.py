"""No backfill: start queue heads in order while they fit, and stop at the first job that does not.

It is EASY's kernels at depth 0 (``easy.scalar_pass``/``easy.node_pass`` stop at the first blocked job), so
the rule only chooses them; the processor-count FCFS case runs on ``fastpath``. Waiting jobs' default wait
reason is "priority" (they wait behind the head), not "resources".
"""
from __future__ import annotations

from .easy import kernel
from .fastpath import fast_kernel


class NoBackfill:
    """``backfill="none"``."""
    name = "none"
    takes_depth = False

    def depth(self, reservation_depth: int | None) -> int:
        return 0

    def pass_for(self, sim):
        return kernel(sim)

    def whole_run(self, sim):
        return fast_kernel(sim)
