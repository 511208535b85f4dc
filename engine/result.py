"""Simulation output: the simulated jobs (the input's columns, simulated values, extra columns), the node x
time allocation timeline, metrics; ``write`` and ``compare``.

Invariants:
- ``jobs`` keeps every input column in input order (a canonical ``jobs`` frame in -> the canonical columns
  out, same dtypes), overwrites the ones the simulation decides (submit of a requeued attempt, start, end,
  elapsed_s, state, nodes, node_list, alloc_*, min_runtime_s, source = 'sim'), then appends ``EXTRA_COLUMNS``.
- One row per *attempt*, as ``sacct --duplicates`` shows a requeued job: rows in (submit, job id) order of the
  jobs, attempts in order. A job's final attempt has its own ``job_id``; an earlier one ``ID;K`` (K = its
  ``attempt``, 0-based), state PREEMPTED (preempted or drained) or NODE_FAIL, and is *submitted* when the
  previous attempt ended (attempt 0: the logged submit). So every query over the output counts what the job held
  (received = the attempts' run time only, not the requeue gaps), what it waited for (each attempt's wait from
  its (re)submit) and demanded, and ``wait_s`` is that row's wait. Per row: ``run_s`` its run, ``preemptions`` /
  ``failures`` 1 if that attempt was preempted / failed, ``lost_*_seconds`` its work lost since its last
  checkpoint, ``wait_reason`` the reason its wait held longest, ``reserved_start`` on the attempt whose wait
  made the job's first reservation, ``start_seq`` its start order, ``cpu_seconds_used`` (requeued jobs only) the
  log's rate x its run. Sums over a job's rows give the job's totals.
- The timeline's ``job_id`` is the row's: every timeline row belongs to exactly one jobs row, whose
  ``alloc_gpus`` is the sum of its timeline rows and ``start`` their start.
- Rows that ran as logged keep the log's state, allocation, nodes and min runtime: every row of the as-logged
  replay and a warm start's pinned jobs on their logged nodes (``pinned`` true); their start/end come from the
  engine's clock; a RUNNING one keeps no end, a job that never started its logged end; ``wait_s`` is null when
  they never started.
- ``write`` produces byte-identical files for identical inputs and config: rows in a fixed order, zstd
  Parquet with no timestamps of its own, ``metrics.json`` with sorted keys and 12-significant-digit floats.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from .intervals import HOWS
from .metrics import clean
from .units import INF, UNLIMITED

EXTRA_COLUMNS = {
    "wait_s": pl.Float64, "run_s": pl.Float64, "preemptions": pl.Int32, "failures": pl.Int32,
    "lost_gpu_seconds": pl.Float64, "lost_cpu_seconds": pl.Float64, "wait_reason": pl.String,
    "reserved_start": None, "start_seq": pl.Int64, "burst": pl.Boolean, "budget_bucket": pl.String,
    "attempt": pl.Int32, "pinned": pl.Boolean,
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
            df.write_parquet(tmp, compression="zstd", compression_level=OUTPUT_ZSTD_LEVEL, statistics=True)
            tmp.replace(out / f"{name}.parquet")
        (out / "metrics.json").write_text(metrics_json(self.metrics))
        return out


# zstd level 1, as the store's tables (queries.store.store): on HPC2N's outputs 0.35 s CPU against 0.50 s for the
# default level 3, files 15 % larger; the content is the same (any Parquet reader reads either level)
OUTPUT_ZSTD_LEVEL = 1


def metrics_json(metrics: dict) -> str:
    return json.dumps(clean(metrics), sort_keys=True, indent=1, allow_nan=False) + "\n"


def _times(values, wl, dtype_out):
    s = pl.Series(values, dtype=pl.Float64).fill_nan(None)
    if wl.datetime_dtype is None:
        return s
    us = (s * 1e6).round().cast(pl.Int64) + wl.origin_us
    return us.cast(pl.Datetime("us", "UTC")).cast(dtype_out)


def _per_interval(sim, iv):
    """Per interval: node count, node list, GPUs, CPUs and memory (bytes; None where a node's is unknown)."""
    k = len(iv["job"])
    a_iv = iv["a_iv"]
    g, c, m, node = iv["a_g"], iv["a_c"], iv["a_m"], iv["a_node"]
    a_g = np.bincount(a_iv, weights=g, minlength=k) / 1000.0
    a_c = np.bincount(a_iv, weights=c, minlength=k) / 1000.0
    if sim.pool.cluster.procs_mode:
        return None, None, a_g, a_c, None
    unlimited = np.bincount(a_iv, weights=(m >= UNLIMITED), minlength=k) > 0
    mib = np.bincount(a_iv, weights=np.where(m >= UNLIMITED, 0, m), minlength=k)
    a_m = pl.Series(mib * float(1 << 20)).scatter(np.flatnonzero(unlimited), None) if unlimited.any() else \
        pl.Series(mib * float(1 << 20))
    count = np.bincount(a_iv, minlength=k)
    names = pl.Series(sim.pool.names, dtype=pl.String).gather(node)
    lists = (pl.DataFrame({"iv": a_iv, "node": names}).group_by("iv", maintain_order=True)
             .agg(pl.col("node").str.join(",")))
    node_list = pl.DataFrame({"iv": np.arange(k)}).join(lists, on="iv", how="left", maintain_order="left")["node"]
    return count, node_list, a_g, a_c, a_m


def _rows(sim, iv):
    """The output rows: (job, attempt, interval index or -1) for every attempt of every job, and one row for a
    job with none (never started, or a pinned job left off the cluster), in (job order, attempt) order."""
    n = sim.n
    has = np.zeros(n, dtype=bool)
    has[iv["job"]] = True
    rest = np.flatnonzero(~has)
    job = np.concatenate([iv["job"], rest])
    att = np.concatenate([iv["att"], np.zeros(len(rest), dtype=np.int64)])
    ivx = np.concatenate([np.arange(len(iv["job"])), np.full(len(rest), -1)])
    order = np.lexsort((att, job))
    return job[order], att[order], ivx[order]


def row_ids(ids: pl.Series, job, att, final) -> pl.Series:
    """The job id of each row: the job's own for its final attempt, ``ID;ATTEMPT`` for an earlier one."""
    base = ids.gather(job)
    if final.all():
        return base.alias("job_id")
    tagged = base + ";" + pl.Series(att, dtype=pl.Int64).cast(pl.String)
    return pl.select(pl.when(pl.Series(final)).then(base).otherwise(tagged).alias("job_id"))["job_id"]


# Exports whose max_rss_bytes is one task's (one node's) peak, not the whole job's: queries/analytics/sql/_jobs.sql reads
# them so by the row's source, which the output replaces with 'sim' (keep the two lists equal).
PER_TASK_RSS_SOURCES = ("sacct", "sacct-json")


def _memory_peaks(df: pl.DataFrame) -> pl.DataFrame:
    """The logged memory peaks in the source-free form the output needs: where the export recorded one task's
    (one node's) MaxRSS, that is the per-node peak (``node_mem_peak_bytes``) and the whole job's peak is it times
    the logged node count, exactly as ``_jobs.sql`` reads such a row; other rows are left as they are."""
    if not {"max_rss_bytes", "source"} <= set(df.columns):
        return df
    per_task = pl.col("source").is_in(PER_TASK_RSS_SOURCES).fill_null(False)
    if "jobstats" in df.columns:
        per_task &= (pl.col("jobstats") != "ok").fill_null(True)
    node_peak = pl.col("node_mem_peak_bytes") if "node_mem_peak_bytes" in df.columns else pl.lit(None, pl.Float64)
    per_task &= node_peak.is_null()
    nodes = pl.max_horizontal(pl.col("nodes").fill_null(1), pl.lit(1)) if "nodes" in df.columns else pl.lit(1)
    return df.with_columns(
        pl.when(per_task).then(pl.col("max_rss_bytes")).otherwise(node_peak).cast(pl.Float64)
        .alias("node_mem_peak_bytes"),
        pl.when(per_task).then(pl.col("max_rss_bytes") * nodes).otherwise(pl.col("max_rss_bytes"))
        .cast(df.schema["max_rss_bytes"]).alias("max_rss_bytes"))


def _take(values, idx, fill=np.nan):
    out = np.full(len(idx), fill, dtype=float)
    ok = idx >= 0
    out[ok] = np.asarray(values, dtype=float)[idx[ok]]
    return out


def build(sim, wl, metrics) -> SimResult:
    pool = sim.pool
    procs = pool.cluster.procs_mode
    ts_dtype = wl.datetime_dtype
    ten = sim.budgeting.at(INF)
    iv = sim.intervals.arrays()
    job, att, ivx = _rows(sim, iv)
    rows = len(job)
    attempts = sim.array("attempt", np.int64)
    final = att == attempts[job]
    has_iv = ivx >= 0
    start = np.where(has_iv, _take(iv["start"], ivx), sim.array("first_start")[job])
    end = np.where(has_iv, _take(iv["end"], ivx), sim.array("end_time")[job])
    prev_end = np.concatenate([[np.nan], end[:-1]])
    submit = np.where(att > 0, prev_end, wl.array("submit")[job])  # a requeued attempt waits from its requeue
    how = np.where(has_iv, _take(iv["how"], ivx, 0), 0).astype(np.int64)
    dur = np.where(has_iv, end - start, np.asarray(sim.run_s, dtype=float)[job])
    lost_s = np.where(has_iv, dur - _take(iv["useful"], ivx, 0.0), 0.0)
    count, node_list, a_g, a_c, a_m = _per_interval(sim, iv)
    g_row, c_row = _take(a_g, ivx, 0.0), _take(a_c, ivx, 0.0)
    logged_state = pl.Series(wl.state, dtype=pl.String).gather(job)
    timeout = pl.Series(wl.timeout, dtype=pl.Boolean).gather(job)
    final_state = pl.when(timeout).then(pl.lit("TIMEOUT")).otherwise(logged_state).fill_null("COMPLETED")
    earlier = pl.when(pl.Series(how) == HOWS.index("fail")).then(pl.lit("NODE_FAIL")).otherwise(pl.lit("PREEMPTED"))
    state = pl.select(pl.when(pl.Series(final)).then(final_state).otherwise(earlier).alias("s"))["s"]
    min_rt = sim.array("min_rt")[job]
    sim_cols = {
        "job_id": row_ids(wl.job_id, job, att, final),
        "start": _times(start, wl, ts_dtype),
        "end": _times(end, wl, ts_dtype),
        "elapsed_s": pl.Series(end - start, dtype=pl.Float64).fill_nan(None),
        "state": state,
        "alloc_gpus": pl.Series(g_row, dtype=pl.Float64),
        "alloc_cpus": pl.Series(c_row, dtype=pl.Float64),
        "alloc_mem_bytes": (pl.Series([None] * rows, dtype=pl.Float64) if procs else
                            a_m.cast(pl.Float64).gather(np.where(has_iv, ivx, 0)).scatter(np.flatnonzero(~has_iv), None)
                            if rows else pl.Series([], dtype=pl.Float64)),
        "min_runtime_s": pl.Series(np.where(np.isinf(min_rt), np.nan, min_rt)).fill_nan(None),
        "source": pl.Series(["sim"] * rows, dtype=pl.String),
    }
    if not procs:
        sim_cols["nodes"] = pl.Series(np.where(has_iv, _take(count, ivx, 0), 0), dtype=pl.Int32)
        sim_cols["node_list"] = (node_list.cast(pl.String).gather(np.where(has_iv, ivx, 0))
                                 .scatter(np.flatnonzero(~has_iv), None) if rows else pl.Series([], dtype=pl.String))
    elif "node_list" in wl.frame.columns:
        sim_cols["node_list"] = pl.Series([None] * rows, dtype=pl.String)
    df = _memory_peaks(wl.frame if rows == sim.n else wl.frame.gather(job))  # one row per job: the rows are the jobs
    if (att > 0).any():  # a requeued attempt waits from its requeue; the first keeps the logged submit
        again = _times(submit, wl, ts_dtype)
        logged = df["submit"] if ts_dtype is None else df["submit"].cast(again.dtype)
        sim_cols["submit"] = pl.select(pl.when(pl.Series(att > 0)).then(again).otherwise(logged).alias("s"))["s"]
    if "cpu_seconds_used" in df.columns and (attempts > 0).any():
        # a requeued job used CPU at its logged rate in every attempt: each row gets its own run's share
        rate = np.asarray(wl.frame["cpu_seconds_used"].cast(pl.Float64).fill_null(np.nan).to_numpy(), float)[job] / \
            np.maximum(np.asarray([r if r is not None else np.nan for r in wl.run], dtype=float)[job], 1e-9)
        scaled = pl.Series(np.where(attempts[job] > 0, rate * dur, df["cpu_seconds_used"].cast(pl.Float64)
                                    .fill_null(np.nan).to_numpy()), dtype=pl.Float64).fill_nan(None)
        df = df.with_columns(scaled.alias("cpu_seconds_used"))
    logged = _logged_rows(sim, wl, job, att, final)
    if logged is not None:
        _as_logged(sim_cols, sim, wl, df, job, logged, ts_dtype)
    cols = []
    for c in df.columns:
        if c in sim_cols:
            s_ = sim_cols.pop(c)
            if (c not in ("submit", "start", "end") or ts_dtype is None) and df.schema[c] != pl.Null:
                s_ = s_.cast(df.schema[c], strict=False)
            cols.append(s_.alias(c))
        else:
            cols.append(df[c])
    cols += [s_.alias(c) for c, s_ in sim_cols.items()]
    # per-(job, attempt) values land on row first[j] + attempt (rows are in (job, attempt) order)
    first = np.searchsorted(job, np.arange(sim.n)) if rows else np.zeros(0, dtype=np.int64)
    # (the loops index Python lists, not numpy arrays: a numpy scalar per item made them 2x slower on HPC2N)
    first_at, attempts_at, reserved_att = first.tolist(), attempts.tolist(), sim.reserved_att
    reasons = [None] * rows
    for key, r in sim.waits.longest().items():
        reasons[first_at[key] if type(key) is int else first_at[key[0]] + key[1]] = r
    reserved = [None] * rows
    for j, t in enumerate(sim.reserved):
        if t is not None:
            reserved[first_at[j] + reserved_att.get(j, attempts_at[j])] = t
    burst = np.zeros(rows, dtype=bool)
    burst[first + attempts] = np.asarray(sim.preempting.burst, dtype=bool) if rows else burst[:0]
    for j, a in sim.preempting.burst_att:
        burst[first[j] + a] = True
    bucket_name = [ten.paths[ten.bucket[a]] or a for a in wl.accounts]
    wait = start - submit
    extra = {
        "wait_s": pl.Series(wait, dtype=pl.Float64).fill_nan(None),
        "run_s": pl.Series(dur, dtype=pl.Float64),
        "preemptions": pl.Series(~final & (how != HOWS.index("fail")), dtype=pl.Int32),
        "failures": pl.Series(~final & (how == HOWS.index("fail")), dtype=pl.Int32),
        "lost_gpu_seconds": pl.Series(lost_s * g_row, dtype=pl.Float64),
        "lost_cpu_seconds": pl.Series(lost_s * c_row, dtype=pl.Float64),
        "wait_reason": pl.Series(reasons, dtype=pl.String),
        "reserved_start": _times(reserved, wl, ts_dtype or pl.Float64),
        "start_seq": pl.Series(np.where(has_iv, _take(iv["seq"], ivx, -1), sim.array("start_seq")[job])
                               if rows else [], dtype=pl.Float64).fill_nan(None).cast(pl.Int64),
        "burst": pl.Series(burst, dtype=pl.Boolean),
        "budget_bucket": pl.Series(bucket_name, dtype=pl.String).gather(pl.Series(wl.acct, dtype=pl.Int64).gather(job)),
        "attempt": pl.Series(att, dtype=pl.Int32),
        "pinned": pl.Series(wl.pinned, dtype=pl.Boolean).gather(job) if rows else pl.Series([], dtype=pl.Boolean),
    }
    cols += [s_.alias(c) for c, s_ in extra.items() if c not in df.columns]
    jobs = pl.DataFrame(cols)
    return SimResult(jobs=jobs, timeline=_timeline(sim, wl, iv), metrics=metrics)


def _logged_rows(sim, wl, job, att, final):
    """Rows that keep the log's columns: every row of the as-logged replay; a warm start's pinned jobs that ran
    on their logged nodes in one attempt. None when there are none."""
    if sim.cfg.replay == "logged":
        return np.ones(len(job), dtype=bool)
    if wl.warm_s is None:
        return None
    moved = sim.warm_moved
    pinned = np.asarray(wl.pinned, dtype=bool)[job] & (att == 0) & final
    if moved:
        pinned &= ~np.isin(job, list(moved))
    return pinned if pinned.any() else None


def _as_logged(sim_cols, sim, wl, df, job, mask, ts_dtype) -> None:
    """The logged rows' columns: start and end from the engine's clock (a RUNNING job keeps no end, a job that
    never started its logged end), the rest as logged (state, allocation, nodes, min runtime: it used them)."""
    m = pl.Series(mask)
    first = sim.array("first_start")[job]
    state = df["state"].cast(pl.String) if "state" in df.columns else pl.Series([None] * len(job), dtype=pl.String)
    no_end = pl.Series(np.isnan(first)) | (state == "RUNNING").fill_null(False)
    end = sim_cols["end"]
    end = pl.select(pl.when(m & no_end).then(None).otherwise(end).alias("end"))["end"]
    if "end" in df.columns:
        never = m & pl.Series(np.isnan(first)) & df["end"].is_not_null()
        if never.any():
            logged_end = df["end"] if ts_dtype is None else df["end"].cast(end.dtype)
            end = pl.select(pl.when(never).then(logged_end).otherwise(end).alias("end"))["end"]
    sim_cols["end"] = end
    for c in ("elapsed_s", "state", "alloc_gpus", "alloc_cpus", "alloc_mem_bytes", "nodes", "node_list",
              "min_runtime_s"):
        if c in df.columns:
            if c in sim_cols and not mask.all():
                x = sim_cols[c].cast(df.schema[c], strict=False) if df.schema[c] != pl.Null else sim_cols[c]
                sim_cols[c] = pl.select(pl.when(m).then(df[c]).otherwise(x).alias(c))[c]
            else:
                sim_cols[c] = df[c]
        elif mask.all():
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
    job, att = iv["job"][k], iv["att"][k]
    final = att == sim.array("attempt", np.int64)[job]
    df = pl.DataFrame({
        "node": pl.Series(sim.pool.names, dtype=pl.String).gather(iv["a_node"]),
        "job_id": row_ids(wl.job_id, job, att, final),
        "attempt": pl.Series(att, dtype=pl.Int32),
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
