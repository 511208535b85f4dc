"""The dashboard's data shaping and scenario helpers, on hand-made inputs and the fixture store (no browser)."""
from __future__ import annotations

import datetime as dt
import math

import polars as pl
import pytest

import dashboard_fixture as fx
from dashboard import data, shaping
from dashboard.whatif import budgets as whatif_budgets
from dashboard.whatif import frames

UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def store(tmp_path_factory, monkeypatch_module):
    root = fx.build(tmp_path_factory.mktemp("dash_data_store"))
    monkeypatch_module.setenv("QUOTALOOP_STORE", str(root))
    monkeypatch_module.setenv("QUOTALOOP_AUTH", "open")
    return root


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _window() -> data.Filters:
    return data.Filters(fx.T0 - dt.timedelta(days=1), fx.T0 + dt.timedelta(days=fx.DAYS + 1))


def _expected_gpu_waste_h(jobs: pl.DataFrame) -> dict:
    """Independent computation: every fixture job uses a constant fraction of its GPUs for its whole run."""
    util = {u: v[2] for u, v in fx.USERS.items()}
    out: dict = {}
    for j in jobs.iter_rows(named=True):
        out[j["user"]] = out.get(j["user"], 0.0) + j["req_gpus"] * j["elapsed_s"] / 3600 * (1 - util[j["user"]])
    return out


# ------------------------------------------------------------------ hostlists and node slots
@pytest.mark.parametrize("expr, hosts", [
    ("gpu-[001-003,005],cpu-07", ["gpu-001", "gpu-002", "gpu-003", "gpu-005", "cpu-07"]),
    ("n1", ["n1"]),
    ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("", []),
    (None, []),
])
def test_expand_hostlist(expr, hosts):
    assert shaping.expand_hostlist(expr) == hosts


def _occ(rows):
    cols = ["node", "node_gpus", "node_state", "job_id", "user", "job_class", "gpus_on_node"]
    return pl.DataFrame([dict(zip(cols, r)) for r in rows], schema={
        "node": pl.String, "node_gpus": pl.Float64, "node_state": pl.String, "job_id": pl.String,
        "user": pl.String, "job_class": pl.String, "gpus_on_node": pl.Float64})


def test_node_slots_by_hand():
    occ = _occ([
        ("n1", 8, "idle", "j1", "alice", "training", 4.0),   # efficiency 0.5 -> 2 busy, 2 idle
        ("n1", 8, "idle", "j2", "bob", "debug", 0.5),        # a fraction of a GPU holds one slot; unknown eff -> busy
        ("n2", 8, "idle", None, None, None, None),            # empty node -> 8 free
        ("n3", 4, "drain", "j3", "carol", "eval", 4.0),       # drained -> all down
    ])
    slots = shaping.node_slots(occ, {"j1": 0.5})
    n1 = slots.filter(pl.col("node") == "n1").sort("slot")["state"].to_list()
    # j1's 2 busy of 4 slots are spread over them (which GPU was busy is not recorded), not drawn first
    assert n1 == ["allocated, idle", "busy", "allocated, idle", "busy", "busy"] + ["stranded free"] * 3
    assert "not recorded" in slots.filter(pl.col("node") == "n1")["job"][0]
    assert slots.filter(pl.col("node") == "n2")["state"].to_list() == ["free"] * 8
    assert slots.filter(pl.col("node") == "n3")["state"].to_list() == ["down"] * 4
    assert shaping.slot_counts(slots) == {"busy": 3, "allocated, idle": 2, "free": 8, "stranded free": 3, "down": 4}


def test_spread_places_busy_slots_evenly():
    assert shaping.spread(2, 4) == {1, 3} and shaping.spread(0, 8) == set() and shaping.spread(8, 8) == set(range(8))
    for n in range(1, 9):
        for k in range(n + 1):
            got = shaping.spread(k, n)
            assert len(got) == k and all(0 <= i < n for i in got)
    assert shaping.spread(3, 8) == {1, 4, 6}  # not GPU 0-2


def test_sign_changes_counts_direction_flips():
    assert shaping.sign_changes([1.0, 1.1, 1.2, 1.3]) == 0
    assert shaping.sign_changes([1.0, 1.2, 1.0, 1.2, 1.0]) == 3
    assert shaping.sign_changes([1.0, 1.0, 1.2, 1.2, 1.1]) == 1   # flat steps are not a direction
    assert shaping.sign_changes([]) == 0


