"""Cached report builds for the Reports page: ``dashboard.report`` run on the sidebar's filters.

Invariant: the page builds exactly what ``quotaloop report`` writes for the same scope. ``report_request`` turns
the sidebar into the arguments of ``build_report`` (window, cluster, partition, account subtree, state, job
class, the configured budget file) and ``report.command_line`` prints the same request as a command, so a
download from the page and the scheduled CLI run are byte-identical (tests/dashboard/test_dashboard_reports.py).
"""
from __future__ import annotations

import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from dashboard.report import build_report, command_line

from .query_cache import Filters, NotAvailable, config, store_dir, store_token


def report_window(flt: Filters) -> tuple[float, str]:
    """(window seconds, last day inclusive) of the sidebar window, in the report's whole-day terms."""
    if flt.start is None or flt.end is None:
        raise NotAvailable("pick a window in the sidebar first")
    days = max(1, round((flt.end - flt.start).total_seconds() / 86400.0))
    return days * 86400.0, (flt.end - dt.timedelta(days=1)).date().isoformat()


@dataclass(frozen=True)
class ReportRequest:
    """Everything ``build_report`` takes besides the output directory (hashable: it is the cache key)."""
    store: str
    window_s: float
    end: str
    audience: str
    team: str | None
    user: str | None
    filters: tuple  # ((key, value), ...) sorted: cluster, job_class, partition, state
    budgets: str | None
    formats: tuple

    def kwargs(self) -> dict:
        return dict(end=self.end, audience=self.audience, team=self.team, user=self.user,
                    filters=dict(self.filters), budgets=self.budgets, formats=self.formats)

    def command(self, out: str = "reports/") -> list[str]:
        return command_line(self.store, self.window_s, out=out, **self.kwargs())


def report_request(flt: Filters, audience: str, *, team: str | None = None, user: str | None = None,
                   formats: tuple = ("html", "csv")) -> ReportRequest:
    """The report request of the sidebar's filters. ``team``: the manager report's team; for the other audiences
    the sidebar's account subtree is the team filter."""
    window_s, end = report_window(flt)
    if audience != "manager":
        team = flt.account
    filters = tuple(sorted((k, v) for k, v in (("cluster", flt.cluster), ("partition", flt.partition),
                                               ("state", flt.state), ("job_class", flt.job_class)) if v))
    budgets = config().budgets_path
    budgets = str(budgets) if budgets is not None and Path(budgets).is_file() else None
    return ReportRequest(str(store_dir()), window_s, end, audience, team or None, user or None, filters, budgets,
                         tuple(formats))


@st.cache_data(show_spinner=False, max_entries=32, ttl=3600)
def _report_files(req: ReportRequest, token: str, budgets_mtime_ns: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="quotaloop-report-") as out:
        paths = build_report(req.store, req.window_s, out_dir=out, **req.kwargs())
        return {Path(p).name: Path(p).read_bytes() for p in paths if Path(p).is_file()}


def report_files(req: ReportRequest) -> dict[str, bytes]:
    """Build the report of ``req``; file name -> bytes (cached by the request, the store and the budget file)."""
    mtime = Path(req.budgets).stat().st_mtime_ns if req.budgets else 0
    return _report_files(req, store_token(req.store), mtime)
