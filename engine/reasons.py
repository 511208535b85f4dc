"""Wait reasons: why a queued job did not start, summed per attempt (``WaitReasons``, the simulator's ``waits``).

Invariants:
- ``reason[j]`` is the reason job j's current wait holds since ``since[j]``; each attempt starts with the
  default reason (``begin``: "priority" without backfill, where jobs wait behind the head, else "resources").
- ``acc[key]`` (key: j for a first attempt, else (j, attempt)) sums the seconds spent under each reason before
  the current one; ``note`` with the reason already held changes nothing (the passes rely on it: re-noting an
  unchanged reason is free and invisible).
- ``now`` is always the simulation clock (the pass's instant); attempts are read from the simulator's
  ``attempt`` list, shared, never written here.
"""
from __future__ import annotations

REASONS = ("resources", "fragmentation", "reservation", "quota", "user_limit", "priority")


class WaitReasons:
    __slots__ = ("reason", "since", "acc", "default", "attempt")

    def __init__(self, n: int, default: str, attempt: list):
        self.reason: list = [None] * n      # current wait reason
        self.since = [0.0] * n              # ... held since
        self.acc: dict = {}                 # (j | (j, attempt)) -> {reason: seconds before the current one}
        self.default = default
        self.attempt = attempt

    def begin(self, j, now) -> None:
        """Job j starts waiting (a submission or a requeue): every attempt's wait has its own reasons."""
        self.reason[j] = self.default
        self.since[j] = now

    def note(self, j, r, now) -> None:
        """Job j, examined at ``now``, cannot start because of ``r``. The time each attempt's wait spends under
        each reason is summed; the reason held longest is that attempt's ``wait_reason``."""
        old = self.reason[j]
        if old == r:
            return
        d = now - self.since[j]
        if d > 0:
            att = self.attempt[j]
            acc = self.acc.setdefault((j, att) if att else j, {})
            acc[old] = acc.get(old, 0.0) + d
        self.since[j] = now
        self.reason[j] = r

    def close(self, j, now) -> None:
        """Job j starts at ``now``: its current reason's time is added to the attempt's sums."""
        d = now - self.since[j]
        if d > 0:
            att = self.attempt[j]
            acc = self.acc.setdefault((j, att) if att else j, {})
            acc[self.reason[j]] = acc.get(self.reason[j], 0.0) + d

    def longest(self) -> dict:
        """Job j (its first attempt) or (j, attempt) -> the reason that wait held longest (ties: ``REASONS``
        order); absent: no wait."""
        out = {}
        rank = {r: k for k, r in enumerate(REASONS)}
        for key, acc in self.acc.items():
            if len(acc) == 1:  # most waits have one reason
                out[key] = next(iter(acc))
            else:
                out[key] = min(acc, key=lambda r: (-acc[r], rank.get(r, len(rank))))
        return out
