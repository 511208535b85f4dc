"""quotaloop's scheduling engine: an embedded discrete-event simulator of a shared GPU/CPU cluster.

    from engine import simulate, SimConfig, Cluster, compare
    res = simulate(jobs_df, Cluster.uniform(16, gpus_per_node=8, cpus_per_node=64),
                   SimConfig(policy="fairshare", backfill="easy", budgets={"org/a": 3, "org/b": 1}))
    res.jobs, res.timeline, res.metrics; res.write("out/")

It replays the jobs' real submit times, requests, time limits and run times under another policy
(``SimConfig(replay="logged")`` instead replays the log's own schedule: the "no policy change" baseline).
``SimConfig(warm_start=T, window_end=E)`` starts from the logged cluster state at T (jobs that started before T
run as logged, the rest are simulated from T) and measures [T, E): the window replay the scenarios use. The
output has one row per attempt of a requeued job (``result``). Module
map: ``config`` (SimConfig, ConfigError, durations), ``cluster`` (layouts and loaders), ``workload`` (frame ->
arrays), ``core`` (event loop, job lifecycle), ``passes`` (no backfill / EASY / depth-K and conservative),
``profile`` (free-resource profiles), ``pool`` (placement), ``policy`` (queue orders), ``tenants`` (budget
buckets, usage windows), ``min_runtime`` (the one min-runtime resolver: override > log > budget file > default),
``preempt`` (min-runtime contracts, preemption, guarantees, QoS preemption pairs),
``reasons`` (wait reasons), ``health`` (node failures and drains), ``drains`` (``NODES@TIME`` specs and drain
files as node events), ``replay`` (the as-logged replay), ``warm`` (warm starts), ``metrics``, ``attainment`` (budget attainment by the
queries' definition, on the simulated jobs frame), ``result`` (outputs, ``compare``), ``fidelity`` (a run against
the log it replays: wait errors, correlations, order, occupancy) and ``calibrate`` (fitting the scheduler cycle
``sched_interval_s`` on the first part of a log, reported on the held-back rest).
``budgets`` (a leaf sub-package) holds the budget model shared with the queries.

Invariants: no wall clock, no Streamlit/DuckDB/queries imports; the same inputs and ``seed`` give
byte-identical ``jobs.parquet``, ``timeline.parquet`` and ``metrics.json``. Every optimised piece has a plain
counterpart it must agree with on random workloads (``tests/engine/test_engine_reference.py``).

Speed (``tests/benchmarks/bench_engine.py``; numbers in README.md, "Benchmarks"): a run costs about one
scheduling pass per distinct event instant; a pass re-examines the queue in policy order, so the time is spread
over the queue order, placement / backfill checks, the EASY reservation and the preemption search, with no
single hot spot. Conservative backfill rebuilds every queued job's reservation at each pass (quadratic in the
queue length); ``backfill_max_job_test`` (Slurm's bf_max_job_test) bounds it at the cost of exactness.
"""
from __future__ import annotations

import gc

import polars as pl

from .cluster import Cluster
from .config import ConfigError, NodeEvent, SimConfig, parse_duration
from .result import SimResult, compare

__all__ = ["simulate", "compare", "Cluster", "SimConfig", "NodeEvent", "SimResult", "ConfigError",
           "parse_duration", "load_cluster"]


def load_cluster(spec) -> Cluster:
    """A ``Cluster`` from a Cluster, a nodes DataFrame, or a CSV path (canonical nodes or openb node list)."""
    if isinstance(spec, Cluster):
        return spec
    if isinstance(spec, pl.DataFrame):
        return Cluster.from_frame(spec)
    return Cluster.from_csv(spec)


def simulate(workload: pl.DataFrame, cluster, config: SimConfig | None = None) -> SimResult:
    """Simulate ``workload`` (canonical jobs frame) on ``cluster`` under ``config``; see ``SimResult``."""
    from . import attainment, metrics, result
    from .core import Simulator
    from .pool import Pool
    from .tenants import gpu_cap
    from .workload import prepare

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
        if wl.warm_s is not None or wl.end_s is not None:  # the measured window, as µs since the epoch
            w0, w1 = metrics.window(sim, wl)
            origin = wl.origin_us if wl.datetime_dtype is not None else 0.0
            window = (origin + round(w0 * 1e6), origin + round(w1 * 1e6))
        m["attainment"] = attainment.of_run(res.jobs, sim.budgeting.tree, m["capacity"], m["resource"],
                                            cfg.lookback_s, history=cfg.attainment_history, window_us=window)
        return res
    finally:
        if was_enabled:
            gc.enable()
