"""What each audience's report contains: named queries in, report sections (KPIs, charts, tables) out.

Invariants:
- Every number comes from a named query (``queries.run``) over one DuckDB connection; this module only picks,
  renames and converts units (seconds -> hours), so a figure in the report can be checked against its query.
- Scope is applied by the queries' own filters: a user report passes ``user`` to every query and holds no
  row about anybody else (no rankings, no other users' jobs); a manager report passes the team's account
  subtree (``account_prefix``) except for the one cluster-wide comparison figure, which is an aggregate.
- A window without jobs yields sections that say so, never an error.
- The resource follows the data: ``Runner.resource`` (the ``selection_resource`` query over the scope) is "gpu"
  or "cpu"; on a selection without GPUs (a CPU-only cluster or partition) the headline, pyramid, gap charts,
  rankings, the jobs table and fair share are in core-hours, and a GPU cluster's report is unchanged.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

import queries
from engine.config import WEEK_S
from queries.analytics import budgets as qb

from .files import Window
from .html import Chart, Kpi, Section, Table, fmt
from ..shaping import RESOURCE_WORDS, known_usage

BACKTEST_PERIODS = 8


@dataclass
class Scope:
    window: Window
    audience: str                 # platform | manager | user
    team: str | None = None       # account subtree
    user: str | None = None
    team_level: int = 3
    filters: dict = field(default_factory=dict)  # cluster, partition, state, job_class


class Runner:
    """Runs named queries on one connection with the scope's window and filters bound."""

    def __init__(self, con, scope: Scope, store=None):
        self.con, self.scope, self.store = con, scope, store
        self._resource: str | None = None

    @property
    def resource(self) -> str:
        """"gpu" or "cpu": what this scope is measured in (``selection_resource``, asked once per report)."""
        if self._resource is None:
            self._resource = str(self("selection_resource").row(0, named=True)["resource"])
        return self._resource

    def __call__(self, name: str, **params) -> pl.DataFrame:
        s = self.scope
        base = {"start": s.window.start, "end": s.window.end, "team_level": s.team_level,
                "account_prefix": s.team, "user": s.user, **s.filters}
        base.update(params)
        return queries.run(name, con=self.con, **{k: v for k, v in base.items() if v is not None})


def _bucket_s(window: Window) -> float:
    return 3600.0 * (1 if window.days <= 7 else 3 if window.days <= 14 else 6 if window.days <= 31 else 24)


def _hours(col: str, alias: str | None = None) -> pl.Expr:
    return (pl.col(col) / 3600.0).alias(alias or col)


WORDS = RESOURCE_WORDS  # (name, what is held, hours, short hours) of GPU- or core-hours


# ------------------------------------------------------------------ overview
# resource -> the headline's (resource, unit, overview column prefix, efficiency column): GPU-hours first with
# CPU-hours beside them, or core-hours alone where the selection has no GPUs (its GPU figures are all zero)
HEADLINE = {"gpu": (("GPU", "GPU-hours", "gpu_hours", "gpu_efficiency"),
                    ("CPU", "CPU-hours", "cpu_hours", "cpu_efficiency")),
            "cpu": (("CPU", "core-hours", "cpu_hours", "cpu_efficiency"),)}


