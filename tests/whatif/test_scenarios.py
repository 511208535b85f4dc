"""Named scenarios: each one's direction on a workload built to show it, hand-checked transforms, parameter
validation, reproducibility (same parameters + seed -> byte-identical files) and the ``quotaloop scenario`` CLI."""
from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import polars as pl
import pytest

from dashboard.whatif import runner, transforms
from dashboard.whatif.params import ScenarioError
from dashboard.whatif.spec import ScenarioSpec
from engine.budgets import parse
from queries.store import schema
from queries.store import Store

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 2, tzinfo=UTC)
GIB = float(1 << 30)
TWO = parse("cluster_gpus = 16\n[tree.lab]\n[tree.lab.a]\nshare = 1\n[tree.lab.b]\nshare = 1\n")


def h(x: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=x)


def nodes(n=2, gpus=8.0, mem_gib=512.0) -> pl.DataFrame:
    return schema.conform(pl.DataFrame([dict(cluster="c", node=f"n{i}", partition="gpu", cpus=64.0, gpus=gpus,
                                             mem_bytes=mem_gib * GIB, gpu_type="a100") for i in range(1, n + 1)]),
                          "nodes")


def job(jid, account, gpus, submit_h, run_h, *, cls="training", min_rt=None, limit_h=None, cpus=8.0, mem_gib=32.0,
        util=0.9, cpu_used=None, rss_gib=None):
    run_s = run_h * 3600.0
    return dict(cluster="c", job_id=jid, account=account, user=f"u_{account.rsplit('/', 1)[-1]}", partition="gpu",
                job_class=cls, state="COMPLETED", req_gpus=float(gpus), alloc_gpus=float(gpus), submit=h(submit_h),
                start=h(submit_h), end=h(submit_h + run_h), elapsed_s=run_s, time_limit_s=(limit_h or run_h) * 3600.0,
                nodes=1, req_cpus=cpus, alloc_cpus=cpus, req_mem_bytes=mem_gib * GIB, alloc_mem_bytes=mem_gib * GIB,
                cpu_seconds_used=(cpu_used if cpu_used is not None else cpus) * run_s,
                max_rss_bytes=(rss_gib if rss_gib is not None else mem_gib) * GIB, mean_gpu_util=util,
                min_runtime_s=min_rt)


def inputs(rows, tree=TWO, n_nodes=2, store=None, start=0.0, end=48.0, **kw) -> runner.Inputs:
    jobs = schema.conform(pl.DataFrame(rows), "jobs").sort("submit", "job_id")
    return runner.Inputs(jobs, nodes(n_nodes, **kw), tree, h(start), h(end), store=store, cluster="c")


def write_store(root, rows) -> str:
    """A real store at ``root`` holding ``rows`` as cluster ``c``'s jobs on ``nodes()``."""
    with Store(root).transaction() as tx:
        tx.upsert("jobs", schema.conform(pl.DataFrame(rows), "jobs"))
        tx.replace_nodes("c", nodes())
    return str(root)


def teams(result) -> dict:
    return {r["node"]: r for r in result.teams.iter_rows(named=True)}


def metric(result, key) -> tuple:
    r = result.comparison.filter(pl.col("metric") == key).row(0, named=True)
    return r["baseline"], r["scenario"]


def contention(n_jobs=12) -> list[dict]:
    """Both teams keep the 16-GPU cluster twice over busy with 8-GPU, 4-hour jobs, all submitted at once."""
    return [job(f"{t}{i}", f"lab/{t}", 8, 0, 4) for t in ("a", "b") for i in range(n_jobs)]


# ------------------------------------------------------------------------------------------ directions
def test_raising_a_teams_share_raises_what_it_receives():
    # Attainment is received / entitled with the entitlement of each run's own tree: fair share delivers the new
    # entitlement, so attainment stays ~1 while what the team receives follows its share (and its sibling's
    # falls). Measured against the *baseline* entitlement, a's attainment rises from 1 to about 1.5.
    inp = inputs(contention(), end=24.0)
    res = runner.run(ScenarioSpec.make("shares", shares={"lab/a": 3}), inp)
    t = teams(res)
    a, b = t["lab/a"], t["lab/b"]
    assert a["received_scenario_h"] > a["received_baseline_h"] and b["received_scenario_h"] < b["received_baseline_h"]
    assert a["received_scenario_h"] / a["entitled_baseline_h"] > 1.3 > a["attainment_baseline"]
    assert a["attainment_scenario"] >= 0.95 and a["cluster_share_scenario"] > a["cluster_share_baseline"]
    assert (t["lab/a"]["verdict"], t["lab/b"]["verdict"]) == ("gains", "loses")
    # entitlement follows the share: a's water-filled entitlement is 3/4 of the capacity while both want more
    assert t["lab/a"]["entitled_scenario_h"] == pytest.approx(0.75 * 16 * 24)
    assert t["lab/a"]["entitled_baseline_h"] == pytest.approx(0.5 * 16 * 24)
    assert res.spec.to_dict()["params"]["shares"] == {"lab/a": 3.0}


