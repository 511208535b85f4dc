"""The per-job usage rollup (``job_rollup``, ``queries.analytics.rollup``): kept by ingest in the same commit,
incremental = rebuild on random ingest orders (re-ingests, late samples, RUNNING jobs whose snapshot moves), a
hand-computed case, all-or-nothing on failure, and the named queries answering the same from the rollup as from
the raw samples."""
from __future__ import annotations

import datetime as dt
import json
import shutil

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from queries.analytics import load, rollup, run
from queries.ingest import ingest
from queries.store import Store, connect, keyindex, schema

from test_queries_random import random_store

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)
KEYS = ["cluster", "job_id"]


def _rows(store) -> pl.DataFrame:
    return Store(store).read("job_rollup").sort(KEYS)


def _days(store) -> pl.DataFrame:
    return Store(store).read("job_day_rollup").sort([*KEYS, "day_s"])


def _assert_same_rows(a: pl.DataFrame, b: pl.DataFrame) -> None:
    # DuckDB does not fix the order of a parallel sum: the last bits of an integral may differ
    assert_frame_equal(a, b, check_exact=False, rel_tol=1e-9, abs_tol=1e-6)


def _rebuilt(store, tmp_path, days: bool = False) -> pl.DataFrame:
    copy = tmp_path / "rebuilt"
    shutil.copytree(store, copy)
    rollup.rebuild(copy)
    return _days(copy) if days else _rows(copy)


def _raw(name: str, store, **params) -> pl.DataFrame:
    """The query answered from the samples alone: the store with its rollup hidden."""
    con = connect(store, extra={"job_rollup": schema.empty("job_rollup")})
    try:
        return run(name, con=con, **params)
    finally:
        con.close()


# ------------------------------------------------------------------ a hand-computed job
def _write(df: pl.DataFrame, path) -> str:
    df.write_parquet(path)
    return str(path)


