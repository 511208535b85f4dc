"""A job still RUNNING in the log runs until the last instant the log knows (the store's snapshot, recorded at
ingest), never into the future: a window that ends after the export counts no run time that did not happen.

On the sample the export is 2026-11-29 00:00 and the last back-test week is 2026-11-23..2026-11-30; before the
snapshot was used, running job 1239342 (32 GPUs) counted 128,372 s instead of the 41,972 s it ran, and that
week's ranking differed from the back-test's own week for 44 of 150 users.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

import queries
from queries.analytics import budgets
from queries.ingest import ingest
from queries.store import Store

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "sample_data" / "store"
UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)  # a Monday


@pytest.fixture(scope="module")
def sample_store() -> Path:
    if not (SAMPLE / "_manifest.json").exists():
        pytest.skip(f"sample store not built: {SAMPLE} (run `quotaloop sample --store sample_data/store`)")
    return SAMPLE


def test_backtest_terms_equal_user_ranking_for_every_sample_week(sample_store):
    """The README's claim, for every weekly period of the sample, the last one (past the export) included."""
    back = queries.run("quota_backtest", store=sample_store, origin="2026-09-28", min_jobs=1)
    weeks = sorted(back["period_start"].unique().to_list())
    assert len(weeks) >= 6 and weeks[-1] == dt.datetime(2026, 11, 23, tzinfo=UTC)
    checked = last = 0
    for start in weeks:
        part = back.filter((pl.col("period_start") == start) & (pl.col("job_count") > 0))
        ranking = {r["user"]: r for r in queries.run("user_ranking", store=sample_store, start=start,
                                                     end=start + dt.timedelta(days=7)).iter_rows(named=True)}
        for row in part.iter_rows(named=True):
            r = ranking[row["user"]]
            assert row["job_count"] == r["job_count"], (start, row["user"])
            for col in ("rec_efficiency", "rec_confidence", "rec_demand"):
                assert row[col] == pytest.approx(r[col], rel=1e-9, abs=1e-12), (start, row["user"], col)
            assert row["raw_coefficient"] == pytest.approx(r["rec_coefficient"], rel=1e-9), (start, row["user"])
            checked += 1
        last = part.height
    assert last > 140 and checked > 700


def test_a_running_sample_job_runs_until_the_export_not_the_window_end(sample_store):
    got = queries.run("job_waste", store=sample_store, start="2026-11-23", end="2026-11-30")
    job = got.filter(pl.col("job_id") == "1239342").row(0, named=True)
    assert job["state"] == "RUNNING"
    # logged start 2026-11-28 12:20:28, export 2026-11-29 00:00:00: 11 h 39 min 32 s
    assert job["in_window_s"] == job["run_s"] == 41_972.0
    achen = queries.run("user_ranking", store=sample_store, start="2026-11-23", end="2026-11-30",
                        user="achen").row(0, named=True)
    assert achen["rec_efficiency"] == pytest.approx(0.603, abs=5e-4)


def _csv_store(tmp_path: Path, elapsed: str) -> Path:
    """One cluster, two jobs: a finished one whose end (Mar 3 10:00) is the last logged instant, and a RUNNING
    4-GPU job started Mar 3 06:00 with no end (and, when ``elapsed`` is empty, no elapsed either: a trace like
    openb/Alibaba's, where only the recorded snapshot says how long it ran)."""
    csv = tmp_path / "jobs.csv"
    csv.write_text(
        "job_id,user,account,state,submit,start,end,elapsed_s,req_gpus,alloc_gpus,req_cpus,mean_gpu_util\n"
        "1,ann,lab,COMPLETED,2026-03-03T00:00:00Z,2026-03-03T01:00:00Z,2026-03-03T10:00:00Z,32400,1,1,4,0.5\n"
        f"2,bob,lab,RUNNING,2026-03-03T05:00:00Z,2026-03-03T06:00:00Z,,{elapsed},4,4,8,0.5\n")
    store = tmp_path / "store"
    ingest([csv], store, cluster="c1")
    return store