def test_backfill_fills_the_hole_before_a_wide_job():
    # a holds one node 0-10 h; b's 16-GPU job must wait for both nodes; small 1-GPU jobs (2 h) arrive behind it.
    # Window [0, 12 h) on 16 GPUs: without backfill the small jobs run 12-14 h, outside it (occupancy
    # (80 + 32) / 192); EASY runs them 1-3 h in the hole beside a0 ((80 + 32 + 16) / 192).
    rows = [job("a0", "lab/a", 8, 0, 10, limit_h=10), job("wide", "lab/b", 16, 0.5, 2, limit_h=2)]
    rows += [job(f"s{i}", "lab/a", 1, 1, 2, limit_h=2) for i in range(8)]
    res = runner.run(ScenarioSpec.make("backfill", to="easy", backfill="none"), inputs(rows, end=12.0))
    occ_base, occ_scen = metric(res, "occupancy")
    wait_base, wait_scen = metric(res, "usage.wait_job_hours")
    assert occ_scen > occ_base and wait_scen < wait_base
    assert (occ_base, occ_scen) == (pytest.approx(112 / 192), pytest.approx(128 / 192))
    small = res.scenario.jobs.filter(pl.col("job_id").str.starts_with("s"))
    assert small["wait_s"].max() == 0  # all eight fit the free node's hole before the wide job's reservation
    wide = lambda r: r.jobs.filter(pl.col("job_id") == "wide")["start"][0]  # noqa: E731
    assert wide(res.scenario) == wide(res.baseline) == h(10)  # EASY does not delay the reserved job


def test_training_min_runtime_contract_lowers_debug_p90_wait():
    # a's 8-GPU training jobs fill the cluster for 24 h; b's 1-GPU debug jobs arrive from 9 h on.
    # Baseline: no contracts at all (never preempted): debug waits until 24 h. Scenario: training 8 h, debug
    # 15 min, checkpoints every 30 min: past 8 h training is requeued for the under-served team's debug work.
    # (The engine lets only funded jobs - min runtime > 0 - preempt, so debug = 0 would not preempt: it would
    # only make debug itself preemptible.)
    rows = [job(f"t{i}", "lab/a", 8, 0, 24, min_rt=None) for i in range(2)]
    rows += [job(f"d{i}", "lab/b", 1, 9.2 + i, 0.25, cls="debug", min_rt=None) for i in range(6)]
    spec = ScenarioSpec.make("min_runtime", min_runtime_s={"training": 8 * 3600.0, "debug": 900.0},
                             checkpoint_interval_s=1800.0)
    res = runner.run(spec, inputs(rows, end=48.0))
    base_p90, scen_p90 = metric(res, "wait_s_by_class.debug.p90")
    # (a requeued training job restarts with a fresh 8 h contract as soon as the debug job leaves, so later
    # debug jobs wait again for it: the gain is real but not total)
    assert base_p90 > 10 * 3600 and scen_p90 < base_p90 / 2
    first = res.scenario.jobs.filter(pl.col("job_id") == "d0")["wait_s"][0]
    assert first == 0.0  # the first debug job preempts at once (training is 9.2 h into its 8 h contract)
    pre_base, pre_scen = metric(res, "preemptions")
    assert pre_base == 0 and pre_scen >= 1
    lost = res.scenario.jobs.filter(pl.col("job_class") == "training")
    # work lost per preemption is at most one checkpoint interval of the victim's 8 GPUs
    assert 0 < lost["lost_gpu_seconds"].sum() <= pre_scen * 1800.0 * 8 + 1e-6


