"""The one module that owns the dashboard's caches and talks to ``queries`` and ``engine``.

- Queries are called by name (``queries.run``); a query or engine feature that does not exist yet raises
  ``NotAvailable`` so the page can say so instead of failing.
- ``st.cache_data`` holds result frames, keyed by the store's manifest token (a new ingest invalidates them)
  and the bound parameters; ``st.cache_resource`` holds engine inputs and simulation results (large, read-only,
  shared by every session), keyed the same way.
- Only the parameters a query declares are passed; a global filter a query does not take is reported by
  ``ignored_filters`` so the page can say "this view ignores ...", never silently.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl
import streamlit as st

import queries
from queries.store import Store

from . import config as config_mod
from . import shaping
from .shaping import ShapeError


class NotAvailable(Exception):
    """A query, engine function or report hook this page needs is not there (yet)."""


class SimulationError(Exception):
    """The engine failed on a scenario; ``str`` is one line for the page."""


# ------------------------------------------------------------------ filters
@dataclass(frozen=True)
class Filters:
    """The sidebar's global filters. ``end`` is exclusive; ``account`` selects a subtree (prefix)."""
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    cluster: str | None = None
    partition: str | None = None
    account: str | None = None
    state: str | None = None
    job_class: str | None = None

    def params(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def describe(self) -> str:
        parts = []
        if self.start and self.end:
            parts.append(f"{self.start:%Y-%m-%d} – {(self.end - dt.timedelta(seconds=1)):%Y-%m-%d}")
        parts += [f"{k.replace('_', ' ')} {v}" for k, v in asdict(self).items()
                  if v is not None and k not in ("start", "end")]
        return ", ".join(parts) or "everything"


# Names a query may use for a global filter (first match wins).
FILTER_ALIASES = {
    "start": ("start",), "end": ("end",), "cluster": ("cluster",), "partition": ("partition",),
    "account": ("account", "account_prefix", "team"), "state": ("state",), "job_class": ("job_class", "class"),
}


def config() -> config_mod.Config:
    return config_mod.load()


def store_dir() -> Path:
    return config().store


def store_token(store: Path | str | None = None) -> str:
    """Changes whenever the store's content changes (manifest version, or the files' mtimes for a flat store)."""
    s = Store(store or store_dir())
    if s.manifest_path.exists():
        st_ = s.manifest_path.stat()
        return f"m{s.manifest().get('version', 0)}:{st_.st_mtime_ns}"
    files = [s.files(t) for t in ("jobs", "nodes", "samples")]
    return "f" + ":".join(str(Path(f).stat().st_mtime_ns) for fs in files for f in fs)


def available(name: str) -> bool:
    return name in queries.names()


def declared(name: str) -> set[str]:
    return {p.name for p in queries.load(name).params}


def _bind_filters(name: str, filters: Filters | None) -> tuple[dict, list[str]]:
    if filters is None:
        return {}, []
    names = declared(name)
    bound, ignored = {}, []
    for key, value in filters.params().items():
        target = next((a for a in FILTER_ALIASES[key] if a in names), None)
        if target is None:
            ignored.append(key.replace("_", " "))
        else:
            bound[target] = value
    return bound, ignored


def ignored_filters(name: str, filters: Filters | None) -> list[str]:
    """Global filters that are set but that query ``name`` does not take."""
    if not available(name):
        return []
    return _bind_filters(name, filters)[1]


@st.cache_data(show_spinner=False, max_entries=512, ttl=6 * 3600)
def _run(store: str, token: str, name: str, params_json: str) -> pl.DataFrame:
    params = json.loads(params_json)
    for key in list(params):
        if isinstance(params[key], dict) and "__dt" in params[key]:
            params[key] = dt.datetime.fromisoformat(params[key]["__dt"])
    return queries.run(name, store=store, **params)


def _jsonable(params: dict) -> str:
    return json.dumps({k: ({"__dt": v.isoformat()} if isinstance(v, dt.datetime) else v)
                       for k, v in sorted(params.items())}, sort_keys=True)


def query(name: str, filters: Filters | None = None, store: Path | str | None = None, **params) -> pl.DataFrame:
    """Run query ``name`` with the global filters it declares plus ``params`` (cached)."""
    if not available(name):
        raise NotAvailable(f"the `{name}` query is not available yet")
    bound, _ = _bind_filters(name, filters)
    names = declared(name)
    bound.update({k: v for k, v in params.items() if k in names and v is not None})
    store = str(store or store_dir())
    return _run(store, store_token(store), name, _jsonable(bound))


def query_raw(name: str, store: Path | str | None = None, **params) -> pl.DataFrame:
    """Uncached run (benchmarks measure the bare query time with it)."""
    return queries.run(name, store=str(store or store_dir()), **params)


# ------------------------------------------------------------------ filter options
@dataclass(frozen=True)
class Options:
    clusters: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    accounts: list[str] = field(default_factory=list)   # every subtree prefix: org, org/group, org/group/team
    states: list[str] = field(default_factory=list)
    job_classes: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    first: dt.datetime | None = None
    last: dt.datetime | None = None
    jobs: int = 0


@st.cache_data(show_spinner=False, max_entries=16)
def _options(store: str, token: str) -> Options:
    s = Store(store)
    files = s.files("jobs")
    if not files:
        return Options()
    cols = ["cluster", "partition", "account", "state", "job_class", "user", "submit", "start", "end"]
    lf = pl.scan_parquet(files, hive_partitioning=False, missing_columns="insert",
                         extra_columns="ignore").select(cols)
    uniq = {c: lf.select(pl.col(c).drop_nulls().unique().sort()).collect()[c].to_list()
            for c in ("cluster", "partition", "account", "state", "job_class", "user")}
    span = lf.select(pl.col("submit").min().alias("first"),
                     pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max()).alias("last"),
                     pl.len().alias("jobs")).collect().row(0, named=True)
    return Options(uniq["cluster"], uniq["partition"], shaping.prefixes(uniq["account"]), uniq["state"],
                   uniq["job_class"], uniq["user"], span["first"], span["last"], int(span["jobs"]))


