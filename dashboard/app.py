"""quotaloop dashboard entry point: page routing only (``streamlit run dashboard/app.py``, or ``quotaloop serve``).

The sidebar (global filters, identity) is drawn here, before the page runs, so its widgets exist on every page
and their values in ``st.session_state`` survive page switches.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # `streamlit run dashboard/app.py` puts dashboard/ (not the repo) on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import streamlit as st

from dashboard import ui

# The favicon is drawn here: a Material icon or an emoji would be fetched from a CDN, and the dashboard must work
# on an air-gapped cluster network.
st.set_page_config(page_title="quotaloop", page_icon=ui.favicon(), layout="wide", initial_sidebar_state="expanded")

PAGES = {
    "Cluster": [
        st.Page("views/overview.py", title="Overview", icon=":material/dashboard:", url_path="home", default=True),
        st.Page("views/waste.py", title="Waste explorer", icon=":material/area_chart:", url_path="waste"),
        st.Page("views/layout.py", title="Cluster layout", icon=":material/grid_view:", url_path="layout"),
    ],
    "Quotas and budgets": [
        st.Page("views/rankings.py", title="Rankings & quota loop", icon=":material/leaderboard:",
                url_path="rankings"),
        st.Page("views/fairshare.py", title="Fair share & budgets", icon=":material/balance:", url_path="fairshare"),
    ],
    "Me": [
        st.Page("views/my_jobs.py", title="My jobs", icon=":material/person:", url_path="my-jobs"),
        st.Page("views/reports.py", title="Reports", icon=":material/description:", url_path="reports"),
    ],
}

# The default page lives at "/"; this hidden alias keeps links to /overview working.
PAGES["Cluster"].append(st.Page("views/overview.py", title="Overview", url_path="overview", visibility="hidden"))
page = st.navigation(PAGES)
ui.page_style()
ui.sidebar()
ui.mode_banner()
page.run()
