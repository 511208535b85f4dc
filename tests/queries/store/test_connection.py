"""``queries.store.connect``: DuckDB keeps each file's parsed Parquet footer for the connection's life. A store's
footers written before 2026-12-07 carry the jobs' hashes (``keyindex``: about 9 MB a month at 10M jobs), and
parsing them again for the views' schema read and for every scan cost more than some queries at 10M jobs
(queries/README.md, "Speed")."""
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


def test_a_writers_connection_is_bounded_and_spills_outside_the_store(tmp_path, monkeypatch):
    """The connection an ingest or a rebuild derives its rollups on (``connect(pending=tx)``) has a memory limit
    (uncapped, DuckDB takes 80 % of the machine: a 10M-job rebuild was killed at 21 GB) and spills to the
    system's temporary directory, never into the store; a reader's connection keeps its own setting."""
    from queries.store import Store, connection

    store = _store(tmp_path)
    seen = []
    real = connection.connect

    def spy(*args, **kwargs):
        con = real(*args, **kwargs)
        seen.append((kwargs.get("pending") is not None,
                     con.sql("select current_setting('memory_limit'), current_setting('temp_directory')").fetchall()[0]))
        return con

    monkeypatch.setattr(connection, "WRITE_MEMORY_LIMIT", "1GB")
    monkeypatch.setattr("queries.analytics.cells.connect", spy)  # every writer connects through cells
    from queries.analytics import rollup

    rollup.rebuild(store)
    writers = [s for pending, s in seen if pending]
    assert writers and all(limit in ("953.6 MiB", "1.0 GiB", "1GB") for limit, _ in writers), writers
    assert all(not temp.startswith(str(store)) for _, temp in writers)
    with Store(store).transaction() as tx:
        con = real(pending=tx, memory_limit="2GB")
        assert con.sql("select current_setting('memory_limit')").fetchall()[0][0] in ("1.8 GiB", "2.0 GiB", "2GB")
        con.close()
        tx.derived_fresh = True