def options(store: Path | str | None = None) -> Options:
    """Values the sidebar offers (clusters, partitions, account subtrees, ...) and the store's time span."""
    store = str(store or store_dir())
    return _options(store, store_token(store))


def users_in(filters: Filters | None = None) -> list[str]:
    return options().users


def env_store() -> str | None:
    return os.environ.get("QUOTALOOP_STORE")


# ------------------------------------------------------------------ waste
# resource -> (label, level unit for curves, amount unit for totals, column prefix)
RESOURCES = {
    "gpu": ("GPU", "GPUs", "GPU-hours"),
    "cpu": ("CPU", "CPU cores", "core-hours"),
    "mem": ("Memory", "GB", "GB-hours"),
}
TEAM_LEVELS = {1: "org", 2: "group", 3: "team"}


def job_waste(flt: Filters | None, *, user: str | None = None, team_level: int = 3, team: str | None = None,
              limit: int | None = None) -> pl.DataFrame:
    """One row per job in the window (``job_waste`` query), with *_hours columns added for display."""
    df = query("job_waste", flt, user=user, team_level=team_level, limit_rows=limit)
    if team is not None:
        df = df.filter(pl.col("team") == team)
    return df.with_columns(
        [(pl.col(f"{r}_seconds_{k}") / 3600.0).alias(f"{r}_hours_{k}")
         for r in RESOURCES for k in ("requested", "used", "wasted") if f"{r}_seconds_{k}" in df.columns])


def waste_by(flt: Filters | None, by: str, resource: str, *, team_level: int = 3,
             team: str | None = None) -> pl.DataFrame:
    """Requested / used / wasted resource-hours and efficiency per ``by`` (team | user), largest waste first.

    ``team`` narrows to one team (drill-down). Efficiency = used / requested over the group's jobs (an area
    ratio, not a mean of job ratios). Cached as the small aggregate, so a rerun never reloads the per-job frame."""
    store = str(store_dir())
    return _waste_by(store, store_token(store), flt, by, resource, team_level, team)