# ------------------------------------------------------------------ queries through the cache layer
def test_waste_by_user_matches_an_independent_computation(store):
    jobs = fx.jobs_frame()
    expected = _expected_gpu_waste_h(jobs)
    got = data.waste_by(_window(), "user", "gpu")
    assert sorted(got["user"].to_list()) == sorted(fx.USERS)
    for row in got.iter_rows(named=True):
        assert math.isclose(row["wasted_hours"], expected[row["user"]], rel_tol=1e-9), row["user"]
        assert math.isclose(row["efficiency"], fx.USERS[row["user"]][2], rel_tol=1e-9)
    # largest waste first
    assert got["wasted_hours"].to_list() == sorted(got["wasted_hours"].to_list(), reverse=True)


def test_account_filter_narrows_to_the_subtree(store):
    flt = data.Filters(_window().start, _window().end, account="lab/nlp")
    got = data.waste_by(flt, "user", "gpu")
    assert sorted(got["user"].to_list()) == ["dave", "erin"]
    teams = data.waste_by(_window(), "team", "gpu", team_level=2)
    assert sorted(teams["team"].to_list()) == ["lab/nlp", "lab/vision"]


def test_team_jobs_with_a_limit_are_that_teams_biggest_wasters(store):
    """``limit`` applies inside the team (the team narrows the query), never to the cluster before the team."""
    w = _window()
    every = data.job_waste(w)
    seg = every.filter(pl.col("account").str.starts_with("lab/vision/seg"))
    expected = seg.sort(["gpu_seconds_wasted", "cpu_seconds_wasted", "job_id"],
                        descending=[True, True, False])["job_id"].head(3).to_list()
    # the fixture's biggest GPU wasters are erin's (lab/nlp/llm): a cluster-wide top 3 holds no seg job
    assert not set(every.sort("gpu_seconds_wasted", descending=True)["job_id"].head(3)) & set(seg["job_id"])
    got = data.job_waste(w, team_level=3, team="lab/vision/seg", limit=3)
    assert got["job_id"].to_list() == expected
    assert data.job_waste(w, team_level=3, team="lab/vision/seg")["job_id"].sort().to_list() == \
        seg["job_id"].sort().to_list()
    # a sidebar subtree inside the team narrows further; a disjoint one leaves nothing
    inner = data.Filters(w.start, w.end, account="lab/vision")
    assert data.job_waste(inner, team_level=3, team="lab/vision/seg")["job_id"].sort().to_list() == \
        seg["job_id"].sort().to_list()
    nlp = data.Filters(w.start, w.end, account="lab/nlp")
    assert data.job_waste(nlp, team_level=3, team="lab/vision/seg").is_empty()
    assert set(data.job_waste(data.Filters(w.start, w.end, account="lab/vision/seg"), team_level=2,
                              team="lab/vision")["job_id"]) == set(seg["job_id"])


def test_filters_a_query_does_not_take_are_reported(store):
    flt = data.Filters(_window().start, _window().end, state="COMPLETED")
    assert data.ignored_filters("job_waste", flt) == []
    assert "state" in data.ignored_filters("budget_usage", flt)


def test_unknown_query_is_not_available(store):
    with pytest.raises(data.NotAvailable, match="no_such_query"):
        data.query("no_such_query")


def test_options_and_token_change_on_write(store):
    opts = data.options()
    assert opts.users == sorted(fx.USERS) and "lab/vision" in opts.accounts and opts.jobs == fx.jobs_frame().height
    before = data.store_token()
    from queries.store import Store

    extra = fx.jobs_frame().head(1).with_columns(pl.lit("zz9999").alias("job_id"))
    with Store(store).transaction() as tx:
        tx.upsert("jobs", extra)
    assert data.store_token() != before
    assert data.options().jobs == fx.jobs_frame().height + 1



def test_options_span_from_the_footers_equals_the_scan(store, monkeypatch):
    """The sidebar's span comes from the files' footer statistics; a store whose footers cannot say is scanned.
    Both equal the span computed from the jobs themselves."""
    from dashboard.data import query_cache
    from queries.store import Store

    jobs = pl.concat([pl.read_parquet(f) for f in Store(store).files("jobs")], how="diagonal_relaxed")
    first = jobs["submit"].min()
    last = max(v for v in (jobs["submit"].max(), jobs["start"].max(), jobs["end"].max()) if v is not None)
    query_cache._options.clear()
    opts = data.options()
    assert (opts.first, opts.last, opts.jobs) == (first, last, jobs.height)
    query_cache._options.clear()
    monkeypatch.setattr(query_cache, "extent", lambda *a, **k: None)  # footers without statistics
    scanned = data.options()
    assert (scanned.first, scanned.last, scanned.jobs) == (first, last, jobs.height)
    assert scanned == opts
    query_cache._options.clear()

