"""Pure shaping of query and engine results for the pages (no Streamlit, no queries, no I/O).

Everything here is a function of its arguments, so it is unit-tested on hand-made frames; ``dashboard.data``
owns the caches and calls these after the queries.
"""
from __future__ import annotations

import io
import zipfile

import polars as pl


class ShapeError(ValueError):
    """A result does not have the columns this view needs (the query changed under the page)."""


def sign_changes(values: list) -> int:
    """How often the period-over-period change flips sign (0 = monotone; the oscillation count)."""
    deltas = [b - a for a, b in zip(values, values[1:]) if a is not None and b is not None and b != a]
    return sum(1 for a, b in zip(deltas, deltas[1:]) if (a > 0) != (b > 0))


def backtest_shape(bt: pl.DataFrame) -> dict:
    """Column names of the back-test frame: user, period, raw and applied coefficient."""
    cols = bt.columns

    def pick(*names, required=True):
        found = next((c for c in names if c in cols), None)
        if found is None and required:
            raise ShapeError(f"the quota_backtest result has none of the columns {', '.join(names)}")
        return found

    return {
        "user": pick("user", "entity"),
        "period": pick("period_start", "period", "period_k"),
        "raw": pick("raw_coefficient", "coefficient_raw", "rec_coefficient", "target_coefficient", required=False),
        "applied": pick("applied_coefficient", "coefficient", "smoothed_coefficient", "coefficient_applied"),
    }


def backtest_view(bt: pl.DataFrame, shape: dict, users: list[str]) -> pl.DataFrame:
    return bt.filter(pl.col(shape["user"]).is_in(users)).sort(shape["user"], shape["period"])


def backtest_default_users(bt: pl.DataFrame, shape: dict, n: int = 5) -> list[str]:
    """The ``n`` users whose applied coefficient moved most over the back-test (the interesting ones)."""
    moved = (bt.group_by(shape["user"]).agg((pl.col(shape["applied"]).max() - pl.col(shape["applied"]).min())
                                            .alias("span"))
             .sort(["span", shape["user"]], descending=[True, False]))
    return moved[shape["user"]].head(n).to_list()


def backtest_oscillation(bt: pl.DataFrame, shape: dict) -> dict:
    """Sign changes of the applied coefficient's period-over-period delta, per user and in total."""
    per_user = {}
    for (user,), g in bt.sort(shape["period"]).group_by([shape["user"]], maintain_order=True):
        per_user[user] = sign_changes(g[shape["applied"]].to_list())
    return {"total": sum(per_user.values()), "per_user": per_user}


# the numbers a researcher acts on first (what it wasted, what to ask for instead), the sentence explaining it last
LOW_COLUMNS = ["job_name", "wasted_hours", "efficiency", "requested", "peak", "suggested_request", "suggestion",
               "job_class", "state", "run_hours", "job_id"]


def low_efficiency_view(low: pl.DataFrame, resource: str) -> pl.DataFrame:
    """One resource's rows of ``user_low_efficiency_jobs`` with the columns a researcher acts on."""
    df = low.filter(pl.col("resource") == resource)
    if "rank" in df.columns:
        df = df.sort("rank")
    return df.select([c for c in LOW_COLUMNS if c in df.columns] + [c for c in ("unit",) if c in df.columns])


def default_user(ranking: pl.DataFrame, viewer: str | None) -> str | None:
    """The user an admin's My jobs opens on: the viewer when they ran jobs in the window, else the user with the
    largest footprint in it (the page worth reading first; ties by name), None when nobody ran anything.

    ``ranking`` is ``user_ranking`` for the window: one row per user with jobs in it."""
    if ranking.is_empty() or "user" not in ranking.columns:
        return None
    users = ranking["user"].drop_nulls()
    if viewer is not None and viewer in set(users.to_list()):
        return viewer
    key = "footprint_gpu_equiv_hours" if "footprint_gpu_equiv_hours" in ranking.columns else "job_count"
    ordered = (ranking.filter(pl.col("user").is_not_null())
               .sort([pl.col(key).fill_null(0.0), pl.col("user")], descending=[True, False]))
    return ordered["user"][0] if ordered.height else None


