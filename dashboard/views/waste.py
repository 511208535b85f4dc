"""Waste explorer (platform team): request-vs-usage gap areas and a team -> user -> job drill-down."""
import streamlit as st

from dashboard import auth, charts, data, privacy, shaping, ui

flt = ui.filters()
ui.page_header("Waste explorer",
               "What jobs held versus what they used. Waste is an area — resource × time — so the biggest "
               "wasters are the big long jobs, not the ugliest percentages.", flt)
if not ui.require_store():
    st.stop()

opts = data.options()
depth = data.team_depth(opts)
c1, c2, c3, c4 = st.columns([1.2, 1, 1, 1.6])
resource = c1.segmented_control("Resource", list(data.RESOURCES), key="w_resource", default=data.resource(flt),
                                required=True,
                                format_func=lambda r: data.RESOURCES[r][0])
by = c2.segmented_control("Group by", ["team", "user"], key="w_by", default="team", required=True,
                          format_func=str.capitalize)
level = c3.selectbox("Team level", list(range(1, depth + 1)), index=depth - 1, key="w_level",
                     format_func=lambda n: f"{data.TEAM_LEVELS.get(n, f'level {n}')} (level {n})",
                     help="A team is the first N parts of the account path org/group/team.")
bucket_s = c4.select_slider("Bucket size", list(data.BUCKETS_S), value=data.default_bucket_s(flt), key="w_bucket",
                            format_func=data.BUCKETS_S.get)
label, level_unit, amount_unit = data.RESOURCES[resource]

ident = ui.viewer()
FOLD = dict(name="user", sums=("jobs", "requested_hours", "used_hours", "wasted_hours"),
            ratio=("efficiency", "used_hours", "requested_hours"))
try:
    groups = data.waste_by(flt, by, resource, team_level=level)
    if by == "user":  # a researcher sees their own row and one "N other users" row
        groups = privacy.fold_users(groups, ident, **FOLD)
except data.NotAvailable as exc:
    ui.not_available(exc)
    st.stop()
ui.ignored(data.ignored_filters("job_waste", flt))
if groups.is_empty():
    ui.empty("No jobs ran in this window with these filters. Widen the window or clear a filter in the sidebar.")
    st.stop()

# a group whose jobs record no usage has used / wasted null: summed as 0 they would read "all idle" or "no waste"
req, used, wasted = (groups[c].sum() if groups[c].is_not_null().any() else None
                     for c in ("requested_hours", "used_hours", "wasted_hours"))
used, wasted = shaping.known_usage(req, used, wasted)
unknown = f"Unknown: no job of this selection records its usage of {label} (e.g. an SWF log without CPU times)."
m1, m2, m3, m4 = st.columns(4)
m1.metric(f"Requested {amount_unit}", ui.compact(req), border=True, help=f"{req or 0:,.1f} {amount_unit}.")
m2.metric(f"Used {amount_unit}", ui.compact(used), border=True,
          help=f"{used:,.1f} {amount_unit}." if used is not None else unknown)
m3.metric(f"Wasted {amount_unit}", ui.compact(wasted), border=True,
          help=f"{wasted:,.1f} {amount_unit}: requested minus used, integrated over the window."
          if wasted is not None else unknown)
# used + wasted = the request of the jobs whose usage is known (the rankings' sums skip the same jobs)
known_req = (used or 0.0) + (wasted or 0.0)
m4.metric("Efficiency", ui.pct(used / known_req if used is not None and known_req else None), border=True,
          help="Used / requested, as areas, over the jobs whose usage is recorded." if used is not None else unknown)

try:
    series = data.gap_series(flt, resource, by=by, team_level=level, bucket_s=bucket_s)
    if by == "user":
        series = privacy.fold_series(series, ident)
    ui.chart(charts.gap_area(series, t="t", requested="requested", used="used", unknown="unknown", group="group",
                             unit=level_unit,
                             title=f"{label} requested vs used over time, by {by} (hatched gap = waste)",
                             legend=by, colors=ui.team_colors() if by == "team" else None),
             "gap_area", key="gap_chart")
except data.NotAvailable as exc:
    ui.not_available(exc)

left, right = st.columns([1, 1])
with left:
    ui.chart(charts.ranked_bars(groups, name=by, value="wasted_hours", unit=f"wasted {amount_unit}",
                                efficiency="efficiency", title=f"Largest {label} wasters by {by}"),
             "ranked_bars", key="rank_chart")
with right:
    st.markdown(f"**{by.capitalize()}s by wasted {amount_unit}**")
    st.dataframe(groups.select(by, "wasted_hours", "efficiency", "jobs", "requested_hours", "used_hours"),
                 hide_index=True, column_config=ui.hours_columns(amount_unit))
    ui.download(groups, f"waste_by_{by}_{resource}.csv", key="dl_groups")

st.subheader("Drill down: team → users → jobs")
teams = data.waste_by(flt, "team", resource, team_level=level)
d1, d2 = st.columns(2)
team = d1.selectbox("Team", teams["team"].to_list(), index=None, key="w_team", placeholder="Pick a team")
if team is None:
    st.caption("Pick a team to see its users, then a user to see their jobs.")
    st.stop()
users = privacy.fold_users(data.waste_by(flt, "user", resource, team_level=level, team=team), ident, **FOLD)
pickable = [u for u in users["user"].to_list() if auth.can_view(ident, u)]
user = d2.selectbox("User", pickable, index=None, key="w_user", placeholder="Pick a user",
                    help=None if ident.is_admin else "Only your own job list: other users' jobs are for admins.")
st.markdown(f"**Users of `{team}` by wasted {amount_unit}**")
st.dataframe(users.select("user", "wasted_hours", "efficiency", "jobs", "requested_hours", "used_hours"),
             hide_index=True, column_config=ui.hours_columns(amount_unit))
ui.download(users, f"waste_{team.replace('/', '_')}_users_{resource}.csv", key="dl_users")
if privacy.restricted(ident):
    st.caption(":material/lock: Other users appear as one aggregate row; job lists are visible to admins only.")
if user is None or user not in pickable:
    st.stop()
if not auth.can_view(ident, user):
    st.info("Job lists of other users are visible to admins only; the tables above show aggregates.",
            icon=":material/lock:")
    st.stop()
jobs = data.job_waste(flt, user=user, team_level=level, team=team)
jobs = jobs.sort(f"{resource}_hours_wasted", descending=True, nulls_last=True)
st.markdown(f"**Jobs of `{user}` in `{team}`, most {label} waste first** ({jobs.height:,} jobs)")
cols = ["job_id", "job_name", "job_class", "state", "start", "run_end", f"{resource}_hours_requested",
        f"{resource}_hours_used", f"{resource}_hours_wasted", f"{resource}_efficiency", "usage_source"]
st.dataframe(jobs.select([c for c in cols if c in jobs.columns]), hide_index=True,
             column_config=ui.hours_columns(amount_unit))
ui.download(jobs, f"waste_{user}_jobs.csv", key="dl_jobs")
