"""Metrics of one simulated run (a flat-ish dict that ``metrics.json`` stores and ``compare`` diffs).

Definitions ("resource" = GPUs when the cluster has any, else CPUs / processors; times in seconds). Everything
is measured inside the window [w0, w1) (``window``): w0 = the warm start (else the first submit), w1 = the
window end (else the last end); jobs pinned by a warm start (``engine.warm_start``) count only by the resources they
hold inside it, never in waits, slowdowns or timeouts (their waits are history, not the policy's).
- ``occupancy``: allocated resource-seconds (every attempt, lost work included) / available capacity-seconds
  (capacity x span minus node downtime); span = w1 - w0.
- ``utilisation``: the same with only useful work (lost work excluded): the classic utilisation of
  scheduling studies. ``gpu_busy_utilisation``: useful GPU-seconds x the log's ``mean_gpu_util`` / useful
  GPU-seconds (DOMAIN.md's top pyramid level), null without utilisation data.
- waits: wait = first start - submit, per simulated job (a requeued job's later waits are in its attempt rows of
  the output, not here); ``wait_s`` mean/p50/p90/p99 (linear interpolation) overall, per job class and per team
  (account). Bounded slowdown: mean of max(1, (end - submit) / max(run, 10 s)).
- ``lost_*_hours``: the tails of requeued attempts after their last checkpoint, inside the window.
- ``attainment``: budget attainment by the queries' definition (``engine.attainment``), computed by
  ``simulate`` from the simulated jobs frame once it is built.
- ``unallocated_occupancy_share``: share of allocated resource-seconds held by min-runtime-0 jobs.
- ``fragmentation_gpu_hours``: free GPUs on partly used available nodes, integrated over the time some
  whole-node job (a gang, or a job needing a full node's GPUs) waited inside the window;
  ``fragmentation_share`` divides by GPU capacity-hours of the span.
- ``warm_start`` (warm starts only): jobs pinned (history / running at T), replaced, not placed, pending at T.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl


BSLD_THRESHOLD_S = 10.0


def _pct(a) -> dict:
    if not len(a):
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None}
    a = np.asarray(a, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"n": int(a.size), "mean": float(a.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def _by(codes, labels, values) -> dict:
    """Percentiles of ``values`` per group; ``codes[i]`` indexes ``labels`` (None -> "(none)")."""
    codes = np.asarray(codes, dtype=np.int64)
    if not len(codes):
        return {}
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    vals = np.asarray(values, dtype=float)[order]
    present = np.unique(sc)
    bounds = np.searchsorted(sc, np.append(present, present[-1] + 1))
    out = {}
    for k, code in enumerate(present):
        name = labels[code]
        out["(none)" if name is None else str(name)] = _pct(vals[bounds[k]:bounds[k + 1]])
    return {k: out[k] for k in sorted(out)}


def _codes(wl) -> tuple:
    """Dense codes of the job classes (sorted names) and the names."""
    k = wl._str("job_class").fill_null("(none)")
    labels = k.unique().sort().to_list()
    codes = k.rank("dense").cast(pl.Int64) - 1 if len(k) else pl.Series([], dtype=pl.Int64)
    return codes.to_numpy(), labels


def window(sim, wl) -> tuple[float, float]:
    """The measured window [w0, w1) on the simulation clock: the warm start (else the first submit) to the
    window end (else the last end)."""
    first_start, end_time = sim.array("first_start"), sim.array("end_time")
    ran = ~np.isnan(first_start)
    submit = wl.array("submit")
    w0 = wl.warm_s if wl.warm_s is not None else (float(submit.min()) if sim.n else 0.0)
    w1 = wl.end_s if wl.end_s is not None else (float(np.nanmax(end_time)) if ran.any() else w0)
    return w0, max(w1, w0)


def _clip(a, b, w0, w1):
    return np.maximum(np.minimum(b, w1) - np.maximum(a, w0), 0.0)


def compute(sim, wl) -> dict:
    n = sim.n
    pool = sim.pool
    res = pool.cluster.charge_resource
    iv = sim.intervals.arrays()
    cap_list = np.asarray(pool.cap_g if res == "gpus" else pool.cap_c, dtype=np.int64)
    cap_units = cap_list.sum() / 1000.0
    submit = wl.array("submit")
    first_start = sim.array("first_start")
    end_time = sim.array("end_time")
    pinned = np.asarray(wl.pinned, dtype=bool) if n else np.zeros(0, bool)
    # every job starts and ends, except in the as-logged replay (jobs that never started: NaN, left out);
    # pinned jobs (warm start) ran as logged before the window: their waits are not the policy's
    ran = ~np.isnan(first_start) & ~pinned
    first, last = window(sim, wl)
    span = last - first
    down = sum(max(min(b, last) - max(a, first), 0.0) * cap_list[node] / 1000.0
               for node, a, b in sim.health.down_intervals)
    available = max(cap_units * span - down, 0.0)
    g_units = np.bincount(iv["a_iv"], weights=iv["a_g"], minlength=len(iv["job"])) / 1000.0
    c_units = np.bincount(iv["a_iv"], weights=iv["a_c"], minlength=len(iv["job"])) / 1000.0
    units = g_units if res == "gpus" else c_units
    # allocated and lost resource-seconds inside the window (the lost part of an attempt is its tail after
    # the last checkpoint)
    held = units * _clip(iv["start"], iv["end"], first, last)
    tail = _clip(iv["start"] + iv["useful"], iv["end"], first, last)
    allocated = float(held.sum())
    min_rt = sim.array("min_rt")
    free_alloc = float(held[min_rt[iv["job"]] == 0].sum()) if len(held) else 0.0
    lost = float((units * tail).sum())
    useful = allocated - lost

    waits = (first_start - submit)[ran]
    run = np.asarray(sim.run_s, dtype=float) if sim.cfg.replay == "logged" else wl.array("run")
    bsld = np.maximum(1.0, (end_time - submit)[ran] / np.maximum(run[ran], BSLD_THRESHOLD_S))
    preemptions = sim.array("preemptions", np.int64)
    cls_codes, cls_labels = _codes(wl)
    timeouts = (np.asarray([bool(x) for x in wl.timeout], dtype=bool) if sim.cfg.replay != "logged" else
                np.asarray([x == "TIMEOUT" for x in wl.state], dtype=bool))
    out: dict = {
        "resource": res,
        "capacity": float(cap_units),
        "span_s": span,
        "jobs_simulated": int((~pinned).sum()),
        "jobs_skipped": int(sum(wl.skipped.values())),
        "jobs_skipped_by_reason": {k: int(v) for k, v in sorted(wl.skipped.items())},
        "available_resource_hours": available / 3600.0,
        "allocated_resource_hours": allocated / 3600.0,
        "occupancy": allocated / available if available > 0 else None,
        "utilisation": useful / available if available > 0 else None,
        "wait_s": _pct(waits),
        "wait_s_by_class": _by(cls_codes[ran], cls_labels, waits),
        "wait_s_by_team": _by(np.asarray(wl.acct, dtype=np.int64)[ran], wl.accounts, waits),
        "bounded_slowdown_mean": float(bsld.mean()) if len(bsld) else None,
        "bounded_slowdown_threshold_s": BSLD_THRESHOLD_S,
        "unallocated_occupancy_share": free_alloc / allocated if allocated > 0 else None,
        "preemptions": int(preemptions.sum()),
        "failures_requeued": int(sum(sim.failures)),
        "jobs_preempted": int((preemptions > 0).sum()),
        "lost_gpu_hours": float((g_units * tail).sum()) / 3600.0,
        "lost_cpu_hours": float((c_units * tail).sum()) / 3600.0,
        "timeouts": int(timeouts[~pinned].sum()) if n else 0,
        "node_events": dict(sim.health.counts),
        "node_down_hours": sum(b - a for _, a, b in sim.health.down_intervals) / 3600.0,
        "scheduler": dict(sim.counters),
    }
    if wl.warm_s is not None:
        out["warm_start"] = sim.warm_stats or {"jobs_pinned": int(pinned.sum())}
    gpu_cap_s = sum(pool.cap_g) / 1000.0 * span
    out["fragmentation_gpu_hours"] = sim.frag_g_seconds / 1000.0 / 3600.0
    out["fragmentation_share"] = (sim.frag_g_seconds / 1000.0 / gpu_cap_s) if gpu_cap_s > 0 else None
    out["gpu_busy_utilisation"] = _busy(iv, wl, held) if res == "gpus" else None
    return out


def _busy(iv, wl, gs):
    """``gs``: each interval's GPU-seconds inside the window."""
    if "mean_gpu_util" not in wl.frame.columns:
        return None
    util = wl.frame["mean_gpu_util"].cast(float).to_numpy()
    u = util[iv["job"]] if len(iv["job"]) else np.zeros(0)
    ok = (iv["how"] == 0) & ~np.isnan(u)
    den = float(gs[ok].sum())
    return float((gs[ok] * u[ok]).sum()) / den if den > 0 else None


def clean(obj):
    """JSON-ready with stable floats: 12 significant digits, NaN/inf -> null, keys as strings."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if not math.isfinite(x):
            return None
        return float(f"{x:.12g}")
    return obj
