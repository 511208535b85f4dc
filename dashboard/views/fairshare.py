"""Fair share & budgets (managers): budget sliders -> replay the same history -> baseline vs scenario."""
import streamlit as st

from dashboard import charts, data, scenario, ui

flt = ui.filters()
ui.page_header("Fair share & budgets",
               "Change a team's share, guarantees, minimum runtimes, backfill or checkpointing, then replay the same "
               "history in the simulator and compare with the unchanged replay.", flt)
if not ui.require_store():
    st.stop()

try:
    budgets, budget_source = data.budgets()
except Exception as exc:  # noqa: BLE001 - a broken budget file is a message, not a traceback
    st.error(f"The budget file could not be read: {exc}", icon=":material/error:")
    st.stop()
cluster = data.sim_cluster(flt)
st.caption(f":material/account_tree: Budgets: `{budget_source}` · replaying cluster **{cluster}**, jobs submitted "
           "in the window. Partition, account, state and class filters do not apply to a replay.")

nodes = scenario.budget_nodes(budgets)
classes = [c for c in data.options().job_classes if c] or list(scenario.CLASSES)
HOURS = [0, 0.25, 0.5, 1, 2, 4, 8, 12, 24, 48]
REPLAY = [1, 3, 7, 14, 0]
base_mrt = {c: scenario.baseline_min_runtime_h(budgets, c) for c in classes}

with st.form("scenario_form", border=True):
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.markdown("**Budget shares** (relative weight among siblings)")
        shares, guaranteed = {}, {}
        groups = scenario.slider_groups(nodes)
        for i, (parent, kids) in enumerate(groups):
            box = st.container() if i == 0 else st.expander(f"Shares under {parent} ({len(kids)})")
            hi = max(n["share"] for n in kids) * 3 or 3.0
            with box:
                for kid in kids:
                    shares[kid["path"]] = st.slider(kid["path"], 0.0, float(hi), float(kid["share"]),
                                                    step=float(hi) / 60, key=f"share_{kid['path']}", format="%.1f")
        if not groups:
            st.caption("The budget tree has no siblings to weigh against each other.")
        with st.expander("Guaranteed GPUs"):
            cap = int(data.capacity_gpus(cluster) or 0)
            for kid in (groups[0][1] if groups else []):
                guaranteed[kid["path"]] = st.number_input(
                    f"{kid['path']} guaranteed GPUs", 0, max(cap, 0) or 100000,
                    int(kid["guaranteed_gpus"] or 0), step=8, key=f"guar_{kid['path']}")
    with right:
        st.markdown("**Scheduling contract**")
        mrt = {}
        for c in classes:
            default = min(HOURS, key=lambda h: abs(h - base_mrt[c]))
            mrt[c] = st.select_slider(f"Min runtime: {c}", HOURS, value=default, key=f"mrt_{c}",
                                      format_func=lambda h: "0 (preemptible)" if h == 0 else f"{h:g} h")
        backfill = st.segmented_control("Backfill", ["none", "easy", "conservative"], default="easy",
                                        required=True, key="fs_backfill")
        ckpt = st.select_slider("Checkpoint interval", list(scenario.CHECKPOINTS), value=0, key="fs_ckpt",
                                format_func=scenario.CHECKPOINTS.get)
        policy = st.selectbox("Queue policy", ["fairshare", "drf", "priority", "fcfs"], key="fs_policy")
        replay_days = st.select_slider(
            "Replay the last", REPLAY, value=7, key="fs_days", format_func=lambda d: "whole window" if d == 0 else
            f"{d} days", help="Jobs submitted in the last N days of the sidebar window are replayed. Long windows "
                              "take minutes: the simulator's cost grows faster than the number of jobs.")
    submitted = st.form_submit_button("Simulate", type="primary", icon=":material/play_arrow:", key="fs_simulate")