# ------------------------------------------------------------------ scenarios (pure)
def _tree():
    from engine import budgets

    return budgets.parse("""
[min_runtime]
training = "8h"
debug = 0
[tree.acme]
share = 1
[tree.acme.research]
share = 3
guaranteed_gpus = 16
[tree.acme.research.vision]
share = 2
[tree.acme.research.nlp]
share = 1
[tree.acme.product]
share = 1
""")


def test_slider_groups_skip_lone_children():
    nodes = whatif_budgets.budget_nodes(_tree())
    groups = whatif_budgets.slider_groups(nodes)
    assert [(p, [k["path"] for k in kids]) for p, kids in groups] == [
        ("acme", ["acme/research", "acme/product"]),
        ("acme/research", ["acme/research/vision", "acme/research/nlp"]),
    ]


def test_budget_overrides_copy_the_tree_and_only_differences_count():
    tree = _tree()
    patched = whatif_budgets.apply_budget_overrides(tree, {"acme/research/nlp": 5.0}, {"acme/product": 8.0})
    by_path = {n["path"]: n for n in whatif_budgets.budget_nodes(patched)}
    assert by_path["acme/research/nlp"]["share"] == 5.0 and by_path["acme/product"]["guaranteed_gpus"] == 8.0
    assert {n["path"]: n["share"] for n in whatif_budgets.budget_nodes(tree)}["acme/research/nlp"] == 1.0  # untouched
    assert whatif_budgets.overrides({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 3.0}) == {"b": 3.0}
    assert whatif_budgets.baseline_min_runtime_s(tree, "training") == 8 * 3600.0
    # eval: no [min_runtime] entry, no default = no contract (None, never preempted), not 0 (preemptible)
    assert whatif_budgets.baseline_min_runtime_s(tree, "eval") is None
    assert whatif_budgets.overrides({"eval": None, "debug": 0.0}, {"eval": None, "debug": None}) == {"debug": None}
    assert whatif_budgets.overrides({"eval": None}, {"eval": 0}) == {"eval": 0}
    d = whatif_budgets.apply_budget_overrides({"x/a": 1.0}, {"x/a": 2.0}, {})
    assert d == {"x/a": {"share": 2.0}}


def test_equal_settings_make_equal_scenarios():
    from dashboard.whatif.spec import ScenarioSpec

    a = ScenarioSpec.make("custom", shares={"b": 2, "a": 1})
    b = ScenarioSpec.make("custom", shares={"a": 1.0, "b": 2.0})
    assert a == b and hash(a) == hash(b)
    assert ScenarioSpec.make("custom") == ScenarioSpec.make("custom", shares={}, min_runtime_s={})
    assert "a=1" in a.describe()


def test_the_custom_mix_carries_every_part_into_the_engine_config():
    """The custom kind's min runtime (seconds), checkpoints, backfill and policy reach the scenario's engine
    configuration; the baseline keeps the spec's fairshare / easy; the tree's guarantee sets quota. The min runtime
    override is configuration (``min_runtime_by_class``, engine.min_runtime), never stamped into the jobs."""
    from dashboard.whatif import runner
    from dashboard.whatif.spec import ScenarioSpec
    from test_scenarios import inputs, job

    spec = ScenarioSpec.make("custom", min_runtime_s={"debug": 1800.0, "eval": None}, checkpoint_interval_s=1800,
                             scenario_backfill="conservative", scenario_policy="drf")
    inp = inputs([job("d", "acme/product", 1, 1, 1, cls="debug")], _tree(), start=0.0, end=4.0)
    base_jobs, base, jobs, cfg, _, _ = runner.configs(spec, inp)
    assert (base.policy, base.backfill, base.checkpoint_interval_s) == ("fairshare", "easy", None)
    assert (cfg.policy, cfg.backfill, cfg.checkpoint_interval_s) == ("drf", "conservative", 1800.0)
    assert cfg.validated().quota == "guarantee"  # the tree has a guarantee
    assert cfg.min_runtime_by_class == {"debug": 1800.0, "eval": None} and not base.min_runtime_by_class
    assert jobs["min_runtime_s"].to_list() == [None] and base_jobs["min_runtime_s"].to_list() == [None]


