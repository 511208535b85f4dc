"""dashboard.data.pool: the dashboard's DuckDB connections are reused across queries, one thread at a time each,
never after an error, and closed with their store version."""
from __future__ import annotations

import threading

import duckdb
import polars as pl
import pytest

import dashboard_fixture as fx
import queries
from dashboard import data
from dashboard.data import query_cache
from dashboard.data.pool import ConnectionPool


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return fx.build(tmp_path_factory.mktemp("pool") / "s")


def _is_closed(con) -> bool:
    try:
        con.execute("select 1")
    except duckdb.ConnectionException:
        return True
    return False


def test_sequential_queries_share_one_connection(store):
    pool = ConnectionPool(lambda: queries.connect(store))
    with pool.connection() as a:
        n = a.sql("select count(*) from jobs").fetchall()[0][0]
    with pool.connection() as b:
        assert b.sql("select count(*) from jobs").fetchall()[0][0] == n == fx.jobs_frame().height
    assert a is b and pool.opened == 1 and not _is_closed(a)
    pool.close()
    assert _is_closed(a)


def test_concurrent_queries_get_their_own_connections(store):
    pool = ConnectionPool(lambda: queries.connect(store))
    inside = threading.Barrier(3)
    held: list = []

    def work():
        with pool.connection() as con:
            held.append(con)
            inside.wait(timeout=30)  # all three hold a connection at once
            con.sql("select count(*) from samples").fetchall()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(c) for c in held}) == 3 and pool.opened == 3
    with pool.connection() as again:  # handed back: reused, no fourth
        assert again in held
    assert pool.opened == 3
    pool.close()
    assert all(_is_closed(c) for c in held)


def test_a_failed_query_closes_its_connection_and_the_idle_ones_are_bounded(store):
    pool = ConnectionPool(lambda: queries.connect(store), max_idle=1)
    with pytest.raises(duckdb.Error):
        with pool.connection() as bad:
            bad.sql("select * from no_such_table").fetchall()
    assert _is_closed(bad)
    with pool.connection() as a, pool.connection() as b:
        assert a is not bad and b is not bad
    assert pool.opened == 3
    assert _is_closed(a) != _is_closed(b)  # one kept idle, the other closed (max_idle 1)
    pool.close()
    with pool.connection() as late:  # a pool closed while a connection was out closes it on return
        pass
    assert _is_closed(late)


def test_the_dashboard_reuses_connections_until_the_store_changes(store, monkeypatch):
    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    query_cache._run.clear()
    query_cache.connections.clear()
    flt = data.Filters()
    data.query("overview", flt)
    data.query("user_ranking", flt)
    token = data.store_token()
    pool = query_cache.connections(str(store), token, query_cache.config().memory_limit)
    assert pool.opened == 1
    from queries.store import Store

    with Store(store).transaction() as tx:  # a new ingest: a new store version
        tx.upsert("jobs", fx.jobs_frame().head(1).with_columns(pl.lit("zz1").alias("job_id")))
    assert data.store_token() != token
    assert data.query("overview", flt)["jobs"][0] == fx.jobs_frame().height + 1  # read through a new pool
    assert pool.opened == 1
    query_cache.connections.clear()  # Streamlit drops the pools: their connections are closed
    assert pool._closed and not pool._idle
