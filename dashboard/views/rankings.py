"""Rankings and the quota loop: legacy vs recommended scores, the coefficient back-test, the gaming check."""
import streamlit as st

from dashboard import charts, data, privacy, shaping, ui

flt = ui.filters()
ui.page_header("Rankings & quota loop",
               "Who wastes the most in absolute terms, what quota coefficient each score would give, and whether "
               "the loop that applies it is stable and hard to game.", flt)
if not ui.require_store():
    st.stop()

c1, c2 = st.columns([1.4, 3])
opens_on = data.rank_default(flt)
rank_by = c1.segmented_control("Rank by wasted", list(data.RANK_BY), key="r_by", default=opens_on,
                               required=True,
                               format_func=lambda r: {"gpu": "GPU", "cpu": "CPU", "mem": "Memory",
                                                      "equiv": "GPU-equiv."}[r])
unit = data.RANK_BY[rank_by]
if opens_on != data.resource(flt):
    c2.caption(f"This log records no {data.resource(flt).upper()} usage, so nobody's {data.RANK_BY[data.resource(flt)]} "
               f"waste is known: the ranking opens on {data.RANK_BY[opens_on]}.")
wasted, eff = data.wasted_column(rank_by), data.efficiency_column(rank_by)
users_tab, teams_tab, loop_tab, gaming_tab = st.tabs(["Users", "Teams", "Quota loop back-test", "Gaming check"])
depth = data.team_depth(data.options())
ident = ui.viewer()
restricted = privacy.restricted(ident)  # a researcher: own row and rank, other users unnamed
# the two coefficients side by side right after the waste; the terms behind each follow
# per rank_by: what each user requested and used, beside ``wasted`` (used + wasted = the request whose usage
# is known)
REQUESTED_COLS = {"gpu": "gpu_hours_requested", "cpu": "cpu_hours_requested", "mem": "mem_tb_hours_requested",
                  "equiv": "footprint_gpu_equiv_hours"}
USED_COLS = {"gpu": "gpu_hours_used", "cpu": "cpu_hours_used", "mem": "mem_tb_hours_used",
             "equiv": "used_gpu_equiv_hours"}
RANK_COLS = ["user", "main_team", "job_count", wasted, eff, "rec_coefficient", "legacy_coefficient", "rec_efficiency",
             "rec_confidence", "rec_demand", "legacy_score", "legacy_rank", "footprint_gpu_equiv_hours"]


def own_standing(users) -> None:
    """The researcher's view of the user ranking: their row, their rank out of N, other users without names."""
    me = privacy.own_rank(users, ident, wasted)
    if me is None:
        ui.empty(f"You ({ident.user or 'not signed in'}) ran no jobs in this window with these filters, so you are "
                 f"not ranked. {users.height:,} users are.")
        return
    row = me["row"]
    m1, m2, m3, m4 = st.columns(4)
    ui.card(m1, f"Your rank by wasted {unit}", f"{me['rank']} of {me['of']}" if row[wasted] is not None else
            "n/a: your usage is not recorded",
            help="1 = the most waste. Ranked by absolute resource-hours, not by a ratio. Without usage data "
                 "(a log with no CPU times) the waste is unknown, so there is no rank.")
    m2.metric(f"Your wasted {unit}", f"{row[wasted]:,.1f}" if row[wasted] is not None else "–", border=True)
    ui.card(m3, "Recommended coefficient", shaping.coefficient_text(row, "rec_coefficient"),
            help="Absolute efficiency × confidence × demand: it rises when you right-size, whatever others do.")
    ui.card(m4, "Legacy coefficient", shaping.coefficient_text(row, "legacy_coefficient"),
            help=(f"Relative rank {row['legacy_rank']} of {me['of']} by the old peak-based score."
                  if row["legacy_coefficient"] is not None else
                  "The old score needs each job's peak CPU utilisation, which this log does not record."))
    ui.chart(charts.score_scatter(privacy.unnamed(users, ident), name="user", legacy="legacy_coefficient",
                                  recommended="rec_coefficient", highlight=ident.user), "score_scatter",
             key="r_scatter")
    st.markdown("**Your row of the ranking** — other users are not named; the Teams tab compares teams")
    mine = privacy.own_rows(users, ident)
    st.dataframe(mine.select([c for c in dict.fromkeys(RANK_COLS) if c in mine.columns]), hide_index=True,
                 column_config=ui.ranking_columns(unit))
    ui.download(mine, f"user_ranking_{rank_by}_{ident.user}.csv", key="dl_user_ranking")