# the per-team comparison as a manager reads it: the verdict and what it is measured on first, then attainment,
# entitlement and the p90 wait, each as "baseline → scenario" so the table fits the page (numbers stay in the
# frame for sorting and tests; the full table is the CSV download)
TEAM_NUMBERS = ["node", "verdict", "received_delta_h", "received_baseline_h", "received_scenario_h",
                "attainment_baseline", "attainment_scenario", "entitled_baseline_h", "entitled_scenario_h",
                "p90_wait_s_baseline", "p90_wait_s_scenario"]
TEAM_SHOWN = ["node", "verdict", "received", "attainment", "entitled", "p90_wait"]


def team_view(teams: pl.DataFrame, fmt_dur=None) -> pl.DataFrame:
    """``runner.team_table`` for the page: ``TEAM_NUMBERS`` (those present) plus the ``TEAM_SHOWN`` text
    columns "baseline → scenario": GPU-hours with the change, attainment in %, waits as durations
    (``fmt_dur(seconds)``; default hours)."""
    fmt_dur = fmt_dur or (lambda s: f"{s / 3600:.1f} h")

    def pair(a, b, f):
        return ("–" if a is None else f(a)) + " → " + ("–" if b is None else f(b))

    rows = []
    for r in teams.iter_rows(named=True):
        g = r.get
        d = g("received_delta_h")
        rows.append((pair(g("received_baseline_h"), g("received_scenario_h"), lambda v: f"{v:,.0f}")
                     + ("" if d is None else " (±0)" if round(d) == 0 else f" ({d:+,.0f})"),
                     pair(g("attainment_baseline"), g("attainment_scenario"), lambda v: f"{100 * v:.1f} %"),
                     pair(g("entitled_baseline_h"), g("entitled_scenario_h"), lambda v: f"{v:,.0f}"),
                     pair(g("p90_wait_s_baseline"), g("p90_wait_s_scenario"), fmt_dur)))
    text = pl.DataFrame(rows, schema={c: pl.String for c in TEAM_SHOWN[2:]}, orient="row")
    nums = teams.select([c for c in TEAM_NUMBERS if c in teams.columns])
    return pl.concat([nums, text], how="horizontal")


NO_CHANGE = "no change"
BETTER_WHEN = {1: "higher", -1: "lower", 0: "neither"}


def comparison_view(cmp: pl.DataFrame, kind_of, fmt, fmt_change) -> pl.DataFrame:
    """The comparison table (``runner.compare``) as a manager reads it: label, baseline, scenario and change
    formatted by the metric's kind (``kind_of(metric)``: pct, dur, int, num; ``fmt(value, kind)``,
    ``fmt_change(delta, kind)``), and which direction is better."""
    rows = [(r["label"], fmt(r["baseline"], kind_of(r["metric"])), fmt(r["scenario"], kind_of(r["metric"])),
             fmt_change(r["delta"], kind_of(r["metric"])) or "–", BETTER_WHEN.get(r["better"], ""))
            for r in cmp.iter_rows(named=True)]
    return pl.DataFrame(rows, schema={"label": pl.String, "baseline": pl.String, "scenario": pl.String,
                                      "change": pl.String, "better_when": pl.String}, orient="row")


def delta_badge(delta: float | None, better: int, shown: str | None = None) -> dict:
    """How a before/after delta badge is drawn: ``{"arrow": "up" | "down" | "off", "color": "green" | "red" |
    "gray"}`` (values ``st.metric`` takes as ``delta_arrow`` / ``delta_color``).

    The arrow follows the sign of the change; the colour follows whether that direction is good for the metric:
    ``better`` = +1 when higher is better, -1 when lower is better, 0 when neither (neutral: always gray). No
    delta, a zero delta, or one that rounds to zero at display precision (``shown`` == "no change") has no arrow
    and is gray. (Streamlit's own "auto" guesses the sign from a leading ASCII "-", which a typographic minus
    "−" never has: every badge pointed up.)"""
    if delta is None or delta != delta or delta == 0 or shown == NO_CHANGE:
        return {"arrow": "off", "color": "gray"}
    arrow = "up" if delta > 0 else "down"
    if better == 0:
        return {"arrow": arrow, "color": "gray"}
    good = (delta > 0) == (better > 0)
    return {"arrow": arrow, "color": "green" if good else "red"}


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            zf.writestr(name, files[name])
    return buf.getvalue()


