"""Plausibility limits every job-log format enforces: a value beyond them is a unit error or corrupt input,
never a real job, so the row holding it is rejected (with the field and the value) instead of stored.

The limits also keep every accepted value inside what the store's types hold: a count fits an ``Int32``, a
time in seconds a microsecond timestamp, an id an ``Int64``, so no later cast can overflow and take the
whole file down with it.
"""
from __future__ import annotations

MAX_COUNT = 1e6                      # CPUs, GPUs, nodes or tasks of one job or node
MAX_BYTES = float(2**60)             # 1 EiB of memory in one job or node
MAX_SECONDS = 100 * 365 * 86400.0    # a duration, or a time offset from a trace's start
MAX_EPOCH_S = 1e11                   # epoch seconds: beyond year 5138 (and near a microsecond timestamp's end)
MAX_ID = 1e15                        # a numeric job, user, group or application id
