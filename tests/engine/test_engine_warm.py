"""Warm-started replays (``SimConfig(warm_start=T)``): hand cases, the fair-share ledger's history, pinned jobs that
do not fit, config errors, and the sample store's 7-day window against its own log."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from engine import Cluster, ConfigError, SimConfig, simulate
from engine.attainment import default_tree
from queries.analytics import budgets as qb
from queries.store import schema

REPO = Path(__file__).resolve().parents[2]
T = dt.datetime(2026, 11, 10, tzinfo=dt.timezone.utc)


def at(x: float) -> dt.datetime:
    return T + dt.timedelta(seconds=x)


def logged(rows) -> pl.DataFrame:
    """rows: (id, account, gpus, submit, start, end, limit, node_list); start/end relative to T (None: never)."""
    out = []
    for jid, acct, gpus, sub, start, end, limit, nodes in rows:
        out.append(dict(cluster="c", job_id=jid, job_name=jid, account=acct, state="COMPLETED", partition="gpu",
                        submit=at(sub), start=None if start is None else at(start), end=None if end is None else at(end),
                        elapsed_s=float(end - start) if start is not None else 0.0, time_limit_s=float(limit),
                        req_gpus=float(gpus), alloc_gpus=float(gpus), req_cpus=float(gpus), alloc_cpus=float(gpus),
                        nodes=None if nodes is None else nodes.count(",") + 1, node_list=nodes))
    return schema.conform(pl.DataFrame(out), "jobs")


NODES = Cluster.from_frame(pl.DataFrame({"node": ["n1", "n2"], "gpus": [4.0, 4.0], "cpus": [8.0, 8.0],
                                         "partition": ["gpu", "gpu"]}))


def rows_by_id(res, *cols):
    return {r[0]: r[1:] for r in res.jobs.select("job_id", *cols).iter_rows()}


def test_a_job_running_at_the_warm_start_blocks_its_node_until_its_logged_end():
    # Two 4-GPU nodes. p (A) started at T-50 on n1 and ends, as logged, at T+100 (limit 200: the scheduler
    # expects it until T+150). h (B) ran on n2 before T: history only. q (B, 8 GPUs: both nodes) was submitted
    # at T-30 and is still pending at T (its logged start is later: simulated). s (A, 4 GPUs, 20 s) arrives at
    # T+10. FCFS + EASY: q is reserved for T+150 (p's estimated end); s fits n2 and ends by T+30, so it
    # backfills at T+10; p's real end at T+100 frees n1 and q starts then: its wait, 130 s, counts from its
    # real submit (30 s of it before T).
    w = logged([("h", "B", 4, -300, -200, -100, 200, "n2"), ("p", "A", 4, -100, -50, 100, 200, "n1"),
                ("q", "B", 8, -30, 400, 410, 10, "n[1-2]"), ("s", "A", 4, 10, 500, 520, 20, "n2")])
    res = simulate(w, NODES, SimConfig(policy="fcfs", backfill="easy", warm_start=T, window_end=at(200)))
    got = rows_by_id(res, "start", "end", "wait_s", "node_list", "pinned", "reserved_start")
    assert got["p"] == (at(-50), at(100), 50.0, "n1", True, None)      # as logged
    assert got["h"] == (at(-200), at(-100), 100.0, "n2", True, None)
    assert got["s"] == (at(10), at(30), 0.0, "n2", False, None)
    assert got["q"] == (at(100), at(110), 130.0, "n1,n2", False, at(150))
    tl = res.timeline.filter(pl.col("job_id") == "p").select("node", "start", "end").rows()
    assert tl == [("n1", at(-50), at(100))]
    m = res.metrics
    # window [T, T+200) on 8 GPUs: p 4 x 100, s 4 x 20, q 8 x 10 = 560 of 1,600 GPU-s; waits of q and s only
    assert m["span_s"] == 200.0 and m["occupancy"] == pytest.approx(560 / 1600)
    assert m["wait_s"]["n"] == 2 and m["wait_s"]["mean"] == pytest.approx(65.0)
    assert m["jobs_simulated"] == 2
    assert m["warm_start"] == {"jobs_pinned": 2, "jobs_running": 1, "jobs_history": 1, "replaced": 0,
                               "not_placed": 0, "jobs_pending": 1}
    # attainment over the same window, from the output by the log path's definition (received in [T, T+200))
    att = m["attainment"]
    assert att["window_start"] == T.isoformat() and att["window_end"] == at(200).isoformat()
    assert att["teams"]["A"]["received_hours"] == pytest.approx((4 * 100 + 4 * 20) / 3600)
    assert att["teams"]["B"]["received_hours"] == pytest.approx(8 * 10 / 3600)
    log = qb.attainment_of(res.jobs, default_tree(["A", "B"]), T, at(200), capacity_gpus=8.0)
    rec = {r["node"]: r["received_gpu_hours"] for r in log.table.iter_rows(named=True)}
    assert rec["A"] == pytest.approx(480 / 3600) and rec["B"] == pytest.approx(80 / 3600)


def test_cold_start_would_ignore_the_running_job():
    # the same workload without the warm start: every job is simulated from its submit on an empty cluster
    w = logged([("p", "A", 4, -100, -50, 100, 200, "n1"), ("q", "B", 8, -30, 400, 410, 10, "n[1-2]")])
    res = simulate(w, NODES, SimConfig(policy="fcfs", backfill="easy"))
    got = rows_by_id(res, "start", "pinned")
    assert got["p"] == (at(-100), False) and got["q"] == (at(50), False)  # q waits for p's *simulated* end


def test_fair_share_ledger_sees_who_was_served_before_the_warm_start():
    # One 1-GPU node, A and B with equal shares. A's history job ran T-1000..T-10 (before T); at T, A's job a
    # (submitted T-5) and B's job b (submitted T-1) are pending. FCFS would take a first; fair share charges
    # A's history to its window and serves B first.
    one = Cluster.from_frame(pl.DataFrame({"node": ["n1"], "gpus": [1.0], "cpus": [4.0]}))
    w = logged([("old", "A", 1, -1000, -1000, -10, 1000, "n1"), ("a", "A", 1, -5, 100, 110, 10, "n1"),
                ("b", "B", 1, -1, 200, 210, 10, "n1")])
    cfg = SimConfig(policy="fairshare", backfill="none", budgets={"A": 1, "B": 1}, warm_start=T)
    got = rows_by_id(simulate(w, one, cfg), "start")
    assert got["b"] == (T,) and got["a"] == (at(10),)
    fcfs = rows_by_id(simulate(w, one, SimConfig(policy="fcfs", backfill="none", warm_start=T)), "start")
    assert fcfs["a"] == (T,) and fcfs["b"] == (at(10),)
    # the history is only what the ledger was given: without the old job the tie goes to A (path order)
    got = rows_by_id(simulate(w.filter(pl.col("job_id") != "old"), one, cfg), "start")
    assert got["a"] == (T,)


def test_pinned_jobs_that_do_not_fit_their_logged_nodes():
    # x and y were both logged on n1 (4 + 4 GPUs on a 4-GPU node: the layout disagrees with the log): x keeps
    # n1 (earlier start), y is placed on n2 by the engine; z (8 GPUs, logged on an unknown node) fits nowhere
    # once x and y run: it stays off the cluster but keeps its row.
    w = logged([("x", "A", 4, -20, -20, 50, 100, "n1"), ("y", "A", 4, -10, -10, 60, 100, "n1"),
                ("z", "B", 8, -5, -5, 40, 100, "gone1")])
    res = simulate(w, NODES, SimConfig(warm_start=T, window_end=at(100)))
    got = rows_by_id(res, "start", "end", "node_list", "alloc_gpus", "state")
    assert got["x"] == (at(-20), at(50), "n1", 4.0, "COMPLETED")
    assert got["y"] == (at(-10), at(60), "n2", 4.0, "COMPLETED")    # the engine's placement, the logged times
    assert got["z"] == (at(-5), at(40), "gone1", 8.0, "COMPLETED")  # as logged, no timeline rows
    assert set(res.timeline["job_id"]) == {"x", "y"}
    assert res.metrics["warm_start"]["replaced"] == 1 and res.metrics["warm_start"]["not_placed"] == 1
    assert res.metrics["occupancy"] == pytest.approx((4 * 50 + 4 * 60) / (8 * 100))


def test_warm_start_config_errors():
    w = logged([("p", "A", 4, -100, -50, 100, 200, "n1")])
    with pytest.raises(ConfigError, match="warm_start: the workload's submit times need a datetime"):
        simulate(w, NODES, SimConfig(warm_start=10.0))
    numeric = pl.DataFrame({"job_id": ["1"], "submit": [0.0], "start": [0.0], "elapsed_s": [5.0], "req_cpus": [1.0]})
    with pytest.raises(ConfigError, match="need a number of seconds"):
        simulate(numeric, Cluster.procs(2), SimConfig(warm_start=T))
    with pytest.raises(ConfigError, match="window_end: must be after warm_start"):
        SimConfig(warm_start=T, window_end=at(-1)).validated()
    with pytest.raises(ConfigError, match="warm_start: not an ISO time"):
        SimConfig(warm_start="yesterday").validated()
    assert SimConfig(warm_start="2026-11-10T00:00:00").validated().warm_start == T  # naive ISO = UTC


def test_a_warm_started_window_without_jobs_simulates_nothing():
    # an API caller's window in which nothing was submitted, running or pending (the dashboard and the CLI stop
    # before the engine): an empty result, not a TypeError from a time axis that no job defines
    for policy in ("fcfs", "fairshare"):
        res = simulate(schema.empty("jobs"), NODES, SimConfig(policy=policy, backfill="easy", warm_start=T,
                                                             window_end=at(7 * 86400)))
        assert res.jobs.height == 0 and res.timeline.height == 0


def test_numeric_workload_warm_start_and_replay_share_the_window():
    # processor-count mode, seconds: job 1 runs 0-100 as logged on 2 processors; job 2 (logged start 40) is
    # pending at T = 30 and needs both: it starts at 100. The as-logged replay over the same window measures
    # the log itself: job 2 at its logged 40 (the log overlapped them: the replay does not enforce capacity).
    w = pl.DataFrame({"job_id": ["1", "2"], "submit": [0.0, 20.0], "start": [0.0, 40.0], "elapsed_s": [100.0, 10.0],
                      "time_limit_s": [100.0, 10.0], "req_cpus": [2.0, 2.0]})
    sim = simulate(w, Cluster.procs(2), SimConfig(warm_start=30.0, window_end=130.0))
    assert rows_by_id(sim, "start", "wait_s") == {"1": (0.0, 0.0), "2": (100.0, 80.0)}
    assert sim.metrics["occupancy"] == pytest.approx((2 * 70 + 2 * 10) / (2 * 100))
    rep = simulate(w, Cluster.procs(2), SimConfig(replay="logged", warm_start=30.0, window_end=130.0))
    assert rep.metrics["occupancy"] == pytest.approx((2 * 70 + 2 * 10) / (2 * 100))
    assert rep.metrics["wait_s"]["n"] == 1 and rep.metrics["wait_s"]["mean"] == 20.0  # job 2 only: started >= T


# ------------------------------------------------------------------------------------------ the sample store
@pytest.fixture(scope="module")
def window(sample_store):
    """The sample store's last 7 days (the Fair share page's default window), loaded for a warm start."""
    from engine.warm_start import window_filter
    from queries.store import Store

    store = Store(sample_store)
    jobs, nodes = store.read("jobs"), store.read("nodes")
    end = jobs["submit"].max() + dt.timedelta(microseconds=1)
    start = end - dt.timedelta(days=7)
    return jobs.filter(window_filter(start, end)).sort("submit", "job_id"), nodes, start, end


def logged_occupancy(jobs: pl.DataFrame, start, end, capacity: float) -> float:
    """An independent computation (plain polars) of the log's GPU occupancy in [start, end)."""
    stop = pl.coalesce(pl.col("end"), pl.col("start") + pl.duration(seconds=pl.col("elapsed_s")))
    inside = (pl.min_horizontal(stop, pl.lit(end)) - pl.max_horizontal(pl.col("start"), pl.lit(start)))
    held = jobs.filter(pl.col("start").is_not_null()).select(
        (pl.coalesce("alloc_gpus", "req_gpus") * inside.dt.total_microseconds().clip(0) / 1e6).sum()).item()
    return held / (capacity * (end - start).total_seconds())


