"""Page defaults, and warming the shared caches with every page's default view.

On a big store the first render of a page is query-bound (a 30-day window of a 10M-job store takes tens of
seconds per page; the dashboard adds little on top, see README "Benchmarks"). ``quotaloop serve`` therefore
runs ``warm()`` in a background thread as soon as the server is up (``dashboard/server.py``), so the first
visitor finds the default views in the cache. The caches are ``st.cache_data`` (process-wide, shared by every
session), keyed by the store's manifest token: a new ingest invalidates them and the next visitor recomputes.

Invariant: the defaults here are the ones the pages use (the pages call these functions), so a warmed cache is
a hit for a fresh session's first render of every page (tests/dashboard/test_dashboard_warm.py records zero queries).
Per-viewer views (a researcher's own jobs) are warmed only for the admin's default user; the user-independent
parts of them (rankings, back-test) are warmed for everybody.
"""
from __future__ import annotations

import datetime as dt
import time
from datetime import UTC

from dashboard.shaping import default_user

from .analytics import (gantt_rows, gap_series, job_waste, layout_at, low_efficiency_jobs, occupancy_series,
                        overview_totals, quota_backtest, resource, score_drivers, team_depth, team_ranking,
                        user_ranking, waste_by, waste_trend)
from .query_cache import Filters, NotAvailable, options, query, store_token

BUCKETS_S = {900: "15 min", 3600: "1 hour", 6 * 3600: "6 hours", 86400: "1 day"}
GANTT_SPAN_H = 24


DEFAULT_WINDOW_DAYS = 30


def default_window(opts) -> tuple[dt.date, dt.date]:
    """The sidebar's window on a fresh session: the last 30 days up to the store's newest event, both ends
    inclusive (30 days, not 31: one more day reaches before an export's first day, where only the jobs still
    running into the export appear: on the sample a 67 % "ramp" day before steady 90 % occupancy)."""
    last = opts.last.date() if opts.last else dt.datetime.now(UTC).date()
    first = opts.first.date() if opts.first else last - dt.timedelta(days=6)
    return max(first, last - dt.timedelta(days=DEFAULT_WINDOW_DAYS - 1)), last


def window_filters(window: tuple[dt.date, dt.date] | None, **others) -> Filters:
    """Filters of a sidebar window (both days inclusive; ``end`` exclusive)."""
    if not window:
        return Filters(None, None, **others)
    first, last = window[0], window[-1]
    start = dt.datetime(first.year, first.month, first.day, tzinfo=UTC)
    end = dt.datetime(last.year, last.month, last.day, tzinfo=UTC) + dt.timedelta(days=1)
    return Filters(start, end, **others)


def default_bucket_s(flt: Filters) -> int:
    """The Waste explorer's bucket for a window: about 100-700 points per curve."""
    span_days = (flt.end - flt.start).days if flt.start and flt.end else 7
    return 900 if span_days <= 2 else 3600 if span_days <= 10 else 6 * 3600


def layout_range(flt: Filters, opts) -> tuple[dt.datetime, dt.datetime]:
    """The Cluster layout's time slider range (naive UTC, whole hours): the window, up to the last event."""
    lo = flt.start.replace(tzinfo=None)
    hi = (min(flt.end, opts.last or flt.end)).replace(tzinfo=None, minute=0, second=0, microsecond=0)
    return lo, max(hi, lo + dt.timedelta(hours=1))


def default_layout_at(flt: Filters, opts) -> dt.datetime:
    lo, hi = layout_range(flt, opts)
    return (lo + (hi - lo) / 2).replace(minute=0, second=0, microsecond=0)


def gantt_span(flt: Filters, at_utc: dt.datetime, span_h: float) -> tuple[dt.datetime, dt.datetime]:
    return (max(flt.start, at_utc - dt.timedelta(hours=span_h / 2)),
            min(flt.end, at_utc + dt.timedelta(hours=span_h / 2)))


def warm(log=None) -> dict[str, float]:
    """Compute every page's default view into the caches; seconds per page. Never raises (a page that cannot
    be warmed is computed by its first visitor, who then sees the page's own message)."""
    opts = options()
    if not opts.jobs:
        return {}
    flt = window_filters(default_window(opts))
    depth = team_depth(opts)
    at = default_layout_at(flt, opts).replace(tzinfo=UTC)
    try:
        res = resource(flt)  # GPU-hours, or core-hours where the window has no GPUs: what the pages open on
        # the user an admin's My jobs opens on (no viewer at start-up: the largest footprint in the window)
        first_user = default_user(user_ranking(flt), None)
    except Exception as exc:  # noqa: BLE001 - warming is best effort, never fatal
        if log:
            log(f"quotaloop: warm-up skipped: {type(exc).__name__}: {str(exc)[:200]}")
        return {}
    steps = {
        "overview": lambda: (overview_totals(flt), occupancy_series(flt, bucket_s=3600.0),
                             waste_trend(flt, res, bucket_s=86400.0), user_ranking(flt, order_by=res),
                             team_ranking(flt, order_by=res)),
        "waste": lambda: (waste_by(flt, "team", res, team_level=depth),
                          gap_series(flt, res, by="team", team_level=depth, bucket_s=default_bucket_s(flt))),
        "layout": lambda: (layout_at(flt, at), gantt_rows(flt, *gantt_span(flt, at, GANTT_SPAN_H))),
        "rankings": lambda: (user_ranking(flt, order_by=res),
                             team_ranking(flt, order_by=res, team_level=depth),
                             quota_backtest(flt, period_s=7 * 86400.0)),
        "my_jobs": lambda: (user_ranking(flt), query("quota_backtest", flt)) + (
            (job_waste(flt, user=first_user), low_efficiency_jobs(flt, first_user), score_drivers(flt, first_user))
            if first_user else ()),
    }
    seconds = {}
    for page, step in steps.items():
        t0 = time.perf_counter()
        try:
            step()
        except (NotAvailable, Exception) as exc:  # noqa: BLE001 - warming is best effort, never fatal
            if log:
                log(f"quotaloop: warm-up of {page} skipped: {type(exc).__name__}: {str(exc)[:200]}")
        seconds[page] = time.perf_counter() - t0
    if log:
        log(f"quotaloop: warm-up done in {sum(seconds.values()):.1f} s (store token {store_token()}): "
            + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))
    return seconds
