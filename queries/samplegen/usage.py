"""What jobs actually used: per-job utilisation time series and the sacct totals derived from them.

A job's steady levels come from its real need (CPU cores, memory) and its user's GPU efficiency; the time
series adds phases: data loading at the start (CPU busy, GPU idle, memory ramping), steady training,
checkpoint I/O dips (GPU and CPU low), periodic evaluation, and for interactive sessions idle stretches
with bursts (parked sessions stay idle throughout).

Invariants (what ``tests/queries/samplegen/test_samplegen.py`` checks against the exported files):
- samples cover [start, start + elapsed) without gaps; ``sum(interval_s) == elapsed``; at most
  ``MAX_SAMPLES`` per job (long jobs get wider intervals, a multiple of ``BASE_INTERVAL_S``);
- ``cpu_seconds == sum(cpu_used * interval_s)`` (sacct TotalCPU), ``max_rss_bytes == max(mem_bytes)``,
  ``mean_gpu_util == sum(gpu_util * interval_s) / elapsed``, ``max_gpu_util == max(gpu_util)``,
  ``gpu_mem_bytes == max(gpu_mem_bytes)``; memory and GPU memory are whole MiB, GPU utilisation whole
  percent, CPU use whole centi-cores (collector resolution, and it keeps the Parquet small);
- ``cpu_used <= allocated CPUs``, ``mem_bytes <= requested memory``, ``0 <= gpu_util <= 1``.
Jobs shorter than ``MIN_SAMPLED_S`` get totals but no samples (as a 5-minute collector would miss them).
"""
from __future__ import annotations

import numpy as np

BASE_INTERVAL_S = 300
MAX_SAMPLES = 288
MIN_SAMPLED_S = 600
CKPT_S, EVAL_S = 240.0, 600.0  # a checkpoint write and a periodic evaluation, seconds
KIB, MIB = 1024, 1024**2


def job_levels(rng: np.random.Generator, org, j: dict[str, np.ndarray], gpu_mem_per_gpu: np.ndarray) -> dict:
    """Steady-state usage levels per job (whole job, all nodes)."""
    n = len(j["cls"])
    u = org.users
    user, cls = j["user"], j["cls"]
    alloc_cpus = j["alloc_cpus_total"].astype(float)
    req_mem = j["req_mem_total"].astype(float)
    cpu = np.minimum(j["need_cpus"] * j["nodes"] * rng.lognormal(0, 0.15, n), alloc_cpus)
    mem = np.minimum(j["need_mem"] * j["nodes"] * rng.lognormal(0, 0.1, n), 0.97 * req_mem)
    gpu = u.gpu_eff[user] * rng.lognormal(0, 0.1, n)
    gpu = np.select([cls == "eval", cls == "debug", cls == "interactive"],
                    [0.75 * gpu, 0.5 * gpu, 0.35 * gpu], gpu)
    parked = u.parker[user] & (cls == "interactive")
    gpu = np.where(parked, 0.01, np.clip(gpu, 0.02, 0.99))
    gmem_frac = np.select([cls == "training", cls == "eval", parked],
                          [rng.uniform(0.6, 0.95, n), rng.uniform(0.3, 0.7, n), rng.uniform(0.05, 0.2, n)],
                          rng.uniform(0.1, 0.5, n))
    gpus = j["gpus"].astype(float)
    return {"cpu": cpu, "mem": mem, "gpu": np.where(gpus > 0, gpu, np.nan),
            "gmem": gpus * gpu_mem_per_gpu * gmem_frac, "parked": parked,
            "ckpt_s": rng.uniform(1800, 5400, n),  # checkpoint period
            "alloc_cpus": alloc_cpus, "req_mem": req_mem}


