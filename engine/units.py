"""The engine's shared constants, defined once: unbounded quantities, the UTC epoch.

Invariants: ``UNLIMITED`` stands for "no limit" in integer resource units (a node without a memory figure holds
``UNLIMITED`` MiB; sums over capacities cap each term at it); ``INF`` is the float "never" of simulated time.
"""
from __future__ import annotations

import datetime as dt
import math

INF = math.inf
UNLIMITED = 1 << 60
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
