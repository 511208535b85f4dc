"""Fair share & budgets (managers): pick a scenario kind, replay the same history, compare with the baseline, and
ask "why does my team get less?" for the baseline, the scenario and the logged history."""
import functools

import polars as pl
import streamlit as st

from engine.budgets import JOB_CLASSES
from engine.policies import POLICIES

from dashboard import charts, charts_budget, data, shaping, ui
from dashboard.whatif import budgets as whatif_budgets
from dashboard.whatif import frames, registry, runner
from dashboard.whatif.params import ScenarioError
from dashboard.whatif.spec import ScenarioSpec

flt = ui.filters()
ui.page_header("Fair share & budgets",
               "Change shares, minimum runtimes, requests, backfill or turn the quota loop on, replay the same "
               "history in the simulator and compare with the unchanged replay.", flt)
if not ui.require_store():
    st.stop()

try:
    budgets, budget_source = data.budgets()
except Exception as exc:  # noqa: BLE001 - a broken budget file is a message, not a traceback
    st.error(f"The budget file could not be read: {exc}", icon=":material/error:")
    st.stop()
try:
    calibration = data.calibration()
except ValueError as exc:  # said, never silently dropped: an uncalibrated replay must not pass for a calibrated one
    calibration = None
    st.error(f"The simulator calibration cannot be used, so replays run on the engine's defaults: {exc}",
             icon=":material/error:")
cluster = data.sim_cluster(flt)
unit = data.budget_unit(cluster)  # "gpu", or "cpu" on a cluster without GPUs: attainment in core-hours
held_unit = shaping.RESOURCE_WORDS[unit][1]  # "GPUs", or "CPU cores"
st.caption(f":material/account_tree: Budgets: `{budget_source}` · replaying cluster **{cluster}** from its logged "
           "state at the window start (jobs running then run as logged). Partition, account, state and class "
           "filters do not apply to a replay."
           + (" · **Measured in core-hours**: this cluster has no GPUs, so shares, entitlement and attainment count "
              "CPU cores x hours; teams are the log's accounts (an SWF log's group ids, `swf/groupN`)."
              if unit == "cpu" else ""))

if calibration is not None:
    st.caption(f":material/tune: Replays use the {calibration.describe()}"
               + (f" (`{calibration.path}`)." if not calibration.discovered else
                  " (this store's own, saved by `quotaloop validate --calibrate --save`)."))

if st.toggle("Show the logged attainment history (7-day windows, stepped daily)", key="fs_history"):
    try:
        hist = data.attainment_history(flt)
        st.plotly_chart(charts_budget.attainment_history(hist, t="window_end", mean="mean", worst="worst"),
                        key="fs_hist_chart", config={"displaylogo": False})
        st.caption(charts_budget.CAPTIONS["attainment_history"])
        st.dataframe(hist, hide_index=True, key="fs_hist_table", column_config=ui.history_columns())
    except (data.NotAvailable, ValueError) as exc:
        ui.empty(f"No attainment history: {exc}.")

nodes = whatif_budgets.budget_nodes(budgets)
classes = [c for c in data.options().job_classes if c] or list(JOB_CLASSES)
# min runtime choices in seconds (None = no contract: never preempted); hours appear only in the labels
CONTRACTS_S = [None, 0, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800]
REPLAY = [1, 3, 7, 14, 0]
KIND_NAMES = registry.labels()
base_mrt = {c: whatif_budgets.baseline_min_runtime_s(budgets, c) for c in classes}
kind = st.segmented_control("Scenario kind", list(KIND_NAMES), default="custom", required=True, key="fs_kind",
                            format_func=KIND_NAMES.get)


