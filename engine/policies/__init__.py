"""Queue policies: the order in which a scheduling pass examines waiting jobs, one module per policy.

``POLICIES`` (name -> policy object) is the one registry: ``SimConfig.validated`` checks ``policy`` against it,
the CLI's ``--policy`` choices and the Fair share page's list read it, and ``Simulator`` takes its policy from it.
Adding a policy is one module defining a ``QueuePolicy`` (and its ``Queue``) plus one ``register`` line below
(a test may ``register`` its own; ``tests/engine/test_engine_seams.py`` runs a toy one end to end).

Invariants (every queue):
- a queue holds waiting job indices; job index order is (submit, job id) order;
- ``order(now)`` yields the queued jobs in policy order; a pass may stop consuming it at any point (orders may
  be generated lazily) and adds or removes no job while it iterates: it removes the jobs it started afterwards;
- the simulator asks a policy only through the ``QueuePolicy`` attributes below, never by its name.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from .drf import DRF
from .fairshare import FairShare
from .fcfs import FCFS
from .multifactor import Multifactor
from .priority import Priority


class Queue(Protocol):
    """The waiting jobs of one run, as the simulator uses them."""

    def __len__(self) -> int: ...

    def __contains__(self, j: int) -> bool: ...

    def add(self, j: int) -> None:
        """Job j (newly submitted or requeued) waits."""

    def remove(self, j: int) -> None:
        """Job j started (the pass removes it after it is done iterating ``order``)."""

    def order(self, now: float) -> Iterator[int]:
        """The queued jobs in policy order at simulated time ``now``."""

    def jobs(self) -> Iterable[int]:
        """The queued jobs, in no particular order."""

    # Optional: ``touch(jobs)``, called with the jobs a pass examines outside ``order`` (an incremental pass's new
    # submissions), for a queue that keeps facts about its jobs' wait reasons (``buckets.BucketQueue``).
    # Optional: a queue with a ``hint`` attribute (None between passes) lets an EASY pass install its scan hint,
    # a function j -> failure reason (skip j), False (stop) or None (hand j over); see ``backfill.easy``.


class QueuePolicy(Protocol):
    """A policy: how to build its queue, and the traits the simulator's other parts act on."""

    name: str
    uses_buckets: bool          # orders by budget buckets: jobs are charged, preemption compares served ratios
    tracks_usage: bool          # needs the lookback window usage ledger (fair share's key)
    dominant_share: bool        # "served" is the dominant share held now (DRF), not window usage
    new_jobs_queue_last: bool   # a new submission never overtakes a queued job: incremental passes always hold
    supports_fastpath: bool     # the processor-count fast kernel implements this order (FCFS only)
    order_skips_capped: bool    # the order itself leaves funded jobs a borrowing cap holds back out

    def make_queue(self, sim) -> Queue:
        """An empty queue for simulator ``sim`` (it may read the workload and config through it)."""


POLICIES: dict[str, QueuePolicy] = {}


def register(policy: QueuePolicy) -> QueuePolicy:
    """Make ``policy`` selectable by its name (config check, CLI choices, the Fair share page)."""
    POLICIES[policy.name] = policy
    return policy


register(FCFS())
register(Priority())
register(FairShare())
register(DRF())
register(Multifactor())
