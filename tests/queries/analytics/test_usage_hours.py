"""usage_hours (queries/analytics/usage_hours.py): hand-computed cells; gap_area from the cells equals gap_area from
the samples on random stores and the sample store (every group_by, buckets of 1 h, 6 h and a day, origins on and
off the hour, windows of whole days, whole hours and cutting hours, filters the cells have no dimension for);
incremental = rebuild on random ingest orders and after a compaction; a store without the table is answered from
the samples and gets none from a later ingest until a rebuild. quota_backtest from job_day_rollup equals it from
the samples."""
from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from queries.analytics import cells, compact, cube, rollup, run, usage_hours
from queries.analytics.cells import parts_of
from queries.ingest import ingest
from queries.store import Store, connect, schema

from test_queries_random import random_store
from test_rollup import _files, _write

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)
CELL = ["cluster", "submit", "running", "open_run", "user", "account", "grain_s", "t_s"]
AMOUNTS = ["requested_seconds", "used_seconds", "wasted_seconds", "unknown_usage_seconds"]
REPO = Path(__file__).resolve().parents[3]


def _cells(store) -> pl.DataFrame:
    return Store(store).read(usage_hours.TABLE).sort(CELL)


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    # DuckDB does not fix the order of a parallel sum, and gap_area's samples path sums a bucket as a running
    # level x bucket_s plus edge terms: the last bits differ. abs_tol: resource-seconds of buckets of 1e5-1e7
    assert_frame_equal(a, b, check_exact=False, rel_tol=1e-9, abs_tol=1e-5)


def _rebuilt_cells(store, tmp_path) -> pl.DataFrame:
    copy = tmp_path / "rebuilt"
    shutil.copytree(store, copy)
    rollup.rebuild(copy)
    return _cells(copy)


def _raw_query(name, store, **params) -> pl.DataFrame:
    """The query answered from the samples alone: the store with its rollups, cube and cells hidden."""
    hidden = ("job_rollup", "job_day_rollup", cube.TABLE, usage_hours.TABLE)
    con = connect(store, extra={t: schema.empty(t) for t in hidden})
    try:
        return run(name, con=con, **params)
    finally:
        con.close()


def _raw(store, **params) -> pl.DataFrame:
    return _raw_query("gap_area", store, **params)