def test_ingest_records_the_last_logged_instant_per_cluster(tmp_path):
    store = _csv_store(tmp_path, "")
    assert Store(store).snapshots() == {"c1": dt.datetime(2026, 3, 3, 10, tzinfo=UTC)}
    # a later file for the cluster moves it on, an earlier one does not move it back
    later = tmp_path / "later.csv"
    later.write_text("job_id,user,account,state,submit,start,end,req_gpus\n"
                     "3,ann,lab,COMPLETED,2026-03-04T00:00:00Z,2026-03-04T01:00:00Z,2026-03-04T02:30:00Z,1\n")
    ingest([later], store, cluster="c1")
    assert Store(store).snapshots()["c1"] == dt.datetime(2026, 3, 4, 2, 30, tzinfo=UTC)
    ingest([tmp_path / "jobs.csv"], store, cluster="c1")
    assert Store(store).snapshots()["c1"] == dt.datetime(2026, 3, 4, 2, 30, tzinfo=UTC)


@pytest.mark.parametrize("elapsed", ["", "14400"])
def test_a_running_job_stops_at_the_snapshot_in_every_window(tmp_path, elapsed):
    """By hand: bob's job runs 06:00 -> 10:00 (the snapshot) = 4 h x 4 GPUs = 16 GPU-hours, whether the window
    ends at the snapshot, a day later or is open; a window ending before the snapshot clips it there."""
    store = _csv_store(tmp_path, elapsed)
    day = dt.datetime(2026, 3, 3, tzinfo=UTC)
    for end in (day + dt.timedelta(hours=10), day + dt.timedelta(days=1), day + dt.timedelta(days=30), None):
        got = queries.run("job_waste", store=store, start=day, end=end, user="bob").row(0, named=True)
        assert got["in_window_s"] == 4 * 3600.0, end
        assert got["gpu_seconds_requested"] == 16 * 3600.0, end
        ranking = queries.run("user_ranking", store=store, start=day, end=end, user="bob").row(0, named=True)
        assert ranking["gpu_hours_requested"] == pytest.approx(16.0), end
    early = queries.run("job_waste", store=store, start=day, end=day + dt.timedelta(hours=8), user="bob")
    assert early["in_window_s"].item() == 2 * 3600.0
    # budget attainment's received GPU-hours: the same 16 (plus ann's 9), not 4 GPUs until the window end
    usage = queries.run("budget_usage", store=store, start=day, end=day + dt.timedelta(days=1))
    assert usage["received_gpu_s"].sum() == pytest.approx((16 + 9) * 3600.0)


def test_without_a_recorded_snapshot_start_plus_elapsed_bounds_a_running_job(tmp_path):
    """A store ingested before the snapshot was recorded (or a flat simulated store): sacct's elapsed of a
    running job is its run time until the export, so it still stops there."""
    store = _csv_store(tmp_path, "14400")
    jobs = Store(store).read("jobs")
    flat = tmp_path / "flat"
    flat.mkdir()
    jobs.write_parquet(flat / "jobs.parquet")
    assert Store(flat).snapshots() == {}
    day = dt.datetime(2026, 3, 3, tzinfo=UTC)
    got = queries.run("job_waste", store=flat, start=day, end=day + dt.timedelta(days=2), user="bob")
    assert got["in_window_s"].item() == 4 * 3600.0
    # the frame path of attainment (a simulation's jobs) agrees: 16 + 9 GPU-hours received
    from engine.budgets import parse

    tree = parse("[tree.lab]\nshare = 1\n")
    att = budgets.attainment_of(jobs, tree, day, day + dt.timedelta(days=2), capacity_gpus=8)
    assert att.table.filter(pl.col("kind") == "node")["received_gpu_hours"].sum() == pytest.approx(25.0)
