"""The ``multifactor`` queue policy (``engine.policies.multifactor``, Slurm's priority/multifactor): the order of
age, size and fair-share weights on small workloads whose schedules are computed by hand, and FCFS under the
default weights on a random workload."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from engine import Cluster, ConfigError, SimConfig, simulate
from engine.policies import POLICIES


def jobs(rows):
    """rows: (label, submit, cpus, run, account) -> a jobs frame sized in CPUs, limit = run."""
    return pl.DataFrame({
        "job_id": [str(i + 1) for i in range(len(rows))], "job_name": [r[0] for r in rows],
        "submit": [float(r[1]) for r in rows], "req_cpus": [float(r[2]) for r in rows],
        "elapsed_s": [float(r[3]) for r in rows], "time_limit_s": [float(r[3]) for r in rows],
        "account": [r[4] for r in rows],
    })


def starts(res) -> dict:
    return dict(zip(res.jobs["job_name"].to_list(), res.jobs["start"].to_list()))


def run(rows, **cfg):
    return starts(simulate(jobs(rows), Cluster.procs(4), SimConfig(policy="multifactor", backfill="none",
                                                                     **cfg).validated()))


# X fills the 4 processors until 100; a (1 proc) and b (4 procs) queue behind it, a first
SIZE = [("X", 0, 4, 100, "p"), ("a", 10, 1, 50, "p"), ("b", 20, 4, 30, "p")]


def test_registered_with_one_line():
    assert "multifactor" in POLICIES and POLICIES["multifactor"].name == "multifactor"


def test_age_alone_is_fcfs_order():
    # at 100: a aged 90, b aged 80 -> a starts; b needs all 4 processors and waits for a's end at 150
    assert run(SIZE, priority_max_age_s=1000) == {"X": 0.0, "a": 100.0, "b": 150.0}


def test_size_weight_puts_the_large_job_first():
    # at 100: a = 0.09 + 1 x 1/4 = 0.34, b = 0.08 + 1 x 4/4 = 1.08 -> b runs 100-130, then a
    assert run(SIZE, priority_max_age_s=1000, priority_weight_size=1.0) == {"X": 0.0, "a": 130.0, "b": 100.0}


def test_negative_size_weight_favours_small_jobs():
    # age-free: a = -0.25, b = -1.0 -> a first
    assert run(SIZE, priority_weight_age=0.0, priority_weight_size=-1.0) == {"X": 0.0, "a": 100.0, "b": 150.0}


def test_size_outweighed_by_age_until_max_age():
    # w_size 0.05, max age 100: a = 90/100 + 0.05/4 = 0.9125 > b = 80/100 + 0.05 = 0.85 -> a first.
    # Max age 50: both ages cap at 1, a = 1.0125 < b = 1.05 -> b first.
    assert run(SIZE, priority_max_age_s=100, priority_weight_size=0.05)["a"] == 100.0
    assert run(SIZE, priority_max_age_s=50, priority_weight_size=0.05)["b"] == 100.0


FAIR = [("X", 0, 4, 100, "p"), ("p1", 10, 4, 10, "p"), ("q1", 20, 4, 10, "q")]


def test_fair_share_puts_the_account_that_used_nothing_first():
    # at 100: p used 4 x 100 of the 400 used; 2 accounts: p = 2 ** (-2 x 1) = 0.25, q = 2 ** 0 = 1 -> q1 first
    got = run(FAIR, priority_weight_age=0.0, priority_weight_fairshare=1.0, priority_calc_period_s=0)
    assert got == {"X": 0.0, "p1": 110.0, "q1": 100.0}


def test_fair_share_factors_refresh_only_every_calc_period():
    # factors computed at the first pass (0 s: nobody used anything, all 1) hold until 300 s: p1 first by index
    got = run(FAIR, priority_weight_age=0.0, priority_weight_fairshare=1.0)
    assert got == {"X": 0.0, "p1": 100.0, "q1": 110.0}


def test_fair_share_usage_is_windowed_by_lookback():
    # Y (q) holds 4 processors 0-100, X (p) 100-150; p1 and q1 wait for 150.
    rows = [("Y", 0, 4, 100, "q"), ("X", 0, 4, 50, "p"), ("p1", 110, 4, 10, "p"), ("q1", 120, 4, 10, "q")]
    cfg = dict(priority_weight_age=0.0, priority_weight_fairshare=1.0, priority_calc_period_s=0)
    # lookback 1000 s: p used 200, q 400 of 600 -> p = 2 ** (-2/3) = 0.63 > q = 2 ** (-4/3) = 0.40: p1 first
    got = run(rows, lookback_s=1000, **cfg)
    assert (got["p1"], got["q1"]) == (150.0, 160.0)
    # lookback 60 s, window [90, 150]: q used 4 x 10 = 40 (Y's last 10 s), p 200 -> q = 0.79 > p = 0.31: q1 first
    got = run(rows, lookback_s=60, **cfg)
    assert (got["q1"], got["p1"]) == (150.0, 160.0)


def test_default_weights_give_the_fcfs_schedule_on_a_random_workload():
    rng = np.random.default_rng(7)
    n = 300
    rows = [(f"j{i}", float(t), int(c), float(r), f"a{int(k)}") for i, (t, c, r, k) in enumerate(zip(
        np.sort(rng.integers(0, 20000, n)), rng.integers(1, 9, n), rng.integers(10, 900, n), rng.integers(0, 5, n)))]
    for backfill in ("none", "easy"):
        fcfs = simulate(jobs(rows), Cluster.procs(8), SimConfig(policy="fcfs", backfill=backfill).validated())
        mf = simulate(jobs(rows), Cluster.procs(8), SimConfig(policy="multifactor", backfill=backfill,
                                                              priority_max_age_s=1e9).validated())
        assert mf.jobs["start"].to_list() == fcfs.jobs["start"].to_list()


def test_weights_under_another_policy_are_refused():
    with pytest.raises(ConfigError, match="priority_weight_size: only the multifactor policy"):
        SimConfig(policy="fcfs", priority_weight_size=1.0).validated()
    SimConfig(policy="fcfs", priority_weight_age=1.0).validated()  # the default is no setting


def test_weights_are_in_params_only_for_multifactor():
    assert "priority_weight_age" not in SimConfig().validated().params()
    p = SimConfig(policy="multifactor", priority_weight_size=-0.5).validated().params()
    assert (p["priority_weight_age"], p["priority_weight_size"], p["priority_weight_fairshare"]) == (1.0, -0.5, 0.0)


@pytest.mark.parametrize("field, value", [("priority_weight_age", float("nan")), ("priority_weight_size", "x"),
                                          ("priority_max_age_s", 0), ("priority_calc_period_s", -1)])
def test_bad_weights_are_one_line_config_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        SimConfig(policy="multifactor", **{field: value}).validated()
