"""Budget attainment of a run, by the definition of ``queries.analytics.budgets`` (the log path), on the run's own jobs.

The engine computes it from the simulated jobs frame (the ``jobs.parquet`` it writes, in the store schema), so
``queries.analytics.budgets.attainment`` over that file gives the same numbers (tested). Per window [start, end), cut at
the budget tree's effective dates, and per account:
- received = run resources x running time inside the window (run resources = ``alloc_*``, else ``req_*``; a
  RUNNING job without an end runs until its logged start + elapsed, the last instant the log knows of it, or
  to the window end when its elapsed is unknown: ``budget_usage.sql`` on a store without a recorded snapshot);
- demanded = received + requested resources x queued time inside the window (submit -> start, or -> end for a
  job that never started, or -> window end while PENDING);
- entitled = hierarchical water-filling of capacity x window hours over the demand buckets
  (``budgets.entitlements``, guarantees and ``max_gpus`` as resources x hours); static = share x capacity;
- per row of the tree's leaf frontier (leaves, ``PATH/(direct)`` buckets, ``unbudgeted``):
  attainment = received / min(entitled, demanded), ``attainment_static`` = received / min(static, demanded),
  None when the denominator is 0 (``budgets.attainment``, the one formula, applied by ``budgets.WindowTally``).
Summary over "node" rows with an attainment: ``mean`` of attainment capped at 1, ``worst`` (uncapped minimum,
ties by path) and ``worst_node``, ``teams_at_95pct`` (>= 0.95), ``over_entitled`` (> 1).

Resources are GPUs on clusters with GPUs (the queries' GPU-hours exactly) and CPUs on CPU-only machines (the
same formulas in CPU-hours). Without a budget tree every account is a top-level node of share 1 (``/`` in an
account name nests it). Times are handled in integer microseconds as the store holds them.

Invariants: pure numpy/polars over the frame; the same frame gives the same numbers; no queries import.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from . import budgets as bt
from .tenants import to_tree

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
HISTORY_STEP_S = 86400.0


def default_tree(accounts) -> bt.BudgetTree:
    """Every account a node of share 1 (``a/b`` nests b under a): the tree used when a run has no budgets."""
    return to_tree({a: 1.0 for a in sorted({a for a in accounts if a})})


def _us(jobs: pl.DataFrame, name: str) -> np.ndarray:
    """A time column as float microseconds since the epoch (NaN for null); numeric columns are seconds."""
    s = jobs[name]
    if isinstance(s.dtype, pl.Datetime):
        s = s.dt.epoch("us").cast(pl.Float64)
    else:
        s = (s.cast(pl.Float64) * 1e6).round()
    return s.fill_null(float("nan")).to_numpy()


class Spans:
    """Per job: account code, run and wait intervals (µs) and run / asked resources, from a jobs frame."""

    def __init__(self, jobs: pl.DataFrame, resource: str):
        col = "gpus" if resource == "gpus" else "cpus"
        acct = jobs["account"].cast(pl.String).fill_null("") if "account" in jobs.columns else \
            pl.Series([""] * jobs.height)
        self.accounts = sorted(acct.unique().to_list())
        # the account's index in ``accounts``: its dense rank (Polars orders strings by UTF-8 bytes, which is
        # code point order, as ``sorted``), without a Python lookup per job
        self.acct = (acct.rank("dense").cast(pl.Int64) - 1).to_numpy() if jobs.height else np.zeros(0, np.int64)

        def num(name):
            return jobs[name].cast(pl.Float64).to_numpy() if name in jobs.columns else np.full(jobs.height, np.nan)

        alloc, req = num("alloc_" + col), num("req_" + col)
        self.run_res = np.where(np.isnan(alloc), np.where(np.isnan(req), 0.0, req), alloc)
        self.ask_res = np.where(np.isnan(req), np.where(np.isnan(alloc), 0.0, alloc), req)
        state = jobs["state"].cast(pl.String).fill_null("") if "state" in jobs.columns else \
            pl.Series([""] * jobs.height, dtype=pl.String)
        self.running = (state == "RUNNING").to_numpy()  # compared by Polars: no Python str per job
        self.pending = (state == "PENDING").to_numpy()
        self.submit, self.start, self.end = _us(jobs, "submit"), _us(jobs, "start"), _us(jobs, "end")
        elapsed = num("elapsed_s")
        self.elapsed_us = np.round(np.where(np.isnan(elapsed), 0.0, elapsed) * 1e6)
        self.elapsed_known = ~np.isnan(elapsed)

    def sums(self, w0: float, w1: float) -> tuple[np.ndarray, np.ndarray]:
        """(received, demanded) resource-seconds per account inside [w0, w1) (µs bounds)."""
        run_to = np.where(~np.isnan(self.end), self.end,
                          np.where(self.running & ~self.elapsed_known, w1, self.start + self.elapsed_us))
        wait_to = np.where(~np.isnan(self.start), self.start,
                           np.where(~np.isnan(self.end), self.end, np.where(self.pending, w1, np.nan)))
        run_s = _overlap(self.start, run_to, w0, w1)
        wait_s = _overlap(self.submit, wait_to, w0, w1)
        rec = self.run_res * run_s / 1e6
        wait = self.ask_res * wait_s / 1e6
        n = len(self.accounts)
        received = np.bincount(self.acct, weights=rec, minlength=n)
        demanded = np.bincount(self.acct, weights=rec + wait, minlength=n)
        return received, demanded


def _overlap(a, b, w0, w1) -> np.ndarray:
    """max(min(b, w1) - max(a, w0), 0), 0 where an end is missing (µs)."""
    with np.errstate(invalid="ignore"):
        d = np.minimum(b, w1) - np.maximum(a, w0)
    return np.where(np.isnan(d), 0.0, np.maximum(d, 0.0))


def _when(us: float) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=int(round(us)))


def compute(spans: Spans, tree, capacity: float, w0: float, w1: float) -> dict:
    """The attainment table and summary over [w0, w1) (µs), ``capacity`` in resource units."""
    tally = bt.WindowTally()
    for seg0, seg1, root in tree.segments(_when(w0), _when(w1)):
        a0 = (seg0 - EPOCH) / dt.timedelta(microseconds=1)
        a1 = (seg1 - EPOCH) / dt.timedelta(microseconds=1)
        hours = (seg1 - seg0).total_seconds() / 3600.0
        rec_a, dem_a = spans.sums(a0, a1)
        active = np.flatnonzero((rec_a > 0) | (dem_a > 0))
        tally.add_segment(root, capacity * hours, hours, ((spans.accounts[k], float(dem_a[k]) / 3600.0,
                                                            float(rec_a[k]) / 3600.0) for k in active))
    teams = {key: {"kind": kind, "depth": depth, "entitled_hours": ent, "static_hours": stat, "demanded_hours": dem,
                   "received_hours": rec, "attainment": att, "attainment_static": att_static}
             for key, kind, depth, ent, stat, dem, rec, att, att_static in tally.rows()}
    return {"teams": teams, **summary(teams)}


def summary(teams: dict, threshold: float = 0.95) -> dict:
    """``budgets.summary`` of the teams, under the key names ``metrics["attainment"]`` has always used."""
    s = bt.summary(((k, t["kind"], t["attainment"]) for k, t in teams.items()), threshold)
    return {"teams_count": s["teams"], "mean": s["mean"], "worst": s["worst"], "worst_node": s["worst_node"],
            "teams_at_95pct": s["at_least"], "over_entitled": s["over_entitled"]}


def of_run(jobs: pl.DataFrame, tree, capacity: float, resource: str, lookback_s: float,
           history: bool = False, window_us: tuple | None = None) -> dict:
    """``metrics["attainment"]``: over ``window_us`` (µs since the epoch; the run's measured window when it has
    a warm start or a window end), else the run's span [first submit, last submit / start / end] (and, with
    ``history``, per lookback-long window ending every day, as ``queries.analytics.budgets.attainment_history`` does)."""
    spans = Spans(jobs, resource)
    if tree is None:
        tree = default_tree(spans.accounts)
    ends = np.concatenate([spans.submit, spans.start, spans.end])
    ends = ends[~np.isnan(ends)]
    if not len(ends) or not capacity:
        return {"window_start": None, "window_end": None, "capacity": capacity, "resource": resource,
                "teams": {}, **summary({})}
    w0, w1 = (float(np.nanmin(spans.submit)), float(ends.max())) if window_us is None else window_us
    if w1 <= w0:
        w1 = w0 + 1.0
    out = compute(spans, tree, capacity, w0, w1)
    out.update(window_start=_when(w0).isoformat(), window_end=_when(w1).isoformat(), capacity=capacity,
               resource=resource)
    if history:
        rows, L, step = [], lookback_s * 1e6, HISTORY_STEP_S * 1e6
        t = w0 + L
        while t <= w1:
            s = compute(spans, tree, capacity, t - L, t)
            s.pop("teams")
            rows.append({"window_start": _when(t - L).isoformat(), "window_end": _when(t).isoformat(), **s})
            t += step
        out["history"] = rows
    return out
