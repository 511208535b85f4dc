"""The one store -> engine-input loader (``dashboard.whatif.loader``): the ``replay_jobs`` query keeps exactly the
rows of ``engine.warm_start.window_filter`` (an independent Polars computation), by hand on a tiny store and on the
whole sample store, and ``workload`` gives what the engine takes."""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from dashboard.whatif import loader
from engine.warm_start import window_filter
from queries.store import schema
from queries.store import Store
from test_scenarios import h, job, write_store



def test_replay_jobs_by_hand(tmp_path):
    """Window [10 h, 20 h), lookback 5 h (so history must stop after 5 h): ``old`` ran 0-4 h (before the
    lookback: out), ``hist`` 2-6 h (stopped in the lookback: in), ``pin`` 8-12 h (running at 10 h: in), ``pend``
    submitted 9 h and started 11 h (pending at 10 h: in), ``new`` submitted 15 h (in), ``late`` submitted 20 h
    (at the end: out). Cold: only the jobs submitted in the window, ``new``."""
    rows = [job("old", "lab/a", 1, 0, 4), job("hist", "lab/a", 1, 2, 4), job("pin", "lab/b", 1, 8, 4),
            {**job("pend", "lab/b", 1, 9, 1), "start": h(11), "end": h(12)}, job("new", "lab/a", 1, 15, 1),
            job("late", "lab/a", 1, 20, 1)]
    store = write_store(tmp_path / "s", rows)
    warm = loader.replay_jobs(store, start=h(10), end=h(20), lookback_s=5 * 3600.0)
    assert sorted(warm["job_id"]) == ["hist", "new", "pend", "pin"]
    cold = loader.replay_jobs(store, start=h(10), end=h(20), warm_start=False)
    assert cold["job_id"].to_list() == ["new"]
    assert loader.replay_jobs(store, end=h(9)).height == 3  # no start: everything submitted before the end
    assert loader.replay_jobs(store, cluster="other").height == 0
    per = loader.clusters(store)
    assert per["cluster"].to_list() == ["c"] and loader.last_submit_end(per, "c") == h(20) + dt.timedelta(
        microseconds=1)


@pytest.mark.parametrize("warm", [True, False])
def test_replay_jobs_equals_the_engine_window_on_the_sample(warm, sample_store):
    jobs = Store(sample_store).read("jobs")
    end = jobs["submit"].max() + dt.timedelta(microseconds=1)
    start = end - dt.timedelta(days=5)
    keep = window_filter(start, end, 3 * 86400.0) if warm else (pl.col("submit") >= start) & (pl.col("submit") < end)
    want = schema.conform(jobs.filter(keep).sort("submit", "job_id"), "jobs")
    got, nodes = loader.load(sample_store, cluster="acme", start=start, end=end, warm_start=warm, lookback_s=3 * 86400.0)
    assert got.height > 1000 and got.equals(want) and got.schema == want.schema
    assert nodes.height == Store(sample_store).read("nodes").filter(pl.col("cluster") == "acme").height > 0