def overview(q: Runner, scope: Scope) -> tuple[Section, dict]:
    ov = q("overview").row(0, named=True)
    for p, e in (("gpu_hours", "gpu_efficiency"), ("cpu_hours", "cpu_efficiency"), ("mem_tb_hours", "mem_efficiency")):
        # none of the requested hours has known usage: unknown, not "0 used, 0 wasted" (as on the dashboard)
        ov[f"{p}_used"], ov[f"{p}_wasted"] = known_usage(ov[f"{p}_requested"], ov[f"{p}_used"], ov[f"{p}_wasted"])
        ov[e] = ov[e] if ov[f"{p}_used"] is not None else None
    res = q.resource
    name, held, hours, _ = WORDS[res]
    pyr = q("metric_pyramid", resource=res) if scope.audience != "user" else None  # '(all)' = every job in scope
    pyr_row = None if pyr is None else next((r for r in pyr.iter_rows(named=True) if r["team"] == "(all)"), None)
    (r, unit, col, eff), *beside = HEADLINE[res]
    kpis = [
        Kpi("jobs", ov["jobs"], "int", f"{ov['users'] or 0} users"),
        Kpi(f"{unit} requested", ov[f"{col}_requested"], "num1"),
        Kpi(f"{unit} used", ov[f"{col}_used"], "num1"),
        Kpi(f"{unit} wasted", ov[f"{col}_wasted"], "num1", "requested − used"),
        Kpi(f"{r} efficiency", ov[eff], "pct", "used / requested"),
        *(Kpi(f"{u} wasted", ov[f"{c}_wasted"], "num0", f"efficiency {_pct(ov[e])}") for _, u, c, e in beside),
        Kpi("memory TB-hours wasted", ov["mem_tb_hours_wasted"], "num2", f"efficiency {_pct(ov['mem_efficiency'])}"),
        Kpi("median queue wait", ov["wait_median_s"], "dur", f"p90 {_dur(ov['wait_p90_s'])}"),
    ]
    if pyr_row and scope.audience != "user":
        kpis.append(Kpi(f"{name} occupancy", pyr_row["occupancy"], "pct", f"allocated / available {hours}"
                        + (" (this team's part)" if scope.audience == "manager" else "")))
    charts = []
    if pyr_row and scope.audience != "user":
        levels = pl.DataFrame({"level": ["availability", "occupancy", "impact", "utilisation"],
                               "value": [pyr_row[k] for k in ("availability", "occupancy", "impact", "utilisation")]},
                              schema={"level": pl.String, "value": pl.Float64})
        charts.append(Chart("pyramid", "pyramid", levels, f"Metric pyramid: where {name} capacity goes",
                            "Each bar is a share of the level above: healthy hardware, allocated, funded work, "
                            "actually used. The biggest drop is where capacity is lost."))
    daily = q("gap_area", resource=res, bucket_s=86_400.0, origin=scope.window.start, group_by="none")
    trend = daily.select(pl.col("bucket_start").alias("t"), _hours("wasted_seconds", "value"))
    # every held resource-second with unknown usage (an SWF log without CPU times): a row of zeros would read
    # "no waste", so the chart is left out and a note says why
    held_s = daily["requested_seconds"].fill_null(0.0) if daily.height else pl.Series([0.0])
    known_s = held_s - (daily["unknown_usage_seconds"].fill_null(0.0) if daily.height else 0.0)
    usage_unknown = held_s.sum() > 0 and known_s.max() <= 1e-9 * held_s.max()
    if not usage_unknown:
        charts.append(Chart("waste_trend", "trend", trend, f"{hours} requested but not used, per day",
                            f"Bar height is {hours} held by jobs but idle that day; a rising trend means requests "
                            "are getting more inflated.", {"unit": hours}))
    totals = pl.DataFrame([
        {"resource": r, "unit": u, "requested": ov[f"{p}_requested"], "used": ov[f"{p}_used"],
         "wasted": ov[f"{p}_wasted"], "efficiency": ov[e]}
        for r, u, p, e in HEADLINE[res] + (("memory", "TB-hours", "mem_tb_hours", "mem_efficiency"),)],
        schema={"resource": pl.String, "unit": pl.String, "requested": pl.Float64, "used": pl.Float64,
                "wasted": pl.Float64, "efficiency": pl.Float64})
    tables = [Table("totals", "Requested, used and wasted resource-hours", totals,
                    [("resource", "resource", "text"), ("unit", "unit", "text"), ("requested", "requested", "num1"),
                     ("used", "used", "num1"), ("wasted", "wasted", "num1"), ("efficiency", "efficiency", "pct")])]
    notes = []
    if usage_unknown:
        notes.append(f"No job in the window records its usage of {hours}: the waste per day is unknown, not 0.")
    if ov["jobs_without_usage"]:
        notes.append(f"{ov['jobs_without_usage']:,} job(s) have no usage data; their requests count in 'requested' "
                     "but not in efficiency.")
    if pyr_row and pyr_row.get("capacity_source") and scope.audience != "user":
        notes.append(f"Capacity {pyr_row['capacity_gpus']:,.0f} {held} (source: {pyr_row['capacity_source']})."
                     + (" The selection has no GPUs, so the report is in core-hours." if res == "cpu" else ""))
    title = {"user": "Your jobs at a glance", "manager": "Your team at a glance"}.get(scope.audience, "Overview")
    # capacity_gpus: the capacity of the chosen resource (CPU cores for "cpu", as metric_pyramid's column)
    ov = {**ov, "capacity_gpus": pyr["capacity_gpus"].max() if pyr is not None and pyr.height else None,
          "resource": res}
    return Section("overview", title, "Jobs count by the part of their run inside the window.", kpis, charts,
                   tables, notes), ov


