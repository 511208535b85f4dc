""""Why does my team get less?": each cause planted in a hand-made workload and measured by hand, on the log
path (node lists) and the simulation path (the engine's timeline and per-job outputs)."""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import engine
from dashboard.whatif import explain as ex
from engine.budgets import parse
from queries.analytics import budgets
from queries.store import schema
from queries.store import Store

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 2, tzinfo=UTC)
NODES = pl.DataFrame({"node": ["n1", "n2"], "gpus": [8.0, 8.0], "partition": ["gpu", "gpu"], "cpus": [64.0, 64.0]})
TREE = parse("cluster_gpus = 16\n[tree.me]\nshare = 1\n[tree.other]\nshare = 1\n")


def h(x: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=x)


def job(jid, account, gpus, submit, start, end, node_list, *, min_rt=0.0, cls="training", state="COMPLETED"):
    return dict(cluster="c", job_id=jid, account=account, user=account, partition="gpu", job_class=cls, state=state,
                req_gpus=float(gpus), alloc_gpus=float(gpus), submit=h(submit), start=h(start), end=h(end),
                elapsed_s=(end - start) * 3600.0, time_limit_s=(end - start) * 3600.0, node_list=node_list,
                nodes=node_list.count(",") + 1, min_runtime_s=min_rt, req_cpus=1.0, req_mem_bytes=None)


def frame(rows) -> pl.DataFrame:
    return schema.conform(pl.DataFrame(rows), "jobs")


def explain_logs(rows, team="me", row=None):
    jobs = frame(rows)
    return ex.explain(team, ex.with_bucket(jobs, TREE), ex.log_allocations(jobs), NODES, row)


def test_holes_free_gpus_scattered_over_nodes():
    # other holds 4 GPUs on each node 0-10 h: 8 free in total, 4 per node. me asks 8 on one node from 2 h to 10 h.
    e = explain_logs([job("a", "other", 4, 0, 0, 10, "n1"), job("b", "other", 4, 0, 0, 10, "n2"),
                      job("x", "me", 8, 2, 10, 12, "n1")])
    assert e.value("waiting GPU-hours") == pytest.approx(8 * 8)
    assert e.value("free GPUs but no block that fits") == pytest.approx(64.0)   # the whole wait
    assert e.value("waiting behind other teams' unpreemptible jobs") == pytest.approx(0.0)
    assert any("too large for the holes: 64 of those GPU-hours (100 %)" in s for s in e.sentences)


def test_gang_needs_whole_free_nodes():
    # a 12-GPU gang (wider than a node: it needs whole nodes) waits 1-6 h while other holds 1 GPU on n1 until 5 h:
    # 15 GPUs free, but only one whole node. From 5 h on nothing blocks it (it waits 1 h for another reason).
    e = explain_logs([job("a", "other", 1, 0, 0, 5, "n1"), job("g", "me", 12, 1, 6, 8, "n[1-2]")])
    assert e.value("waiting GPU-hours") == pytest.approx(12 * 5)
    assert e.value("free GPUs but no block that fits") == pytest.approx(12 * 4)
    # 16 GPUs asked: 15 free is not enough in total, so that is not a hole (the cluster is just full)
    e = explain_logs([job("a", "other", 1, 0, 0, 5, "n1"), job("g", "me", 16, 1, 6, 8, "n[1-2]")])
    assert e.value("free GPUs but no block that fits") == pytest.approx(0.0)


