"""queries.store.extent: a table's first / last instant and row count from its footers equal a scan of its rows,
and it declines (None) whenever a footer cannot say."""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dashboard_fixture as fx
from queries.store import Store
from queries.store.extent import extent

UTC = dt.timezone.utc
LAST = ("submit", "start", "end")


def _scanned(files):
    """The same three figures from every row, as the dashboard computed them before (the oracle)."""
    lf = pl.scan_parquet(files, hive_partitioning=False, missing_columns="insert", extra_columns="ignore")
    row = lf.select(pl.col("submit").min().alias("first"),
                    pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max()).alias("last"),
                    pl.len().alias("rows")).collect().row(0)
    return row


def _frame(rows):
    return pl.DataFrame(rows, schema={"submit": pl.Datetime("us", "UTC"), "start": pl.Datetime("us", "UTC"),
                                      "end": pl.Datetime("us", "UTC"), "job_id": pl.String}, orient="row")


def test_extent_equals_a_scan_on_a_store(tmp_path):
    files = Store(fx.build(tmp_path / "s")).files("jobs")
    got = extent(files, "submit", LAST)
    assert got is not None and tuple(got) == _scanned(files)
    assert got.rows == pl.scan_parquet(files).select(pl.len()).collect().item() > 0


def test_extent_reads_every_row_group_and_skips_all_null_groups_and_missing_columns(tmp_path):
    t = dt.datetime(2025, 3, 1, tzinfo=UTC)
    h = dt.timedelta(hours=1)
    # row groups of 2 rows: the latest end sits in the last group, the earliest submit in the middle, and one
    # group has no start and no end at all (PENDING jobs)
    a = _frame([(t + 5 * h, t + 6 * h, t + 7 * h, "1"), (t + 4 * h, t + 5 * h, t + 9 * h, "2"),
                (t + 8 * h, None, None, "3"), (t + 9 * h, None, None, "4"),
                (t + 1 * h, t + 2 * h, None, "5"), (t + 3 * h, t + 40 * h, t + 41 * h, "6")])
    a.write_parquet(tmp_path / "a.parquet", row_group_size=2, statistics=True)
    # a second file without the end column, whose start is the latest instant of all
    b = a.head(1).with_columns(start=pl.lit(t + 50 * h, dtype=pl.Datetime("us", "UTC"))).drop("end")
    b.write_parquet(tmp_path / "b.parquet", statistics=True)
    files = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    got = extent(files, "submit", LAST)
    assert tuple(got) == (t + 1 * h, t + 50 * h, 7) == _scanned(files)
    assert tuple(extent(files[:1], "submit", LAST)) == (t + 1 * h, t + 41 * h, 6)


def test_extent_declines_without_statistics_and_on_a_bad_footer(tmp_path):
    t = dt.datetime(2025, 3, 1, tzinfo=UTC)
    _frame([(t, t, t, "1")]).write_parquet(tmp_path / "plain.parquet", statistics=False)
    assert extent([tmp_path / "plain.parquet"], "submit", LAST) is None
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    assert extent([tmp_path / "bad.parquet"], "submit", LAST) is None
    # an all-null column needs no statistics: it holds no value (and the others still answer)
    _frame([(t, None, None, "1")]).write_parquet(tmp_path / "nulls.parquet", statistics=True)
    assert tuple(extent([tmp_path / "nulls.parquet"], "submit", LAST)) == (t, t, 1)


def test_extent_of_no_rows(tmp_path):
    _frame([]).write_parquet(tmp_path / "empty.parquet", statistics=True)
    assert tuple(extent([tmp_path / "empty.parquet"], "submit", LAST)) == (None, None, 0)
    assert tuple(extent([], "submit", LAST)) == (None, None, 0)


_instant = st.one_of(st.none(), st.integers(0, 10**6).map(lambda s: dt.datetime(2025, 1, 1, tzinfo=UTC)
                                                             + dt.timedelta(seconds=s, microseconds=s % 7)))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_instant, _instant, _instant), min_size=1, max_size=40),
       group=st.integers(1, 7))
def test_extent_equals_a_scan_on_random_files(tmp_path_factory, rows, group):
    path = tmp_path_factory.mktemp("x") / "f.parquet"
    _frame([(*r, str(i)) for i, r in enumerate(rows)]).write_parquet(path, row_group_size=group, statistics=True)
    got = extent([path], "submit", LAST)
    if got is None:  # only a writer that leaves out statistics may make it decline
        pytest.fail("declined on a file written with statistics")
    assert tuple(got) == _scanned([path])
