"""Min-runtime contracts, preemption, guaranteed quota with reclaim, node failures and drains: hand-computed cases."""
from __future__ import annotations

import polars as pl
import pytest

from engine import Cluster, NodeEvent, SimConfig, simulate


def frame(rows, gpus=False, **extra):
    """rows: (label, submit, size, run, limit, account, min_runtime_s)."""
    size_col = "req_gpus" if gpus else "req_cpus"
    cols = {
        "job_id": [str(i + 1) for i in range(len(rows))], "job_name": [r[0] for r in rows],
        "submit": [float(r[1]) for r in rows], size_col: [float(r[2]) for r in rows],
        "elapsed_s": [float(r[3]) for r in rows], "time_limit_s": [float(r[4]) for r in rows],
        "account": [r[5] for r in rows], "min_runtime_s": pl.Series([r[6] for r in rows], dtype=pl.Float64),
    }
    if gpus:
        cols["req_cpus"] = [1.0] * len(rows)
    cols.update(extra)
    return pl.DataFrame(cols)


def by_name(res, *cols):
    """job name -> columns of the job's final attempt (its row with the job's own id)."""
    final = res.jobs.filter(~pl.col("job_id").str.contains(";"))
    return {r[0]: r[1:] if len(r) > 2 else r[1] for r in final.select("job_name", *cols).iter_rows()}


def attempt_rows(res, name, *cols):
    """The output rows of one job (one per attempt, in attempt order): job_id, submit, start, end, state, cols."""
    rows = res.jobs.filter(pl.col("job_name") == name).sort("attempt")
    return rows.select("job_id", "submit", "start", "end", "state", *cols).rows()


def attempts(res, job_id):
    tl = res.timeline.filter(pl.col("job_id").str.split(";").list.first() == job_id)
    tl = tl.unique(["attempt"], keep="first").sort("attempt")
    return tl.select("start", "end", "ended_by").rows()


@pytest.mark.parametrize("ckpt, lost, end", [(None, 5.0, 115.0), (2.0, 1.0, 111.0)])
def test_unallocated_occupancy_is_preempted_by_funded_work(ckpt, lost, end):
    # Two processors. U (min runtime 0 = unallocated occupancy) holds both from 0. F (no contract = funded)
    # arrives at 5 and cannot start: it preempts U at once. U loses the work since its last checkpoint
    # (all 5 s without checkpoints; 1 s with one every 2 s), restarts when F ends at 15 and runs the rest.
    # The output has one row per attempt (as sacct --duplicates): U's first attempt "1;0" (PREEMPTED, 0-5),
    # then its final attempt with the real id, (re)submitted at its requeue (5), waiting until 15.
    w = frame([("U", 0, 2, 100, 200, "x", 0.0), ("F", 5, 2, 10, 10, "y", None)])
    res = simulate(w, Cluster.procs(2), SimConfig(checkpoint_interval_s=ckpt))
    assert attempt_rows(res, "U", "preemptions", "lost_cpu_seconds", "wait_s", "elapsed_s") == [
        ("1;0", 0.0, 0.0, 5.0, "PREEMPTED", 1, 2 * lost, 0.0, 5.0),
        ("1", 5.0, 15.0, end, "COMPLETED", 0, 0.0, 10.0, end - 15.0)]
    assert by_name(res, "start", "end") == {"U": (15.0, end), "F": (5.0, 15.0)}
    assert by_name(res, "preemptions") == {"U": 0, "F": 0}
    assert attempts(res, "1") == [(0.0, 5.0, "preempt"), (15.0, end, "end")]
    assert res.timeline["job_id"].to_list() == ["1;0", "2", "1"]  # each timeline row names its attempt's row
    m = res.metrics
    assert m["preemptions"] == 1
    u_cpu_s = 2 * (5 + end - 15)
    assert m["unallocated_occupancy_share"] == pytest.approx(u_cpu_s / (u_cpu_s + 2 * 10))


