"""The query loader and the CLI: names, parameters, includes, binding (never formatting), output formats."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import polars as pl
import polars.testing
import pytest

import queries
from queries.analytics import loader
from queries.store import Store

from test_queries_fixture import T0, build, fixture_jobs

REQUIRED = ("job_waste", "gap_area", "user_ranking", "team_ranking", "quota_backtest", "user_low_efficiency_jobs",
            "fairshare_attainment", "queue_waits")
NEEDS_USER = {"user_low_efficiency_jobs", "user_summary"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("loader_store"))


def test_required_queries_exist_and_document_their_parameters():
    names = queries.names()
    assert set(REQUIRED) <= set(names)
    assert not [n for n in names if n.startswith("_")]  # fragments are not queries
    for name in names:
        q = queries.load(name)
        assert q.description, name
        assert all(p.description for p in q.params), name
        assert not [line for line in q.sql.splitlines() if line.strip().startswith("-- include:")], name  # expanded


def test_common_filters_are_declared_where_they_apply():
    for name in REQUIRED + ("overview", "user_summary", "metric_pyramid", "job_timeline"):
        declared = {p.name for p in queries.load(name).params}
        assert {"start", "end", "cluster", "partition", "account_prefix", "state", "job_class", "user"} <= declared, name


def test_unknown_query_and_parameter_are_clear_errors(store):
    with pytest.raises(queries.QueryError, match="unknown query 'nope'.*job_waste"):
        queries.run("nope", store=store)
    with pytest.raises(queries.QueryError, match="unknown query"):
        queries.run("../store", store=store)
    with pytest.raises(queries.QueryError, match="has no parameter colour"):
        queries.run("job_waste", store=store, colour="red")
    with pytest.raises(queries.QueryError, match="bucket_s='wide' is not a double"):
        queries.run("gap_area", store=store, bucket_s="wide")
    with pytest.raises(queries.QueryError, match="is not a timestamp"):
        queries.run("job_waste", store=store, start="yesterday")


@pytest.mark.parametrize("evil", ["alice' or '1'='1", "alice'; drop table jobs; --", "%", "_", "*", "alice\\"])
def test_parameters_are_bound_not_formatted(store, evil):
    manifest = (store / "_manifest.json").read_text()
    assert queries.run("job_waste", store=store, user=evil).height == 0
    assert queries.run("job_waste", store=store, account_prefix=evil).height == 0
    assert queries.run("user_low_efficiency_jobs", store=store, user=evil).height == 0
    assert (store / "_manifest.json").read_text() == manifest
    assert queries.run("job_waste", store=store).height == 4  # nothing broke


def test_names_with_quotes_and_like_metacharacters_match_exactly(tmp_path):
    jobs = fixture_jobs().with_columns(
        pl.Series("user", ["o'brien", "o'brien", "bob", "bob", "x_y"]),
        pl.Series("account", ["a_b/c%d", "a_b/c%d", "axb/c", "other", "a_b"]))
    build(tmp_path, jobs=jobs)
    assert sorted(queries.run("job_waste", store=tmp_path, user="o'brien")["job_id"]) == ["j1", "j2"]
    # `a_b` is a subtree (itself and a_b/...), not the LIKE pattern a?b
    assert sorted(queries.run("job_waste", store=tmp_path, account_prefix="a_b")["job_id"]) == ["j1", "j2", "j5"]
    assert sorted(queries.run("job_waste", store=tmp_path, account_prefix="a_b/c%d")["job_id"]) == ["j1", "j2"]
    assert queries.run("job_waste", store=tmp_path, account_prefix="a%").height == 0


@pytest.mark.parametrize("name", queries.names())
def test_every_query_runs_on_an_empty_store(tmp_path, name):
    params = {"user": "nobody"} if name in NEEDS_USER else {}
    df = queries.run(name, store=tmp_path, **params)
    assert isinstance(df, pl.DataFrame)
    assert df.width > 0


# the statements the writers run over a connection binding only the tables they read
STATEMENTS = ("_job_rollup", "_job_day_rollup", "_usage_cube", "_usage_hours")


@pytest.mark.parametrize("name", [*queries.names(), *STATEMENTS])
def test_a_connection_binding_only_the_tables_a_query_names_gives_the_same_answer(store, name):
    """``loader.tables`` misses no table a query reads: DuckDB would fail on an unbound one (tables a connection
    with ``tables=`` leaves out are not defined, not empty), and the answer equals the full connection's."""
    params = {"user": "u1"} if name in NEEDS_USER else {}
    narrow, full = queries.connect(store, tables=loader.tables(name)), queries.connect(store)
    try:
        pl.testing.assert_frame_equal(loader.run(name, con=narrow, **params), loader.run(name, con=full, **params),
                                      check_exact=False, rel_tol=1e-9)
    finally:
        narrow.close()
        full.close()


