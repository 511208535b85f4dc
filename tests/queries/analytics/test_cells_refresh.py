"""The cell-scoped refresh of usage_cube and usage_hours (queries/analytics/cells.py ``refresh``): an ingest
re-derives only the cells keyed by the (cluster, partition, user, account) its jobs had before and have after,
keeps the partition's other cells as they were, and the tables stay what a rebuild gives: a day touching a user
who already has cells in the month, a re-ingest that moves a job to another user and account, late samples of
an old job, a RUNNING job that ends, and a job of a user and account nobody had (a null user too); a RUNNING job across
snapshot moves (which rewrite no cell of its), then ending, then a late sample."""
from __future__ import annotations

import datetime as dt
import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from queries.analytics import cells, cube, rollup, run, usage_hours
from queries.ingest import ingest
from queries.store import Store

from test_queries_random import random_store
from test_rollup import _write

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)
KEYS = {cube.TABLE: ["cluster", "submit", "running", "user", "account", "day_lo_s", "day_hi_s"],
        usage_hours.TABLE: ["cluster", "submit", "running", "open_run", "user", "account", "grain_s", "t_s"]}


def _cells(store, table: str) -> pl.DataFrame:
    return Store(store).read(table).sort(KEYS[table], nulls_last=True)


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    # DuckDB does not fix the order of a parallel sum: the last bits of a sum may differ
    assert_frame_equal(a, b, check_exact=False, rel_tol=1e-9, abs_tol=1e-5)


def _equals_rebuild(store, tmp_path) -> None:
    copy = tmp_path / "rebuilt"
    shutil.copytree(store, copy)
    rollup.rebuild(copy)
    for table in KEYS:
        _same(_cells(store, table), _cells(copy, table))
    shutil.rmtree(copy)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = random_store(tmp_path_factory.mktemp("cells_refresh"), seed=5)
    rollup.rebuild(root)
    return root


@pytest.fixture(params=["one file", "small files"])
def store(base, tmp_path, request, monkeypatch):
    """The random store; "small files": its cells rebuilt in files of a few cells each (``cells.FILES_PER_PART``,
    ``MIN_FILE_ROWS``), as the test's ingests write them, so that a refresh rewrites some files of a partition
    and keeps the others."""
    out = tmp_path / "store"
    shutil.copytree(base, out)
    if request.param == "small files":
        monkeypatch.setattr(cells, "FILES_PER_PART", 64)
        monkeypatch.setattr(cells, "MIN_FILE_ROWS", 8)
        rollup.rebuild(out)
    return out


def _job(job_id: str, user: str | None, account: str | None, submit_s: float, run_s: float = 5400.0,
         state: str = "COMPLETED") -> dict:
    return {"cluster": "east", "job_id": job_id, "user": user, "account": account, "state": state,
            "submit": T0 + dt.timedelta(seconds=submit_s), "start": T0 + dt.timedelta(seconds=submit_s + 60),
            "end": None if state == "RUNNING" else T0 + dt.timedelta(seconds=submit_s + 60 + run_s),
            "req_cpus": 4.0, "req_gpus": 1.0, "req_mem_bytes": 16e9}


def _jobs_file(rows: list[dict], path) -> str:
    return _write(pl.DataFrame(rows, schema_overrides={"user": pl.String, "account": pl.String}), path)


def _other_cells(store, table: str, keep: pl.DataFrame) -> pl.DataFrame:
    """The cells of east's March partition whose (user, account) is not in ``keep``."""
    march = pl.col("submit") == dt.datetime(2026, 3, 1, tzinfo=UTC)
    cells = _cells(store, table).filter((pl.col("cluster") == "east") & march & ~pl.col("running"))
    return cells.join(keep, on=["user", "account"], how="anti", nulls_equal=True)


def test_a_day_touching_a_user_with_cells_in_the_month(store, tmp_path):
    """New jobs of a (user, account) that already has cells in March: its cells are re-derived from all its
    March jobs (old and new), every other cell of the partition is kept as it was (same values), and both
    tables equal a rebuild."""
    jobs = Store(store).read("jobs").filter((pl.col("cluster") == "east") & (pl.col("state") == "COMPLETED"))
    user, account = jobs.select("user", "account").row(0)
    touched = pl.DataFrame({"user": [user], "account": [account]})
    before = {t: _other_cells(store, t, touched) for t in KEYS}
    had = _cells(store, cube.TABLE).filter((pl.col("cluster") == "east") & (pl.col("user") == user)
                                           & (pl.col("account") == account))["jobs"].sum()
    assert had > 0
    # inside the store's span: the snapshot does not move (RUNNING cells untouched)
    ingest([_jobs_file([_job("day-1", user, account, 86400.0), _job("day-2", user, account, 90000.0)],
                       tmp_path / "day.parquet")], store, fmt="parquet")
    for t in KEYS:
        assert before[t].height
        _same(_other_cells(store, t, touched), before[t])
    now = _cells(store, cube.TABLE).filter((pl.col("cluster") == "east") & (pl.col("user") == user)
                                           & (pl.col("account") == account))["jobs"].sum()
    assert now == had + 2
    _equals_rebuild(store, tmp_path)
    for params in ({}, {"start": "2026-03-03", "end": "2026-03-06"}):
        _same(run("user_ranking", store, **params), run("user_ranking", store, use_cube=False, **params))


