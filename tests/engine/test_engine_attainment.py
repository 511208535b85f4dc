"""The engine's budget attainment equals the log path's (queries.analytics.budgets) on the run's own jobs.parquet,
and the as-logged replay reproduces the log: attainment, job_waste and queue_waits over the replay equal the
original's.

Parity is checked per tree row (entitled, static, demanded and received GPU-hours, attainment) and on the summary,
for runs with budgets (sample tree, effective-dated periods, guarantees, caps) and without (every account its own
node), with preemption (requeued jobs) and node failures. Hand case: one window worked out by hand.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import queries
from engine import Cluster, NodeEvent, SimConfig, simulate
from engine.attainment import default_tree
from engine.budgets import load, parse
from queries.analytics import budgets as qb
from queries.store import schema
from queries.store import Store

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data" / "store"
T0 = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)


def assert_parity(res, out_dir, tree):
    """queries.analytics.budgets.attainment over the written jobs.parquet == the engine's metrics["attainment"]."""
    out = res.write(out_dir)
    m = res.metrics["attainment"]
    tree = tree if tree is not None else default_tree(res.jobs["account"].drop_nulls().unique().to_list())
    log = qb.attainment(str(out), tree, m["window_start"], m["window_end"], capacity_gpus=m["capacity"])
    table = {r["node"]: r for r in log.table.iter_rows(named=True)}
    assert set(table) == set(m["teams"])
    for key, row in table.items():
        eng = m["teams"][key]
        assert eng["kind"] == row["kind"] and eng["depth"] == row["depth"], key
        for a, b in (("entitled_hours", "entitled_gpu_hours"), ("static_hours", "static_gpu_hours"),
                     ("demanded_hours", "demanded_gpu_hours"), ("received_hours", "received_gpu_hours"),
                     ("attainment", "attainment"), ("attainment_static", "attainment_static")):
            if row[b] is None:
                assert eng[a] is None, (key, a)
            else:
                assert eng[a] == pytest.approx(row[b], rel=1e-9, abs=1e-9), (key, a, eng[a], row[b])
    s = log.summary
    assert m["teams_count"] == s["teams"] and m["teams_at_95pct"] == s["at_least_95"]
    assert m["worst_node"] == s["worst_node"] and m["over_entitled"] == s["over_entitled"]
    if s["mean"] is None:
        assert m["mean"] is None
    else:
        assert m["mean"] == pytest.approx(s["mean"], rel=1e-9) and m["worst"] == pytest.approx(s["worst"], rel=1e-9)
    return m, log


def gpu_month(seed, n=400, accounts=("lab/vision", "lab/speech", "ops", "lab", "guest")):
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 2, 4, 8, 12, 16], n, p=[.35, .2, .2, .1, .05, .1])  # 12: a gang of 2 whole nodes (alloc 16)
    run = rng.integers(60, 20000, n).astype(float)
    df = pl.DataFrame({
        "cluster": "c1", "job_id": [str(1000 + i) for i in range(n)], "job_name": [f"j{i}" for i in range(n)],
        "account": rng.choice(list(accounts), n), "job_class": rng.choice(["training", "debug", "eval"], n),
        "state": rng.choice(["COMPLETED", "FAILED", "CANCELLED"], n, p=[.8, .1, .1]),
        "submit": [T0 + dt.timedelta(seconds=float(x)) for x in np.sort(rng.uniform(0, 10 * 86400, n))],
        "elapsed_s": run, "time_limit_s": np.round(run * rng.uniform(0.9, 3.0, n)),
        "req_gpus": gpus.astype(float), "req_cpus": gpus * 8.0, "req_mem_bytes": gpus * 64.0 * 2**30,
    })
    return schema.conform(df, "jobs")


TREE = parse("""
cluster_gpus = 64
[min_runtime]
training = "2h"
debug = 0
[tree.lab]
share = 3
guaranteed_gpus = 16
max_gpus = 56
[tree.lab.vision]
share = 2
[tree.lab.speech]
share = 1
[tree.ops]
share = 1
[[period]]
start = 2026-11-07
[period.tree.lab.speech]
share = 3
""")


