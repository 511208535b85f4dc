"""Metrics of one simulated run (a flat-ish dict that ``metrics.json`` stores and ``compare`` diffs).

Definitions ("resource" = GPUs when the cluster has any, else CPUs / processors; times in seconds):
- ``occupancy``: allocated resource-seconds (every attempt, lost work included) / available capacity-seconds
  (capacity x span minus node downtime); span = first submit to last end.
- ``utilisation``: the same with only useful work (lost work excluded): the classic utilisation of
  scheduling studies. ``gpu_busy_utilisation``: useful GPU-seconds x the log's ``mean_gpu_util`` / useful
  GPU-seconds (DOMAIN.md's top pyramid level), null without utilisation data.
- waits: wait = first start - submit; ``wait_s`` mean/p50/p90/p99 (linear interpolation) overall, per job
  class and per team (account). Bounded slowdown: mean of max(1, (end - submit) / max(run, 10 s)).
- ``attainment``: per budget bucket, summed over consecutive windows of ``lookback_s`` from the first submit:
  demanded = funded work as if it ran from its submit time, received = useful allocated work (lost work
  excluded), entitled = the window's capacity water-filled over the buckets' demand
  (``budget_tree.entitlements``; equal weights without budgets); attainment = received / entitled; summary
  mean, worst and the number of buckets >= 0.95. Work delivered in a later window than demanded counts
  where it ran, so a bucket can exceed 1.
- ``unallocated_occupancy_share``: share of allocated resource-seconds held by min-runtime-0 jobs.
- ``fragmentation_gpu_hours``: free GPUs on partly used available nodes, integrated over the time some
  whole-node job (a gang, or a job needing a full node's GPUs) waited; ``fragmentation_share`` divides by
  available GPU capacity-hours.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from . import budget_tree as bt

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
    first = float(submit.min()) if n else 0.0
    last = float(end_time.max()) if n else 0.0
    span = max(last - first, 0.0)
    down = sum(max(min(b, last) - max(a, first), 0.0) * cap_list[node] / 1000.0
               for node, a, b in sim.health.down_intervals)
    available = max(cap_units * span - down, 0.0)
    units_row = iv["a_g"] if res == "gpus" else iv["a_c"]
    units = np.bincount(iv["a_iv"], weights=units_row, minlength=len(iv["job"])) / 1000.0
    dur = iv["end"] - iv["start"]
    held = units * dur
    allocated = float(held.sum())
    min_rt = sim.array("min_rt")
    free_alloc = float(held[min_rt[iv["job"]] == 0].sum()) if len(held) else 0.0
    lost_g = sim.array("lost_g")
    lost_c = sim.array("lost_c")
    lost = float((lost_g if res == "gpus" else lost_c).sum()) / 1000.0
    useful = allocated - lost

    waits = first_start - submit
    run = wl.array("run")
    bsld = np.maximum(1.0, (end_time - submit) / np.maximum(run, BSLD_THRESHOLD_S))
    preemptions = sim.array("preemptions", np.int64)
    out: dict = {
        "resource": res,
        "capacity": float(cap_units),
        "span_s": span,
        "jobs_simulated": n,
        "jobs_skipped": int(sum(wl.skipped.values())),
        "jobs_skipped_by_reason": {k: int(v) for k, v in sorted(wl.skipped.items())},
        "available_resource_hours": available / 3600.0,
        "allocated_resource_hours": allocated / 3600.0,
        "occupancy": allocated / available if available > 0 else None,
        "utilisation": useful / available if available > 0 else None,
        "wait_s": _pct(waits),
        "wait_s_by_class": _by(*_codes(wl), waits),
        "wait_s_by_team": _by(wl.acct, wl.accounts, waits),
        "bounded_slowdown_mean": float(bsld.mean()) if n else None,
        "bounded_slowdown_threshold_s": BSLD_THRESHOLD_S,
        "unallocated_occupancy_share": free_alloc / allocated if allocated > 0 else None,
        "preemptions": int(preemptions.sum()),
        "failures_requeued": int(sum(sim.failures)),
        "jobs_preempted": int((preemptions > 0).sum()),
        "lost_gpu_hours": float(lost_g.sum()) / 1000.0 / 3600.0,
        "lost_cpu_hours": float(lost_c.sum()) / 1000.0 / 3600.0,
        "timeouts": int(sum(wl.timeout)),
        "node_events": dict(sim.health.counts),
        "node_down_hours": sum(b - a for _, a, b in sim.health.down_intervals) / 3600.0,
        "scheduler": dict(sim.counters),
    }
    gpu_cap_s = sum(pool.cap_g) / 1000.0 * span
    out["fragmentation_gpu_hours"] = sim.frag_g_seconds / 1000.0 / 3600.0
    out["fragmentation_share"] = (sim.frag_g_seconds / 1000.0 / gpu_cap_s) if gpu_cap_s > 0 else None
    out["gpu_busy_utilisation"] = _busy(iv, wl) if res == "gpus" else None
    out["attainment"] = _attainment(sim, wl, res, iv, units, min_rt, first, last)
    return out


def _busy(iv, wl):
    if "mean_gpu_util" not in wl.frame.columns:
        return None
    util = wl.frame["mean_gpu_util"].cast(float).to_numpy()
    gs = np.bincount(iv["a_iv"], weights=iv["a_g"], minlength=len(iv["job"])) / 1000.0 * (iv["end"] - iv["start"])
    u = util[iv["job"]] if len(iv["job"]) else np.zeros(0)
    ok = (iv["how"] == 0) & ~np.isnan(u)
    den = float(gs[ok].sum())
    return float((gs[ok] * u[ok]).sum()) / den if den > 0 else None


def _attainment(sim, wl, res, iv, units, min_rt, first, last) -> dict:
    """Per budget bucket over consecutive lookback-long windows from the first submit: demanded (funded work
    as if started at submit), received (useful allocated work) and water-filled entitled resource-hours."""
    ten = sim.budgeting.at(float("inf"))
    names = [ten.paths[ten.bucket[a]] or a for a in wl.accounts]  # bucket name per account index
    na = len(wl.accounts)
    acct = sim.array("acct", np.int64)
    funded = min_rt != 0
    rate = (wl.array("req_g" if res == "gpus" else "req_c") / 1000.0)[funded]
    sub, run, acc_j = wl.array("submit")[funded], wl.array("run")[funded], acct[funded]
    job_iv = iv["job"]
    ok = funded[job_iv] if len(job_iv) else np.zeros(0, bool)
    s_iv, u_iv, r_iv, a_iv = iv["start"][ok], iv["useful"][ok], units[ok], acct[job_iv][ok]
    L = sim.cfg.lookback_s
    n_win = max(1, int(math.ceil((last - first) / L))) if last > first else 1
    cap = (sum(sim.pool.cap_g) if res == "gpus" else sum(sim.pool.cap_c)) / 1000.0
    dem = _per_window(sub - first, run, rate, acc_j, L, n_win, na)
    rec = _per_window(s_iv - first, u_iv, r_iv, a_iv, L, n_win, na)
    totals = {}
    for k in range(n_win):
        dem_a, rec_a = dem[k], rec[k]
        w0, w1 = first + k * L, min(first + (k + 1) * L, max(last, first + 1e-9))
        demand: dict[str, float] = {}
        received: dict[str, float] = {}
        for a in np.flatnonzero((dem_a > 0) | (rec_a > 0)):
            demand[names[a]] = demand.get(names[a], 0.0) + float(dem_a[a])
            received[names[a]] = received.get(names[a], 0.0) + float(rec_a[a])
        if not demand:
            continue
        hours = cap * (w1 - w0) / 3600.0
        if sim.budgeting.tree is not None:
            ent = bt.entitlements(sim.budgeting.tree, hours, dict(demand))
            entitled = {b: ent.get(b, 0.0) for b in demand}
        else:
            keys = sorted(demand)
            entitled = dict(zip(keys, bt.water_fill(hours, [1.0] * len(keys), [0.0] * len(keys),
                                                    [demand[b] for b in keys])))
        for b in demand:
            t = totals.setdefault(b, [0.0, 0.0, 0.0])
            t[0] += demand[b]
            t[1] += entitled.get(b, 0.0)
            t[2] += received[b]
    teams = {b: {"demanded_hours": d, "entitled_hours": e, "received_hours": r,
                 "attainment": (r / e) if e > 0 else None} for b, (d, e, r) in sorted(totals.items())}
    vals = [t["attainment"] for t in teams.values() if t["attainment"] is not None]
    return {"window_s": L, "windows": n_win, "teams": teams,
            "mean": float(np.mean(vals)) if vals else None, "worst": float(min(vals)) if vals else None,
            "teams_at_95pct": int(sum(1 for v in vals if v >= 0.95 - 1e-12))}


def _per_window(s, length, weight, acct, L, n_win, na):
    """[window, account] -> sum of weight x overlap of [s, s + length) with window k = [k L, (k + 1) L), hours."""
    out = np.zeros((n_win, na))
    e = s + length
    w0 = np.clip(np.floor(s / L), 0, n_win - 1).astype(np.int64)
    w1 = np.clip(np.ceil(e / L) - 1, 0, n_win - 1).astype(np.int64)
    one = w0 == w1
    np.add.at(out, (w0[one], acct[one]), weight[one] * (e[one] - s[one]))
    for i in np.flatnonzero(~one):  # the few intervals crossing a window boundary
        for k in range(w0[i], w1[i] + 1):
            ov = min(e[i], (k + 1) * L) - max(s[i], k * L)
            if ov > 0:
                out[k, acct[i]] += weight[i] * ov
    return out / 3600.0


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
