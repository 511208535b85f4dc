"""Cached analytics for the pages: waste, rankings, the gaming check, the researcher view, overview, layout."""
from __future__ import annotations

import datetime as dt
from dataclasses import replace

import polars as pl
import streamlit as st

import queries
from queries.analytics.budgets import store_capacity, store_capacity_gpus

from .. import gaming, shaping
from .query_cache import (Filters, NotAvailable, _bind_filters, available, declared, options, param_default, query,
                          scan, store_dir, store_token)

# ------------------------------------------------------------------ waste
# resource -> (label, level unit for curves, amount unit for totals, column prefix)
RESOURCES = {
    "gpu": ("GPU", "GPUs", "GPU-hours"),
    "cpu": ("CPU", "CPU cores", "core-hours"),
    "mem": ("Memory", "GB", "TB-hours"),
}
TEAM_LEVELS = {1: "org", 2: "group", 3: "team"}


def job_waste(flt: Filters | None, *, user: str | None = None, team_level: int = 3, team: str | None = None,
              limit: int | None = None) -> pl.DataFrame:
    """One row per job in the window (``job_waste`` query), with *_hours columns added for display.

    ``team`` (the first ``team_level`` components of the account) narrows the query's account subtree, so
    ``limit`` keeps the team's biggest wasters, not the cluster's cut down to the team."""
    disjoint = False
    if team is not None:
        within = lambda path, root: (path.rstrip("/") + "/").startswith(root.rstrip("/") + "/")  # noqa: E731
        outer = (flt or Filters()).account
        if not outer or within(team, outer):
            flt = replace(flt or Filters(), account=team)
        else:
            disjoint = not within(outer, team)  # else the sidebar's subtree already lies inside the team
    df = query("job_waste", flt, user=user, team_level=team_level, limit_rows=limit)
    if disjoint:
        df = df.clear()
    return df.with_columns(
        [(pl.col(f"{r}_seconds_{k}") / 3600.0).alias(f"{r}_hours_{k}")
         for r in RESOURCES for k in ("requested", "used", "wasted") if f"{r}_seconds_{k}" in df.columns])


def waste_by(flt: Filters | None, by: str, resource: str, *, team_level: int = 3,
             team: str | None = None) -> pl.DataFrame:
    """Jobs and requested / used / wasted resource-hours with efficiency per ``by`` (team | user), most waste first.

    Aggregated in SQL by ``team_ranking`` / ``user_ranking`` (never a per-job frame, so it scales to a 10M-job
    store); ``team`` narrows the users to one team (drill-down). Memory is in TB-hours, as the rankings give it."""
    store = str(store_dir())
    return _waste_by(store, store_token(store), flt, by, resource, team_level, team)


_RANK_PREFIX = {"gpu": "gpu_hours", "cpu": "cpu_hours", "mem": "mem_tb_hours"}


@st.cache_data(show_spinner=False, max_entries=256, ttl=6 * 3600)
def _waste_by(store: str, token: str, flt, by: str, resource: str, team_level: int, team) -> pl.DataFrame:
    name = "team_ranking" if by == "team" else "user_ranking"
    params = {"order_by": resource, "team_level": team_level}
    if team is not None:  # a team from the (already filtered) list: narrower than any sidebar subtree
        flt = replace(flt or Filters(), account=team)
    df = query(name, flt, **params)
    p = _RANK_PREFIX[resource]
    return (df.select(pl.col(by).cast(pl.String), pl.col("job_count").alias("jobs"),
                      pl.col(f"{p}_requested").alias("requested_hours"), pl.col(f"{p}_used").alias("used_hours"),
                      pl.col(f"{p}_wasted").alias("wasted_hours"), pl.col(f"{resource}_efficiency").alias("efficiency"))
            .sort(["wasted_hours", by], descending=[True, False], nulls_last=True))


