"""Small files merged by size tier (``queries.store.store``, ``MERGE_FANIN``): many small ingests (a cron job's
logs of the last hours) leave each partition a bounded number of files per size tier, and the store's rows -
ingested and derived - are exactly those of the same ingests with merging off."""
from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from queries.ingest import ingest
from queries.store import Store, keyindex, schema
from queries.store import store as store_module

from test_rollup import T0, _random_frames


TABLES = ("jobs", "samples", "job_rollup", "job_day_rollup", "usage_cube")
SORT = {"samples": ["cluster", "job_id", "ts"], "job_day_rollup": ["cluster", "job_id", "day_s"],
        "usage_cube": ["cluster", "submit", "running", "user", "account", "day_lo_s", "day_hi_s"]}


def _slices(tmp_path, seed: int, hours: int = 6) -> list[str]:
    """A cron job's files: every ``hours`` hours the jobs submitted and the samples taken in them, then the
    RUNNING jobs again as ended (a late file that touches old partitions)."""
    jobs, samples = _random_frames(seed, n_jobs=240)
    paths = []
    for k in range(0, 7 * 24, hours):
        lo, hi = T0 + dt.timedelta(hours=k), T0 + dt.timedelta(hours=k + hours)
        for name, frame, col in (("jobs", jobs, "submit"), ("samples", samples, "ts")):
            part = frame.filter((pl.col(col) >= lo) & (pl.col(col) < hi))
            if part.height:
                path = tmp_path / f"{name}-{k:03d}.parquet"
                part.write_parquet(path)
                paths.append(str(path))
    ended = jobs.filter(pl.col("state") == "RUNNING").with_columns(
        pl.lit("COMPLETED").alias("state"), pl.lit(T0 + dt.timedelta(days=8)).alias("end"))
    ended.write_parquet(tmp_path / "ended.parquet")
    return paths + [str(tmp_path / "ended.parquet")]


def _tier(size: int) -> int:
    tier, bound = 0, store_module.MERGE_BASE_BYTES * store_module.MERGE_FANIN
    while size >= bound:
        tier, bound = tier + 1, bound * store_module.MERGE_FANIN
    return tier


def _per_partition(root: Path, table: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rel in Store(root).manifest()["tables"].get(table, []):
        out.setdefault(rel.rsplit("/", 1)[0], []).append(rel)
    return out


def test_many_small_ingests_keep_few_files_and_the_same_rows(tmp_path, monkeypatch):
    paths = _slices(tmp_path, 1, hours=12)
    assert len(paths) > 20
    # a small base so that these few-KB files spread over several tiers
    monkeypatch.setattr(store_module, "MERGE_BASE_BYTES", 2 << 10)
    merged, plain = tmp_path / "merged", tmp_path / "plain"
    most = Counter()  # the most files a table had at once
    for path in paths:
        ingest([path], merged, fmt="parquet")
        for table in ("jobs", "samples", "job_rollup", "job_day_rollup"):
            parts = _per_partition(merged, table)
            for rel_dir, files in parts.items():
                tiers = Counter(_tier(os.stat(merged / r).st_size) for r in files)
                # at most FANIN - 1 files a tier before an upsert, plus the file it writes
                assert max(tiers.values()) <= store_module.MERGE_FANIN, (path, table, rel_dir, tiers)
            most[table, "merged"] = max(most[table, "merged"], sum(map(len, parts.values())))
    monkeypatch.setattr(store_module, "MERGE_FANIN", 10**9)  # merging off: a file per ingest and partition
    for path in paths:
        ingest([path], plain, fmt="parquet")
        most["jobs", "plain"] = max(most["jobs", "plain"], sum(map(len, _per_partition(plain, "jobs").values())))
    monkeypatch.undo()
    # new jobs always go into a new file (a job's later samples and derived rows are rewritten in the file that
    # holds it, so those tables gain fewer files anyway)
    assert most["jobs", "merged"] < most["jobs", "plain"] / 2, most

    for table in TABLES:
        a, b = Store(merged).read(table), Store(plain).read(table)
        keys = SORT.get(table, ["cluster", "job_id"])
        assert a.height == b.height > 0
        # derived figures are floating-point sums whose order DuckDB does not fix
        assert_frame_equal(a.sort(keys), b.sort(keys), check_exact=table in ("jobs", "samples"), rel_tol=1e-9,
                           abs_tol=1e-6)
    # every merged file's footer still names all its jobs (no false negative after a merge)
    for table in keyindex.INDEXED:
        for rel in Store(merged).manifest()["tables"].get(table, []):
            ids = pl.read_parquet(merged / rel, columns=["job_id"])["job_id"].unique()
            assert keyindex.is_current(merged / rel)
            assert all(keyindex.may_hold(merged / rel, ids.slice(i, 1)) for i in range(ids.len()))


def test_big_files_are_never_merged(tmp_path, monkeypatch):
    """Files of MERGE_MAX_BYTES and more stay as they are: a merge rewrites only small files."""
    paths = _slices(tmp_path, 3)
    monkeypatch.setattr(store_module, "MERGE_MAX_BYTES", 1)  # every file counts as big
    store = tmp_path / "store"
    for path in paths[:12]:
        ingest([path], store, fmt="parquet")
    before = set(Store(store).manifest()["tables"]["jobs"])
    ingest(paths[12:14], store, fmt="parquet")
    after = set(Store(store).manifest()["tables"]["jobs"])
    # the new jobs of a new slice go into new files; the old files of their month stay (none holds their keys)
    assert before - after == set()
    assert len(after) > len(before)
    assert schema.conform(Store(store).read("jobs"), "jobs").height == Store(store).read("jobs").height