def test_right_sizing_shortens_waits_when_memory_is_the_bottleneck():
    # every job asks a node's whole 512 GiB but uses 40 GiB: one job per node, 7 GPUs idle beside it.
    rows = [job(f"j{i}", "lab/a" if i % 2 else "lab/b", 1, 0.1 * i, 2, mem_gib=512.0, rss_gib=40.0, cpus=32.0,
                cpu_used=4.0) for i in range(16)]
    res = runner.run(ScenarioSpec.make("rightsize", margin=0.2), inputs(rows, end=24.0))
    wait_base, wait_scen = metric(res, "usage.wait_job_hours")
    assert wait_base > 0 and wait_scen == pytest.approx(0.0)
    idle_base, idle_scen = metric(res, "usage.idle_mem_tb_hours")
    assert idle_scen < idle_base / 5
    cpu_base, cpu_scen = metric(res, "usage.idle_cpu_hours")
    # by hand: 16 jobs x 2 h; requested 32 CPUs, used 4 -> ceil(4 x 1.2) = 5 CPUs: idle 28 -> 1 CPU per job-hour
    assert cpu_base == pytest.approx(16 * 2 * 28) and cpu_scen == pytest.approx(16 * 2 * 1)
    assert set(res.teams["verdict"].to_list()) <= {"gains", "same"}


def _quota_store(tmp_path) -> str:
    """a uses its GPUs at 95 %, b at 5 %; both keep a 16-GPU cluster twice over busy, one day after another."""
    rows = []
    for day in range(5):
        for t, util in (("a", 0.95), ("b", 0.05)):
            for i in range(12):
                rows.append(job(f"{t}{day}_{i}", f"lab/{t}", 8, 24 * day + 0.01 * i, 4, util=util,
                                cpu_used=8.0 * util))
    return write_store(tmp_path, rows)


def test_quota_loop_moves_budget_to_the_efficient_team(tmp_path):
    store = _quota_store(tmp_path)
    inp = runner.load_inputs(store, TWO, window_s=2 * 86400, end=h(5 * 24), cluster="c")
    assert inp.start == h(3 * 24) and inp.counts() == {"jobs": 2 * 2 * 12, "jobs_started_before": 3 * 2 * 12,
                                                         "jobs_pending_at_start": 0}  # warm start: days 0-2 as logged
    spec = ScenarioSpec.make("quota_loop", period_s=86400.0, history_periods=3,
                             backtest={"alpha": 1.0, "dead_band": 0.0, "max_step": 10.0})
    res = runner.run(spec, inp)
    mult = res.extra["multipliers"]
    last = {r["bucket"]: r["multiplier"] for r in mult.filter(pl.col("effective_from") == h(4 * 24)).iter_rows(named=True)}
    assert last["lab/a"] > 1.0 > last["lab/b"]
    t = teams(res)
    assert (t["lab/a"]["verdict"], t["lab/b"]["verdict"]) == ("gains", "loses")
    assert t["lab/a"]["received_scenario_h"] > t["lab/a"]["received_baseline_h"]
    st = {r["bucket"]: r for r in res.extra["stability"].iter_rows(named=True)}
    assert st["lab/a"]["reversals"] == 0 and res.summary()["loop_stable"] is True
    # a period's coefficient applies from the next period on: nothing is effective before the first period ends
    assert mult["effective_from"].min() == h(24)


# ------------------------------------------------------------------------------------------ transforms by hand
def test_rightsize_transform_by_hand():
    rows = [job("x", "lab/a", 4, 0, 1, cpus=32.0, cpu_used=10.0, mem_gib=256.0, rss_gib=10.5, util=0.1),
            job("y", "lab/a", 2, 0, 1, cpus=8.0, cpu_used=8.0, mem_gib=16.0, rss_gib=20.0, util=0.9),
            dict(job("z", "lab/a", 1, 0, 1), cpu_seconds_used=None, max_rss_bytes=None, mean_gpu_util=None)]
    df = schema.conform(pl.DataFrame(rows), "jobs")
    out = {r["job_id"]: r for r in transforms.rightsize(df, 0.2).iter_rows(named=True)}
    assert out["x"]["req_cpus"] == 12.0                    # ceil(10 x 1.2)
    assert out["x"]["req_mem_bytes"] == 13 * GIB           # ceil(10.5 x 1.2 = 12.6) GiB
    assert out["x"]["req_gpus"] == 1.0                     # 4 x 0.1 x 1.2 = 0.48 GPU: one whole GPU
    assert out["x"]["alloc_gpus"] == 1.0
    assert (out["y"]["req_cpus"], out["y"]["req_mem_bytes"], out["y"]["req_gpus"]) == (8.0, 16 * GIB, 2.0)  # never up
    assert (out["z"]["req_cpus"], out["z"]["req_gpus"]) == (8.0, 1.0)                          # unknown use: kept
    frac = {r["job_id"]: r for r in transforms.rightsize(df, 0.2, "fraction").iter_rows(named=True)}
    assert frac["x"]["req_gpus"] == pytest.approx(0.48)
    keep = {r["job_id"]: r for r in transforms.rightsize(df, 0.2, "keep").iter_rows(named=True)}
    assert keep["x"]["req_gpus"] == 4.0
    assert df["req_cpus"].to_list() == [32.0, 8.0, 8.0]   # input untouched


