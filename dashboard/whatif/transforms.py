"""What each scenario kind changes: the workload (requests) or the budget tree (shares, versions); min runtimes
are configuration (``SimConfig.min_runtime_by_class``, resolved by ``engine.min_runtime``), not a rewrite of the jobs.

Pure functions of frames and trees (no Streamlit, no store access). Invariants:
- inputs are never mutated: each returns a new frame / tree;
- a warm start's jobs that started before the window start run exactly as logged, so no workload transform
  touches them (``as_logged_before`` restores their logged values after any transform);
- ``rightsize`` never raises a request and never touches run times, submit times or usage columns; a job
  whose usage is unknown keeps its request;
- ``with_multipliers`` keeps every version of the tree and adds one per multiplier date; a version's leaf
  shares are the tree's in force at that instant times the bucket's latest multiplier; internal nodes,
  guarantees and caps are untouched (the loop moves budget between sibling teams, never across groups).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import math

import polars as pl

from engine import budgets as bt
from queries.store.units import GIB

USAGE_COLUMNS = ("used_cpus", "used_mem_gb", "used_gpus")


def with_usage(jobs: pl.DataFrame) -> pl.DataFrame:
    """Add what each job used per second of its run, from the log, before any request changes: ``used_cpus``
    (CPU-seconds / run time), ``used_mem_gb`` (peak RSS, GB) and ``used_gpus`` (requested GPUs x mean
    utilisation); null where the log does not know. The engine carries extra columns to every attempt row, so
    both runs keep them and a row's use is the rate x its own run time (``runner.usage_metrics``)."""
    run = pl.col("elapsed_s").cast(pl.Float64)
    cols = [pl.when(run > 0).then(pl.col("cpu_seconds_used").cast(pl.Float64) / run).alias("used_cpus")
            if "cpu_seconds_used" in jobs.columns else pl.lit(None, dtype=pl.Float64).alias("used_cpus"),
            (pl.col("max_rss_bytes").cast(pl.Float64) / 1e9).alias("used_mem_gb")
            if "max_rss_bytes" in jobs.columns else pl.lit(None, dtype=pl.Float64).alias("used_mem_gb"),
            (pl.coalesce("req_gpus", "alloc_gpus").cast(pl.Float64) * pl.col("mean_gpu_util").cast(pl.Float64))
            .alias("used_gpus") if "mean_gpu_util" in jobs.columns else pl.lit(None, dtype=pl.Float64).alias("used_gpus")]
    return jobs.with_columns(cols)


def rightsize(jobs: pl.DataFrame, margin: float = 0.2, gpus: str = "whole") -> pl.DataFrame:
    """Requests replaced by use x (1 + margin) (see ``spec``): CPUs, memory, and small GPU users' GPU count."""
    run = pl.col("elapsed_s").cast(pl.Float64)
    f = 1.0 + margin
    used_cpus = pl.col("cpu_seconds_used").cast(pl.Float64) / run
    new_cpus = pl.max_horizontal((used_cpus * f).ceil(), pl.lit(1.0))
    req_cpus = pl.col("req_cpus").cast(pl.Float64)
    cpus = (pl.when(used_cpus.is_not_null() & (run > 0) & req_cpus.is_not_null())
            .then(pl.min_horizontal(new_cpus, req_cpus)).otherwise(req_cpus))
    req_mem = pl.col("req_mem_bytes").cast(pl.Float64)
    new_mem = pl.max_horizontal((pl.col("max_rss_bytes").cast(pl.Float64) * f / GIB).ceil(), pl.lit(1.0)) * GIB
    mem = (pl.when(pl.col("max_rss_bytes").is_not_null() & req_mem.is_not_null())
           .then(pl.min_horizontal(new_mem, req_mem)).otherwise(req_mem))
    out = jobs.with_columns(cpus.alias("req_cpus"), mem.alias("req_mem_bytes"))
    if gpus != "keep" and "mean_gpu_util" in jobs.columns:
        req_g = pl.col("req_gpus").cast(pl.Float64)
        need = req_g * pl.col("mean_gpu_util").cast(pl.Float64) * f
        single = pl.col("nodes").fill_null(1) <= 1 if "nodes" in jobs.columns else pl.lit(True)
        small = single & (req_g >= 1) & need.is_not_null() & (need < 1.0)
        # engine requests are milli-GPUs: a fraction is rounded up to 1/1000 of a GPU (and at least 1/100)
        value = pl.lit(1.0) if gpus == "whole" else pl.max_horizontal((need * 1000).ceil() / 1000, pl.lit(0.01))
        out = out.with_columns(pl.when(small).then(pl.min_horizontal(value, req_g)).otherwise(req_g).alias("req_gpus"))
    # the engine falls back to alloc_* when a request is null: keep them consistent with the new requests
    return out.with_columns(*(pl.coalesce(r, a).alias(a) for r, a in
                              (("req_cpus", "alloc_cpus"), ("req_mem_bytes", "alloc_mem_bytes"),
                               ("req_gpus", "alloc_gpus")) if a in out.columns and r in out.columns))