def test_sample_week_warm_started_attainment_parity(window, tmp_path):
    # the engine's attainment over [T, E) equals the log path's over the written jobs.parquet (pinned rows, a
    # RUNNING job without an end, requeued attempts included)
    from engine.budgets import load

    jobs, nodes, start, end = window
    tree = load(REPO / "sample_data" / "budgets.toml")
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=tree, checkpoint_interval_s=3600,
                    warm_start=start, window_end=end)
    res = simulate(jobs, nodes, cfg)
    assert res.metrics["preemptions"] > 0 and res.jobs.filter(pl.col("state") == "RUNNING").height > 0
    out = res.write(tmp_path / "sim")
    m = res.metrics["attainment"]
    assert (m["window_start"], m["window_end"]) == (start.isoformat(), end.isoformat())
    log = qb.attainment(str(out), tree, start, end, capacity_gpus=m["capacity"])
    assert log.table.height == len(m["teams"])
    for r in log.table.iter_rows(named=True):
        eng = m["teams"][r["node"]]
        assert eng["received_hours"] == pytest.approx(r["received_gpu_hours"], rel=1e-9, abs=1e-9), r["node"]
        assert eng["demanded_hours"] == pytest.approx(r["demanded_gpu_hours"], rel=1e-9, abs=1e-9), r["node"]
    assert m["mean"] == pytest.approx(log.summary["mean"], rel=1e-9)