def test_with_multipliers_adds_versions_over_the_tree_history():
    tree = parse("[tree.g]\n[tree.g.a]\nshare = 2\n[tree.g.b]\nshare = 1\n[[period]]\nstart = 2026-11-03\n"
                 "[period.tree.g.b]\nshare = 4\n")
    mult = pl.DataFrame({"effective_from": [h(12), h(12), h(36)], "bucket": ["g/a", "g/b", "g/a"],
                         "multiplier": [0.5, 2.0, 3.0]}, schema_overrides={"effective_from": pl.Datetime("us", "UTC")})
    out = transforms.with_multipliers(tree, mult)
    assert [v.start for v in out.versions] == [None, h(12), h(24), h(36)]
    share = lambda t, p: out.at(t).index[p].share  # noqa: E731
    assert (share(h(1), "g/a"), share(h(1), "g/b")) == (2.0, 1.0)           # before any multiplier
    assert (share(h(13), "g/a"), share(h(13), "g/b")) == (1.0, 2.0)         # x0.5, x2
    assert (share(h(25), "g/a"), share(h(25), "g/b")) == (1.0, 8.0)         # the tree's own period: b = 4 x 2
    assert (share(h(37), "g/a"), share(h(37), "g/b")) == (6.0, 8.0)         # a's newer multiplier 3
    assert tree.at(h(37)).index["g/a"].share == 2.0                         # the input is untouched


def test_stability_counts_reversals():
    mult = pl.DataFrame({"effective_from": [h(i) for i in range(4)] * 2, "bucket": ["up"] * 4 + ["osc"] * 4,
                         "multiplier": [1.2, 1.4, 1.4, 1.5, 1.3, 0.9, 1.2, 0.8]})
    st = {r["bucket"]: r for r in transforms.stability(mult).iter_rows(named=True)}
    assert (st["up"]["reversals"], st["up"]["oscillating"], st["up"]["final"]) == (0, False, 1.5)
    assert st["up"]["largest_step"] == pytest.approx(0.2)
    # osc: 1 -> 1.3 -> 0.9 -> 1.2 -> 0.8: up, down, up, down = three reversals
    assert (st["osc"]["reversals"], st["osc"]["oscillating"]) == (3, True)
    assert st["osc"]["largest_step"] == pytest.approx(0.4)


def test_min_runtime_override_beats_the_log():
    df = schema.conform(pl.DataFrame([job("t", "lab/a", 1, 0, 1, min_rt=100.0), job("d", "lab/a", 1, 0, 1, cls="debug",
                                                                                   min_rt=100.0)]), "jobs")
    # the override is configuration (engine.min_runtime), not a rewrite of the jobs' column
    import engine

    res = engine.simulate(df, nodes(), engine.SimConfig(min_runtime_by_class={"training": 8 * 3600.0}))
    assert dict(zip(res.jobs["job_id"], res.jobs["min_runtime_s"])) == {"t": 8 * 3600.0, "d": 100.0}


