"""Overview: the cluster at a glance for the chosen window."""
import streamlit as st

from dashboard import charts, data, privacy, shaping, ui

flt = ui.filters()
ui.page_header("Cluster overview",
               "Why the cluster looks full to users and half idle on the utilisation graph: what was allocated, "
               "what was used, and who holds the difference.", flt)
if not ui.require_store():
    st.stop()
# the page's queries start two at a time in the background; each call below waits only for its own
data.prefetch("overview", flt, restricted=privacy.restricted(ui.viewer()))

try:
    totals = data.overview_totals(flt)
except data.NotAvailable as exc:
    ui.not_available(exc)
    st.stop()
ui.ignored(data.ignored_filters("job_waste", flt))
if not totals["jobs"]:
    ui.empty("No jobs ran in this window with these filters. Widen the window or clear a filter in the sidebar.")
    st.stop()

# GPUs, or CPU cores where the selection has none (a CPU-only cluster or partition): data.resource decides
res = totals.get("resource", "gpu")
name, held, hours, _ = shaping.RESOURCE_WORDS[res]
c = st.columns([1, 1, 1.05, 1.1, 1.25, 1])
c[0].metric(f"{name} occupancy", ui.pct(totals["occupancy"]), border=True, height="stretch",
            help=f"{hours} allocated to jobs / {hours} the node list provides in the window."
                 + (" This selection has no GPUs, so it is measured in CPU cores." if res == "cpu" else ""))
UNKNOWN = "Unknown: no job of this selection records its usage of {} (an SWF log without CPU times, sacct without TRES usage)."
c[1].metric(f"{name} utilisation", ui.pct(totals["utilisation"]), border=True, height="stretch",
            help=f"{hours} busy / {hours} allocated. The gap to occupancy is requested-but-idle."
            if totals["utilisation"] is not None else UNKNOWN.format(hours))
if res == "cpu":  # no GPUs to waste: the card shows the capacity the occupancy is measured against
    c[2].metric("CPU cores", ui.compact(totals["capacity"]), border=True, height="stretch",
                help="Cores in the node list: the capacity of the CPU occupancy (this selection has no GPUs)."
                if totals["capacity"] else "No node list: the capacity is unknown.")
else:
    c[2].metric("Wasted GPU-h", ui.compact(totals["gpu_wasted_h"]), border=True, height="stretch",
                help=f"{totals['gpu_wasted_h']:,.1f} GPU-hours held but not used."
                if totals["gpu_wasted_h"] is not None else UNKNOWN.format("GPUs"))
c[3].metric("Wasted core-h", ui.compact(totals["cpu_wasted_h"]), border=True, height="stretch",
            help=f"{totals['cpu_wasted_h']:,.1f} CPU core-hours held but not used."
            if totals["cpu_wasted_h"] is not None else UNKNOWN.format("CPU cores"))
mem_tb_h = None if totals["mem_wasted_h"] is None else totals["mem_wasted_h"] / 1000
c[4].metric("Wasted mem TB-h", ui.compact(mem_tb_h), border=True, height="stretch",
            help=f"{mem_tb_h:,.2f} memory terabyte-hours held but not used." if mem_tb_h is not None
            else UNKNOWN.format("memory"))
# a log without user names (a GPU pod list) has jobs and no users: say so rather than "0 users"
who = f"{totals['users']:,} users" if totals["users"] else "users not logged"
c[5].metric("Jobs", ui.compact(totals["jobs"]), who, delta_color="off", delta_arrow="off", border=True,
            help=f"{totals['jobs']:,} jobs ran in the window"
                 + (f", of {totals['users']:,} users." if totals["users"] else "; the log names no users."))

left, right = st.columns([2, 1])
with left:
    try:
        occ = data.occupancy_series(flt, bucket_s=3600.0, res=res)
        ui.chart(charts.occupancy_vs_utilisation(occ, t="t", capacity="capacity", allocated="allocated", used="used",
                                                 title=f"{held}: capacity vs allocated vs busy, hourly",
                                                 unit=held),
                 "occupancy_vs_utilisation", key="ov_occ")
    except data.NotAvailable as exc:
        ui.not_available(exc)
with right:
    ui.chart(charts.pyramid(data.pyramid(flt, res), title=f"Metric pyramid: where {name} capacity goes"), "pyramid",
             key="ov_pyramid")

left, right = st.columns(2)
with left:
    try:
        trend = data.waste_trend(flt, res, bucket_s=86400.0)
        title = f"Wasted {hours} per day"
        ui.chart(charts.waste_trend(trend, t="t", value="wasted_hours", unit=hours, title=title)
                 if trend["wasted_hours"].is_not_null().any() or trend.is_empty() else
                 charts.empty_figure(title, f"Unknown: this log records no usage of {hours}."),
                 "waste_trend", key="ov_trend")
    except data.NotAvailable as exc:
        ui.not_available(exc)
with right:
    ident = ui.viewer()
    try:
        wasted, eff = data.wasted_column(res), data.efficiency_column(res)
        users = data.user_ranking(flt, order_by=res)
        if privacy.restricted(ident):  # researchers: teams, and where they stand themselves
            teams = data.team_ranking(flt, order_by=res)
            ui.chart(charts.ranked_bars(teams, name="team", value=wasted, unit=f"wasted {hours}",
                                        efficiency=eff, title=f"Biggest {name} wasters (teams)", top_n=10),
                     "ranked_bars", key="ov_top")
            me = privacy.own_rank(users, ident, wasted)
            st.caption(f":material/person: You rank **{me['rank']} of {me['of']}** users by wasted {hours} "
                       f"({me['row'][wasted]:,.1f} {hours} at {ui.pct(me['row'][eff])} "
                       "efficiency); other users are shown only by team." if me and me["row"][wasted] is not None else
                       f":material/person: This log records no {name} usage of your jobs, so your wasted {hours} are "
                       "unknown and not ranked; other users are shown only by team." if me else
                       ":material/person: You ran no jobs in this window; other users are shown only by team.")
        else:
            ui.chart(charts.ranked_bars(users.head(10), name="user", value=wasted,
                                        unit=f"wasted {hours}", efficiency=eff,
                                        title=f"Biggest {name} wasters (users)", top_n=10), "ranked_bars", key="ov_top")
    except data.NotAvailable as exc:
        ui.not_available(exc)
st.page_link("views/waste.py", label="Explore the waste by team, user and job", icon=":material/arrow_forward:")
