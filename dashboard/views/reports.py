"""Reports: the exported waste and fair-share report (``quotaloop report``) for the sidebar's filters.

The page builds exactly what the command it prints writes (``data.report_request``): same window, cluster,
partition, account subtree, state, job class and budget file.
"""
import shlex

import streamlit as st

from dashboard import auth, data, shaping, ui
from dashboard.report import ReportError
from dashboard.report.build import FORMATS

flt = ui.filters()
ui.page_header("Reports",
               "The self-contained report `quotaloop report` writes for cron, for the filters in the sidebar: one "
               "HTML file that opens offline, plus its tables as CSV / Parquet and its charts as PNG / SVG.", flt)
if not ui.require_store():
    st.stop()

ident = ui.viewer()
audiences = ["platform", "manager", "user"] if ident.may_pick_any_user else ["user"]
c1, c2, c3 = st.columns([2.2, 1.5, 1.5])
audience = c1.radio("Audience", audiences, key="rep_audience", horizontal=True,
                    format_func={"platform": "Platform team", "manager": "Manager", "user": "Researcher"}.get,
                    help=None if ident.may_pick_any_user else "Researchers can export their own report only.")
formats = c3.multiselect("Formats", list(FORMATS), default=["html", "csv"], key="rep_formats")
team = user = None
opts = data.options()
if audience == "manager":
    # the sidebar's account subtree narrows the teams on offer; the team picked is the report's whole scope
    teams = [a for a in opts.accounts if not flt.account or a == flt.account or a.startswith(flt.account + "/")]
    if st.session_state.get("rep_team") not in teams:
        st.session_state["rep_team"] = flt.account if flt.account in teams else None
    team = c2.selectbox("Team (account subtree)", teams, key="rep_team", placeholder="Pick a team")
elif audience == "user":
    if ident.may_pick_any_user:
        if st.session_state.get("rep_user") not in opts.users:
            st.session_state["rep_user"] = ident.user if ident.user in opts.users else None
        picked = c2.selectbox("User", opts.users, key="rep_user", placeholder="Pick a user")
    else:
        picked = None
    user = auth.visible_user(ident, picked)
    if user is None and ident.may_pick_any_user:
        st.caption("Pick the user the report is about.")
        st.stop()
    if user is None:
        ui.sign_in_prompt("Sign in to export your own report.", ident)
        st.stop()
    if not ident.may_pick_any_user:
        c2.markdown(f"Report for **{user}**")
st.caption({"platform": "Platform team: overview, gap areas, rankings, quota coefficients and their changes, "
                        "fair-share attainment and queue waits, for everything the filters select.",
            "manager": "Manager: the team's attainment against its entitlement, its users' waste and waits.",
            "user": "Researcher: your own least efficient jobs with right-size suggestions, nothing of anyone else's."}
           [audience])
if audience == "manager" and not team:
    st.caption("Pick the team the manager report is about.")
    st.stop()
if not formats:
    st.caption("Pick at least one format.")
    st.stop()

try:
    req = data.report_request(flt, audience, team=team, user=user, formats=tuple(formats))
except data.NotAvailable as exc:
    ui.empty(f"Cannot build a report: {exc}.")
    st.stop()
st.caption(":material/account_tree: Fair share against "
           + (f"the budget file `{req.budgets}`." if req.budgets else
              "equal shares per account level (no budget file configured)."))

if st.button("Build report", type="primary", icon=":material/description:", key="rep_build"):
    st.session_state["rep_params"] = req
built = st.session_state.get("rep_params")
if built is not None and built != req:
    st.caption("Settings changed since the last build: press **Build report** again.")
    built = None

if built is not None:
    try:
        with st.spinner("Building the report ..."):
            files = data.report_files(built)
    except ReportError as exc:
        st.error(f"The report could not be built: {exc}", icon=":material/error:")
        files = None
    if files == {}:
        ui.empty("The report produced no files for this window.")
    elif files:
        st.success(f"Report built: {len(files)} file(s).", icon=":material/check_circle:")
        html = {n: b for n, b in files.items() if n.endswith(".html")}
        cols = st.columns(2)
        for name, body in html.items():
            cols[0].download_button(f"Download {name}", body, file_name=name, mime="text/html",
                                    key=f"rep_dl_{name}", icon=":material/download:", on_click="ignore",
                                    type="primary")
        stem = next(iter(html), next(iter(files))).rsplit(".", 1)[0]
        cols[1].download_button("Download all files (.zip)", shaping.zip_bytes(files), file_name=f"{stem}.zip",
                                mime="application/zip", key="rep_dl_zip", icon=":material/folder_zip:",
                                on_click="ignore")
        st.dataframe([{"file": n, "size (KiB)": round(len(b) / 1024, 1)} for n, b in sorted(files.items())],
                     hide_index=True)

st.markdown("**Schedule this report**")
st.code(shlex.join(req.command()), language="bash", wrap_lines=True)
st.caption("This command writes the same files as the button above. In a cron job, systemd timer or Kubernetes "
           "CronJob, replace the fixed `--end` date by `--end yesterday` so every run covers the last complete "
           "days (README: Scheduled reports).")
