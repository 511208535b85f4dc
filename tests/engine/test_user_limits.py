"""Per-user running limits (``SimConfig.max_running_jobs_per_user``, ``engine.user_limits``): hand-computed small
schedules under every backfill rule and both layouts, the reservation a limited job must not take, warm starts,
preemption, and the limit off (or never reached) leaving the schedule as it was."""
from __future__ import annotations

import polars as pl
import pytest

from engine import Cluster, ConfigError, SimConfig, simulate
from engine.backfill import fastpath

RULES = [("none", None), ("easy", None), ("conservative", None), ("easy", 2)]


def jobs(rows):
    """rows: (label, user, submit, procs, run, limit) -> a jobs frame sized in CPUs; ids are row numbers."""
    return pl.DataFrame({
        "job_id": [str(i + 1) for i in range(len(rows))], "job_name": [r[0] for r in rows],
        "user": [r[1] for r in rows], "submit": [float(r[2]) for r in rows], "req_cpus": [float(r[3]) for r in rows],
        "elapsed_s": [float(r[4]) for r in rows], "time_limit_s": [float(r[5]) for r in rows]})


def col(res, name) -> dict:
    return dict(zip(res.jobs["job_name"].to_list(), res.jobs[name].to_list()))


def layout(kind, procs):
    return Cluster.procs(procs) if kind == "procs" else Cluster.uniform(1, 0, procs)


# u submits a, b, c (1 processor, 10 s) at 0 on an empty 8-processor machine; limit 2. a and b start at 0, c waits
# for a's end at 10 ("user_limit" all along) though 6 processors stay idle. v's d (submitted at 1) starts at once.
THREE = [("a", "u", 0, 1, 10, 10), ("b", "u", 0, 1, 10, 10), ("c", "u", 0, 1, 10, 10), ("d", "v", 1, 1, 10, 10)]


@pytest.mark.parametrize("rule,depth", RULES)
@pytest.mark.parametrize("kind", ["procs", "node"])
def test_the_third_job_starts_when_the_first_ends(rule, depth, kind):
    cfg = SimConfig(backfill=rule, reservation_depth=depth, max_running_jobs_per_user=2)
    res = simulate(jobs(THREE), layout(kind, 8), cfg)
    assert col(res, "start") == {"a": 0.0, "b": 0.0, "c": 10.0, "d": 1.0}
    assert col(res, "wait_reason") == {"a": None, "b": None, "c": "user_limit", "d": None}
    free = simulate(jobs(THREE), layout(kind, 8), SimConfig(backfill=rule, reservation_depth=depth))
    assert col(free, "start") == {"a": 0.0, "b": 0.0, "c": 0.0, "d": 1.0}


# 4 processors. u's a (2 procs, 0-100). w's big (4 procs) blocks at 1: reserved at 100. u's b (1 proc, 5 s) at 2
# fits the 2 free processors and ends long before 100: EASY would backfill it, but u already runs a (limit 1),
# so b waits ("user_limit") until a ends at 100, when big takes the machine: b starts at big's end, 110.
BACKFILLED = [("a", "u", 0, 2, 100, 100), ("big", "w", 1, 4, 10, 10), ("b", "u", 2, 1, 5, 5)]


@pytest.mark.parametrize("rule,depth", RULES[1:])
@pytest.mark.parametrize("kind", ["procs", "node"])
def test_backfill_does_not_start_a_limited_job(rule, depth, kind):
    cfg = SimConfig(backfill=rule, reservation_depth=depth, max_running_jobs_per_user=1)
    res = simulate(jobs(BACKFILLED), layout(kind, 4), cfg)
    assert col(res, "start") == {"a": 0.0, "big": 100.0, "b": 110.0}
    assert col(res, "wait_reason")["b"] == "user_limit"
    free = simulate(jobs(BACKFILLED), layout(kind, 4), SimConfig(backfill=rule, reservation_depth=depth))
    assert col(free, "start")["b"] == 2.0  # the limit is what held it


# 4 processors. u's a (1 proc, 0-100). u's b (4 procs) arrives at 1: limited (limit 1), so not eligible and no
# reservation (as Slurm's backfill skips it). w's c (2 procs, limit 200, runs 50) arrives at 2: it is the first
# eligible job and fits the 3 free processors, so it starts at 2. Had b held the reservation (at 100, extra 0),
# c, ending by its limit at 202, could not have started before b. b starts at a's end, 100.
RESERVED = [("a", "u", 0, 1, 100, 100), ("b", "u", 1, 4, 10, 10), ("c", "w", 2, 2, 50, 200)]


@pytest.mark.parametrize("rule,depth", RULES[1:])
@pytest.mark.parametrize("kind", ["procs", "node"])
def test_a_limited_job_takes_no_reservation(rule, depth, kind):
    cfg = SimConfig(backfill=rule, reservation_depth=depth, max_running_jobs_per_user=1)
    res = simulate(jobs(RESERVED), layout(kind, 4), cfg)
    assert col(res, "start") == {"a": 0.0, "b": 100.0, "c": 2.0}
    assert col(res, "reserved_start")["b"] is None
    assert col(res, "wait_reason")["b"] == "user_limit"
    free = simulate(jobs(RESERVED), layout(kind, 4), SimConfig(backfill=rule, reservation_depth=depth))
    assert col(free, "start") == {"a": 0.0, "b": 100.0, "c": 110.0}


def test_jobs_without_a_user_are_never_limited():
    w = jobs(THREE).with_columns(pl.lit(None, pl.String).alias("user"))
    res = simulate(w, Cluster.procs(8), SimConfig(max_running_jobs_per_user=1))
    assert set(col(res, "start").values()) == {0.0, 1.0}


