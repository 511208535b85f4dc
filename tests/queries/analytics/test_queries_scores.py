"""The scores as incentives: splitting a job must not pay under the recommended score (it does under the
legacy one, visibly), and the quota loop's back-test is stable, absolute and follows its documented rules.

Stores are built with real jobs and samples through ``queries.store.Store``; the loop's rules are re-implemented
below in plain Python (``reference_loop``) as the independent second computation.
"""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import queries
from queries.store import Store

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 5, tzinfo=UTC)  # a Monday: periods of the default origin start here
H = dt.timedelta(hours=1)
WEEK = dt.timedelta(days=7)
GB = 1e9


def _job(job_id, user, start, hours, *, cpus=8.0, gpus=1.0, mem_gb=32.0, account="lab/a", **extra):
    end = start + dt.timedelta(hours=hours)
    return dict(cluster="c", job_id=job_id, user=user, account=account, state="COMPLETED", job_class="training",
                job_name=f"train_{job_id}", submit=start, start=start, end=end, elapsed_s=hours * 3600.0,
                req_cpus=cpus, req_gpus=gpus, req_mem_bytes=mem_gb * GB, **extra)


def _samples_for(job_id, start, hours, levels):
    """Equal-length samples covering [start, start + hours): ``levels`` = [(cpu, gpu_util, mem_gb), ...]."""
    step = hours * 3600.0 / len(levels)
    return [dict(cluster="c", job_id=job_id, ts=start + dt.timedelta(seconds=i * step), interval_s=step,
                 cpu_used=c, gpu_util=g, mem_bytes=m * GB) for i, (c, g, m) in enumerate(levels)]


def _write(root, jobs, samples):
    with Store(root).transaction() as tx:
        tx.upsert("jobs", pl.DataFrame(jobs))
        if samples:
            tx.upsert("samples", pl.DataFrame(samples))
    return root


def _by_user(df):
    return {r["user"]: r for r in df.iter_rows(named=True)}


# ------------------------------------------------------------------ gaming: split one job into N
LEVELS = [(2.0, 0.3, 8.0), (3.0, 0.4, 10.0), (2.0, 0.2, 6.0), (1.0, 0.3, 12.0),
          (2.0, 0.5, 9.0), (3.0, 0.3, 7.0), (2.0, 0.1, 8.0), (1.0, 0.2, 5.0)]


def _gaming_store(root, split_into: int, parallel: bool = False):
    """Users: mia (one 8 h job, 8 samples, later split), and three neighbours with fixed histories."""
    jobs, samples = [], []
    if split_into == 1:
        jobs.append(_job("m1", "mia", T0, 8, max_cpu_util=0.4))
        samples += _samples_for("m1", T0, 8, LEVELS)
    elif parallel:  # N jobs side by side over the whole 8 h, each 1/N of the resources and of the usage
        n = split_into
        for k in range(n):
            jobs.append(_job(f"m1.{k}", "mia", T0, 8, cpus=8.0 / n, gpus=1.0 / n, mem_gb=32.0 / n, max_cpu_util=0.4))
            samples += _samples_for(f"m1.{k}", T0, 8, [(c / n, g, m / n) for c, g, m in LEVELS])
    else:  # N jobs one after the other, each holding its part of the samples
        per = len(LEVELS) // split_into
        for k in range(split_into):
            start = T0 + k * per * H
            jobs.append(_job(f"m1.{k}", "mia", start, per, max_cpu_util=0.4))
            samples += _samples_for(f"m1.{k}", start, per, LEVELS[k * per:(k + 1) * per])
    for i, (user, util) in enumerate([("noah", 0.55), ("olga", 0.35), ("pete", 0.45)]):
        for j in range(3):
            start = T0 + dt.timedelta(hours=2 * j + i)
            jobs.append(_job(f"{user}{j}", user, start, 2, cpus=4.0, max_cpu_util=util))
            samples += _samples_for(f"{user}{j}", start, 2, [(4 * util, util, 16 * util)] * 4)
    return _write(root, jobs, samples)


