"""The engine's two seams, shown by use: a toy queue policy and a toy backfill rule, each defined here, registered
with one line and run end to end through ``simulate`` on a small workload whose schedule is computed by hand.
Nothing else in the engine is touched: this file is the whole change a new policy or rule needs (plus, for a
real one, its module and its ``register`` line in ``engine/policies/__init__.py`` or ``engine/backfill/__init__.py``).
"""
from __future__ import annotations

import bisect

import polars as pl
import pytest

from engine import Cluster, ConfigError, SimConfig, simulate
from engine.backfill import BACKFILLS
from engine.backfill import register as register_backfill
from engine.policies import POLICIES
from engine.policies import register as register_policy


def jobs(rows):
    """rows: (label, submit, cpus, run, limit) -> a jobs frame sized in CPUs (job ids are the row numbers)."""
    return pl.DataFrame({
        "job_id": [str(i + 1) for i in range(len(rows))], "job_name": [r[0] for r in rows],
        "submit": [float(r[1]) for r in rows], "req_cpus": [float(r[2]) for r in rows],
        "elapsed_s": [float(r[3]) for r in rows], "time_limit_s": [float(r[4]) for r in rows],
    })


def starts(res) -> dict:
    return dict(zip(res.jobs["job_name"].to_list(), res.jobs["start"].to_list()))


# ------------------------------------------------------------------------------------------ a toy queue policy
class ShortestFirstQueue:
    """Shortest time limit first, ties by index (submit, job id)."""

    def __init__(self, limit):
        self.limit = limit
        self.keys: list[tuple] = []
        self.members: set[int] = set()

    def __len__(self):
        return len(self.keys)

    def __contains__(self, j):
        return j in self.members

    def add(self, j):
        bisect.insort(self.keys, (self.limit[j], j))
        self.members.add(j)

    def remove(self, j):
        self.keys.remove((self.limit[j], j))
        self.members.discard(j)

    def order(self, now):
        return (j for _, j in self.keys)

    def jobs(self):
        return self.members


class ShortestFirst:
    name = "shortest-first"
    uses_buckets = False
    tracks_usage = False
    dominant_share = False
    new_jobs_queue_last = False
    supports_fastpath = False
    order_skips_capped = False

    def make_queue(self, sim):
        return ShortestFirstQueue(sim.limit)


@pytest.fixture
def shortest_first():
    register_policy(ShortestFirst())
    try:
        yield
    finally:
        del POLICIES["shortest-first"]


# 4 processors, no backfill. A holds all 4 until 10; B, C, D queue behind it. At 10 shortest-first offers D (limit 2),
# C (5), B (30): D takes all 4 (10-12), C then blocks and the pass stops. At 12 D ends: C (2 procs) and B (2 procs)
# both fit, C first. FCFS instead starts B and C at 10 and D when both ended, at 20.
SHORT = [("A", 0, 4, 10, 10), ("B", 1, 2, 10, 30), ("C", 2, 2, 5, 5), ("D", 3, 4, 2, 2)]


@pytest.mark.parametrize("layout", ["procs", "node"])
def test_toy_policy_runs_end_to_end(shortest_first, layout):
    cluster = Cluster.procs(4) if layout == "procs" else Cluster.uniform(1, 0, 4)
    res = simulate(jobs(SHORT), cluster, SimConfig(policy="shortest-first", backfill="none"))
    assert starts(res) == {"A": 0.0, "B": 12.0, "C": 12.0, "D": 10.0}
    fcfs = simulate(jobs(SHORT), cluster, SimConfig(policy="fcfs", backfill="none"))
    assert starts(fcfs) == {"A": 0.0, "B": 10.0, "C": 10.0, "D": 20.0}


def test_unregistered_policy_is_refused_with_the_registry_names():
    with pytest.raises(ConfigError, match=r"policy: 'shortest-first' is not one of fcfs\|priority\|fairshare\|drf"):
        SimConfig(policy="shortest-first").validated()


# ------------------------------------------------------------------------------------------ a toy backfill rule
def first_fit_pass(sim, now, jobs, state):
    """Start every examined job that fits now, in queue order; no reservation for anyone (processor-count mode)."""
    pool = sim.pool
    started = []
    for j in jobs:
        s = sim.req_c[j]
        if s <= pool.free_c[0]:
            sim.start(j, now, ((0, 0, s, 0),))
            started.append(j)
        else:
            sim.waits.note(j, "resources", now)
    return started


class FirstFit:
    name = "first-fit"
    takes_depth = False

    def depth(self, reservation_depth):
        return 1  # jobs wait for resources, not behind the head (default wait reason "resources")

    def pass_for(self, sim):
        return first_fit_pass

    def whole_run(self, sim):
        return None


@pytest.fixture
def first_fit():
    register_backfill(FirstFit())
    try:
        yield
    finally:
        del BACKFILLS["first-fit"]


# 4 processors. A (2) runs 0-10; B (4) blocks at 1; C (2, limit 20) fits the 2 free at 2. EASY: B's reservation is
# 10 with no extra processors and C would end at 22 > 10, so C waits for B (10-20) and starts at 20. First fit
# starts C at once (2-22); B then needs all 4 and waits for C's end at 22.
HOLE = [("A", 0, 2, 10, 10), ("B", 1, 4, 10, 10), ("C", 2, 2, 20, 20)]


def test_toy_backfill_rule_runs_end_to_end(first_fit):
    res = simulate(jobs(HOLE), Cluster.procs(4), SimConfig(backfill="first-fit"))
    assert starts(res) == {"A": 0.0, "B": 22.0, "C": 2.0}
    assert res.jobs.filter(pl.col("job_name") == "B")["wait_reason"].item() == "resources"
    easy = simulate(jobs(HOLE), Cluster.procs(4), SimConfig(backfill="easy"))
    assert starts(easy) == {"A": 0.0, "B": 10.0, "C": 20.0}


def test_rule_without_depth_refuses_reservation_depth(first_fit):
    with pytest.raises(ConfigError, match="reservation_depth: needs backfill easy or conservative"):
        SimConfig(backfill="first-fit", reservation_depth=2).validated()


def test_engine_exports_and_submodules_load_on_first_use():
    # engine/__init__ imports lazily (the registries must stay cheap for the CLI): its public names and its
    # submodules read as attributes still resolve, and a missing name is an AttributeError
    import subprocess
    import sys

    code = ("import sys, engine; assert 'polars' not in sys.modules; import engine.policies, engine.backfill; "
            "assert 'polars' not in sys.modules; print(engine.config.WEEK_S, engine.simulate.__name__); "
            "print(hasattr(engine, 'nope'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["604800.0", "simulate", "False"]
