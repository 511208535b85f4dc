"""The job summaries in the footer of every keyed store file (``queries.store.keyindex``): never a false negative,
no false positive but a hash collision, a file without one (or built by another hash) may hold anything, the RUNNING jobs listed
exactly; and an ingest of new jobs leaves every older file of the store as it was."""
from __future__ import annotations

import datetime as dt
import json

import numpy as np
import polars as pl

from queries.ingest import ingest
from queries.store import Store, keyindex

UTC = dt.timezone.utc


def _file(tmp_path, df: pl.DataFrame, table: str, name: str = "f.parquet") -> str:
    path = tmp_path / name
    df.write_parquet(path, metadata=keyindex.footer(df, table))
    return str(path)


def test_no_false_negative_and_no_false_positive(tmp_path):
    rng = np.random.default_rng(7)
    ids = [str(x) for x in rng.choice(10**9, size=20_000, replace=False)]
    path = _file(tmp_path, pl.DataFrame({"cluster": ["c"] * len(ids), "job_id": ids}), "samples")
    # every id of the file is found, one at a time and all together
    assert all(keyindex.may_hold(path, pl.Series([i])) for i in ids[:2000])
    assert keyindex.may_hold(path, pl.Series(ids))
    others = [f"x{i}" for i in range(20_000)]
    # 64-bit hashes: a false positive needs a collision (about 20,000^2 / 2^64 here)
    assert not any(keyindex.may_hold(path, pl.Series([o])) for o in others[:2000])
    assert not keyindex.may_hold(path, pl.Series(others))
    assert not keyindex.may_hold(path, pl.Series([], dtype=pl.String))


def test_a_file_without_a_usable_summary_may_hold_anything(tmp_path, monkeypatch):
    df = pl.DataFrame({"cluster": ["c"], "job_id": ["1"]})
    plain = tmp_path / "plain.parquet"
    df.write_parquet(plain)
    assert keyindex.may_hold(plain, pl.Series(["2"])) and keyindex.running(plain) is None
    assert not keyindex.has_summary(plain)
    indexed = _file(tmp_path, df, "jobs", "indexed.parquet")
    assert not keyindex.may_hold(indexed, pl.Series(["2"]))
    # a Polars whose hash no longer gives the recorded fingerprint: the filter is not trusted
    monkeypatch.setattr(keyindex, "_fingerprint", lambda: ["0", "0", "0", "0"])
    keyindex._cache.clear()
    assert keyindex.may_hold(indexed, pl.Series(["2"]))
    keyindex._cache.clear()


def test_running_jobs_are_listed_exactly(tmp_path):
    t = dt.datetime(2026, 3, 1, tzinfo=UTC)
    jobs = pl.DataFrame({"cluster": ["a", "a", "b", "b"], "job_id": ["1", "2", "1", "3"],
                         "state": ["RUNNING", "RUNNING", "COMPLETED", "RUNNING"],
                         "end": [None, t, t, None]}, schema_overrides={"end": pl.Datetime("us", "UTC")})
    path = _file(tmp_path, jobs, "jobs")
    assert sorted(keyindex.running(path).rows()) == [("a", "1"), ("b", "3")]
    assert keyindex.running(_file(tmp_path, jobs, "samples", "s.parquet")) is None


def test_open_rollup_rows_are_listed_exactly(tmp_path):
    rows = pl.DataFrame({"cluster": ["a", "a", "a", "b"], "job_id": ["1", "2", "3", "1"],
                         "t_start": [10.0, 10.0, None, 0.1 + 0.2], "t_end": [None, 20.0, None, None],
                         "samples_end_s": [15.5, 18.0, None, None]})
    path = _file(tmp_path, rows, "job_rollup")
    # a row with a run start and no run end (a never-started job has neither: not an open run); floats exact
    assert sorted(keyindex.open_rows(path).rows()) == [("a", "1", 10.0, 15.5), ("b", "1", 0.1 + 0.2, None)]
    assert keyindex.open_rows(_file(tmp_path, rows, "job_day_rollup", "d.parquet")) is None
    assert keyindex.open_rows(_file(tmp_path, rows.head(0), "job_rollup", "e.parquet")).height == 0


def test_a_day_of_new_jobs_leaves_every_older_file_as_it_was(tmp_path):
    """New jobs and their samples go into new files (their keys are in no older file's summary): the older jobs,
    samples and rollup files stay live, unread but for their footers. Their answers are checked elsewhere
    (tests/queries/analytics/test_rollup.py: incremental = rebuild)."""
    def day(k: int) -> list[str]:
        t = dt.datetime(2026, 3, 1 + k, tzinfo=UTC)
        ids = [f"{k}-{i}" for i in range(50)]
        jobs = pl.DataFrame({"cluster": ["c"] * 50, "job_id": ids, "state": ["COMPLETED"] * 50,
                             "submit": [t] * 50, "start": [t] * 50, "end": [t + dt.timedelta(hours=1)] * 50,
                             "req_cpus": [2.0] * 50})
        samples = pl.DataFrame({"cluster": ["c"] * 50, "job_id": ids, "ts": [t] * 50, "interval_s": [600.0] * 50,
                                "cpu_used": [1.0] * 50})
        paths = [tmp_path / f"jobs{k}.parquet", tmp_path / f"samples{k}.parquet"]
        jobs.write_parquet(paths[0])
        samples.write_parquet(paths[1])
        return [str(p) for p in paths]

    store = tmp_path / "store"
    ingest(day(0), store, fmt="parquet")
    before = json.loads((store / "_manifest.json").read_text())["tables"]
    ingest(day(1), store, fmt="parquet")
    after = json.loads((store / "_manifest.json").read_text())["tables"]
    for table in ("jobs", "samples", "job_rollup", "job_day_rollup"):
        assert set(before[table]) < set(after[table]), table  # kept, and one more file beside them
    assert Store(store).read("jobs").height == 100 and Store(store).read("job_rollup").height == 100