def test_occupancy_series_integrates_to_the_allocated_hours():
    import engine

    jobs, nodes = fx.jobs_frame(), fx.nodes_frame()
    res = engine.simulate(jobs, nodes, engine.SimConfig())
    occ = frames.occupancy_series(res, 3600.0)
    # independent: sum over the timeline of gpus x duration
    tl = res.timeline
    direct = sum(g * (e - s).total_seconds() / 3600 for g, s, e in zip(tl["gpus"], tl["start"], tl["end"]))
    # buckets tile [first start, last end): the last one is cut short at the last end, and none starts there
    last_end = tl["end"].max()
    lengths_h = [(min(t + dt.timedelta(hours=1), last_end) - t).total_seconds() / 3600 for t in occ["t"]]
    assert occ["t"].max() < last_end and lengths_h[-1] <= 1.0
    assert math.isclose(sum(g * h for g, h in zip(occ["gpus"], lengths_h)), direct, rel_tol=1e-9)
    assert occ["gpus"].max() <= 32.0 + 1e-9
    # on a window whose end cuts running jobs, the last hour is as busy as the timeline says, not 0
    end = tl["start"].min() + dt.timedelta(days=2)
    cut = frames.occupancy_series(res, 3600.0, tl["start"].min(), end)
    assert cut["t"].max() == end - dt.timedelta(hours=1)
    running = tl.filter((pl.col("start") < end) & (pl.col("end") > end - dt.timedelta(hours=1)))
    assert cut["gpus"][-1] > 0 and running.height > 0


def test_waits_frame():
    base = {"wait_s_by_class": {"debug": {"p90": 7200.0}}}
    scen = {"wait_s_by_class": {"debug": {"p90": 1800.0}}}
    w = frames.waits_frame(base, scen)
    assert w.row(0) == ("debug", 2.0, 0.5)


# ------------------------------------------------------------------ gaming check
def test_split_jobs_tiles_each_run_and_keeps_totals():
    from dashboard import gaming

    jobs = fx.jobs_frame()
    split = gaming.split_jobs(jobs, "alice", 4)
    a, b = jobs.filter(pl.col("user") == "alice"), split.filter(pl.col("user") == "alice")
    assert b.height == 4 * a.height
    assert split.filter(pl.col("user") != "alice").equals(jobs.filter(pl.col("user") != "alice"))
    assert b["cpu_seconds_used"].sum() == pytest.approx(a["cpu_seconds_used"].sum())
    assert (b["req_gpus"].unique().sort().to_list() == a["req_gpus"].unique().sort().to_list())
    one = b.filter(pl.col("job_id").str.starts_with(a["job_id"][0] + ".split")).sort("start")
    assert one["start"][0] == a["start"][0] and one["end"][-1] == a["end"][0]
    assert all(e == s for e, s in zip(one["end"][:-1], one["start"][1:]))  # back to back, no gap, no overlap


def test_gaming_check_on_the_fixture_store(store):
    check = data.gaming_check(_window(), "alice", 10)
    by = {r["metric"]: r for r in check.iter_rows(named=True)}
    assert by["job_count"]["after_split"] == 10 * by["job_count"]["before"]
    assert by["gpu_hours_wasted"]["change"] == pytest.approx(0, abs=1e-9)
    assert by["rec_coefficient"]["change"] == pytest.approx(0, abs=1e-9)
    assert by["legacy_score"]["change"] < 0  # the legacy score's flaw, shown
    verdict = shaping.gaming_verdict(check)
    assert verdict["sound"] and verdict["legacy_gamed"]
    bad = check.with_columns(pl.when(pl.col("metric") == "rec_coefficient").then(0.5).otherwise(pl.col("change"))
                             .alias("change"))
    assert not shaping.gaming_verdict(bad)["sound"]


