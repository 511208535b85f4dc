"""Budget attainment from a job-log store (real or simulated): the query layer's bridge to the budget tree.

Dependency direction: ``queries -> engine.budgets`` (the pure model: parsing, account mapping,
water-filling; it imports neither DuckDB nor queries). DuckDB does the per-account sums
(``queries/analytics/sql/budget_usage.sql``); the tree math is Python.

Definitions, per window [start, end) and per account (then summed over the tree):
- received GPU-hours: allocated GPUs x running time inside the window (a RUNNING job with no end runs until the
  last instant its cluster's log knows, ``store_snapshot``; else its start + elapsed; else the window end).
- demanded GPU-hours: received + requested GPUs x queued time inside the window (submit -> start, or -> end for
  a job cancelled before it started, or -> the snapshot, else the window end, while PENDING). It is what the account asked to hold.
- capacity GPU-hours: cluster GPUs x window hours. GPUs: ``capacity_gpus=`` if given, else the store's ``nodes``
  table (of ``cluster``), else the tree's ``cluster_gpus``.
- entitled GPU-hours: hierarchical water-filling of capacity over demand (``engine.budgets.entitlements``,
  guarantees and ``max_gpus`` applied as GPUs x hours). It never exceeds demand and sums to
  min(capacity, total demand), so what one team leaves idle counts to its siblings first, then up the tree.
- static GPU-hours: share x capacity with no redistribution (a manager's "we fund 35 %").
- attainment = received / min(entitled, demanded) (the water-filled headline; ``min`` is then a no-op kept
  for parity with the static form), ``attainment_static`` = received / min(static, demanded). Null when the
  denominator is 0 (no demand, or an unfunded bucket with nothing left over). When demand exceeds supply
  everywhere (DOMAIN.md section 6: 2-3x) both coincide; the water-filled one does not flatter a team because
  its neighbours were idle nor blame it for capacity nobody could use.
- A window crossing an effective date is cut there; each piece uses the tree in force and the sums are added.
- Rows: ``kind`` "node" (a tree node), "direct" (demand of accounts naming an internal node but none of its
  children) or "unbudgeted" (accounts the tree does not name). Rows of one level partition all demand.
- The same numbers for a jobs frame (``attainment_of``: a simulation's ``jobs``, whose schema is the store's),
  so a replay and the log it replays are measured identically; ``attainment_history`` slides a window
  (default 7 days, stepped daily) over a store or a simulation's output directory (a flat store).
- ``quota_loop_multipliers``: the quota loop's per-user coefficients as per-bucket budget multipliers (see it).
- Unit: GPU-hours, or core-hours when the budget's ``unit`` is "cpu" (``budgets.toml``'s ``unit``, else
  inferred: a cluster whose node list has cores but no GPUs, or a known capacity of 0 GPUs, is counted in
  core-hours; ``budget_unit``). Then every amount above is CPU cores x hours (allocated cores run, requested
  cores waited), the capacity is the node list's cores, and the ``*_gpu_hours`` columns hold core-hours
  (``Attainment.unit`` says which): one table shape for both, so the pages and the scenario runner read one.
- Summary: over "node" rows with attainment: ``teams``, ``mean`` of attainment capped at 1 (a team receiving
  more than its share is reported in ``over_entitled``, not used to hide another's shortfall), ``worst``
  (uncapped min) and ``worst_node``, ``at_least_95`` (attainment >= 0.95).
"""
from __future__ import annotations

import datetime as dt
import os
import tempfile
from dataclasses import dataclass, field

import polars as pl

from engine.budgets import BudgetTree, WindowTally, bucket, resolve, static_shares
from engine.budgets import summary as budget_summary

from ..store import DEFAULT_STORE, Store, connect
from ..store.units import parse_ts
from .loader import run

_TABLE_SCHEMA = {
    "node": pl.String, "kind": pl.String, "depth": pl.Int32, "entitled_gpu_hours": pl.Float64,
    "static_gpu_hours": pl.Float64, "demanded_gpu_hours": pl.Float64, "received_gpu_hours": pl.Float64,
    "attainment": pl.Float64, "attainment_static": pl.Float64,
}


@dataclass(frozen=True)
class Attainment:
    table: pl.DataFrame
    summary: dict
    capacity_gpu_hours: float
    start: dt.datetime
    end: dt.datetime
    level: object
    warnings: tuple[str, ...] = field(default=())
    unit: str = "gpu"  # "gpu": the hours are GPU-hours; "cpu": core-hours (a cluster without GPUs)

    @property
    def unit_label(self) -> str:
        return UNIT_LABELS[self.unit]