def share_controls(shares: dict, guaranteed: dict) -> None:
    st.markdown("**Budget shares** (relative weight among siblings)")
    groups = whatif_budgets.slider_groups(nodes)
    for i, (parent, kids) in enumerate(groups):
        box = st.container() if i == 0 else st.expander(f"Shares under {parent} ({len(kids)})")
        hi = max(n["share"] for n in kids) * 3 or 3.0
        with box:
            for kid in kids:
                shares[kid["path"]] = st.slider(kid["path"], 0.0, float(hi), float(kid["share"]),
                                                step=float(hi) / 60, key=f"share_{kid['path']}", format="%.1f")
    if not groups:
        st.caption("The budget tree has no siblings to weigh against each other.")
    if unit == "cpu":  # guarantees are whole GPUs held for a team: nothing to guarantee without GPUs
        return
    with st.expander("Guaranteed GPUs"):
        cap = int(data.capacity_gpus(cluster) or 0)
        for kid in (groups[0][1] if groups else []):
            guaranteed[kid["path"]] = st.number_input(
                f"{kid['path']} guaranteed GPUs", 0, max(cap, 0) or 100000, int(kid["guaranteed_gpus"] or 0), step=8,
                key=f"guar_{kid['path']}")


def contract_label(seconds, logged: tuple | None = None, base=None) -> str:
    """A slider position in words. With no budget-file contract for the class (``base`` None) the "none" position
    is the baseline itself, in which jobs that logged a min runtime keep theirs: say so instead of "never
    preempted" (``logged``: jobs with one, jobs, their median seconds)."""
    if seconds is None:
        if base is None and logged and logged[0]:
            return f"as logged ({logged[0]:,} of {logged[1]:,} jobs have one), else none"
        return "none (never preempted)"
    return "0 (preemptible)" if seconds == 0 else f"{seconds / 3600:g} h"


def contract_controls(mrt: dict) -> float:
    st.markdown("**Scheduling contract**")
    try:
        logged = data.logged_contracts(flt)
    except data.NotAvailable:
        logged = {}
    for c in classes:
        base = base_mrt[c]
        default = None if base is None else min(CONTRACTS_S[1:], key=lambda s: abs(s - base))
        mrt[c] = st.select_slider(f"Min runtime: {c}", CONTRACTS_S, value=default, key=f"mrt_{c}",
                                  format_func=functools.partial(contract_label, logged=logged.get(c), base=base))
    if any(n_with for n_with, _, _ in logged.values()):
        st.caption("Jobs that logged a min runtime keep it in the baseline; a slider moved off its start overrides "
                   "every job of its class (scenario > logged > budget file > default).")
    return st.select_slider("Checkpoint interval", list(whatif_budgets.CHECKPOINTS), value=0, key="fs_ckpt",
                            format_func=whatif_budgets.CHECKPOINTS.get)