def test_sample_week_warm_started_replay_is_as_busy_as_the_log(window):
    # the log's own policy (priority order, EASY backfill) from the logged state 7 days before the last submit
    jobs, nodes, start, end = window
    cfg = SimConfig(policy="priority", backfill="easy", warm_start=start, window_end=end)
    sim = simulate(jobs, nodes, cfg)
    rep = simulate(jobs, nodes, SimConfig(replay="logged", warm_start=start, window_end=end))
    log = logged_occupancy(jobs, start, end, float(nodes["gpus"].sum()))
    assert rep.metrics["occupancy"] == pytest.approx(log, rel=1e-9)   # one definition, two computations
    # measured: 0.909 simulated against 0.914 logged (a cold start of the same week: 0.543, p90 wait 0 s)
    assert abs(sim.metrics["occupancy"] - log) < 0.03, (sim.metrics["occupancy"], log)
    ws = sim.metrics["warm_start"]
    assert ws["jobs_running"] > 50 and ws["not_placed"] == 0 and ws["replaced"] == 0  # the log fits the layout
    assert sim.metrics["wait_s"]["p90"] > 0  # contended: jobs queue
    # the pinned jobs are exactly the log's jobs that started before the window
    pinned = sim.jobs.filter(pl.col("pinned"))
    assert pinned.height == jobs.filter(pl.col("start") < start).height == ws["jobs_pinned"]