def as_logged_before(logged: pl.DataFrame, changed: pl.DataFrame, start) -> pl.DataFrame:
    """``changed`` with every row whose logged start lies before ``start`` back to its ``logged`` values (the
    warm start's pinned jobs: those still running at ``start`` and the lookback history); ``start`` None (a
    cold start) changes nothing. Rows are matched by position: transforms keep rows and their order."""
    if start is None or changed is logged or "start" not in logged.columns:
        return changed
    before = (logged["start"].is_not_null() & (logged["start"] < start)).fill_null(False)
    if not before.any():
        return changed
    cols = [c for c in changed.columns if c in logged.columns and not changed[c].equals(logged[c])]
    return changed.with_columns(pl.when(before).then(logged[c]).otherwise(changed[c]).alias(c) for c in cols)


def unknown_paths(budgets: bt.BudgetTree, paths) -> list[str]:
    known = {p for v in budgets.versions for p in v.root.index}
    return sorted(p for p in paths if p not in known)


def with_multipliers(tree: bt.BudgetTree, multipliers: pl.DataFrame) -> bt.BudgetTree:
    """The tree with ``multipliers`` (effective_from, bucket, multiplier) applied as effective-dated versions."""
    if multipliers.is_empty():
        return tree
    dates = sorted(set(multipliers["effective_from"].to_list()))
    cuts = sorted({v.start for v in tree.versions if v.start is not None} | set(dates))
    rows = multipliers.sort("effective_from").iter_rows(named=True)
    by_date: dict[dt.datetime, dict[str, float]] = {}
    for r in rows:
        by_date.setdefault(r["effective_from"], {})[r["bucket"]] = float(r["multiplier"])

    def in_force(t) -> dict[str, float]:
        out: dict[str, float] = {}
        for d in dates:
            if d <= t:
                out.update(by_date[d])
        return out

    def scaled(root: bt.BudgetNode, mult: dict[str, float]) -> bt.BudgetNode:
        def walk(node):
            kids = tuple(walk(c) for c in node.children)
            share = node.share * mult[node.path] if node.is_leaf and node.path in mult else node.share
            return dataclasses.replace(node, children=kids, share=share)
        return walk(root)

    versions = [tree.versions[0]] + [bt.BudgetVersion(t, scaled(tree.at(t), in_force(t))) for t in cuts]
    return dataclasses.replace(tree, versions=tuple(versions))


def stability(multipliers: pl.DataFrame) -> pl.DataFrame:
    """Per bucket: periods, final multiplier, largest step, direction reversals (a step up then a step down or
    the reverse, each larger than 1e-9), and ``oscillating`` = two or more reversals."""
    schema = {"bucket": pl.String, "periods": pl.UInt32, "final": pl.Float64, "min": pl.Float64, "max": pl.Float64,
              "largest_step": pl.Float64, "reversals": pl.UInt32, "oscillating": pl.Boolean}
    rows = []
    for (b,), g in multipliers.sort("effective_from").group_by("bucket", maintain_order=True):
        m = [1.0] + g["multiplier"].to_list()
        steps = [y - x for x, y in zip(m, m[1:]) if abs(y - x) > 1e-9]
        rev = sum(1 for x, y in zip(steps, steps[1:]) if math.copysign(1, x) != math.copysign(1, y))
        rows.append((b, len(m) - 1, m[-1], min(m), max(m), max((abs(s) for s in steps), default=0.0), rev, rev >= 2))
    return pl.DataFrame(rows, schema=schema, orient="row").sort("bucket")
