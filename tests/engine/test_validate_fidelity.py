"""engine.fidelity: the comparison maths on hand-made logged / simulated frames, hand-computed, and checked against
independent numpy computations (scipy is not a dependency)."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from engine import fidelity


def test_average_ranks_share_ties():
    assert fidelity.average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_pearson_and_spearman_by_hand():
    log = [0.0, 10.0, 20.0, 30.0]
    sim = [0.0, 20.0, 10.0, 40.0]
    # means 15 and 17.5; deviations (-15,-5,5,15) and (-17.5,2.5,-7.5,22.5)
    # sum dx*dy = 262.5 - 12.5 - 37.5 + 337.5 = 550; sum dx^2 = 500; sum dy^2 = 306.25+6.25+56.25+506.25 = 875
    assert fidelity.pearson(log, sim) == pytest.approx(550 / math.sqrt(500 * 875))
    # ranks (1,2,3,4) vs (1,3,2,4): rho = 1 - 6*sum d^2 / (n(n^2-1)) = 1 - 6*2/60 = 0.8
    assert fidelity.spearman(log, sim) == pytest.approx(0.8)
    assert fidelity.pearson([1.0, 1.0], [2.0, 3.0]) is None  # constant vector: undefined, not NaN
    assert fidelity.spearman([1.0], [2.0]) is None


def _independent_spearman(x, y):
    """Ranks by counting (less-than + half the ties), then numpy's corrcoef: no shared code with fidelity."""
    x, y = np.asarray(x), np.asarray(y)
    rx = np.array([(x < v).sum() + ((x == v).sum() + 1) / 2 for v in x])
    ry = np.array([(y < v).sum() + ((y == v).sum() + 1) / 2 for v in y])
    return float(np.corrcoef(rx, ry)[0, 1])


def test_correlations_match_numpy_on_random_waits_with_ties():
    rng = np.random.default_rng(7)
    log = rng.integers(0, 50, 400).astype(float)  # many ties
    sim = log * 0.5 + rng.integers(0, 30, 400)
    assert fidelity.pearson(log, sim) == pytest.approx(float(np.corrcoef(log, sim)[0, 1]), abs=1e-12)
    assert fidelity.spearman(log, sim) == pytest.approx(_independent_spearman(log, sim), abs=1e-12)


def test_wait_stats_by_hand():
    s = fidelity.wait_stats([0.0, 100.0, 200.0, 300.0], [0.0, 0.0, 100.0, 500.0])
    assert s["n"] == 4
    assert (s["mean_log_s"], s["mean_sim_s"]) == (150.0, 150.0)
    assert s["mean_rel_err"] == 0.0
    # numpy linear percentiles: p50 of (0,100,200,300) = 150, of (0,0,100,500) = 50; p90 = 270 and 380
    assert (s["p50_log_s"], s["p50_sim_s"]) == (150.0, 50.0)
    assert s["p50_rel_err"] == pytest.approx(-2 / 3)
    assert (s["p90_log_s"], s["p90_sim_s"]) == pytest.approx((270.0, 380.0))
    assert s["p90_rel_err"] == pytest.approx(110 / 270)
    # |errors| 0, 100, 100, 200 -> median 100
    assert s["median_abs_err_s"] == 100.0
    assert (s["zero_wait_share_log"], s["zero_wait_share_sim"]) == (0.25, 0.5)
    zero = fidelity.wait_stats([0.0, 0.0], [5.0, 7.0])
    assert zero["mean_rel_err"] is None and zero["pearson"] is None  # logged mean 0: no relative error


@pytest.mark.parametrize("size,bucket", [(0.5, "<1"), (1, "1"), (2, "2-3"), (3, "2-3"), (4, "4-7"), (7.9, "4-7"),
                                         (64, "64-127"), (100, "64-127"), (128, "128-255")])
def test_size_buckets_are_powers_of_two(size, bucket):
    assert fidelity.size_bucket(size) == bucket