UNIT_LABELS = {"gpu": "GPU-hours", "cpu": "core-hours"}


def store_capacity(store, cluster: str | None = None, resource: str = "gpu",
                   partition: str | None = None) -> float | None:
    """Sum of ``nodes.gpus`` (``resource="cpu"``: ``nodes.cpus``) of ``cluster`` (and ``partition``); ``None``
    when the store has no node inventory or it sums to 0."""
    nodes = Store(store or DEFAULT_STORE).read("nodes")
    if cluster is not None:
        nodes = nodes.filter(pl.col("cluster") == cluster)
    if partition is not None:
        nodes = nodes.filter(pl.col("partition") == partition)
    total = nodes["cpus" if resource == "cpu" else "gpus"].sum() if nodes.height else None
    return float(total) if total else None


def store_capacity_gpus(store, cluster: str | None = None) -> float | None:
    """Sum of ``nodes.gpus`` (of ``cluster``); ``None`` when the store has no node inventory."""
    return store_capacity(store, cluster, "gpu")


def budget_unit(tree: BudgetTree | None, *, capacity_gpus: float | None = None, capacity_cpus: float | None = None,
                store=None, cluster: str | None = None) -> str:
    """The unit a budget is counted in: the tree's ``unit`` when set, else "cpu" for a cluster without GPUs (a known
    capacity of 0 GPUs, or a node list with cores and no GPUs while budgets.toml gives no ``cluster_gpus``), else
    "gpu"."""
    if tree is not None and tree.unit:
        return tree.unit
    if capacity_gpus is None and store is not None:
        capacity_gpus = store_capacity_gpus(store, cluster) or (tree.cluster_gpus if tree is not None else None)
        if not capacity_gpus and capacity_cpus is None:
            capacity_cpus = store_capacity(store, cluster, "cpu")
    if capacity_gpus == 0 or (not capacity_gpus and capacity_cpus):
        return "cpu"
    return "gpu"


def usage(store=None, start=None, end=None, *, cluster: str | None = None, con=None,
          resource: str = "gpu") -> pl.DataFrame:
    """Per-account ``received_gpu_s``, ``waiting_gpu_s``, ``demanded_gpu_s`` in [start, end) (budget_usage.sql);
    core-seconds under the same names for ``resource="cpu"``."""
    return run("budget_usage", store, con=con, start=start, end=end, cluster=cluster, resource=resource)


def attainment(store, tree: BudgetTree, start, end, *, level="leaf", cluster: str | None = None,
               capacity_gpus: float | None = None, con=None, capacity_cpus: float | None = None,
               unit: str | None = None) -> Attainment:
    """Entitled / static / demanded / received GPU-hours (core-hours for a "cpu" budget: ``unit``, else
    ``budget_unit``) and attainment per tree row at ``level`` (see module doc)."""
    start, end = parse_ts(start), parse_ts(end)
    if start is None or end is None or end <= start:
        raise ValueError(f"attainment needs a window start < end, got {start} .. {end}")
    unit = unit or budget_unit(tree, capacity_gpus=capacity_gpus, capacity_cpus=capacity_cpus, store=store,
                               cluster=cluster)
    if unit == "cpu":
        gpus = capacity_cpus or store_capacity(store, cluster, "cpu")
        if not gpus:
            raise ValueError("cluster capacity in CPU cores unknown: pass capacity_cpus= or ingest a node inventory")
    else:
        if capacity_gpus == 0:  # a GPU budget on a layout without GPUs (budgets.toml says unit = "gpu")
            raise ValueError('the cluster has no GPUs: set unit = "cpu" in budgets.toml to count the budget in '
                             "core-hours")
        gpus = capacity_gpus or store_capacity_gpus(store, cluster) or tree.cluster_gpus
        if not gpus:
            raise ValueError("cluster capacity unknown: pass capacity_gpus=, ingest a node inventory, or set "
                             "cluster_gpus in budgets.toml")
    own = con is None
    con = con or connect(store)
    tally = WindowTally(level)
    capacity_total = received_total = 0.0
    try:
        for seg_start, seg_end, root in tree.segments(start, end):
            hours = (seg_end - seg_start).total_seconds() / 3600.0
            capacity_total += gpus * hours
            rows = [(account, dem_s / 3600.0, rec_s / 3600.0) for account, rec_s, dem_s in usage(
                start=seg_start, end=seg_end, cluster=cluster, con=con, resource=unit).select(
                    "account", "received_gpu_s", "demanded_gpu_s").iter_rows()]
            received_total += sum(r for _, _, r in rows)
            tally.add_segment(root, gpus * hours, hours, rows)
    finally:
        if own:
            con.close()
    rows = tally.rows()
    table = pl.DataFrame(rows, schema=_TABLE_SCHEMA, orient="row")
    warnings = []
    if received_total > capacity_total * (1 + 1e-9):
        warnings.append(f"received {received_total:.1f} {UNIT_LABELS[unit]} exceeds the capacity "
                        f"{capacity_total:.1f} ({gpus:g} {'GPUs' if unit == 'gpu' else 'cores'}): the capacity or "
                        "the cluster filter is wrong")
    return Attainment(table, summarize(table), capacity_total, start, end, level, tuple(warnings), unit)


