"""Overview: the cluster at a glance for the chosen window."""
import streamlit as st

from dashboard import charts, data, privacy, ui

flt = ui.filters()
ui.page_header("Cluster overview",
               "Why the cluster looks full to users and half idle on the utilisation graph: what was allocated, "
               "what was used, and who holds the difference.", flt)
if not ui.require_store():
    st.stop()

try:
    totals = data.overview_totals(flt)
except data.NotAvailable as exc:
    ui.not_available(exc)
    st.stop()
ui.ignored(data.ignored_filters("job_waste", flt))
if not totals["jobs"]:
    ui.empty("No jobs ran in this window with these filters. Widen the window or clear a filter in the sidebar.")
    st.stop()

c = st.columns([1, 1, 1.05, 1.1, 1.25, 1])
c[0].metric("GPU occupancy", ui.pct(totals["occupancy"]), border=True, height="stretch",
            help="GPU-hours allocated to jobs / GPU-hours the node list provides in the window.")
c[1].metric("GPU utilisation", ui.pct(totals["utilisation"]), border=True, height="stretch",
            help="GPU-hours busy / GPU-hours allocated. The gap to occupancy is requested-but-idle.")
c[2].metric("Wasted GPU-h", ui.compact(totals["gpu_wasted_h"]), border=True, height="stretch",
            help=f"{totals['gpu_wasted_h']:,.1f} GPU-hours held but not used.")
c[3].metric("Wasted core-h", ui.compact(totals["cpu_wasted_h"]), border=True, height="stretch",
            help=f"{totals['cpu_wasted_h']:,.1f} CPU core-hours held but not used.")
c[4].metric("Wasted mem TB-h", ui.compact(totals["mem_wasted_h"] / 1000), border=True, height="stretch",
            help=f"{totals['mem_wasted_h'] / 1000:,.2f} memory terabyte-hours held but not used.")
c[5].metric("Jobs", ui.compact(totals["jobs"]), f"{totals['users']:,} users", delta_color="off", delta_arrow="off",
            border=True, help=f"{totals['jobs']:,} jobs of {totals['users']:,} users ran in the window.")

left, right = st.columns([2, 1])
with left:
    try:
        occ = data.occupancy_series(flt, bucket_s=3600.0)
        ui.chart(charts.occupancy_vs_utilisation(occ, t="t", capacity="capacity", allocated="allocated", used="used",
                                                 title="GPUs: capacity vs allocated vs busy, hourly"),
                 "occupancy_vs_utilisation", key="ov_occ")
    except data.NotAvailable as exc:
        ui.not_available(exc)
with right:
    ui.chart(charts.pyramid(data.pyramid(flt)), "pyramid", key="ov_pyramid")

left, right = st.columns(2)
with left:
    try:
        trend = data.waste_trend(flt, "gpu", bucket_s=86400.0)
        ui.chart(charts.waste_trend(trend, t="t", value="wasted_hours", unit="GPU-hours",
                                    title="Wasted GPU-hours per day"), "waste_trend", key="ov_trend")
    except data.NotAvailable as exc:
        ui.not_available(exc)
with right:
    ident = ui.viewer()
    try:
        users = data.user_ranking(flt, order_by="gpu")
        if privacy.restricted(ident):  # researchers: teams, and where they stand themselves
            teams = data.team_ranking(flt, order_by="gpu")
            ui.chart(charts.ranked_bars(teams, name="team", value="gpu_hours_wasted", unit="wasted GPU-hours",
                                        efficiency="gpu_efficiency", title="Biggest GPU wasters (teams)", top_n=10),
                     "ranked_bars", key="ov_top")
            me = privacy.own_rank(users, ident, "gpu_hours_wasted")
            st.caption(f":material/person: You rank **{me['rank']} of {me['of']}** users by wasted GPU-hours "
                       f"({me['row']['gpu_hours_wasted']:,.1f} GPU-hours at {ui.pct(me['row']['gpu_efficiency'])} "
                       "efficiency); other users are shown only by team." if me else
                       ":material/person: You ran no jobs in this window; other users are shown only by team.")
        else:
            ui.chart(charts.ranked_bars(users.head(10), name="user", value="gpu_hours_wasted",
                                        unit="wasted GPU-hours", efficiency="gpu_efficiency",
                                        title="Biggest GPU wasters (users)", top_n=10), "ranked_bars", key="ov_top")
    except data.NotAvailable as exc:
        ui.not_available(exc)
st.page_link("views/waste.py", label="Explore the waste by team, user and job", icon=":material/arrow_forward:")