# ------------------------------------------------------------------------------------------ properties
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def logged_workloads(draw):
    """Random logs on 3 nodes x 4 GPUs: submit, a logged start some time later (possibly overlapping beyond the
    layout: a log need not fit it), run, limit, team; and a warm start T inside the log."""
    n = draw(st.integers(1, 14))
    rows = []
    for i in range(n):
        sub = draw(st.integers(0, 60))
        start = sub + draw(st.integers(0, 30))
        run = draw(st.integers(1, 40))
        rows.append(dict(job_id=str(i + 1), submit=float(sub), start=float(start), elapsed_s=float(run),
                         time_limit_s=float(draw(st.sampled_from([run, run * 2]))), req_gpus=float(draw(st.integers(1, 4))),
                         req_cpus=1.0, account=f"t{draw(st.integers(0, 1))}",
                         node_list=f"node00{draw(st.integers(1, 3))}", alloc_gpus=None))
    df = pl.DataFrame(rows).with_columns(pl.col("req_gpus").alias("alloc_gpus"))
    return df, float(draw(st.integers(0, 80)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=logged_workloads(), policy=st.sampled_from(["fcfs", "fairshare"]),
       mrt=st.sampled_from([None, 0.0, 5.0]))
def test_warm_start_invariants(case, policy, mrt, tmp_path_factory):
    w, T = case
    cluster = Cluster.uniform(3, 4, 8)
    cfg = SimConfig(policy=policy, budgets={"t0": 1, "t1": 1}, min_runtime_s=mrt, warm_start=T, window_end=T + 50)
    res = simulate(w, cluster, cfg)
    j = res.jobs
    base = j.with_columns(pl.col("job_id").str.split(";").list.first().alias("base"))
    assert sorted(base.filter(~pl.col("job_id").str.contains(";"))["base"]) == sorted(w["job_id"])
    logged = dict(zip(w["job_id"], w["start"]))
    submit = dict(zip(w["job_id"], w["submit"]))
    for r in base.iter_rows(named=True):
        if logged[r["base"]] < T:  # pinned: exactly as logged, never requeued
            assert r["pinned"] and r["start"] == logged[r["base"]] and r["attempt"] == 0 and r["job_id"] == r["base"]
        else:  # simulated from T on, waiting from its real submit
            assert not r["pinned"] and r["start"] >= max(T, r["submit"])
            if r["attempt"] == 0:
                assert r["submit"] == submit[r["base"]]
    # from T on the pool is never over a node's capacity (before T the log is what it is)
    caps = dict(zip(cluster.names, cluster.gpus))
    for (node,), rows in res.timeline.group_by("node"):
        events = []
        for s, e, g in rows.select("start", "end", "gpus").iter_rows():
            s = max(s, T)
            if e > s:
                events += [(s, 1, g), (e, 0, -g)]
        used = 0.0
        for _, _, g in sorted(events):
            used += g
            assert used <= caps[node] + 1e-9, f"{node} over capacity after the warm start"
    # identical inputs give byte-identical files
    a = res.write(tmp_path_factory.mktemp("a"))
    b = simulate(w.clone(), cluster, cfg).write(tmp_path_factory.mktemp("b"))
    for name in ("jobs.parquet", "timeline.parquet", "metrics.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