def gap_series(flt: Filters | None, resource: str, *, by: str | None, team_level: int = 3,
               bucket_s: float = 3600.0, team: str | None = None) -> pl.DataFrame:
    """Columns ``t``, ``group``, ``requested``, ``used``: mean resource level held / used in each bucket."""
    if not available("gap_area"):
        raise NotAvailable("the `gap_area` query is not available yet")
    names = declared("gap_area")
    params: dict = {"bucket_s": bucket_s, "team_level": team_level, "resource": resource}
    for key, value in (("group_by", by or "none"), ("by", by or "none")):
        params[key] = value
    if team is not None:
        params["account_prefix"] = team
    df = query("gap_area", flt, **{k: v for k, v in params.items() if k in names})
    return shaping.normalise_gap(df, resource, by)


# ------------------------------------------------------------------ rankings and the quota loop
RANK_BY = {"gpu": "GPU-hours", "cpu": "CPU core-hours", "mem": "memory TB-hours", "equiv": "GPU-equivalent hours"}


def wasted_column(resource: str) -> str:
    return {"gpu": "gpu_hours_wasted", "cpu": "cpu_hours_wasted", "mem": "mem_tb_hours_wasted",
            "equiv": "wasted_gpu_equiv_hours"}[resource]


def efficiency_column(resource: str) -> str:
    return {"gpu": "gpu_efficiency", "cpu": "cpu_efficiency", "mem": "mem_efficiency",
            "equiv": "rec_efficiency"}[resource]


def team_depth(opts) -> int:
    """Levels of the account tree (org/group/team = 3): the Waste explorer's and Rankings' default team level."""
    return max((a.count("/") + 1 for a in opts.accounts), default=1)


def user_ranking(flt: Filters | None, order_by: str = "gpu", team_level: int | None = None, **params) -> pl.DataFrame:
    """Every user's ranking row; ``main_team`` at ``team_level`` (default: the leaf teams), so the Overview, My
    jobs and Rankings share one cached run."""
    if team_level is None:
        team_level = team_depth(options())
    return query("user_ranking", flt, order_by=order_by, team_level=team_level, **params)


def team_ranking(flt: Filters | None, order_by: str = "gpu", team_level: int = 3) -> pl.DataFrame:
    return query("team_ranking", flt, order_by=order_by, team_level=team_level)


def quota_backtest(flt: Filters | None, **params) -> pl.DataFrame:
    return query("quota_backtest", flt, **params)


GAMING_REPLAY_MAX_JOBS = 200_000  # the exact replay copies the window into a scratch store: bounded
GAMING_COLUMNS = ["user", "split_job_id", "job_count_before", "job_count_after", "legacy_rank_before",
                  "legacy_rank_after", "legacy_coefficient_before", "legacy_coefficient_after",
                  "rec_coefficient_before", "rec_coefficient_after", "legacy_improves", "recommended_improves"]


def gaming_everyone(flt: Filters | None, split_n: int = 4) -> pl.DataFrame:
    """Per user: both scores if their largest job were split into ``split_n`` (``gaming_check``, in SQL)."""
    return query("gaming_check", flt, split_n=split_n)


def gaming_check(flt: Filters | None, user: str, splits: int = 10) -> pl.DataFrame:
    """metric / before / after_split / change for ``user`` when each of their jobs is split into ``splits``."""
    store = str(store_dir())
    return _gaming_check(store, store_token(store), flt, user, splits)


@st.cache_data(show_spinner=False, max_entries=32, ttl=6 * 3600)
def _gaming_check(store: str, token: str, flt, user: str, splits: int) -> pl.DataFrame:
    if not available("user_ranking"):
        raise NotAvailable("the `user_ranking` query is not available yet")
    jobs = scan("jobs", store)
    if flt is not None and flt.cluster:
        jobs = jobs.filter(pl.col("cluster") == flt.cluster)
    if flt is not None and flt.start is not None and flt.end is not None:
        # every job that can count in the window (ranks are relative: all users' jobs are needed)
        jobs = jobs.filter((pl.col("submit") < flt.end) & (pl.col("end").is_null() | (pl.col("end") >= flt.start)))
    jobs = jobs.collect()
    samples = scan("samples", store).join(jobs.select("cluster", "job_id").lazy(), on=["cluster", "job_id"],
                                          how="semi").collect()
    bound, _ = _bind_filters("user_ranking", flt)
    return gaming.rescore(jobs, samples, scan("nodes", store).collect(), user, splits,
                          lambda name, root, **p: queries.run(name, store=root, **p), bound)


