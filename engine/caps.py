"""Budget borrowing caps (``max_gpus`` on a budget node) during a run: what each capped node holds and the room an
account has left under the tightest cap on its path.

``CapLedger`` is the one writer of the capped nodes' ``Tenants.held_g`` tallies: the simulator calls ``hold`` when
a job starts (+GPUs) and stops (-GPUs), in every budget version at once (a version that comes into force later
finds its tallies current). The pass kernels and the preemption search ask ``over(j, now)``.

Invariants:
- ``on`` is False when no version caps any node; then nothing else here is used (the kernels test ``on`` first).
- ``held_g[i]`` of a capped node i = the milli-GPUs requested by the running jobs whose account's path goes
  through i (in that version's tree).
- ``over(j, now)`` <=> starting j now takes some capped node on j's path past its cap, in the version in force
  at ``now``, in integer milli-GPUs: held + g > cap <=> g > floor(cap) - held. The per-account room is memoised
  until a ``hold`` or a new instant, a pure cache: answers never depend on it.
- ``needs(ordered)``: per job, whether a pass must check the cap at all. The fair-share order already leaves
  funded jobs a cap holds back out of its order (``QueuePolicy.order_skips_capped``, with ``backfill_order``
  "queue"), so a pass over that order re-checks only the others; jobs that come from no order (an incremental
  pass's new submissions) are all checked.
"""
from __future__ import annotations

import math


class CapLedger:
    def __init__(self, budgeting, wl, min_rt, policy, cfg):
        self.budgeting = budgeting
        self.acct, self.accounts, self.req_g = wl.acct, wl.accounts, wl.req_g
        self.on = any(c is not None for v in budgeting.versions for c in v.cap)
        lazy = policy.order_skips_capped and cfg.backfill_order == "queue"
        self._check_ordered = [not (lazy and mr != 0) for mr in min_rt] if self.on else None
        self._check_all = [True] * wl.n if self.on else None
        self._slots: dict = {}  # account -> (held list, node) of every capped node on its path, in every version
        self._epoch = 0         # bumps on every hold: the rooms memoised below are stale
        self._room_epoch, self._room_now, self._room = None, None, {}

    def needs(self, ordered: bool) -> list | None:
        """Per job: does a pass over jobs from the queue order (``ordered``) or from no order need the check?"""
        return self._check_ordered if ordered else self._check_all

    def hold(self, j, g) -> None:
        """Add g milli-GPUs (negative: release) to every capped node on j's account path, in every version."""
        a = self.acct[j]
        slots = self._slots.get(a)
        if slots is None:
            name = self.accounts[a]
            slots = self._slots[a] = [(ten.held_g, i) for ten in self.budgeting.versions
                                      for i in ten.capped_chain[ten.bucket[name]]]
        for held, i in slots:
            held[i] += g
        self._epoch += 1

    def over(self, j, now) -> bool:
        """Would starting j at ``now`` take a budget node past its ``max_gpus`` borrowing cap?"""
        if self._room_epoch != self._epoch or self._room_now != now:
            self._room_epoch, self._room_now, self._room = self._epoch, now, {}
        a = self.acct[j]
        room = self._room.get(a)
        if room is None:
            ten = self.budgeting.at(now)
            room = math.inf
            held = ten.held_g
            for i in ten.capped_chain[ten.bucket[self.accounts[a]]]:
                r = ten.cap_floor[i] - held[i]
                if r < room:
                    room = r
            self._room[a] = room
        return self.req_g[j] > room
