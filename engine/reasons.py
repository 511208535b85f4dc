"""Wait reasons: why a queued job did not start, summed per attempt (functions of the simulator, bound as its
methods ``note``, ``_close_reason`` and ``wait_reasons``).

Invariants:
- ``sim.reason[j]`` is the reason job j's current wait holds since ``sim.reason_since[j]``; each attempt starts
  with the simulator's default reason (``Simulator.enqueue``).
- ``sim.reason_acc[key]`` (key: j for a first attempt, else (j, attempt)) sums the seconds spent under each
  reason before the current one; ``note`` with the reason already held changes nothing (the passes rely on it:
  re-noting an unchanged reason is free and invisible).
"""
from __future__ import annotations

REASONS = ("resources", "fragmentation", "reservation", "quota", "priority")


def note(self, j, r) -> None:
    """Job j, examined now, cannot start because of ``r``. The time each attempt's wait spends under each
    reason is summed; the reason held longest is that attempt's ``wait_reason``."""
    old = self.reason[j]
    if old == r:
        return
    d = self.now - self.reason_since[j]
    if d > 0:
        att = self.attempt[j]
        acc = self.reason_acc.setdefault((j, att) if att else j, {})
        acc[old] = acc.get(old, 0.0) + d
    self.reason_since[j] = self.now
    self.reason[j] = r


def close(self, j, now) -> None:
    """Job j starts at ``now``: its current reason's time is added to the attempt's sums."""
    d = now - self.reason_since[j]
    if d > 0:
        att = self.attempt[j]
        acc = self.reason_acc.setdefault((j, att) if att else j, {})
        acc[self.reason[j]] = acc.get(self.reason[j], 0.0) + d


def wait_reasons(self) -> dict:
    """Job j (its first attempt) or (j, attempt) -> the reason that wait held longest (ties: ``REASONS``
    order); absent: no wait."""
    out = {}
    rank = {r: k for k, r in enumerate(REASONS)}
    for key, acc in self.reason_acc.items():
        if len(acc) == 1:  # most waits have one reason
            out[key] = next(iter(acc))
        else:
            out[key] = min(acc, key=lambda r: (-acc[r], rank.get(r, len(rank))))
    return out