def test_start_order_concordance_by_hand():
    # starts in submit order; pairs at most 2 apart: (0,1) (1,2) (2,3) and (0,2) (1,3)
    log = [0.0, 10.0, 20.0, 30.0]
    sim = [0.0, 30.0, 20.0, 30.0]
    # (0,1) +,+ C; (1,2) +,- D; (2,3) +,+ C; (0,2) +,+ C; (1,3) +,0 tied
    o = fidelity.order_agreement(log, sim, neighbours=2)
    assert (o["pairs"], o["tied_pairs"]) == (4, 1)
    assert o["concordant_fraction"] == 0.75
    assert o["gamma"] == 0.5


def test_hourly_occupancy_by_hand():
    # capacity 4 over [0, 7200): a 2-wide job in [1800, 5400) fills half of each hour's half: 0.25, 0.25
    occ = fidelity.hourly_occupancy([1800.0], [5400.0], [2.0], 4.0, 0.0, 7200.0)
    assert occ.tolist() == pytest.approx([0.25, 0.25])
    # a partial last bin is normalised by its own length; a job outside the window counts nothing
    occ = fidelity.hourly_occupancy([0.0, 9000.0], [4500.0, 9999.0], [4.0, 4.0], 4.0, 0.0, 5400.0)
    assert occ.tolist() == pytest.approx([1.0, 900 / 1800])


def _frames():
    t = lambda s: s  # noqa: E731 (seconds workload)
    logged = pl.DataFrame({
        "job_id": ["1", "2", "3", "4", "5"],
        "submit": [t(0.0), t(0.0), t(100.0), t(200.0), t(5000.0)],
        "start": [t(0.0), t(100.0), t(300.0), t(200.0), t(5000.0)],
        "end": [t(3600.0), t(1000.0), t(400.0), t(300.0), t(6000.0)],
        "req_cpus": [1.0, 2.0, 4.0, 64.0, 1.0],
        "job_class": ["batch", "batch", "debug", "batch", "batch"],
    })
    simulated = pl.DataFrame({
        "job_id": ["1", "2", "3", "4", "5"],
        "submit": [0.0, 0.0, 100.0, 200.0, 5000.0],
        "start": [0.0, 0.0, 100.0, 500.0, 5000.0],
        "end": [3600.0, 900.0, 200.0, 600.0, 6000.0],
        "req_cpus": [1.0, 2.0, 4.0, 64.0, 1.0],
        "job_class": ["batch", "batch", "debug", "batch", "batch"],
        "attempt": [0, 0, 0, 0, 0],
        "pinned": [True, False, False, False, False],
    })
    return logged, simulated


def test_compare_on_hand_made_frames():
    logged, simulated = _frames()
    rep = fidelity.compare(logged, simulated, size_col="req_cpus", capacity=100.0, window_start=0.0,
                           window_end=4000.0)
    # job 1 pinned (not the simulator's), job 5 submitted after the window: jobs 2, 3, 4 compared
    assert rep["jobs_compared"] == 3
    o = rep["overall"]
    # logged waits (100, 200, 0), simulated (0, 0, 300)
    assert o["mean_log_s"] == pytest.approx(100.0) and o["mean_sim_s"] == pytest.approx(100.0)
    assert o["median_abs_err_s"] == 200.0  # |errors| 100, 200, 300
    assert o["pearson"] == pytest.approx(float(np.corrcoef([100, 200, 0], [0, 0, 300])[0, 1]))
    assert set(rep["by_class"]) == {"batch", "debug"} and rep["by_class"]["debug"]["n"] == 1
    assert list(rep["by_size"]) == ["2-3", "4-7", "64-127"]
    assert rep["by_size"]["64-127"]["mean_log_s"] == 0.0 and rep["by_size"]["64-127"]["mean_sim_s"] == 300.0
    assert rep["attainment"] is None
    # occupancy over [0, 4000): log uses 1x3600 + 2x900 + 4x100 + 64x100 = 12200 resource-s in the first hour
    # (job 1's hour, 2 in [100,1000), 3 in [300,400), 4 in [200,300)); sim 1x3600 + 2x900 + 4x100 + 64x100 likewise
    assert rep["occupancy"]["hours"] == 2
    assert rep["occupancy"]["mean_log"] == pytest.approx((12200 / 360000 + 0.0) / 2)
    assert rep["occupancy"]["mean_abs_diff"] == pytest.approx(0.0)