# ------------------------------------------------------------------ researcher view
def user_row(flt: Filters | None, user: str) -> dict | None:
    """The user's row of the ranking over *all* users (ranks are relative, so never rank a lone user)."""
    df = user_ranking(flt)
    rows = df.filter(pl.col("user") == user)
    return rows.row(0, named=True) if rows.height else None


def low_efficiency_jobs(flt: Filters | None, user: str, limit: int = 20) -> pl.DataFrame:
    """The user's most wasteful jobs (by wasted resource-hours) with a right-size suggestion."""
    df = query("user_low_efficiency_jobs", flt, user=user, limit_rows=limit)
    if "user" in df.columns:  # defence in depth: never show another user's row on a personal page
        df = df.filter(pl.col("user") == user)
    return df


def score_drivers(flt: Filters | None, user: str, top_n: int = 5) -> pl.DataFrame:
    """The jobs that drove the user's score (``user_summary``): share of waste and the efficiency without each."""
    df = query("user_summary", flt, user=user, top_n=top_n)
    if "user" in df.columns:
        df = df.filter(pl.col("user") == user)
    cols = ["job_name", "job_id", "wasted_gpu_equiv_hours", "share_of_user_waste", "rec_efficiency_without_job"]
    return df.select([c for c in cols if c in df.columns])


def coefficient_explanation(flt: Filters | None, user: str) -> list[str]:
    """Plain-language lines: the score terms behind the user's coefficient and, from the back-test, its move."""
    me = user_row(flt, user)
    bt = query("quota_backtest", flt) if available("quota_backtest") else None
    return shaping.coefficient_lines(user, me, bt)


# ------------------------------------------------------------------ the selection's resource
def resource(flt: Filters | None) -> str:
    """"gpu" or "cpu": the resource this selection is measured in (``selection_resource``: GPUs when its jobs held
    GPUs in the window or its node list has GPUs, else CPU cores). Every page asks here instead of guessing, so a
    CPU-only cluster, or the CPU partition of a mixed one, reads in core-hours everywhere."""
    if not available("selection_resource"):
        return "gpu"
    store = str(store_dir())
    return _resource(store, store_token(store), flt)


def rank_default(flt: Filters | None) -> str:
    """The resource a ranking opens on: the selection's own (``resource``), unless nobody's waste of it is known
    while another resource's is (SARC's exports record GPUs held but no GPU use): then the first of CPU and
    memory whose waste is known, so the page ranks by what the log can tell instead of by nothing."""
    res = resource(flt)
    users = user_ranking(flt, order_by=res)

    def known(r: str) -> bool:  # a user's waste is known where their efficiency is (waste sums count 0 for unknown)
        return bool(users[efficiency_column(r)].drop_nulls().len())

    if users.is_empty() or known(res):
        return res
    return next((r for r in ("cpu", "mem") if known(r)), res)


@st.cache_data(show_spinner=False, max_entries=128, ttl=6 * 3600)
def _resource(store: str, token: str, flt) -> str:
    return str(query("selection_resource", flt).row(0, named=True)["resource"])


# ------------------------------------------------------------------ overview
def capacity_gpus(cluster: str | None = None) -> float | None:
    """GPUs in the store's node list (of ``cluster``); None when the store has no node list."""
    return _capacity(str(store_dir()), store_token(), cluster, store_capacity_gpus)


def capacity(cluster: str | None = None, unit: str = "gpu", partition: str | None = None) -> float | None:
    """GPUs (``unit="cpu"``: the CPU cores of ``partition``, the selection that has no GPUs) in the store's node
    list (of ``cluster``); None without a node list."""
    if unit != "cpu":
        return capacity_gpus(cluster)
    return _capacity(str(store_dir()), store_token(), cluster,
                     lambda store, c: store_capacity(store, c, "cpu", partition), f"cpu:{partition}")


@st.cache_data(show_spinner=False, max_entries=32)
def _capacity(store: str, token: str, cluster: str | None, _fn, unit: str = "gpu") -> float | None:
    return _fn(store, cluster)