with st.form("scenario_form", border=True):
    left, right = st.columns([3, 2], gap="large")
    ckpt, backfill = 0, "easy"
    shares, guaranteed, mrt, named = {}, {}, {}, {}
    with left:
        if kind in ("custom", "shares"):
            share_controls(shares, guaranteed)
        elif kind == "min_runtime":
            ckpt = contract_controls(mrt)
        elif kind == "rightsize":
            named["margin"] = st.slider("Margin over what each job used", 0.0, 1.0, 0.2, 0.05, key="fs_margin",
                                        format="%.2f", help="CPU and memory requests become use x (1 + margin)")
            named["gpus"] = st.radio("GPU count of single-node jobs whose use x (1 + margin) is below one GPU",
                                     ["whole", "fraction", "keep"], key="fs_gpus", horizontal=True,
                                     format_func={"whole": "1 whole GPU", "fraction": "the fraction used (sharing)",
                                                  "keep": "unchanged"}.get)
        elif kind == "quota_loop":
            named["period_s"] = st.select_slider("Quota period", [86400.0, 7 * 86400.0], value=7 * 86400.0,
                                                 key="fs_period", format_func=lambda s: f"{s / 86400:g} days")
            named["history_periods"] = st.slider("Back-test periods before the replay", 0, 8, 4, key="fs_hist")
            named["backtest"] = {"alpha": st.slider("EWMA weight of the newest period (alpha)", 0.05, 1.0, 0.2, 0.05,
                                                    key="fs_alpha"),
                                 "dead_band": st.slider("Dead band", 0.0, 0.5, 0.15, 0.05, key="fs_band"),
                                 "max_step": st.slider("Largest change per period", 0.05, 3.0, 0.25, 0.05, key="fs_step")}
        elif kind == "drains":
            with st.expander("Node drains", expanded=True):
                text = st.text_area("Drains, one per line: NODES@TIME or NODES@TIME..END (UTC)", key="fs_drains",
                                    placeholder="h100-[001-008]@2026-11-27T06:00..2026-11-27T18:00",
                                    help="NODES: a node name, a comma list or a Slurm hostlist like gpu[001-004]; "
                                         "TIME inside the replayed window. Without END the node returns 4 h after "
                                         "it emptied.")
                named["drains"] = [line.strip() for line in text.splitlines() if line.strip()]
                named["mode"] = st.radio("Running jobs", ["drain", "fail"], key="fs_drain_mode", horizontal=True,
                                         format_func={"drain": "leave at their min runtime (drain)",
                                                      "fail": "are killed at once (failure)"}.get)
                mtbf_h = st.number_input("Random drains: mean hours between drains per node (0 = none)", 0.0,
                                         100000.0, 0.0, step=24.0, key="fs_mtbf")
                named["node_mtbf_s"] = mtbf_h * 3600.0 or None
        else:
            named["to"] = st.segmented_control("Scenario backfill", ["none", "easy", "conservative"],
                                               default="conservative", required=True, key="fs_to")
            depth = st.number_input("Reservation depth (0 = the mode's own)", 0, 1000, 0, key="fs_depth")
            named["reservation_depth"] = depth or None
    with right:
        if kind == "custom":
            ckpt = contract_controls(mrt)
        if kind in ("custom", "backfill"):
            backfill = st.segmented_control("Backfill" if kind == "custom" else "Baseline backfill",
                                            ["none", "easy", "conservative"], default="easy", required=True,
                                            key="fs_backfill")
        policy = st.selectbox("Queue policy", sorted(POLICIES, key=lambda p: p != "fairshare"), key="fs_policy")
        replay_days = st.select_slider(
            "Replay the last", REPLAY, value=7, key="fs_days", format_func=lambda d: "whole window" if d == 0 else
            f"{d} days", help="The last N days of the sidebar window are replayed, starting from the logged state "
                              "(jobs already running keep their nodes, pending ones their submit time). Long "
                              "windows take minutes: the simulator's cost grows faster than the number of jobs.")
    submitted = st.form_submit_button("Simulate", type="primary", icon=":material/play_arrow:", key="fs_simulate")

if submitted:
    st.session_state["fs_days_run"] = replay_days
    if kind in ("custom", "shares"):
        named = {"shares": whatif_budgets.overrides({n["path"]: n["share"] for n in nodes}, shares),
                 "guaranteed": whatif_budgets.overrides({n["path"]: n["guaranteed_gpus"] or 0 for n in nodes},
                                                        guaranteed)}
    if kind == "min_runtime":  # seconds, None = no contract; untouched classes keep their contract
        named = {"min_runtime_s": whatif_budgets.overrides(base_mrt, mrt), "checkpoint_interval_s": float(ckpt) or None}
    if kind == "custom":  # the custom mix changes policy and backfill against the default fairshare/easy baseline
        named.update(min_runtime_s=whatif_budgets.overrides(base_mrt, mrt), checkpoint_interval_s=float(ckpt) or None,
                     scenario_policy=policy, scenario_backfill=backfill)
        policy, backfill = "fairshare", "easy"
    knobs, cal_notes = calibration.for_policy(policy) if calibration is not None else ({}, [])
    st.session_state["fs_calibration_notes"] = cal_notes
    try:
        st.session_state["fs_scenario"] = ScenarioSpec.make(kind, policy=policy, backfill=backfill,
                                                            sim_knobs=knobs, **named)
    except ScenarioError as exc:
        st.error(f"Cannot build the scenario: {exc}", icon=":material/error:")
        st.stop()
scn = st.session_state.get("fs_scenario")
if scn is None:
    st.info("Pick a scenario kind, set it up and press **Simulate** to replay the window under your settings.",
            icon=":material/tune:")
    st.stop()

