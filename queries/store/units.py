"""The store's units and time convention, defined once for every room of ``queries``.

Invariants: every stored timestamp is microseconds in UTC (``UTC_TS``); a timestamp given without a zone
means UTC (``parse_ts``); memory is bytes (``MIB``, ``GIB`` are binary multiples); durations are seconds
(``MIN``, ``HOUR``, ``DAY``).
"""
from __future__ import annotations

import datetime as dt

import polars as pl

UTC = dt.timezone.utc
UTC_TS = pl.Datetime("us", "UTC")
MIB = 1024**2
GIB = 1024**3
MIN, HOUR, DAY = 60, 3600, 86400  # seconds


def parse_ts(v):
    """``v`` (a datetime, a date, an ISO-8601 string, or None) as an aware datetime; no zone means UTC."""
    if v is None or isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day, tzinfo=UTC)
    ts = dt.datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
