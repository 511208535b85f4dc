"""Simulation output: the simulated jobs (the input's columns, simulated values, extra columns), the node x
time allocation timeline, metrics; ``write`` and ``compare``.

Invariants:
- ``jobs`` keeps every input column in input order (a canonical ``jobs`` frame in -> the canonical columns
  out, same dtypes), overwrites the ones the simulation decides (start, end, elapsed_s, state, nodes,
  node_list, alloc_*, min_runtime_s, source = 'sim'), then appends ``EXTRA_COLUMNS``; one row per simulated
  job in (submit, job id) order. The as-logged replay keeps the log's state, allocation, nodes and min runtime
  (it used them), and its start/end come from its clock; a RUNNING job keeps no end, a job that never started
  its logged end; their ``wait_s`` is null when they never started.
- ``write`` produces byte-identical files for identical inputs and config: rows in a fixed order, zstd
  Parquet with no timestamps of its own, ``metrics.json`` with sorted keys and 12-significant-digit floats.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from .intervals import HOWS
from .metrics import clean
from .pool import UNLIMITED

EXTRA_COLUMNS = {
    "wait_s": pl.Float64, "run_s": pl.Float64, "preemptions": pl.Int32, "failures": pl.Int32,
    "lost_gpu_seconds": pl.Float64, "lost_cpu_seconds": pl.Float64, "wait_reason": pl.String,
    "reserved_start": None, "start_seq": pl.Int64, "burst": pl.Boolean, "budget_bucket": pl.String,
}
TIMELINE_SCHEMA = ("node", "job_id", "attempt", "start", "end", "gpus", "cpus", "mem_bytes", "ended_by")


@dataclass
class SimResult:
    jobs: pl.DataFrame
    timeline: pl.DataFrame
    metrics: dict

    def write(self, out_dir) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, df in (("jobs", self.jobs), ("timeline", self.timeline)):
            tmp = out / f".{name}.parquet.tmp"
            df.write_parquet(tmp, compression="zstd", statistics=True)
            tmp.replace(out / f"{name}.parquet")
        (out / "metrics.json").write_text(metrics_json(self.metrics))
        return out


def metrics_json(metrics: dict) -> str:
    return json.dumps(clean(metrics), sort_keys=True, indent=1, allow_nan=False) + "\n"


def _times(values, wl, dtype_out):
    s = pl.Series(values, dtype=pl.Float64)
    if wl.datetime_dtype is None:
        return s
    us = (s * 1e6).round().cast(pl.Int64) + wl.origin_us
    return us.cast(pl.Datetime("us", "UTC")).cast(dtype_out)


def _final_alloc(sim, iv, n):
    """Per job: node count, node list, GPUs, CPUs and memory of the attempt that ended it."""
    rows = iv["how"][iv["a_iv"]] == 0 if len(iv["a_iv"]) else np.zeros(0, bool)
    job = iv["job"][iv["a_iv"][rows]]
    g, c, m, node = iv["a_g"][rows], iv["a_c"][rows], iv["a_m"][rows], iv["a_node"][rows]
    a_g = np.bincount(job, weights=g, minlength=n) / 1000.0
    a_c = np.bincount(job, weights=c, minlength=n) / 1000.0
    if sim.pool.cluster.procs_mode:
        return None, None, a_g, a_c, None
    unlimited = np.bincount(job, weights=(m >= UNLIMITED), minlength=n) > 0
    mib = np.bincount(job, weights=np.where(m >= UNLIMITED, 0, m), minlength=n)
    a_m = pl.Series(mib * float(1 << 20)).scatter(np.flatnonzero(unlimited), None) if unlimited.any() else \
        pl.Series(mib * float(1 << 20))
    count = np.bincount(job, minlength=n)
    names = pl.Series(sim.pool.names, dtype=pl.String).gather(node)
    lists = (pl.DataFrame({"job": job, "node": names}).group_by("job", maintain_order=True)
             .agg(pl.col("node").str.join(",")))
    node_list = pl.DataFrame({"job": np.arange(n)}).join(lists, on="job", how="left", maintain_order="left")["node"]
    return count, node_list, a_g, a_c, a_m


def build(sim, wl, metrics) -> SimResult:
    n = sim.n
    pool = sim.pool
    procs = pool.cluster.procs_mode
    ts_dtype = wl.datetime_dtype
    ten = sim.budgeting.at(float("inf"))
    iv = sim.intervals.arrays()
    state = (pl.when(pl.Series(wl.timeout, dtype=pl.Boolean)).then(pl.lit("TIMEOUT"))
             .otherwise(pl.Series(wl.state, dtype=pl.String)).fill_null("COMPLETED"))
    state = pl.select(state.alias("s"))["s"]
    count, node_list, a_g, a_c, a_m = _final_alloc(sim, iv, n)
    starts, ends = sim.first_start, sim.end_time
    st_arr, en_arr = sim.array("first_start"), sim.array("end_time")
    sim_cols = {
        "start": _times(starts, wl, ts_dtype),
        "end": _times(ends, wl, ts_dtype),
        "elapsed_s": pl.Series(en_arr - st_arr, dtype=pl.Float64),
        "state": state,
        "alloc_gpus": pl.Series(a_g, dtype=pl.Float64),
        "alloc_cpus": pl.Series(a_c, dtype=pl.Float64),
        "alloc_mem_bytes": (pl.Series([None] * n, dtype=pl.Float64) if procs else a_m.cast(pl.Float64)),
        "min_runtime_s": pl.Series(np.where(np.isinf(sim.array("min_rt")), np.nan, sim.array("min_rt"))).fill_nan(None),
        "source": pl.Series(["sim"] * n, dtype=pl.String),
    }
    if not procs:
        sim_cols["nodes"] = pl.Series(count, dtype=pl.Int32)
        sim_cols["node_list"] = node_list.cast(pl.String)
    elif "node_list" in wl.frame.columns:
        sim_cols["node_list"] = pl.Series([None] * n, dtype=pl.String)
    if sim.cfg.replay == "logged":
        _as_logged(sim_cols, sim, wl, ts_dtype)
    df = wl.frame
    cols = []
    for c in df.columns:
        if c in sim_cols:
            s = sim_cols.pop(c)
            if (c not in ("start", "end") or ts_dtype is None) and df.schema[c] != pl.Null:
                s = s.cast(df.schema[c], strict=False)
            cols.append(s.alias(c))
        else:
            cols.append(df[c])
    cols += [s.alias(c) for c, s in sim_cols.items()]
    sub = wl.array("submit")
    reasons = pl.Series(sim.wait_reasons(), dtype=pl.String)
    bucket_name = [ten.paths[ten.bucket[a]] or a for a in wl.accounts]
    extra = {
        "wait_s": pl.Series(st_arr - sub, dtype=pl.Float64).fill_nan(None),
        "run_s": pl.Series(np.asarray(sim.run_s, dtype=float), dtype=pl.Float64),
        "preemptions": pl.Series(sim.preemptions, dtype=pl.Int32),
        "failures": pl.Series(sim.failures, dtype=pl.Int32),
        "lost_gpu_seconds": pl.Series(sim.array("lost_g") / 1000.0, dtype=pl.Float64),
        "lost_cpu_seconds": pl.Series(sim.array("lost_c") / 1000.0, dtype=pl.Float64),
        "wait_reason": reasons,
        "reserved_start": _times(sim.reserved, wl, ts_dtype or pl.Float64),
        "start_seq": pl.Series(sim.start_seq, dtype=pl.Int64),
        "burst": pl.Series(sim.burst, dtype=pl.Boolean),
        "budget_bucket": pl.Series(bucket_name, dtype=pl.String).gather(wl.acct),
    }
    cols += [s.alias(c) for c, s in extra.items() if c not in df.columns]
    jobs = pl.DataFrame(cols)
    return SimResult(jobs=jobs, timeline=_timeline(sim, wl, iv), metrics=metrics)


def _as_logged(sim_cols, sim, wl, ts_dtype) -> None:
    """The replay's columns: start and end from its clock (a RUNNING job keeps no end, a job that never started
    its logged end), the rest as logged (state, allocation, nodes, min runtime: the replay used them)."""
    f = wl.frame
    ends = list(sim.end_time)
    logged_end = f["end"].to_list() if "end" in f.columns else [None] * sim.n
    state = f["state"].cast(pl.String).to_list() if "state" in f.columns else [None] * sim.n
    for j in range(sim.n):
        if sim.first_start[j] is None or state[j] == "RUNNING":
            ends[j] = None
    end = _times(ends, wl, ts_dtype)
    never = [sim.first_start[j] is None and logged_end[j] is not None for j in range(sim.n)]
    if any(never):
        logged = f["end"] if ts_dtype is None else f["end"].cast(end.dtype)
        end = pl.select(pl.when(pl.Series(never)).then(logged).otherwise(end).alias("end"))["end"]
    sim_cols["end"] = end
    for c in ("elapsed_s", "state", "alloc_gpus", "alloc_cpus", "alloc_mem_bytes", "nodes", "node_list",
              "min_runtime_s"):
        if c in f.columns:
            sim_cols[c] = f[c]
        else:
            sim_cols.pop(c, None)


def _timeline(sim, wl, iv) -> pl.DataFrame:
    k = iv["a_iv"]
    m = iv["a_m"]
    procs = sim.pool.cluster.procs_mode
    mem = pl.Series(np.where(m >= UNLIMITED, 0, m) * float(1 << 20), dtype=pl.Float64)
    if procs:
        mem = pl.Series([None] * len(m), dtype=pl.Float64)
    elif (m >= UNLIMITED).any():
        mem = mem.scatter(np.flatnonzero(m >= UNLIMITED), None)
    ts = wl.datetime_dtype
    df = pl.DataFrame({
        "node": pl.Series(sim.pool.names, dtype=pl.String).gather(iv["a_node"]),
        "job_id": wl.job_id.gather(iv["job"][k]),
        "attempt": pl.Series(iv["att"][k], dtype=pl.Int32),
        "start": _times(iv["start"][k], wl, ts or pl.Float64),
        "end": _times(iv["end"][k], wl, ts or pl.Float64),
        "gpus": pl.Series(iv["a_g"] / 1000.0, dtype=pl.Float64),
        "cpus": pl.Series(iv["a_c"] / 1000.0, dtype=pl.Float64),
        "mem_bytes": mem,
        "ended_by": pl.Series(HOWS, dtype=pl.String).gather(iv["how"][k]),
    })
    return df.sort(["start", "node", "job_id", "attempt"], maintain_order=True)


def _flatten(d, prefix=""):
    for k in sorted(d):
        v = d[k]
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from _flatten(v, key + ".")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield key, float(v)
        elif v is None:
            yield key, None


def compare(baseline, scenario) -> pl.DataFrame:
    """One row per numeric metric present in either run: metric, baseline, scenario, delta (scenario - baseline)."""
    a = dict(_flatten(clean(getattr(baseline, "metrics", baseline))))
    b = dict(_flatten(clean(getattr(scenario, "metrics", scenario))))
    keys = sorted((set(a) | set(b)) - {k for k in set(a) | set(b) if k.startswith(("params.", "cluster."))})
    base = [a.get(k) for k in keys]
    scen = [b.get(k) for k in keys]
    delta = [None if x is None or y is None else y - x for x, y in zip(base, scen)]
    return pl.DataFrame({"metric": keys, "baseline": base, "scenario": scen, "delta": delta},
                        schema={"metric": pl.String, "baseline": pl.Float64, "scenario": pl.Float64,
                                "delta": pl.Float64})
