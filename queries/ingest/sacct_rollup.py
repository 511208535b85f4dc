"""The step roll-up of sacct text dumps: which allocation row a step belongs to, repeated rows, and the per-job
values (``schema.JOBS``) from an allocation row and its steps. ``sacct`` parses and checks the rows; the rules
it documents for ``cpu_seconds_used``, ``max_rss_bytes``, GPU utilisation, requests and allocations are
computed here.

Invariants: the input frames hold valid rows only, in file order; a job key (cluster + JobID) occurs once in
``jobs``; every step row handed to ``rollup`` has a ``_jidx`` naming its job's row.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from ..store import schema
from . import common as c


def last_distinct(df: pl.DataFrame, key: str) -> pl.DataFrame:
    """Keep the last row of each ``key`` (file order): a re-listed job or step replaces the earlier one.

    Checked on a 64-bit hash first (equal keys have equal hashes, so no duplicate is missed); only when the
    hash sees duplicates is the exact, slower string check run.
    """
    if df.select(pl.col(key).hash().is_unique().all()).item():
        return df
    return df.filter(pl.col(key).is_last_distinct())


def parent_rows(jobs: pl.DataFrame, steps: pl.DataFrame, n_alloc_rows: int) -> pl.Series:
    """Row of each step's job in ``jobs`` (null: no such job). The nearest allocation row above the step is
    tried first (a cheap gather and compare); the rest are looked up by key through an Enum over the job keys,
    which are unique, so the Enum code of a key is its row."""
    where = np.full(max(n_alloc_rows, 1), -1, dtype=np.int64)
    where[jobs["_aord"].to_numpy()] = np.arange(jobs.height)
    aord = steps["_aord"].to_numpy()
    cand = np.where(aord >= 0, where[np.maximum(aord, 0)], -1)
    if jobs.height:
        hit = (cand >= 0) & (jobs["_key"].gather(np.maximum(cand, 0)) == steps["_pkey"]).fill_null(False).to_numpy()
    else:
        hit = np.zeros(len(cand), dtype=bool)
    rows = pl.Series("_jidx", np.where(hit, cand, -1)).replace(-1, None)
    if not hit.all():
        miss = ~hit
        found = steps.filter(pl.Series(miss)).select(pl.col("_pkey").cast(pl.Enum(jobs["_key"]), strict=False)
                                                     .to_physical().cast(pl.Int64))["_pkey"]
        rows = rows.scatter(np.flatnonzero(miss), found)
    return rows


def _pos(e: pl.Expr) -> pl.Expr:
    """The value where positive, else null (sacct prints 0 for "not allocated")."""
    return pl.when(e > 0).then(e)


def _scatter(n: int, idx: pl.Series, values: pl.Series) -> pl.Series:
    return pl.repeat(None, n, dtype=values.dtype, eager=True).scatter(idx, values).alias(values.name)


def aggregate_steps(per_step: pl.DataFrame) -> pl.DataFrame:
    """Per job (``_jidx``): sums, non-null counts and maxima of the step values.

    sacct lists steps right after their job, so ``_jidx`` is usually sorted; then contiguous segments are
    reduced with NumPy ``reduceat`` (NaN stands for null; ``fmax`` skips it), several times cheaper than a
    hash group-by. Unsorted input takes the group-by.
    """
    sums, maxes = ["one", "cpu", "w", "uw"], ["rss", "umax", "gmem", "cutil"]
    idx = per_step["_jidx"].to_numpy()
    if per_step.height == 0 or not per_step["_jidx"].is_sorted():
        col = pl.col
        return per_step.group_by("_jidx").agg(
            *[col(k).sum().alias(f"s_{k}") for k in sums], col("cpu").count().alias("s_ncpu"),
            *[col(k).max().alias(f"s_{k}") for k in maxes])
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    out = {"_jidx": idx[starts]}
    for k in sums + maxes:
        v = per_step[k].cast(pl.Float64).fill_null(np.nan).to_numpy()
        if k in sums:
            out[f"s_{k}"] = np.add.reduceat(np.nan_to_num(v, nan=0.0), starts)
        else:
            out[f"s_{k}"] = np.fmax.reduceat(v, starts)
        if k == "cpu":
            out["s_ncpu"] = np.add.reduceat((~np.isnan(v)).astype(np.int64), starts)
    return pl.DataFrame(out).with_columns(pl.col(f"s_{k}").fill_nan(None) for k in maxes)


def rollup(jobs: pl.DataFrame, steps: pl.DataFrame, has_totalcpu: bool, has_maxrss: bool) -> pl.DataFrame:
    """Valid allocation rows (one per key, ``_jidx`` = row) + their valid steps -> schema.JOBS rows."""
    col = pl.col
    cpu_row = col("_totalcpu") if has_totalcpu else col("_usercpu") + col("_systemcpu")
    cpus_row = pl.coalesce(_pos(col("_alloccpus")), _pos(col("_ncpus")), _pos(col("_alloctres_cpu")))
    rss_row = col("_maxrss") if has_maxrss else col("_umem")
    util_row = (cpu_row / (_pos(col("_elapsed")) * cpus_row))
    # Elapsed-weighted mean GPU utilisation; a weight of at least 1 s keeps zero-length steps counted
    w = pl.when(col("_util_ave").is_not_null()).then(pl.max_horizontal(col("_elapsed").fill_null(0), 1.0))
    # row-level values first, so the group-by only runs plain (fast-path) aggregations
    per_step = steps.lazy().select(
        "_jidx", pl.lit(1.0).alias("one"), cpu_row.alias("cpu"), rss_row.alias("rss"), pl.coalesce(col("_util_max"), col("_util_ave")).alias("umax"),
        col("_gmem").alias("gmem"), util_row.alias("cutil"), w.alias("w"), (col("_util_ave") * w).alias("uw")
    ).collect()
    agg = aggregate_steps(per_step)
    started = col("_start").is_not_null()
    n = jobs.height
    jobs = c.on_distinct(jobs, "jobname", {"_name_class": c.name_class_expr(col("jobname"))})
    # everything below is one lazy query: Polars computes a subexpression the outputs share once and the
    # independent outputs in parallel (the eager API does neither)
    j = jobs.with_columns(_scatter(n, agg["_jidx"], agg[k]) for k in agg.columns if k != "_jidx").lazy()
    w_job = w.fill_null(0)
    # sacct -X (no step rows) reports zero usage: for a job that ran, that is "unknown", not "idle"
    unknown = started & (col("_elapsed").fill_null(0) > 0) & col("s_one").fill_null(0).eq(0) & cpu_row.eq(0)
    j = j.with_columns(
        pl.when(unknown).then(None).otherwise(pl.max_horizontal(cpu_row, pl.when(col("s_ncpu") > 0).then(col("s_cpu"))))
        .alias("_cpu_used"),
        pl.when(unknown).then(None).otherwise(util_row).alias("_job_cutil"))
    j = j.with_columns(
        pl.max_horizontal(rss_row, col("s_rss")).alias("_rss"),
        pl.max_horizontal(col("_util_max"), col("_util_ave"), col("s_umax")).alias("_umax"),
        pl.max_horizontal(col("_gmem"), col("s_gmem")).alias("_gmax"),
        pl.max_horizontal(col("_job_cutil"), col("s_cutil")).alias("_cutil"),
        pl.when(w_job + col("s_w").fill_null(0) > 0).then(
            (col("_util_ave").fill_null(0) * w_job + col("s_uw").fill_null(0))
            / (w_job + col("s_w").fill_null(0))).alias("_umean"),
    )

    started = col("_start").is_not_null()
    nodes = pl.coalesce(col("_nnodes"), _pos(col("_allocnodes")), col("_reqnodes"), col("_alloctres_nodes"),
                        col("_reqtres_nodes"))
    req_cpus = pl.coalesce(col("_reqcpus"), col("_reqtres_cpu"), _pos(col("_alloccpus")), _pos(col("_ncpus")),
                           col("_alloctres_cpu"))
    gpu_type = pl.coalesce(col("_reqtres_gpu_type"), col("_alloctres_gpu_type"), col("_reqgres_gpu_type"),
                           col("_allocgres_gpu_type"))
    req_gpus = pl.coalesce(col("_reqtres_gpus"), col("_reqgres_gpus"), col("_alloctres_gpus"),
                           col("_allocgres_gpus"))
    alloc_gpus = pl.when(started).then(pl.coalesce(col("_alloctres_gpus"), col("_allocgres_gpus")))
    per = col("_reqmem_per")
    mult = pl.when(per == "n").then(nodes.fill_null(1)).when(per == "c").then(req_cpus.fill_null(1)).otherwise(1.0)

    def text(k: str) -> pl.Expr:
        s = col(k).str.strip_chars()
        return pl.when(s != "").then(s)

    def util(e: pl.Expr) -> pl.Expr:
        # Slurm sums gres/gpuutil over the GPUs a task uses: above 100 % it is divided by the job's GPUs
        return pl.when(e > 1).then(e / pl.max_horizontal(pl.coalesce(alloc_gpus, req_gpus), 1)).otherwise(e).clip(0, 1)

    elapsed = pl.coalesce(col("_elapsed"), col("_elapsedraw"),
                          (col("_end") - col("_start")).dt.total_microseconds() / 1e6, pl.when(~started).then(0.0))
    out = j.select(
        text("cluster").alias("cluster"), col("jobid").alias("job_id"),
        pl.when(col("jobid").str.contains("_", literal=True)).then(
            col("jobid").str.slice(0, col("jobid").str.find("_", literal=True))).alias("array_job_id"),
        text("jobname").alias("job_name"), text("user").alias("user"), text("account").alias("account"),
        text("partition").alias("partition"), text("qos").alias("qos"),
        c.job_class_expr(col("qos"), col("jobname"), req_gpus, name_class=col("_name_class")).alias("job_class"),
        col("_state").alias("state"), text("exitcode").alias("exit_code"),
        col("_submit").alias("submit"), col("_start").alias("start"), col("_end").alias("end"),
        elapsed.alias("elapsed_s"), pl.coalesce(col("_timelimit"), col("_timelimitraw") * 60).alias("time_limit_s"),
        nodes.cast(pl.Int32).alias("nodes"),
        pl.when(~text("nodelist").is_in(["None assigned", "(null)", "None"])).then(text("nodelist")).alias("node_list"),
        req_cpus.alias("req_cpus"), req_gpus.alias("req_gpus"), gpu_type.alias("gpu_type"),
        pl.coalesce(_pos(col("_reqmem")) * mult, _pos(col("_reqtres_mem_bytes")), _pos(col("_alloctres_mem_bytes")))
        .alias("req_mem_bytes"),
        pl.when(started).then(pl.coalesce(col("_alloccpus"), col("_ncpus"), col("_alloctres_cpu"))).alias("alloc_cpus"),
        alloc_gpus.alias("alloc_gpus"), pl.when(started).then(col("_alloctres_mem_bytes")).alias("alloc_mem_bytes"),
        col("_cpu_used").alias("cpu_seconds_used"), col("_rss").alias("max_rss_bytes"),
        util(col("_umean")).alias("mean_gpu_util"),
        util(col("_umax")).alias("max_gpu_util"), col("_cutil").clip(0, 1).alias("max_cpu_util"),
        col("_gmax").alias("gpu_mem_used_bytes"),
        col("_min_runtime_s").alias("min_runtime_s"),
        col("_priority").alias("priority"),
    ).collect()
    return schema.conform(out, "jobs")
