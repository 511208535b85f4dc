"""Cluster layout: the node x GPU grid at a chosen time and a Gantt of jobs on nodes, real or simulated."""
import datetime as dt

import streamlit as st

from dashboard import charts, data, shaping, ui

flt = ui.filters()
ui.page_header("Cluster layout",
               "Where jobs sat on the machine: which GPUs were held, busy, idle or stranded at one instant, and the "
               "jobs on each node over time. Fragmentation shows up as red cells.", flt)
if not ui.require_store():
    st.stop()

ident = ui.viewer()
see_all = ident.may_pick_any_user
if not see_all:
    st.caption(":material/lock: Other users' jobs are shown by team only.")
real_tab, sim_tab = st.tabs(["Real history", "Simulated scenario"])

with real_tab:
    if flt.start is None or flt.end is None:
        ui.empty("Pick a window in the sidebar.")
        st.stop()
    lo, hi = data.layout_range(flt, data.options())
    default = data.default_layout_at(flt, data.options())
    if not (isinstance(st.session_state.get("lay_at"), dt.datetime) and lo <= st.session_state["lay_at"] <= hi):
        st.session_state["lay_at"] = default
    c1, c2 = st.columns([3, 1])
    at = c1.slider("Time (UTC)", min_value=lo, max_value=hi, step=dt.timedelta(hours=1), key="lay_at",
                   format="YYYY-MM-DD HH:mm")
    span_h = c2.select_slider("Gantt span around it", [6, 24, 72, 168], value=data.GANTT_SPAN_H, key="lay_span",
                              format_func=lambda h: f"{h} h" if h < 48 else f"{h // 24} days")
    at_utc = at.replace(tzinfo=dt.timezone.utc)
    slots = ui.fetch(data.layout_at, flt, at_utc, see_all, ident.user)
    if slots is not None:
        if slots.is_empty():
            ui.empty("The store's node list (nodes table) has no GPU nodes for this cluster, so there is no GPU grid "
                     "to draw (a CPU-only machine, or no node inventory ingested).")
        else:
            n = shaping.slot_counts(slots)
            total = sum(n.values())
            m = st.columns(5)
            m[0].metric("Busy", f"{n['busy']:,} GPUs", border=True,
                        help="Each job's GPUs × its measured GPU efficiency (which GPU was busy is not recorded).")
            m[1].metric("Allocated, idle", f"{n['allocated, idle']:,} GPUs", border=True,
                        help="Held by a job but not used (the job's measured GPU efficiency).")
            m[2].metric("Stranded free", f"{n['stranded free']:,} GPUs", border=True,
                        help="Free GPUs on partly used nodes: a whole-node job cannot use them.")
            m[3].metric("Free on empty nodes", f"{n['free']:,} GPUs", border=True,
                        help="GPUs of nodes running nothing: whole nodes a multi-node job could use.")
            m[4].metric("Occupancy at this time", ui.pct((n["busy"] + n["allocated, idle"]) / total if total else None),
                        border=True)
            ui.chart(charts.node_heatmap(slots, node="node", slot="slot", state="state", hover="job",
                                         title=f"GPU slots per node at {at:%Y-%m-%d %H:%M} UTC"),
                     "node_heatmap", key="lay_heat")
    g_start, g_end = data.gantt_span(flt, at_utc, span_h)
    try:
        rows = data.gantt_rows(flt, g_start, g_end, viewer_may_see_all=see_all, viewer=ident.user)
        ui.chart(charts.gantt(rows, node="node", start="start", end="end", color_by="team", hover="label",
                              title=f"Jobs on nodes, {g_start:%Y-%m-%d %H:%M} – {g_end:%Y-%m-%d %H:%M} UTC",
                              colors=ui.team_colors()),
                 "gantt", key="lay_gantt")
    except data.NotAvailable as exc:
        ui.not_available(exc)

with sim_tab:
    scenario = ui.fetch(data.last_scenario)
    if scenario is None:
        st.info("No simulation yet: run one on the Fair share & budgets page, then come back here.",
                icon=":material/play_circle:")
        st.page_link("views/fairshare.py", label="Go to Fair share & budgets", icon=":material/arrow_forward:")
    else:
        result, label, sim_flt = scenario
        st.caption(f"Scenario: {label} · replayed {sim_flt.describe()}")
        tl = result.timeline
        if tl.is_empty():
            ui.empty("The simulated run placed no job on a node.")
        else:
            # a warm-started run's timeline begins with the logged history before the window: show the window
            first = max(tl["start"].min(), sim_flt.start) if sim_flt.start else tl["start"].min()
            last = min(tl["end"].max(), sim_flt.end) if sim_flt.end else tl["end"].max()
            lo, hi = (v.replace(tzinfo=None, minute=0, second=0, microsecond=0) for v in (first, last))
            hi = max(hi, lo + dt.timedelta(hours=1))
            if not (isinstance(st.session_state.get("lay_sim_at"), dt.datetime)
                    and lo <= st.session_state["lay_sim_at"] <= hi):
                st.session_state["lay_sim_at"] = (lo + (hi - lo) / 2).replace(minute=0, second=0, microsecond=0)
            sim_at = st.slider("Simulated time (UTC)", min_value=lo, max_value=hi, step=dt.timedelta(hours=1),
                               key="lay_sim_at", format="YYYY-MM-DD HH:mm")
            sim_at_utc = sim_at.replace(tzinfo=dt.timezone.utc)
            slots = data.sim_slots_at(result, sim_flt, sim_at_utc)
            if not see_all:
                slots = shaping.anonymise_slots(slots, ident.user)
            n = shaping.slot_counts(slots)
            m = st.columns(4)
            m[0].metric("Held (simulated)", f"{n['busy'] + n['allocated, idle']:,} GPUs", border=True)
            m[1].metric("Stranded free", f"{n['stranded free']:,} GPUs", border=True)
            m[2].metric("Free on empty nodes", f"{n['free']:,} GPUs", border=True)
            total = sum(n.values())
            m[3].metric("Occupancy at this time", ui.pct((n["busy"] + n["allocated, idle"]) / total if total else None),
                        border=True)
            ui.chart(charts.node_heatmap(slots, node="node", slot="slot", state="state", hover="job",
                                         title=f"Simulated GPU slots per node at {sim_at:%Y-%m-%d %H:%M} UTC"),
                     "node_heatmap", key="lay_sim_heat")
            sim_rows = shaping.sim_gantt_rows(result, see_all, ident.user, start=sim_at_utc - dt.timedelta(hours=12),
                                              end=sim_at_utc + dt.timedelta(hours=12))
            ui.chart(charts.gantt(sim_rows, node="node", start="start", end="end", color_by="team", hover="label",
                                  title="Simulated jobs on nodes, 24 hours around that time",
                                  colors=ui.team_colors()), "gantt",
                     key="lay_sim_gantt")