def _pct(v) -> str:
    return "unknown" if v is None or v != v else f"{100 * v:.1f} %"


def _num(v, digits: int = 2) -> str:
    return "unknown" if v is None or v != v else f"{v:.{digits}f}"


def _dur(v) -> str:
    return fmt(v, "dur")


# ------------------------------------------------------------------ gap areas
def gap(q: Runner, scope: Scope, capacity_gpus: float | None) -> Section:
    """``capacity_gpus``: the capacity of ``q.resource`` (GPUs, or CPU cores on a selection without GPUs)."""
    by = {"platform": "team", "manager": "user", "user": "none"}[scope.audience]
    bucket = _bucket_s(scope.window)
    charts, frames = [], []
    main = q.resource
    order = (("gpu", "GPUs"), ("cpu", "CPUs"), ("mem", "GB")) if main == "gpu" else \
        (("cpu", "CPU cores"), ("mem", "GB"))  # no GPU curve (all zero) where there are no GPUs
    for resource, unit in order:
        df = q("gap_area", resource=resource, bucket_s=bucket, origin=scope.window.start, group_by=by)
        frames.append(df)
        total = (df.group_by("bucket_start").agg(pl.col("requested_level", "used_level", "unknown_usage_level").sum())
                 .sort("bucket_start").select(pl.col("bucket_start").alias("t"),
                                              pl.col("requested_level").alias("requested"),
                                              pl.col("used_level").alias("used"),
                                              pl.col("unknown_usage_level").alias("unknown")))
        hours = f"{bucket / 3600:g}-hour"
        if resource == main and capacity_gpus and scope.audience == "platform":
            occ = total.select("t", pl.lit(float(capacity_gpus)).alias("capacity"),
                               pl.col("requested").alias("allocated"), "used")
            charts.append(Chart(f"{resource}_occupancy", "occupancy", occ, f"{unit}: capacity vs allocated vs busy",
                                f"Mean over {hours} buckets. The dashed line is the cluster's {unit}; the space "
                                "between allocated and busy is held but idle: the waste the queue cannot see.",
                                {"unit": unit}))
        else:
            charts.append(Chart(f"{resource}_gap", "gap", total,
                                f"{resource.upper() if resource != 'mem' else 'Memory'}: requested vs used {unit}",
                                f"Mean over {hours} buckets; the band between requested and used is waste.",
                                {"unit": unit}))
        if by != "none" and resource == main:
            grouped = df.select(pl.col("bucket_start").alias("t"), pl.col("group_key").alias("group"),
                                pl.col("requested_level").alias("requested"), pl.col("used_level").alias("used"),
                                pl.col("unknown_usage_level").alias("unknown"))
            charts.append(Chart(f"{resource}_gap_by_{by}", "gap_by", grouped,
                                f"Requested vs used {unit} by {by} (hatched = held but unused)",
                                f"Per {by}: the solid band is used, the hatched band above it held but unused; "
                                f"{by}s beyond the 8 largest wasters are summed as 'other'.", {"unit": unit}))
    series = pl.concat(frames, how="diagonal_relaxed")
    section = Section("gap", "Request vs usage over time",
                      "Waste is an area: what jobs held minus what they used, integrated over time.", charts=charts,
                      tables=[Table("gap_area", "Requested and used resource-seconds per bucket", series,
                                    [("resource", "resource", "text"), ("group_key", by, "text"),
                                     ("bucket_start", "bucket (UTC)", "dt"), ("requested_level", "requested", "num1"),
                                     ("used_level", "used", "num1"),
                                     ("unknown_usage_level", "usage unknown", "num1")], max_rows=0)])
    if series.is_empty():
        section.empty = "No job ran in this window."
    return section


