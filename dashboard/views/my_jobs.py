"""My jobs (researchers): my least efficient jobs, their waste, a right-size suggestion, and why my coefficient moved.

Access: the viewer sees only their own jobs; admins (config, ``--auth open``, the demo's platform view) may pick a
user. Nothing here reads URL query parameters, and ``auth.visible_user`` ignores a picked user for everyone else.
"""
import streamlit as st

from dashboard import auth, charts, data, shaping, ui

flt = ui.filters()
ui.page_header("My jobs",
               "Your most wasteful jobs, what they wasted, what to request instead, and what moved your quota "
               "coefficient.", flt)
if not ui.require_store():
    st.stop()

NO_USAGE = ("None of these jobs has recorded usage (this log, or this window of it, has no CPU time, GPU "
            "utilisation or memory figures), so nothing is measured as wasted and no job moved your score.")

ident = ui.viewer()
if ident.may_pick_any_user:
    users = data.options().users
    if not users:  # openb's pods, a sacct --format without User: the log names nobody, so nobody has a page
        ui.empty("This log names no users (its export has no user field), so there is no per-user page: the "
                 "Overview, Waste explorer and Rankings pages cover its jobs by team.")
        st.stop()
    if st.session_state.get("view_user") not in users:
        # open on a user with jobs in the window (the viewer if they have some), not the alphabetically first
        ranking = ui.fetch(data.user_ranking, flt)
        st.session_state["view_user"] = (shaping.default_user(ranking, ident.user) if ranking is not None else None) \
            or (ident.user if ident.user in users else (users[0] if users else None))
    label = "Demo, platform view — open the page of" if ident.mode == "demo" else "Admin — open the page of"
    st.columns([1, 2])[0].selectbox(label, users, key="view_user",
                                    help="Admins may open any user's page. A researcher only ever sees their own.")
user = auth.visible_user(ident, st.session_state.get("view_user"))
if user is None:
    if ident.mode == "oidc" or ident.problem:
        ui.sign_in_prompt("Sign in to see your jobs.", ident)
    elif ident.mode == "header":
        st.warning(f"No user in the `{data.config().auth_header}` header: the reverse proxy did not identify you.",
                   icon=":material/lock:")
    else:
        st.info("Sign-in is not configured. Set up Streamlit's OIDC login (`[auth]` in secrets.toml), a trusted "
                "proxy header (`auth = \"header\"`), or `--auth operator` for a single operator on this machine.",
                icon=":material/lock:")
    st.stop()
if ident.mode == "demo":
    st.caption(f":material/science: Demo mode: showing **{user}**'s page on sample data.")
elif ident.is_admin and user != ident.user:
    st.caption(f":material/admin_panel_settings: Admin view of **{user}**'s jobs.")

try:
    mine = data.job_waste(flt, user=user)
except data.NotAvailable as exc:
    ui.not_available(exc)
    st.stop()
if mine.is_empty():
    ui.empty(f"No jobs of {user} ran in this window with these filters. Widen the window in the sidebar.")
    st.stop()

try:
    me = data.user_row(flt, user)
except data.NotAvailable:
    me = None
res = data.resource(flt)  # GPU-hours, or core-hours where the selection has no GPUs (a CPU-only cluster)
hours = shaping.RESOURCE_WORDS[res][2]
req_h, wasted_h = mine[f"{res}_hours_requested"].sum(), mine[f"{res}_hours_wasted"].sum()
m1, m2, m3, m4 = st.columns(4)
m1.metric("Jobs in window", f"{mine.height:,}", border=True)
if me is not None and me.get("footprint_gpu_equiv_hours") is not None:
    # one unit on the page's score side: the GPU-equivalent hours of the score and of "the jobs that drove it"
    m2.metric("Held (GPU-eq. h)", ui.compact(me["footprint_gpu_equiv_hours"]), border=True, help=ui.GPU_EQUIV_HELP)
    if me.get("known_gpu_equiv_hours"):
        m3.metric("Wasted (GPU-eq. h)", ui.compact(me["wasted_gpu_equiv_hours"]), border=True,
                  help=ui.GPU_EQUIV_HELP + f" Of it, {hours} wasted: {wasted_h:,.1f} of {req_h:,.1f} held.")
    else:  # a log without usage (SWF, a bare sacct): nothing measured is not "nothing wasted"
        m3.metric("Wasted (GPU-eq. h)", "–", border=True, help=NO_USAGE)