def occupancy_series(flt: Filters | None, bucket_s: float = 3600.0, res: str | None = None) -> pl.DataFrame:
    """Cluster-wide GPUs (or, for a selection without GPUs, CPU cores: ``resource``) allocated and busy per bucket,
    with the node list's capacity: t, capacity, allocated, used."""
    res = res or resource(flt)
    gap = gap_series(flt, res, by=None, bucket_s=bucket_s)
    cap = capacity(flt.cluster if flt else None, res, flt.partition if flt else None)
    # where every allocated resource-second is held by jobs whose usage the logs do not record, "busy" is
    # unknown, not 0 (an SWF log without CPU times): the line has a gap there
    unknown = (pl.col("requested") > 0) & (pl.col("unknown") >= pl.col("requested") * (1 - 1e-9))
    return gap.select("t", pl.lit(cap, dtype=pl.Float64).alias("capacity"),
                      pl.col("requested").alias("allocated"),
                      pl.when(unknown).then(None).otherwise(pl.col("used")).alias("used"))


def overview_totals(flt: Filters | None) -> dict:
    """Headline numbers of the window: resource-hours requested/used/wasted, jobs, users, occupancy, utilisation."""
    store = str(store_dir())
    return _overview_totals(store, store_token(store), flt)


@st.cache_data(show_spinner=False, max_entries=128, ttl=6 * 3600)
def _overview_totals(store: str, token: str, flt) -> dict:
    row = query("overview", flt).row(0, named=True)
    out: dict = {"jobs": int(row["jobs"] or 0), "users": int(row["users"] or 0)}
    for r, col in (("gpu", "gpu_hours"), ("cpu", "cpu_hours"), ("mem", "mem_tb_hours")):
        scale = 1000.0 if r == "mem" else 1.0  # GB-hours, like job_waste's memory columns
        for k in ("requested", "used", "wasted"):
            value = row.get(f"{col}_{k}")
            # None: no job of the window records that usage (an SWF log without CPU times) - unknown, not 0
            out[f"{r}_{k}_h"] = None if value is None else value * scale
        out[f"{r}_used_h"], out[f"{r}_wasted_h"] = shaping.known_usage(
            out[f"{r}_requested_h"], out[f"{r}_used_h"], out[f"{r}_wasted_h"])
    res = out["resource"] = resource(flt)  # occupancy and utilisation of GPUs, or of cores without GPUs
    cap = capacity(flt.cluster if flt else None, res, flt.partition if flt else None)
    span_h = ((flt.end - flt.start).total_seconds() / 3600.0) if flt and flt.start and flt.end else None
    out["capacity_gpus"] = capacity_gpus(flt.cluster if flt else None) if res == "cpu" else cap
    out["capacity"] = cap
    req_h, used_h, wasted_h = (out[f"{res}_{k}_h"] for k in ("requested", "used", "wasted"))
    out["occupancy"] = (req_h or 0.0) / (cap * span_h) if cap and span_h else None
    # busy over the allocated hours whose usage is known (used + wasted): unknown usage is neither
    out["utilisation"] = used_h / (used_h + wasted_h) if used_h is not None and used_h + wasted_h else None
    levels = dict(pyramid(flt, res))
    for key in ("occupancy", "utilisation"):
        if levels.get(key) is not None:  # the pyramid query knows node availability and usage coverage
            out[key] = levels[key]
    return out


def pyramid(flt: Filters | None, res: str | None = None) -> list[tuple[str, float | None]]:
    """(level, fraction) for availability -> occupancy -> impact -> utilisation (DOMAIN.md section 6), of GPUs, or
    of CPU cores for a selection without GPUs (``resource``)."""
    levels = ("availability", "occupancy", "impact", "utilisation")
    if available("metric_pyramid"):
        res = res or resource(flt)
        df = query("metric_pyramid", flt, resource=res)
        if "team" in df.columns:
            df = df.filter(pl.col("team") == "(all)")
        if df.height and set(levels) <= set(df.columns):
            row = df.row(0, named=True)
            return [(k, row[k]) for k in levels]
    return [(k, None) for k in levels]


HOUR_S = 3600.0