def test_without_preemption_nothing_is_requeued():
    w = frame([("U", 0, 2, 100, 200, "x", 0.0), ("F", 5, 2, 10, 10, "y", None)])
    res = simulate(w, Cluster.procs(2), SimConfig(preemption=False))
    assert by_name(res, "start", "end") == {"U": (0.0, 100.0), "F": (100.0, 110.0)}


@pytest.mark.parametrize("min_rt, expected", [
    # B1 runs from 0; A1 (team A, no usage) arrives at 10 while team B holds the whole machine. B1's min
    # runtime protects it until 30; then A is under-served (share 0 of usage vs 0.5 entitled) and B
    # over-served, so B1 is preempted (30 s lost, no checkpoints) and A1 runs 30-40; B1 reruns 40-140.
    (30.0, {"B1": (0.0, 140.0, 1), "A1": (30.0, 40.0, 0)}),
    # No contract: never preempted, A1 waits for B1's end.
    (None, {"B1": (0.0, 100.0, 0), "A1": (100.0, 110.0, 0)}),
])
def test_min_runtime_protects_then_fair_share_preempts(min_rt, expected):
    w = frame([("B1", 0, 1, 100, 100, "B", min_rt), ("A1", 10, 1, 10, 10, "A", min_rt)])
    res = simulate(w, Cluster.procs(1), SimConfig(policy="fairshare", budgets={"A": 1, "B": 1}))
    first = {n: (rows[0][2], rows[-1][3], len(rows) - 1) for n in ("B1", "A1")
             for rows in [attempt_rows(res, n)]}  # first start, last end, requeues
    assert first == expected
    if min_rt:
        assert attempts(res, "1") == [(0.0, 30.0, "preempt"), (40.0, 140.0, "end")]
        assert attempt_rows(res, "B1", "preemptions") == [("1;0", 0.0, 0.0, 30.0, "PREEMPTED", 1),
                                                          ("1", 30.0, 40.0, 140.0, "COMPLETED", 0)]
        assert res.metrics["lost_cpu_hours"] == pytest.approx(30 / 3600)


def test_fair_share_preemption_needs_a_clear_imbalance():
    # Same, but team A already used a lot earlier in the window (A0: 0-200 alone): at 230 A is not
    # under-served, so no preemption happens even though B1 is past its min runtime.
    w = frame([("A0", 0, 1, 200, 200, "A", 10.0), ("B1", 200, 1, 100, 100, "B", 10.0),
               ("A1", 210, 1, 10, 10, "A", 10.0)])
    res = simulate(w, Cluster.procs(1), SimConfig(policy="fairshare", budgets={"A": 1, "B": 1}))
    assert by_name(res, "preemptions") == {"A0": 0, "B1": 0, "A1": 0}
    assert by_name(res, "start")["A1"] == 300.0


def test_guaranteed_quota_reclaims_burst_work():
    # One node with 4 GPUs; A and B are each guaranteed 2. B1 (2 GPUs) runs within B's guarantee, B2 (2 GPUs)
    # beyond it, as burst. A1 arrives at 20 within A's guarantee: it reclaims B2 (past its 10 s min runtime),
    # not B1. B2 loses 20 s and reruns when A1 ends at 30.
    w = frame([("B1", 0, 2, 100, 100, "B", None), ("B2", 0, 2, 100, 100, "B", None),
               ("A1", 20, 2, 10, 10, "A", None)], gpus=True)
    budgets = {"A": {"share": 1, "guaranteed_gpus": 2}, "B": {"share": 1, "guaranteed_gpus": 2}}
    res = simulate(w, Cluster.uniform(1, 4, 8), SimConfig(quota="guarantee", budgets=budgets, min_runtime_s=10))
    assert by_name(res, "start", "end", "preemptions") == {"B1": (0.0, 100.0, 0), "B2": (30.0, 130.0, 0),
                                                          "A1": (20.0, 30.0, 0)}
    # (the reclaimed attempt ran as burst; the rerun started as burst and moved into B's guarantee when B1 left)
    assert attempt_rows(res, "B2", "preemptions", "lost_gpu_seconds", "burst") == [
        ("2;0", 0.0, 0.0, 20.0, "PREEMPTED", 1, 2 * 20.0, True), ("2", 20.0, 30.0, 130.0, "COMPLETED", 0, 0.0, False)]
    # without the guarantee mode nobody may preempt (FCFS has no under-served team)
    plain = simulate(w, Cluster.uniform(1, 4, 8), SimConfig(budgets=budgets, min_runtime_s=10))
    assert by_name(plain, "start")["A1"] == 100.0