@st.cache_data(show_spinner=False, max_entries=256, ttl=6 * 3600)
def _waste_by(store: str, token: str, flt, by: str, resource: str, team_level: int, team) -> pl.DataFrame:
    df = job_waste(flt, team_level=team_level, team=team)
    r = resource
    if df.is_empty():
        return pl.DataFrame(schema={by: pl.String, "jobs": pl.UInt32, "requested_hours": pl.Float64,
                                    "used_hours": pl.Float64, "wasted_hours": pl.Float64, "efficiency": pl.Float64})
    out = (df.group_by(by).agg(
        pl.len().alias("jobs"),
        pl.col(f"{r}_hours_requested").sum().alias("requested_hours"),
        pl.col(f"{r}_hours_used").sum().alias("used_hours"),
        pl.col(f"{r}_hours_wasted").sum().alias("wasted_hours"))
        .with_columns((pl.col("used_hours") / pl.when(pl.col("requested_hours") > 0)
                       .then(pl.col("requested_hours"))).alias("efficiency"))
        .sort(["wasted_hours", by], descending=[True, False], nulls_last=True))
    return out


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


def user_ranking(flt: Filters | None, order_by: str = "gpu", **params) -> pl.DataFrame:
    return query("user_ranking", flt, order_by=order_by, **params)


def team_ranking(flt: Filters | None, order_by: str = "gpu", team_level: int = 3) -> pl.DataFrame:
    return query("team_ranking", flt, order_by=order_by, team_level=team_level)


def quota_backtest(flt: Filters | None, **params) -> pl.DataFrame:
    return query("quota_backtest", flt, **params)


def gaming_check(flt: Filters | None, splits: int = 10) -> pl.DataFrame:
    """Per user: the legacy and recommended score before and after splitting every job into ``splits``."""
    for name in ("gaming_check", "split_gaming_check"):
        if available(name):
            return query(name, flt, splits=splits, n_splits=splits, split_n=splits)
    raise NotAvailable("the gaming check (`gaming_check` query) is not available yet")


# ------------------------------------------------------------------ researcher view
def user_row(flt: Filters | None, user: str) -> dict | None:
    """The user's row of the ranking over *all* users (ranks are relative, so never rank a lone user)."""
    df = user_ranking(flt)
    rows = df.filter(pl.col("user") == user)
    return rows.row(0, named=True) if rows.height else None


def low_efficiency_jobs(flt: Filters | None, user: str, limit: int = 20) -> pl.DataFrame:
    """The user's lowest-efficiency jobs with waste and a right-size suggestion (query of the waste issue)."""
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
    if me is None:
        return [f"{user} has no jobs in this window, so no coefficient."]
    lines = []
    if available("quota_backtest"):
        bt = query("quota_backtest", flt)
        shape = shaping.backtest_shape(bt)
        mine = bt.filter(pl.col(shape["user"]) == user).sort(shape["period"])
        if mine.height >= 2:
            a, b = mine.row(-2, named=True), mine.row(-1, named=True)
            before, after = a[shape["applied"]], b[shape["applied"]]
            verb = "stayed at" if abs(after - before) < 1e-9 else "moved from"
            text = (f"Your applied coefficient {verb} **{after:.2f} ×** in the last period" if verb == "stayed at"
                    else f"Your applied coefficient {verb} **{before:.2f} ×** to **{after:.2f} ×** in the last period")
            if b.get("held"):
                text += " — held, because that period had too few jobs or too little measured footprint to judge"
            elif shape["raw"] and b.get(shape["raw"]) is not None:
                text += (f" (that period alone would give {b[shape['raw']]:.2f} ×; EWMA smoothing, the dead band and "
                         "the per-period cap damp the move)")
            lines.append(text + ".")
    eff = me.get("rec_efficiency")
    lines.append("Efficiency term: your jobs used "
                 + (f"**{100 * eff:.0f} %** of the resource-time they held" if eff is not None else "an unknown share")
                 + " (absolute, not a rank: it rises when you right-size, whatever others do).")
    if me.get("rec_confidence") is not None:
        lines.append(f"Confidence term: **{me['rec_confidence']:.2f}** — how much history the score trusts "
                     "(more measured footprint → closer to 1).")
    if me.get("rec_demand") is not None:
        lines.append(f"Demand term: **{me['rec_demand']:.2f}** of the base quota actually used; the coefficient is "
                     "never raised far above what you use.")
    lines.append(f"Recommended coefficient **{me['rec_coefficient']:.2f} ×**; the legacy score (peak CPU, relative "
                 f"rank {me.get('legacy_rank')}) would give **{me['legacy_coefficient']:.2f} ×**.")
    return lines


