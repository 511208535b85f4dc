"""Comparison frames of a baseline and a scenario run, for charts and text: occupancy over time, attainment
and waits side by side, headline rows, durations.

Pure (Polars frames and metric dicts in, frames out; no Streamlit, no store access).

Invariants: ``occupancy_series`` buckets tile [start, end) and integrate to the allocated resource-hours; the
frames never invent a value a run did not measure (absent = null).
"""
from __future__ import annotations

import math

import polars as pl


def occupancy_series(result, bucket_s: float = 3600.0, start=None, end=None, resource: str = "gpus") -> pl.DataFrame:
    """GPUs (``resource="cpus"``: CPU cores) allocated per bucket from a run's node x time timeline: t and the
    resource's column (mean over the bucket).

    Buckets tile [start, end) (default: the timeline's first start to its last end) and none begins at ``end``:
    a bucket starting at the window's end would hold nothing and draw a drop to 0 that reads as "the cluster
    emptied". A last bucket cut short by ``end`` is the mean over its own length, so sum(gpus x bucket length)
    is the allocated GPU-hours."""
    tl = result.timeline.filter(pl.col("end") > pl.col("start")).select("start", "end", pl.col(resource).alias("gpus"))
    if tl.is_empty():
        return pl.DataFrame(schema={"t": pl.Datetime("us", "UTC"), resource: pl.Float64})
    us = int(bucket_s * 1e6)
    t0 = start if start is not None else tl["start"].min()
    t1 = end if end is not None else tl["end"].max()
    edges = pl.datetime_range(t0, t1, interval=f"{us}us", eager=True, time_zone="UTC", closed="left")
    grid = pl.DataFrame({"t": edges}).with_columns(
        pl.min_horizontal(pl.col("t") + pl.duration(microseconds=us), pl.lit(t1, dtype=pl.Datetime("us", "UTC")))
        .alias("t_end"))
    # exact overlap of every allocation interval with every bucket it touches (piecewise-constant sum)
    joined = grid.join_where(tl.select("start", "end", "gpus"), pl.col("start") < pl.col("t_end"),
                             pl.col("end") > pl.col("t"))
    over = joined.with_columns(
        ((pl.min_horizontal("end", "t_end") - pl.max_horizontal("start", "t")).dt.total_microseconds()
         / (pl.col("t_end") - pl.col("t")).dt.total_microseconds() * pl.col("gpus")).alias("g"))
    return grid.join(over.group_by("t").agg(pl.col("g").sum().alias(resource)), on="t", how="left") \
        .select("t", pl.col(resource).fill_null(0.0)).sort("t")


def waits_frame(base_metrics: dict, scen_metrics: dict, quantile: str = "p90") -> pl.DataFrame:
    """Per job class: the wait quantile in hours, baseline vs scenario."""
    a = base_metrics.get("wait_s_by_class") or {}
    b = scen_metrics.get("wait_s_by_class") or {}
    rows = [dict(job_class=c, baseline=_h((a.get(c) or {}).get(quantile)), scenario=_h((b.get(c) or {}).get(quantile)))
            for c in sorted(set(a) | set(b))]
    return pl.DataFrame(rows, schema={"job_class": pl.String, "baseline": pl.Float64, "scenario": pl.Float64})


def _h(seconds):
    return None if seconds is None else seconds / 3600.0


def _fmt_dur(seconds) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "–"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


fmt_duration = _fmt_dur