def series(rng: np.random.Generator, j: dict[str, np.ndarray], lv: dict, elapsed: np.ndarray):
    """Per-sample arrays for the jobs with ``elapsed >= MIN_SAMPLED_S``, and per-job totals for all jobs."""
    n = len(elapsed)
    sampled = elapsed >= MIN_SAMPLED_S
    widen = np.ceil(elapsed / (MAX_SAMPLES * BASE_INTERVAL_S)).clip(min=1)
    interval = (BASE_INTERVAL_S * widen).astype(np.int64)
    n_s = np.where(sampled, -(-elapsed // interval), 0).astype(np.int64)
    jid = np.repeat(np.arange(n), n_s)
    first = np.concatenate([[0], np.cumsum(n_s)[:-1]])
    k = np.arange(len(jid)) - first[jid]
    offset = k * interval[jid]
    dur = np.minimum(interval[jid], elapsed[jid] - offset).astype(float)
    cls = j["cls"][jid]
    m = len(jid)

    # Phases as the fraction of each interval they occupy, so a 35-minute sample of a week-long job shows a
    # checkpoint as a shallow dip instead of a spike: loading for the first min(10 min, 10 %) of the run;
    # training jobs write a checkpoint (CKPT_S long) every ckpt_s and evaluate (EVAL_S) every 4th checkpoint.
    load_s = np.minimum(600.0, 0.1 * elapsed[jid])
    f_load = np.clip((load_s - offset) / dur, 0.0, 1.0)
    train = (cls == "training").astype(float)
    period = lv["ckpt_s"][jid]
    n_ck = np.floor((offset + dur) / period) - np.floor(offset / period)
    n_ev = np.floor((offset + dur) / (4 * period)) - np.floor(offset / (4 * period))
    f_ck = train * np.minimum(1.0, n_ck * CKPT_S / dur) * (1 - f_load)
    f_ev = train * np.minimum(1.0 - f_ck, n_ev * EVAL_S / dur) * (1 - f_load)
    f_run = 1.0 - f_load - f_ck - f_ev

    level = lv["gpu"][jid]
    g = level * np.clip(rng.normal(1.0, 0.05, m), 0.7, 1.3)
    g = g * f_run + level * (0.05 * f_load + 0.2 * f_ck + 0.6 * f_ev)
    idle_or_burst = np.where(rng.random(m) < 0.2, rng.uniform(0.3, 0.9, m), rng.uniform(0.0, 0.03, m))
    g = np.where((cls == "interactive") & ~lv["parked"][jid], idle_or_burst * level / 0.3, g)
    g = np.where(lv["parked"][jid], rng.uniform(0.0, 0.02, m), g)
    g = np.where(cls == "debug", level * rng.uniform(0.2, 1.0, m), g)
    g = np.round(np.clip(g, 0.0, 1.0), 2)  # NVML/DCGM report whole percent

    base = lv["cpu"][jid]
    c = base * np.clip(rng.normal(1.0, 0.08, m), 0.6, 1.4)
    c = c * (f_run + f_ev) + base * (1.5 * f_load + 0.5 * f_ck)  # loading is CPU-bound, checkpoints I/O-bound
    c = np.where((cls == "interactive") & (g < 0.05), c * 0.1, c)
    c = np.floor(np.minimum(c, lv["alloc_cpus"][jid]) * 100) / 100  # centi-cores: what a collector keeps

    mid = offset + dur / 2
    ramp = np.where(mid < load_s, 0.3 + 0.7 * mid / np.maximum(load_s, 1), 1.0)
    mem = lv["mem"][jid] * ramp * np.clip(rng.normal(1.0, 0.03, m), 0.9, 1.03)
    last = k == n_s[jid] - 1
    oom = j["state"][jid] == "OUT_OF_MEMORY"
    mem = np.where(oom & last, lv["req_mem"][jid], np.minimum(mem, lv["req_mem"][jid]))
    mem = np.floor(mem / MIB) * MIB
    gm = lv["gmem"][jid] * (1 - 0.7 * f_load) * np.clip(rng.normal(1.0, 0.02, m), 0.9, 1.02)
    gm = np.floor(gm / MIB) * MIB

    gpu_job = j["gpus"][jid] > 0
    samples = {"jid": jid, "offset_s": offset, "interval_s": dur, "cpu_used": c, "mem_bytes": mem,
               "gpu_util": np.where(gpu_job, g, np.nan), "gpu_mem_bytes": np.where(gpu_job, gm, np.nan)}

    # Totals: from the samples where there are samples, drawn directly for short jobs.
    cpu_s = np.bincount(jid, weights=c * dur, minlength=n)
    gpu_int = np.bincount(jid, weights=np.nan_to_num(g) * dur, minlength=n)
    max_rss = _group_max(jid, mem, n)
    max_g = _group_max(jid, g, n)
    max_gm = _group_max(jid, np.nan_to_num(gm), n)
    short = ~sampled
    f = rng.uniform(0.3, 1.0, n)
    cpu_s = np.where(short, np.round(lv["cpu"] * f * elapsed, 3), cpu_s)
    max_rss = np.where(short, np.floor(lv["mem"] * f / KIB) * KIB, max_rss)
    mean_g = np.where(short, lv["gpu"] * rng.uniform(0.1, 0.8, n), gpu_int / np.maximum(elapsed, 1))
    max_g = np.where(short, np.minimum(1.0, mean_g * rng.uniform(1.1, 1.6, n)), max_g)
    max_gm = np.where(short, np.floor(lv["gmem"] * f / MIB) * MIB, max_gm)
    gpu_job = j["gpus"] > 0
    totals = {"cpu_s": cpu_s, "max_rss": max_rss, "mean_gpu": np.where(gpu_job, mean_g, np.nan),
              "max_gpu": np.where(gpu_job, max_g, np.nan), "max_gmem": np.where(gpu_job, max_gm, np.nan)}
    return samples, totals


def _group_max(idx: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n)
    np.maximum.at(out, idx, np.nan_to_num(values))
    return out