def test_protection_counts_only_other_teams_inside_their_min_runtime():
    # n1: other's c (8 GPUs, min runtime 4 h) 0-6 h; n2: other's d (8 GPUs, min runtime 2 h) 0-6 h; the cluster is
    # full 0-6 h. me asks 4 GPUs from 1 h, starts at 6 h. Unpreemptible GPUs: 16 until 2 h, 8 until 4 h, then 0.
    rows = [job("c", "other", 8, 0, 0, 6, "n1", min_rt=4 * 3600.0), job("d", "other", 8, 0, 0, 6, "n2", min_rt=7200.0),
            job("y", "me", 4, 1, 6, 7, "n1"), job("z", "me", 12, 1, 6, 7, "n2,n1")]
    e = explain_logs(rows[:3])
    assert e.value("waiting GPU-hours") == pytest.approx(4 * 5)
    assert e.value("waiting behind other teams' unpreemptible jobs") == pytest.approx(4 * 3)  # 1 h -> 4 h
    assert e.value("free GPUs but no block that fits") == pytest.approx(0.0)
    # asking 12: only 1-2 h had >= 12 unpreemptible GPUs
    e = explain_logs(rows[:2] + rows[3:])
    assert e.value("waiting behind other teams' unpreemptible jobs") == pytest.approx(12 * 1)
    # the same jobs under one team: its own protected jobs are not "others"
    same = [dict(r, account="me", user="me") for r in rows[:3]]
    assert explain_logs(same).value("waiting behind other teams' unpreemptible jobs") == pytest.approx(0.0)
    # no contract (null min runtime) = never preemptible: the whole run counts
    nulls = [dict(r, min_runtime_s=None) for r in rows[:2]] + [rows[2]]
    assert explain_logs(nulls).value("waiting behind other teams' unpreemptible jobs") == pytest.approx(4 * 5)


def test_preemptions_and_waits_by_class_from_logs():
    rows = [job("p1", "me", 2, 0, 0, 3, "n1", state="PREEMPTED"), job("p2", "me", 2, 3, 4, 5, "n1"),
            job("d1", "me", 1, 0, 0, 1, "n2", cls="debug"), job("d2", "me", 1, 0, 1, 2, "n2", cls="debug"),
            job("d3", "me", 1, 0, 2, 3, "n2", cls="debug")]
    e = explain_logs(rows)
    assert (e.value("preemptions suffered"), e.value("GPU-hours lost")) == (1.0, pytest.approx(6.0))
    w = {r["job_class"]: r for r in e.waits.iter_rows(named=True)}
    # debug waits 0, 1, 2 h: p50 1 h, p90 = 1.8 h (linear); training waits 0 and 1 h: p90 0.9 h
    assert (w["debug"]["jobs"], w["debug"]["waited"]) == (3, 2)
    assert w["debug"]["p50_wait_s"] == pytest.approx(3600) and w["debug"]["p90_wait_s"] == pytest.approx(1.8 * 3600)
    assert w["training"]["p90_wait_s"] == pytest.approx(0.9 * 3600)
    assert any("preempted 1 times and lost 6.0 GPU-hours" in s for s in e.sentences)


def test_demand_below_entitlement_sentence():
    row = {"demanded_gpu_hours": 30.0, "static_gpu_hours": 120.0, "entitled_gpu_hours": 30.0,
           "received_gpu_hours": 30.0, "attainment": 1.0}
    e = explain_logs([job("x", "me", 1, 0, 0, 1, "n1")], row=row)
    assert e.value("funded (share x capacity)") == 120.0
    assert any("Demand below entitlement: it asked for 30 of the 120" in s and "(25 %)" in s for s in e.sentences)
    short = dict(row, demanded_gpu_hours=200.0, entitled_gpu_hours=120.0, attainment=0.25)
    e = explain_logs([job("x", "me", 1, 0, 0, 1, "n1")], row=short)
    assert any("exceeds its entitlement by 80 GPU-hours" in s for s in e.sentences)


def test_window_clips_waits():
    rows = [job("a", "other", 4, 0, 0, 10, "n1"), job("b", "other", 4, 0, 0, 10, "n2"), job("x", "me", 8, 2, 10, 12, "n1")]
    jobs = frame(rows)
    e = ex.explain("me", ex.with_bucket(jobs, TREE), ex.log_allocations(jobs), NODES, None, start=h(4), end=h(6))
    assert e.value("waiting GPU-hours") == pytest.approx(8 * 2)
    assert e.value("free GPUs but no block that fits") == pytest.approx(16.0)