def test_borrowing_cap_holds_jobs_back():
    # B may hold at most 2 GPUs (max_gpus): B2 waits for B1 although 2 GPUs are free; its reason says so.
    w = frame([("B1", 0, 2, 100, 100, "B", None), ("B2", 0, 2, 10, 10, "B", None)], gpus=True)
    budgets = {"A": {"share": 1}, "B": {"share": 1, "max_gpus": 2}}
    res = simulate(w, Cluster.uniform(1, 4, 8), SimConfig(budgets=budgets))
    assert by_name(res, "start") == {"B1": 0.0, "B2": 100.0}
    assert by_name(res, "wait_reason")["B2"] == "quota"
    # a job asking for more than its cap in every budget version could never start: skipped and counted
    w3 = pl.concat([w, frame([("B3", 0, 3, 10, 10, "B", None)], gpus=True)])
    res3 = simulate(w3, Cluster.uniform(1, 4, 8), SimConfig(budgets=budgets))
    assert by_name(res3, "start") == {"B1": 0.0, "B2": 100.0}
    assert res3.metrics["jobs_skipped_by_reason"]["over_cap"] == 1


def test_node_failure_requeues_and_repairs():
    # Two 4-GPU nodes. J1 on node001 (0-100), J2 on node002 (0-50). node001 fails at 30: J1 is requeued
    # (30 s of 4 GPUs lost), node001 is down until 30 + 60. J1 restarts on node002 when J2 ends at 50.
    w = frame([("J1", 0, 4, 100, 100, "x", None), ("J2", 0, 4, 50, 50, "x", None)], gpus=True)
    cfg = SimConfig(node_events=[NodeEvent(30.0, "node001", "fail")], repair_time_s=60)
    res = simulate(w, Cluster.uniform(2, 4, 8), cfg)
    assert attempt_rows(res, "J1", "failures", "preemptions", "lost_gpu_seconds", "node_list") == [
        ("1;0", 0.0, 0.0, 30.0, "NODE_FAIL", 1, 0, 120.0, "node001"),
        ("1", 30.0, 50.0, 150.0, "COMPLETED", 0, 0, 0.0, "node002")]
    assert attempt_rows(res, "J2", "failures") == [("2", 0.0, 0.0, 50.0, "COMPLETED", 0)]
    assert attempts(res, "1") == [(0.0, 30.0, "fail"), (50.0, 150.0, "end")]
    m = res.metrics
    assert m["node_events"]["fail"] == 1 and m["node_down_hours"] == pytest.approx(60 / 3600)
    assert m["failures_requeued"] == 1


def test_drain_waits_for_min_runtime_and_blocks_new_work():
    # node001 is drained at 10. J1 on it (min runtime 40) keeps running until 40, then is requeued and reruns
    # on node002 from 40. J2 arrives at 20 and goes to node002 (node001 takes no new work). node001 goes
    # down when empty (at 40) and is back 100 s later.
    w = frame([("J1", 0, 4, 100, 100, "x", 40.0), ("J2", 20, 4, 10, 10, "x", None)], gpus=True)
    cfg = SimConfig(node_events=[NodeEvent(10.0, "node001", "drain")], repair_time_s=100)
    res = simulate(w, Cluster.uniform(2, 4, 8), cfg)
    assert by_name(res, "start", "end", "node_list") == {"J1": (40.0, 140.0, "node002"),
                                                        "J2": (20.0, 30.0, "node002")}
    assert attempt_rows(res, "J1", "node_list", "preemptions") == [("1;0", 0.0, 0.0, 40.0, "PREEMPTED", "node001", 1),
                                                                  ("1", 40.0, 40.0, 140.0, "COMPLETED", "node002", 0)]
    assert attempts(res, "1") == [(0.0, 40.0, "drain"), (40.0, 140.0, "end")]
    assert res.metrics["node_down_hours"] == pytest.approx(100 / 3600)


