"""What every backfill kernel shares: the candidates' order (``backfill_order``), Slurm's ``bf_max_job_test``
cap on how many are tested, and the "fragmentation or resources" verdict for a job that does not fit.

Invariant: with ``backfill_max_job_test`` None the candidates pass through untouched; a cut is counted once in
``counters["backfill_cap_hits"]``.
"""
from __future__ import annotations


def tested(sim, state, jobs):
    """``jobs`` up to the pass's ``backfill_max_job_test`` (counted across incremental passes); a cut is counted."""
    cap = sim.cfg.backfill_max_job_test
    if cap is None:
        return jobs
    return _take(sim, state, jobs, cap)


def _take(sim, state, jobs, cap):
    for j in jobs:
        if state.tested >= cap:
            sim.counters["backfill_cap_hits"] += 1
            return
        state.tested += 1
        yield j


def sort_backfill(sim, jobs):
    order = sim.cfg.backfill_order
    if order == "queue":
        return jobs
    jobs = list(jobs)
    lim = sim.limit_left
    size = sim.req_g if sim.capacity[0] > 0 else sim.req_c
    if order == "area":
        names = sim.wl.job_names
        return sorted(jobs, key=lambda j: (-size[j] * lim[j], names[j] or "", j))
    return sorted(jobs, key=lambda j: (size[j], j))


def why(sim, j) -> str:
    """'fragmentation' when the free resources of the job's nodes add up to its request, else 'resources'."""
    if sim.pool.cluster.procs_mode:
        return "resources"
    _, _, _, _, _, _, fg, fc, fm = sim.pool.bounds(sim.group[j])
    if fg >= sim.req_g[j] and fc >= sim.req_c[j] and fm >= sim.req_m[j]:
        return "fragmentation"
    return "resources"