# ------------------------------------------------------------------ jobs
def jobs_table(q: Runner, scope: Scope) -> Table:
    """Every job in scope with its waste (job_waste), most wasted GPU-hours (core-hours without GPUs) first; the
    HTML shows the top."""
    first = ("gpu_seconds_wasted", "cpu_seconds_wasted") if q.resource == "gpu" else ("cpu_seconds_wasted",)
    jw = (q("job_waste")  # comes by job; most wasted first here, ties in job order
          .sort(*first, descending=True, nulls_last=True, maintain_order=True)
          .with_columns(_hours("gpu_seconds_wasted", "gpu_hours_wasted"),
                        _hours("cpu_seconds_wasted", "cpu_hours_wasted")))
    cols = [("job_name", "job", "text"), ("job_id", "id", "text")]
    if scope.audience != "user":
        cols.append(("user", "user", "text"))
    cols += [("job_class", "class", "text"), ("state", "state", "text"), ("in_window_s", "ran in window", "dur")]
    if q.resource == "cpu":
        cols += [("cpus", "cores", "num0"), ("cpu_hours_wasted", "core-h wasted", "num1"),
                 ("cpu_efficiency", "CPU eff.", "pct")]
        return Table("jobs", "Jobs that wasted the most core-hours", jw, cols)
    cols += [("gpus", "GPUs", "num0"), ("gpu_hours_wasted", "GPU-h wasted", "num1"),
             ("gpu_efficiency", "GPU eff.", "pct"), ("cpu_hours_wasted", "CPU-h wasted", "num0"),
             ("cpu_efficiency", "CPU eff.", "pct")]
    return Table("jobs", "Jobs that wasted the most GPU-hours", jw, cols)


# ------------------------------------------------------------------ rankings
RANK_COLS = [("user", "user", "text"), ("main_team", "team", "text"), ("job_count", "jobs", "int"),
             ("gpu_hours_wasted", "GPU-h wasted", "num1"), ("gpu_efficiency", "GPU eff.", "pct"),
             ("cpu_hours_wasted", "CPU-h wasted", "num0"), ("cpu_efficiency", "CPU eff.", "pct"),
             ("mem_tb_hours_wasted", "mem TB-h wasted", "num2"),
             ("footprint_gpu_equiv_hours", "footprint GPU-eq-h", "num1"),
             ("legacy_coefficient", "legacy coef.", "coef"), ("rec_coefficient", "recommended coef.", "coef")]


# without GPUs: the core-hour columns lead and the GPU ones (all zero) are left out
CPU_RANK_COLS = [("cpu_hours_wasted", "core-h wasted", "num1") if c[0] == "cpu_hours_wasted" else c
                 for c in RANK_COLS if not c[0].startswith("gpu_")]


def rankings(q: Runner, scope: Scope) -> Section:
    res = q.resource
    name, _, hours, _ = WORDS[res]
    cols = RANK_COLS if res == "gpu" else CPU_RANK_COLS
    users = q("user_ranking", order_by=res)
    ranked = users.select(pl.col("user").alias("label"), pl.col(f"{res}_hours_wasted").alias("value"),
                          pl.col(f"{res}_efficiency").alias("efficiency"))
    charts = [Chart("top_wasters", "ranked", ranked, f"Largest wasters: {hours} held but unused, per user",
                    f"Longest bar = most {hours} wasted in absolute terms; colour is {name} efficiency, so a long red "
                    "bar is big and inefficient.", {"unit": hours, "top_n": 15})]
    tables = [Table("user_ranking", f"Users by wasted {hours}", users, cols)]
    if scope.audience == "platform":
        teams = q("team_ranking", order_by=res)
        tables.append(Table("team_ranking", f"Teams by wasted {hours}", teams,
                            [("team", "team", "text"), ("user_count", "users", "int")] + cols[2:]))
    tables.append(jobs_table(q, scope))
    section = Section("rankings", "Waste rankings",
                      "Ranked by absolute waste (resource-hours), not by ratio: a small job with an ugly percentage "
                      "costs little. The legacy coefficient is the old relative-rank score, shown for comparison; "
                      "the recommended one rests on absolute efficiency, demand and confidence.",
                      charts=charts, tables=tables)
    if users.is_empty():
        section.empty = "No jobs to rank in this window."
    return section