def _ts(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


# ------------------------------------------------------------------ hand-computed cells
def test_hand_computed_cells(tmp_path):
    h = 3600.0
    # job 1: [0:30, 1:30), 4 CPUs, totals 3600 CPU-s (1 CPU over its hour); job 2: [1:00, 1:20), 2 CPUs, samples
    # of 3 CPUs (capped at 2) from 0:50 to 1:10 and 1 CPU from 1:10 to 1:40 (clipped at its end); job 3:
    # [0:00, 0:10), 1 CPU, no usage known; job 4: RUNNING since 0:00 with no end and no elapsed time, 1 CPU, no
    # usage known: it runs until the cluster's snapshot (1:30, the log's last instant); job 5: never started;
    # job 6: RUNNING since 0:00, 2 CPUs, one sample of 1 CPU from 0:10 to 0:20
    jobs = pl.DataFrame({
        "cluster": ["c"] * 6, "job_id": ["1", "2", "3", "4", "5", "6"], "user": ["u", "v", "u", "u", "u", "w"],
        "account": ["a/x", "a/y", "b", "a/x", "a/x", "a/z"],
        "state": ["COMPLETED", "COMPLETED", "COMPLETED", "RUNNING", "PENDING", "RUNNING"],
        "submit": [_ts(0)] * 6, "start": [_ts(1800), _ts(h), _ts(0), _ts(0), None, _ts(0)],
        "end": [_ts(h + 1800), _ts(h + 1200), _ts(600), None, None, None],
        "req_cpus": [4.0, 2.0, 1.0, 1.0, 8.0, 2.0], "cpu_seconds_used": [3600.0, None, None, None, None, None]})
    samples = pl.DataFrame({"cluster": ["c"] * 3, "job_id": ["2", "2", "6"],
                            "ts": [_ts(3000), _ts(h + 600), _ts(600)],
                            "interval_s": [1200.0, 1800.0, 600.0], "cpu_used": [3.0, 1.0, 1.0]})
    store = tmp_path / "store"
    ingest([_write(jobs, tmp_path / "jobs.parquet"), _write(samples, tmp_path / "samples.parquet")], store,
           fmt="parquet")
    assert Store(store).snapshots()["c"] == _ts(h + 1800)
    t0 = T0.timestamp()
    hours = _cells(store).filter(pl.col("grain_s") == h)
    got = {(r["running"], r["user"], r["account"], r["t_s"] - t0): (r["cpu_req_s"], r["cpu_used_s"], r["cpu_unknown_s"])
           for r in hours.iter_rows(named=True)}
    assert got == {
        (False, "u", "a/x", 0.0): (pytest.approx(4 * 1800), pytest.approx(1800), None),
        (False, "u", "a/x", h): (pytest.approx(4 * 1800), pytest.approx(1800), None),
        (False, "u", "b", 0.0): (pytest.approx(600), None, pytest.approx(600)),
        # job 2 in hour 1: 10 min at min(3, 2) = 2 CPUs + 10 min at 1 CPU (the rest is outside its run)
        (False, "v", "a/y", h): (pytest.approx(2 * 1200), pytest.approx(2 * 600 + 1 * 600), None),
        # RUNNING without an end: job 6's sampled usage only (its requested, unknown and totals-based usage
        # move with the snapshot: gap_area derives them per job), nothing of job 4 (no samples)
        (False, "w", "a/z", 0.0): (None, pytest.approx(600), None),
    }
    assert {p.parent.name for p in (store / usage_hours.TABLE).glob("*/*/*.parquet")} == {"month=2026-03"}
    days = _cells(store).filter(pl.col("grain_s") == 86400.0)
    assert days["cpu_req_s"].sum() == pytest.approx(4 * 3600 + 2 * 1200 + 600)
    assert days["cpu_used_s"].sum() == pytest.approx(3600 + 1800 + 600)
    params = dict(start="2026-03-02 00:00", end="2026-03-02 03:00", bucket_s=h, group_by="user", resource="cpu")
    gap = run("gap_area", store, **params)
    _same(gap, _raw(store, **params))
    u = gap.filter(pl.col("group_key") == "u").sort("bucket_start")
    assert u["requested_seconds"].to_list() == pytest.approx([4 * 1800 + 600 + 3600, 4 * 1800 + 1800, 0])
    assert u["unknown_usage_seconds"].to_list() == pytest.approx([600 + 3600, 1800, 0])
    assert u["used_seconds"].to_list() == pytest.approx([1800, 1800, 0])
    w = gap.filter(pl.col("group_key") == "w").sort("bucket_start")
    assert w["requested_seconds"].to_list() == pytest.approx([2 * 3600, 2 * 1800, 0])
    assert w["used_seconds"].to_list() == pytest.approx([600, 0, 0])
    assert w["unknown_usage_seconds"].to_list() == pytest.approx([0, 0, 0])
    # without a snapshot (a store written before snapshots were recorded) job 4 runs until the window's end: it
    # is in no cell and gap_area derives it on its own
    manifest = json.loads((store / "_manifest.json").read_text())
    manifest.pop("snapshots")
    (store / "_manifest.json").write_text(json.dumps(manifest))
    rollup.rebuild(store)
    assert _cells(store).filter(pl.col("grain_s") == 86400.0)["cpu_req_s"].sum() == pytest.approx(
        4 * 3600 + 2 * 1200 + 600)
    assert _cells(store).filter(pl.col("user") == "w").is_empty()  # job 6 too runs until the window's end
    gap = run("gap_area", store, **params)
    _same(gap, _raw(store, **params))
    u = gap.filter(pl.col("group_key") == "u").sort("bucket_start")
    assert u["requested_seconds"].to_list() == pytest.approx([4 * 1800 + 600 + 3600, 4 * 1800 + 3600, 3600])


# ------------------------------------------------------------------ gap_area: cells = samples
@pytest.fixture(scope="module")
def celled_store(tmp_path_factory):
    root = random_store(tmp_path_factory.mktemp("hours_random"), seed=11)
    rollup.rebuild(root)
    assert _cells(root).filter(pl.col("grain_s") == 3600.0).height > 500
    return root


WINDOWS = [{}, {"start": "2026-03-03", "end": "2026-03-08"}, {"start": "2026-03-03 05:00", "end": "2026-03-06 19:00"},
           {"start": "2026-03-04 07:30"}, {"end": "2026-03-06 12:00:05", "cluster": "east"},
           {"end": "2026-03-06", "user": "u2"}, {"start": "2026-03-04", "account_prefix": "org/a"},
           {"state": "COMPLETED"}, {"partition": "gpu"}, {"job_class": "training"}, {"team_level": 2}]
ORIGINS = [None, "2026-03-01 05:00", "2026-03-01 00:17"]


GROUPS = ["none", "team", "user", "account"]


@pytest.mark.parametrize("w", range(len(WINDOWS)), ids=[",".join(f"{k}={v}" for k, v in p.items()) or "all"
                                                        for p in WINDOWS])
@pytest.mark.parametrize("bucket_s", [3600.0, 21600.0, 86400.0])
def test_gap_area_from_the_cells_equals_the_samples(celled_store, w, bucket_s):
    """Every window with every bucket length and every origin (Monday midnight, on an hour, off the hour), the
    group_by and resource rotating so that each group_by meets each bucket length and origin."""
    for k, origin in enumerate(ORIGINS):
        turn = k + w + int(bucket_s) // 3600
        params = dict(WINDOWS[w], bucket_s=bucket_s, group_by=GROUPS[turn % 4], resource=("gpu", "cpu", "mem", None)[turn % 4])
        if origin is not None:
            params["origin"] = origin
        got = run("gap_area", celled_store, **params)
        assert got.height
        _same(got, _raw(celled_store, **params))
        if k == 0:
            _same(got, run("gap_area", celled_store, use_cube=False, **params))


def test_gap_area_does_read_the_cells(celled_store, tmp_path):
    """Not vacuous: doubling the cells' used GPU-seconds changes gap_area for buckets and windows of whole hours
    and days, and nothing when the origin or the window cuts an hour, a filter the cells lack is set, or the
    cells are switched off."""
    store = tmp_path / "tampered"
    shutil.copytree(celled_store, store)
    with Store(store).transaction() as tx:
        cells = _cells(store)
        usage_hours._write(tx, cells.with_columns(pl.col("gpu_used_s") * 2), parts_of(cells))
    for params in ({"bucket_s": 86400.0}, {"bucket_s": 3600.0, "start": "2026-03-03 05:00"},
                   {"bucket_s": 21600.0, "origin": "2026-03-01 01:00", "end": "2026-03-07"}):
        honest, tampered = run("gap_area", celled_store, **params), run("gap_area", store, **params)
        assert tampered["used_seconds"].sum() > honest["used_seconds"].sum() * 1.5
    for params in ({"bucket_s": 3600.0, "origin": "2026-03-01 00:17"}, {"start": "2026-03-03 05:30"},
                   {"state": "COMPLETED"}, {"use_cube": False}, {"bucket_s": 1800.0}):
        _same(run("gap_area", store, resource="gpu", **params), run("gap_area", celled_store, resource="gpu", **params))


def test_gap_area_on_the_sample_store(tmp_path):
    sample = REPO / "sample_data" / "store"
    if not (sample / "_manifest.json").exists():  # a fresh clone without `scripts/test`'s build step
        pytest.skip(f"sample store not built: {sample} (run `quotaloop sample --store sample_data/store`)")
    store = tmp_path / "sample"
    shutil.copytree(sample, store)
    rollup.rebuild(store)
    assert _cells(store).height
    jobs = Store(store).read("jobs")
    first = jobs["start"].min().replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=3)
    window = {"start": first.isoformat(), "end": (first + dt.timedelta(days=9, hours=5)).isoformat()}
    for params in (dict(bucket_s=86400.0, group_by="team"), dict(window, bucket_s=21600.0, group_by="user"),
                   dict(window, bucket_s=3600.0, group_by="account", resource="cpu", origin=window["start"])):
        got = run("gap_area", store, **params)
        assert got.height
        _same(got, _raw(store, **params))


