"""The Fair share page's named scenarios under AppTest on the fixture store: what it shows equals an independent
run of the same scenario (``dashboard.whatif.runner``) and numbers recomputed from that run's jobs."""
from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

import dashboard_fixture as fx
from dashboard.whatif import runner
from dashboard.whatif.spec import ScenarioSpec
from engine.tenants import to_tree

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return fx.build(tmp_path_factory.mktemp("scen_page_store"))


@pytest.fixture
def app(store, monkeypatch):
    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    monkeypatch.setenv("QUOTALOOP_ADMINS", "")
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/fairshare.py").run()
    return at


def no_errors(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


KEYS = {  # (columns that identify a table on the page, which of the tables with them, in page order)
    "fs_teams": ({"node", "verdict", "attainment_scenario"}, 0), "fs_stability": ({"bucket", "reversals"}, 0),
    "fs_multipliers": ({"effective_from", "multiplier"}, 0), "fs_why_scenario": ({"cause", "measure"}, 0),
    "fs_why_baseline": ({"cause", "measure"}, 1), "fs_why_logs": ({"cause", "measure"}, 2),
}


def frame(at, key: str) -> pl.DataFrame:
    """A table the page shows (AppTest keeps no dataframe keys: tables are found by their columns)."""
    cols, k = KEYS[key]
    found = [d.value for d in at.dataframe if cols <= set(d.value.columns)]
    assert len(found) > k, f"no dataframe {key}"
    return pl.from_pandas(found[k])


def independent(store, at) -> runner.ScenarioResult:
    """The same scenario run outside Streamlit on the window the page replayed (equal shares: no budget file)."""
    flt, spec = at.session_state["last_scenario"]
    jobs = fx.jobs_frame()
    accounts = sorted(set(jobs["account"].to_list()))
    from dashboard.whatif.budgets import default_budgets
    from queries.store import schema
    from queries.store import Store

    st_ = Store(store)
    all_jobs = st_.read("jobs").filter((pl.col("submit") >= flt.start) & (pl.col("submit") < flt.end))
    inputs = runner.Inputs(schema.conform(all_jobs.sort("submit", "job_id"), "jobs"),
                           schema.conform(st_.read("nodes"), "nodes"), to_tree(default_budgets(accounts)),
                           flt.start, flt.end, store=str(store), cluster=fx.CLUSTER)
    return runner.run(spec, inputs)


def test_right_size_scenario_shows_the_runs_numbers(app, store):
    at = app
    at.segmented_control(key="fs_kind").set_value("rightsize").run()
    at.slider(key="fs_margin").set_value(0.1)
    at.button(key="fs_simulate").click().run()
    no_errors(at)
    res = independent(store, at)
    assert res.spec.kind == "rightsize" and res.spec.values["margin"] == pytest.approx(0.1)
    captions = " ".join(c.value for c in at.caption)
    assert "right-sized requests (+10 % margin" in captions
    # the metric cards carry the independent run's values (help text = the baseline)
    cards = {m.label: m for m in at.metric}
    occ = res.comparison.filter(pl.col("metric") == "occupancy").row(0, named=True)
    assert cards["Occupancy"].value == f"{100 * occ['scenario']:.1f} %"
    assert cards["Occupancy"].proto.help.startswith(f"Baseline: {100 * occ['baseline']:.1f} %. Higher is better")
    # every badge points the way its number moved, coloured by whether that is good for the metric
    from streamlit.proto.Metric_pb2 import Metric as MetricProto

    by_label = {r["label"]: r for r in res.comparison.iter_rows(named=True)}
    checked = 0
    for lbl, card in cards.items():
        r = by_label.get(lbl)
        if r is None or r["delta"] is None or card.delta in (None, "", "no change"):
            continue
        want_dir = MetricProto.MetricDirection.UP if r["delta"] > 0 else MetricProto.MetricDirection.DOWN
        assert card.proto.direction == want_dir, lbl
        good = (r["delta"] > 0) == (r["better"] > 0)
        want_col = MetricProto.MetricColor.GRAY if r["better"] == 0 else \
            (MetricProto.MetricColor.GREEN if good else MetricProto.MetricColor.RED)
        assert card.proto.color == want_col, lbl
        checked += 1
    assert checked > 0
    # gains / loses is defined on the page
    assert any("**Gains** / **loses**" in m.value for m in at.markdown)
    # the per-team table is the independent run's, row for row
    shown = frame(at, "fs_teams")
    assert shown["node"].to_list() == res.teams["node"].to_list()
    assert shown["attainment_scenario"].to_list() == pytest.approx(res.teams["attainment_scenario"].to_list(),
                                                                   nan_ok=True)
    assert shown["verdict"].to_list() == res.teams["verdict"].to_list()
    # right-sizing the fixture's 16-CPUs-per-GPU requests frees reserved CPU: fewer idle CPU-hours
    idle = res.comparison.filter(pl.col("metric") == "usage.idle_cpu_hours").row(0, named=True)
    assert idle["scenario"] < idle["baseline"]


def test_why_less_tabs_show_the_team_numbers(app, store):
    at = app
    at.segmented_control(key="fs_kind").set_value("min_runtime").run()
    at.select_slider(key="mrt_training").set_value(2 * 3600)  # seconds; "2 h" is the label
    at.select_slider(key="fs_ckpt").set_value(1800)
    at.button(key="fs_simulate").click().run()
    no_errors(at)
    res = independent(store, at)
    assert res.spec.values["min_runtime_s"]["training"] == 7200.0
    assert res.spec.values["checkpoint_interval_s"] == 1800.0
    team = at.selectbox(key="fs_team").value
    assert team in res.teams["node"].to_list()
    flt, _ = at.session_state["last_scenario"]
    # independent: the team's queued GPU-hours in the scenario, waits clipped to the window, by polars
    j = res.scenario.jobs.filter(pl.col("budget_bucket") == team)
    lo = pl.max_horizontal(pl.col("submit"), pl.lit(flt.start))
    hi = pl.min_horizontal(pl.col("start"), pl.lit(flt.end))
    waited = j.select(((hi - lo).dt.total_seconds().clip(lower_bound=0) * pl.col("req_gpus")).sum() / 3600).item()
    why = frame(at, "fs_why_scenario")
    got = why.filter(pl.col("measure") == "waiting GPU-hours")["value"][0]
    assert got == pytest.approx(waited)
    pre = why.filter(pl.col("measure") == "preemptions suffered")["value"][0]
    assert pre == j["preemptions"].sum()
    att = res.teams.filter(pl.col("node") == team).row(0, named=True)
    shown_att = why.filter(pl.col("measure") == "attainment")["value"][0]
    assert shown_att == pytest.approx(att["attainment_scenario"])
    # every tab has sentences naming the team, the logged history included
    texts = [m.value for m in at.markdown]
    assert sum(f"`{team}` asked for" in t for t in texts) == 3
    logged = frame(at, "fs_why_logs")
    assert logged.filter(pl.col("measure") == "waiting GPU-hours")["value"][0] >= 0


def test_quota_loop_scenario_shows_multipliers_and_stability(app, store):
    at = app
    at.segmented_control(key="fs_kind").set_value("quota_loop").run()
    at.select_slider(key="fs_period").set_value(86400.0)
    at.select_slider(key="fs_days").set_value(3)
    at.button(key="fs_simulate").click().run()
    no_errors(at)
    res = independent(store, at)
    mult = frame(at, "fs_multipliers")
    assert mult.height == res.extra["multipliers"].height > 0
    assert mult["multiplier"].to_list() == pytest.approx(res.extra["multipliers"]["multiplier"].to_list())
    stab = frame(at, "fs_stability")
    assert stab["bucket"].to_list() == res.extra["stability"]["bucket"].to_list()
    verdict = [m.value for m in at.markdown if m.value.startswith("**Is the loop stable?**")]
    assert verdict and ("Yes" in verdict[0]) == (not res.extra["stability"]["oscillating"].any())
    gains = [m.value for m in at.markdown if m.value.startswith("**Gains:**")]
    expected = ", ".join(res.teams.filter(pl.col("verdict") == "gains")["node"].to_list()) or "nobody"
    assert gains == [f"**Gains:** {expected} · **Loses:** " +
                     (", ".join(res.teams.filter(pl.col("verdict") == "loses")["node"].to_list()) or "nobody")]


def test_logged_attainment_history_matches_queries(app, store):
    at = app
    at.toggle(key="fs_history").set_value(True).run()
    no_errors(at)
    shown = [pl.from_pandas(d.value) for d in at.dataframe if {"window_end", "worst_node"} <= set(d.value.columns)]
    assert shown, "no history table"
    hist = shown[0]
    from dashboard.whatif.budgets import default_budgets
    from queries.analytics import budgets as qb

    tree = to_tree(default_budgets(sorted(set(fx.jobs_frame()["account"].to_list()))))
    start, end = hist["window_start"][0], hist["window_end"][0]
    one = qb.attainment(store, tree, start, end, capacity_gpus=32).summary
    assert hist["mean"][0] == pytest.approx(one["mean"]) and hist["worst_node"][0] == one["worst_node"]
    assert hist.height >= 1 and (hist["window_end"] - hist["window_start"]).unique().len() == 1


def simulate_default_mix(at, store):
    """Press Simulate with the default custom mix: (replayed filters, scenario, budgets, and the same run made
    independently: the window's jobs with the log's use rates, the engine, the page's budgets)."""
    import engine
    from dashboard.whatif import transforms
    from dashboard.whatif.budgets import default_budgets
    from queries.store import schema
    from queries.store import Store

    at.button(key="fs_simulate").click().run()
    no_errors(at)
    flt, scn = at.session_state["last_scenario"]
    assert scn == ScenarioSpec.make("custom", scenario_policy="fairshare", scenario_backfill="easy")
    st_ = Store(store)
    jobs = st_.read("jobs").filter((pl.col("submit") >= flt.start) & (pl.col("submit") < flt.end))
    budgets = default_budgets(sorted(set(fx.jobs_frame()["account"].to_list())))
    res = engine.simulate(transforms.with_usage(schema.conform(jobs.sort("submit", "job_id"), "jobs")),
                          schema.conform(st_.read("nodes"), "nodes"),
                          engine.SimConfig(policy="fairshare", backfill="easy", budgets=budgets))
    return flt, scn, budgets, res


def test_custom_mix_measures_attainment_like_the_explanation(app, store):
    """The cards, the per-team table and the "why" tab show one attainment: queries.analytics.budgets on the run's jobs."""
    from queries.analytics import budgets as qb

    at = app
    flt, _, budgets, res = simulate_default_mix(at, store)
    att = qb.attainment_of(res.jobs, to_tree(budgets), flt.start, flt.end, capacity_gpus=32)
    card = [m for m in at.metric if m.label == "Mean attainment"][0]
    assert card.value == f"{100 * att.summary['mean']:.1f} %" and card.delta == "no change"
    teams = frame(at, "fs_teams")
    want = {r["node"]: r["attainment"] for r in att.table.iter_rows(named=True)}
    for r in teams.iter_rows(named=True):
        assert r["attainment_scenario"] == pytest.approx(want[r["node"]], nan_ok=True), r["node"]
    team = at.selectbox(key="fs_team").value
    why = frame(at, "fs_why_scenario")
    assert why.filter(pl.col("measure") == "attainment")["value"][0] == pytest.approx(want[team])


def test_custom_mix_idle_reservation_counts_what_the_jobs_used(app, store):
    """The custom mix's "Idle reserved CPU-hours" is allocated minus used CPU-hours, as for the named kinds: every
    fixture job uses a known fraction of its CPUs (``fx.USERS``), so idle lies strictly between 0 and allocated
    and equals that run's ``runner.usage_metrics`` with the log's use rates (``transforms.with_usage``)."""
    from dashboard import data

    at = app
    flt, scn, budgets, res = simulate_default_mix(at, store)
    want = runner.usage_metrics(res, flt.start, flt.end)
    assert 0 < want["idle_cpu_hours"] < want["allocated_cpu_hours"]
    cmp = data.run_scenario(flt, scn).comparison  # the page's cached run (AppTest runs the page in this process)
    row = cmp.filter(pl.col("metric") == "usage.idle_cpu_hours").row(0, named=True)
    assert row["baseline"] == pytest.approx(want["idle_cpu_hours"]) and row["scenario"] == row["baseline"]


def test_a_cpu_only_cluster_compares_in_core_hours(tmp_path, monkeypatch):
    """A CPU-only machine (an SWF trace, its nodes without GPUs): the custom mix replays it and compares the runs
    in core-hours (the budget's unit is inferred from the node list), instead of a dead end "no GPUs"
    (the figures are checked by hand in test_dashboard_cpu_only.py)."""
    from queries.ingest import ingest

    store = tmp_path / "cpu-only"
    ingest([Path(__file__).resolve().parents[1] / "fixtures" / "swf" / "tiny.swf"], store, fmt="swf", procs_per_node=2)
    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    monkeypatch.setenv("QUOTALOOP_ADMINS", "")
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/fairshare.py").run()
    at.button(key="fs_simulate").click().run()
    no_errors(at)
    assert not any("the cluster has no GPUs" in i.value for i in at.info)
    assert metric_labels(at) >= {"Mean attainment", "Lost core-hours"} and "Lost GPU-hours" not in metric_labels(at)
    # "why does my team get less" counts the waits in core-hours too (it said 0 GPU-hours for everything)
    why = frame(at, "fs_why_scenario")
    units = set(why["unit"].to_list())
    assert "core-hours" in units and "GPU-hours" not in units
    assert why.filter(pl.col("measure") == "waiting core-hours").height == 1


def test_drains_expander_runs_the_drains_scenario(app, store):
    """The Node drains expander feeds the same ScenarioSpec as ``quotaloop scenario drains``: the page's scenario
    run drains both nodes and its numbers are an independent run's."""
    at = app
    at.segmented_control(key="fs_kind").set_value("drains").run()
    at.text_area(key="fs_drains").set_value("tiny-n[1-2]@2026-11-06T12:00..2026-11-07T00:00")
    at.button(key="fs_simulate").click().run()
    no_errors(at)
    flt, spec = at.session_state["last_scenario"]
    assert spec.kind == "drains" and spec.values["drains"] == ("tiny-n[1-2]@2026-11-06T12:00..2026-11-07T00:00",)
    res = independent(store, at)
    assert res.scenario.metrics["node_events"]["drain"] == 2
    assert res.baseline.metrics["node_events"]["drain"] == 0
    captions = " ".join(c.value for c in at.caption)
    assert "node drains at min runtime: tiny-n[1-2]@" in captions
    # a malformed line is a one-line message on the page, not a traceback
    at.text_area(key="fs_drains").set_value("tiny-n1")
    at.button(key="fs_simulate").click().run()
    assert not at.exception
    assert any("Cannot build the scenario" in e.value for e in at.error)


def metric_labels(at) -> set[str]:
    return {m.label for m in at.metric}


def test_min_runtime_sliders_name_the_logged_contracts(app, store):
    # without a budget file no class has a file contract, but every fixture job logged one: the slider's start
    # is the baseline "as logged", not "never preempted" (the replay does preempt those jobs)
    at = app
    at.segmented_control(key="fs_kind").set_value("min_runtime").run()
    no_errors(at)
    slider = at.select_slider(key="mrt_eval")
    assert slider.value is None
    m = re.fullmatch(r"as logged \(([\d,]+) of ([\d,]+) jobs have one\), else none", slider.options[0])
    assert m and m.group(1) == m.group(2) and int(m.group(1).replace(",", "")) > 0
    assert "none (never preempted)" not in slider.options
    assert any("Jobs that logged a min runtime keep it" in c.value for c in at.caption)