@pytest.mark.parametrize("seed, cfg", [
    (1, SimConfig(policy="fairshare", backfill="easy", budgets=TREE, checkpoint_interval_s=1800)),
    (2, SimConfig(policy="fcfs", backfill="conservative", budgets=TREE, quota="guarantee")),
    (3, SimConfig(policy="drf", backfill="none")),
    (4, SimConfig(policy="fairshare", backfill="easy", budgets=TREE, min_runtime_s=3600,
                  node_events=(NodeEvent(3 * 86400.0, "node002", "fail"), NodeEvent(5 * 86400.0, "node005", "drain")))),
])
def test_engine_attainment_equals_the_log_path_on_its_output(tmp_path, seed, cfg):
    res = simulate(gpu_month(seed), Cluster.uniform(8, 8, 64), cfg)
    m, log = assert_parity(res, tmp_path / "sim", cfg.budgets)
    assert m["teams_count"] >= 2 and m["mean"] is not None
    if seed in (1, 4):
        assert res.metrics["preemptions"] + res.metrics["failures_requeued"] > 0  # requeued jobs are covered


def test_attainment_hand_case(tmp_path):
    # 2 GPUs, A and B share 1 each. A's 1-GPU job runs 0-100; B's 2-GPU job (submitted at 0 too) waits for it
    # and runs 100-110. Window = the span [0, 110): capacity 220 GPU-s. Demand A = 100, B = 2 x 100 waiting +
    # 2 x 10 running = 220. Water-filling 1:1 under demand caps: A 100 (all it asks), B 120. Received A 100,
    # B 20: attainment A = 100 / min(100, 100) = 1, B = 20 / min(120, 220) = 1/6. Static 110 each: B's static
    # attainment 20 / min(110, 220) = 2/11. Summary: mean (1 + 1/6) / 2, worst B, one team at >= 95 %.
    w = schema.conform(pl.DataFrame({
        "cluster": "c", "job_id": ["1", "2"], "account": ["A", "B"], "state": "COMPLETED",
        "submit": [T0, T0], "elapsed_s": [100.0, 10.0], "time_limit_s": [100.0, 10.0], "req_gpus": [1.0, 2.0],
        "req_cpus": [1.0, 1.0]}), "jobs")
    res = simulate(w, Cluster.uniform(1, 2, 4), SimConfig(backfill="none", budgets={"A": 1, "B": 1}))
    m = res.metrics["attainment"]
    a, b = m["teams"]["A"], m["teams"]["B"]
    h = 1 / 3600
    assert (a["demanded_hours"], b["demanded_hours"]) == (pytest.approx(100 * h), pytest.approx(220 * h))
    assert (a["entitled_hours"], b["entitled_hours"]) == (pytest.approx(100 * h), pytest.approx(120 * h))
    assert (a["received_hours"], b["received_hours"]) == (pytest.approx(100 * h), pytest.approx(20 * h))
    assert a["attainment"] == pytest.approx(1.0) and b["attainment"] == pytest.approx(1 / 6)
    assert b["static_hours"] == pytest.approx(110 * h) and b["attainment_static"] == pytest.approx(2 / 11)
    assert m["mean"] == pytest.approx((1 + 1 / 6) / 2) and m["worst_node"] == "B" and m["teams_at_95pct"] == 1
    assert m["window_end"] == (T0 + dt.timedelta(seconds=110)).isoformat() and m["capacity"] == 2.0
    assert_parity(res, tmp_path / "sim", parse("[tree.A]\nshare = 1\n[tree.B]\nshare = 1\n"))


