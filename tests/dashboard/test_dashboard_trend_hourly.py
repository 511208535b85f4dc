"""The Overview's daily waste trend summed from the hourly gap series equals the daily gap_area's, on the
fixture store and the sample store, for windows of whole days, windows cutting hours and open windows."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dashboard_fixture as fx
from dashboard import data
from dashboard.data import analytics

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "store"


def _daily_path(flt, res: str, bucket_s: float) -> pl.DataFrame:
    """The old path: one gap_area at the trend's own bucket."""
    return analytics.wasted_per_bucket(data.gap_series(flt, res, by=None, bucket_s=bucket_s), bucket_s)


def _check(flt, res: str, bucket_s: float = 86400.0) -> pl.DataFrame:
    new = data.waste_trend(flt, res, bucket_s=bucket_s)
    old = _daily_path(flt, res, bucket_s)
    assert new.schema == old.schema
    assert_frame_equal(new, old, check_exact=False, rel_tol=1e-9, abs_tol=1e-6)
    return new


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_hand_checkable_day(tmp_path, monkeypatch):
    """One fixture day, GPUs only: the summed hours give each day's waste as the fixture defines it."""
    root = fx.build(tmp_path / "store")
    monkeypatch.setenv("QUOTALOOP_STORE", str(root))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    flt = data.Filters(fx.T0, fx.T0 + dt.timedelta(days=fx.DAYS))
    trend = _check(flt, "gpu")
    assert trend.height == fx.DAYS  # one row per day of the window, every day present
    # the total over the window is the overview's (job_waste's) wasted GPU-hours
    assert trend["wasted_hours"].sum() == pytest.approx(data.overview_totals(flt)["gpu_wasted_h"], rel=1e-9)


@pytest.mark.parametrize("window", ["days", "cut_hours", "open", "open_end"])
@pytest.mark.parametrize("res", ["gpu", "cpu", "mem"])
def test_fixture_windows(tmp_path_factory, monkeypatch, window, res):
    root = fx.build(tmp_path_factory.mktemp("trend"))
    monkeypatch.setenv("QUOTALOOP_STORE", str(root))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    start, end = {"days": (fx.T0 - dt.timedelta(days=1), fx.T0 + dt.timedelta(days=2)),
                  "cut_hours": (fx.T0 + dt.timedelta(hours=5, minutes=30), fx.T0 + dt.timedelta(days=1, hours=7)),
                  "open": (None, None),
                  "open_end": (fx.T0 + dt.timedelta(hours=13), None)}[window]
    _check(data.Filters(start, end), res)
    _check(data.Filters(start, end), res, bucket_s=6 * 3600.0)


@pytest.mark.skipif(not (SAMPLE / "_manifest.json").exists(), reason="no sample store (sample_data/store)")
def test_sample_store_default_window(monkeypatch):
    from dashboard.data.prewarm import default_window, window_filters
    monkeypatch.setenv("QUOTALOOP_STORE", str(SAMPLE))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    flt = window_filters(default_window(data.options()))
    trend = _check(flt, data.resource(flt))
    assert trend.height == (flt.end - flt.start).days and trend["wasted_hours"].drop_nulls().len() > 0
