"""``simulate``: a canonical jobs frame and a cluster in, a ``SimResult`` out (the engine's one entry point).

Invariant: the same inputs and ``seed`` give byte-identical outputs; the cyclic garbage collector is off during a
run (and restored after), which changes nothing but the time.
"""
from __future__ import annotations

import gc

import polars as pl

from . import attainment, metrics, result
from .cluster import Cluster
from .config import SimConfig
from .core import Simulator
from .pool import Pool
from .result import SimResult
from .tenants import gpu_cap
from .workload import prepare


def load_cluster(spec) -> Cluster:
    """A ``Cluster`` from a Cluster, a nodes DataFrame, or a CSV path (canonical nodes or openb node list)."""
    if isinstance(spec, Cluster):
        return spec
    if isinstance(spec, pl.DataFrame):
        return Cluster.from_frame(spec)
    return Cluster.from_csv(spec)


def simulate(workload: pl.DataFrame, cluster, config: SimConfig | None = None) -> SimResult:
    """Simulate ``workload`` (canonical jobs frame) on ``cluster`` under ``config``; see ``SimResult``."""
    cfg = (config or SimConfig()).validated()
    pool = Pool(load_cluster(cluster))
    replay = cfg.replay == "logged"
    wl = prepare(workload, pool, None if replay else gpu_cap(cfg.budgets), keep_all=replay,
                 warm_start=cfg.warm_start, window_end=cfg.window_end)
    # The run allocates millions of small tuples that never form cycles: the cyclic GC would only re-scan them.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        sim = Simulator(wl, pool, cfg)
        sim.run()
        last = max((e for e in sim.end_time if e is not None), default=0.0)
        sim.health.finish(last)
        m = metrics.compute(sim, wl)
        m["params"] = cfg.params()
        m["cluster"] = pool.cluster.describe()
        res = result.build(sim, wl, m)
        window = None
        origin = wl.origin_us if wl.datetime_dtype is not None else 0.0  # None: no job, so no time axis
        if (wl.warm_s is not None or wl.end_s is not None) and origin is not None:  # the measured window, µs
            w0, w1 = metrics.window(sim, wl)
            window = (origin + round(w0 * 1e6), origin + round(w1 * 1e6))
        m["attainment"] = attainment.of_run(res.jobs, sim.budgeting.tree, m["capacity"], m["resource"],
                                            cfg.lookback_s, history=cfg.attainment_history, window_us=window)
        return res
    finally:
        if was_enabled:
            gc.enable()