def test_min_runtime_kind_passes_none_and_default_as_configuration():
    """The min-runtime kind's override reaches the engine as ``min_runtime_by_class`` (engine.min_runtime):
    None = no contract, "default" = every class not named; the jobs' logged column is never rewritten."""
    rows = [job("t", "lab/a", 1, 0, 1, min_rt=100.0), job("d", "lab/a", 1, 0, 1, cls="debug", min_rt=100.0)]
    spec = ScenarioSpec.make("min_runtime", min_runtime_s={"training": None, "default": 1800.0})
    assert spec.describe().startswith("min runtime default 0.5 h, training none; no checkpoints")
    base_jobs, base, jobs, cfg, _, _ = runner.configs(spec, inputs(rows, end=4.0))
    assert cfg.min_runtime_by_class == {"default": 1800.0, "training": None} and not base.min_runtime_by_class
    assert jobs["min_runtime_s"].to_list() == base_jobs["min_runtime_s"].to_list() == [100.0, 100.0]
    res = runner.run(spec, inputs(rows, end=4.0))
    got = dict(zip(res.scenario.jobs["job_id"], res.scenario.jobs["min_runtime_s"]))
    assert got == {"t": None, "d": 1800.0}  # training: no contract (written as null); debug: the default
    assert ScenarioSpec.make("min_runtime", min_runtime_s={}).describe().startswith("min runtime unchanged")
    custom = ScenarioSpec.make("custom", min_runtime_s={"training": None})
    assert custom.describe().startswith("min runtime training none")


# ------------------------------------------------------------------------------------------ spec, reproducibility
@pytest.mark.parametrize("kind,kw,needle", [
    ("nope", {}, "unknown scenario"), ("shares", {"share": {}}, "unknown parameter"),
    ("shares", {"shares": {"a": -1}}, "shares.a"), ("backfill", {"to": "greedy"}, "to:"),
    ("backfill", {"to": "none", "reservation_depth": 2}, "reservation_depth"),
    ("min_runtime", {"min_runtime_s": {"trainig": 1}}, "unknown job class"),
    ("rightsize", {"gpus": "half"}, "gpus:"), ("quota_loop", {"period_s": 60}, "period_s"),
])
def test_bad_scenario_parameters_are_one_line_errors(kind, kw, needle):
    with pytest.raises(ScenarioError, match=needle):
        ScenarioSpec.make(kind, **kw)


def test_equal_settings_are_equal_specs():
    a = ScenarioSpec.make("shares", shares={"x": 2, "y": 1})
    b = ScenarioSpec.make("shares", shares={"y": 1.0, "x": 2.0})
    assert a == b and hash(a) == hash(b) and a.to_dict() == b.to_dict()
    assert ScenarioSpec.make("shares", shares={"x": 2}, seed=1) != ScenarioSpec.make("shares", shares={"x": 2})