def test_drain_lets_jobs_without_contract_finish():
    w = frame([("J1", 0, 4, 100, 100, "x", None)], gpus=True)
    res = simulate(w, Cluster.uniform(2, 4, 8), SimConfig(node_events=[(10.0, "node001", "drain")], repair_time_s=5))
    assert by_name(res, "start", "end", "preemptions") == {"J1": (0.0, 100.0, 0)}
    assert res.metrics["node_down_hours"] == pytest.approx(5 / 3600)  # down 100 -> 105 once empty


def test_random_drains_are_seeded():
    w = frame([(f"j{i}", i * 50, 4, 400, 400, "x", 100.0) for i in range(40)], gpus=True)
    runs = [simulate(w, Cluster.uniform(4, 4, 8), SimConfig(node_mtbf_s=2000, seed=s, repair_time_s=300))
            for s in (1, 1, 2)]
    ev = [r.metrics["node_events"]["drain"] + r.metrics["node_events"]["ignored"] for r in runs]
    assert ev[0] == ev[1] > 0
    assert runs[0].jobs.equals(runs[1].jobs)
    assert not runs[0].timeline.equals(runs[2].timeline)


def test_drf_preemption_never_swaps_two_buckets_across_their_shares(hang_guard):
    # One node of 8 GPUs, teams A and B with equal shares. A's 8-GPU job runs from 0; B's arrives at 10. At 60
    # A's job is past its min runtime and A holds the whole node (served 2, B 0), but starting B's job would
    # leave B served 2 and A 0: the same imbalance the other way round, and A would preempt back at 120, and so
    # on, neither job ever finishing. The final-share rule forbids it: B waits for A's end.
    w = frame([("A", 0, 8, 600, 600, "A", 60.0), ("B", 10, 8, 600, 600, "B", 60.0)], gpus=True)
    with hang_guard(30):
        res = simulate(w, Cluster.uniform(1, 8, 64), SimConfig(policy="drf", budgets={"A": 1, "B": 1}))
    assert by_name(res, "start", "end", "preemptions") == {"A": (0.0, 600.0, 0), "B": (600.0, 1200.0, 0)}
    assert res.metrics["preemptions"] == 0


def test_drf_preemption_that_evens_the_shares_still_happens():
    # A holds the node with two 4-GPU jobs; B's 4-GPU job arrives at 10. At 60 (A's min runtime) preempting one
    # of A's jobs leaves both teams at served 1: allowed. The victim is A1 (equal lost work and start: the
    # lower job id); it loses its 60 s (no checkpoints) and restarts when B's job ends at 160.
    w = frame([("A1", 0, 4, 600, 600, "A", 60.0), ("A2", 0, 4, 600, 600, "A", 60.0),
               ("B", 10, 4, 100, 100, "B", 60.0)], gpus=True)
    res = simulate(w, Cluster.uniform(1, 8, 64), SimConfig(policy="drf", budgets={"A": 1, "B": 1}))
    assert attempts(res, "1") == [(0.0, 60.0, "preempt"), (160.0, 760.0, "end")]
    assert by_name(res, "start", "end") == {"A1": (160.0, 760.0), "A2": (0.0, 600.0), "B": (60.0, 160.0)}
    assert res.metrics["preemptions"] == 1
    assert res.metrics["lost_gpu_hours"] == pytest.approx(4 * 60 / 3600)