# ------------------------------------------------------------------------------------------ simulation path
def test_sim_path_sees_fragmentation_and_preemption_of_the_engine():
    # other's two 5-GPU jobs cannot share a node: 3 GPUs stay free on each. me's 6-GPU job sees 6 free GPUs
    # and no node with 6 for the 9 h until they end.
    rows = [job("a", "other", 5, 0, 0, 10, "n1"), job("b", "other", 5, 0, 0, 10, "n2"),
            job("x", "me", 6, 1, 10, 12, "n1")]
    jobs = frame(rows)
    res = engine.simulate(jobs, NODES, engine.SimConfig(budgets=TREE, policy="fairshare"))
    sj = ex.with_bucket(res.jobs, TREE)
    assert sj.filter(pl.col("job_id") == "x")["wait_reason"][0] == "fragmentation"
    e = ex.explain("me", sj, res.timeline, NODES, None, source="simulation")
    wait = res.jobs.filter(pl.col("job_id") == "x")["wait_s"][0] / 3600.0
    assert wait == pytest.approx(9.0)
    assert e.value("waiting GPU-hours") == pytest.approx(6 * wait)
    assert e.value("free GPUs but no block that fits") == pytest.approx(6 * wait)
    assert e.value("jobs whose longest wait reason was fragmentation/reservation") == 1.0
    assert e.value("their queue wait") == pytest.approx(wait)


def test_sim_preemptions_are_read_from_the_engine_columns():
    # min runtime 0 (always preemptible) jobs of other fill the cluster; me's funded job preempts one.
    rows = [job("a", "other", 8, 0, 0, 10, "n1", min_rt=0.0), job("b", "other", 8, 0, 0, 10, "n2", min_rt=0.0),
            job("x", "me", 8, 1, 1, 3, "n1", min_rt=3600.0)]
    res = engine.simulate(frame(rows), NODES, engine.SimConfig(budgets=TREE, policy="fairshare"))
    sj = ex.with_bucket(res.jobs, TREE)
    pre = sj.filter(pl.col("bucket") == "other")
    assert int(pre["preemptions"].sum()) >= 1
    e = ex.explain("other", sj, res.timeline, NODES, None, source="simulation")
    assert e.value("preemptions suffered") == float(pre["preemptions"].sum())
    assert e.value("GPU-hours lost") == pytest.approx(pre["lost_gpu_seconds"].sum() / 3600.0)
    assert e.value("GPU-hours lost") > 0


def test_attainment_log_path_equals_sim_path_on_a_replay_without_contention(tmp_path):
    """No job ever waits for another (the cluster is never full), so any policy replays the log exactly:
    queries.analytics.budgets on the store and on the simulation's jobs must agree to the GPU-second."""
    rows = [job(f"j{i}", acct, g, s, s, s + d, "n1") for i, (acct, g, s, d) in enumerate(
        [("me", 2, 0, 5), ("other", 4, 1, 3), ("me", 1, 2, 6), ("other", 8, 6, 2), ("me", 4, 9, 2)])]
    jobs = frame(rows)
    with Store(tmp_path).transaction() as tx:
        tx.upsert("jobs", jobs)
    res = engine.simulate(jobs, NODES, engine.SimConfig(budgets=TREE, policy="fcfs", backfill="none"))
    assert res.jobs["wait_s"].max() == 0
    w0, w1 = h(0), h(10)
    log = budgets.attainment(tmp_path, TREE, w0, w1, capacity_gpus=16).table
    sim = budgets.attainment_of(res.jobs, TREE, w0, w1, capacity_gpus=16).table
    assert log.height == sim.height == 3
    for a, b in zip(log.sort("node").iter_rows(named=True), sim.sort("node").iter_rows(named=True)):
        assert a["node"] == b["node"]
        for k in ("entitled_gpu_hours", "demanded_gpu_hours", "received_gpu_hours"):
            assert a[k] == pytest.approx(b[k], abs=1e-9), (a["node"], k)
    # and by hand: me received 2x5 + 1x6 + 4x1 (the last job is cut at 10 h) = 20 GPU-hours
    assert log.filter(pl.col("node") == "me")["received_gpu_hours"][0] == pytest.approx(20.0)