def test_a_refresh_rewrites_the_files_of_its_users_only(base, tmp_path, monkeypatch):
    """With a partition's cells in many files: a day of one (user, account) replaces the files that hold a cell
    of that user (and the small ones, merged), every other file of the partition stays as it was (same file),
    the partition keeps about as many files, and the tables equal a rebuild."""
    monkeypatch.setattr(cells, "FILES_PER_PART", 16)
    monkeypatch.setattr(cells, "MIN_FILE_ROWS", 8)
    store = tmp_path / "store"
    shutil.copytree(base, store)
    rollup.rebuild(store)
    jobs = Store(store).read("jobs").filter((pl.col("cluster") == "east") & (pl.col("state") == "COMPLETED")
                                            & (pl.col("submit").dt.month() == 3))
    user, account = jobs.select("user", "account").row(0)
    before = {t: _part_files(store, t, "2026-03") for t in KEYS}
    holding = {t: {r for r in before[t] if user in pl.read_parquet(store / r)["user"].to_list()} for t in KEYS}
    sizes = {t: {r: pl.read_parquet(store / r).height for r in before[t]} for t in KEYS}
    small = {t: {r for r, n in sizes[t].items() if n < cells.target_rows(sum(sizes[t].values())) // 4} for t in KEYS}
    for t in KEYS:
        assert len(before[t]) >= 8 and 0 < len(holding[t]) < len(before[t]) // 2, (t, len(before[t]))
    ingest([_jobs_file([_job("day-1", user, account, 86400.0)], tmp_path / "day.parquet")], store, fmt="parquet")
    for t in KEYS:
        after = _part_files(store, t, "2026-03")
        assert after & before[t] == before[t] - holding[t] - small[t], t  # the others stay, the same files
        assert len(after) <= len(before[t]) + 2, t
        assert user in pl.concat([pl.read_parquet(store / r) for r in after - before[t]])["user"].to_list()
    _equals_rebuild(store, tmp_path)


def test_a_re_ingest_that_moves_a_job_to_another_user_and_account(store, tmp_path):
    """The job's old cells (its old user and account, read from the jobs files the transaction started from)
    lose it, its new ones gain it."""
    jobs = Store(store).read("jobs").filter((pl.col("cluster") == "east") & (pl.col("state") == "COMPLETED")
                                            & pl.col("start").is_not_null())
    row = jobs.row(0, named=True)
    old_cells = _cells(store, cube.TABLE).filter((pl.col("user") == row["user"]) & (pl.col("cluster") == "east")
                                                 & (pl.col("account") == row["account"]))["jobs"].sum()
    moved = jobs.head(1).with_columns(pl.lit("newcomer").alias("user"), pl.lit("org/new").alias("account"))
    ingest([_write(moved, tmp_path / "moved.parquet")], store, fmt="parquet")
    cells = _cells(store, cube.TABLE)
    assert cells.filter((pl.col("user") == row["user"]) & (pl.col("account") == row["account"])
                        & (pl.col("cluster") == "east"))["jobs"].sum() == old_cells - 1
    assert cells.filter(pl.col("user") == "newcomer")["jobs"].sum() == 1
    assert _cells(store, usage_hours.TABLE).filter(pl.col("user") == "newcomer").height
    _equals_rebuild(store, tmp_path)


def test_late_samples_of_an_old_job(store, tmp_path):
    jobs = Store(store).read("jobs").filter((pl.col("cluster") == "east") & (pl.col("state") == "COMPLETED")
                                            & (pl.col("end") - pl.col("start") > dt.timedelta(hours=2)))
    job = jobs.row(0, named=True)
    late = pl.DataFrame({"cluster": ["east"] * 3, "job_id": [job["job_id"]] * 3,
                         "ts": [job["start"] + dt.timedelta(minutes=m) for m in (10, 40, 70)],
                         "interval_s": [1800.0] * 3, "cpu_used": [1.0, 2.0, 3.0], "gpu_util": [0.2, 0.9, 0.1],
                         "mem_used_bytes": [2e9, 3e9, 4e9]})
    before = _cells(store, usage_hours.TABLE)
    ingest([_write(late, tmp_path / "late-samples.parquet")], store, fmt="parquet")
    assert not _cells(store, usage_hours.TABLE).equals(before)  # the samples changed its hours
    _equals_rebuild(store, tmp_path)


def test_a_running_job_that_ends_and_a_new_user_with_none(store, tmp_path):
    """A RUNNING job re-ingested COMPLETED (it enters the cube, and its requested usage the hours) and jobs of a
    user and account nobody had, one with no user and no account at all, ingested together."""
    running = Store(store).read("jobs").filter((pl.col("cluster") == "east") & (pl.col("state") == "RUNNING")
                                               & pl.col("end").is_null() & pl.col("start").is_not_null())
    assert running.height
    ended = running.head(1).with_columns(pl.lit("COMPLETED").alias("state"),
                                         (pl.col("start") + dt.timedelta(hours=3)).alias("end"))
    ingest([_write(ended, tmp_path / "ended.parquet"),
            _jobs_file([_job("anon-1", None, None, 2 * 86400.0), _job("fresh-1", "stranger", "lab/new", 3 * 86400.0)],
                       tmp_path / "fresh.parquet")], store, fmt="parquet")
    assert _cells(store, cube.TABLE).filter(pl.col("user").is_null() & (pl.col("account") == "(none)")).height
    _equals_rebuild(store, tmp_path)


def _part_files(store, table: str, month: str) -> set[str]:
    return {r for r in Store(store).manifest()["tables"].get(table, []) if f"/cluster=east/month={month}/" in r}


def _queries_equal_per_job(store) -> None:
    for name, params in (("user_ranking", {}), ("user_ranking", {"start": "2026-03-03"}),
                         ("gap_area", {"bucket_s": 3600.0, "group_by": "user", "resource": "cpu"}),
                         ("gap_area", {"bucket_s": 86400.0, "group_by": "account", "resource": "gpu"})):
        _same(run(name, store, **params), run(name, store, use_cube=False, **params))


def test_a_running_job_across_snapshot_moves_then_ending_then_a_late_sample(store, tmp_path):
    """A RUNNING job with samples, one reaching past the snapshot of its ingest; three ingests that move the
    snapshot (the first re-derives it: its sample reached past its run end; the others change none of its
    month's cells: no cell depends on the snapshot); then it ends; then a late sample of it. After every step the
    queries equal the per-job derivation, and the cells a rebuild."""
    snap = Store(store).snapshots()["east"]
    start = snap + dt.timedelta(hours=1)
    month = start.strftime("%Y-%m")
    live = {"cluster": "east", "job_id": "live-1", "user": "u-live", "account": "org/live", "state": "RUNNING",
            "submit": start, "start": start, "end": None, "req_cpus": 4.0, "req_gpus": 1.0, "req_mem_bytes": 16e9}
    samples = pl.DataFrame({"cluster": ["east"] * 2, "job_id": ["live-1"] * 2,
                            "ts": [start, start + dt.timedelta(hours=1)], "interval_s": [3600.0, 3 * 3600.0],
                            "cpu_used": [2.0, 3.0], "gpu_util": [0.5, 0.8], "mem_bytes": [4e9, 8e9]})
    ingest([_jobs_file([live], tmp_path / "live.parquet"), _write(samples, tmp_path / "live-samples.parquet")],
           store, fmt="parquet")
    assert Store(store).snapshots()["east"] == start + dt.timedelta(hours=1)  # the last sample's time
    hours = _cells(store, usage_hours.TABLE).filter(pl.col("user") == "u-live")
    assert hours.height and hours["cpu_req_s"].is_null().all()  # sampled usage only
    assert _cells(store, cube.TABLE).filter(pl.col("user") == "u-live").is_empty()
    _queries_equal_per_job(store)

    def mover(k: int, at: dt.datetime) -> str:
        # a job of another user, ending at ``at``: the snapshot moves there
        row = {**_job(f"mover-{k}", "u-mover", "org/mover", 0.0), "submit": at - dt.timedelta(hours=1),
               "start": at - dt.timedelta(hours=1), "end": at}
        return _jobs_file([row], tmp_path / f"mover-{k}.parquet")

    # 1: past the sample's end (start + 4 h): the job is re-derived once, its cells now hold the whole sample
    ingest([mover(1, start + dt.timedelta(hours=6))], store, fmt="parquet")
    _equals_rebuild(store, tmp_path)
    _queries_equal_per_job(store)
    # 2, 3: its samples end inside its run: nothing of its month is rewritten (the movers are a month later)
    kept = {t: _part_files(store, t, month) for t in KEYS}
    assert all(kept.values())
    for k, days in ((2, 40), (3, 41)):
        ingest([mover(k, start + dt.timedelta(days=days))], store, fmt="parquet")
        assert {t: _part_files(store, t, month) for t in KEYS} == kept
        _queries_equal_per_job(store)
    _equals_rebuild(store, tmp_path)
    # it ends: its requested usage enters the cells of its month
    ended = {**live, "state": "COMPLETED", "end": start + dt.timedelta(hours=5)}
    ingest([_jobs_file([ended], tmp_path / "ended.parquet")], store, fmt="parquet")
    assert _cells(store, cube.TABLE).filter(pl.col("user") == "u-live")["jobs"].sum() == 1
    assert _cells(store, usage_hours.TABLE).filter(pl.col("user") == "u-live")["cpu_req_s"].sum() == pytest.approx(
        2 * 4 * 5 * 3600.0)  # hours and days: 5 h of 4 CPUs each
    _equals_rebuild(store, tmp_path)
    _queries_equal_per_job(store)
    # a late sample of it
    late = pl.DataFrame({"cluster": ["east"], "job_id": ["live-1"], "ts": [start + dt.timedelta(hours=4, minutes=30)],
                         "interval_s": [1800.0], "cpu_used": [1.0], "gpu_util": [0.1], "mem_bytes": [1e9]})
    before = _cells(store, usage_hours.TABLE).filter(pl.col("user") == "u-live")
    ingest([_write(late, tmp_path / "late.parquet")], store, fmt="parquet")
    assert not _cells(store, usage_hours.TABLE).filter(pl.col("user") == "u-live").equals(before)
    _equals_rebuild(store, tmp_path)
    _queries_equal_per_job(store)


def test_new_samples_of_a_running_job_rewrite_its_open_hours_only(store, tmp_path, monkeypatch):
    """Samples of a RUNNING job without an end (the daily lot of a long job) re-derive its user's open-run hour
    cells (``open_run``, files of their own): the files of the user's other cells of that month stay the same
    files (bar the small ones a refresh merges), and the cube holds no open run, so none of its files is
    rewritten (``cells.Scope.closed``); both tables equal a rebuild. Small cell files (so that none of "one
    file"'s partition files counts as one the refresh merges)."""
    monkeypatch.setattr(cells, "FILES_PER_PART", 64)
    monkeypatch.setattr(cells, "MIN_FILE_ROWS", 8)
    snap = Store(store).snapshots()["east"]
    jobs = Store(store).read("jobs").filter(pl.col("cluster") == "east")
    closed = jobs.filter(pl.col("state") != "RUNNING").select("user", pl.col("submit").dt.strftime("%Y-%m"))
    running = (jobs.filter((pl.col("state") == "RUNNING") & pl.col("end").is_null() & pl.col("start").is_not_null()
                           & (pl.col("start") < snap - dt.timedelta(hours=2)))
               .join(closed, left_on=["user", pl.col("submit").dt.strftime("%Y-%m")], right_on=["user", "submit"],
                     how="semi"))
    assert running.height  # a long job of a user who also ran others that month
    job = running.row(0, named=True)
    month = job["submit"].strftime("%Y-%m")
    before = {t: _part_files(store, t, month) for t in KEYS}
    sizes = {r: pl.read_parquet(store / r).height for r in before[usage_hours.TABLE]}
    small = cells.target_rows(sum(sizes.values())) // 4
    others = {r for r in before[usage_hours.TABLE] if sizes[r] >= small
              and pl.read_parquet(store / r).filter((pl.col("user") == job["user"]) & ~pl.col("open_run")).height}
    assert others and before[cube.TABLE]
    hours = _cells(store, usage_hours.TABLE)
    fresh = pl.DataFrame({"cluster": ["east"] * 2, "job_id": [job["job_id"]] * 2,
                          "ts": [snap - dt.timedelta(hours=2), snap - dt.timedelta(hours=1)],
                          "interval_s": [1800.0] * 2, "cpu_used": [3.0, 1.0], "gpu_util": [0.7, 0.3],
                          "mem_bytes": [5e9, 6e9]})
    ingest([_write(fresh, tmp_path / "fresh-samples.parquet")], store, fmt="parquet")
    assert _part_files(store, cube.TABLE, month) == before[cube.TABLE]
    after = _part_files(store, usage_hours.TABLE, month)
    assert others <= after  # the user's closed cells: the same files
    new = pl.concat([pl.read_parquet(store / r) for r in after - before[usage_hours.TABLE]])
    assert new.filter(pl.col("user") == job["user"])["open_run"].all()
    assert not _cells(store, usage_hours.TABLE).equals(hours)
    _equals_rebuild(store, tmp_path)
    _queries_equal_per_job(store)
