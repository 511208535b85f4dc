"""More cross-checks on the random store of test_queries_random: every ranking filter and order, and the
back-test's terms per day, against the Polars reference (an independent computation, not the SQL)."""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import queries
from queries.store import Store

from test_queries_random import DAY, T0, _close, reference_job_waste, store  # noqa: F401


def test_backtest_terms_equal_the_ranking_of_each_period(store, tmp_path):
    """Per user and day, the back-test's raw terms are user_ranking's with that day as the window: on a store
    whose samples stick out of their jobs and whose jobs span days, with null levels and missing usage.
    (RUNNING jobs are left out here: this store has no recorded snapshot; test_queries_snapshot checks them.)"""
    st = Store(store)
    with Store(tmp_path).transaction() as tx:
        tx.upsert("jobs", st.read("jobs").filter(pl.col("state") != "RUNNING"))
        tx.upsert("samples", st.read("samples"))
    store = tmp_path
    back = queries.run("quota_backtest", store=store, period_s=DAY, origin=T0, cluster="east", min_jobs=1)
    assert back["period_k"].n_unique() >= 10
    checked = 0
    for (start,), part in back.filter(pl.col("job_count") > 0).group_by("period_start"):
        ranking = {r["user"]: r for r in queries.run("user_ranking", store=store, cluster="east", start=start,
                                                     end=start + dt.timedelta(days=1)).iter_rows(named=True)}
        for row in part.iter_rows(named=True):
            r = ranking[row["user"]]
            assert row["job_count"] == r["job_count"], (start, row["user"])
            for col in ("rec_efficiency", "rec_confidence", "rec_demand"):
                assert _close(row[col], r[col], rel=1e-9, abs_=1e-12), (start, row["user"], col, row[col], r[col])
            assert _close(row["raw_coefficient"], r["rec_coefficient"], rel=1e-9, abs_=1e-12)
            assert _close(row["legacy_coefficient"], r["legacy_coefficient"], rel=1e-9, abs_=1e-12)
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("filters", [
    dict(cluster="west"), dict(partition="gpu"), dict(account_prefix="org/a"), dict(account_prefix="lab"),
    dict(state="COMPLETED"), dict(cluster="east", state="FAILED", start=T0 + dt.timedelta(days=1),
                                  end=T0 + dt.timedelta(days=6)),
])
def test_rankings_with_filters_match_polars(store, filters):
    """Each filter of the rankings (cluster, partition, account subtree, state, window) against the Polars
    reference filtered the same way."""
    w0, w1 = filters.get("start"), filters.get("end")
    jobs = Store(store).read("jobs").select("cluster", "job_id", "partition")
    ref = reference_job_waste(store, w0, w1).join(jobs, on=["cluster", "job_id"])
    for key in ("cluster", "partition", "state"):
        if key in filters:
            ref = ref.filter(pl.col(key) == filters[key])
    if "account_prefix" in filters:
        p = filters["account_prefix"]
        ref = ref.filter((pl.col("account") == p) | pl.col("account").str.starts_with(p + "/"))
    assert ref.height > 5
    got = {r["user"]: r for r in queries.run("user_ranking", store=store, **filters).iter_rows(named=True)}
    def null_sum(e):  # SQL's sum: null when every value is (unknown usage), not Polars' 0
        return pl.when(e.is_not_null().any()).then(e.sum())

    per = ref.group_by("user").agg(n=pl.len(), gpu_wasted=null_sum(pl.col("gpu_req") - pl.col("gpu_used")) / 3600,
                                   cpu_wasted=null_sum(pl.col("cpu_req") - pl.col("cpu_used")) / 3600)
    assert set(got) == set(per["user"])
    for r in per.iter_rows(named=True):
        g = got[r["user"]]
        assert g["job_count"] == r["n"]
        assert _close(g["gpu_hours_wasted"], r["gpu_wasted"]) and _close(g["cpu_hours_wasted"], r["cpu_wasted"])
    teams = queries.run("team_ranking", store=store, team_level=2, **filters)
    assert teams["job_count"].sum() == ref.height
    assert teams["gpu_hours_wasted"].sum() == pytest.approx(per["gpu_wasted"].sum(), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("order_by, col, descending", [
    ("gpu", "gpu_hours_wasted", True), ("cpu", "cpu_hours_wasted", True), ("mem", "mem_tb_hours_wasted", True),
    ("equiv", "wasted_gpu_equiv_hours", True), ("legacy", "legacy_score", False),
    ("recommended", "rec_coefficient", True)])
def test_ranking_order(store, order_by, col, descending):
    got = queries.run("user_ranking", store=store, order_by=order_by)
    values = got[col].to_list()
    present = [v for v in values if v is not None]
    assert present == sorted(present, reverse=descending)
    assert values[:len(present)] == present  # unknown values last
    if order_by != "legacy":
        rank = {"gpu": "rank_gpu_wasted", "cpu": "rank_cpu_wasted", "mem": "rank_mem_wasted",
                "equiv": "rank_equiv_wasted"}.get(order_by)
        if rank:
            assert got[rank].to_list() == sorted(got[rank].to_list())
