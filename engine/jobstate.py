"""A job's lifecycle states in the simulator (``Simulator.status``).

Invariant: a job is in exactly one state and moves only forward, NEW -> QUEUED -> RUNNING -> DONE, except that a
requeue (preemption, node failure) sends a RUNNING job back to QUEUED.
"""
from __future__ import annotations

NEW, QUEUED, RUNNING, DONE = 0, 1, 2, 3
