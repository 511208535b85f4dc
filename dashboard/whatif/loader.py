"""The one store -> engine-input loader: the job rows of a replay through the query layer, the conversion to
the simulator's workload in one function.

Used by the Fair share page (``dashboard.data.sim``), ``quotaloop scenario`` (``runner.load_inputs``) and
``quotaloop simulate --store``. The rows come from the named queries ``replay_jobs`` (the window's jobs:
warm-start set, cold window or everything before an end) and ``replay_clusters`` (which clusters there are and
their last submit); ``workload`` turns rows into what ``engine.simulate`` takes.

Invariants: ``replay_jobs`` keeps exactly the rows of ``engine.warm_start.window_filter`` (warm) or of
``submit in [start, end)`` (cold); ``workload`` holds the store's canonical job columns and dtypes
(``queries.store.schema``) in (submit, job_id) order, ties in store order, so the same store and window give the
same workload, row for row, whichever caller loads it.
"""
from __future__ import annotations

import datetime as dt

import polars as pl

import queries
from engine.config import WEEK_S
from queries.store import schema
from queries.store import Store


def replay_jobs(store, *, cluster: str | None = None, start=None, end=None, warm_start: bool = True,
                lookback_s: float = WEEK_S) -> pl.DataFrame:
    """The job rows a replay of [start, end) needs (the ``replay_jobs`` query; unconverted)."""
    return queries.run("replay_jobs", store, cluster=cluster, start=start, end=end, warm_start=warm_start,
                       lookback_s=lookback_s)


def workload(jobs: pl.DataFrame) -> pl.DataFrame:
    """Job rows -> the engine's workload: the canonical jobs columns and dtypes, sorted by (submit, job_id)."""
    return schema.conform(jobs, "jobs").sort("submit", "job_id", maintain_order=True)


def replay_nodes(store, cluster: str | None = None) -> pl.DataFrame:
    """The node layout of ``cluster`` (all nodes when None), canonical columns."""
    nodes = Store(store).read("nodes")
    return nodes if cluster is None else nodes.filter(pl.col("cluster") == cluster)


def clusters(store) -> pl.DataFrame:
    """cluster, jobs, first_submit, last_submit per cluster of the store's jobs (null cluster last)."""
    return queries.run("replay_clusters", store)


def load(store, *, cluster: str | None = None, start=None, end=None, warm_start: bool = True,
         lookback_s: float = WEEK_S) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(workload, nodes) of a replay of [start, end) of ``cluster`` (every cluster when None)."""
    rows = replay_jobs(store, cluster=cluster, start=start, end=end, warm_start=warm_start, lookback_s=lookback_s)
    return workload(rows), replay_nodes(store, cluster)


def last_submit_end(per_cluster: pl.DataFrame, cluster: str | None) -> dt.datetime | None:
    """One microsecond after the last submit of ``cluster`` (every cluster when None): the default window end,
    exclusive. None when there are no jobs."""
    rows = per_cluster if cluster is None else per_cluster.filter(pl.col("cluster") == cluster)
    last = rows["last_submit"].max() if rows.height else None
    return None if last is None else last + dt.timedelta(microseconds=1)
