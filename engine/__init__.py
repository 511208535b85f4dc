"""quotaloop's scheduling engine: an embedded discrete-event simulator of a shared GPU/CPU cluster.

    from engine import simulate, SimConfig, Cluster, compare
    res = simulate(jobs_df, Cluster.uniform(16, gpus_per_node=8, cpus_per_node=64),
                   SimConfig(policy="fairshare", backfill="easy", budgets={"org/a": 3, "org/b": 1}))
    res.jobs, res.timeline, res.metrics; res.write("out/")

It replays the jobs' real submit times, requests, time limits and run times under another policy
(``SimConfig(replay="logged")`` instead replays the log's own schedule: the "no policy change" baseline).
``SimConfig(warm_start=T, window_end=E)`` starts from the logged cluster state at T (jobs that started before T
run as logged, the rest are simulated from T) and measures [T, E): the window replay the scenarios use. The
output has one row per attempt of a requeued job (``result``).

Module map: ``run`` (``simulate``), ``config`` (SimConfig, ConfigError, durations), ``cluster`` (layouts and
loaders), ``workload`` (frame -> arrays), ``core`` (event loop, job lifecycle), ``events`` (event kinds and their
order), ``jobstate`` (a job's states), ``units`` (shared constants), ``profile`` (free-resource profiles),
``pool`` (placement), ``tenants`` (budget buckets, usage windows), ``min_runtime`` (the one min-runtime
resolver: override > log > budget file > default), ``preempt`` (min-runtime contracts,
preemption, guarantees, QoS preemption pairs), ``reasons`` (wait reasons), ``user_limits`` (per-user running limits), ``health`` (node failures and
drains), ``drains`` (``NODES@TIME`` specs and drain files as node events), ``replay`` (the as-logged replay),
``warm_start`` (warm starts), ``metrics``, ``attainment`` (budget attainment by the queries' definition, on the
simulated jobs frame), ``result`` (outputs, ``compare``), ``fidelity`` (a run against the log it replays: wait
errors, correlations, order, occupancy), ``idle_capacity`` (capacity the log left idle while its oldest waiting
job fit it: suspect outages), ``user_limit_evidence`` (per-user ceilings in a log) and ``calibrate`` (fitting what a log does not state - the scheduler cycle, reservation depth,
walltime margin, multifactor priority weights, drained capacity, per-user running limit - on the first part of a log, reported on the
held-back rest). ``budgets`` (a leaf sub-package) holds the budget model
shared with the queries.

Seams (one registry each; adding one is a module plus a ``register`` line):
- ``policies`` (``POLICIES``): the queue order, a ``QueuePolicy`` per module (``fcfs``, ``priority``,
  ``fairshare``, ``drf``, ``multifactor``; ``buckets`` holds what fairshare and drf share). The core reads its traits
  (``uses_buckets``, ``tracks_usage``, ``new_jobs_queue_last``, ``supports_fastpath``, ...), never its name.
- ``backfill`` (``BACKFILLS``): the backfill rule, a ``BackfillRule`` per module (``none``, ``easy``,
  ``conservative``) giving the pass function (kernels: ``easy`` scalar/node, ``depth_k`` on profiles) and, where
  it applies, a whole-run kernel (``fastpath``).

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

import importlib

# The public names are imported on first use (PEP 562): ``import engine.policies`` / ``engine.backfill`` (the
# registries every CLI command's parser reads) must not load polars, numpy and the simulator, which costs about
# 1.3 s per command (measured: ``quotaloop --help`` 0.35 s without, 1.7 s with).
_EXPORTS = {"simulate": "run", "load_cluster": "run", "compare": "result", "SimResult": "result",
            "Cluster": "cluster", "SimConfig": "config", "NodeEvent": "config", "ConfigError": "config",
            "parse_duration": "config"}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    where = _EXPORTS.get(name)
    if where is None:  # a submodule read as an attribute (``import engine; engine.config.WEEK_S``)
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'engine' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value