def test_a_limit_never_reached_changes_no_schedule_and_skips_the_fast_path(monkeypatch):
    # a limit as large as the workload binds nobody: the Python kernel with the limit on gives the fast path's
    # schedule, wait reasons and reservations (an independent path: the fast path must not run with it on)
    w = jobs([(f"j{i}", "uv"[i % 2], i // 3, 1 + i % 3, 5 + i % 7, 9) for i in range(40)])
    ran = []
    real = fastpath.run
    monkeypatch.setattr(fastpath, "run", lambda sim: (ran.append(1), real(sim))[1])
    for rule in ("none", "easy"):
        ran.clear()
        off = simulate(w, Cluster.procs(4), SimConfig(backfill=rule))
        assert ran, "the fast path ran without a limit"
        ran.clear()
        on = simulate(w, Cluster.procs(4), SimConfig(backfill=rule, max_running_jobs_per_user=40))
        assert not ran, "the fast path ran with a limit on"
        assert on.jobs.equals(off.jobs) and on.timeline.equals(off.timeline)
        assert "max_running_jobs_per_user" not in off.metrics["params"]
        assert on.metrics["params"]["max_running_jobs_per_user"] == 40


def test_the_limit_binds_on_a_busy_machine():
    # the same 40 jobs with limit 1: no user ever runs two at once (checked from the output's intervals)
    w = jobs([(f"j{i}", "uv"[i % 2], i // 3, 1 + i % 3, 5 + i % 7, 9) for i in range(40)])
    for rule in ("none", "easy", "conservative"):
        res = simulate(w, Cluster.procs(4), SimConfig(backfill=rule, max_running_jobs_per_user=1))
        f = res.jobs.select("user", "start", "end").sort("start")
        for user in ("u", "v"):
            s = f.filter(pl.col("user") == user)
            starts, ends = s["start"].to_list(), s["end"].to_list()
            assert all(st >= e for st, e in zip(starts[1:], ends[:-1])), (rule, user)
        assert (res.jobs["wait_reason"] == "user_limit").sum() > 0


def test_config_rejects_a_bad_limit():
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="max_running_jobs_per_user"):
            SimConfig(max_running_jobs_per_user=bad).validated()


def test_jobs_running_at_the_warm_start_count_against_their_user():
    # Two 4-GPU nodes. x's p started at T-50 on n1 and ends, as logged, at T+100. x's s (4 GPUs, 20 s) arrives
    # at T+10 and would fit n2 at once, but x already runs p (limit 1): it waits ("user_limit") until p's end.
    # y's r (4 GPUs) arrives at T+20 and takes n2 at once (T+20..T+50); s starts at T+100 on n1.
    from test_engine_warm import NODES, T, at, logged

    w = logged([("p", "A", 4, -100, -50, 100, 200, "n1"), ("s", "A", 4, 10, 500, 520, 20, "n2"),
                ("r", "B", 4, 20, 600, 630, 30, "n2")])
    w = w.with_columns(pl.Series("user", ["x", "x", "y"]))
    cfg = SimConfig(policy="fcfs", backfill="easy", warm_start=T, window_end=at(300), max_running_jobs_per_user=1)
    res = simulate(w, NODES, cfg)
    got = {r[0]: r[1:] for r in res.jobs.select("job_id", "start", "wait_reason", "pinned").iter_rows()}
    assert got["p"] == (at(-50), None, True)
    assert got["s"] == (at(100), "user_limit", False)
    assert got["r"] == (at(20), None, False)
    free = simulate(w, NODES, SimConfig(policy="fcfs", backfill="easy", warm_start=T, window_end=at(300)))
    assert free.jobs.filter(pl.col("job_id") == "s")["start"].to_list() == [at(10)]


def preempt_frame(rows):
    """rows: (label, user, submit, procs, run, min_runtime_s): min runtime 0 = preemptible at once, None = funded."""
    return jobs([(r[0], r[1], r[2], r[3], r[4], r[4]) for r in rows]).with_columns(
        pl.Series("min_runtime_s", [r[5] for r in rows], dtype=pl.Float64))


def test_a_preemptor_obeys_its_users_limit():
    # 3 processors. u's K (1 proc, funded, 0-50); x's U (2 procs, preemptible, 0-100). u's F (2 procs, funded)
    # arrives at 5: without a limit it preempts U at once; with limit 1 u already runs K, so F is not eligible
    # (no preemption, "user_limit") until K ends at 50, when it blocks on resources and preempts U then.
    w = preempt_frame([("K", "u", 0, 1, 50, None), ("U", "x", 0, 2, 100, 0.0), ("F", "u", 5, 2, 10, None)])
    free = simulate(w, Cluster.procs(3), SimConfig())
    assert col(free, "start")["F"] == 5.0
    res = simulate(w, Cluster.procs(3), SimConfig(max_running_jobs_per_user=1))
    final = res.jobs.filter(~pl.col("job_id").str.contains(";"))
    assert col(res, "start")["F"] == 50.0
    assert dict(zip(final["job_name"], final["start"]))["U"] == 60.0  # requeued at 50, back at F's end
    assert res.metrics["preemptions"] == 1


def test_a_preempted_victim_frees_its_slot():
    # 2 processors, limit 1. x's U (preemptible) holds both from 0; w's F (funded) preempts it at 5. U's requeue
    # gives x's slot back: U restarts at F's end, 15 (were it still counted, x would sit at its limit forever).
    w = preempt_frame([("U", "x", 0, 2, 100, 0.0), ("F", "w", 5, 2, 10, None)])
    res = simulate(w, Cluster.procs(2), SimConfig(max_running_jobs_per_user=1))
    final = res.jobs.filter(~pl.col("job_id").str.contains(";"))
    assert dict(zip(final["job_name"], final["start"])) == {"U": 15.0, "F": 5.0}