def test_attainment_history_runs_on_a_simulation_output(tmp_path):
    """A simulation's --out directory is a flat store: the sliding-window history runs on it, window by window
    equal to attainment_of on the simulated jobs."""
    rows = [job(f"j{i}", "me" if i % 2 else "other", 8, 2 * i, 2 * i, 2 * i + 5, "n1") for i in range(8)]
    res = engine.simulate(frame(rows), NODES, engine.SimConfig(budgets=TREE, policy="fairshare"))
    out = res.write(tmp_path / "sim")
    hist = budgets.attainment_history(out, TREE, h(0), h(16), window_hours=8, step_hours=4, capacity_gpus=16)
    assert hist["window_end"].to_list() == [h(8), h(12), h(16)]
    for r in hist.iter_rows(named=True):
        one = budgets.attainment_of(res.jobs, TREE, r["window_start"], r["window_end"], capacity_gpus=16).summary
        assert (r["teams"], r["worst_node"], r["at_least_95"]) == (one["teams"], one["worst_node"], one["at_least_95"])
        assert r["mean"] == pytest.approx(one["mean"])


PARTS = ("free GPUs but no block that fits", "a fitting GPU block was free (CPU, memory or queue order held the job)",
         "waiting behind other teams' unpreemptible jobs", "too few free GPUs, held by preemptible or own work")


def test_causes_partition_the_waiting_gpu_hours():
    # 1-5 h: other holds 1 GPU per node (and, say, every CPU): 7 GPUs free on each node, yet me's 4-GPU job
    # waits: a fitting block was free, its CPU/memory (or the queue) held it. 5-8 h: other's 8-GPU jobs (min
    # runtime 1 h, from 5 h) fill both nodes: protected 5-6 h, merely full 6-8 h. Starts at 8 h.
    rows = [job("a", "other", 1, 0, 0, 5, "n1"), job("b", "other", 1, 0, 0, 5, "n2"),
            job("c", "other", 8, 5, 5, 8, "n1", min_rt=3600.0), job("d", "other", 8, 5, 5, 8, "n2", min_rt=3600.0),
            job("x", "me", 4, 1, 8, 9, "n1")]
    e = explain_logs(rows)
    assert e.value("waiting GPU-hours") == pytest.approx(4 * 7)
    got = [e.value(p) for p in PARTS]
    assert got == pytest.approx([0.0, 4 * 4, 4 * 1, 4 * 2])
    assert sum(got) == pytest.approx(e.value("waiting GPU-hours"))
    assert any("a node had the GPUs it asked for" in s and "(57 %)" in s for s in e.sentences)


def test_sim_path_lists_the_engine_wait_reasons():
    rows = [job("a", "other", 5, 0, 0, 10, "n1"), job("b", "other", 5, 0, 0, 10, "n2"),
            job("x", "me", 6, 1, 10, 12, "n1")]
    res = engine.simulate(frame(rows), NODES, engine.SimConfig(budgets=TREE, policy="fairshare"))
    e = ex.explain("me", ex.with_bucket(res.jobs, TREE), res.timeline, NODES, None, source="simulation")
    assert e.value("waiting GPU-hours, engine reason fragmentation") == pytest.approx(6 * 9)
    assert sum(e.value(p) for p in PARTS) == pytest.approx(e.value("waiting GPU-hours"))


def cpu_job(jid, account, cores, submit, start, end, node_list, **kw):
    row = job(jid, account, 0, submit, start, end, node_list, **kw)
    return row | dict(req_gpus=0.0, alloc_gpus=0.0, req_cpus=float(cores), alloc_cpus=float(cores))