@pytest.mark.parametrize("n, parallel", [(2, False), (4, False), (8, False), (4, True)])
def test_splitting_a_job_does_not_improve_the_recommended_score(tmp_path, n, parallel):
    before = _by_user(queries.run("user_ranking", store=_gaming_store(tmp_path / "one", 1)))
    after = _by_user(queries.run("user_ranking", store=_gaming_store(tmp_path / "split", n, parallel)))
    b, a = before["mia"], after["mia"]
    assert (b["job_count"], a["job_count"]) == (1, n)
    for col in ("gpu_hours_wasted", "cpu_hours_wasted", "mem_tb_hours_wasted", "footprint_gpu_equiv_hours",
                "rec_efficiency", "rec_confidence", "rec_demand", "rec_coefficient"):
        assert a[col] == pytest.approx(b[col], rel=1e-9), col
    # the neighbours' recommended coefficients do not move either: the score is absolute
    for user in ("noah", "olga", "pete"):
        assert after[user]["rec_coefficient"] == pytest.approx(before[user]["rec_coefficient"], rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_splitting_a_job_improves_the_legacy_score(tmp_path, n):
    """The legacy score's vulnerability, shown: same work, same waste, better score and coefficient."""
    before = _by_user(queries.run("user_ranking", store=_gaming_store(tmp_path / "one", 1)))
    after = _by_user(queries.run("user_ranking", store=_gaming_store(tmp_path / "split", n)))
    assert after["mia"]["gpu_hours_wasted"] == pytest.approx(before["mia"]["gpu_hours_wasted"])
    # one 8 h job: ln(8 x 480 + 50) e^2.1 / ln(1.1) = 708; halves: 340; quarters: 168; eighths: 87
    # (the neighbours score 168 .. 205)
    assert after["mia"]["legacy_score"] < before["mia"]["legacy_score"]
    assert before["mia"]["legacy_rank"] == 4
    if n >= 4:
        assert after["mia"]["legacy_rank"] < before["mia"]["legacy_rank"]
        assert after["mia"]["legacy_coefficient"] > before["mia"]["legacy_coefficient"]
        # and a neighbour pays for it: someone's legacy coefficient falls though nothing of theirs changed
        assert any(after[u]["legacy_coefficient"] < before[u]["legacy_coefficient"] for u in ("noah", "olga", "pete"))


# ------------------------------------------------------------------ the quota loop
def reference_loop(raw, enough, *, alpha, dead_band, max_step, lo=0.25, hi=3.0):
    """The rules of quota_backtest.sql, step by step: returns [(smoothed, applied), ...]."""
    smoothed = applied = 1.0
    out = []
    for r, ok in zip(raw, enough):
        if not ok:  # too small a sample: hold both
            out.append((smoothed, applied))
            continue
        smoothed = alpha * r + (1 - alpha) * smoothed
        target = min(max(smoothed, lo), hi)
        if abs(target - applied) > dead_band:
            applied = min(max(applied + max(-max_step, min(max_step, target - applied)), lo), hi)
        out.append((smoothed, applied))
    return out


def factor(eff, lo=0.25, hi=3.0, e0=0.1, e1=0.9):
    return lo * (hi / lo) ** min(max((eff - e0) / (e1 - e0), 0.0), 1.0)


# with confidence ~1 and no demand cap, the raw coefficient is the efficiency factor alone
PURE = dict(confidence_hours=1e-9, base_quota_gpus=1e-6)


def _weekly_store(root, plan: dict[str, list[tuple[float, int]]]):
    """plan: user -> [(efficiency, jobs) per week]; every job 10 h of 8 CPUs / 1 GPU / 32 GB used at
    ``efficiency`` on all three resources (job totals, no samples)."""
    jobs = []
    for user, weeks in plan.items():
        for w, (eff, n) in enumerate(weeks):
            for j in range(n):
                start = T0 + w * WEEK + dt.timedelta(hours=12 * j)
                jobs.append(_job(f"{user}-{w}-{j}", user, start, 10, cpu_seconds_used=eff * 8 * 36000,
                                 mean_gpu_util=eff, max_rss_bytes=eff * 32 * GB, max_cpu_util=eff))
    return _write(root, jobs, [])


def _series(df, user):
    return df.filter(pl.col("user") == user).sort("period_k")


def test_backtest_follows_the_documented_rules(tmp_path):
    effs = [0.5, 0.52, 0.48, 0.9, 0.9, 0.2, 0.6, 0.6]
    counts = [3, 3, 3, 3, 1, 3, 3, 3]  # week 5 has one job: below min_jobs=3, held
    store = _weekly_store(tmp_path, {"ann": list(zip(effs, counts))})
    params = dict(alpha=0.5, dead_band=0.1, max_step=0.3, min_jobs=3, min_gpu_equiv_hours=0.0, **PURE)
    got = _series(queries.run("quota_backtest", store=store, **params), "ann")
    assert got["period_start"].to_list() == [T0 + w * WEEK for w in range(8)]
    raw = [factor(e) for e in effs]
    assert got["raw_coefficient"].to_list() == pytest.approx(raw, rel=1e-6)
    assert got["held"].to_list() == [c < 3 for c in counts]
    expected = reference_loop(raw, [c >= 3 for c in counts], alpha=0.5, dead_band=0.1, max_step=0.3)
    assert got["smoothed_coefficient"].to_list() == pytest.approx([s for s, _ in expected], rel=1e-6)
    assert got["coefficient"].to_list() == pytest.approx([a for _, a in expected], rel=1e-6)
    changes = got["coefficient_change"].to_list()
    assert max(abs(c) for c in changes) <= 0.3 + 1e-12  # the cap on the change per period
    assert changes[4] == 0.0  # the held week
    # by hand for the first weeks: raw(0.5) = 0.25 x 12^0.5 = 0.866; smoothed 0.933 is within 0.1 of 1: hold
    assert got["coefficient"][0] == 1.0 and got["smoothed_coefficient"][0] == pytest.approx((factor(0.5) + 1) / 2)


def test_backtest_raw_terms_equal_the_ranking_of_each_period(tmp_path):
    store = _gaming_store(tmp_path / "g", 4)
    back = queries.run("quota_backtest", store=store, period_s=3 * 3600.0, origin=T0, min_jobs=1)
    assert back["period_k"].n_unique() >= 3
    for row in back.filter(pl.col("job_count") > 0).iter_rows(named=True):
        start = row["period_start"]
        ranking = _by_user(queries.run("user_ranking", store=store, start=start,
                                       end=start + dt.timedelta(hours=3)))[row["user"]]
        assert row["job_count"] == ranking["job_count"]
        for col in ("rec_efficiency", "rec_confidence", "rec_demand"):
            assert row[col] == pytest.approx(ranking[col], rel=1e-9), (row["user"], start, col)
        assert row["raw_coefficient"] == pytest.approx(ranking["rec_coefficient"], rel=1e-9)
        assert row["legacy_coefficient"] == pytest.approx(ranking["legacy_coefficient"], rel=1e-9)


def sign_changes(values) -> int:
    deltas = [b - a for a, b in zip(values, values[1:]) if abs(b - a) > 1e-12]
    return sum(1 for d0, d1 in zip(deltas, deltas[1:]) if (d0 > 0) != (d1 > 0))


def test_loop_damps_an_oscillating_user(tmp_path):
    """A user alternating between good and bad weeks: the raw coefficient flips every week, the applied one
    settles (EWMA + dead band) instead of chasing it."""
    effs = [0.75, 0.45] * 6  # raw 2.0 / 0.74
    store = _weekly_store(tmp_path, {"osc": [(e, 3) for e in effs]})
    got = _series(queries.run("quota_backtest", store=store, **PURE), "osc")
    raw, applied = got["raw_coefficient"].to_list(), got["coefficient"].to_list()
    assert sign_changes(raw) == len(effs) - 2  # every week flips
    # defaults: the EWMA (alpha 0.2) swings by 0.2 x 1.26 / 1.8 = 0.14 < the dead band 0.15
    assert sign_changes(applied) == 0
    assert max(applied) - min(applied) < 0.2 * (max(raw) - min(raw))
    undamped = _series(queries.run("quota_backtest", store=store, alpha=1.0, dead_band=0.0, max_step=10.0, **PURE),
                       "osc")["coefficient"].to_list()
    assert undamped == pytest.approx(raw)  # the controls are what damps it


def test_when_everyone_improves_every_coefficient_can_rise(tmp_path):
    """Absolute, not relative: three users all improving get rising coefficients; the legacy rank keeps
    handing the worst of them 0.25 however good everyone becomes."""
    weeks = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
    plan = {u: [(e + d, 3) for e in weeks] for u, d in (("a", 0.0), ("b", 0.02), ("c", 0.04))}
    store = _weekly_store(tmp_path, plan)
    got = queries.run("quota_backtest", store=store, **PURE)
    for user in plan:
        applied = _series(got, user)["coefficient"].to_list()
        assert all(b >= a for a, b in zip(applied, applied[1:])), (user, applied)
        assert applied[-1] > 1.5 > applied[0]
    last = got.filter(pl.col("period_k") == got["period_k"].max())
    assert sorted(last["legacy_coefficient"].to_list()) == pytest.approx([0.25, 0.25 * 12 ** 0.5, 3.0])


def test_hysteresis_ignores_small_moves(tmp_path):
    # efficiencies whose factors stay within +-0.05 of 1.0: the applied coefficient never leaves 1.0
    effs = [0.55, 0.56, 0.54, 0.555, 0.545, 0.55]
    store = _weekly_store(tmp_path, {"hy": [(e, 3) for e in effs]})
    got = _series(queries.run("quota_backtest", store=store, dead_band=0.1, **PURE), "hy")
    assert all(abs(r - 1.0) < 0.1 for r in got["raw_coefficient"])
    assert got["coefficient"].to_list() == [1.0] * len(effs)
    no_band = _series(queries.run("quota_backtest", store=store, dead_band=0.0, **PURE), "hy")
    assert sign_changes(no_band["coefficient"].to_list()) >= 1  # without the band it twitches


def test_min_sample_size_holds(tmp_path):
    store = _weekly_store(tmp_path, {"few": [(0.9, 1), (0.9, 1), (0.9, 5)]})
    got = _series(queries.run("quota_backtest", store=store, min_jobs=2, **PURE), "few")
    assert got["held"].to_list() == [True, True, False]
    assert got["coefficient"].to_list()[:2] == [1.0, 1.0]
    assert got["coefficient"][2] == pytest.approx(1.25)  # 1 + max_step towards 0.2 x 3 + 0.8 x 1 = 1.4
    by_hours = _series(queries.run("quota_backtest", store=store, min_jobs=1, min_gpu_equiv_hours=30.0, **PURE), "few")
    # one job = 10 h x (1 GPU + 8/16 + 32/128) = 17.5 GPU-equivalent hours < 30
    assert by_hours["held"].to_list() == [True, True, False]


@pytest.mark.parametrize("n", [2, 4, 8])
def test_gaming_check_predicts_the_real_split(tmp_path, n):
    """gaming_check simulates the split on the unsplit history; it must equal actually splitting the job."""
    check = _by_user(queries.run("gaming_check", store=_gaming_store(tmp_path / "one", 1), split_n=n))
    real = _by_user(queries.run("user_ranking", store=_gaming_store(tmp_path / "split", n)))
    mia = check["mia"]
    assert (mia["split_job_id"], mia["job_count_after"]) == ("m1", n)
    assert mia["legacy_score_after"] == pytest.approx(real["mia"]["legacy_score"], rel=1e-9)
    assert mia["legacy_rank_after"] == real["mia"]["legacy_rank"]
    assert mia["legacy_coefficient_after"] == pytest.approx(real["mia"]["legacy_coefficient"], rel=1e-9)
    assert mia["rec_coefficient_after"] == pytest.approx(real["mia"]["rec_coefficient"], rel=1e-9)
    assert mia["legacy_improves"] is True
    assert not any(r["recommended_improves"] for r in check.values())
    assert all(r["legacy_improves"] for r in check.values())  # everybody could game the legacy score


def test_backtest_keeps_a_sample_outside_its_job_in_the_jobs_period(tmp_path):
    """A job's only sample starts after the job ended, in the next day: the job still counts as sampled (its
    samples win over its totals, as in job_waste) in the day it ran, and the back-test agrees with the ranking."""
    late = _job("late", "lea", T0 + 22 * H, 1, cpus=4.0, gpus=0.0, mem_gb=8.0, cpu_seconds_used=1800.0,
                max_rss_bytes=4 * GB, max_cpu_util=0.5)
    sample = dict(cluster="c", job_id="late", ts=T0 + 24 * H + dt.timedelta(minutes=30), interval_s=3600.0,
                  cpu_used=4.0, gpu_util=None, mem_bytes=8 * GB)
    store = _write(tmp_path, [late], [sample])
    waste = queries.run("job_waste", store=store).row(0, named=True)
    # samples win (the job has one); it does not overlap the run, so nothing was used
    assert (waste["usage_source"], waste["cpu_seconds_used"], waste["mem_seconds_used"]) == ("samples", 0.0, 0.0)
    back = queries.run("quota_backtest", store=store, period_s=86400.0, min_jobs=1, min_gpu_equiv_hours=0.0)
    assert back["period_start"].to_list() == [T0]
    assert back["rec_efficiency"].to_list() == [0.0]  # not the totals' 0.5
    day = _by_user(queries.run("user_ranking", store=store, start=T0, end=T0 + dt.timedelta(days=1)))["lea"]
    assert day["rec_efficiency"] == 0.0


def test_backtest_coefficients_stay_in_their_range(tmp_path):
    """The bounded range: a user at efficiency 1 climbs by max_step to exactly coef_max and stays; one at 0
    falls to exactly coef_min and stays (alpha 1: no smoothing, so the target is the raw bound itself)."""
    store = _weekly_store(tmp_path, {"top": [(1.0, 3)] * 12, "low": [(0.0, 3)] * 6})
    got = queries.run("quota_backtest", store=store, alpha=1.0, dead_band=0.0, max_step=0.25, **PURE)
    top, low = _series(got, "top")["coefficient"].to_list(), _series(got, "low")["coefficient"].to_list()
    assert top == pytest.approx([1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.0, 3.0, 3.0, 3.0])
    assert low[:6] == pytest.approx([0.75, 0.5, 0.25, 0.25, 0.25, 0.25])
    narrow = queries.run("quota_backtest", store=store, alpha=1.0, dead_band=0.0, max_step=10.0, coef_min=0.5,
                         coef_max=2.0, **PURE)
    assert _series(narrow, "top")["coefficient"].to_list() == pytest.approx([2.0] * 12)
    assert _series(narrow, "low")["coefficient"].to_list()[:6] == pytest.approx([0.5] * 6)
    assert narrow["coefficient"].max() <= 2.0 and narrow["coefficient"].min() >= 0.5