def test_requeued_job_receives_only_its_attempts(tmp_path):
    # One node of 2 GPUs. A's job 1 (2 GPUs, 100 s, min runtime 0: always preemptible) runs from 0; B's job 2
    # (2 GPUs, 20 s, no contract) arrives at 10 and preempts it at once; job 1 (no checkpoints) loses its 10 s
    # and reruns 30-130. The output has one row per attempt: "1;0" PREEMPTED 0-10, then "1" (re)submitted at 10,
    # waiting 10-30, running 30-130. By hand, over the span [0, 130): A received 2 x 10 + 2 x 100 = 220 GPU-s
    # (not 2 x 130 = 260: the requeue gap is not held), demanded 220 + 2 x 20 waiting = 260; B received and
    # demanded 2 x 20 = 40. Capacity 260 GPU-s, water-filled 1:1: B 40 (its demand), A the other 220.
    w = schema.conform(pl.DataFrame({
        "cluster": "c", "job_id": ["1", "2"], "account": ["A", "B"], "state": "COMPLETED",
        "submit": [T0, T0 + dt.timedelta(seconds=10)], "elapsed_s": [100.0, 20.0], "time_limit_s": [100.0, 20.0],
        "req_gpus": [2.0, 2.0], "req_cpus": [1.0, 1.0], "min_runtime_s": [0.0, None]}), "jobs")
    res = simulate(w, Cluster.uniform(1, 2, 4), SimConfig(backfill="none", budgets={"A": 1, "B": 1}))
    rows = res.jobs.select("job_id", "submit", "start", "end", "state", "alloc_gpus").rows()
    at = lambda x: T0 + dt.timedelta(seconds=x)  # noqa: E731
    assert rows == [("1;0", at(0), at(0), at(10), "PREEMPTED", 2.0), ("1", at(10), at(30), at(130), "COMPLETED", 2.0),
                    ("2", at(10), at(10), at(30), "COMPLETED", 2.0)]
    h = 1 / 3600
    m = res.metrics["attainment"]
    a, b = m["teams"]["A"], m["teams"]["B"]
    assert (a["received_hours"], a["demanded_hours"]) == (pytest.approx(220 * h), pytest.approx(260 * h))
    assert (b["received_hours"], b["demanded_hours"]) == (pytest.approx(40 * h), pytest.approx(40 * h))
    assert (a["entitled_hours"], b["entitled_hours"]) == (pytest.approx(220 * h), pytest.approx(40 * h))
    assert res.metrics["allocated_resource_hours"] == pytest.approx(260 * h)  # 220 + 40: the node was never idle
    # the log path over the written jobs.parquet: the same numbers, and the raw SQL inputs by hand
    _, log = assert_parity(res, tmp_path / "sim", parse("[tree.A]\nshare = 1\n[tree.B]\nshare = 1\n"))
    usage = {r["account"]: r for r in queries.run("budget_usage", store=str(tmp_path / "sim")).iter_rows(named=True)}
    assert (usage["A"]["received_gpu_s"], usage["A"]["demanded_gpu_s"]) == (220.0, 260.0)
    assert (usage["B"]["received_gpu_s"], usage["B"]["demanded_gpu_s"]) == (40.0, 40.0)
    assert res.metrics["lost_gpu_hours"] == pytest.approx(20 * h)  # 10 s of 2 GPUs thrown away


def test_attainment_history_windows(tmp_path):
    cfg = SimConfig(policy="fairshare", budgets=TREE, lookback_s=3 * 86400, attainment_history=True)
    res = simulate(gpu_month(7), Cluster.uniform(8, 8, 64), cfg)
    hist = res.metrics["attainment"]["history"]
    assert len(hist) >= 5
    out = res.write(tmp_path / "sim")
    m = res.metrics["attainment"]
    log = qb.attainment_history(str(out), TREE, m["window_start"], m["window_end"], window_hours=72.0,
                                step_hours=24.0, capacity_gpus=m["capacity"])
    assert log.height == len(hist)
    for row, h in zip(log.iter_rows(named=True), hist):
        assert h["teams_count"] == row["teams"] and h["worst_node"] == row["worst_node"]
        assert h["mean"] == pytest.approx(row["mean"], rel=1e-9)


# ------------------------------------------------------------------------------------------ the sample store
@pytest.fixture(scope="module")
def sample(sample_store):
    s = Store(sample_store)
    return s.read("jobs"), s.read("nodes"), load(REPO / "sample_data" / "budgets.toml")


def test_sample_fairshare_run_attainment_parity(sample, tmp_path):
    jobs, nodes, tree = sample
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=tree, checkpoint_interval_s=3600)
    res = simulate(jobs, Cluster.from_frame(nodes), cfg)
    m, _ = assert_parity(res, tmp_path / "sim", tree)
    assert m["teams_count"] == 15 and res.metrics["preemptions"] > 0


# ------------------------------------------------------------------------------------------ as-logged replay
def test_hostlists_expand():
    from engine.replay import expand_hostlist

    assert expand_hostlist("h100-[034,037]") == ["h100-034", "h100-037"]
    assert expand_hostlist("n[08-11],gpu-1") == ["n08", "n09", "n10", "n11", "gpu-1"]
    assert expand_hostlist("r[1-2]-n[01-02]") == ["r1-n01", "r1-n02", "r2-n01", "r2-n02"]
    assert expand_hostlist(None) == [] and expand_hostlist("a") == ["a"] and expand_hostlist("x[a-b]") == ["xa-b"]