def attainment_of(jobs: pl.DataFrame, tree: BudgetTree, start, end, *, capacity_gpus: float, level="leaf",
                  cluster: str | None = None, capacity_cpus: float | None = None,
                  unit: str | None = None) -> Attainment:
    """``attainment`` of a jobs frame in the store's schema (a simulation's ``jobs``, a filtered log) instead of
    a store: the same SQL and tree math, so a replay and the log it replays are measured identically."""
    with tempfile.TemporaryDirectory(prefix="quotaloop-att-") as empty:  # no store: only ``jobs`` is registered
        con = connect(empty, extra={"jobs": jobs})
        try:
            return attainment(empty, tree, start, end, level=level, cluster=cluster, capacity_gpus=capacity_gpus,
                              con=con, capacity_cpus=capacity_cpus, unit=unit)
        finally:
            con.close()


def summarize(table: pl.DataFrame, threshold: float = 0.95) -> dict:
    """``engine.budgets.summary`` of an attainment table, under the key names the pages and reports read."""
    s = budget_summary(table.select("node", "kind", "attainment").iter_rows(), threshold)
    return {"teams": s["teams"], "mean": s["mean"], "worst": s["worst"], "worst_node": s["worst_node"],
            "at_least_95": s["at_least"], "over_entitled": s["over_entitled"]}