# ------------------------------------------------------------------ quota loop
def quota(q: Runner, scope: Scope) -> Section:
    end = scope.window.end
    params = {p.name: p.default for p in queries.load("quota_backtest").params}
    bt = q("quota_backtest", start=end - dt.timedelta(seconds=BACKTEST_PERIODS * WEEK_S), end=end, origin=end,
           period_s=float(WEEK_S))
    section = Section("quota", "Quota coefficients: this week's changes and why",
                      f"A slow loop: each user's coefficient is recomputed weekly from that week's jobs, smoothed "
                      f"(EWMA α = {params['alpha']:g}), ignored inside a dead band of ±{params['dead_band']:g}, "
                      f"moved at most ±{params['max_step']:g} per week and kept in [{params['coef_min']:g}, "
                      f"{params['coef_max']:g}]. The last period is the window's last 7 days.")
    if bt.is_empty():
        section.empty = "No jobs in the back-test history of this window."
        section.tables = [Table("quota_changes", "Coefficient changes", bt, [])]
        return section
    last = bt["period_start"].max()
    prev = bt.filter(pl.col("period_start") == last - dt.timedelta(seconds=WEEK_S)).select(
        "user", pl.col("rec_efficiency").alias("previous_efficiency"))
    cur = (bt.filter(pl.col("period_start") == last).join(prev, on="user", how="left")
           .with_columns((pl.col("coefficient") - pl.col("coefficient_change")).alias("previous_coefficient")))
    cur = cur.with_columns(pl.Series("explanation", [explain(r, params) for r in cur.iter_rows(named=True)],
                                     dtype=pl.String))
    cur = cur.sort([pl.col("coefficient_change").abs(), "user"], descending=[True, False])
    if scope.audience == "user":
        cur = cur.drop("legacy_coefficient")  # a rank among one user means nothing
    top = cur.head(20 if scope.audience != "user" else 1)
    chart_frame = top.select(pl.col("user").alias("label"), pl.col("previous_coefficient").alias("previous"),
                             pl.col("coefficient").alias("current"))
    section.charts = [Chart("coefficients", "coef", chart_frame, "Quota coefficient: previous week → this week",
                            "Grey dot: last week's coefficient; diamond: this week's. Green line = raised, red = "
                            "cut; users with the largest change first.")]
    if scope.audience == "user":
        me = cur.row(0, named=True)
        section.title = "Your quota coefficient and why it moved"
        section.kpis = [Kpi("your coefficient now", me["coefficient"], "coef", "× the base quota"),
                        Kpi("change from last week", me["coefficient_change"], "delta")]
    else:
        section.kpis = [Kpi("users raised", cur.filter(pl.col("coefficient_change") > 0).height, "int"),
                        Kpi("users cut", cur.filter(pl.col("coefficient_change") < 0).height, "int"),
                        Kpi("users held or unchanged", cur.filter(pl.col("coefficient_change") == 0).height, "int")]
    section.tables = [
        Table("quota_changes", "This week's coefficient per user, with the reason", cur,
              [("user", "user", "text"), ("previous_coefficient", "previous", "coef"),
               ("coefficient", "now", "coef"), ("coefficient_change", "change", "delta"),
               ("rec_efficiency", "efficiency", "pct"), ("explanation", "why", "text")]),
        Table("quota_backtest", "Coefficient history (all periods)", bt.sort(["user", "period_start"]),
              [("user", "user", "text"), ("period_start", "week from", "dt"), ("job_count", "jobs", "int"),
               ("rec_efficiency", "efficiency", "pct"), ("raw_coefficient", "raw", "coef"),
               ("coefficient", "applied", "coef")], max_rows=0 if scope.audience != "user" else 12),
    ]
    return section


