"""usage_cube (queries/analytics/cube.py): hand-computed cells, the queries that read it equal the per-job
derivation (and the raw samples) on random stores for windows of whole days, windows cutting days and filters
the cube has no dimension for, incremental = rebuild on random ingest orders and after a compaction, and a
store ingested before the cube gets none until a rebuild."""
from __future__ import annotations

import datetime as dt
import json
import shutil

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from queries.analytics import cells, compact, cube, load, rollup, run
from queries.ingest import ingest
from queries.store import Store, connect, schema

from test_queries_random import random_store
from test_rollup import _files, _write

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)
CELL = ["cluster", "submit", "running", "user", "account", "day_lo_s", "day_hi_s"]


def _cells(store) -> pl.DataFrame:
    return Store(store).read(cube.TABLE).sort(CELL)


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    # DuckDB does not fix the order of a parallel sum: the last bits of a sum may differ
    assert_frame_equal(a, b, check_exact=False, rel_tol=1e-9, abs_tol=1e-6)


def _rebuilt_cells(store, tmp_path) -> pl.DataFrame:
    copy = tmp_path / "rebuilt"
    shutil.copytree(store, copy)
    rollup.rebuild(copy)
    return _cells(copy)


def _raw(name: str, store, **params) -> pl.DataFrame:
    """The query answered from the samples alone: the store with its rollup and cube hidden."""
    con = connect(store, extra={t: schema.empty(t) for t in ("job_rollup", "job_day_rollup", cube.TABLE)})
    try:
        return run(name, con=con, **params)
    finally:
        con.close()