def test_tables_are_the_words_outside_comments(store):
    assert {"jobs", "samples", "job_rollup"} <= loader.tables("_job_rollup")
    assert "usage_hours" not in loader.tables("_job_rollup")  # the biggest cell table: never bound by a rollup write
    assert loader.tables("_hour_cells") == {"job_rollup", "usage_hours"}
    unbound = queries.connect(store, tables=set())
    try:
        with pytest.raises(Exception, match="jobs"):
            unbound.sql("select count(*) from jobs").fetchall()
    finally:
        unbound.close()


def test_every_sql_file_is_ascii():
    # DuckDB's Python client maps a non-ASCII statement's tokens back to string indices char by char (about 30 ms
    # a statement for _job_usage's expansion), on every query the dashboard or an ingest runs
    for path in sorted(loader.SQL_DIR.glob("*.sql")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert line.isascii(), f"{path.name}:{number} is not ASCII: {line!r}"


def test_required_parameters_fail_clearly(store):
    import duckdb

    with pytest.raises(duckdb.Error, match="user parameter is required"):
        queries.run("user_low_efficiency_jobs", store=store)


def test_include_expansion(tmp_path, monkeypatch):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "_frag.sql").write_text("-- param: x integer 2  from the fragment\n-- param: y integer 5  y\n"
                                   "frag as (select $x::integer as x, $y::integer as y),\n")
    (sql / "top.sql").write_text("-- A query.\n-- param: y integer 7  overrides the fragment\nwith\n"
                                 "-- include: _frag\nlast as (select * from frag)\nselect * from last\n")
    (sql / "broken.sql").write_text("-- Broken.\nwith\n-- include: _missing\nselect 1\n")
    (sql / "_loop.sql").write_text("-- include: _loop\n")
    (sql / "cyclic.sql").write_text("-- Cyclic.\nwith\n-- include: _loop\nselect 1\n")
    monkeypatch.setattr(loader, "SQL_DIR", sql)
    queries.load.cache_clear()
    try:
        q = queries.load("top")
        assert q.description == "A query."
        assert [(p.name, p.default) for p in q.params] == [("y", 7), ("x", 2)]
        assert queries.names() == ["broken", "cyclic", "top"]
        assert queries.run("top", store=tmp_path).rows() == [(2, 7)]
        assert queries.run("top", store=tmp_path, x=3, y=4).rows() == [(3, 4)]
        with pytest.raises(queries.QueryError, match="include '_missing' not found"):
            queries.load("broken")
        with pytest.raises(queries.QueryError, match="is cyclic"):
            queries.load("cyclic")
    finally:
        queries.load.cache_clear()


def test_parameter_bounds_from_the_header(tmp_path, monkeypatch):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "bounded.sql").write_text(
        "-- Bounded.\n-- param: n integer 1 >=1  at least one\n-- param: f double 0.5 >0 <=1  a fraction\n"
        "-- param: start timestamp null  from\n-- param: end timestamp null  to\n"
        "select $n::integer as n, $f::double as f\n")
    (sql / "bad.sql").write_text("-- Bad.\n-- param: who varchar null >=1  a bound on text\nselect $who as who\n")
    monkeypatch.setattr(loader, "SQL_DIR", sql)
    queries.load.cache_clear()
    try:
        q = queries.load("bounded")
        assert [(p.name, p.bounds, p.description) for p in q.params[:2]] == [
            ("n", ((">=", 1.0),), "at least one"), ("f", ((">", 0.0), ("<=", 1.0)), "a fraction")]
        assert queries.run("bounded", store=tmp_path, n="1", f="1").rows() == [(1, 1.0)]  # bounds are inclusive
        for params, message in (({"n": "0"}, "n=0 must be >= 1"), ({"f": "0"}, "f=0.0 must be > 0"),
                                ({"f": "1.01"}, "f=1.01 must be <= 1"), ({"f": "inf"}, "f=inf is not a finite"),
                                ({"f": "nan"}, "f=nan is not a finite"),
                                ({"start": "2026-01-02", "end": "2026-01-01"}, "end 2026-01-01 00:00:00 is not after"),
                                ({"start": "2026-01-02", "end": "2026-01-02"}, "is not after start")):
            with pytest.raises(queries.QueryError, match=message):
                queries.run("bounded", store=tmp_path, **params)
        assert queries.run("bounded", store=tmp_path, start="2026-01-01", end="2026-01-01T00:00:01").height == 1
        with pytest.raises(queries.QueryError, match="bounds on a varchar"):
            queries.load("bad")
    finally:
        queries.load.cache_clear()