def test_replay_hand_case():
    # the logged schedule is kept as it is, even where the engine's own FCFS would differ: job 2 starts at its
    # logged 50 s on node b (not at 0), job 3 never started (cancelled while pending: its logged end is kept)
    t = [T0 + dt.timedelta(seconds=x) for x in (0, 10, 20, 60)]
    w = schema.conform(pl.DataFrame({
        "cluster": "c", "job_id": ["1", "2", "3"], "account": ["A", "B", "A"],
        "state": ["COMPLETED", "TIMEOUT", "CANCELLED"], "submit": [t[0], t[1], t[2]],
        "start": [t[0], T0 + dt.timedelta(seconds=50), None], "end": [t[3], T0 + dt.timedelta(seconds=80), t[3]],
        "elapsed_s": [60.0, 30.0, 0.0], "time_limit_s": [100.0, 30.0, 10.0], "req_gpus": [2.0, 1.0, 1.0],
        "alloc_gpus": [2.0, 1.0, None], "req_cpus": [2.0, 1.0, 1.0], "nodes": [2, 1, None],
        "node_list": ["n[1-2]", "n2", None]}), "jobs")
    cl = Cluster.from_frame(pl.DataFrame({"node": ["n1", "n2"], "gpus": [1.0, 1.0], "cpus": [4.0, 4.0]}))
    res = simulate(w, cl, SimConfig(replay="logged"))
    j = res.jobs
    assert j["start"].to_list() == w["start"].to_list() and j["end"].to_list() == w["end"].to_list()
    assert j["state"].to_list() == ["COMPLETED", "TIMEOUT", "CANCELLED"]
    assert j["wait_s"].to_list() == [0.0, 40.0, None]
    rows = res.timeline.select("node", "job_id", "gpus").rows()
    assert rows == [("n1", "1", 1.0), ("n2", "1", 1.0), ("n2", "2", 1.0)]
    m = res.metrics
    assert m["occupancy"] == pytest.approx((2 * 60 + 30) / (2 * 80))  # span 0..80 s on 2 GPUs
    assert m["wait_s"]["n"] == 2 and m["preemptions"] == 0 and m["timeouts"] == 1


def _same(a: pl.DataFrame, b: pl.DataFrame, key):
    a, b = a.sort(key), b.sort(key)
    assert a.columns == b.columns and a.height == b.height
    for c in a.columns:
        x, y = a[c], b[c]
        if x.dtype.is_float():
            assert ((x - y).abs().fill_null(0) <= 1e-6 * (1 + y.abs().fill_null(0))).all(), c
            assert (x.is_null() == y.is_null()).all(), c
        else:
            assert x.equals(y), c


def test_sample_replay_equals_the_log(sample, tmp_path):
    jobs, nodes, tree = sample
    res = simulate(jobs, Cluster.from_frame(nodes), SimConfig(replay="logged", budgets=tree))
    assert res.jobs.height == jobs.height  # every logged job is in the replay, started or not
    started = res.jobs.filter(pl.col("start").is_not_null())
    assert set(res.timeline["job_id"].unique().to_list()) == set(started["job_id"].to_list())  # all nodes known
    # attainment: the replay's own numbers equal the log path's over the original store
    m = res.metrics["attainment"]
    log = qb.attainment(str(SAMPLE), tree, m["window_start"], m["window_end"])
    for r in log.table.iter_rows(named=True):
        eng = m["teams"][r["node"]]
        assert eng["received_hours"] == pytest.approx(r["received_gpu_hours"], rel=1e-9, abs=1e-9)
        assert eng["demanded_hours"] == pytest.approx(r["demanded_gpu_hours"], rel=1e-9, abs=1e-9)
        assert (eng["attainment"] is None) == (r["attainment"] is None)
        if r["attainment"] is not None:
            assert eng["attainment"] == pytest.approx(r["attainment"], rel=1e-9)
    assert m["mean"] == pytest.approx(log.summary["mean"], rel=1e-9) and m["worst_node"] == log.summary["worst_node"]
    # the output schema end to end: waste and waits over the replay (with the log's usage samples beside it,
    # which the replay does not simulate) equal those over the original store
    out = res.write(tmp_path / "replay")
    Store(SAMPLE).read("samples").write_parquet(out / "samples.parquet")
    for name, key in (("job_waste", ["cluster", "job_id"]), ("queue_waits", ["job_class", "team"])):
        a = queries.run(name, store=str(out))
        b = queries.run(name, store=str(SAMPLE))
        assert a.height > 10, name
        _same(a, b, key)