# ------------------------------------------------------------------ maintenance
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_equals_rebuild_on_random_ingest_orders(tmp_path, seed):
    rng = np.random.default_rng(seed)
    paths = _files(tmp_path, seed)  # jobs files move the snapshot: RUNNING jobs' runs grow
    order = [paths[i] for i in rng.permutation(len(paths))]
    order += [order[int(rng.integers(len(order)))]]  # a re-ingest of the same bytes
    store = tmp_path / "store"
    for k, p in enumerate(order):
        batch = [p] if k != 2 else [p, order[0]]
        ingest(batch, store, fmt="parquet")
        _same(_cells(store), _rebuilt_cells(store, tmp_path / f"r{k}"))
    assert _cells(store).height
    for params in ({"bucket_s": 86400.0, "group_by": "team"}, {"bucket_s": 3600.0, "start": "2026-03-03 04:00"}):
        _same(run("gap_area", store, **params), _raw(store, **params))


def test_compaction_keeps_gap_area(celled_store, tmp_path):
    """Compaction's refresh re-derives the cells of the months whose samples it coarsened: the cells stay what a
    rebuild gives, and gap_area's answers equal the ones before the compaction."""
    store = tmp_path / "compacted"
    shutil.copytree(celled_store, store)
    before = {b: run("gap_area", store, bucket_s=b, group_by="user", resource="cpu") for b in (3600.0, 86400.0)}
    done = compact.compact(store, keep_s=3 * 86400)
    assert done.replaced > 0
    _same(_cells(store), _rebuilt_cells(store, tmp_path / "r"))
    # compaction moves a job's integrals in the last bits (a coarse sample's capped mean x its seconds is the
    # same sum in another order: test_compact.py compares at 1e-8), hence 1e-8 across it
    for b, frame in before.items():
        assert_frame_equal(run("gap_area", store, bucket_s=b, group_by="user", resource="cpu"), frame,
                           check_exact=False, rel_tol=1e-8, abs_tol=1e-5)


