"""Every scenario kind leaves the warm start's pinned jobs as logged (issue 17.2): a job that started before the
window start - still running then, or lookback history feeding fair share - runs exactly as logged in the
scenario as in the baseline (its requests, allocation, nodes, min runtime, start, end and state), whatever the
scenario changes for the jobs the window simulates.

Before the fix the right-size scenario rewrote the CPU and memory requests of 9,336 of the 9,851 jobs that
started before the sample's last week (the 71 still running at its start held 8,334 CPUs instead of 12,502),
and a min-runtime override changed pinned jobs' min runtime (so what fair share charged them)."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dashboard.whatif import runner
from dashboard.whatif.spec import ScenarioSpec
from engine import budgets as bt

REPO = Path(__file__).resolve().parents[2]
BUDGETS = REPO / "sample_data" / "budgets.toml"
AS_LOGGED = ["job_id", "start", "end", "state", "req_cpus", "req_gpus", "req_mem_bytes", "alloc_cpus", "alloc_gpus",
             "alloc_mem_bytes", "min_runtime_s", "node_list", "nodes"]
KINDS = [
    ("shares", {"shares": {"acme/research/language": 60.0}}),
    ("backfill", {"to": "conservative"}),
    ("min_runtime", {"min_runtime_s": {"training": 8 * 3600.0, "debug": 0.0, "interactive": 0.0},
                     "checkpoint_interval_s": 1800.0}),
    ("rightsize", {"margin": 0.2, "gpus": "whole"}),
    ("quota_loop", {"period_s": 86400.0, "history_periods": 3}),
    ("custom", {"shares": {"acme/research/language": 60.0}, "min_runtime_s": {"training": 0.0},
                "scenario_backfill": "conservative"}),
]


@pytest.fixture(scope="module")
def window(sample_store):
    tree = bt.load(BUDGETS)
    inputs = runner.load_inputs(sample_store, tree, window_s=2 * 86400.0, budgets_source=str(BUDGETS))
    base = runner.baseline(ScenarioSpec.make("shares"), inputs)
    return inputs, base


def _pinned(res, start) -> pl.DataFrame:
    j = res.jobs
    return j.filter(pl.col("start").is_not_null() & (pl.col("start") < start)).select(AS_LOGGED).sort("job_id")


def _logged(inputs) -> pl.DataFrame:
    j = inputs.jobs
    return j.filter(pl.col("start").is_not_null() & (pl.col("start") < inputs.start))


@pytest.mark.parametrize("kind,params", KINDS, ids=[k for k, _ in KINDS])
def test_each_scenario_kind_runs_the_pinned_jobs_as_logged(window, kind, params):
    inputs, base = window
    spec = ScenarioSpec.make(kind, **params)
    res = runner.run(spec, inputs, baseline=base)
    b, s = _pinned(res.baseline, inputs.start), _pinned(res.scenario, inputs.start)
    logged = _logged(inputs)
    assert b.height == logged.height > 1000
    assert s.equals(b), kind
    # and as logged: the requests and allocations are the log's own
    both = b.join(logged.select("job_id", *(pl.col(c).alias(c + "_log") for c in
                                           ("req_cpus", "alloc_cpus", "req_mem_bytes", "req_gpus"))), on="job_id")
    for c in ("req_cpus", "alloc_cpus", "req_mem_bytes", "req_gpus"):
        assert both.filter(pl.col(c).ne_missing(pl.col(c + "_log"))).height == 0, (kind, c)
    if kind in ("rightsize", "min_runtime", "custom"):  # the simulated jobs do change: the scenario is not a no-op
        sim_b = res.baseline.jobs.filter(pl.col("submit") >= inputs.start)
        sim_s = res.scenario.jobs.filter(pl.col("submit") >= inputs.start)
        col = "req_cpus" if kind == "rightsize" else "min_runtime_s"
        assert not sim_b.sort("job_id")[col].equals(sim_s.sort("job_id")[col])


def test_the_custom_mix_keeps_a_pinned_jobs_min_runtime():
    """The Fair share page's custom mix (the ``custom`` kind) changes min runtimes of the simulated jobs only. By
    hand: job A (8 GPUs, training, no logged min runtime) runs 0 h -> 20 h and is pinned by the warm start at
    10 h; job B (8 GPUs, training) is submitted at 12 h and runs 2 h. The budget file gives training 8 h; the
    scenario 0. Only B becomes free of charge: unallocated occupancy = B's 16 GPU-hours / (A's 80 + B's 16) in
    [10 h, 30 h), not all 96 (A is not the scenario's to change)."""
    from test_scenarios import inputs, job

    tree = bt.parse('cluster_gpus = 16\n[min_runtime]\ntraining = "8h"\n[tree.lab]\nshare = 1\n')
    rows = [job("A", "lab", 8, 0, 20), job("B", "lab", 8, 12, 2)]
    res = runner.run(ScenarioSpec.make("custom", min_runtime_s={"training": 0.0}), inputs(rows, tree, start=10.0,
                                                                                        end=30.0))
    assert res.baseline.metrics["unallocated_occupancy_share"] == 0.0
    assert res.scenario.metrics["unallocated_occupancy_share"] == pytest.approx(16.0 / 96.0)
