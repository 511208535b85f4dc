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
from engine.replay import expand_hostlist
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
    """The node layout of ``cluster`` (all nodes when None), canonical columns: the store's ``nodes`` table, else
    (a store ingested without a node list, as most ``sacct`` dumps are) the layout ``infer_nodes`` reads from the
    jobs' node lists, else an empty frame."""
    nodes = Store(store).read("nodes")
    nodes = nodes if cluster is None else nodes.filter(pl.col("cluster") == cluster)
    if nodes.height:
        return nodes
    return infer_nodes(queries.run("replay_node_usage", store, cluster=cluster))


def layout_inferred(store, cluster: str | None = None) -> bool:
    """Whether ``replay_nodes`` reads the layout from the jobs (the store has no node list for ``cluster``)."""
    nodes = Store(store).read("nodes")
    return (nodes if cluster is None else nodes.filter(pl.col("cluster") == cluster)).is_empty()


NO_LAYOUT = ("the store has no node list for this cluster and no job names the nodes it ran on; the simulator "
             "needs a layout: ingest a nodes CSV (node,partition,cpus,gpus,gpu_type,mem_bytes) with the jobs")
INFERRED_NOTE = ("node layout inferred from the jobs' node lists (each node's most GPUs / cores / memory held at "
                 "once; no partitions or GPU types): ingest a node list for the real one")


def infer_nodes(held: pl.DataFrame) -> pl.DataFrame:
    """A node layout from what jobs held (``replay_node_usage`` rows): every node a job's hostlist names, with
    the most GPUs, cores and memory the log shows allocated on it at once, a job's whole allocation split evenly
    over its nodes (GPUs and cores rounded up to whole units).

    It is a lower bound of the real layout (a node never seen full looks smaller) with no partition, GPU type
    or state, and no memory bound where no job's memory is known: a replay on it places every job the log placed, and the page says the layout is inferred.
    Invariants: at an instant where one job stops and another starts, the stop comes first (as in the engine);
    a job still running (no stop) holds its share to the end of the log; the result is sorted by cluster and
    node, so the same log gives the same layout."""
    out_schema = schema.polars_schema("nodes")
    if held.is_empty():
        return pl.DataFrame(schema=out_schema)
    names = {text: expand_hostlist(text) for text in held["node_list"].unique().to_list()}
    x = (held.with_columns(pl.col("node_list").replace_strict(names, return_dtype=pl.List(pl.String)).alias("node"))
         .with_columns(pl.col("node").list.len().alias("k"))
         .filter(pl.col("k") > 0)
         .with_columns((pl.col(c) / pl.col("k")).alias(c) for c in ("gpus", "cpus", "mem_bytes"))
         .explode("node"))
    share = [pl.col(c).fill_null(0.0) for c in ("gpus", "cpus", "mem_bytes")]
    starts = x.select("cluster", "node", pl.col("start").alias("t"), pl.lit(1).alias("kind"),
                      *[s.alias(c) for s, c in zip(share, ("g", "c", "m"))])
    stops = x.filter(pl.col("stop").is_not_null()).select(
        "cluster", "node", pl.col("stop").alias("t"), pl.lit(0).alias("kind"),
        *[(-s).alias(c) for s, c in zip(share, ("g", "c", "m"))])
    most = (pl.concat([starts, stops])
            .sort("cluster", "node", "t", "kind", nulls_last=True)
            .with_columns(pl.col(c).cum_sum().over("cluster", "node").alias(c) for c in ("g", "c", "m"))
            .group_by("cluster", "node").agg(pl.col("g").max(), pl.col("c").max(), pl.col("m").max())
            .sort("cluster", "node", nulls_last=True))
    tol = 1e-9  # an even split summed back (three thirds of a GPU) must not round up to one more unit
    has_mem = held["mem_bytes"].is_not_null().any()
    return pl.DataFrame({
        "cluster": most["cluster"], "node": most["node"],
        "partition": pl.Series([None] * most.height, dtype=pl.String),
        "cpus": (most["c"] - tol).ceil().clip(lower_bound=0.0) + 0.0,  # + 0.0: no -0.0
        "gpus": (most["g"] - tol).ceil().clip(lower_bound=0.0) + 0.0,
        "gpu_type": pl.Series([None] * most.height, dtype=pl.String),
        # no memory seen on a node is unknown (unbounded for the engine), not a node of 0 bytes
        "mem_bytes": most["m"].replace(0.0, None) if has_mem else pl.Series([None] * most.height, dtype=pl.Float64),
        "state": pl.Series([None] * most.height, dtype=pl.String),
    }, schema=out_schema)


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