with users_tab:
    users = ui.fetch(data.user_ranking, flt, order_by=rank_by)  # main_team: the leaf team
    if users is not None:
        ui.ignored(data.ignored_filters("user_ranking", flt))
        if users.is_empty():
            ui.empty("No user ran jobs in this window with these filters.")
        elif restricted:
            own_standing(users)
        else:
            m1, m2, m3 = st.columns(3)
            named = users.height - users["user"].null_count()
            m1.metric("Users ranked", f"{named:,}", "and jobs of no named user" if named < users.height else None,
                      delta_color="off", delta_arrow="off", border=True)
            used_col, req_col = USED_COLS[rank_by], REQUESTED_COLS[rank_by]
            _, total = shaping.known_usage(*(users[c].sum() if users[c].is_not_null().any() else None
                                             for c in (req_col, used_col, wasted)))
            m2.metric(f"Wasted {unit}", "–" if total is None else f"{total:,.0f}", border=True)
            top = users.row(0, named=True)
            if total is None:  # nobody's usage is known (an SWF log without CPU times, openb's GPU pods)
                ui.card(m3, "Largest waster", "n/a: this log records no usage")
            else:
                # a log without a User field (a sacct --format that left it out) has one user: nobody named
                m3.metric("Largest waster", shaping.UNLOGGED_USER if top["user"] is None else str(top["user"]),
                          f"{top[wasted]:,.0f} {unit}", delta_color="off",
                          delta_arrow="off", border=True)
            left, right = st.columns(2)
            with left:
                ui.chart(charts.ranked_bars(users, name="user", value=wasted, unit=f"wasted {unit}", efficiency=eff,
                                            title=f"Users by wasted {unit}"), "ranked_bars", key="r_users_bars")
            with right:
                ui.chart(charts.score_scatter(users, name="user", legacy="legacy_coefficient",
                                              recommended="rec_coefficient"), "score_scatter", key="r_scatter")
            shown = shaping.name_unlogged_users(users.select([c for c in dict.fromkeys(RANK_COLS)
                                                              if c in users.columns]))
            st.markdown("**Per-user ranking** — legacy (peak-based, relative) beside recommended "
                        "(efficiency × confidence × demand, absolute)")
            st.dataframe(shown, hide_index=True, column_config=ui.ranking_columns(unit))
            ui.download(users, f"user_ranking_{rank_by}.csv", key="dl_user_ranking")

with teams_tab:
    level = st.selectbox("Team level", list(range(1, depth + 1)), index=depth - 1, key="r_level",
                         format_func=lambda n: f"{data.TEAM_LEVELS.get(n, f'level {n}')} (level {n})")
    teams = ui.fetch(data.team_ranking, flt, order_by=rank_by, team_level=level)
    if teams is not None:
        if teams.is_empty():
            ui.empty("No team ran jobs in this window with these filters.")
        else:
            name = next(c for c in ("team", "entity", "account") if c in teams.columns)
            ui.chart(charts.ranked_bars(teams, name=name, value=wasted, unit=f"wasted {unit}", efficiency=eff,
                                        title=f"Teams by wasted {unit}"), "ranked_bars", key="r_team_bars")
            st.dataframe(teams, hide_index=True, column_config=ui.ranking_columns(unit))
            ui.download(teams, f"team_ranking_{rank_by}.csv", key="dl_team_ranking")

with loop_tab:
    st.caption("Each period's behaviour sets the next period's coefficient. The back-test replays the history "
               "period by period with EWMA smoothing, a dead band, a minimum sample size and a cap on the change.")
    period_days = st.segmented_control("Period", [1, 7, 14], key="r_period", default=7, required=True,
                                       format_func=lambda d: {1: "daily", 7: "weekly", 14: "fortnightly"}[d])
    bt = ui.fetch(data.quota_backtest, flt, period_s=period_days * 86400.0)
    if bt is not None:
        if bt.is_empty() and not data.options().users:  # openb's pods, Philly's subset: nobody is named
            ui.empty("This log names no users, so there is no per-user coefficient to back-test.")
        elif bt.is_empty():
            ui.empty("No periods with jobs in this window.")
        else:
            shape = shaping.backtest_shape(bt)
            n_users = bt[shape["user"]].n_unique()
            osc = shaping.backtest_oscillation(bt, shape)  # a count over everyone: no names in it
            bt = privacy.own_rows(bt, ident, name=shape["user"])
            all_users = sorted(set(bt[shape["user"]].to_list()))
            default = all_users if restricted else shaping.backtest_default_users(bt, shape, 5)
            picked = st.multiselect("Users", all_users, default=default, key="r_bt_users",
                                    disabled=restricted, help="Your own series only." if restricted else None)
            view = shaping.backtest_view(bt, shape, picked)
            m1, m2, m3 = st.columns(3)
            m1.metric("Users in back-test", f"{n_users:,}", border=True)
            m2.metric("Periods", f"{bt[shape['period']].n_unique():,}", border=True)
            m3.metric("Sign changes of the applied coefficient", f"{osc['total']:,}",
                      help="Summed over users: how often the period-over-period change flips direction. "
                           "Few = stable.", border=True)
            ui.chart(charts.coefficient_series(view, period=shape["period"], user=shape["user"], raw=shape["raw"],
                                               smoothed=shape["applied"]), "coefficient_series", key="r_bt_chart")
            st.dataframe(view, hide_index=True)
            ui.download(bt, "quota_backtest.csv", key="dl_backtest")

