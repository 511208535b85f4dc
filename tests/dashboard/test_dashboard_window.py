"""The sidebar's default window: the last 30 days up to the newest job, both ends inclusive; on the sample it starts
where the export starts, so its first day is as busy as the rest (no warm-up ramp that reads as a data fault)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

import pytest

import queries
from dashboard import data

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "store"
UTC = dt.timezone.utc


def test_default_window_is_30_days_inclusive():
    opts = SimpleNamespace(first=dt.datetime(2026, 10, 25, 3, tzinfo=UTC), last=dt.datetime(2026, 11, 28, 23, tzinfo=UTC))
    lo, hi = data.default_window(opts)
    assert (lo, hi) == (dt.date(2026, 10, 30), dt.date(2026, 11, 28)) and (hi - lo).days + 1 == 30
    short = SimpleNamespace(first=dt.datetime(2026, 11, 20, tzinfo=UTC), last=opts.last)
    assert data.default_window(short) == (dt.date(2026, 11, 20), dt.date(2026, 11, 28))  # never before the data


def test_the_samples_default_window_has_no_ramp():
    if not (SAMPLE / "_manifest.json").exists():
        pytest.skip(f"sample store not built: {SAMPLE}")
    from queries.store import Store

    jobs = Store(SAMPLE).read("jobs")
    opts = SimpleNamespace(first=jobs["start"].min(), last=max(jobs["end"].max(), jobs["submit"].max()))
    lo, hi = data.default_window(opts)

    def occupancy(day: dt.date, days: int = 1) -> float:
        start = dt.datetime(day.year, day.month, day.day, tzinfo=UTC)
        row = queries.run("metric_pyramid", store=SAMPLE, start=start, end=start + dt.timedelta(days=days))
        return row.filter(row["team"] == "(all)")["occupancy"][0]

    whole = occupancy(lo, (hi - lo).days + 1)
    first = occupancy(lo)
    # the first day is within a few points of the window's mean; the day before it (the old default's first day)
    # is the ramp: only the jobs still running into the export
    assert abs(first - whole) < 0.05, (first, whole)
    assert occupancy(lo - dt.timedelta(days=1)) < whole - 0.15