sim_flt = data.replay_filters(flt, st.session_state.get("fs_days_run", 7))
try:
    if data.is_cached(sim_flt, scn):
        result = data.run_scenario(sim_flt, scn)
    else:
        bar = st.progress(0.0, text=f"{scn.label} ...")
        result = data.run_scenario(sim_flt, scn, progress=lambda f, t: bar.progress(f, text=t))
        bar.empty()
    data.mark_done(sim_flt, scn)
    base, scen = result.baseline, result.scenario
    trees = result.trees
except data.NotAvailable as exc:
    ui.empty(f"Cannot simulate: {exc}.")
    st.stop()
except data.SimulationError as exc:
    st.error(f"The simulator failed on this scenario: {exc}", icon=":material/error:")
    st.stop()

st.subheader("Baseline vs scenario")
same = result.scenario is result.baseline  # the runner simulates a scenario equal to its baseline only once
st.caption(f"**Replayed:** {sim_flt.describe()} · **Scenario:** {scn.describe()}"
           + ("  \n_Same settings as the baseline: both columns are equal._" if same else ""))
for note in [*result.notes, *st.session_state.get("fs_calibration_notes", [])]:
    st.caption(f":material/info: {note}")
cmp, t = result.comparison, result.teams
judged = result.judged()
status = dict(zip(judged["metric"], judged["status"]))
fid_words = result.fidelity_words()
if fid_words:
    (st.info if (result.fidelity or {}).get("available") else st.warning)(
        "**How far to trust this:** " + fid_words[0], icon=":material/verified:")
    if len(fid_words) > 1:
        st.caption(fid_words[1] + (" A grey **≈** on a card: that change is inside the simulator's error."
                                   if "inside error" in status.values() else ""))
rows = [dict(r, kind=runner.metric_kind(r["metric"]), key=r["metric"]) for r in cmp.iter_rows(named=True)]
for chunk in (rows[:6], rows[6:12]):
    cols = st.columns(6)
    for col, r in zip(cols, chunk):
        delta = ui.fmt_delta(r["delta"], r["kind"])
        badge = shaping.delta_badge(r["delta"], r["better"], delta)
        inside = status.get(r["metric"]) == "inside error"
        col.metric(r["label"], ui.fmt_kind(r["scenario"], r["kind"]),
                   f"≈ {delta}" if inside else delta,
                   delta_color="off" if inside else badge["color"], delta_arrow=badge["arrow"],
                   help=f"Baseline: {ui.fmt_kind(r['baseline'], r['kind'])}. " + ui.BETTER_HELP[r["better"]]
                   + (" The change is smaller than the baseline's own error against the log for this figure: "
                      "inside the simulator's error." if inside else ""),
                   border=True)

att = t.select(t["node"].alias("team"), t["attainment_baseline"].alias("baseline"),
               t["attainment_scenario"].alias("scenario"))
left, right = st.columns(2)
with left:
    ui.chart(charts.compare_bars(att, category="team", baseline="baseline", scenario="scenario",
                                 unit="attainment (received / entitled)", reference=1.0, percent=True,
                                 title="Fair-share attainment per team: baseline vs scenario"),
             "compare_bars", key="fs_att")
    st.caption(":material/info: " + ui.ATTAINMENT_HELP)
with right:
    waits = frames.waits_frame(base.metrics, scen.metrics, "p90")
    ui.chart(charts.compare_bars(waits, category="job_class", baseline="baseline", scenario="scenario",
                                 unit="p90 queue wait (h)", title="p90 queue wait per job class"),
             "compare_bars", key="fs_waits")
occ = data.sim_occupancy(base, scen, resource="cpus" if unit == "cpu" else "gpus")
ui.chart(charts.compare_lines(occ, t="t", baseline="baseline", scenario="scenario", unit=f"{held_unit} allocated",
                              title=f"{held_unit} allocated over time: baseline vs scenario",
                              reference=data.capacity(cluster, unit)), "compare_lines", key="fs_occ")

