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
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
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


def _first_user(flt: Filters) -> str | None:
    """The user an admin's My jobs opens on with no viewer (at start-up): the largest footprint in the window."""
    return default_user(user_ranking(flt), None)


def page_views(flt: Filters, opts, *, restricted: bool = True) -> dict[str, tuple[Callable[[], object], ...]]:
    """Each page's default first render for the window ``flt``, as independent cached views (zero-argument
    callables, in the order the page draws them). ``restricted``: include what only a researcher's render draws
    (the Overview's team ranking). A view that needs the selection's resource or the default user computes it
    itself (both cached: the first caller computes, the others wait for it)."""
    depth = team_depth(opts)
    at = default_layout_at(flt, opts).replace(tzinfo=UTC)

    def mine(view):
        return lambda: view(u) if (u := _first_user(flt)) else None

    overview = (lambda: overview_totals(flt),
                lambda: occupancy_series(flt, bucket_s=3600.0, res=resource(flt)),
                lambda: waste_trend(flt, resource(flt), bucket_s=86400.0),
                lambda: user_ranking(flt, order_by=resource(flt)))
    if restricted:
        overview += (lambda: team_ranking(flt, order_by=resource(flt)),)
    return {
        "overview": overview,
        "waste": (lambda: waste_by(flt, "team", resource(flt), team_level=depth),
                  lambda: gap_series(flt, resource(flt), by="team", team_level=depth,
                                     bucket_s=default_bucket_s(flt))),
        "layout": (lambda: layout_at(flt, at), lambda: gantt_rows(flt, *gantt_span(flt, at, GANTT_SPAN_H))),
        "rankings": (lambda: user_ranking(flt, order_by=resource(flt)),
                     lambda: team_ranking(flt, order_by=resource(flt), team_level=depth),
                     lambda: quota_backtest(flt, period_s=7 * 86400.0)),
        "my_jobs": (lambda: user_ranking(flt), lambda: query("quota_backtest", flt),
                    mine(lambda u: job_waste(flt, user=u)), mine(lambda u: low_efficiency_jobs(flt, u)),
                    mine(lambda u: score_drivers(flt, u))),
    }


# Two views at a time: DuckDB runs each query on two threads, but a query also has single-threaded phases
# (binding, reading footers, converting the result to Polars) in which the other can use the cores; measured on
# the 10M store, the Overview's five queries took 6.5 s one after another and 5.3 s two or more at a time.
WORKERS = 2
_POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="quotaloop-views")


def _quietly(view: Callable[[], object]) -> None:
    try:
        view()
    except Exception:  # noqa: BLE001 - a view computed ahead is best effort: the page computes it again and says why
        pass


def prefetch(page: str, flt: Filters, *, restricted: bool) -> list[Future]:
    """Start computing ``page``'s default views for ``flt`` in the background and return at once: the page's own
    calls then find them cached, or wait for the one being computed (``st.cache_data`` computes a key once), so
    a cold page runs its queries two at a time instead of one after another. Only for a page whose first render
    has no widget choosing what it shows (the Overview): elsewhere a view computed ahead may be one the viewer
    has switched away from."""
    opts = options()
    if not opts.jobs:
        return []
    return [_POOL.submit(_quietly, view) for view in page_views(flt, opts, restricted=restricted)[page]]


def warm(log=None) -> dict[str, float]:
    """Compute every page's default view into the caches, ``WORKERS`` views at a time; wall seconds from the
    start until each page's last view was done. Never raises (a page that cannot be warmed is computed by its
    first visitor, who then sees the page's own message)."""
    opts = options()
    if not opts.jobs:
        return {}
    flt = window_filters(default_window(opts))
    t0 = time.perf_counter()
    try:
        resource(flt)  # GPU-hours, or core-hours where the window has no GPUs: what the pages open on
        _first_user(flt)
    except Exception as exc:  # noqa: BLE001 - warming is best effort, never fatal
        if log:
            log(f"quotaloop: warm-up skipped: {type(exc).__name__}: {str(exc)[:200]}")
        return {}

    def timed(page: str, view: Callable[[], object]) -> tuple[str, float]:
        try:
            view()
        except (NotAvailable, Exception) as exc:  # noqa: BLE001 - warming is best effort, never fatal
            if log:
                log(f"quotaloop: warm-up of {page} skipped: {type(exc).__name__}: {str(exc)[:200]}")
        return page, time.perf_counter() - t0

    futures = [_POOL.submit(timed, page, view) for page, views in page_views(flt, opts).items() for view in views]
    seconds: dict[str, float] = {}
    for f in futures:
        page, done_s = f.result()
        seconds[page] = max(seconds.get(page, 0.0), done_s)
    if log:
        log(f"quotaloop: warm-up done in {time.perf_counter() - t0:.1f} s (store token {store_token()}), "
            f"{WORKERS} views at a time; each page ready after: " + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))
    return seconds