def test_same_parameters_and_seed_write_identical_files(tmp_path):
    inp = inputs(contention(6), end=24.0)
    spec = ScenarioSpec.make("min_runtime", min_runtime_s={"training": 3600.0}, checkpoint_interval_s=600.0, seed=3)
    a = runner.run(spec, inp).write(tmp_path / "a")
    b = runner.run(ScenarioSpec(**{**spec.__dict__}), inp).write(tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert {str(f) for f in files} >= {"baseline/jobs.parquet", "scenario/timeline.parquet", "comparison.csv",
                                       "teams.csv", "scenario.json"}
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    saved = json.loads((a / "scenario.json").read_text())
    assert saved["scenario"] == spec.to_dict() | {"params": json.loads(json.dumps(spec.to_dict()["params"]))}
    assert saved["scenario"]["seed"] == 3


def test_a_kept_baseline_gives_the_same_result(tmp_path):
    # the dashboard keeps the baseline replay of a window for every scenario of it (a slider re-runs only the
    # scenario): passing it back gives byte-identical files
    inp = inputs(contention(6), end=24.0)
    spec = ScenarioSpec.make("shares", shares={"lab/a": 3})
    fresh = runner.run(spec, inp).write(tmp_path / "a")
    kept = runner.run(spec, inp, baseline=runner.baseline(ScenarioSpec.make("backfill"), inp)).write(tmp_path / "b")
    for f in ("comparison.csv", "teams.csv", "scenario.json", "baseline/jobs.parquet", "scenario/jobs.parquet"):
        assert (fresh / f).read_bytes() == (kept / f).read_bytes(), f


def test_baseline_equals_scenario_when_nothing_changes():
    res = runner.run(ScenarioSpec.make("shares"), inputs(contention(4), end=24.0))
    assert all(d == 0 for d in res.comparison["delta"].drop_nulls())
    assert set(res.teams["verdict"]) == {"same"}


# ------------------------------------------------------------------------------------------ warm-started windows
def _window_store(tmp_path) -> str:
    """Window [h(48), h(72)) of a 2 x 8-GPU cluster: one job of each kind the warm-start loader tells apart."""
    rows = [
        job("old", "lab/a", 8, -300, 10),                          # ended long before the lookback: not loaded
        job("hist", "lab/a", 8, 20, 10),                           # ran in the lookback before h(48): history
        job("run", "lab/a", 8, 40, 20),                            # started h(40), still running at h(48)
        dict(job("pend", "lab/b", 16, 46, 2), start=h(60), end=h(62)),  # submitted h(46), started after h(48)
        dict(job("gone", "lab/b", 8, 44, 1), start=None, end=h(47), elapsed_s=0.0),  # cancelled pending < h(48)
        job("new", "lab/b", 8, 50, 2),                             # submitted in the window
        job("late", "lab/b", 8, 80, 2),                            # after the window: not loaded
    ]
    return write_store(tmp_path, rows)


def test_load_inputs_warm_starts_the_window(tmp_path):
    store = _window_store(tmp_path)
    inp = runner.load_inputs(store, TWO, window_s=86400.0, end=h(72), cluster="c")
    assert sorted(inp.jobs["job_id"]) == ["hist", "new", "pend", "run"]
    assert inp.counts() == {"jobs": 1, "jobs_started_before": 2, "jobs_pending_at_start": 1}
    cold = runner.load_inputs(store, TWO, window_s=86400.0, end=h(72), cluster="c", warm_start=False)
    assert cold.jobs["job_id"].to_list() == ["new"] and cold.describe()["warm_start"] is False
    # the warm replay: "run" holds one node until its logged end h(60); "pend" (16 GPUs) waits for it although
    # the cluster is otherwise empty from h(48), and its wait counts from its real submit h(46)
    res = runner.run(ScenarioSpec.make("shares"), inp)
    j = {r["job_id"]: r for r in res.baseline.jobs.iter_rows(named=True)}
    assert (j["run"]["start"], j["run"]["end"], j["run"]["pinned"]) == (h(40), h(60), True)
    assert (j["pend"]["start"], j["pend"]["wait_s"], j["pend"]["pinned"]) == (h(60), 14 * 3600.0, False)
    assert j["new"]["start"] == h(50)  # 8 GPUs: the free node
    assert res.inputs["warm_start"] is True and res.baseline.metrics["params"]["warm_start"] == h(48).isoformat()
    # measured over [h(48), h(72)) on 16 GPUs: run 8 x 12 h, new 8 x 2 h, pend 16 x 2 h = 144 of 384 GPU-hours
    occ, _ = metric(res, "occupancy")
    assert occ == pytest.approx(144 / 384)
    # cold: "pend" is not even in the window (submitted before it), "new" runs on an empty cluster
    cold_res = runner.run(ScenarioSpec.make("shares"), cold)
    assert cold_res.baseline.jobs["job_id"].to_list() == ["new"]


def test_sample_window_quota_loop_changes_starts():
    # the complaint that motivated warm starts: on the sample's last week a cold replay is barely contended and
    # the quota loop changed no job's start; warm-started, the baseline is as busy as the log and it does
    sample = Path(__file__).resolve().parents[2] / "sample_data" / "store"
    if not (sample / "_manifest.json").exists():
        pytest.skip("the sample store is not built (scripts/test builds it)")
    from engine.budgets import load

    tree = load(sample.parent / "budgets.toml")
    inp = runner.load_inputs(str(sample), tree, window_s=7 * 86400.0)
    res = runner.run(ScenarioSpec.make("quota_loop"), inp)
    occ, _ = metric(res, "occupancy")
    assert occ > 0.85  # the log: 0.914
    a = res.baseline.jobs.select("job_id", "start")
    b = res.scenario.jobs.select("job_id", "start")
    moved = a.join(b, on="job_id", how="inner").filter(pl.col("start") != pl.col("start_right")).height
    assert moved > 100
    assert set(res.teams["verdict"]) >= {"gains", "loses"}


# ------------------------------------------------------------------------------------------ CLI
def test_cli_writes_both_runs_and_the_comparison(tmp_path, capsys):
    from dashboard.cli import main

    store = _quota_store(tmp_path / "store")
    budgets = tmp_path / "b.toml"
    budgets.write_text("cluster_gpus = 16\n[tree.lab]\n[tree.lab.a]\n[tree.lab.b]\n")
    out = tmp_path / "out"
    code = main(["scenario", "shares", "--store", store, "--budgets", str(budgets), "--window", "2d",
                 "--share", "lab/a=3", "--seed", "2", "--out", str(out), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["scenario"] == {"kind": "shares", "policy": "fairshare", "backfill": "easy", "seed": 2,
                                   "params": {"shares": {"lab/a": 3.0}, "guaranteed": {}}}
    assert summary["inputs"]["jobs"] == 48 and summary["teams"]["gains"] == ["lab/a"]
    assert summary["inputs"]["warm_start"] is True and summary["inputs"]["jobs_started_before"] == 72
    cmp = pl.read_csv(out / "comparison.csv")
    assert {"occupancy", "attainment.mean", "wait_s.p90"} <= set(cmp["metric"])
    sim = pl.read_parquet(out / "scenario" / "jobs.parquet")
    assert sim.filter(~pl.col("pinned")).height == 48 and "wait_reason" in sim.columns
    # the output directory is a store: the queries run on it
    from queries.analytics import budgets as qb

    att = qb.attainment(out / "scenario", parse(budgets.read_text()), h(72), h(120), capacity_gpus=16)
    assert att.table.height == 3
    # bad input: one line, exit 2
    assert main(["scenario", "shares", "--store", store, "--share", "lab/a", "--out", str(out)]) == 2
    assert "--share 'lab/a': expected NAME=VALUE" in capsys.readouterr().err
    assert main(["scenario", "backfill", "--store", str(tmp_path / "none"), "--out", str(out)]) == 2
    oversold = tmp_path / "over.toml"
    oversold.write_text("[tree.lab]\n[tree.lab.a]\nguaranteed_gpus = 12\n[tree.lab.b]\nguaranteed_gpus = 8\n")
    capsys.readouterr()
    assert main(["scenario", "shares", "--store", store, "--budgets", str(oversold), "--out", str(out)]) == 2
    assert "above the cluster's 16 GPUs (oversold quota)" in capsys.readouterr().err
    partial = tmp_path / "partial.toml"
    partial.write_text("[tree.ops]\n")  # names nobody in the logs: lab/a and lab/b are unbudgeted (kept)
    assert main(["scenario", "shares", "--store", store, "--budgets", str(partial), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "tree node ops has no account in the logs" in err and "2 account(s) not in the tree count as 'unbudgeted'" in err
    teams = pl.read_csv(out / "teams.csv")
    rows = {r["node"]: r for r in teams.iter_rows(named=True)}
    assert sorted(rows) == ["ops", "unbudgeted"] and rows["unbudgeted"]["received_baseline_h"] > 0
    assert rows["ops"]["received_baseline_h"] == 0 and rows["ops"]["attainment_baseline"] is None
    assert math.isfinite(summary["metrics"]["occupancy"]["scenario"])
    # --cold-start: only the window's submissions, on an empty cluster
    assert main(["scenario", "shares", "--store", store, "--window", "2d", "--cold-start", "--out", str(out),
                 "--json"]) == 0
    cold = json.loads(capsys.readouterr().out)
    assert cold["inputs"]["warm_start"] is False and "jobs_started_before" not in cold["inputs"]
    assert pl.read_parquet(out / "baseline" / "jobs.parquet").height == 48


def test_budget_chart_builders():
    from dashboard import charts_budget as cb

    hist = pl.DataFrame({"window_end": [h(24), h(48)], "mean": [0.9, 0.97], "worst": [0.5, 0.8]})
    fig = cb.attainment_history(hist, t="window_end", mean="mean", worst="worst")
    assert [tr.name for tr in fig.data] == ["mean", "worst team"] and list(fig.data[1].y) == [0.5, 0.8]
    mult = pl.DataFrame({"effective_from": [h(0), h(24), h(0)], "bucket": ["a", "a", "<b>"],
                         "multiplier": [1.2, 1.4, 0.8]})
    fig = cb.multiplier_series(mult, t="effective_from", bucket="bucket", value="multiplier")
    assert [tr.name for tr in fig.data] == ["&lt;b&gt;", "a"] and list(fig.data[1].y) == [1.2, 1.4]
    assert fig.data[0].line.shape == "hv"
    empty = cb.multiplier_series(mult.clear(), t="effective_from", bucket="bucket", value="multiplier")
    assert "no coefficients" in empty.layout.annotations[0].text