def test_a_store_without_the_table_is_answered_from_the_samples(celled_store, tmp_path):
    store = tmp_path / "old"
    shutil.copytree(celled_store, store)
    manifest = json.loads((store / "_manifest.json").read_text())
    manifest["tables"].pop(usage_hours.TABLE)
    (store / "_manifest.json").write_text(json.dumps(manifest))
    late = pl.DataFrame({"cluster": ["east"], "job_id": ["late-1"], "user": ["u1"], "account": ["lab"],
                         "state": ["COMPLETED"], "submit": [_ts(86400)], "start": [_ts(86400)],
                         "end": [_ts(90000)], "req_cpus": [2.0]})
    ingest([_write(late, tmp_path / "late.parquet")], store, fmt="parquet")
    assert usage_hours.TABLE not in json.loads((store / "_manifest.json").read_text())["tables"]  # no partial table
    params = {"bucket_s": 3600.0, "group_by": "user", "resource": "cpu"}
    _same(run("gap_area", store, **params), _raw(store, **params))
    rollup.rebuild(store)
    assert _cells(store)["cpu_req_s"].sum() == pytest.approx(_cells(celled_store)["cpu_req_s"].sum() + 2 * 2 * 3600)
    got = run("gap_area", store, **params)
    _same(got, _raw(store, **params))
    assert got["requested_seconds"].sum() == pytest.approx(
        run("gap_area", celled_store, **params)["requested_seconds"].sum() + 2 * 3600)


# ------------------------------------------------------------------ quota_backtest: day rollup = samples
@pytest.mark.parametrize("params", [
    {}, {"period_s": 86400.0}, {"start": "2026-03-03", "end": "2026-03-10"},
    {"period_s": 2 * 86400.0, "origin": "2026-03-01", "start": "2026-03-04"},
    {"end": "2026-03-07 06:00"}, {"period_s": 86400.0, "origin": "2026-03-01 05:00"},
    {"period_s": 21600.0}, {"cluster": "east", "account_prefix": "org/a"}, {"state": "COMPLETED"},
    {"min_jobs": 1, "min_gpu_equiv_hours": 0.0, "period_s": 86400.0}],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "weekly")
def test_quota_backtest_from_the_day_rollup_equals_the_samples(celled_store, params):
    got = run("quota_backtest", celled_store, **params)
    assert got.height
    _same(got, _raw_query("quota_backtest", celled_store, **params))
    _same(got, run("quota_backtest", celled_store, use_rollup=False, **params))


def test_quota_backtest_does_read_the_day_rollup(celled_store, tmp_path):
    """Not vacuous: zeroing the day rows' GPU integrals changes daily terms from the rollup, not from the samples
    or with periods that are not whole days."""
    store = tmp_path / "tampered"
    shutil.copytree(celled_store, store)
    days = Store(store).read(rollup.DAY_TABLE)
    with Store(store).transaction() as tx:
        tx.tables[rollup.DAY_TABLE] = []
        tx.upsert(rollup.DAY_TABLE, days.with_columns(pl.col("gpu_used_s") * 0))
        tx.derived_fresh = True
    honest, tampered = (run("quota_backtest", s, period_s=86400.0) for s in (celled_store, store))
    assert (tampered["rec_efficiency"].fill_null(-1) != honest["rec_efficiency"].fill_null(-1)).sum() > 10
    for params in ({"use_rollup": False, "period_s": 86400.0}, {"period_s": 21600.0}):
        _same(run("quota_backtest", store, **params), run("quota_backtest", celled_store, **params))