def explain(r: dict, p: dict) -> str:
    """One sentence on why a user's applied coefficient moved (or did not) in the last period."""
    now, change = r["coefficient"], r["coefficient_change"] or 0.0
    if r["held"]:
        return (f"Held at {now:.2f}×: only {r['job_count']} job(s) and {_num(r['known_gpu_equiv_hours'], 1)} "
                f"GPU-equivalent hours this week, below the minimum ({p['min_jobs']} jobs, "
                f"{p['min_gpu_equiv_hours']:g} h), so thin evidence does not move the quota.")
    eff = r["rec_efficiency"]
    prev_eff = r.get("previous_efficiency")
    why = (f"Efficiency {_pct(eff)}" + (f" (previous week {_pct(prev_eff)})" if prev_eff is not None else "")
           + f", confidence {_num(r['rec_confidence'])}, demand {_num(r['rec_demand'])} give a raw "
           f"coefficient of {_num(r['raw_coefficient'])}×; smoothed {_num(r['smoothed_coefficient'])}×. ")
    if abs(change) < 1e-9:
        return why + f"Within the dead band (±{p['dead_band']:g}) of the current {now:.2f}×: unchanged."
    if abs(abs(change) - p["max_step"]) < 1e-9:
        return why + f"Moved {change:+.2f} to {now:.2f}×, the largest step allowed per week."
    return why + f"Moved {change:+.2f} to {now:.2f}×."


# ------------------------------------------------------------------ fair share and waits
def _in_subtree(team: str | None, node: str) -> bool:
    return team is None or node == team or node.startswith(team + "/") or team.startswith(node + "/")


def _budget_attainment(q: Runner, scope: Scope, tree) -> tuple[pl.DataFrame, list[str]]:
    """Water-filled attainment from a budget tree (queries.analytics.budgets), shaped like fairshare_attainment."""
    res = qb.attainment(q.store, tree, scope.window.start, scope.window.end, con=q.con,
                        cluster=scope.filters.get("cluster"), unit=tree.unit or q.resource)
    fa = res.table.filter(pl.col("node").map_elements(lambda n: _in_subtree(scope.team, n), return_dtype=pl.Boolean)
                          & ((pl.col("demanded_gpu_hours") > 0) | (pl.col("kind") == "node")))
    notes = ["Entitlement from the budget tree, water-filled: what a team leaves idle flows to its siblings "
             "first; 'static' is share × capacity without that."] + list(res.warnings)
    return fa.rename({"node": "team"}).with_columns(pl.lit("budgets").alias("share_source")), notes


def fairshare(q: Runner, scope: Scope, tree=None) -> Section:
    if tree is not None:
        fa, notes = _budget_attainment(q, scope, tree)
    else:
        fa, notes = q("fairshare_attainment", resource=q.resource), []
        if fa.height and fa["share_source"].drop_nulls().unique().to_list() == ["equal"]:
            notes.append("No budget tree given (--budgets): shares are equal per account level "
                         "(see queries/README.md).")
    frame = fa.select("team", pl.col("entitled_gpu_hours").alias("entitled"),
                      pl.col("demanded_gpu_hours").alias("demanded"), pl.col("received_gpu_hours").alias("received"),
                      "attainment")
    att = fa.filter(pl.col("attainment").is_not_null())["attainment"]
    _, _, hours, short = WORDS[tree.unit or q.resource if tree is not None else q.resource]
    kpis = [Kpi("mean attainment", att.clip(upper_bound=1.0).mean() if att.len() else None, "pct",
                f"{att.len()} teams with demand; above 100 % counts as 100 %"),
            Kpi("worst attainment", att.min() if att.len() else None, "pct"),
            Kpi("teams ≥ 95 %", int((att >= 0.95).sum()), "int", f"of {att.len()}")]
    if scope.audience == "manager":
        if tree is not None:
            everyone = _budget_attainment(q, Scope(scope.window, "platform", filters=scope.filters), tree)[0]
        else:
            everyone = q("fairshare_attainment", account_prefix=None, resource=q.resource)
        everyone = everyone["attainment"].drop_nulls()
        kpis.append(Kpi("cluster-wide mean attainment", everyone.clip(upper_bound=1.0).mean()
                        if everyone.len() else None, "pct", "all teams, for comparison"))
    section = Section("fairshare", f"Fair share: {hours} received vs entitlement",
                      "attainment = received / min(entitled, demanded): 100 % means a team got all it was entitled "
                      "to, or all it asked for if it asked for less.", kpis,
                      [Chart("attainment", "attainment", frame, f"{hours} entitled, demanded and received per team",
                             "Bars compare what each team was entitled to, asked for and got; the diamond is "
                             "attainment on the right axis.", *([{"unit": hours}] if hours != "GPU-hours" else []))],
                      [Table("fairshare", "Attainment per team", fa,
                             [("team", "team", "text")] + ([("share", "share", "pct")] if tree is None else [])
                             + [("entitled_gpu_hours", f"entitled {short}", "num1"),
                              ("demanded_gpu_hours", f"demanded {short}", "num1"),
                              ("received_gpu_hours", f"received {short}", "num1"), ("attainment", "attainment", "pct")]
                             + ([("jobs_waiting", "jobs waiting", "int")] if tree is None else
                                [("attainment_static", "vs static share", "pct")]))], notes)
    if fa.is_empty():
        section.empty = f"No {'GPU' if hours == 'GPU-hours' else 'CPU'} demand in this window."
    return section


