"""The gaming check, on real history: split one user's jobs into N pieces and re-score everyone.

DOMAIN.md section 3: a metric that sets quota is an incentive. A user who splits each job into N equal jobs does
the same work with the same waste; a sound score must not improve. The legacy score divides by
ln(job_count / 10 + 1), so it does.

``split_jobs`` is pure. ``rescore`` writes two scratch stores (the history as it was, and with the user's jobs
split) through the real ``Store`` and runs the real ``user_ranking`` query on both, so the comparison uses the
production scoring code, not a re-implementation. Both stores drop the user's utilisation samples, so that in
both the user's usage comes from the same job totals (split pieces have new job ids that no sample names).

Invariants of ``split_jobs``: every piece keeps the job's request (CPUs, GPUs, memory); the pieces of a job tile
its run interval [start, end) exactly and their usage totals sum to the job's; jobs of other users and jobs that
never started are unchanged.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl

from queries.store import Store

SCORE_COLUMNS = ["job_count", "gpu_hours_wasted", "rec_efficiency", "rec_confidence", "rec_demand",
                 "rec_coefficient", "legacy_score", "legacy_rank", "legacy_coefficient"]


def split_jobs(jobs: pl.DataFrame, user: str, n: int) -> pl.DataFrame:
    """``jobs`` with each started job of ``user`` replaced by ``n`` back-to-back pieces of equal length."""
    if n < 1:
        raise ValueError("n must be >= 1")
    mine = (pl.col("user") == user) & pl.col("start").is_not_null() & pl.col("end").is_not_null()
    keep, split = jobs.filter(~mine), jobs.filter(mine)
    if n == 1 or split.is_empty():
        return jobs
    dur = pl.col("end") - pl.col("start")
    pieces = []
    for k in range(n):
        piece_start = pl.col("start") + dur * k / n
        piece_end = pl.col("start") + dur * (k + 1) / n if k < n - 1 else pl.col("end")
        pieces.append(split.with_columns(
            (pl.col("job_id") + f".split{k}").alias("job_id"),
            (pl.col("submit") if k == 0 else piece_start).alias("submit"),
            piece_start.alias("start"),
            piece_end.alias("end"),
            (pl.col("elapsed_s") / n).alias("elapsed_s"),
            (pl.col("time_limit_s") / n).alias("time_limit_s"),
            (pl.col("cpu_seconds_used") / n).alias("cpu_seconds_used"),
        ))
    return pl.concat([keep, *pieces], how="vertical_relaxed")


def rescore(jobs: pl.DataFrame, samples: pl.DataFrame, nodes: pl.DataFrame, user: str, n: int,
            run_query, params: dict) -> pl.DataFrame:
    """metric, before, after_split, change for ``user``; ``run_query(name, store, **params)`` runs a query."""
    if "job_id" in samples.columns and samples.height:
        mine = set(jobs.filter(pl.col("user") == user)["job_id"].to_list())
        samples = samples.filter(~pl.col("job_id").is_in(mine))
    rows = {}
    with tempfile.TemporaryDirectory(prefix="quotaloop-gaming-") as tmp:
        for label, frame in (("before", jobs), ("after_split", split_jobs(jobs, user, n))):
            root = Path(tmp) / label
            with Store(root).transaction() as tx:
                tx.upsert("jobs", frame)
                if samples.height:
                    tx.upsert("samples", samples)
                for cluster in nodes["cluster"].unique().to_list() if nodes.height else []:
                    tx.replace_nodes(cluster, nodes.filter(pl.col("cluster") == cluster))
            ranking = run_query("user_ranking", str(root), **params)
            row = ranking.filter(pl.col("user") == user)
            rows[label] = row.row(0, named=True) if row.height else {}
    out = []
    for col in SCORE_COLUMNS:
        b, a = rows["before"].get(col), rows["after_split"].get(col)
        change = None if b is None or a is None else a - b
        out.append({"metric": col, "before": None if b is None else float(b),
                    "after_split": None if a is None else float(a), "change": change})
    return pl.DataFrame(out, schema={"metric": pl.String, "before": pl.Float64, "after_split": pl.Float64,
                                     "change": pl.Float64})