def test_hour_cells_without_open_run_are_read_and_rebuilt_by_the_first_refresh(celled_store, tmp_path):
    """A table written before open runs had cells of their own (no ``open_run`` column; an open run's sampled
    usage summed into its user's cells) answers gap_area as before (the sums are right), and the first refresh
    rebuilds it, once: it then has the column and equals a rebuild."""
    store = tmp_path / "old"
    shutil.copytree(celled_store, store)
    assert _cells(store)["open_run"].any()  # the random store has open runs with samples
    for f in Store(store).files(usage_hours.TABLE):
        pl.read_parquet(f).drop("open_run").write_parquet(f)
    manifest = json.loads((store / "_manifest.json").read_text())
    del manifest["layouts"][usage_hours.TABLE]  # as the version that wrote such files left it: no layout mark
    (store / "_manifest.json").write_text(json.dumps(manifest))
    with Store(store).transaction() as tx:
        assert cells.legacy(tx, usage_hours.TABLE)
        tx.derived_fresh = True
    params = {"bucket_s": 3600.0, "group_by": "user", "resource": "cpu"}
    _same(run("gap_area", store, **params), _raw(store, **params))
    late = pl.DataFrame({"cluster": ["east"], "job_id": ["april-1"], "user": ["u1"], "account": ["lab"],
                         "state": ["COMPLETED"], "submit": [_ts(30 * 86400)], "start": [_ts(30 * 86400)],
                         "end": [_ts(30 * 86400 + 3600)], "req_cpus": [2.0]})
    ingest([_write(late, tmp_path / "april.parquet")], store, fmt="parquet")
    assert all("open_run" in pl.read_parquet_schema(f) for f in Store(store).files(usage_hours.TABLE))
    _same(_cells(store), _rebuilt_cells(store, tmp_path))
    with Store(store).transaction() as tx:
        assert tx.layouts[usage_hours.TABLE] == cells.LAYOUT
        assert not cells.legacy(tx, usage_hours.TABLE)
        tx.derived_fresh = True
    _same(run("gap_area", store, **params), _raw(store, **params))


def test_a_table_marked_in_the_current_layout_is_refreshed_without_opening_its_files(celled_store, tmp_path,
                                                                                      monkeypatch):
    """The manifest marks both cell tables as written in the current layout (``cells.LAYOUT``): a refresh then
    opens none of their files to look for legacy cells, and keeps the mark; a store without it (an older one)
    is looked at file by file once, and marked by the commit."""
    store = tmp_path / "s"
    shutil.copytree(celled_store, store)
    marks = json.loads((store / "_manifest.json").read_text())["layouts"]
    assert marks == {"usage_cube": cells.LAYOUT, "usage_hours": cells.LAYOUT}
    opened = []
    real = cells._marks_running
    monkeypatch.setattr(cells, "_marks_running", lambda path, table: opened.append(path) or real(path, table))
    late = pl.DataFrame({"cluster": ["east"], "job_id": ["may-1"], "user": ["u1"], "account": ["lab"],
                         "state": ["COMPLETED"], "submit": [_ts(31 * 86400)], "start": [_ts(31 * 86400)],
                         "end": [_ts(31 * 86400 + 3600)], "req_cpus": [2.0]})
    ingest([_write(late, tmp_path / "may.parquet")], store, fmt="parquet")
    assert not opened
    manifest = json.loads((store / "_manifest.json").read_text())
    assert manifest["layouts"] == marks
    del manifest["layouts"]
    (store / "_manifest.json").write_text(json.dumps(manifest))
    ingest([_write(late.with_columns(pl.lit("may-2").alias("job_id")), tmp_path / "may2.parquet")], store,
           fmt="parquet")
    assert opened  # unmarked: looked at, found current, marked
    assert json.loads((store / "_manifest.json").read_text())["layouts"] == marks
    _same(_cells(store), _rebuilt_cells(store, tmp_path / "r"))