# ------------------------------------------------------------------ overview
def capacity_gpus(cluster: str | None = None) -> float | None:
    """GPUs in the store's node list (of ``cluster``); None when the store has no node list."""
    from queries.budgets import store_capacity_gpus

    return _capacity(str(store_dir()), store_token(), cluster, store_capacity_gpus)


@st.cache_data(show_spinner=False, max_entries=32)
def _capacity(store: str, token: str, cluster: str | None, _fn) -> float | None:
    return _fn(store, cluster)


def occupancy_series(flt: Filters | None, bucket_s: float = 3600.0) -> pl.DataFrame:
    """Cluster-wide GPUs allocated and busy per bucket, with the node list's capacity: t, capacity, allocated, used."""
    gap = gap_series(flt, "gpu", by=None, bucket_s=bucket_s)
    cap = capacity_gpus(flt.cluster if flt else None)
    return gap.select("t", pl.lit(cap, dtype=pl.Float64).alias("capacity"),
                      pl.col("requested").alias("allocated"), "used")


def overview_totals(flt: Filters | None) -> dict:
    """Headline numbers of the window: resource-hours requested/used/wasted, jobs, users, occupancy, utilisation."""
    store = str(store_dir())
    return _overview_totals(store, store_token(store), flt)


@st.cache_data(show_spinner=False, max_entries=128, ttl=6 * 3600)
def _overview_totals(store: str, token: str, flt) -> dict:
    out: dict = {}
    if available("overview"):
        row = query("overview", flt).row(0, named=True)
        out["jobs"], out["users"] = int(row["jobs"] or 0), int(row["users"] or 0)
        for r, col in (("gpu", "gpu_hours"), ("cpu", "cpu_hours"), ("mem", "mem_tb_hours")):
            scale = 1000.0 if r == "mem" else 1.0  # GB-hours, like job_waste's memory columns
            for k in ("requested", "used", "wasted"):
                out[f"{r}_{k}_h"] = (row.get(f"{col}_{k}") or 0.0) * scale
    else:
        jobs = job_waste(flt)
        out = {"jobs": jobs.height, "users": jobs["user"].n_unique() if jobs.height else 0}
        for r in RESOURCES:
            for k in ("requested", "used", "wasted"):
                out[f"{r}_{k}_h"] = jobs[f"{r}_hours_{k}"].sum() if jobs.height else 0.0
    cap = capacity_gpus(flt.cluster if flt else None)
    span_h = ((flt.end - flt.start).total_seconds() / 3600.0) if flt and flt.start and flt.end else None
    out["capacity_gpus"] = cap
    out["occupancy"] = out["gpu_requested_h"] / (cap * span_h) if cap and span_h else None
    out["utilisation"] = out["gpu_used_h"] / out["gpu_requested_h"] if out["gpu_requested_h"] else None
    levels = dict(pyramid(flt))
    for key in ("occupancy", "utilisation"):
        if levels.get(key) is not None:  # the pyramid query knows node availability and usage coverage
            out[key] = levels[key]
    return out


