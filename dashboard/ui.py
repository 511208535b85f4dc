"""Shared page furniture: the sidebar with the global filters, chart + caption, CSV download, empty and
"not available yet" messages. Layout only; data comes from ``dashboard.data``.

Global filter values live in ``st.session_state`` under ``flt_*`` keys; the sidebar is drawn by ``app.py`` on
every run, so they survive page switches. URL query parameters are never read, and no widget is bound to one.
"""
from __future__ import annotations

import streamlit as st
from PIL import Image, ImageDraw

from . import auth, charts, data, safe_csv, shaping
from .whatif.frames import fmt_duration

ALL = "All"
PLATFORM_VIEW = "(platform team)"  # the demo picker's admin choice; parentheses: never a Slurm user name
FILTER_KEYS = ("flt_window", "flt_cluster", "flt_partition", "flt_account", "flt_state", "flt_class")


def favicon():
    """A 32 px icon (a 2 x 2 grid of GPU slots: busy, idle, busy, stranded) built in memory, no network."""
    img = Image.new("RGBA", (32, 32), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    for (x, y), color in zip([(1, 1), (17, 1), (1, 17), (17, 17)],
                             [charts.USED, charts.SLOT_COLORS["allocated, idle"], charts.USED, charts.WASTED]):
        draw.rounded_rectangle([x, y, x + 13, y + 13], radius=3, fill=color)
    return img


def card(col, label: str, text: str, help: str | None = None) -> None:
    """A metric card whose value may be a reason ("n/a: this log has no peak CPU"): a sentence is cut to a few
    characters in a card's value, so the card shows "–" and the reason below it, as a grey note."""
    if text.startswith("n/a: "):
        col.metric(label, "–", text, delta_color="off", delta_arrow="off", border=True, help=help)
    else:
        col.metric(label, text, border=True, help=help)


def compact(value: float | None, digits: int = 3) -> str:
    """Numbers that fit a metric card: 16, 2.5, 950, 12,400, 261 k, 4.07 M (a whole number below 100 - a count of
    jobs or nodes - without a decimal)."""
    if value is None:
        return "–"
    a = abs(value)
    if a >= 1e9:
        return f"{value / 1e9:.{digits - 1}g} G" if a < 1e10 else f"{value / 1e9:,.0f} G"
    if a >= 1e6:
        return f"{value / 1e6:.3g} M"
    if a >= 1e4:
        return f"{value / 1e3:.3g} k"
    return f"{value:,.0f}" if a >= 100 or float(value).is_integer() else f"{value:,.1f}"


# Metric labels wrap instead of ending in "…": at 1440 px six cards in a row cut "GPU occupancy" to "GPU occupa…".
# A <style> element only (no script, no remote resource): the dashboard must work on an air-gapped network.
PAGE_STYLE = """<style>
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  height: auto !important; max-height: none !important; }
</style>"""


def page_style() -> None:
    st.html(PAGE_STYLE)


def _reset_filters() -> None:
    for key in FILTER_KEYS:
        st.session_state.pop(key, None)


def _select(label: str, key: str, values: list[str], help: str | None = None, fmt=None) -> None:
    choices = [ALL] + list(values)
    if st.session_state.get(key) not in choices:
        st.session_state[key] = ALL  # stale value (another store, or a value from an old run)
    st.selectbox(label, choices, key=key, help=help, format_func=fmt or str)


def sidebar() -> None:
    cfg = data.config()
    opts = data.options()
    sb = st.sidebar
    with sb:
        st.markdown("### :material/memory: quotaloop")
        st.caption(f"Store `{cfg.store.name}` · {opts.jobs:,} jobs"
                   + (f" · {opts.first:%Y-%m-%d} → {opts.last:%Y-%m-%d}" if opts.first and opts.last else ""))
        if cfg.effective_auth == "demo":
            st.warning("**Demo mode** — sample data, no sign-in. View the dashboard as the platform team, or as "
                       "one researcher to see what a signed-in user may see.", icon=":material/science:")
            if st.session_state.get("demo_as") not in [PLATFORM_VIEW] + opts.users:
                st.session_state["demo_as"] = PLATFORM_VIEW
            st.selectbox("View as", [PLATFORM_VIEW] + opts.users, key="demo_as",
                         format_func=lambda u: "Platform team (everyone)" if u == PLATFORM_VIEW else
                         f"Researcher {u}", help="A researcher sees their own jobs, and other users only as an "
                                                 "aggregate; the platform team sees everyone.")
        if not opts.jobs:
            return
        st.markdown("**Filters**")
        lo = opts.first.date() if opts.first else None
        hi = opts.last.date() if opts.last else None
        window = st.session_state.get("flt_window")
        if not (isinstance(window, (tuple, list)) and window and all(lo <= d <= hi for d in window)):
            st.session_state["flt_window"] = data.default_window(opts)
        st.date_input("Window (UTC days)", key="flt_window", min_value=lo, max_value=hi,
                      help="Jobs running or waiting in these days; both ends inclusive.")
        if len(opts.clusters) > 1:
            _select("Cluster", "flt_cluster", opts.clusters)
        _select("Partition", "flt_partition", opts.partitions)
        _select("Account subtree", "flt_account", opts.accounts,
                help="An org, group or team path: selects it and everything below it.")
        _select("Job state", "flt_state", opts.states)
        _select("Job class", "flt_class", opts.job_classes)
        st.button("Reset filters", on_click=_reset_filters, width="stretch", type="tertiary")
        st.divider()
        ident = viewer()
        if ident.mode in ("oidc",):
            if ident.user:
                st.caption(f"Signed in as **{ident.label}**" + (" · admin" if ident.is_admin else ""))
                if st.button("Log out", type="tertiary"):
                    st.logout()
            elif ident.label:  # signed in, but the address maps to no cluster user (auth.resolve's problem)
                st.caption(f"Signed in as **{ident.label}**, no cluster user")
                if st.button("Log out", type="tertiary"):
                    st.logout()
            else:
                st.caption("Not signed in.")
        elif ident.mode == "operator":
            st.caption("Single-operator mode: no sign-in, you see everything.")
        elif ident.mode == "open":
            st.caption("Open access: no sign-in, everyone is an admin.")
        elif ident.mode == "header":
            st.caption(f"Signed in as **{ident.label or 'nobody'}** (proxy)" + (" · admin" if ident.is_admin else ""))
        elif ident.mode == "demo":
            st.caption(f"Viewing as **{ident.user}** (researcher)" if ident.user else
                       "Viewing as the **platform team** (everyone)")


OPERATOR_BANNER = ("**Single-operator mode** — no sign-in: you see every user's jobs, as an admin, and the dashboard "
                   "listens on this machine only. To let researchers sign in and see their own jobs, restart with "
                   "`quotaloop serve --auth oidc` (an `[auth]` section in `.streamlit/secrets.toml`) or "
                   "`--auth header` behind a reverse proxy that sets `X-Forwarded-User`.")


def mode_banner() -> None:
    """The banner every page carries in single-operator mode (``auth.resolve``'s ``operator``)."""
    if data.config().effective_auth == "operator":
        st.info(OPERATOR_BANNER, icon=":material/admin_panel_settings:")


def sign_in_prompt(message: str, ident: auth.Identity) -> None:
    """Why nobody is identified and, under OIDC, a Sign in button: a signed-in address that maps to no user says
    so; sign-in that is not set up (no Authlib, no ``[auth]`` secrets) is one line, never a traceback."""
    if ident.problem:
        st.warning(ident.problem, icon=":material/person_off:")
        return
    if ident.mode != "oidc":
        st.info(message, icon=":material/login:")
        return
    problem = auth.oidc_setup_problem()
    if problem:
        st.warning(f"{message[:-1] if message.endswith('.') else message}: {problem}", icon=":material/lock:")
        return
    st.info(message, icon=":material/login:")
    if st.button("Sign in", type="primary", key="sign_in"):
        try:
            st.login()
        except Exception as exc:  # noqa: BLE001 - StreamlitAuthError and kin: one line, not a traceback
            st.error(auth.sign_in_error(exc), icon=":material/error:")


def viewer() -> auth.Identity:
    """Who is looking (``st.user`` / trusted header / the demo's "View as" picker), per ``dashboard.config``."""
    demo_as = st.session_state.get("demo_as")
    return auth.current(data.config(), None if demo_as in (None, PLATFORM_VIEW) else demo_as)


GPU_EQUIV_HELP = ("GPU-equivalent hours: GPU-hours plus CPU-hours and memory GB-hours converted at the score's "
                  "rates (`cpus_per_gpu`, `gb_per_gpu`), the unit of your score and of the jobs that drove it.")


def team_colors() -> dict:
    """The one team -> colour map of every page (``charts.team_colors`` over the store's accounts)."""
    return charts.team_colors(data.options().accounts)


def hours_columns(unit: str) -> dict:
    """Column formats for the waste tables (numbers with units, efficiency as a bar)."""
    num = st.column_config.NumberColumn
    cfg = {
        "requested_hours": num(f"requested ({unit})", format="%.1f"),
        "used_hours": num(f"used ({unit})", format="%.1f"),
        "wasted_hours": num(f"wasted ({unit})", format="%.1f"),
        "efficiency": st.column_config.ProgressColumn("efficiency", format="percent", min_value=0, max_value=1),
        "jobs": num("jobs", format="%d"),
        "start": st.column_config.DatetimeColumn("start (UTC)", format="YYYY-MM-DD HH:mm"),
        "run_end": st.column_config.DatetimeColumn("end (UTC)", format="YYYY-MM-DD HH:mm"),
    }
    for r in ("gpu", "cpu", "mem"):
        for k in ("requested", "used", "wasted"):
            cfg[f"{r}_hours_{k}"] = num(f"{r} {k} (h)", format="%.1f")
        cfg[f"{r}_efficiency"] = st.column_config.ProgressColumn(f"{r} efficiency", format="percent",
                                                                 min_value=0, max_value=1)
    return cfg


LOW_AMOUNTS = {"CPU-hours": "CPUs", "GPU-hours": "GPUs", "GiB-hours": "GiB per node"}


def low_efficiency_columns(view) -> dict:
    unit = view["unit"][0] if "unit" in view.columns and view.height else "resource-hours"
    amount = LOW_AMOUNTS.get(unit, "")
    num = st.column_config.NumberColumn
    return {
        "job_name": st.column_config.TextColumn("job"), "job_id": "id", "job_class": "class",
        "run_hours": num("ran (h)", format="%.1f"), "requested": num(f"requested ({amount})", format="%.1f"),
        "peak": num(f"peak used ({amount})", format="%.2f"),
        "efficiency": st.column_config.ProgressColumn("efficiency", format="percent", min_value=0, max_value=1),
        "wasted_hours": num(f"wasted ({unit})", format="%.1f"),
        "suggested_request": num(f"request instead ({amount})", format="%.1f"),
        "suggestion": st.column_config.TextColumn("suggestion", width="large"), "unit": None,
        "state": "state",
    }


def driver_columns() -> dict:
    prog = st.column_config.ProgressColumn
    return {
        "job_name": "job", "job_id": "id",
        "wasted_gpu_equiv_hours": st.column_config.NumberColumn("wasted (GPU-eq. h)", format="%.1f"),
        "share_of_user_waste": prog("share of your waste", format="percent", min_value=0, max_value=1),
        "rec_efficiency_without_job": prog("efficiency without it", format="percent", min_value=0, max_value=1),
    }


def ranking_columns(unit: str) -> dict:
    """Column formats for the ranking tables."""
    num, prog = st.column_config.NumberColumn, st.column_config.ProgressColumn
    cfg = {c: num(c.replace("_", " "), format="%.1f") for c in (
        "gpu_hours_wasted", "cpu_hours_wasted", "mem_tb_hours_wasted", "wasted_gpu_equiv_hours",
        "footprint_gpu_equiv_hours", "gpu_hours_requested", "gpu_hours_used", "cpu_hours_requested",
        "cpu_hours_used", "mem_tb_hours_requested", "mem_tb_hours_used", "run_hours")}
    for c in ("gpu_efficiency", "cpu_efficiency", "mem_efficiency", "rec_efficiency"):
        # width: a narrow last column cut "44.2 %" to "44.2"
        cfg[c] = prog(c.replace("_", " ").replace("rec ", "recommended "), format="percent", min_value=0,
                      max_value=1, width="medium")
    for c in ("legacy_coefficient", "rec_coefficient", "rec_confidence", "rec_demand", "legacy_score"):
        cfg[c] = num(c.replace("_", " ").replace("rec ", "recommended "), format="%.2f")
    cfg.update({"main_team": st.column_config.TextColumn("team", help="The team most of the user's jobs ran in"),
                "job_count": num("jobs", format="%d"), "legacy_rank": num("legacy rank", format="%d"),
                "user_count": num("users", format="%d"), "team": st.column_config.TextColumn("team")})
    return cfg


def team_columns() -> dict:
    """Headers with units for the Fair share per-team table (``shaping.team_view``'s shown columns); every cell
    reads "baseline → scenario" (short headers: the six columns fit the page at 1440 px)."""
    text = st.column_config.TextColumn
    both = "Baseline replay → scenario."
    return {
        "node": text("Team", pinned=True),
        "verdict": text("Verdict", help="Gains / loses / same: see the definition above the table"),
        "received": text("Received GPU-h (Δ)", help=both + " In brackets the change."),
        "attainment": text("Attainment", help=both + " " + ATTAINMENT_HELP),
        "entitled": text("Entitled GPU-h", help=both),
        "p90_wait": text("p90 wait", help=both + " The team's jobs' 90th-percentile queue wait."),
    }


def history_columns() -> dict:
    """Headers for the logged attainment history table (``queries.analytics.budgets.attainment_history``)."""
    num, dtc = st.column_config.NumberColumn, st.column_config.DatetimeColumn
    return {"window_start": dtc("Window from (UTC)", format="YYYY-MM-DD HH:mm"),
            "window_end": dtc("Window to (UTC)", format="YYYY-MM-DD HH:mm"),
            "teams": num("Teams with demand", format="%d"),
            "mean": num("Mean attainment", format="percent", help=ATTAINMENT_HELP),
            "worst": num("Worst attainment", format="percent"), "worst_node": st.column_config.TextColumn("Worst team"),
            "at_least_95": num("Teams at ≥ 95 %", format="%d"),
            "over_entitled": num("Teams above 100 %", format="%d",
                                 help="Teams that received more than their entitlement: they ran on idle shares")}


def comparison_columns() -> dict:
    """Headers for ``shaping.comparison_view`` (every metric, baseline vs scenario, formatted by kind)."""
    text = st.column_config.TextColumn
    return {"label": text("Metric", pinned=True), "baseline": text("Baseline"), "scenario": text("Scenario"),
            "change": text("Change"), "better_when": text("Better when")}


def loop_columns() -> dict:
    """Headers for the quota loop's stability and multiplier tables (``transforms.stability``,
    ``budgets.quota_loop_multipliers``): multipliers as "× 1.23"."""
    num, text, dtc = st.column_config.NumberColumn, st.column_config.TextColumn, st.column_config.DatetimeColumn
    times = "× %.2f"
    return {"bucket": text("Team (budget bucket)", pinned=True), "periods": num("Periods", format="%d"),
            "final": num("Final multiplier", format=times), "min": num("Lowest", format=times),
            "max": num("Highest", format=times), "largest_step": num("Largest step", format="%.2f"),
            "reversals": num("Direction reversals", format="%d"),
            "oscillating": st.column_config.CheckboxColumn("Oscillating", help="Two or more direction reversals"),
            "effective_from": dtc("Effective from (UTC)", format="YYYY-MM-DD HH:mm"),
            "period_start": dtc("Earned in the period from (UTC)", format="YYYY-MM-DD HH:mm"),
            "multiplier": num("Multiplier of the team's share", format=times),
            "users": num("Users averaged", format="%d")}


ATTAINMENT_HELP = ("GPU-hours received ÷ GPU-hours entitled (the team's budget share of the cluster while it had "
                   "demand). Above 100 % means the team also ran on capacity other teams left idle: an idle "
                   "team's share is lent to teams with work queued, so a busy team can receive several times its "
                   "entitlement while the others do not ask for theirs.")


def gaming_columns() -> dict:
    num = st.column_config.NumberColumn
    cfg = {"split_job_id": st.column_config.TextColumn("job split"),
           "legacy_improves": st.column_config.CheckboxColumn("legacy rises"),
           "recommended_improves": st.column_config.CheckboxColumn("recommended rises")}
    for c in ("job_count", "legacy_rank"):
        for k in ("before", "after"):
            cfg[f"{c}_{k}"] = num(f"{c.replace('_', ' ')} {k}", format="%d")
    for c in ("legacy_coefficient", "rec_coefficient"):
        for k in ("before", "after"):
            cfg[f"{c}_{k}"] = num(f"{c.replace('rec_', 'recommended ').replace('_', ' ')} {k}", format="%.2f")
    return cfg


def filters() -> data.Filters:
    """The current global filters (window end exclusive, 'All' -> None)."""
    ss = st.session_state
    window = ss.get("flt_window")

    def val(key):
        v = ss.get(key)
        return None if v in (None, ALL) else v

    return data.window_filters(tuple(window) if isinstance(window, (tuple, list)) and window else None,
                               cluster=val("flt_cluster"), partition=val("flt_partition"),
                               account=val("flt_account"), state=val("flt_state"), job_class=val("flt_class"))


def page_header(title: str, subtitle: str, flt: data.Filters | None = None) -> None:
    st.title(title)
    st.caption(subtitle + (f"  \n**Filters:** {flt.describe()}" if flt is not None else ""))


def require_store() -> bool:
    """False (with instructions shown) when the store has no jobs; pages then stop."""
    opts = data.options()
    if opts.jobs:
        return True
    store = data.store_dir()
    st.info(f"The store `{store}` has no jobs yet. Load some with `quotaloop ingest FILE --store {store}` or "
            "build the sample with `quotaloop sample --store DIR`, then reload this page.",
            icon=":material/inbox:")
    return False


def chart(fig, name: str, key: str | None = None) -> None:
    """A figure with its one-line caption from ``charts.CAPTIONS``."""
    st.plotly_chart(fig, key=key, config={"displaylogo": False})
    if name in charts.CAPTIONS:
        st.caption(charts.CAPTIONS[name])


def not_available(exc: Exception | str) -> None:
    st.info(f"{str(exc)[:1].upper()}{str(exc)[1:]}: this part of the page appears once it is built.",
            icon=":material/construction:")


def fetch(load, *args, **kwargs):
    """``load(*args, **kwargs)``, or None after the "appears once it is built" notice when the store lacks a table
    the part needs (``data.NotAvailable``), so the rest of the page still renders."""
    try:
        return load(*args, **kwargs)
    except data.NotAvailable as exc:
        not_available(exc)
        return None


def empty(message: str) -> None:
    st.info(message, icon=":material/filter_alt_off:")


def ignored(names: list[str]) -> None:
    if names:
        st.caption(f":material/info: This view ignores the filter(s): {', '.join(names)}.")


def download(frame, file_name: str, label: str = "Download CSV", key: str | None = None) -> None:
    """CSV download with spreadsheet formulas neutralised (``safe_csv``)."""
    st.download_button(label, data=safe_csv.to_csv_bytes(frame), file_name=file_name, mime="text/csv",
                       key=key or f"dl_{file_name}", icon=":material/download:", on_click="ignore")


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def fmt_kind(value, kind: str) -> str:
    """A metric value by kind: pct (fraction), dur (seconds), int, num."""
    if value is None:
        return "–"
    if kind == "pct":
        return f"{100 * value:.1f} %"
    if kind == "dur":
        return fmt_duration(value)
    if kind == "int":
        return f"{value:,.0f}"
    return f"{value:,.1f}"


BETTER_HELP = {1: "Higher is better: a rise is green, a fall red.", -1: "Lower is better: a fall is green, a rise red.",
               0: "Neither direction is better in itself: gray either way."}


def fmt_delta(delta, kind: str) -> str | None:
    """The change for ``st.metric`` (None hides it; 0 shows as no change)."""
    if delta is None:
        return None
    shown = f"{abs(100 * delta):.1f} pts" if kind == "pct" else fmt_kind(abs(delta), kind)
    if abs(delta) < 1e-12 or shown.split()[0].strip("0.") == "":  # rounds to zero at display precision
        return shaping.NO_CHANGE
    return ("+" if delta > 0 else "−") + shown