def test_occupancy_counts_a_job_still_running_in_the_log():
    # job 6 was RUNNING when the log was written: no end, elapsed 1800 s from 1000 (10 processors: 18,000
    # resource-seconds in the first hour); the replay ends it at 2800. Before, the log side dropped it.
    logged, simulated = _frames()
    logged = pl.concat([logged.with_columns(pl.lit(None, dtype=pl.Float64).alias("elapsed_s")),
                        pl.DataFrame({"job_id": ["6"], "submit": [1000.0], "start": [1000.0], "end": [None],
                                      "req_cpus": [10.0], "job_class": ["batch"], "elapsed_s": [1800.0]},
                                     schema_overrides={"end": pl.Float64})], how="diagonal_relaxed")
    simulated = pl.concat([simulated, pl.DataFrame({"job_id": ["6"], "submit": [1000.0], "start": [1000.0],
                                                    "end": [2800.0], "req_cpus": [10.0], "job_class": ["batch"],
                                                    "attempt": [0], "pinned": [False]})])
    rep = fidelity.compare(logged, simulated, size_col="req_cpus", capacity=100.0, window_start=0.0,
                           window_end=4000.0)
    assert rep["occupancy"]["mean_log"] == pytest.approx(((12200 + 18000) / 360000 + 0.0) / 2)
    assert rep["occupancy"]["mean_abs_diff"] == pytest.approx(0.0)


def test_attainment_error_and_missing_teams():
    logged, simulated = _frames()
    rep = fidelity.compare(logged, simulated, size_col="req_cpus", capacity=100.0,
                           attainment_log={"a": {"attainment": 0.9}, "b": {"attainment": None}},
                           attainment_sim={"a": {"attainment": 0.7}, "b": {"attainment": 0.5}})
    assert rep["attainment"]["teams"]["a"]["abs_err"] == pytest.approx(0.2)
    assert rep["attainment"]["teams"]["b"]["abs_err"] is None
    assert rep["attainment"]["mean_abs_err"] == pytest.approx(0.2)


def test_verdict_and_loss_follow_the_numbers():
    logged, simulated = _frames()
    rep = fidelity.compare(logged, simulated, size_col="req_cpus", capacity=100.0, window_start=0.0,
                           window_end=4000.0)
    text = fidelity.verdict(rep)
    assert "over 3 jobs" in text and "+0 %" in text  # the means agree
    assert "noise" in text  # Spearman is far below 0.7: not trusted
    o = rep["overall"]
    expect = abs(o["mean_rel_err"]) + abs(o["p90_rel_err"]) + abs(o["zero_wait_share_sim"] - o["zero_wait_share_log"]) \
        + 1 - o["spearman"]
    assert fidelity.loss(rep) == pytest.approx(expect)
    perfect = fidelity.compare(logged, logged.with_columns(pl.lit(0).alias("attempt")), size_col="req_cpus",
                               capacity=100.0)
    assert fidelity.loss(perfect) == pytest.approx(0.0)
    assert "close enough" in fidelity.verdict(perfect)


def test_a_requeued_job_is_compared_by_its_first_attempt():
    logged, simulated = _frames()
    # job 2 was requeued in the run: its first attempt ``2;0`` started at 0, the final one ``2`` at 700
    again = simulated.filter(pl.col("job_id") == "2").with_columns(pl.lit(700.0).alias("start"),
                                                                   pl.lit(1, dtype=pl.Int64).alias("attempt"))
    requeued = pl.concat([simulated.with_columns(pl.when(pl.col("job_id") == "2").then(pl.lit("2;0"))
                                                 .otherwise(pl.col("job_id")).alias("job_id")), again])
    a = fidelity.compare(logged, simulated, size_col="req_cpus", capacity=100.0, window_start=0.0, window_end=4000.0)
    b = fidelity.compare(logged, requeued, size_col="req_cpus", capacity=100.0, window_start=0.0, window_end=4000.0)
    assert b["jobs_compared"] == 3 and b["overall"]["mean_sim_s"] == a["overall"]["mean_sim_s"]