def pyramid(flt: Filters | None) -> list[tuple[str, float | None]]:
    """(level, fraction) for availability -> occupancy -> impact -> utilisation (DOMAIN.md section 6)."""
    levels = ("availability", "occupancy", "impact", "utilisation")
    if available("metric_pyramid"):
        df = query("metric_pyramid", flt)
        if "team" in df.columns:
            df = df.filter(pl.col("team") == "(all)")
        if df.height and set(levels) <= set(df.columns):
            row = df.row(0, named=True)
            return [(k, row[k]) for k in levels]
    return [(k, None) for k in levels]


def waste_trend(flt: Filters | None, resource: str = "gpu", bucket_s: float = 86400.0) -> pl.DataFrame:
    """Wasted resource-hours per bucket, cluster-wide: t, wasted_hours."""
    gap = gap_series(flt, resource, by=None, bucket_s=bucket_s)
    if "requested_s" in gap.columns:
        wasted = (pl.col("requested_s") - pl.col("used_s")).sum() / 3600.0
    else:
        wasted = (pl.col("requested") - pl.col("used")).sum() * bucket_s / 3600.0
    return gap.group_by("t").agg(wasted.alias("wasted_hours")).sort("t")


# ------------------------------------------------------------------ reports (hook into dashboard/report.py)
REPORT_FORMATS = ("html", "csv", "parquet", "png", "svg")


def report_available() -> bool:
    try:
        from dashboard import report  # noqa: F401
    except ImportError:
        return False
    return hasattr(report, "build_report")


def report_window(flt: Filters) -> tuple[float, str]:
    """(window seconds, last day inclusive) of the sidebar window, in the report's whole-day terms."""
    if flt.start is None or flt.end is None:
        raise NotAvailable("pick a window in the sidebar first")
    days = max(1, round((flt.end - flt.start).total_seconds() / 86400.0))
    return days * 86400.0, (flt.end - dt.timedelta(days=1)).date().isoformat()


@st.cache_data(show_spinner=False, max_entries=32, ttl=3600)
def _report_files(store: str, token: str, window_s: float, end: str, audience: str, team: str | None,
                  user: str | None, formats: tuple) -> dict:
    import tempfile

    from dashboard.report import build_report, parse_formats

    with tempfile.TemporaryDirectory(prefix="quotaloop-report-") as out:
        paths = build_report(store, window_s, end=end, audience=audience, team=team, user=user,
                             formats=parse_formats(",".join(formats)), out_dir=out)
        return {Path(p).name: Path(p).read_bytes() for p in paths if Path(p).is_file()}


def report_files(flt: Filters, audience: str, *, team: str | None = None, user: str | None = None,
                 formats: tuple = ("html", "csv")) -> dict[str, bytes]:
    """Build the report of ``dashboard/report.py`` for the sidebar window; file name -> bytes (cached)."""
    if not report_available():
        raise NotAvailable("the report export (`dashboard/report.py`) is not available yet")
    window_s, end = report_window(flt)
    store = str(store_dir())
    return _report_files(store, store_token(store), window_s, end, audience, team, user, tuple(formats))


# ------------------------------------------------------------------ cluster layout
def layout_at(flt: Filters | None, at: dt.datetime, viewer_may_see_all: bool = True,
              viewer: str | None = None) -> pl.DataFrame:
    """The node x GPU slot grid at ``at`` (real history). Other users' job ids are hidden unless allowed."""
    store = str(store_dir())
    slots = _layout_slots(store, store_token(store), flt, at)
    if not viewer_may_see_all:
        slots = slots.with_columns(
            pl.when(pl.col("job").is_null() | pl.col("job").str.contains(f" · {viewer} · ", literal=True))
            .then(pl.col("job")).otherwise(pl.lit("another user's job")).alias("job"))
    return slots


@st.cache_data(show_spinner=False, max_entries=64, ttl=6 * 3600)
def _layout_slots(store: str, token: str, flt, at: dt.datetime) -> pl.DataFrame:
    occ = query("node_occupancy_at", flt, at=at)
    waste = query("job_waste", flt)
    running = set(occ["job_id"].drop_nulls().to_list())
    waste = waste.filter(pl.col("job_id").is_in(running))
    return shaping.node_slots(occ, dict(zip(waste["job_id"].to_list(), waste["gpu_efficiency"].to_list())))