def test_a_cpu_only_cluster_is_explained_in_core_hours():
    # Two 64-core nodes without GPUs. other holds 32 cores on each 0-10 h (min runtime 12 h: protected throughout);
    # me asks 64 cores on one node from 2 h and starts at 10 h: 8 h x 64 = 512 waiting core-hours, all of them
    # with 64 cores free but scattered (a hole). The GPU analysis would have said 0 for everything.
    nodes = NODES.with_columns(pl.lit(0.0).alias("gpus"))
    rows = [cpu_job("a", "other", 32, 0, 0, 10, "n1", min_rt=12 * 3600.0),
            cpu_job("b", "other", 32, 0, 0, 10, "n2", min_rt=12 * 3600.0),
            cpu_job("x", "me", 64, 2, 10, 12, "n1")]
    jobs = frame(rows)
    e = ex.explain("me", ex.with_bucket(jobs, TREE), ex.log_allocations(jobs), nodes, None, resource="cpu")
    assert e.value("waiting core-hours") == pytest.approx(512.0)
    assert e.value("free cores but no block that fits") == pytest.approx(512.0)
    assert e.value("waiting behind other teams' unpreemptible jobs") == pytest.approx(0.0)  # enough were free
    assert e.value("waiting GPU-hours") is None and e.table["unit"].str.contains("GPU").sum() == 0
    assert any("too large for the holes: 512 of those core-hours (100 %)" in s and "enough cores were free" in s
               for s in e.sentences)
    # asking 96 cores: the 64 free are not enough, and the 64 other's protected jobs hold are fewer than 96, so the
    # whole wait is "full", not protection
    rows[2] = cpu_job("x", "me", 96, 2, 10, 12, "n[1-2]")
    jobs = frame(rows)
    e = ex.explain("me", ex.with_bucket(jobs, TREE), ex.log_allocations(jobs), nodes, None, resource="cpu")
    assert e.value("waiting core-hours") == pytest.approx(96 * 8)
    assert e.value("too few free cores, held by preemptible or own work") == pytest.approx(96 * 8)
    # the GPU reading of the same log finds nothing to explain: what the page showed before
    g = ex.explain("me", ex.with_bucket(jobs, TREE), ex.log_allocations(jobs), nodes, None)
    assert g.value("waiting GPU-hours") == pytest.approx(0.0)


def _dense_profile(caps, node_ix, s, e, g, protected_g):
    """The segments x nodes matrix the node-set profile was first computed with: the oracle for ``_Profile``'s
    change points (small inputs only)."""
    import numpy as np

    times = np.unique(np.concatenate([s, e, protected_g[0], protected_g[1], [0.0]]))
    n_seg = len(times)
    delta = np.zeros((n_seg + 1, len(caps)))
    np.add.at(delta, (np.searchsorted(times, s), node_ix), g)
    np.add.at(delta, (np.searchsorted(times, e), node_ix), -g)
    free = np.maximum(caps[None, :] - np.cumsum(delta, axis=0)[:n_seg], 0.0)
    whole = (free >= caps[None, :] - 1e-9).astype(float) @ caps if len(caps) else np.zeros(n_seg)
    block = free.max(axis=1) if len(caps) else np.zeros(n_seg)
    return times, free.sum(axis=1), whole, block


@pytest.mark.parametrize("seed", range(60))
def test_node_profile_change_points_equal_the_dense_matrix(seed):
    # random node sets (GPU counts and fractional CPU counts, over-allocated logs, allocations sharing instants,
    # a node without allocations, zero-capacity nodes) against the dense matrix, at every segment
    import numpy as np

    rng = np.random.default_rng(seed)
    n_nodes = int(rng.integers(0, 7))
    caps = rng.choice([0.0, 4.0, 8.0, 0.5, 64.0], n_nodes).astype(float)
    n = int(rng.integers(0, 40)) if n_nodes else 0
    s = rng.integers(0, 20, n).astype(float) * rng.choice([1.0, 0.5])
    e = s + rng.integers(0, 10, n)
    node_ix = rng.integers(0, max(n_nodes, 1), n)
    g = rng.choice([1.0, 2.0, 0.5, 8.0, 3.0], n)
    prot = (rng.integers(0, 20, 3).astype(float), rng.integers(20, 30, 3).astype(float), rng.choice([1.0, 2.0], 3))
    times, total, whole, block = _dense_profile(caps, node_ix, s, e, g, prot)
    prof = ex._Profile(caps, node_ix, s, e, g, prot)
    assert np.array_equal(prof.t, times)
    assert np.allclose(prof.total, total, atol=1e-9) and np.allclose(prof.whole, whole, atol=1e-9)
    for need in (0.25, 0.5, 1.0, 2.0, 4.0, 7.5, 8.0, 9.0, 64.0):
        assert np.array_equal(prof.block_fits(need), block >= need)