def waste_trend(flt: Filters | None, resource: str = "gpu", bucket_s: float = 86400.0) -> pl.DataFrame:
    """Wasted resource-hours per bucket, cluster-wide: t, wasted_hours (null where every job of the bucket has
    unknown usage). As gap_area defines it, the part of the request held by jobs whose usage the logs do not
    record is neither used nor wasted.

    Buckets of whole hours are summed from the hourly series (``gap_series`` at one hour, the Overview's
    occupancy curve: cached, so the page runs one ``gap_area`` for both charts instead of two). Exact up to the
    order of a sum: gap_area splits every interval at bucket boundaries, so a bucket's amounts are the sums of
    its hours' (the same origin aligns both grids), and the hours of the window are the days' hours."""
    if bucket_s % HOUR_S == 0:
        return wasted_per_bucket(_rebucket(gap_series(flt, resource, by=None, bucket_s=HOUR_S), bucket_s), HOUR_S)
    return wasted_per_bucket(gap_series(flt, resource, by=None, bucket_s=bucket_s), bucket_s)


def wasted_per_bucket(gap: pl.DataFrame, bucket_s: float) -> pl.DataFrame:
    """t, wasted_hours from a normalised gap series (``gap_series``) whose rows are ``bucket_s`` long, summed per
    ``t`` (several rows of one ``t``: groups, or the hours of a longer bucket)."""
    if "requested_s" in gap.columns:
        unknown = pl.col("unknown_s") if "unknown_s" in gap.columns else pl.lit(0.0)
        requested, used = pl.col("requested_s"), pl.col("used_s")
    else:
        unknown, requested, used = (pl.col(c) * bucket_s for c in ("unknown", "requested", "used"))
    known = (requested - unknown).sum()
    wasted = pl.when((known <= 1e-9 * requested.sum()) & (requested.sum() > 0)).then(None).otherwise(
        (requested - unknown - used).sum() / 3600.0)
    return gap.group_by("t").agg(wasted.alias("wasted_hours")).sort("t")


def _rebucket(gap: pl.DataFrame, bucket_s: float) -> pl.DataFrame:
    """``gap`` (normalised, one row per bucket and group) with ``t`` moved to the start of its ``bucket_s`` bucket,
    aligned to gap_area's origin as the query aligns its own buckets; rows are not summed (waste_trend sums)."""
    origin_us = int(param_default("gap_area", "origin").timestamp() * 1_000_000)
    step_us = int(bucket_s * 1_000_000)
    t_us = pl.col("t").dt.epoch("us")
    start_us = origin_us + ((t_us - origin_us) // step_us) * step_us
    return gap.with_columns(pl.from_epoch(start_us, time_unit="us").dt.replace_time_zone("UTC")
                            .cast(gap.schema["t"]).alias("t"))


# ------------------------------------------------------------------ cluster layout
def layout_at(flt: Filters | None, at: dt.datetime, viewer_may_see_all: bool = True,
              viewer: str | None = None) -> pl.DataFrame:
    """The node x GPU slot grid at ``at`` (real history). Other users' job ids are hidden unless allowed."""
    store = str(store_dir())
    slots = _layout_slots(store, store_token(store), flt, at)
    return slots if viewer_may_see_all else shaping.anonymise_slots(slots, viewer)


@st.cache_data(show_spinner=False, max_entries=64, ttl=6 * 3600)
def _layout_slots(store: str, token: str, flt, at: dt.datetime) -> pl.DataFrame:
    occ = query("node_occupancy_at", flt, at=at)
    # efficiency of the jobs running at `at`, measured in the minute after it: only those jobs are in that window,
    # and with samples it is the utilisation at that time rather than over the whole run
    waste = query("job_waste", replace(flt or Filters(), start=at, end=at + dt.timedelta(minutes=1)))
    return shaping.node_slots(occ, dict(zip(waste["job_id"].to_list(), waste["gpu_efficiency"].to_list())))


def gantt_rows(flt: Filters | None, start: dt.datetime, end: dt.datetime, *, max_jobs: int = 1500,
               team_level: int = 3, viewer_may_see_all: bool = True, viewer: str | None = None) -> pl.DataFrame:
    """One row per (job, node) for the Gantt of real history in [start, end) (``job_timeline``)."""
    jobs = query("job_timeline", replace(flt or Filters(), start=start, end=end), limit_rows=max_jobs,
                 team_level=team_level)
    return shaping.gantt_from_jobs(jobs, start, end, viewer_may_see_all, viewer)