def test_budget_shares_is_optional(store):
    con = queries.connect(store)
    assert con.sql("select count(*) from budget_shares").fetchall() == [(0,)]
    con.close()


# ------------------------------------------------------------------ CLI
def _cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "dashboard.cli", "query", *args], capture_output=True, text=True,
                          timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_cli_formats(store):
    out = _cli("job_waste", "--store", str(store), "--param", f"start={T0.isoformat()}", "-p", "user=alice",
               "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["job_id"] for r in rows] == ["j1", "j2"]
    assert float(rows[0]["gpu_seconds_used"]) == pytest.approx(10800)
    data = json.loads(_cli("user_ranking", "--store", str(store), "--format", "json").stdout)
    assert [r["user"] for r in data] == ["bob", "alice", "carol"]
    assert data[2]["legacy_score"] is None
    waits = json.loads(_cli("queue_waits", "--store", str(store), "-f", "json").stdout)
    assert waits[-1]["job_class"] == "(all)"
    table = _cli("job_waste", "--store", str(store), "--limit", "2").stdout  # display limit: by job
    assert "j1" in table and "j2" in table and "j3" not in table and "2 more rows" in table
    top = _cli("job_waste", "--store", str(store), "-p", "limit_rows=1").stdout  # the query's top-N by waste
    assert "j3" in top and "j1" not in top and "more rows" not in top
    window = json.loads(_cli("window_bounds", "--store", str(store), "-f", "json").stdout)
    assert window[0]["first_submit"].startswith("2026-01-05T00:00:00")


def test_cli_list_and_errors(store):
    listing = _cli("--list").stdout
    for name in REQUIRED:
        assert f"\n{name}\n" in "\n" + listing
    assert "--param bucket_s=<double>" in listing
    bad = _cli("nope", "--store", str(store), check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("quotaloop query: unknown query 'nope'")
    assert len(bad.stderr.strip().splitlines()) == 1
    bad = _cli("job_waste", "--store", str(store), "-p", "colour=red", check=False)
    assert bad.returncode == 2 and "has no parameter colour" in bad.stderr
    bad = _cli("gap_area", "--store", str(store), "-p", "resource=disk", check=False)
    assert bad.returncode == 2 and "resource must be cpu, gpu or mem" in bad.stderr
    bad = _cli("job_waste", "--store", str(store), "-p", "user", check=False)
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr
    nulls = json.loads(_cli("job_waste", "--store", str(store), "-p", "user=null", "-f", "json").stdout)
    assert len(nulls) == 4  # `null` unsets a parameter


def test_store_untouched_by_queries(store):
    before = Store(store).manifest()
    for name in REQUIRED:
        queries.run(name, store=store, **({"user": "alice"} if name in NEEDS_USER else {}))
    assert Store(store).manifest() == before


def test_results_are_reproducible(tmp_path):
    """Bit-identical with one thread; DuckDB's parallel sums may only move the last bits (documented)."""
    from test_queries_random import random_store

    store = random_store(tmp_path, n_jobs=120)
    for name in ("gap_area", "user_ranking", "quota_backtest", "job_waste"):
        runs = []
        for _ in range(2):
            con = queries.connect(store, threads=1)
            runs.append(queries.run(name, con=con))
            con.close()
        assert runs[0].equals(runs[1]), name
        parallel = queries.run(name, store=store)
        assert parallel.columns == runs[0].columns and parallel.height == runs[0].height
        for col, dtype in parallel.schema.items():
            if dtype == pl.Float64:
                a, b = runs[0][col].fill_null(0.0).to_numpy(), parallel[col].fill_null(0.0).to_numpy()
                assert a == pytest.approx(b, rel=1e-12, abs=1e-9), (name, col)
            else:
                assert runs[0][col].to_list() == parallel[col].to_list(), (name, col)