def expand_hostlist(expr: str | None) -> list[str]:
    """Slurm hostlist -> host names: ``gpu-[001-003,005],cpu-07`` -> gpu-001, gpu-002, gpu-003, gpu-005, cpu-07."""
    if not expr:
        return []
    hosts, depth, token = [], 0, ""
    for ch in str(expr) + ",":
        if ch == "," and depth == 0:
            hosts.extend(_expand_one(token.strip()))
            token = ""
            continue
        depth += (ch == "[") - (ch == "]")
        token += ch
    return [h for h in hosts if h]


def _expand_one(token: str) -> list[str]:
    if "[" not in token:
        return [token]
    head, rest = token.split("[", 1)
    body, tail = rest.split("]", 1)
    out = []
    for part in body.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            width = len(lo)
            out += [f"{head}{i:0{width}d}" for i in range(int(lo), int(hi) + 1)]
        else:
            out.append(f"{head}{part}")
    return [o + t for o in out for t in _expand_one(tail)] if tail else out


DOWN_STATES = ("down", "drain", "drained", "draining", "fail", "failed", "maint", "unknown*")
BUSY_LABEL, IDLE_LABEL = "busy", "allocated, idle"


def node_slots(occ: pl.DataFrame, gpu_efficiency: dict) -> pl.DataFrame:
    """One row per (node, GPU slot) with a state in ``charts.SLOT_STATES``.

    Per node, jobs fill slots in job-id order; of a job's g GPUs, round(efficiency x g) are drawn busy and the
    rest allocated-but-idle (efficiency = the job's GPU-seconds used / held; unknown -> all busy). Logs record a
    job's mean GPU use, not which GPU was busy, so the busy slots are spread evenly over the job's slots (drawing
    them first made "busy" always GPU 0-2 and "idle" GPU 3-7) and the hover says so. A fractional GPU occupies
    a whole slot. Free slots on a node that runs something are "stranded free" (a whole-node job
    cannot use them), on an empty node "free"; a node in a down/drain state is "down" throughout."""
    rows = []
    for (node,), g in occ.sort("node", "job_id", nulls_last=True).group_by(["node"], maintain_order=True):
        n_slots = int(round(g["node_gpus"].max() or 0))
        state = str(g["node_state"][0] or "").lower()
        if n_slots <= 0:
            continue
        if state in DOWN_STATES:
            rows += [(node, s, "down", f"node {state}") for s in range(n_slots)]
            continue
        slot = 0
        for job in g.filter(pl.col("job_id").is_not_null()).iter_rows(named=True):
            gpus = job["gpus_on_node"] or 0.0
            take = min(n_slots - slot, int(-(-gpus // 1)))  # ceil: a fraction of a GPU still holds the slot
            eff = gpu_efficiency.get(job["job_id"])
            busy = take if eff is None else min(take, int(round(eff * gpus)))
            who = f"{job['job_id']} · {job['user']} · {job['job_class']}"
            if eff is not None and take:
                who += f" · uses {100 * eff:.0f} % of its GPUs on average (which GPU is busy is not recorded)"
            busy_at = spread(busy, take)
            rows += [(node, slot + k, BUSY_LABEL if k in busy_at else IDLE_LABEL, who) for k in range(take)]
            slot += take
        free = "stranded free" if slot > 0 else "free"
        rows += [(node, s, free, None) for s in range(slot, n_slots)]
    return pl.DataFrame(rows, schema={"node": pl.String, "slot": pl.Int64, "state": pl.String, "job": pl.String},
                        orient="row")


def spread(k: int, n: int) -> set[int]:
    """``k`` of the positions 0..n-1, evenly spaced (the middle of each of k equal parts): 2 of 4 -> {1, 3}."""
    return {int((i + 0.5) * n / k) for i in range(k)} if k > 0 else set()


def slot_counts(slots: pl.DataFrame) -> dict:
    counts = dict(zip(*slots.group_by("state").len().select("state", "len").to_dict(as_series=False).values()))
    return {s: int(counts.get(s, 0)) for s in ("busy", "allocated, idle", "free", "stranded free", "down")}


def normalise_gap(df: pl.DataFrame, resource: str, by: str | None) -> pl.DataFrame:
    """Bring the gap_area result to t / group / requested / used / unknown (levels), whatever its exact column names.

    ``unknown`` is the part of ``requested`` held by jobs whose usage the logs do not record: neither used nor
    wasted (0 when the query does not report it)."""
    cols = set(df.columns)
    t = next(c for c in ("bucket_start", "t", "bucket", "ts") if c in cols)
    group = next((c for c in ("group", "group_key", by or "", "team", "user") if c and c in cols), None)
    if "resource" in cols:
        df = df.filter(pl.col("resource") == resource)
        req = next(c for c in ("requested_level", "requested", "requested_avg") if c in cols)
        used = next(c for c in ("used_level", "used", "used_avg") if c in cols)
        unknown = "unknown_usage_level"
    else:
        req = next(c for c in (f"{resource}_requested_level", f"{resource}_requested") if c in cols)
        used = next(c for c in (f"{resource}_used_level", f"{resource}_used") if c in cols)
        unknown = f"{resource}_unknown_usage_level"
    unknown_level = pl.col(unknown).cast(pl.Float64).fill_null(0.0) if unknown in cols else pl.lit(0.0)
    amounts = []
    if {"requested_seconds", "used_seconds"} <= cols:
        amounts = [pl.col("requested_seconds").cast(pl.Float64).alias("requested_s"),
                   pl.col("used_seconds").cast(pl.Float64).alias("used_s")]
        if "unknown_usage_seconds" in cols:
            amounts.append(pl.col("unknown_usage_seconds").cast(pl.Float64).fill_null(0.0).alias("unknown_s"))
    out = df.select(pl.col(t).alias("t"),
                    (pl.col(group).cast(pl.String) if group else pl.lit("all jobs")).alias("group"),
                    pl.col(req).cast(pl.Float64).fill_null(0.0).alias("requested"),
                    pl.col(used).cast(pl.Float64).fill_null(0.0).alias("used"), unknown_level.alias("unknown"),
                    *amounts)
    return out.sort("t", "group")


def known_usage(requested: float | None, used: float | None, wasted: float | None,
                rel: float = 1e-9) -> tuple[float | None, float | None]:
    """``(used, wasted)`` resource-hours as a page shows them: ``(None, None)`` - unknown - when the logs record
    the usage of none of the requested hours. The queries count a job's usage as known when they have samples
    or totals for it, or when it holds none of the resource (no GPUs = 0 GPUs used), so used + wasted is the
    request whose usage is known; 0 of a positive request (openb's GPU pods, an SWF log without CPU times) is
    "unknown", not "0 used, 0 wasted"."""
    if used is None or wasted is None:
        return None, None
    if requested and used + wasted <= rel * abs(requested):
        return None, None
    return used, wasted


def prefixes(accounts) -> list[str]:
    out = set()
    for acc in accounts:
        if not acc:
            continue
        parts = str(acc).split("/")
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(out)


def gaming_verdict(check: pl.DataFrame, tol: float = 1e-6) -> dict:
    """Did splitting improve the recommended coefficient (unsound) and the legacy one (the known flaw)?"""
    by = {r["metric"]: r for r in check.iter_rows(named=True)}

    def moved(metric):
        r = by.get(metric) or {}
        return r.get("change") is not None and r["change"] > tol

    rec, legacy = moved("rec_coefficient"), moved("legacy_coefficient") or (
        (by.get("legacy_score") or {}).get("change") or 0) < -tol
    if rec:
        text = "The recommended coefficient improved after splitting: the score can be gamed. Investigate."
    else:
        text = ("The recommended coefficient did not improve (sums only: splitting changes nothing)"
                + ("; the legacy score did improve — the job-count term rewards splitting." if legacy else "."))
    return {"sound": not rec, "legacy_gamed": legacy, "text": text}


def gantt_from_jobs(jobs: pl.DataFrame, start, end, see_all: bool, viewer: str | None) -> pl.DataFrame:
    """``job_timeline`` rows -> one row per (job, node): node, start, end (clipped to [start, end)), team, label.

    Jobs of other users are labelled by team only unless ``see_all``."""
    rows = []
    for j in jobs.iter_rows(named=True):
        if j["start"] is None or j["run_end"] is None:
            continue
        own = see_all or j["user"] == viewer
        label = f"{j['job_id']} {j['job_name']} · {j['user']} · {j['gpus']:g} GPUs" if own else \
            f"{j['team']} job · {j['gpus']:g} GPUs"
        for node in expand_hostlist(j["node_list"]) or ["(unplaced)"]:
            rows.append((node, max(j["start"], start), min(j["run_end"], end), j["team"] or "(none)", label))
    return pl.DataFrame(rows, schema=GANTT_SCHEMA, orient="row")


GANTT_SCHEMA = {"node": pl.String, "start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC"),
                "team": pl.String, "label": pl.String}


def anonymise_slots(slots: pl.DataFrame, viewer: str | None) -> pl.DataFrame:
    """Slot hover text of other users' jobs becomes "another user's job"."""
    mine = pl.col("job").str.contains(f" · {viewer} · ", literal=True) if viewer else pl.lit(False)
    return slots.with_columns(pl.when(pl.col("job").is_null() | mine).then(pl.col("job"))
                              .otherwise(pl.lit("another user's job")).alias("job"))


def sim_gantt_rows(result, see_all: bool, viewer: str | None, max_rows: int = 6000, start=None,
                   end=None) -> pl.DataFrame:
    """Gantt rows (node, start, end, team, label) from a simulation's node x time timeline, in [start, end)."""
    tl = result.timeline
    if start is not None and end is not None:
        tl = tl.filter((pl.col("end") > start) & (pl.col("start") < end)).with_columns(
            pl.max_horizontal("start", pl.lit(start)).alias("start"), pl.min_horizontal("end", pl.lit(end)).alias("end"))
    if tl.is_empty():
        return pl.DataFrame(schema=GANTT_SCHEMA)
    jobs = result.jobs.select("job_id", "user", "account", "job_name")
    df = tl.join(jobs, on="job_id", how="left").sort("start").head(max_rows)
    own = pl.lit(True) if see_all else (pl.col("user") == viewer)
    label = pl.when(own).then(pl.format("{} {} · {} · {} GPUs · {}", "job_id", "job_name", "user", "gpus", "ended_by")) \
        .otherwise(pl.format("{} job · {} GPUs", "account", "gpus"))
    return df.select("node", "start", "end", pl.col("account").fill_null("(none)").alias("team"), label.alias("label"))


# resource -> (name, what is held, its hours, short hours): the words of GPU- or core-hours on every page and
# in the report (the resource itself comes from the data: the selection_resource query)
RESOURCE_WORDS = {"gpu": ("GPU", "GPUs", "GPU-hours", "GPU-h"), "cpu": ("CPU", "CPU cores", "core-hours", "core-h")}
NO_PEAK_CPU = "n/a: this log has no peak CPU"


def legacy_missing_reason(row: dict) -> str:
    """Why a ranking row has no legacy score: it needs each job's peak CPU utilisation, which SWF logs and many
    exports do not record (``legacy_jobs`` = 0), else the row's score could not be ranked."""
    return NO_PEAK_CPU if not row.get("legacy_jobs") else "n/a: no legacy score for these jobs"


def coefficient_text(row: dict, column: str) -> str:
    """``"1.23 ×"``, or a sentence saying why the coefficient is missing; never a number made up from None."""
    value = row.get(column)
    if value is not None:
        return f"{value:.2f} ×"
    return legacy_missing_reason(row) if column.startswith("legacy") else "n/a: no usage to score"


def coefficient_lines(user: str, me: dict | None, bt: pl.DataFrame | None) -> list[str]:
    """Plain-language lines: the score terms of the user's ranking row and the last move in the back-test."""
    if me is None:
        return [f"{user} has no jobs in this window, so no coefficient."]
    lines = []
    if bt is not None and bt.height:
        shape = backtest_shape(bt)
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
    legacy = (f"the legacy score (peak CPU, relative rank {me.get('legacy_rank')}) would give "
              f"**{coefficient_text(me, 'legacy_coefficient')}**" if me.get("legacy_coefficient") is not None else
              f"the legacy score (peak CPU) cannot be computed ({legacy_missing_reason(me)})")
    lines.append(f"Recommended coefficient **{coefficient_text(me, 'rec_coefficient')}**; {legacy}.")
    return lines


def sim_occupancy_at(timeline: pl.DataFrame, jobs: pl.DataFrame, nodes: pl.DataFrame, at) -> pl.DataFrame:
    """A simulated run's allocations at ``at`` in the shape of ``node_occupancy_at`` (for ``node_slots``).

    Every node of the layout appears; a node with nothing running appears once with a null job."""
    running = timeline.filter((pl.col("start") <= at) & (pl.col("end") > at))
    info = jobs.select("job_id", "user", "job_class")
    alloc = (running.join(info, on="job_id", how="left")
             .select("node", "job_id", "user", "job_class", pl.col("gpus").alias("gpus_on_node")))
    layout = nodes.select("node", pl.col("gpus").alias("node_gpus"), pl.col("state").alias("node_state"))
    busy = layout.join(alloc, on="node", how="inner")
    idle = layout.join(alloc.select("node").unique(), on="node", how="anti").with_columns(
        pl.lit(None, pl.String).alias("job_id"), pl.lit(None, pl.String).alias("user"),
        pl.lit(None, pl.String).alias("job_class"), pl.lit(None, pl.Float64).alias("gpus_on_node"))
    # a replay starts every node healthy: the export's end-of-window node state does not apply to it
    return pl.concat([busy, idle.select(busy.columns)]).with_columns(pl.lit("idle").alias("node_state"))


def sim_efficiency(jobs: pl.DataFrame) -> dict:
    """job_id -> GPU efficiency of a simulated job (its logged mean GPU utilisation: the work is the same)."""
    if "mean_gpu_util" not in jobs.columns:
        return {}
    return dict(zip(jobs["job_id"].to_list(), jobs["mean_gpu_util"].to_list()))


def idle_gpus_text(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (job_waste rows) with ``idle_gpus``: "2 of 8 never used" where a per-GPU summary (jobstats) found
    GPUs whose mean utilisation was 0 %, "none of N" where it found none, null without per-GPU data; the job's
    mean utilisation hides such GPUs. Where no job has per-GPU data (most stores) there is no column: a column of
    blanks on every job reads as a fault."""
    if not {"gpus_idle", "gpus_measured"} <= set(df.columns) or not (df["gpus_measured"].fill_null(0) > 0).any():
        return df
    idle, n = pl.col("gpus_idle"), pl.col("gpus_measured")
    text = (pl.when(n.is_null() | (n <= 0)).then(pl.lit(None, pl.String))
            .when(idle > 0).then(pl.format("{} of {} never used", idle.cast(pl.Int64), n.cast(pl.Int64)))
            .otherwise(pl.format("none of {}", n.cast(pl.Int64))))
    return df.with_columns(text.alias("idle_gpus"))


UNLOGGED_USER = "(user not logged)"


def name_unlogged_users(df: pl.DataFrame, col: str = "user") -> pl.DataFrame:
    """A log without a User field (a sacct ``--format`` that left it out, openb's pods) has jobs of nobody named:
    its row reads as that, not as a blank "None" cell that looks like a rendering fault."""
    return df.with_columns(pl.col(col).fill_null(UNLOGGED_USER)) if col in df.columns else df