def waits(q: Runner, scope: Scope) -> Section:
    qw = q("queue_waits")
    per_class = qw.filter((pl.col("team") == "(all)")).sort(pl.col("job_class") == "(all)", "job_class")
    frame = per_class.filter(pl.col("job_class") != "(all)").select(
        "job_class", *[(pl.col(f"wait_{k}_s") / 60).alias(f"{v}_min") for k, v in
                       (("median", "p50"), ("p90", "p90"), ("p99", "p99"))])
    section = Section("waits", "Queue waits by job class",
                      "Wait = start − submit, for jobs that started in the window; jobs that never started are "
                      "counted beside (their wait is still open).", charts=[
                          Chart("queue_waits", "waits", frame, "Queue wait by job class: median, p90, p99",
                                "Log scale: each step up is ten times longer. A tall p90/p99 bar beside a short "
                                "median means a few jobs waited very long; no bar means no wait.")],
                      tables=[Table("queue_waits", "Queue waits", per_class,
                                    [("job_class", "class", "text"), ("jobs_started", "started", "int"),
                                     ("jobs_never_started", "never started", "int"),
                                     ("wait_median_s", "median", "dur"), ("wait_p90_s", "p90", "dur"),
                                     ("wait_p99_s", "p99", "dur")])])
    if frame.is_empty():
        section.empty = "No job started in this window."
    return section


# ------------------------------------------------------------------ validation (issue 18)
VALIDATION_COLUMNS = [("scope", "scope", "text"), ("n", "jobs", "int"), ("mean_log_s", "mean wait logged", "dur"),
                      ("mean_sim_s", "simulated", "dur"), ("mean_rel_err", "error", "pct"),
                      ("p90_log_s", "p90 logged", "dur"), ("p90_sim_s", "simulated", "dur"),
                      ("p90_rel_err", "error", "pct"), ("spearman", "Spearman", "num2"),
                      ("zero_wait_share_log", "started at once logged", "pct"),
                      ("zero_wait_share_sim", "simulated", "pct")]