if submitted:
    base_shares = {n["path"]: n["share"] for n in nodes}
    base_guar = {n["path"]: n["guaranteed_gpus"] or 0 for n in nodes}
    st.session_state["fs_days_run"] = replay_days
    st.session_state["fs_scenario"] = scenario.Scenario.make(
        policy=policy, backfill=backfill, checkpoint_interval_s=float(ckpt),
        shares=scenario.overrides(base_shares, shares), guaranteed=scenario.overrides(base_guar, guaranteed),
        min_runtime_h=scenario.overrides(base_mrt, mrt))
scn = st.session_state.get("fs_scenario")
if scn is None:
    st.info("Move a slider and press **Simulate** to replay the window under your settings.",
            icon=":material/tune:")
    st.stop()

baseline = scenario.Scenario()
sim_flt = data.replay_filters(flt, st.session_state.get("fs_days_run", 7))
try:
    if data.is_cached(sim_flt, baseline) and data.is_cached(sim_flt, scn):
        base, scen = data.simulate(sim_flt, baseline), data.simulate(sim_flt, scn)
    else:
        bar = st.progress(0.05, text="Replaying the baseline (current budgets) ...")
        base = data.simulate(sim_flt, baseline)
        data.mark_done(sim_flt, baseline)
        bar.progress(0.5, text="Replaying your scenario ...")
        scen = data.simulate(sim_flt, scn)
        bar.progress(1.0, text="Done")
        bar.empty()
    data.mark_done(sim_flt, scn)
except data.NotAvailable as exc:
    ui.empty(f"Cannot simulate: {exc}.")
    st.stop()
except data.SimulationError as exc:
    st.error(f"The simulator failed on this scenario: {exc}", icon=":material/error:")
    st.stop()

st.subheader("Baseline vs scenario")
st.caption(f"**Replayed:** {sim_flt.describe()} · **Scenario:** {scn.describe()}" + ("  \n_Same settings as the baseline: both columns are equal._"
                                                if scn == baseline else ""))
cmp = data.compare(base, scen)
rows = scenario.headline(cmp)
for chunk in (rows[:6], rows[6:12]):
    cols = st.columns(6)
    for col, r in zip(cols, chunk):
        delta = ui.fmt_delta(r["delta"], r["kind"])
        col.metric(r["label"], ui.fmt_kind(r["scenario"], r["kind"]), delta,
                   delta_color="off" if delta == "no change" else {1: "normal", -1: "inverse", 0: "off"}[r["better"]],
                   delta_arrow="off" if delta == "no change" else "auto",
                   help=f"Baseline: {ui.fmt_kind(r['baseline'], r['kind'])}", border=True)

att = scenario.attainment_frame(base.metrics, scen.metrics)
left, right = st.columns(2)
with left:
    ui.chart(charts.compare_bars(att, category="team", baseline="baseline", scenario="scenario",
                                 unit="attainment (received / entitled)", reference=1.0,
                                 title="Fair-share attainment per team: baseline vs scenario"),
             "compare_bars", key="fs_att")
with right:
    waits = scenario.waits_frame(base.metrics, scen.metrics, "p90")
    ui.chart(charts.compare_bars(waits, category="job_class", baseline="baseline", scenario="scenario",
                                 unit="p90 queue wait (hours)", title="p90 queue wait per job class"),
             "compare_bars", key="fs_waits")
occ = data.sim_occupancy(base, scen)
ui.chart(charts.compare_lines(occ, t="t", baseline="baseline", scenario="scenario", unit="GPUs allocated",
                              title="GPUs allocated over time: baseline vs scenario",
                              reference=data.capacity_gpus(cluster)), "compare_lines", key="fs_occ")

st.subheader("Why does my team get less?")
teams = att.sort("scenario", nulls_last=True)["team"].to_list()
team = st.selectbox("Team (budget bucket)", teams, index=0 if teams else None, key="fs_team")
if team:
    for line in scenario.why_less(base, scen, team):
        st.markdown(f"- {line}")

with st.expander("Every metric, baseline vs scenario"):
    st.dataframe(cmp, hide_index=True)
    ui.download(cmp, "scenario_comparison.csv", key="dl_cmp")
    ui.download(att, "scenario_attainment.csv", label="Download attainment CSV", key="dl_att")