else:
    m2.metric(f"{hours} held", ui.compact(req_h), border=True)
    m3.metric(f"{hours} wasted", ui.compact(wasted_h), border=True)
if me is not None:
    legacy = shaping.coefficient_text(me, "legacy_coefficient")
    ui.card(m4, "Quota coefficient", shaping.coefficient_text(me, "rec_coefficient"),
            help=(f"Legacy score would give {legacy} (rank {me['legacy_rank']})."
                  if me["legacy_coefficient"] is not None else f"Legacy score: {legacy}."))

st.subheader("Your most wasteful jobs, and what to request instead")
_LOW = "user_low_efficiency_jobs"
st.caption("Per resource, ranked by the resource-hours wasted (held minus used, over the run: the area, so a long "
           "wide job outranks a 3-minute one with an uglier percentage). Left out: tiny control jobs (under "
           f"{data.param_default(_LOW, 'min_footprint_gpu_equiv_hours'):g} GPU-equivalent hours, where low use is "
           "normal) and jobs that failed, were cancelled or preempted within their first "
           f"{data.param_default(_LOW, 'min_run_s') / 60:g} minutes (the cause may not be the request). Memory is "
           "per node in GiB, as `--mem` means it.")
low = ui.fetch(data.low_efficiency_jobs, flt, user)
if low is not None:
    if low.is_empty():
        ui.empty("No job qualifies (tiny control jobs and jobs that failed early are left out).")
    else:
        names = {"gpu": "GPU", "cpu": "CPU", "mem": "Memory"}
        present = [r for r in ("gpu", "cpu", "mem") if r in set(low["resource"].to_list())]
        for tab, r in zip(st.tabs([names[r] for r in present]), present):
            with tab:
                view = shaping.low_efficiency_view(low, r)
                st.dataframe(view, hide_index=True, column_config=ui.low_efficiency_columns(view))
        ui.download(low, f"{user}_low_efficiency_jobs.csv", key="dl_low")

left, right = st.columns(2)
with left:
    st.markdown("**Why your coefficient is what it is**")
    why = ui.fetch(data.coefficient_explanation, flt, user)
    for line in why or []:
        st.markdown(f"- {line}")
with right:
    st.markdown("**The few jobs that drove your score**")
    drivers = ui.fetch(data.score_drivers, flt, user)
    if drivers is not None and drivers.height:
        st.dataframe(drivers, hide_index=True, column_config=ui.driver_columns())
        st.caption("Share of your wasted GPU-equivalent hours (the unit of the cards above), and the efficiency "
                   "term your score would have without that job.")
    elif drivers is not None:
        ui.empty(NO_USAGE)
ui.chart(charts.waste_scatter(mine, requested=f"{res}_hours_requested", wasted=f"{res}_hours_wasted",
                              hover="job_name", unit=hours, title=f"{user}'s jobs: {hours} requested vs wasted"),
         "waste_scatter", key="my_scatter")

st.markdown(f"**All of {user}'s jobs in the window** ({mine.height:,})")
cols = ["job_id", "job_name", "job_class", "state", "start", "run_end", "gpus", "idle_gpus", "gpu_hours_requested",
        "gpu_hours_wasted", "gpu_efficiency", "cpu_efficiency", "mem_efficiency", "usage_source"]
mine = shaping.idle_gpus_text(mine)  # "2 of 8 never used": what a mean utilisation hides (jobstats)
if res == "cpu":  # no GPU columns (all zero) where the selection has no GPUs
    cols = ["job_id", "job_name", "job_class", "state", "start", "run_end", "cpus", "cpu_hours_requested",
            "cpu_hours_wasted", "cpu_efficiency", "mem_efficiency", "usage_source"]
st.dataframe(mine.select([c for c in cols if c in mine.columns]), hide_index=True,
             column_config=ui.hours_columns("h"), key="my_all_jobs")
ui.download(mine, f"{user}_jobs.csv", key="dl_mine")
