"""The fidelity of a scenario's baseline (``dashboard.whatif.fidelity``): hand-computed figures on a four-job
window, the error bands and the inside / beyond verdict of each comparison row, the wording, and a window whose
log has no start times."""
from __future__ import annotations

import datetime as dt
import types

import polars as pl
import pytest

from dashboard.whatif import fidelity as fd
from dashboard.whatif import runner

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 2, tzinfo=UTC)


def at(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


LOG_WAITS = [100.0, 200.0, 300.0, 400.0]   # mean 250, p90 (linear) 300 + 0.7 x 100 = 370
SIM_WAITS = [50.0, 100.0, 150.0, 200.0]    # mean 125, p90 150 + 0.7 x 50 = 185: every figure -50 %, same order


def frames(log_starts=True):
    ids = ["a", "b", "c", "d"]
    sub = [100.0 * i for i in range(4)]
    logged = pl.DataFrame({
        "job_id": ids, "job_class": ["training"] * 4, "req_cpus": [1.0] * 4,
        "submit": [at(s) for s in sub],
        "start": [at(s + w) if log_starts else None for s, w in zip(sub, LOG_WAITS)],
        "end": [at(s + w + 600) if log_starts else None for s, w in zip(sub, LOG_WAITS)]},
        schema_overrides={"start": pl.Datetime("us", "UTC"), "end": pl.Datetime("us", "UTC")})
    sim = pl.DataFrame({
        "job_id": ids, "attempt": [0] * 4, "pinned": [False] * 4, "req_cpus": [1.0] * 4,
        "submit": [at(s) for s in sub], "start": [at(s + w) for s, w in zip(sub, SIM_WAITS)],
        "end": [at(s + w + 600) for s, w in zip(sub, SIM_WAITS)]})
    inputs = types.SimpleNamespace(jobs=logged, start=T0, end=T0 + dt.timedelta(days=7), warm_start=True)
    base = types.SimpleNamespace(jobs=sim, metrics={"resource": "cpus", "capacity": 10.0})
    return inputs, base, types.SimpleNamespace(budgets=None, lookback_s=7 * 86400.0)


@pytest.fixture
def fid():
    return fd.of_baseline(*frames())


def test_the_figures_are_the_hand_computed_ones(fid):
    assert fid["available"] and fid["warm_start"] and fid["days"] == 7.0
    o = fid["report"]["overall"]
    assert fid["report"]["jobs_compared"] == 4
    assert (o["mean_log_s"], o["mean_sim_s"]) == (250.0, 125.0)
    assert o["p90_log_s"] == pytest.approx(370.0) and o["p90_sim_s"] == pytest.approx(185.0)
    assert o["p90_rel_err"] == pytest.approx(-0.5) and o["mean_rel_err"] == pytest.approx(-0.5)
    assert o["spearman"] == pytest.approx(1.0)


def test_the_headline_says_it_in_words(fid):
    # -50 % is beyond TRUSTED_REL (25 %): "misses", never "reproduces ... within 50 %"
    assert fid["headline"] == (
        "On the last 7 days the modeled baseline misses logged p90 waits by 50 % (simulated shorter), "
        "misses mean waits by 50 % (simulated shorter), Spearman 1.00 over 4 jobs; occupancy 0.0 % simulated against "
        "0.0 % logged.")  # 4 x 600 cpu-s over 10 cpus x 7 days


def test_an_error_within_a_quarter_reads_as_reproduced():
    global SIM_WAITS
    old = SIM_WAITS
    SIM_WAITS = [90.0, 200.0, 330.0, 480.0]  # p90 330 + 0.7 x 150 = 435: +17.6 %; mean 275: +10 %
    try:
        fid = fd.of_baseline(*frames())
    finally:
        SIM_WAITS = old
    assert fid["headline"].startswith(
        "On the last 7 days the modeled baseline reproduces logged p90 waits within 18 % (simulated longer), "
        "reproduces mean waits within 10 % (simulated longer), Spearman 1.00 over 4 jobs")


def comparison(rows):
    return pl.DataFrame(rows, schema=runner.COMPARISON_SCHEMA, orient="row")


def test_each_row_is_inside_or_beyond_the_error_of_its_own_figure(fid):
    cmp = comparison([
        ("wait_s.p90", "p90 wait", -1, 1000.0, 1100.0, 100.0),        # band |185 - 370| = 185 s: inside
        ("wait_s.p50", "Median wait", -1, 1000.0, 800.0, -200.0),     # band |125 - 250| = 125 s: beyond
        ("usage.wait_job_hours", "Queued job-hours", -1, 10.0, 14.0, 4.0),   # band 0.5 x 10 = 5: inside
        ("bounded_slowdown_mean", "Mean bounded slowdown", -1, 10.0, 16.0, 6.0),  # 6 > 5: beyond
        ("preemptions", "Preemptions", -1, 1.0, 3.0, 2.0),           # no logged counterpart
        ("occupancy", "Occupancy", 1, 0.5, 0.5, 0.0),                # no change
    ])
    j = fd.judge(cmp, fid)
    status = dict(zip(j["metric"], j["status"]))
    err = dict(zip(j["metric"], j["error"]))
    assert err["wait_s.p90"] == pytest.approx(185.0) and status["wait_s.p90"] == fd.INSIDE
    # p50: logged median (200 + 300) / 2 = 250, simulated (100 + 150) / 2 = 125: band 125 s < |-200|
    assert err["wait_s.p50"] == pytest.approx(125.0) and status["wait_s.p50"] == fd.BEYOND
    assert err["usage.wait_job_hours"] == pytest.approx(5.0) and status["usage.wait_job_hours"] == fd.INSIDE
    assert status["bounded_slowdown_mean"] == fd.BEYOND
    assert status["preemptions"] == fd.NOT_VALIDATED and err["preemptions"] is None
    assert status["occupancy"] == fd.NO_CHANGE
    words = fd.conclusion_words(j, runner.fmt_change)
    assert words == ("Inside the simulator's error (read as no change): p90 wait +2 min (error ±3 min); Queued "
                     "job-hours +4.0 (error ±5.0). Beyond it: Median wait −3 min (error ±2 min); Mean bounded "
                     "slowdown +6.0 (error ±5.0).")


def test_a_class_p90_uses_the_class_error_only_with_enough_jobs(fid):
    cmp = comparison([("wait_s_by_class.training.p90", "Training p90 wait", -1, 1000.0, 1100.0, 100.0)])
    j = fd.judge(cmp, fid)
    # 4 compared training jobs < MIN_CLASS_JOBS: the overall p90's band, and it says so
    assert j["error"][0] == pytest.approx(185.0) and "too few" in j["error_basis"][0]


def test_a_log_without_start_times_says_so_in_words():
    inputs, base, cfg = frames(log_starts=False)
    fid = fd.of_baseline(inputs, base, cfg)
    assert fid["available"] is False
    assert "no start time for any of the 4 jobs" in fid["reason"]
    assert fd.headline(fid).startswith("Fidelity of the baseline not measured: the log has no start time")
    j = fd.judge(comparison([("wait_s.p90", "p90 wait", -1, 1.0, 2.0, 1.0)]), fid)
    assert j["status"].to_list() == [fd.NOT_VALIDATED]
    assert fd.summary(fid)["available"] is False and "reason" in fd.summary(fid)


@pytest.mark.parametrize("days, words", [(28, "4 weeks"), (7, "7 days"), (1, "1 day"), (1.5, "36 hours"),
                                         (10, "10 days")])
def test_span_words(days, words):
    assert fd.span_words(days) == words


def test_a_cold_start_is_named_in_the_headline():
    inputs, base, cfg = frames()
    inputs.warm_start = False
    assert "(cold start: the baseline begins on an empty cluster" in fd.of_baseline(inputs, base, cfg)["headline"]
