"""Event kinds on the simulator's heap, as their priority: at one instant events apply in this order.

Invariant: job ends come first (their resources are free for everything after), then node repairs, node failures
and drains, min-runtime expiries, submissions, and last the scheduler-cycle tick; ``seq`` keeps insertion order
within a priority.
"""
from __future__ import annotations

P_END, P_REPAIR, P_NODE, P_MINRT, P_SUBMIT, P_TICK = 0, 1, 2, 3, 4, 5