def gantt_rows(flt: Filters | None, start: dt.datetime, end: dt.datetime, *, max_jobs: int = 1500,
               team_level: int = 3, viewer_may_see_all: bool = True, viewer: str | None = None) -> pl.DataFrame:
    """One row per (job, node) for the Gantt: node, start, end (clipped to [start, end)), team, label."""
    sub = Filters(start, end, *(getattr(flt, k) for k in ("cluster", "partition", "account", "state", "job_class"))) \
        if flt else Filters(start, end)
    jobs = query("job_timeline", sub, limit_rows=max_jobs, team_level=team_level)
    rows = []
    for j in jobs.iter_rows(named=True):
        if j["start"] is None or j["run_end"] is None:
            continue
        own = viewer_may_see_all or j["user"] == viewer
        label = f"{j['job_id']} {j['job_name']} · {j['user']} · {j['gpus']:g} GPUs" if own else \
            f"{j['team']} job · {j['gpus']:g} GPUs"
        for node in shaping.expand_hostlist(j["node_list"]) or ["(unplaced)"]:
            rows.append((node, max(j["start"], start), min(j["run_end"], end), j["team"] or "(none)", label))
    return pl.DataFrame(rows, schema={"node": pl.String, "start": pl.Datetime("us", "UTC"),
                                      "end": pl.Datetime("us", "UTC"), "team": pl.String, "label": pl.String},
                        orient="row")


# ------------------------------------------------------------------ simulation (engine)
def budgets_path() -> Path | None:
    return config().budgets_path


@st.cache_resource(show_spinner=False, max_entries=8)
def _budget_tree(path: str, mtime_ns: int):
    from engine import budget_tree

    return budget_tree.load(path)


def budgets():
    """The baseline budgets: the budget file's tree, else share 1 per leaf account (``scenario.default_budgets``).

    Returns (budgets, source label). A broken budget file raises ``engine.budget_tree.BudgetError``."""
    from dashboard import scenario

    path = budgets_path()
    if path is not None and Path(path).is_file():
        return _budget_tree(str(path), Path(path).stat().st_mtime_ns), str(path)
    return scenario.default_budgets(options().accounts), "equal shares per account (no budget file)"


def replay_filters(flt: Filters, days: int) -> Filters:
    """The window a replay covers: the last ``days`` days of the sidebar window (0 = all of it), its cluster."""
    start = flt.start
    if days and flt.end is not None:
        start = max(flt.start, flt.end - dt.timedelta(days=days)) if flt.start else flt.end - dt.timedelta(days=days)
    return Filters(start, flt.end, flt.cluster)


def sim_cluster(flt: Filters | None) -> str | None:
    """The one cluster a simulation replays: the sidebar's, else the one with the most jobs."""
    opts = options()
    if flt is not None and flt.cluster:
        return flt.cluster
    return opts.clusters[0] if len(opts.clusters) == 1 else _largest_cluster(str(store_dir()), store_token())


@st.cache_data(show_spinner=False, max_entries=8)
def _largest_cluster(store: str, token: str) -> str | None:
    df = query("filter_options") if available("filter_options") else pl.DataFrame()
    if df.height and {"field", "value", "jobs"} <= set(df.columns):
        c = df.filter(pl.col("field") == "cluster").sort("jobs", descending=True)
        return c["value"][0] if c.height else None
    return (options().clusters or [None])[0]


@st.cache_resource(show_spinner=False, max_entries=8)
def _engine_inputs(store: str, token: str, start, end, cluster):
    s = Store(store)
    jobs = s.read("jobs")
    nodes = s.read("nodes")
    if cluster is not None:
        jobs = jobs.filter(pl.col("cluster") == cluster)
        nodes = nodes.filter(pl.col("cluster") == cluster)
    if start is not None:
        jobs = jobs.filter(pl.col("submit") >= start)
    if end is not None:
        jobs = jobs.filter(pl.col("submit") < end)
    return jobs.sort("submit", "job_id"), nodes


