"""``queries.store.connect``: DuckDB keeps each file's parsed Parquet footer for the connection's life. The store's
footers carry the jobs' hashes (``keyindex``: about 9 MB a month at 10M jobs), and parsing them again for the
views' schema read and for every scan cost more than some queries at 10M jobs (queries/README.md, "Speed")."""
from __future__ import annotations

import datetime as dt

import polars as pl

import queries
from queries.ingest import ingest

UTC = dt.timezone.utc


def _store(tmp_path):
    t0 = dt.datetime(2025, 3, 1, tzinfo=UTC)
    jobs = pl.DataFrame({
        "cluster": ["c"] * 3, "job_id": ["1", "2", "3"], "user": ["a", "b", "a"], "account": ["x", "x", "y"],
        "state": ["COMPLETED"] * 3, "submit": [t0] * 3, "start": [t0] * 3,
        "end": [t0 + dt.timedelta(hours=h) for h in (1, 2, 3)], "req_cpus": [1.0, 2.0, 4.0], "req_gpus": [0.0] * 3})
    path = tmp_path / "jobs.parquet"
    jobs.write_parquet(path)
    ingest([str(path)], tmp_path / "store", fmt="parquet")
    return tmp_path / "store"


def test_a_connection_caches_the_parquet_footers_and_reads_the_same_rows(tmp_path):
    store = _store(tmp_path)
    con = queries.connect(store)
    try:
        assert con.sql("select current_setting('parquet_metadata_cache')").fetchall() == [(True,)]
        # the cached footers serve every later scan of the connection with the same rows
        first = con.sql("select job_id, req_cpus from jobs order by job_id").fetchall()
        again = con.sql("select job_id, req_cpus from jobs order by job_id").fetchall()
    finally:
        con.close()
    assert first == again == [("1", 1.0), ("2", 2.0), ("3", 4.0)]
