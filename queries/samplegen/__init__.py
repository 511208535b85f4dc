"""Deterministic sample cluster: generate a realistic Slurm export and ingest it through the real ingest path.

``generate(out_dir, seed)`` writes ``sacct.txt`` (``sacct --parsable2``), ``samples.parquet`` (per-job
utilisation series), ``nodes.csv`` (the layout) and ``ground_truth.json`` (the planted user habits and the
parameters; not ingested). ``build_store(store, ...)`` generates and then calls ``queries.ingest.ingest``.

Pipeline: org + layout (``org``) -> submissions with outcomes (``workload``) -> start times and nodes from a
built-in EASY-backfill scheduler (``schedule``) -> usage series and totals (``usage``) -> files (``export``).

Invariants:
- all randomness comes from one ``numpy.random.default_rng(seed)``, consumed in a fixed order; no wall clock:
  same arguments -> byte-identical files;
- the simulation starts ``WARMUP_S`` before the window so the queue is already in steady state when the
  exported window begins; the export holds what ``sacct -S <window start> -E <window end>`` would: every job
  pending, running or ending inside the window;
- offered GPU work is ``OFFERED_LOAD * scale`` times the 'gpu' partition's capacity; the scheduler's demand
  feedback (users hold back while much of their own work, or the queue for their nodes, is pending:
  ``USER_BACKLOG``, ``THIN_LO``/``THIN_HI``) keeps the backlog steady, so jobs pending + running hold 2-3x
  the cluster's GPUs on average (DOMAIN.md section 6).
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from ..ingest import ingest
from ..store.units import DAY
from . import assemble, schedule, workload
from .org import build_layout, build_org

DEFAULT_END = "2026-11-29T00:00:00"
WARMUP_S = 5 * DAY
OFFERED_LOAD = 2.0           # submitted GPU-seconds / GPU capacity before the demand feedback drops some
USER_BACKLOG = 0.10          # a user stops submitting once this share of a partition is pending for them
THIN_LO, THIN_HI = 1.5, 3.0  # pending / partition size where all users start / stop holding back
CPU_ONLY_SHARE = 0.45        # target share of CPU-only jobs (Helios: 47 % per DOMAIN.md, 53 % per its CSV)
CHUNK = 4000                 # submissions drawn per round until the offered work is reached


def _epoch(ts: str) -> int:
    t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp())


def _concat(parts: list[dict]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _take(d: dict, mask) -> dict:
    return {k: v[mask] for k, v in d.items()}


def _gpu_jobs(rng, org, layout, t0, t_end, scale):
    """Draw i.i.d. GPU submissions until the big 'gpu' partition's offered work reaches its target.

    The small 'dev' partition takes whatever the same stream sends it (debug, interactive, eval, small
    training): it is meant to run below saturation, as sites keep their dev partitions.
    """
    target = OFFERED_LOAD * scale * layout.gpus[layout.partition == "gpu"].sum() * (t_end - t0)
    filled = 0.0
    parts, n_subs = [], 0
    while filled < target:
        subs = workload.draw_gpu_submissions(rng, org, layout, CHUNK)
        jobs = workload.expand_arrays(subs)
        workload.draw_outcomes(rng, org, jobs)
        work = np.bincount(jobs["sub_id"], weights=jobs["gpus"] * jobs["runtime_s"], minlength=CHUNK)
        work = np.where(subs["partition"] == "gpu", work, 0.0)
        cs = filled + np.cumsum(work)
        keep = (cs - work) < target
        filled = cs[keep][-1]
        jobs = _take(jobs, keep[jobs["sub_id"]])
        jobs["sub_id"] = jobs["sub_id"] + n_subs  # the kept submissions are a prefix: ids stay consecutive
        n_subs += int(keep.sum())
        parts.append(jobs)
    return _concat(parts), n_subs


def _followups(rng, org, jobs, n_subs):
    """Preempted work is resubmitted by its user a few minutes after the preemption (up to 3 times)."""
    n = len(jobs["cls"])
    jobs["parent"] = np.full(n, -1)
    jobs["followup_delay_s"] = np.zeros(n, np.int64)
    parts, total = [jobs], n
    frontier = np.flatnonzero(jobs["state"] == "PREEMPTED")
    for _ in range(3):
        if not len(frontier):
            break
        f = _take(_concat(parts), frontier)
        f["planned_s"] = np.maximum(f["planned_s"] - f["runtime_s"], 300.0)
        f["array_index"] = np.full(len(frontier), -1)
        f["n_tasks"] = np.ones(len(frontier), int)
        f["throttle"] = np.zeros(len(frontier), int)
        f["sub_id"] = n_subs + np.arange(len(frontier))
        n_subs += len(frontier)
        workload.draw_outcomes(rng, org, f)
        f["parent"] = frontier
        f["followup_delay_s"] = np.floor(rng.lognormal(np.log(600), 0.8, len(frontier))).astype(np.int64) + 30
        parts.append(f)
        frontier = total + np.flatnonzero(f["state"] == "PREEMPTED")
        total += len(f["cls"])
    return _concat(parts), n_subs


def generate(out_dir: str | Path, seed: int = 0, days: int = 30, nodes: int = 128, scale: float = 1.0,
             end: str = DEFAULT_END, cluster: str = "acme") -> dict[str, Path]:
    """Write the sample export into ``out_dir``; returns {'sacct', 'samples', 'nodes', 'truth'} -> path."""
    t_end = _epoch(end)  # a bad end (ValueError) before anything is written
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    org = build_org(rng)
    layout = build_layout(nodes)
    t_win = t_end - int(days * DAY)
    t0 = t_win - WARMUP_S

    # --- GPU work: submissions, follow-ups, submit times, schedule per partition
    g, n_subs = _gpu_jobs(rng, org, layout, t0, t_end, scale)
    g, n_subs = _followups(rng, org, g, n_subs)
    sub_times = workload.submit_times(rng, n_subs, t0, t_end)
    g["submit"] = np.where(g["parent"] >= 0, 0, sub_times[g["sub_id"]])
    g["u_accept"] = rng.random(n_subs)[g["sub_id"]]
    results = {}
    for p in ("gpu", "dev"):
        idx = np.flatnonzero(g["partition"] == p)
        results[p] = (idx, schedule.simulate(g, idx, np.flatnonzero(layout.partition == p), layout,
                                             t_end, USER_BACKLOG, THIN_LO, THIN_HI))

    # --- CPU-only data prep, sized so CPU-only jobs are CPU_ONLY_SHARE of the window's jobs
    n_gpu_win = sum(int((r.accepted & (r.submit >= t_win)).sum()) for _, r in results.values())
    n_cpu = int(round(n_gpu_win * CPU_ONLY_SHARE / (1 - CPU_ONLY_SHARE) * (t_end - t0) / (t_end - t_win)))
    csubs = workload.draw_cpu_submissions(rng, org, layout, max(n_cpu, 1))  # >= 1 task each: enough
    c = workload.expand_arrays(csubs)
    keep = np.cumsum(csubs["n_tasks"]) <= n_cpu
    c = _take(c, keep[c["sub_id"]])
    workload.draw_outcomes(rng, org, c)
    c["sub_id"] = c["sub_id"] + n_subs
    n_cpu_subs = int(keep.sum())
    c["parent"] = np.full(len(c["cls"]), -1)
    c["followup_delay_s"] = np.zeros(len(c["cls"]), np.int64)
    c["submit"] = workload.submit_times(rng, n_cpu_subs, t0, t_end)[c["sub_id"] - n_subs]
    c["u_accept"] = np.zeros(len(c["cls"]))
    cidx = np.arange(len(c["cls"]))
    results["cpu"] = (cidx, schedule.simulate(c, cidx, np.flatnonzero(layout.partition == "cpu"), layout, t_end))

    jobs = _merge(g, c, results)
    params = dict(seed=seed, days=days, nodes=nodes, scale=scale, end=end, cluster=cluster)
    return assemble.write_export(out, rng, org, layout, jobs, t_win, t_end, params)


def _merge(g, c, results) -> dict[str, np.ndarray]:
    """One table of every submitted job with its schedule outcome."""
    n_g = len(g["cls"])
    cols = [k for k in g if k in c]
    jobs = {k: np.concatenate([g[k], c[k]]) for k in cols}
    n = len(jobs["cls"])
    accepted = np.zeros(n, bool)
    start = np.full(n, -1, np.int64)
    end = np.full(n, -1, np.int64)
    cp = np.zeros(n, bool)
    alloc_c = np.zeros(n, np.int64)
    alloc_m = np.zeros(n, np.int64)
    node_idx: list = [[] for _ in range(n)]
    for p, (idx, r) in results.items():
        gi = idx + (n_g if p == "cpu" else 0)
        accepted[gi], start[gi], end[gi], cp[gi] = r.accepted, r.start, r.end, r.cancelled_pending
        jobs["submit"][gi] = r.submit
        alloc_c[gi], alloc_m[gi] = r.alloc_cpus, r.alloc_mem
        for a, b in zip(gi.tolist(), r.node_idx):
            node_idx[a] = b
    jobs.update(accepted=accepted, start=start, end=end, cancelled_pending=cp,
                alloc_cpus_node=alloc_c, alloc_mem_node=alloc_m)
    jobs["node_idx"] = np.empty(n, dtype=object)
    jobs["node_idx"][:] = node_idx
    return jobs


def default_export_dir(store: str | Path) -> Path:
    """Where ``build_store`` writes the export when not told: a sibling ``<store>-export`` directory."""
    store = Path(store)
    return store.with_name(store.name + "-export")


def build_store(store: str | Path, export_dir: str | Path | None = None, **params):
    """Generate the export (``generate(**params)``) and ingest it into ``store`` through the real ingest path.

    Returns ``(paths, summaries)``: the generated files and ``queries.ingest.ingest``'s per-file summaries.
    The three files are ingested in one transaction, so a failure leaves the store as it was.
    """
    paths = generate(export_dir if export_dir is not None else default_export_dir(store), **params)
    summaries = ingest([paths["sacct"], paths["samples"], paths["nodes"]], store,
                       cluster=params.get("cluster", "acme"), timezone="UTC")  # the export's clock is UTC
    return paths, summaries