def engine_inputs(flt: Filters | None):
    """(jobs submitted in the window on the simulated cluster, that cluster's nodes) — shared, read-only."""
    store = str(store_dir())
    return _engine_inputs(store, store_token(store), flt.start if flt else None, flt.end if flt else None,
                          sim_cluster(flt))


@st.cache_resource(show_spinner=False, max_entries=24)
def _simulate(store: str, token: str, start, end, cluster, scn, budgets_key: str):
    import engine
    from dashboard import scenario

    jobs, nodes = _engine_inputs(store, token, start, end, cluster)
    if jobs.is_empty():
        raise NotAvailable("no jobs were submitted in this window on this cluster, so there is nothing to replay")
    if nodes.is_empty():
        raise NotAvailable("the store has no node list for this cluster; the simulator needs one")
    try:
        return engine.simulate(jobs, nodes, scenario.sim_config(scn, budgets()[0]))
    except engine.ConfigError as exc:
        raise SimulationError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - an engine bug must read as a message, never a traceback
        raise SimulationError(f"{type(exc).__name__}: {exc}") from exc


def simulate(flt: Filters | None, scn):
    """The engine's replay of the window under scenario ``scn`` (cached by store, window, cluster, scenario)."""
    store = str(store_dir())
    path = budgets_path()
    bkey = f"{path}:{Path(path).stat().st_mtime_ns}" if path and Path(path).is_file() else "default"
    return _simulate(store, store_token(store), flt.start if flt else None, flt.end if flt else None,
                     sim_cluster(flt), scn, bkey)


def is_cached(flt: Filters | None, scn) -> bool:
    """Whether this scenario's run is already cached (the page then skips the progress display)."""
    return (_scenario_key(flt, scn)) in st.session_state.get("sim_done", set())


def _scenario_key(flt, scn) -> tuple:
    return (str(store_dir()), store_token(), flt.start if flt else None, flt.end if flt else None,
            sim_cluster(flt), scn)


def mark_done(flt, scn) -> None:
    st.session_state.setdefault("sim_done", set()).add(_scenario_key(flt, scn))
    st.session_state["last_scenario"] = (flt, scn)


def last_scenario():
    """(SimResult, description) of the session's most recent scenario, or None."""
    last = st.session_state.get("last_scenario")
    if not last:
        return None
    flt, scn = last
    return simulate(flt, scn), scn.describe()


def sim_gantt_rows(result, see_all: bool, viewer: str | None, max_rows: int = 6000) -> pl.DataFrame:
    """Gantt rows (node, start, end, team, label) from a simulation's node x time timeline."""
    tl = result.timeline
    if tl.is_empty():
        return pl.DataFrame(schema={"node": pl.String, "start": pl.Datetime("us", "UTC"),
                                    "end": pl.Datetime("us", "UTC"), "team": pl.String, "label": pl.String})
    jobs = result.jobs.select("job_id", "user", "account", "job_name")
    df = tl.join(jobs, on="job_id", how="left").sort("start").head(max_rows)
    own = pl.lit(True) if see_all else (pl.col("user") == viewer)
    label = pl.when(own).then(pl.format("{} {} · {} · {} GPUs · {}", "job_id", "job_name", "user", "gpus", "ended_by")) \
        .otherwise(pl.format("{} job · {} GPUs", "account", "gpus"))
    return df.select("node", "start", "end", pl.col("account").fill_null("(none)").alias("team"), label.alias("label"))


def compare(base, scen) -> pl.DataFrame:
    import engine

    return engine.compare(base, scen)


def sim_occupancy(base, scen, bucket_s: float = 3600.0) -> pl.DataFrame:
    """t, baseline, scenario: GPUs allocated per bucket in both runs (outer-joined on time)."""
    from dashboard import scenario

    a = scenario.occupancy_series(base, bucket_s).rename({"gpus": "baseline"})
    b = scenario.occupancy_series(scen, bucket_s).rename({"gpus": "scenario"})
    return a.join(b, on="t", how="full", coalesce=True).fill_null(0.0).sort("t")
