"""The named queries with the per-job usage rollup (``job_rollup``) against the same queries derived from the raw
samples, on a generated store (``bench_queries.build_store``: default 1,000,000 jobs and 10,000,000 samples,
``QUOTALOOP_BENCH_ROLLUP_JOBS`` to change it), with ratios against a bare DuckDB aggregate over the **jobs table
alone** at the query's grain (the samples are not read), measured in the same run.

Per query: the rollup-backed run (the store as ingest leaves it), the raw run (the same store with its rollup
hidden: ``job_rollup`` registered empty, every job derived from its samples, as before the rollup) and the bare
jobs aggregate, alternately ``QUOTALOOP_BENCH_REPEATS`` times (default 2), best of each, wall-clock and CPU
seconds of every DuckDB thread. 2 threads, ``memory_limit`` ``QUOTALOOP_BENCH_MEMORY`` (default 4GB). Also
timed: ``rollup.rebuild`` of the whole store, and one more day of jobs and samples ingested into the big store
against the same day into an empty store (the incremental refresh's cost is proportional to what the day
touches, not to the store). Nothing is asserted but that both runs return the same rows (this is a measurement;
see the printed table), and that the ingest's DuckDB work fits ``memory_limit`` without spilling (below). The
store is cached under ``QUOTALOOP_BENCH_CACHE``/rollup-jobs-N between runs, or taken from
``QUOTALOOP_BENCH_ROLLUP_STORE`` (e.g. bench_queries' 10M store; set ``QUOTALOOP_BENCH_ROLLUP_JOBS`` to its job
count, which sizes the day). The ingest runs on a copy of the store made of hard links (a writer only adds files
and replaces the manifest by rename, so the original is never changed), so a 10 GB store costs no copy.
``QUOTALOOP_BENCH_DAY_JOBS`` sets the day's jobs (default: 1/365 of a month's generated jobs, about 72 at 1M,
kept for comparison with the figures measured before; a real day of a 10M-job year is 10M / 365 = 27,397).

The ingest's DuckDB connections are opened with ``memory_limit`` ``QUOTALOOP_BENCH_MEMORY`` and may not spill
(``max_temp_directory_size`` 0: a spill is DuckDB's out-of-memory error, which fails the test). Polars' part of
the ingest is not bounded by that limit; the ingest processes' peak RSS is printed beside. ``QUOTALOOP_BENCH_SPILL=1``
allows spilling (to time an ingest that does not fit).

Run: ``python -m pytest tests/benchmarks/bench_rollup.py -m benchmark -s`` (or ``scripts/bench -k rollup``).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import queries
from queries.analytics import rollup
from queries.store import Store, keyindex, schema

from bench_queries import CACHE, US, _consumed, _j_aggs, _jobs_chunk, _samples_chunk, _time, build_store

N_JOBS = int(os.environ.get("QUOTALOOP_BENCH_ROLLUP_JOBS", "1000000"))
MEMORY = os.environ.get("QUOTALOOP_BENCH_MEMORY", "4GB")
REPEATS = int(os.environ.get("QUOTALOOP_BENCH_REPEATS", "2"))

_COLS = ("cluster", "job_id", "user", "account", "start", "end", "elapsed_s", "req_cpus", "req_gpus",
         "req_mem_bytes", "cpu_seconds_used", "max_rss_bytes", "mean_gpu_util", "max_cpu_util")


def _jobs_only(key: str | None) -> str:
    inner = f"select {key + ', ' if key else ''}{_j_aggs(_COLS)} from jobs" + (" group by all" if key else "")
    return _consumed(inner)


# query, params, the bare jobs aggregate at its grain
CASES = [
    ("job_waste", {}, "cluster, job_id"),
    ("user_ranking", {}, '"user"'),
    ("team_ranking", {"team_level": 2}, "account"),
    ("overview", {}, None),
    ("metric_pyramid", {}, "account"),
    ("user_low_efficiency_jobs", {"user": "u7"}, "cluster, job_id"),
    ("gap_area", {"bucket_s": 86400.0, "resource": "gpu", "group_by": "team"},
     "account, epoch_us(start) // 86400000000"),
    ("quota_backtest", {}, '"user", epoch_us(start) // 604800000000'),
    ("job_waste", {"start": "2025-03-01", "end": "2025-04-01"}, "cluster, job_id"),
]


DAY_JOBS = int(os.environ.get("QUOTALOOP_BENCH_DAY_JOBS", "0"))  # 0: the historical day (N_JOBS / 365 / 31)


@pytest.fixture(scope="module")
def rolled_store() -> Path:
    root = Path(os.environ.get("QUOTALOOP_BENCH_ROLLUP_STORE", CACHE / f"rollup-jobs-{N_JOBS}"))
    t = time.perf_counter()
    build_store(root, n_jobs=N_JOBS)
    built = time.perf_counter() - t
    rows = Store(root).files("job_rollup") if (root / "_manifest.json").exists() else []
    stale = not rows or "samples_end_s" not in pl.read_parquet_schema(rows[0])
    # files written before the footers' job summaries: the rebuild writes them (one-off, like a migration)
    stale = stale or not all(keyindex.is_current(f) for f in Store(root).files("jobs"))
    # rollup files written before their footers listed the rows without a run end (keyindex.open_rows)
    stale = stale or any(keyindex.open_rows(f) is None for f in rows)
    hours = Store(root).files("usage_hours") if rows else []  # hour cells from before the open runs' own cells
    stale = stale or bool(hours) and "open_run" not in pl.read_parquet_schema(hours[0])
    stale = stale or _bound_open_runs(root)
    if not (root / "job_day_rollup").is_dir() or stale:  # built by an older layout, or not yet
        t, c = time.perf_counter(), time.process_time()
        n = rollup.rebuild(root, threads=2)
        print(f"\nrollup.rebuild: {n:,} rows in {time.perf_counter() - t:.1f} s (cpu {time.process_time() - c:.1f})")
    print(f"\nstore {root}: {N_JOBS:,} jobs (ready in {built:.1f} s)")
    return root


def _bound_open_runs(root: Path) -> bool:
    """Whether the rollup was written before an open run's row could hold without a run end: some RUNNING job
    without an end whose samples end by its row's ``t_end`` still has one (the next ingest would re-derive them
    all, once: an upgrade's cost, not a day's)."""
    jobs, rows = Store(root).files("jobs"), Store(root).files("job_rollup")
    open_runs = (pl.scan_parquet(jobs).filter((pl.col("state") == "RUNNING") & pl.col("end").is_null())
                 .select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String)))
    bound = (pl.scan_parquet(rows).filter(pl.col("t_start").is_not_null() & pl.col("t_end").is_not_null()
                                          & (pl.col("samples_end_s").is_null()
                                             | (pl.col("samples_end_s") <= pl.col("t_end"))))
             .select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String)))
    return bool(bound.join(open_runs, on=["cluster", "job_id"], how="semi").head(1).collect().height)


def _connect(store: Path, raw: bool):
    extra = {"job_rollup": schema.empty("job_rollup")} if raw else None
    con = queries.connect(store, threads=2, memory_limit=MEMORY, extra=extra)
    con.execute("set preserve_insertion_order = false")
    return con


@pytest.mark.benchmark
def test_queries_with_the_rollup_against_the_raw_derivation(rolled_store):
    rolled, raw = _connect(rolled_store, False), _connect(rolled_store, True)
    n_samples = rolled.sql("select count(*) from samples").fetchall()[0][0]
    print(f"{N_JOBS:,} jobs, {n_samples:,} samples; seconds, best of {REPEATS} (CPU seconds of all threads); "
          "ratios against the bare jobs aggregate at the query's grain")
    for name, params, key in CASES:
        best = {"rollup": [], "raw": [], "jobs": []}
        out = {}
        for _ in range(REPEATS):
            best["jobs"].append(_time(lambda key=key: rolled.sql(_jobs_only(key)).fetchall())[0])
            r, out["rollup"] = _time(lambda name=name, params=params: queries.run(name, con=rolled, **params))
            best["rollup"].append(r)
            r, out["raw"] = _time(lambda name=name, params=params: queries.run(name, con=raw, **params))
            best["raw"].append(r)
        assert_frame_equal(out["rollup"], out["raw"], check_exact=False, rel_tol=1e-9, abs_tol=1e-6)
        w = {k: min(x[0] for x in v) for k, v in best.items()}
        c = {k: min(x[1] for x in v) for k, v in best.items()}
        label = name + ("" if not params.get("start") else " (1 month)")
        print(f"{label:26s} rollup {w['rollup']:6.2f} s (cpu {c['rollup']:6.2f}) {w['rollup'] / w['jobs']:5.1f}x   "
              f"raw {w['raw']:6.2f} s (cpu {c['raw']:6.2f}) {w['raw'] / w['jobs']:5.1f}x   "
              f"jobs aggregate {w['jobs']:5.2f} s (cpu {c['jobs']:5.2f})   raw/rollup {w['raw'] / w['rollup']:4.1f}x "
              f"(cpu {c['raw'] / c['rollup']:4.1f}x)", flush=True)
    rolled.close()
    raw.close()


def _one_day(tmp: Path, first_id: int) -> list[str]:
    """A day of jobs (1/365 of the store's jobs) and their samples as canonical Parquet files."""
    rng = np.random.default_rng(99)
    n = DAY_JOBS * 31 if DAY_JOBS else max(N_JOBS // 365, 100)  # a month's worth, of which the first day is kept
    day_end = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)  # the day's export: jobs still running then are RUNNING
    jobs, run = _jobs_chunk(rng, first_id, n, 12, int(day_end.timestamp() * US))  # month 12 = 2026-01: after the year
    jobs = jobs.filter(pl.col("submit") < day_end)
    samples = schema.conform(_samples_chunk(rng, run, 10), "samples").join(jobs.select("cluster", "job_id"),
                                                                         on=["cluster", "job_id"], how="semi")
    paths = [tmp / "day-jobs.parquet", tmp / "day-samples.parquet"]
    jobs.write_parquet(paths[0])
    samples.write_parquet(paths[1])
    return [str(p) for p in paths]


@pytest.mark.benchmark
def test_one_more_day_into_the_big_store_against_an_empty_one(rolled_store, tmp_path):
    """Best of ``REPEATS`` (each on a fresh copy of the big store, and a fresh empty store), wall and CPU seconds
    of ``ingest`` (DuckDB's and Polars' threads included), each ingest in a process of its own, as a daily cron
    job runs it (until 2026-12-07 they ran in this process, where day B found the footers day A had parsed).
    Day A is the first ingest since the store was built (it records the cluster's first snapshot: the RUNNING
    jobs whose samples reach past their run end are re-derived); day B, the next day (A shifted by a day, new
    ids), is then timed into the store that holds A: the steady state of a daily ingest.

    Measured 2026-12-02 at 1 M jobs / 9.9 M samples (load average 14-26 on 2 cores; compare CPU seconds), the
    store rebuilt with the footers' job summaries: day A 2.0 CPU-s against 0.44 into an empty store (4.6x; 5.5
    against 0.39, 14x, before the summaries), day B 1.06 CPU-s against 0.49 (2.2x; wall 1.5x). At 3 M
    (``QUOTALOOP_BENCH_ROLLUP_STORE`` /tmp/tenm-3m, cube, no hour cells), day B after the cell-scoped refresh of
    the cells (``queries.analytics.cells.refresh``): 5.72 CPU-s against 1.24 (4.6x; 9.61 against 1.33, 7.2x,
    before it, same session, load average 15); README "Speed". 2026-12-06, 1 M, quiet machine, each store rebuilt
    by its code: day A 6.41 CPU-s against 0.88 (7.3x) with the cell partitions in files by user (16.25 against
    0.97, 16.8x, with one file per partition), day B 1.77 against 0.89 (2.0x; before 1.75 against 0.97).
    Later that day, with open runs out of their users' cells: 1 M day A 3.12 against 0.66 (4.7x), day B 1.33
    against 0.53; 3 M day A 5.71 against 0.59 (9.7x), day B 2.13 against 0.50 (README "Speed"). 2026-12-07, open
    runs' rows without a run end and writers binding only their tables: day B 1M 1.15 against 0.71 (1.6x; 1.32
    against 0.61 before, same session), 3M 1.82 against 0.79 (2.3x; 2.00 against 0.70 before). Later, open runs'
    rows listed in the rollup footers and ASCII SQL: 3M day B 1.55 against 0.66 (2.4x; 1.92 against 0.72 before,
    alternating runs). Later, each ingest in its own process, the key hashes beside the files: 3M day B 1.66
    against 0.85 CPU-s (1.9x; wall 1.41 against 0.80, 1.8x); 10M (its first run with the rollups) day B 1.50
    against 0.72 (2.1x; wall 1.30 against 0.66, 2.0x), day A 16.4 against 0.74 (22x; README "Speed")."""
    paths = _one_day(tmp_path, 10 * N_JOBS)
    shifted = _next_day(tmp_path, paths)
    best = {"empty": [], "big": [], "empty B": [], "big B": []}
    rss = []
    for k in range(REPEATS):
        big = tmp_path / f"big{k}"
        shutil.copytree(rolled_store, big, copy_function=os.link)  # the writer never changes a file in place
        for label, store, day in (("empty", tmp_path / f"empty{k}", paths), ("big", big, paths),
                                  ("empty B", tmp_path / f"emptyB{k}", shifted), ("big B", big, shifted)):
            wall, cpu, peak = _ingest_in_a_new_process(store, day)
            best[label].append((wall, cpu))
            rss.append(peak)
            print(f"{label:8s} {wall:7.2f} s (cpu {cpu:6.2f})", flush=True)
        shutil.rmtree(big)
    w = {k: min(x[0] for x in v) for k, v in best.items()}
    c = {k: min(x[1] for x in v) for k, v in best.items()}
    n_day = pl.read_parquet(paths[0]).height
    for tag, name in (("", "one more day"), (" B", "the day after (steady state)")):
        print(f"\n{name} ({n_day:,} jobs): into the {N_JOBS:,}-job store {w['big' + tag]:.2f} s "
              f"(cpu {c['big' + tag]:.2f}), into an empty store {w['empty' + tag]:.2f} s (cpu {c['empty' + tag]:.2f}), "
              f"ratio {w['big' + tag] / w['empty' + tag]:.1f}x (cpu {c['big' + tag] / c['empty' + tag]:.1f}x)")
    print(f"every ingest's DuckDB connections ran within memory_limit {MEMORY} "
          f"{'(spilling allowed)' if os.environ.get('QUOTALOOP_BENCH_SPILL') == '1' else 'without spilling'}; peak RSS of an "
          f"ingest's process {max(rss):.2f} GiB (Polars included)")


# One ingest, as a daily cron job runs it: a process of its own, so nothing a previous ingest read or parsed is
# still in memory. Timed around ``ingest`` only (the imports are the same for both stores).
_CHILD = """
import json, os, sys, time
sys.path.insert(0, {here!r})
import duckdb
import bench_rollup
from queries.ingest import ingest
duckdb.connect = bench_rollup._no_spill(duckdb.connect)
t, c = time.perf_counter(), time.process_time()
ingest(sys.argv[2:], sys.argv[1], fmt="parquet")
# VmHWM, not ru_maxrss: that one keeps the peak of the process it was forked from (this benchmark's, which may
# have rebuilt the store)
peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps([time.perf_counter() - t, time.process_time() - c, peak_kib / 2**20]))
"""


def _ingest_in_a_new_process(store: Path, day: list[str]) -> tuple[float, float, float]:
    """Wall and CPU seconds of ``ingest(day, store)`` in a new process, and its peak RSS in GiB; a failure (a
    DuckDB spill included) fails the benchmark."""
    code = _CHILD.format(here=str(Path(__file__).resolve().parent))
    out = subprocess.run([sys.executable, "-c", code, str(store), *day], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def _no_spill(connect):
    """``duckdb.connect`` with ``memory_limit`` MEMORY (unless the caller sets one) and no temporary directory
    space: whatever would spill raises ``duckdb.OutOfMemoryException`` instead."""
    def wrapped(*args, config=None, **kwargs):
        config = {"memory_limit": MEMORY, **(config or {})}
        if os.environ.get("QUOTALOOP_BENCH_SPILL", "0") != "1":  # =1: spilling allowed (to time it anyway)
            config["max_temp_directory_size"] = "0KB"
        return connect(*args, config=config, **kwargs)
    return wrapped


def _next_day(tmp: Path, paths: list[str]) -> list[str]:
    """``_one_day``'s files shifted by one day, with new job ids."""
    day, more = dt.timedelta(days=1), N_JOBS
    jobs = pl.read_parquet(paths[0]).with_columns(pl.col("submit", "start", "end") + day,
                                                  (pl.col("job_id").cast(pl.Int64) + more).cast(pl.String))
    samples = pl.read_parquet(paths[1]).with_columns(pl.col("ts") + day,
                                                     (pl.col("job_id").cast(pl.Int64) + more).cast(pl.String))
    out = [tmp / "next-jobs.parquet", tmp / "next-samples.parquet"]
    jobs.write_parquet(out[0])
    samples.write_parquet(out[1])
    return [str(p) for p in out]