def _ts(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def test_hand_computed_rollup_row(tmp_path):
    # one job on [T0, T0+100 s), 2 CPUs, 1 GPU, 4 GB; three samples, the first sticking out before its start and
    # the last past its end, values above the request capped at it
    jobs = pl.DataFrame({"cluster": ["c"], "job_id": ["1"], "state": ["COMPLETED"], "submit": [_ts(-50)],
                         "start": [_ts(0)], "end": [_ts(100)], "elapsed_s": [100.0], "req_cpus": [2.0],
                         "req_gpus": [1.0], "req_mem_bytes": [4e9], "user": ["u"], "account": ["a"]})
    samples = pl.DataFrame({"cluster": ["c"] * 3, "job_id": ["1"] * 3, "ts": [_ts(-10), _ts(20), _ts(80)],
                            "interval_s": [30.0, 60.0, 60.0], "cpu_used": [3.0, 1.0, 1.5],
                            "gpu_util": [0.5, 1.0, 0.25], "mem_bytes": [2e9, 5e9, 1e9]})
    store = tmp_path / "store"
    ingest([_write(jobs, tmp_path / "jobs.parquet"), _write(samples, tmp_path / "samples.parquet")], store,
           fmt="parquet")
    row = _rows(store).row(0, named=True)
    # overlaps with the run: 20 s, 60 s, 20 s
    assert row["t_start"] == T0.timestamp() and row["t_end"] == T0.timestamp() + 100
    assert (row["cpus"], row["gpus"], row["mem_gb"]) == (2.0, 1.0, 4.0)
    assert (row["n_samples"], row["n_cpu"], row["n_gpu"], row["n_mem"]) == (3, 3, 3, 3)
    assert row["cpu_used_s"] == pytest.approx(2 * 20 + 1 * 60 + 1.5 * 20)  # 3 CPUs capped at 2
    assert row["gpu_used_s"] == pytest.approx(0.5 * 20 + 1.0 * 60 + 0.25 * 20)
    assert row["mem_used_gbs"] == pytest.approx(2 * 20 + 4 * 60 + 1 * 20)  # 5 GB capped at 4
    assert row["sampled_s"] == pytest.approx(100)
    assert (row["peak_cpus_sampled"], row["peak_gpu_util_sampled"], row["peak_mem_gb_sampled"]) == (3.0, 1.0, 5.0)
    # and the query reads it: the job's whole run is in the default window
    waste = run("job_waste", store)
    assert waste["cpu_seconds_used"].item() == pytest.approx(130.0)
    assert waste["cpu_seconds_requested"].item() == pytest.approx(200.0)


def test_hand_computed_days_answer_a_window_of_whole_days(tmp_path):
    # a job on [T0 - 1 h, T0 + 1 h) across midnight T0, 2 CPUs: a sample of 1 CPU on [T0 - 30 min, T0 + 30 min)
    # straddles midnight, one of 4 CPUs (capped at 2) on [T0 + 30 min, T0 + 90 min) sticks out past the end
    jobs = pl.DataFrame({"cluster": ["c"], "job_id": ["1"], "state": ["COMPLETED"], "submit": [_ts(-7200)],
                         "start": [_ts(-3600)], "end": [_ts(3600)], "req_cpus": [2.0], "user": ["u"]})
    samples = pl.DataFrame({"cluster": ["c"] * 2, "job_id": ["1"] * 2, "ts": [_ts(-1800), _ts(1800)],
                            "interval_s": [3600.0, 3600.0], "cpu_used": [1.0, 4.0]})
    store = tmp_path / "store"
    ingest([_write(jobs, tmp_path / "jobs.parquet"), _write(samples, tmp_path / "samples.parquet")], store,
           fmt="parquet")
    row = _rows(store).row(0, named=True)
    t0 = T0.timestamp()
    assert row["cpu_used_s"] == pytest.approx(1 * 3600 + 2 * 1800)
    assert [(d["day_s"], d["cpu_used_s"], d["sampled_s"]) for d in _days(store).iter_rows(named=True)] == [
        (t0 - 86400, pytest.approx(1800.0), pytest.approx(1800.0)),
        (t0, pytest.approx(1 * 1800 + 2 * 1800), pytest.approx(3600.0))]
    # a window starting at midnight cuts the job: its days answer, equal to the samples' answer
    for params, expected in (({"start": "2026-03-02"}, 5400.0), ({"end": "2026-03-02"}, 1800.0),
                             ({"start": "2026-03-02 00:15"}, 900 + 3600.0)):
        waste = run("job_waste", store, **params)
        assert waste["cpu_seconds_used"].item() == pytest.approx(expected), params
        assert_frame_equal(waste, _raw("job_waste", store, **params), check_exact=False, rel_tol=1e-9)


# ------------------------------------------------------------------ incremental = rebuild
def _random_frames(seed: int, n_jobs: int = 160):
    """Jobs and samples of two clusters sharing job ids: RUNNING / PENDING / zero-length jobs, jobs without
    samples, samples sticking out of their run, CPU and memory above the request, and nulls (ingest rejects a
    GPU utilisation above 1)."""
    rng = np.random.default_rng(seed)
    jobs, samples = [], []
    for i in range(n_jobs):
        cluster = ("east", "west")[i % 2]
        job_id = str(i // 2)
        submit = rng.uniform(0, 6 * 86400.0)
        state = str(rng.choice(["COMPLETED", "FAILED", "RUNNING", "PENDING"], p=[.65, .15, .12, .08]))
        start = None if state == "PENDING" else submit + rng.exponential(1800)
        run_s = 0.0 if rng.random() < 0.05 else rng.exponential(4 * 3600)
        end = None if state in ("PENDING", "RUNNING") else start + run_s
        cpus = float(rng.choice([1, 2, 8]))
        gpus = float(rng.choice([0, 1, 4]))
        jobs.append(dict(cluster=cluster, job_id=job_id, state=state, user=f"u{i % 5}", account="org/t",
                         submit=_ts(submit), start=None if start is None else _ts(start),
                         end=None if end is None else _ts(end), elapsed_s=run_s if start is not None else 0.0,
                         req_cpus=cpus, req_gpus=gpus, req_mem_bytes=cpus * 4e9,
                         alloc_cpus=cpus / 2 if rng.random() < 0.3 else None))
        if start is not None and rng.random() < 0.7:
            t, stop = start - rng.uniform(0, 300), start + run_s + rng.uniform(0, 600)
            while t < stop:
                step = float(rng.choice([60.0, 600.0, 3600.0]))
                samples.append(dict(cluster=cluster, job_id=job_id, ts=_ts(t), interval_s=step,
                                    cpu_used=None if rng.random() < 0.1 else rng.uniform(0, 1.4) * cpus,
                                    gpu_util=None if not gpus else rng.uniform(0, 1.0),
                                    mem_bytes=rng.uniform(0, 1.3) * cpus * 4e9))
                t += step
    return pl.DataFrame(jobs, infer_schema_length=None), pl.DataFrame(samples, infer_schema_length=None)


def _files(tmp_path, seed: int) -> list[str]:
    """The frames cut into files: jobs by submit time (later files move the snapshot, so earlier RUNNING jobs
    run longer), samples by time (a late file brings samples of jobs ingested long before)."""
    jobs, samples = _random_frames(seed)
    paths = []
    cut_j = [T0 + dt.timedelta(days=d) for d in (2, 4)]
    bounds = [None, *cut_j, None]
    for k in range(3):
        lo, hi = bounds[k], bounds[k + 1]
        part = jobs.filter((pl.col("submit") >= lo) if lo else pl.lit(True)).filter(
            (pl.col("submit") < hi) if hi else pl.lit(True))
        paths.append(_write(part, tmp_path / f"jobs{k}.parquet"))
    cut_s = [T0 + dt.timedelta(days=d) for d in (1, 3, 5)]
    bounds = [None, *cut_s, None]
    for k in range(4):
        lo, hi = bounds[k], bounds[k + 1]
        part = samples.filter((pl.col("ts") >= lo) if lo else pl.lit(True)).filter(
            (pl.col("ts") < hi) if hi else pl.lit(True))
        paths.append(_write(part, tmp_path / f"samples{k}.parquet"))
    # RUNNING jobs that end later: a third of them again, COMPLETED two hours after the last sample time
    ended = (jobs.filter(pl.col("state") == "RUNNING").gather_every(3)
             .with_columns(pl.lit("COMPLETED").alias("state"),
                           pl.lit(T0 + dt.timedelta(days=7, hours=2)).alias("end")))
    paths.append(_write(ended, tmp_path / "ended.parquet"))
    return paths


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_incremental_equals_rebuild_on_random_ingest_orders(tmp_path, seed, monkeypatch):
    """Also for a store whose first files were written without job summaries (an older store: seeds 3 and 4),
    and with RUNNING jobs that end in a later file (before or after their RUNNING rows, as the order falls)."""
    rng = np.random.default_rng(seed)
    paths = _files(tmp_path, seed)
    order = [paths[i] for i in rng.permutation(len(paths))]
    # re-ingest two files (the same bytes again) somewhere later in the sequence, one of them in a batch
    order += [order[int(rng.integers(len(order)))]]
    store = tmp_path / "store"
    real_footer = keyindex.footer
    for k, p in enumerate(order):
        batch = [p] if k != 2 else [p, order[0]]
        old_files = seed >= 3 and k < 2
        monkeypatch.setattr(keyindex, "footer", (lambda df, table, path: None) if old_files else real_footer)
        ingest(batch, store, fmt="parquet")
        incremental = _rows(store)
        _assert_same_rows(incremental, _rebuilt(store, tmp_path / f"r{k}"))
        _assert_same_rows(_days(store), _rebuilt(store, tmp_path / f"d{k}", days=True))
    # one row per job, and the rows cover jobs with and without samples, RUNNING jobs included
    jobs = Store(store).read("jobs")
    assert incremental.height == jobs.height
    assert incremental.filter(pl.col("n_samples") > 0).height > 10
    assert incremental.filter(pl.col("n_samples") == 0).height > 10
    running = jobs.filter(pl.col("state") == "RUNNING").select(KEYS)
    running_rows = incremental.join(running, on=KEYS)
    assert running.height and running_rows.height == running.height
    # open runs whose samples end by the snapshot: rows without a run end, which a snapshot move leaves alone
    assert running_rows.filter(pl.col("t_start").is_not_null() & pl.col("t_end").is_null()).height


def test_late_samples_update_an_old_job_row(tmp_path):
    jobs = pl.DataFrame({"cluster": ["c", "c"], "job_id": ["1", "2"], "state": ["COMPLETED"] * 2,
                         "submit": [_ts(0)] * 2, "start": [_ts(0)] * 2, "end": [_ts(3600)] * 2,
                         "req_cpus": [4.0, 4.0]})
    early = pl.DataFrame({"cluster": ["c"], "job_id": ["1"], "ts": [_ts(0)], "interval_s": [1800.0],
                          "cpu_used": [1.0]})
    late = pl.DataFrame({"cluster": ["c"], "job_id": ["1"], "ts": [_ts(1800)], "interval_s": [1800.0],
                         "cpu_used": [3.0]})
    store = tmp_path / "store"
    ingest([_write(jobs, tmp_path / "jobs.parquet"), _write(early, tmp_path / "early.parquet")], store,
           fmt="parquet")
    before = _rows(store)
    assert before.filter(pl.col("job_id") == "1")["cpu_used_s"].item() == pytest.approx(1800.0)
    ingest([_write(late, tmp_path / "late.parquet")], store, fmt="parquet")
    after = _rows(store)
    assert after.filter(pl.col("job_id") == "1")["cpu_used_s"].item() == pytest.approx(1800.0 + 3 * 1800.0)
    assert after.filter(pl.col("job_id") == "1")["n_samples"].item() == 2
    # the untouched job's row is the same row (its partition may be rewritten, its figures are not)
    assert_frame_equal(after.filter(pl.col("job_id") == "2"), before.filter(pl.col("job_id") == "2"))
    assert run("job_waste", store).filter(pl.col("job_id") == "1")["cpu_seconds_used"].item() == pytest.approx(7200.0)


def test_running_jobs_follow_the_snapshot_without_rederiving(tmp_path, monkeypatch):
    """RUNNING jobs across three ingests that each move the snapshot: a job whose samples end by its run end has
    a row without one, which stays as it is (not re-derived, not rewritten) and answers the queries; one with a
    sample reaching past the snapshot has the snapshot as its row's run end and is re-derived when it moves; the
    rows equal a rebuild after every ingest."""
    derived = []
    real = rollup.derive

    def spy(tx, scope=None, threads=None):
        derived.append(set() if scope is None else set(scope["job_id"].to_list()))
        return real(tx, scope, threads)

    monkeypatch.setattr(rollup, "derive", spy)
    jobs = pl.DataFrame({"cluster": ["c"] * 4, "job_id": ["r1", "r2", "r3", "c1"],
                         "state": ["RUNNING", "RUNNING", "RUNNING", "COMPLETED"],
                         "submit": [_ts(0)] * 4, "start": [_ts(0)] * 4, "end": [None, None, None, _ts(600)],
                         "elapsed_s": [0.0, 0.0, 0.0, 600.0], "req_cpus": [4.0] * 4})
    samples = pl.DataFrame({"cluster": ["c"] * 4, "job_id": ["r1", "r1", "r2", "r2"],
                            "ts": [_ts(0), _ts(600), _ts(1800), _ts(2400)], "interval_s": [600.0] * 4,
                            "cpu_used": [1.0, 2.0, 3.0, 4.0]})
    store = tmp_path / "store"
    ingest([_write(jobs, tmp_path / "jobs.parquet"), _write(samples, tmp_path / "s.parquet")], store, fmt="parquet")
    rows = _rows(store)
    # snapshot 2400 (the last sample's time): r2's last sample holds until 3000, clipped at 2400
    assert rows.filter(pl.col("job_id") == "r2")["cpu_used_s"].item() == pytest.approx(3 * 600.0)
    assert rows.filter(pl.col("job_id") == "r2")["t_end"].item() == pytest.approx(T0.timestamp() + 2400)
    assert rows.filter(pl.col("job_id") == "r1")["samples_end_s"].item() == pytest.approx(T0.timestamp() + 1200)
    # r1 (samples end 1200) and r3 (no samples): no run end; the finished c1 has its own
    assert rows.filter(pl.col("t_end").is_null())["job_id"].to_list() == ["r1", "r3"]
    assert rows.filter(pl.col("job_id") == "c1")["t_end"].item() == pytest.approx(T0.timestamp() + 600)
    unbound = rows.filter(pl.col("t_end").is_null())

    def later(k: int, t_s: float) -> str:
        job = pl.DataFrame({"cluster": ["c"], "job_id": [f"n{k}"], "state": ["COMPLETED"], "submit": [_ts(t_s)],
                            "start": [_ts(t_s)], "end": [_ts(t_s + 600)], "elapsed_s": [600.0],
                            "req_cpus": [1.0]})
        return _write(job, tmp_path / f"n{k}.parquet")

    derived.clear()
    ingest([later(1, 5400)], store, fmt="parquet")  # snapshot 2400 -> 6000
    assert derived == [{"n1", "r2"}]  # r1 and r3: their rows hold for the longer run
    rows = _rows(store)
    assert_frame_equal(rows.filter(pl.col("job_id").is_in(["r1", "r3"])), unbound)
    assert rows.filter(pl.col("job_id") == "r2")["cpu_used_s"].item() == pytest.approx(3 * 600.0 + 4 * 600.0)
    assert rows.filter(pl.col("job_id") == "r2")["t_end"].is_null().item()  # its samples now end by the run end
    _assert_same_rows(rows, _rebuilt(store, tmp_path / "r1"))
    _assert_same_rows(_days(store), _rebuilt(store, tmp_path / "d1", days=True))

    derived.clear()
    before = set(Store(store).files("job_rollup"))
    scanned = []
    real_scan = keyindex.scan_keyed
    monkeypatch.setattr(keyindex, "scan_keyed",
                        lambda path, keys: scanned.append((path, sorted(keys["job_id"]))) or real_scan(path, keys))
    ingest([later(2, 9000)], store, fmt="parquet")  # snapshot 6000 -> 9600: every RUNNING row holds
    assert derived == [{"n2"}]
    # the rows that hold are known from the files' footers (keyindex.open_rows): no RUNNING job's job_rollup row
    # is read (the cube's refresh reads the rows of its cells' jobs, c1 and n1)
    assert not [p for p in scanned if "job_rollup" in str(p[0]) and {"r1", "r2", "r3"} & set(p[1])], scanned
    assert before <= set(Store(store).files("job_rollup"))  # no file rewritten: n2's row is a new file
    _assert_same_rows(_rows(store), _rebuilt(store, tmp_path / "r2"))
    _assert_same_rows(_days(store), _rebuilt(store, tmp_path / "d2", days=True))
    # and the queries read the moved rows (their whole run lies in the window: the rollup answers them)
    waste = run("job_waste", store).filter(pl.col("job_id") == "r1")
    assert waste["cpu_seconds_used"].item() == pytest.approx(600.0 + 1200.0)
    assert waste["cpu_seconds_requested"].item() == pytest.approx(4 * 9600.0)
    # the rows without a run end do answer (a doubled integral shows), and equal the samples' answer
    doubled = _rows(store).with_columns(pl.col("cpu_used_s") * 2)
    con = connect(store, extra={"job_rollup": doubled})
    try:
        tampered = run("job_waste", con=con).filter(pl.col("job_id").is_in(["r1", "r2"])).sort("job_id")
    finally:
        con.close()
    assert tampered["cpu_seconds_used"].to_list() == pytest.approx([2 * 1800.0, 2 * (7 * 600.0)])
    assert_frame_equal(run("job_waste", store), _raw("job_waste", store), check_exact=False, rel_tol=1e-9)
    # and for windows of whole days cutting the runs, from their day rows
    for params in ({"start": "2026-03-02"}, {"end": "2026-03-03"}):
        assert_frame_equal(run("job_waste", store, **params), _raw("job_waste", store, **params),
                           check_exact=False, rel_tol=1e-9)



def test_a_snapshot_move_in_a_store_without_a_rollup_derives_its_running_jobs(tmp_path):
    """A store from before the rollup (no rollup files: nothing to list or probe) whose snapshot moves: its RUNNING
    jobs have no row, so they are derived, as the touched ones are."""
    jobs = pl.DataFrame({"cluster": ["c"] * 2, "job_id": ["r1", "c1"], "state": ["RUNNING", "COMPLETED"],
                         "submit": [_ts(0)] * 2, "start": [_ts(0)] * 2, "end": [None, _ts(600)],
                         "elapsed_s": [0.0, 600.0], "req_cpus": [4.0] * 2})
    store = tmp_path / "store"
    ingest([_write(jobs, tmp_path / "jobs.parquet")], store, fmt="parquet")
    manifest = json.loads((store / "_manifest.json").read_text())
    for table in ("job_rollup", "job_day_rollup"):
        manifest["tables"].pop(table, None)
    (store / "_manifest.json").write_text(json.dumps(manifest))
    later = jobs.filter(pl.col("job_id") == "c1").with_columns(pl.lit("n1").alias("job_id"),
                                                                pl.lit(_ts(7200)).alias("end"))
    ingest([_write(later, tmp_path / "later.parquet")], store, fmt="parquet")  # snapshot 600 -> 7200
    assert sorted(_rows(store)["job_id"].to_list()) == ["n1", "r1"]  # c1, untouched and finished: still none

# ------------------------------------------------------------------ all or nothing
def test_failed_ingest_leaves_no_half_written_rollup(tmp_path, monkeypatch):
    paths = _files(tmp_path, 5)
    store = tmp_path / "store"
    ingest(paths[:2], store, fmt="parquet")
    manifest = (store / "_manifest.json").read_bytes()
    before, before_days = _rows(store), _days(store)

    def broken(*_a, **_k):
        raise RuntimeError("disk full while deriving the rollup")

    monkeypatch.setattr(rollup, "derive", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest(paths[2:], store, fmt="parquet")
    assert (store / "_manifest.json").read_bytes() == manifest  # the jobs and samples were not committed either
    assert_frame_equal(_rows(store), before)
    assert_frame_equal(_days(store), before_days)
    live = {str(store / r) for files in json.loads(manifest)["tables"].values() for r in files}
    staged = {str(p) for p in store.rglob("*.parquet")} - live
    assert not staged, f"files of the failed ingest left behind: {sorted(staged)[:3]}"
    monkeypatch.undo()
    ingest(paths[2:], store, fmt="parquet")  # and the store still takes the same ingest afterwards
    _assert_same_rows(_rows(store), _rebuilt(store, tmp_path))


def test_a_writer_that_skips_the_refresh_cannot_commit_a_stale_rollup(tmp_path):
    paths = _files(tmp_path, 6)
    store = tmp_path / "store"
    ingest(paths, store, fmt="parquet")
    manifest = (store / "_manifest.json").read_bytes()
    jobs = Store(store).read("jobs").head(3).with_columns(pl.lit(64.0).alias("req_cpus"))
    with pytest.raises(AssertionError, match="without refreshing job_rollup"):
        with Store(store).transaction() as tx:
            tx.upsert("jobs", jobs)
    assert (store / "_manifest.json").read_bytes() == manifest


# ------------------------------------------------------------------ queries: rollup = raw samples
WINDOWS = [{}, {"start": "2026-03-03", "end": "2026-03-08"}, {"start": "2026-03-05"},
           {"end": "2026-03-06", "user": "u2"}, {"start": "2026-03-04 07:30"},
           {"end": "2026-03-06 12:00", "cluster": "east"}]
QUERIES = ["job_waste", "user_ranking", "team_ranking", "overview", "metric_pyramid", "gaming_check",
           "quota_backtest", "gap_area", "budget_usage", "fairshare_attainment"]


@pytest.fixture(scope="module")
def rolled_store(tmp_path_factory):
    root = random_store(tmp_path_factory.mktemp("rollup_random"), seed=11)
    rollup.rebuild(root)
    return root


@pytest.mark.parametrize("params", WINDOWS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "all")
@pytest.mark.parametrize("name", QUERIES)
def test_queries_from_the_rollup_equal_the_raw_derivation(rolled_store, name, params):
    takes = {p.name for p in load(name).params}
    params = {k: v for k, v in params.items() if k in takes}
    assert_frame_equal(run(name, rolled_store, **params), _raw(name, rolled_store, **params),
                       check_exact=False, rel_tol=1e-9, abs_tol=1e-6)


@pytest.mark.parametrize("name,params", [("user_summary", {"user": "u3"}),
                                         ("user_low_efficiency_jobs", {"user": "u3", "start": "2026-03-04"})])
def test_per_user_queries_from_the_rollup_equal_the_raw_derivation(rolled_store, name, params):
    assert_frame_equal(run(name, rolled_store, **params), _raw(name, rolled_store, **params),
                       check_exact=False, rel_tol=1e-9, abs_tol=1e-6)


def test_the_queries_do_read_the_rollup(rolled_store, tmp_path):
    """Not vacuous: doubling the rollup's integrals changes job_waste over whole runs and windows of whole days,
    and nothing else."""
    store = tmp_path / "tampered"
    shutil.copytree(rolled_store, store)
    rows = _rows(store).with_columns(pl.col("cpu_used_s") * 2)
    days = _days(store).with_columns(pl.col("cpu_used_s") * 2)
    with Store(store).transaction() as tx:
        tx.replace_table("job_rollup", rows)
        tx.replace_table("job_day_rollup", days)
        tx.derived_fresh = True
    honest, tampered = run("job_waste", rolled_store), run("job_waste", store)
    changed = honest.join(tampered, on=KEYS, suffix="_t").filter(
        (pl.col("cpu_seconds_used") - pl.col("cpu_seconds_used_t")).abs() > 1e-6)
    assert changed.height > 10
    # a window that cuts a run is answered from that job's samples: its tampered row is not read
    cut = {"start": "2026-03-06 12:00"}
    cut_s = dt.datetime(2026, 3, 6, 12, tzinfo=UTC)
    both = run("job_waste", rolled_store, **cut).join(run("job_waste", store, **cut), on=KEYS, suffix="_t")
    straddling = both.filter(pl.col("start") < cut_s, pl.col("cpu_seconds_used").is_not_null())
    assert straddling.height > 5
    assert_frame_equal(straddling.select(pl.col("cpu_seconds_used")),
                       straddling.select(pl.col("cpu_seconds_used_t").alias("cpu_seconds_used")))
    # the same window from midnight: the straddling jobs are answered from their days
    days = {"start": "2026-03-06"}
    both = run("job_waste", rolled_store, **days).join(run("job_waste", store, **days), on=KEYS, suffix="_t")
    straddling = both.filter(pl.col("start") < dt.datetime(2026, 3, 6, tzinfo=UTC),
                             pl.col("usage_source") == "samples", pl.col("cpu_seconds_used") > 0)
    assert straddling.height >= 3
    assert (straddling["cpu_seconds_used_t"] - 2 * straddling["cpu_seconds_used"]).abs().max() < 1e-6
    # and a window of whole days cutting runs at both ends: the rows near either bound are read (_job_usage
    # reads only those rows when the cube answers the rest), not the samples
    lo, hi = dt.datetime(2026, 3, 6, tzinfo=UTC), dt.datetime(2026, 3, 8, tzinfo=UTC)
    both_ends = {"start": "2026-03-06", "end": "2026-03-08"}
    both = run("job_waste", rolled_store, **both_ends).join(run("job_waste", store, **both_ends), on=KEYS,
                                                            suffix="_t")
    for cut_at in (pl.col("start") < lo, (pl.col("start") < hi) & (pl.col("run_end") > hi)):
        straddling = both.filter(cut_at, pl.col("usage_source") == "samples", pl.col("cpu_seconds_used") > 0)
        assert straddling.height >= 3
        assert (straddling["cpu_seconds_used_t"] - 2 * straddling["cpu_seconds_used"]).abs().max() < 1e-6


def test_a_store_without_a_rollup_is_answered_from_the_samples(rolled_store, tmp_path):
    store = tmp_path / "old"
    shutil.copytree(rolled_store, store)
    manifest = json.loads((store / "_manifest.json").read_text())
    manifest["tables"].pop("job_rollup")
    manifest["tables"].pop("job_day_rollup")
    (store / "_manifest.json").write_text(json.dumps(manifest))
    assert rollup.status(store) == {"jobs": 300, "rows": 0, "missing": 300}
    assert_frame_equal(run("user_ranking", store), run("user_ranking", rolled_store),
                       check_exact=False, rel_tol=1e-9, abs_tol=1e-6)