def _ts(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


# ------------------------------------------------------------------ a hand-computed cell
def test_hand_computed_cells(tmp_path):
    day = 86400.0
    jobs = pl.DataFrame({
        "cluster": ["c"] * 4, "job_id": ["1", "2", "3", "4"], "user": ["u", "u", "u", "u"],
        "account": ["a", "a", "a", "a"], "state": ["COMPLETED"] * 3 + ["PENDING"],
        "submit": [_ts(0)] * 4, "start": [_ts(3600), _ts(7200), _ts(day - 600), None],
        "end": [_ts(3600 + 1800), _ts(7200 + 600), _ts(day + 600), None],
        "req_cpus": [4.0, 2.0, 1.0, 8.0], "cpu_seconds_used": [3600.0, 600.0, 600.0, None]})
    store = tmp_path / "store"
    ingest([_write(jobs, tmp_path / "jobs.parquet")], store, fmt="parquet")
    cells = _cells(store)
    t0 = T0.timestamp()
    # jobs 1 and 2 run inside the first day: one cell; job 3 crosses midnight: a cell of two days; job 4 never
    # started: none
    assert cells.select("day_lo_s", "day_hi_s", "jobs").rows() == [(t0, t0 + day, 2), (t0, t0 + 2 * day, 1)]
    one = cells.row(0, named=True)
    assert one["run_s"] == pytest.approx(1800 + 600)
    assert one["cpu_req_s"] == pytest.approx(4 * 1800 + 2 * 600)
    assert one["cpu_used_s"] == pytest.approx(3600 + 600)  # from totals: 2 and 1 CPUs over the runs
    assert one["cpu_waste_s"] == pytest.approx(4 * 1800 - 3600 + 2 * 600 - 600)
    assert one["jobs_with_totals"] == 2 and one["jobs_with_samples"] == 0
    assert one["footprint_max_s"] == pytest.approx(4 * 1800 / 16)  # job 1: 4 CPUs = 1/4 GPU; no GPU, no memory
    assert one["t_start_min"] == pytest.approx(t0 + 3600) and one["t_end_max"] == pytest.approx(t0 + 7800)
    # a window of the first day holds the first cell, cuts the second: job 3 is derived on its own
    over = run("overview", store, start="2026-03-02", end="2026-03-03")
    assert over["jobs"].item() == 3
    assert over["cpu_hours_requested"].item() == pytest.approx((4 * 1800 + 2 * 600 + 600) / 3600)


# ------------------------------------------------------------------ queries: cube = per job = raw samples
WINDOWS = [{}, {"start": "2026-03-03", "end": "2026-03-08"}, {"start": "2026-03-05"}, {"end": "2026-03-06"},
           {"end": "2026-03-06", "user": "u2"}, {"start": "2026-03-04", "account_prefix": "org/a"},
           {"cluster": "east"}, {"start": "2026-03-04 07:30"}, {"end": "2026-03-06 12:00", "cluster": "east"},
           {"state": "COMPLETED"}, {"partition": "gpu"}, {"job_class": "training"},
           {"cpus_per_gpu": 8.0}, {"legacy_time_unit_s": 3600.0}, {"team_level": 2, "start": "2026-03-03"}]
QUERIES = ["user_ranking", "team_ranking", "overview", "metric_pyramid", "selection_resource", "user_summary",
           "fairshare_attainment", "quota_backtest"]
# quota_backtest's periods: a cell answers for a period only when its days lie in one (days, 2 days from a
# Tuesday, a week); periods that are not whole days (6 h, or a day from 06:00) turn the cube off
PERIODS = [{"period_s": 86400.0}, {"period_s": 172800.0, "origin": "2026-03-03"}, {},
           {"period_s": 21600.0}, {"period_s": 86400.0, "origin": "2026-03-02 06:00"}]


@pytest.fixture(scope="module")
def cubed_store(tmp_path_factory):
    root = random_store(tmp_path_factory.mktemp("cube_random"), seed=11)
    rollup.rebuild(root)
    assert _cells(root).height > 20
    return root


@pytest.mark.parametrize("params", WINDOWS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "all")
@pytest.mark.parametrize("name", QUERIES)
def test_queries_from_the_cube_equal_the_per_job_derivation(cubed_store, name, params):
    takes = {p.name for p in load(name).params}
    params = {k: v for k, v in params.items() if k in takes}
    if name == "user_summary":
        params.setdefault("user", "u3")
    got = run(name, cubed_store, **params)
    assert got.height
    _same(got, _raw(name, cubed_store, **params))
    if "use_cube" in takes:
        _same(got, run(name, cubed_store, **params, use_cube=False))


@pytest.mark.parametrize("periods", PERIODS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "weeks")
@pytest.mark.parametrize("params", [{}, {"start": "2026-03-03", "end": "2026-03-08"}, {"start": "2026-03-04 07:30"},
                                    {"state": "COMPLETED"}, {"cpus_per_gpu": 8.0}],
                         ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "all")
def test_quota_backtest_periods_from_the_cube_equal_the_per_job_derivation(cubed_store, periods, params):
    """The cells a period holds whole, and per job those whose days cross a period boundary: the same backtest as
    every job split by the periods, and as the raw samples."""
    got = run("quota_backtest", cubed_store, **periods, **params)
    assert got["period_k"].n_unique() >= (2 if periods else 1)  # the random store's jobs lie in one week
    _same(got, run("quota_backtest", cubed_store, **periods, **params, use_cube=False))
    _same(got, _raw("quota_backtest", cubed_store, **periods, **params))


def test_the_queries_do_read_the_cube(cubed_store, tmp_path):
    """Not vacuous: doubling the cells' used CPU changes the rankings and the overview over an open window and a
    window of whole days, and nothing when the window cuts every day or the cube is switched off."""
    store = tmp_path / "tampered"
    shutil.copytree(cubed_store, store)
    with Store(store).transaction() as tx:
        cube._write(tx, _cells(store).with_columns(pl.col("cpu_used_s") * 2), cells.parts_of(_cells(store)))
    for params in ({}, {"start": "2026-03-03", "end": "2026-03-09"}):
        honest, tampered = run("overview", cubed_store, **params), run("overview", store, **params)
        assert tampered["cpu_hours_used"].item() > honest["cpu_hours_used"].item() * 1.2
        ranked = run("user_ranking", store, **params).join(run("user_ranking", cubed_store, **params), on="user")
        assert (ranked["cpu_hours_used"] > ranked["cpu_hours_used_right"] * 1.05).sum() >= 5
        backtest = {**params, "period_s": 86400.0, "min_jobs": 0, "min_gpu_equiv_hours": 0.0}
        bt = run("quota_backtest", store, **backtest).join(run("quota_backtest", cubed_store, **backtest),
                                                          on=["user", "period_k"])
        assert (bt["raw_coefficient"] != bt["raw_coefficient_right"]).sum() >= 5
    for params in ({"start": "2026-03-03 06:00"}, {"use_cube": False}):
        _same(run("overview", store, **params), run("overview", cubed_store, **params))
        _same(run("quota_backtest", store, **params), run("quota_backtest", cubed_store, **params))


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
    cells = _cells(store)
    jobs = Store(store).read("jobs")
    started = jobs.filter(pl.col("start").is_not_null())
    assert cells.height and cells["jobs"].sum() <= started.height
    assert cells.filter(pl.col("day_hi_s") - pl.col("day_lo_s") > 86400).height  # runs across midnight
    for params in ({}, {"start": "2026-03-03", "end": "2026-03-06"}):
        _same(run("user_ranking", store, **params), run("user_ranking", store, use_cube=False, **params))


def test_compaction_keeps_the_cube_equal_to_a_rebuild(cubed_store, tmp_path):
    """Compaction's refresh re-derives the cells of the months whose samples it coarsened: the cube stays what a
    rebuild gives and the queries from it equal the per-job path. (Compaction moves a few jobs' job_rollup
    integrals in the last bits - a coarse sample's mean times its seconds is the same sum in another order - so
    the cells follow them.)"""
    store = tmp_path / "compacted"
    shutil.copytree(cubed_store, store)
    done = compact.compact(store, keep_s=3 * 86400)
    assert done.replaced > 0
    _same(_cells(store), _rebuilt_cells(store, tmp_path / "r"))
    _same(run("user_ranking", store), run("user_ranking", store, use_cube=False))


def test_a_store_ingested_before_the_cube_gets_none_until_a_rebuild(cubed_store, tmp_path):
    store = tmp_path / "old"
    shutil.copytree(cubed_store, store)
    manifest = json.loads((store / "_manifest.json").read_text())
    manifest["tables"].pop(cube.TABLE)
    (store / "_manifest.json").write_text(json.dumps(manifest))
    late = pl.DataFrame({"cluster": ["east"], "job_id": ["late-1"], "user": ["u1"], "account": ["lab"],
                         "state": ["COMPLETED"], "submit": [_ts(86400)], "start": [_ts(86400)],
                         "end": [_ts(90000)], "req_cpus": [2.0]})
    ingest([_write(late, tmp_path / "late.parquet")], store, fmt="parquet")
    assert cube.TABLE not in json.loads((store / "_manifest.json").read_text())["tables"]  # no partial cube
    _same(run("user_ranking", store), run("user_ranking", store, use_cube=False))
    rollup.rebuild(store)
    assert _cells(store)["jobs"].sum() == _cells(cubed_store)["jobs"].sum() + 1
    _same(run("user_ranking", store), run("user_ranking", store, use_cube=False))


# ------------------------------------------------------------------ RUNNING jobs' cells apart
def _next_month_job(tmp_path) -> str:
    """One job of east submitted in April: it moves east's snapshot (every RUNNING job of east runs longer)."""
    job = pl.DataFrame({"cluster": ["east"], "job_id": ["april-1"], "user": ["u1"], "account": ["lab"],
                        "state": ["COMPLETED"], "submit": [_ts(30 * 86400)], "start": [_ts(30 * 86400)],
                        "end": [_ts(30 * 86400 + 3600)], "req_cpus": [2.0]})
    return _write(job, tmp_path / "april.parquet")


def _files_by_part(store) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for rel in json.loads((store / "_manifest.json").read_text())["tables"][cube.TABLE]:
        out.setdefault(rel.rsplit("/", 1)[0], set()).add(rel)
    return out


def test_a_snapshot_move_rewrites_no_cell_of_the_months(cubed_store, tmp_path):
    """RUNNING jobs without an end are in no cell (the queries derive them per job): an ingest that moves the
    snapshot (a job of the next month) writes the new job's month and rewrites none of the months the RUNNING
    jobs were submitted in; the cube stays what a rebuild gives, and the queries what the per-job derivation
    gives."""
    store = tmp_path / "store"
    shutil.copytree(cubed_store, store)
    jobs = Store(store).read("jobs")
    assert jobs.filter((pl.col("state") == "RUNNING") & pl.col("end").is_null() & (pl.col("cluster") == "east")
                       & pl.col("start").is_not_null()).height
    before = _files_by_part(store)
    assert not [d for d in before if d.endswith("month=running")]
    assert not _cells(store)["running"].any()
    hours_before = set(json.loads((store / "_manifest.json").read_text())["tables"]["usage_hours"])
    ingest([_next_month_job(tmp_path)], store, fmt="parquet")
    assert "east" in Store(store).snapshots()
    after = _files_by_part(store)
    march = [d for d in before if d.endswith("month=2026-03")]
    assert march and all(after[d] == before[d] for d in march)  # untouched
    hours_after = set(json.loads((store / "_manifest.json").read_text())["tables"]["usage_hours"])
    assert {r for r in hours_before if "month=2026-03" in r} <= hours_after  # untouched
    assert "usage_cube/cluster=east/month=2026-04" in after
    _same(_cells(store), _rebuilt_cells(store, tmp_path / "r"))
    for params in ({}, {"start": "2026-03-03", "end": "2026-04-02"}):
        _same(run("user_ranking", store, **params), run("user_ranking", store, use_cube=False, **params))


@pytest.mark.parametrize("layout", ["null", "running"])
def test_a_cube_written_with_running_cells_is_not_read_and_rebuilt_by_its_first_refresh(cubed_store, tmp_path,
                                                                                        layout):
    """A cube of an older version holds RUNNING jobs' cells: in their months (``running`` null, before the
    split) or in a partition ``month=running`` (``running`` true). The queries do not read it (they would count
    those jobs twice: per job and in the cells), and its first refresh rebuilds it."""
    store = tmp_path / "old"
    shutil.copytree(cubed_store, store)
    old = _cells(store)
    # an extra cell standing for a RUNNING job's: were it read, the answers would differ
    fake = old.head(1).with_columns(pl.lit(None if layout == "null" else True, dtype=pl.Boolean).alias("running"),
                                    (pl.col("jobs") + 1000).alias("jobs"), (pl.col("gpu_req_s") + 1e9).alias("gpu_req_s"))
    if layout == "null":
        old = old.with_columns(pl.lit(None, dtype=pl.Boolean).alias("running"))
    with Store(store).transaction() as tx:
        tx.tables[cube.TABLE] = []
        tx.layouts.pop(cube.TABLE)  # as an older version wrote it: no layout mark
        rows = pl.concat([old, fake])
        cube._write(tx, rows, cells.parts_of(rows))
        tx.derived_fresh = True
        assert cells.legacy(tx, cube.TABLE)
    assert bool([d for d in _files_by_part(store) if d.endswith("month=running")]) == (layout == "running")
    for params in ({}, {"start": "2026-03-03", "end": "2026-04-02"}):
        _same(run("user_ranking", store, **params), run("user_ranking", store, use_cube=False, **params))
    ingest([_next_month_job(tmp_path)], store, fmt="parquet")
    mended, rebuilt = _cells(store), _rebuilt_cells(store, tmp_path / "r")
    assert not mended["running"].any() and not mended["running"].null_count()
    _same(mended, rebuilt)
    with Store(store).transaction() as tx:
        assert tx.layouts[cube.TABLE] == cells.LAYOUT  # the next refresh opens no cube file to know it
        assert not cells.legacy(tx, cube.TABLE)
    for params in ({}, {"start": "2026-03-03", "end": "2026-04-02"}):
        _same(run("user_ranking", store, **params), run("user_ranking", store, use_cube=False, **params))