st.subheader("Who gains, who loses")
basis = runner.verdict_basis(scn.kind)
st.markdown(runner.verdict_rule(basis))
gains = t.filter(t["verdict"] == "gains")["node"].to_list()
loses = t.filter(t["verdict"] == "loses")["node"].to_list()
st.markdown(f"**Gains:** {', '.join(gains) or 'nobody'} · **Loses:** {', '.join(loses) or 'nobody'}")
for note in runner.verdict_notes(t, basis):
    st.markdown(f"- {note}")
st.caption("Each cell: baseline replay → scenario.")
st.dataframe(shaping.team_view(t, frames.fmt_duration), hide_index=True, key="fs_teams",
             column_config=ui.team_columns(), column_order=shaping.TEAM_SHOWN)
ui.download(t, "scenario_teams.csv", label="Download the full per-team table", key="dl_teams")
if "stability" in result.extra:
    stab = result.extra["stability"]
    osc = stab.filter(stab["oscillating"])["bucket"].to_list()
    st.markdown("**Is the loop stable?** " + ("Yes: no team's multiplier changes direction twice." if not osc
                                              else "No: oscillating multipliers for " + ", ".join(osc) + "."))
    st.dataframe(stab, hide_index=True, key="fs_stability", column_config=ui.loop_columns())
    mult = result.extra["multipliers"]
    st.plotly_chart(charts_budget.multiplier_series(mult, t="effective_from", bucket="bucket", value="multiplier",
                                                    colors=ui.team_colors()),
                    key="fs_mult_chart", config={"displaylogo": False})
    st.caption(charts_budget.CAPTIONS["multiplier_series"])
    with st.expander("Budget multipliers per period"):
        st.dataframe(mult, hide_index=True, key="fs_multipliers", column_config=ui.loop_columns())
with st.expander("Parameters that produced this result"):
    st.json(result.params())

st.subheader("Why does my team get less?")
order = att.sort("scenario", nulls_last=True)["team"].to_list()
teams = [x for x in order if x != "unbudgeted"] + [x for x in order if x == "unbudgeted"]
team = st.selectbox("Team (budget bucket)", teams, index=0 if teams else None, key="fs_team")
if team:
    tabs = st.tabs(["Scenario", "Baseline replay", "Logged history"])
    for tab, which, res, tree in zip(tabs, ("scenario", "baseline", "logs"), (scen, base, None),
                                     (trees[1], trees[0], trees[0])):
        with tab:
            try:
                e = data.explain_team(sim_flt, scn, which, team, res, tree)
            except Exception as exc:  # noqa: BLE001 - an explanation failure must not take the page down
                st.warning(f"No explanation for {which}: {exc}", icon=":material/warning:")
                continue
            for line in e.sentences:
                st.markdown(f"- {line}")
            c1, c2 = st.columns([3, 2])
            c1.dataframe(e.table, hide_index=True, key=f"fs_why_{which}")
            c2.dataframe(e.waits, hide_index=True, key=f"fs_waits_{which}")

if result.fidelity is not None and result.fidelity.get("available"):
    with st.expander("How far to trust the comparison: the baseline against the log"):
        st.markdown(result.fidelity["verdict"].capitalize())
        st.dataframe(judged.with_columns(
            judged.select(pl.struct("delta", "metric").map_elements(
                lambda x: runner.fmt_change(x["delta"], x["metric"]), return_dtype=pl.String)).to_series()
            .alias("delta"),
            judged.select(pl.struct("error", "metric").map_elements(
                lambda x: runner.fmt_change(x["error"], x["metric"]), return_dtype=pl.String)).to_series()
            .alias("error")).drop("metric"), hide_index=True, key="fs_fidelity")
        ui.download(judged, "scenario_fidelity.csv", key="dl_fidelity")

with st.expander("Every metric, baseline vs scenario"):
    st.dataframe(shaping.comparison_view(cmp, runner.metric_kind, ui.fmt_kind, ui.fmt_delta), hide_index=True,
                 column_config=ui.comparison_columns())
    ui.download(cmp, "scenario_comparison.csv", key="dl_cmp")
    ui.download(att, "scenario_attainment.csv", label="Download attainment CSV", key="dl_att")