def attainment_history(store, tree: BudgetTree, start, end, *, window_hours: float = 168.0, step_hours: float = 24.0,
                       **kwargs) -> pl.DataFrame:
    """Summary per sliding window [t - window, t) for t = start + window, + step, ... <= end."""
    start, end = parse_ts(start), parse_ts(end)
    window, step = dt.timedelta(hours=window_hours), dt.timedelta(hours=step_hours)
    rows, t = [], start + window
    own = kwargs.get("con") is None
    con = kwargs.pop("con", None) or connect(store)
    try:
        while t <= end:
            s = attainment(store, tree, t - window, t, con=con, **kwargs).summary
            rows.append({"window_start": t - window, "window_end": t, **s})
            t += step
    finally:
        if own:
            con.close()
    schema = {"window_start": pl.Datetime("us", "UTC"), "window_end": pl.Datetime("us", "UTC"), "teams": pl.Int64,
              "mean": pl.Float64, "worst": pl.Float64, "worst_node": pl.String, "at_least_95": pl.Int64,
              "over_entitled": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


# ------------------------------------------------------------------------------------------ quota loop
def quota_loop_multipliers(store, tree: BudgetTree, start, end, *, period_s: float = 7 * 86400.0,
                           cpus_per_gpu: float = 16.0, cluster: str | None = None, con=None,
                           **backtest_params) -> pl.DataFrame:
    """The quota loop's coefficients (``quota_backtest``) as budget multipliers per budget bucket and period.

    ``quota_backtest`` scores users per period (aligned to ``start``) and gives each the stabilised
    ``coefficient`` the loop applies *after* the period (a period's behaviour sets the next one's quota). A
    bucket's multiplier = the mean of its users' coefficients weighted by each user's GPU-equivalent footprint
    (GPU-hours + CPU-hours / ``cpus_per_gpu``, requested) in that bucket over [start, end); a bucket none of
    whose users was scored keeps 1. Rows: ``effective_from`` (period start + ``period_s``), ``period_start``,
    ``bucket``, ``multiplier``, ``users``; ``effective_from`` < ``end`` only (later ones act on no job).
    """
    start, end = parse_ts(start), parse_ts(end)
    back = run("quota_backtest", store, con=con, start=start, end=end, origin=start, period_s=period_s,
               cluster=cluster, cpus_per_gpu=cpus_per_gpu, **backtest_params)
    jobs = Store(store or DEFAULT_STORE).read("jobs").filter((pl.col("submit") >= start) & (pl.col("submit") < end))
    if cluster is not None:
        jobs = jobs.filter(pl.col("cluster") == cluster)
    root = tree.at(end - dt.timedelta(microseconds=1))
    names = jobs["account"].unique().to_list()
    buckets = pl.DataFrame({"account": names, "bucket": [bucket(root, a) for a in names]},
                           schema={"account": pl.String, "bucket": pl.String})
    secs = pl.col("elapsed_s").fill_null(0.0)
    weights = (jobs.join(buckets, on="account", how="left")
               .with_columns(((pl.col("req_gpus").fill_null(0.0) + pl.col("req_cpus").fill_null(0.0) / cpus_per_gpu)
                              * secs / 3600.0).alias("w"))
               .group_by("user", "bucket").agg(pl.col("w").sum()).filter(pl.col("w") > 0))
    schema = {"effective_from": pl.Datetime("us", "UTC"), "period_start": pl.Datetime("us", "UTC"),
              "bucket": pl.String, "multiplier": pl.Float64, "users": pl.UInt32}
    if back.is_empty() or weights.is_empty():
        return pl.DataFrame(schema=schema)
    shift = dt.timedelta(seconds=period_s)
    out = (back.select("user", pl.col("period_start").cast(pl.Datetime("us", "UTC")), "coefficient")
           .join(weights, on="user", how="inner")
           .group_by("period_start", "bucket")
           .agg(((pl.col("coefficient") * pl.col("w")).sum() / pl.col("w").sum()).alias("multiplier"),
                pl.col("user").n_unique().alias("users"))
           .with_columns((pl.col("period_start") + shift).alias("effective_from"))
           .filter(pl.col("effective_from") < end)
           .select(list(schema)).sort("effective_from", "bucket"))
    return out.cast(schema)


# ------------------------------------------------------------------------------------------ frames for SQL
def budget_shares(tree: BudgetTree, start, end) -> pl.DataFrame:
    """One row per tree node per effective period overlapping [start, end).

    ``account`` is the node path, ``weight`` the share as written (relative to siblings), ``share`` the fraction
    of the cluster (product of normalised weights down the path), ``valid_from``/``valid_to`` the period clipped
    to the window. Register with ``queries.connect(store, extra=budget_frames(...))``.
    """
    rows = []
    for seg_start, seg_end, root in tree.segments(parse_ts(start), parse_ts(end)):
        frac = static_shares(root)
        for node in root.walk():
            if node.path:
                rows.append((node.path, node.path.rpartition("/")[0] or None, node.depth, node.is_leaf, node.share,
                             frac[node.path], node.guaranteed_gpus, node.max_gpus, seg_start, seg_end))
    schema = {"account": pl.String, "parent": pl.String, "depth": pl.Int32, "leaf": pl.Boolean,
              "weight": pl.Float64, "share": pl.Float64, "guaranteed_gpus": pl.Float64, "max_gpus": pl.Float64,
              "valid_from": pl.Datetime("us", "UTC"), "valid_to": pl.Datetime("us", "UTC")}
    return pl.DataFrame(rows, schema=schema, orient="row")


def budget_accounts(tree: BudgetTree, accounts, start, end) -> pl.DataFrame:
    """Log account -> tree ``node`` (or ``unbudgeted``) and demand ``bucket``, per effective period in the window."""
    rows = []
    for seg_start, seg_end, root in tree.segments(parse_ts(start), parse_ts(end)):
        for account in sorted({a or "" for a in accounts}):
            rows.append((account, resolve(root, account), bucket(root, account), seg_start, seg_end))
    schema = {"account": pl.String, "node": pl.String, "bucket": pl.String,
              "valid_from": pl.Datetime("us", "UTC"), "valid_to": pl.Datetime("us", "UTC")}
    return pl.DataFrame(rows, schema=schema, orient="row")


def budget_frames(tree: BudgetTree, start, end, store: str | os.PathLike | None = None, accounts=None) -> dict:
    """``{"budget_shares": ..., "budget_accounts": ...}`` for ``queries.connect(store, extra=...)``.

    Accounts default to every distinct ``jobs.account`` of ``store``.
    """
    if accounts is None:
        accounts = Store(store).read("jobs")["account"].unique().to_list() if store is not None else []
    return {"budget_shares": budget_shares(tree, start, end),
            "budget_accounts": budget_accounts(tree, accounts, start, end)}