def test_sim_occupancy_at_matches_the_timeline_by_hand():
    t = lambda h: dt.datetime(2026, 11, 2, h, tzinfo=UTC)  # noqa: E731
    timeline = pl.DataFrame({"node": ["n1", "n1", "n2"], "job_id": ["a", "b", "c"], "start": [t(0), t(2), t(1)],
                             "end": [t(3), t(5), t(2)], "gpus": [4.0, 2.0, 8.0]})
    jobs = pl.DataFrame({"job_id": ["a", "b", "c"], "user": ["u", "v", "w"], "job_class": ["training"] * 3,
                         "mean_gpu_util": [0.5, None, 1.0]})
    nodes = pl.DataFrame({"node": ["n1", "n2"], "gpus": [8.0, 8.0], "state": ["drain", "idle"]})
    occ = shaping.sim_occupancy_at(timeline, jobs, nodes, t(2))  # a and b run on n1; c ended at 2:00
    assert sorted(occ.filter(pl.col("job_id").is_not_null())["job_id"].to_list()) == ["a", "b"]
    assert occ.filter(pl.col("node") == "n2")["job_id"].to_list() == [None]
    slots = shaping.node_slots(occ, shaping.sim_efficiency(jobs))
    # n1: a holds 4 (2 busy at 50 %), b holds 2 (unknown utilisation -> busy), 2 stranded; n2: 8 free
    assert shaping.slot_counts(slots) == {"busy": 4, "allocated, idle": 2, "free": 8, "stranded free": 2, "down": 0}


def test_a_parameter_spelled_at_its_default_shares_the_cached_run(store, monkeypatch):
    """``quota_backtest`` with ``period_s`` at its declared default (604800) and without it run the query once;
    the user ranking of the Overview, My jobs and Rankings (leaf teams by default) is one run too."""
    import queries
    from dashboard.data import query_cache

    query_cache._run.clear()
    calls = []
    real = queries.run
    monkeypatch.setattr(queries, "run", lambda name, **kw: calls.append(name) or real(name, **kw))
    flt = _window()
    a = data.query("quota_backtest", flt, period_s=7 * 86400.0)
    b = data.quota_backtest(flt)
    assert a.equals(b) and calls == ["quota_backtest"]
    data.query("quota_backtest", flt, period_s=86400.0)
    assert calls == ["quota_backtest"] * 2
    data.options()  # the sidebar's values (its own query, store_values), cached before counting the ranking's runs
    calls.clear()
    users = data.user_ranking(flt, order_by="gpu")
    assert data.user_row(flt, "alice") == users.filter(pl.col("user") == "alice").row(0, named=True)
    assert calls == ["user_ranking"]
    assert set(users["main_team"]) == {a for a, *_ in fx.USERS.values()}  # the leaf teams of the fixture


def test_compact_numbers_for_metric_cards():
    from dashboard import ui

    assert [ui.compact(v) for v in (None, 0, 16, 16.0, 2.5, 0.04, 99.5, 950, 12_400, 261_000, 4_070_000)] == [
        "–", "0", "16", "16", "2.5", "0.0", "99.5", "950", "12.4 k", "261 k", "4.07 M"]


def test_the_replayed_cluster_is_the_busiest_one_near_the_window_end(tmp_path, monkeypatch):
    # two clusters whose logs end at different times (as sarc's dump): "old" has the most jobs, all of them a
    # month before the window's end; "new" has fewer, in its last week. Without a cluster in the sidebar the
    # Fair share page replays "new" (the old default, the cluster with the most jobs, had nothing to replay)
    from dashboard.data import query_cache, sim
    from queries.store import Store

    jobs = fx.jobs_frame()
    old = jobs.with_columns(pl.lit("old").alias("cluster"))
    new = jobs.head(jobs.height // 3).with_columns(
        pl.lit("new").alias("cluster"), *[pl.col(c) + dt.timedelta(days=30) for c in ("submit", "start", "end")])
    root = tmp_path / "two"
    with Store(root).transaction() as tx:
        tx.upsert("jobs", pl.concat([old, new]))
        tx.replace_nodes("old", fx.nodes_frame().with_columns(pl.lit("old").alias("cluster")))
        tx.replace_nodes("new", fx.nodes_frame().with_columns(pl.lit("new").alias("cluster")))
    monkeypatch.setenv("QUOTALOOP_STORE", str(root))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    query_cache._options.clear()
    end = new["end"].max().replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=1)
    flt = data.Filters(end - dt.timedelta(days=30), end)
    assert old.height > new.height
    assert sim.sim_cluster(flt) == "new"
    # every replay window cut from the sidebar's (the last 1 / 7 days, the whole window) replays the same one
    assert {sim.sim_cluster(sim.replay_filters(flt, d)) for d in (1, 7, 0)} == {"new"}
    assert sim.sim_cluster(data.Filters(end - dt.timedelta(days=30), end, "old")) == "old"  # the sidebar's
    # no job in the week before the end, or no end: the cluster with the most jobs, as before
    assert sim.sim_cluster(data.Filters(None, end + dt.timedelta(days=60))) == "old"
    assert sim.sim_cluster(data.Filters()) == "old"