with gaming_tab:
    st.caption("A metric that sets quota is an incentive. Split jobs into N equal back-to-back jobs — the same "
               "work, the same waste — and re-score: a sound score does not move; the legacy score divides by "
               "ln(job_count / 10 + 1), so for some users it improves (their rank rises and a neighbour pays "
               "for it), while for others the average task score rises more and it gets worse.")
    g1, g2, g3 = st.columns([2, 2, 1])
    users_all = data.options().users
    if restricted:  # a researcher may test the score on their own history only
        users_all = [u for u in users_all if u == ident.user]
    g_user = g1.selectbox("User (exact replay)", users_all, index=0 if users_all else None, key="r_gaming_user")
    g_n = g2.select_slider("Split into", [2, 4, 10, 20], value=10, key="r_gaming_n",
                           format_func=lambda n: f"{n} jobs")
    run_gaming = g3.button("Run the check", key="r_gaming_run", type="primary")
    if run_gaming and g_user:
        st.session_state["r_gaming"] = (g_user, g_n)
    if st.session_state.get("r_gaming") == (g_user, g_n):
        st.markdown(f"**Every user's largest job split into {g_n}** (`gaming_check`: one query, any store size)")
        every = ui.fetch(data.gaming_everyone, flt, g_n)
        if every is not None and every.height:
            m1, m2, m3 = st.columns(3)
            m1.metric("Users checked", f"{every.height:,}", border=True)
            m2.metric("Legacy score would fall", f"{int(every['legacy_improves'].sum()):,} of {every.height:,}",
                      border=True, help="Splitting their largest job alone would lower (improve) their legacy "
                                        "score; for the others it would rise.")
            m3.metric("Recommended coefficient would rise",
                      f"{int(every['recommended_improves'].sum()):,} of {every.height:,}", border=True,
                      help="Must be 0: the recommended terms are sums, which a split does not change.")
            shown = privacy.own_rows(every, ident)
            st.dataframe(shown.select([c for c in data.GAMING_COLUMNS if c in shown.columns]), hide_index=True,
                         column_config=ui.gaming_columns())
            ui.download(shown, f"gaming_check_everyone_{g_n}.csv", key="dl_gaming_all")
        st.markdown(f"**Every job of `{g_user}` split into {g_n}**, re-scored by the production queries on a "
                    "scratch copy of the window (exact replay)")
        jobs_in_window = data.overview_totals(flt)["jobs"]
        if jobs_in_window > data.GAMING_REPLAY_MAX_JOBS:
            st.info(f"The exact replay copies the window's {jobs_in_window:,} jobs into a scratch store; it runs up to "
                    f"{data.GAMING_REPLAY_MAX_JOBS:,}. Narrow the window or a filter, or read the per-user check "
                    "above, which needs no copy.", icon=":material/speed:")
            st.stop()
        try:
            with st.spinner("Re-scoring the history with the jobs split ..."):
                gaming = data.gaming_check(flt, g_user, g_n)
        except data.NotAvailable as exc:
            ui.not_available(exc)
            gaming = None
        if gaming is not None:
            verdict = shaping.gaming_verdict(gaming)
            (st.success if verdict["sound"] else st.error)(verdict["text"], icon=":material/policy:")
            st.dataframe(gaming, hide_index=True, column_config={
                "before": st.column_config.NumberColumn(format="%.3f"),
                "after_split": st.column_config.NumberColumn("after the split", format="%.3f"),
                "change": st.column_config.NumberColumn(format="%+.3f")})
            ui.download(gaming, f"gaming_check_{g_user}_{g_n}.csv", key="dl_gaming")