def validation(q: Runner, scope: Scope, tree=None) -> Section:
    """How far to trust a what-if over this window: the what-if baseline (``dashboard.whatif.runner``'s, the Fair
    share page's fairshare / easy) replayed warm-started over the window and compared with the log
    (``engine.fidelity`` through ``whatif.fidelity``; one replay). Cluster-wide whatever the team or partition:
    the simulator replays the whole cluster. The figures are ``engine.fidelity``'s, not a named query's."""
    from dashboard.cli.validate import rows
    from dashboard.whatif import calibration, runner
    from dashboard.whatif.spec import ScenarioSpec

    cal = None
    try:
        cal = calibration.resolve(q.store)  # the store's own, as the Fair share page and scenario apply it
        spec = ScenarioSpec.make("shares", sim_knobs=cal.for_policy("fairshare")[0] if cal else None)
        fid = runner.window_fidelity(q.store, tree, scope.window.start, scope.window.end,
                                     cluster=scope.filters.get("cluster"), spec=spec)
    except ValueError as exc:
        fid = {"available": False, "reason": f"the store's calibration cannot be used: {exc}"}
    except Exception as exc:  # noqa: BLE001 - a failed replay leaves the rest of the report standing, and says so
        fid = {"available": False, "reason": f"the replay failed: {type(exc).__name__}: {str(exc)[:200]}"}
    policy = fid.get("baseline", "fairshare/easy").replace("/", " queue, backfill ")
    if cal is not None:
        policy += ", under the " + cal.describe()
    intro = (f"The simulator's baseline (the what-if baseline: {policy}) replayed over "
             "this window from the logged state at its start and compared with what the cluster logged, job by job: "
             "a what-if's delta smaller than these errors is inside the simulator's error. Cluster-wide: team, "
             "partition, state and class filters do not apply to a replay.")
    section = Section("validation", "How far to trust a what-if: the simulator against the log", intro)
    if not fid.get("available"):
        section.empty = f"Not validated: {fid.get('reason', 'unknown')}."
        return section
    rep = fid["report"]
    o, occ = rep["overall"], rep["occupancy"]
    section.kpis = [Kpi("jobs compared", rep["jobs_compared"], "int", f"cluster {fid.get('cluster') or '(one)'}"),
                    Kpi("mean wait error", o["mean_rel_err"], "pct", "simulated vs logged"),
                    Kpi("p90 wait error", o["p90_rel_err"], "pct", "simulated vs logged"),
                    Kpi("Spearman of waits", o["spearman"], "num2", "rank agreement, 1 = same order"),
                    Kpi("occupancy simulated", occ.get("mean_sim"), "pct", f"logged {_pct(occ.get('mean_log'))}")]
    att = rep.get("attainment")
    if att and att.get("mean_abs_err") is not None:
        section.kpis.append(Kpi("attainment error", att["mean_abs_err"], "pct", "mean |error| per team, points"))
    frame = pl.DataFrame(rows(rep), infer_schema_length=None)
    section.tables = [Table("validation", "Waits logged vs simulated, per job class and size", frame,
                            [c for c in VALIDATION_COLUMNS if c[0] in frame.columns], max_rows=40)]
    section.notes = [fid["headline"], "Verdict: " + fid["verdict"]]
    if fid.get("layout_note"):
        section.notes.append("Layout: " + fid["layout_note"] + ".")
    return section


# ------------------------------------------------------------------ the user's own jobs
def own_jobs(q: Runner, scope: Scope) -> Section:
    low = q("user_low_efficiency_jobs")
    drivers = q("user_summary")
    section = Section("my_jobs", "Your most wasteful jobs and what to request instead",
                      "Per resource, your jobs that wasted the most resource-hours (held minus used over the run; "
                      "tiny control jobs and jobs that failed early are left out), with a right-sized request from "
                      "the job's own peak plus a margin, or from your similar jobs when there are enough of them. "
                      "Memory is per node in GiB, as --mem means it.",
                      tables=[jobs_table(q, scope),
                              Table("low_efficiency_jobs", "Most wasteful jobs", low,
                                    [("resource", "resource", "text"), ("job_name", "job", "text"),
                                     ("job_id", "id", "text"), ("state", "state", "text"),
                                     ("run_hours", "hours", "num1"), ("efficiency", "efficiency", "pct"),
                                     ("wasted_hours", "wasted", "num1"), ("unit", "unit", "text"),
                                     ("suggestion", "suggestion", "text")], max_rows=30),
                              Table("score_drivers", "The jobs that drove your score", drivers,
                                    [("rank", "#", "int"), ("job_name", "job", "text"), ("job_id", "id", "text"),
                                     ("wasted_gpu_equiv_hours", "wasted GPU-eq-h", "num1"),
                                     ("share_of_user_waste", "share of your waste", "pct"),
                                     ("rec_efficiency_without_job", "your efficiency without it", "pct")])])
    if low.is_empty() and drivers.is_empty():
        section.empty = "None of your jobs in this window is large enough to judge."
    return section
