"""Backfill rules: which waiting jobs a scheduling pass may start out of queue order, one module per rule.

``BACKFILLS`` (name -> rule object) is the one registry: ``SimConfig.validated`` checks ``backfill`` against it,
the CLI's ``--backfill`` choices read it, and ``Simulator`` takes its rule from it. Adding a rule is one module
defining a ``BackfillRule`` (its pass function, a ``PassFn``) plus one ``register`` line below (a test may
``register`` its own; ``tests/engine/test_engine_seams.py`` runs a toy one end to end).

Modules: ``none``, ``easy`` (EASY, and its depth-0 case), ``conservative`` (the rules); ``depth_k`` (the
depth-K >= 2 / conservative kernel on free-resource profiles), ``fastpath`` (a whole-run kernel for the
processor-count FCFS replay at depth <= 1, tested equal to the generic path); ``scan`` (candidate order and the
``backfill_max_job_test`` cap) and ``state`` (``PassState``) are shared by the kernels.

Invariants (every pass function ``fn(sim, now, jobs, state) -> started``):
- it examines ``jobs`` in the order given (queue order; backfill candidates in ``backfill_order`` after the first
  blocked job), starts jobs with ``sim.start`` only where they fit their placement, notes a wait reason
  (``sim.waits.note``) for those it examines and does not start, and returns the started jobs (the core dequeues them);
- ``state`` is a fresh ``PassState`` for a full pass, or the last pass's for an incremental one (only new
  submissions in ``jobs``): the result must be what a full pass would give;
- the rule's ``depth`` (reservations per pass: 0 none, 1 EASY, K, unbounded) is ``Simulator.depth``; the
  kernels read it, so ``conservative`` with depth 1 is EASY exactly.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .conservative import Conservative
from .easy import Easy
from .none import NoBackfill
from .state import PassState

PassFn = Callable[..., list]  # (sim, now, jobs: Iterable[int], state: PassState) -> list of started jobs


class BackfillRule(Protocol):
    name: str
    takes_depth: bool  # accepts ``reservation_depth`` (config rejects it otherwise)

    def depth(self, reservation_depth: int | None) -> int:
        """Reservations per pass for this rule under the config's ``reservation_depth``."""

    def pass_for(self, sim) -> PassFn:
        """The pass function for simulator ``sim`` (its mode, caps and depth are known)."""

    def whole_run(self, sim) -> Callable[[object], None] | None:
        """A kernel that runs the whole simulation at once when this case allows one (else None)."""


BACKFILLS: dict[str, BackfillRule] = {}


def register(rule: BackfillRule) -> BackfillRule:
    """Make ``rule`` selectable by its name (config check, CLI choices)."""
    BACKFILLS[rule.name] = rule
    return rule


register(NoBackfill())
register(Easy())
register(Conservative())

__all__ = ["BACKFILLS", "BackfillRule", "PassFn", "PassState", "register"]
