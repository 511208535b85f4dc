"""Cross-checks on the bundled sample store (sample_data/store, ~42 k jobs, ~0.6 M samples).

Skipped with a reason when the store has not been built (``quotaloop sample --store sample_data/store``).
The reference computation is the Polars re-implementation of test_queries_random.
"""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import queries

from test_queries_random import assert_job_waste_equals_reference, reference_job_waste
from test_queries_scores import sign_changes

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "sample_data" / "store"
# next to the store the symlink points at (a worktree links sample_data/store to the main checkout's)
TRUTH = SAMPLE.resolve().parent / "store-export" / "ground_truth.json"


@pytest.fixture(scope="module")
def sample_store() -> Path:
    if not (SAMPLE / "_manifest.json").exists():
        pytest.skip(f"sample store not built: {SAMPLE} (run `quotaloop sample --store sample_data/store`)")
    return SAMPLE


@pytest.fixture(scope="module")
def waste(sample_store):
    return queries.run("job_waste", store=sample_store)


def test_job_waste_matches_polars_on_the_sample_store(sample_store, waste):
    ref = reference_job_waste(sample_store)
    assert waste.height == ref.height > 10_000
    assert_job_waste_equals_reference(waste, ref)


def test_gap_area_totals_on_the_sample_store(sample_store, waste):
    for resource in ("gpu", "cpu", "mem"):
        got = queries.run("gap_area", store=sample_store, resource=resource, bucket_s=3600.0)
        assert got["requested_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_requested"].sum(), rel=1e-9)
        assert got["used_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_used"].sum(), rel=1e-9)
        assert got["wasted_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_wasted"].sum(), rel=1e-9)
        unknown = waste.filter(pl.col(f"{resource}_seconds_used").is_null())[f"{resource}_seconds_requested"].sum()
        assert got["unknown_usage_seconds"].sum() == pytest.approx(unknown, rel=1e-9, abs=1e-6)


def test_rankings_add_up_on_the_sample_store(sample_store, waste):
    users = queries.run("user_ranking", store=sample_store)
    teams = queries.run("team_ranking", store=sample_store, team_level=3)
    assert users["job_count"].sum() == teams["job_count"].sum() == waste.height
    for col, src in (("gpu_hours_wasted", "gpu_seconds_wasted"), ("cpu_hours_wasted", "cpu_seconds_wasted")):
        assert users[col].sum() == pytest.approx(waste[src].sum() / 3600, rel=1e-9)
        assert teams[col].sum() == pytest.approx(waste[src].sum() / 3600, rel=1e-9)


def test_recommended_score_finds_the_planted_habits(sample_store):
    """The generator plants per-user habits; absolute efficiency must order them (and the legacy rank, too)."""
    if not TRUTH.exists():
        pytest.skip(f"no ground truth next to the sample store: {TRUTH}")
    habits = pl.DataFrame(json.loads(TRUTH.read_text())["users"]).select("user", "habit")
    got = queries.run("user_ranking", store=sample_store).join(habits, on="user")
    means = {r["habit"]: r for r in got.group_by("habit").agg(pl.col("rec_efficiency", "rec_coefficient").mean())
             .iter_rows(named=True)}
    order = ["hoarder", "over-requester", "typical", "right-sizer"]
    assert [means[h]["rec_efficiency"] for h in order] == sorted(means[h]["rec_efficiency"] for h in order)
    assert [means[h]["rec_coefficient"] for h in order] == sorted(means[h]["rec_coefficient"] for h in order)


def test_quota_loop_is_stable_on_the_sample_store(sample_store):
    """Count sign changes of the period-over-period delta, per user, raw vs applied."""
    for period_s, max_applied in ((604800.0, 0), (86400.0, 4)):
        got = queries.run("quota_backtest", store=sample_store, period_s=period_s)
        raw_changes, applied_changes = 0, []
        for _, part in got.group_by("user"):
            part = part.sort("period_k")
            raw_changes += sign_changes([x for x in part["raw_coefficient"].to_list() if x is not None])
            applied_changes.append(sign_changes(part["coefficient"].to_list()))
        assert max(applied_changes) <= max_applied, period_s
        assert sum(applied_changes) * 10 < raw_changes, (period_s, sum(applied_changes), raw_changes)


def test_queue_waits_and_fair_share_match_polars_on_the_sample_store(sample_store):
    import numpy as np
    from queries.store import Store

    jobs = Store(sample_store).read("jobs")
    started = jobs.filter(pl.col("start").is_not_null()).with_columns(
        wait=((pl.col("start") - pl.col("submit")).dt.total_microseconds() / 1e6).clip(lower_bound=0))
    waits = queries.run("queue_waits", store=sample_store)
    total = waits.filter((pl.col("job_class") == "(all)") & (pl.col("team") == "(all)")).row(0, named=True)
    w = started["wait"].to_numpy()
    assert total["jobs_started"] == len(w) > 10_000
    for q, col in ((0.5, "wait_median_s"), (0.9, "wait_p90_s"), (0.99, "wait_p99_s")):
        assert total[col] == pytest.approx(np.quantile(w, q), rel=1e-9, abs=1e-9)
    # received GPU-hours per top-level account = allocated GPUs x run time, whole history
    fair = queries.run("fairshare_attainment", store=sample_store)
    run_s = pl.coalesce(pl.col("end"), pl.col("start") + pl.duration(seconds=pl.col("elapsed_s"))) - pl.col("start")
    per = started.with_columns(team=pl.col("account").str.split("/").list.first(),
                               gpu_s=pl.coalesce("alloc_gpus", "req_gpus", pl.lit(0.0))
                               * run_s.dt.total_microseconds() / 1e6).group_by("team").agg(pl.col("gpu_s").sum() / 3600)
    got = dict(zip(fair["team"], fair["received_gpu_hours"]))
    for team, hours in per.iter_rows():
        assert got[team] == pytest.approx(hours, rel=1e-9, abs=1e-9), team
