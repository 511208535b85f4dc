"""The compiled node-mode pool (``engine/_nodecore.c`` bound by ``engine/nodepool.py``) against its oracle, the Python
methods of ``engine.pool.Pool``: the same answers and the same state after every operation, and byte-identical
simulations.

Three levels: the pool alone (random heterogeneous clusters - partitions, GPU types, nodes without a memory
figure, whose sums exceed 64 bits - and random sequences of allocations, releases, availability changes, bounds,
best-fit / gang / index placements with EASY limits and hypothetical free lists; both pools' every list and dict
compared after each step), whole simulations on node clusters across every policy x backfill x min-runtime
contract setting with preemption and node events (``QUOTALOOP_ENGINE=python`` against the compiled pool: jobs,
timeline, metrics), and the sample store in node mode. The build check FAILS (never skips) when gcc is here but
the module is absent or stale.
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import types
import sysconfig
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.backfill.easy as easy
import engine.backfill.fastpath as fastpath
import engine.nodepool as nodepool
from engine import Cluster, ConfigError, SimConfig, simulate
from engine.pool import Pool
from engine.result import metrics_json
from engine.units import UNLIMITED

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "engine" / "_nodecore.c"

needs_compiled = pytest.mark.skipif(nodepool.compiled is None, reason="compiled node pool not built (see "
                                    "test_compiled_pool_is_built, which fails in that case when gcc is here)")


# ------------------------------------------------------------------------------ the build
def test_compiled_pool_is_built():
    if os.environ.get(fastpath.ENGINE_ENV, "").strip().lower() == "python":
        pytest.skip(f"{fastpath.ENGINE_ENV}=python selects the Python pool for this run")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if shutil.which("gcc") is None or not headers.is_file():
        pytest.skip("no gcc or no Python headers: the package runs the Python pool by design")
    assert nodepool.compiled is not None, "gcc is here but engine._nodecore is not built: pip install -e ."
    assert nodepool.compiled.SOURCE_SHA256 == hashlib.sha256(SOURCE.read_bytes()).hexdigest(), \
        "engine._nodecore was built from another _nodecore.c: rebuild with pip install -e ."
    pool = Pool(Cluster.uniform(2, 8, 16))
    assert pool.ops is not None  # node mode binds it by default
    assert Pool(Cluster.procs(8)).ops is None  # processor-count mode keeps the Python methods


@needs_compiled
def test_engine_variable_selects_the_pool(monkeypatch):
    monkeypatch.setenv(fastpath.ENGINE_ENV, "python")
    assert Pool(Cluster.uniform(2, 8, 16)).ops is None
    monkeypatch.setenv(fastpath.ENGINE_ENV, "compiled")
    assert Pool(Cluster.uniform(2, 8, 16)).ops is not None
    monkeypatch.setattr(nodepool, "compiled", None)
    with pytest.raises(ValueError, match="not built"):
        Pool(Cluster.uniform(2, 8, 16))
    monkeypatch.delenv(fastpath.ENGINE_ENV)
    assert Pool(Cluster.uniform(2, 8, 16)).ops is None  # no compiled module: the Python methods run


# ------------------------------------------------------------------------------ the pool alone
def random_cluster(rng) -> Cluster:
    n = rng.randint(1, 12)
    gpus = tuple(float(rng.choice([0, 2, 4, 8])) for _ in range(n))
    cpus = tuple(float(rng.choice([4, 16, 32.5])) for _ in range(n))
    # None = memory unknown (UNLIMITED MiB): several of them overflow 64-bit sums
    mem = tuple(rng.choice([None, None, 64 * 2.0**30, 256 * 2.0**30]) for _ in range(n))
    part = tuple(rng.choice([None, "a", "b"]) for _ in range(n))
    gtype = tuple(rng.choice([None, "h100", "l40s"]) for _ in range(n))
    return Cluster(tuple(f"n{i:02d}" for i in range(n)), gpus, cpus, mem, part, gtype)


def state(pool) -> tuple:
    return (pool.free_g, pool.free_c, pool.free_m, pool.avail, pool.epoch, pool.gepoch, pool._agg,
            {k: {v: sorted(s) for v, s in idx.items()} for k, idx in pool._index.items()},
            pool.stranded_g, pool._stranded)


def both(monkeypatch, cluster):
    with monkeypatch.context() as m:
        m.setattr(nodepool, "ENABLED", False)
        py = Pool(cluster)
    c = Pool(cluster)
    assert py.ops is None and c.ops is not None
    return py, c


class ReservationInputs:
    """What ``easy._reservation`` reads of a simulator: the held allocations as running jobs with estimated ends
    (ties included), one queued request; no processor drains over time (``health.capacity``)."""

    def __init__(self, pool, held, key, rng):
        self.pool = pool
        self.health = types.SimpleNamespace(capacity=None)
        self.alloc = list(held) + [()]
        seq = rng.sample(range(len(held)), len(held))  # releases in any node order, not the allocation order
        self.running_by_end = sorted((float(rng.choice([5, 10, 10, 20, 40])), seq[j], j) for j in range(len(held)))
        j = len(held)
        grp = pool.group(*key)
        self.group, self.gang = {j: grp}, {j: rng.random() < 0.3}
        self.req_g, self.req_c, self.req_m = ({j: rng.choice([0, 1000, 4000, 8000, 24000])},
                                              {j: rng.choice([0, 1000, 16000])}, {j: rng.choice([0, 4096, 300000])})
        self.j = j

    def eligible(self, j):
        return frozenset(self.group[j][1])


def reservation(pool, held, key, rng):
    """``easy._reservation`` on ``pool`` (the compiled twin when ``pool.ops`` is bound), on random running ends."""
    state = rng.getstate()
    sim = ReservationInputs(pool, held, key, rng)
    rng.setstate(state)
    return easy._reservation(sim, sim.j)


@needs_compiled
@pytest.mark.parametrize("seed", range(150))
def test_random_pool_operations_identical(monkeypatch, seed):
    rng = random.Random(seed)
    cluster = random_cluster(rng)
    py, c = both(monkeypatch, cluster)
    keys = [(rng.choice([None, "a", "b"]), rng.choice([None, "h100", "l40s"])) for _ in range(4)]
    held = []  # allocations made (same on both pools)
    for _ in range(rng.randint(10, 60)):
        key = rng.choice(keys)
        grp_py, grp_c = py.group(*key), c.group(*key)
        assert grp_py == grp_c
        g, cc, m = (rng.choice([0, 500, 1000, 2000, 8000, 16000, 40000]), rng.choice([0, 1000, 4000, 16000, 60000]),
                    rng.choice([0, 1, 4096, 65536, 300000]))
        assert py.bounds(grp_py) == c.bounds(grp_c)
        for gang in (False, True):
            assert py.place_in(grp_py, gang, g, cc, m) == c.place_in(grp_c, gang, g, cc, m)
            nodes = grp_py[2] if gang else grp_py[1]
            limit = {n: (rng.randint(-1, 9) * 1000, rng.randint(0, 40) * 1000,
                         rng.choice([0, 70000, UNLIMITED])) for n in nodes if rng.random() < 0.5}
            if gang and nodes and rng.random() < 0.5:  # a limit equal to the capacity does not exclude the node
                n0 = nodes[0]
                limit[n0] = [py.cap_g[n0], py.cap_c[n0], py.cap_m[n0]]
            assert py.place(nodes, gang, g, cc, m, limit=limit) == c.place(nodes, gang, g, cc, m, limit=limit)
            # the index walk with the limit's nodes compared one by one (EASY's placements after T): the scan's
            # answer, also with limit entries for nodes outside the group and for unavailable nodes
            wide = {**{n: (rng.randint(0, 9) * 1000, 4000, UNLIMITED) for n in range(cluster.size)
                       if rng.random() < 0.2}, **limit}
            for lim in (limit, wide, {}):
                want = py.place(nodes, gang, g, cc, m, limit=lim)
                assert py.place_in(grp_py, gang, g, cc, m, lim) == want
                assert c.place_in(grp_c, gang, g, cc, m, lim) == want
            free = ([x + rng.randint(0, 1) * 1000 for x in py.free_g], list(py.free_c), list(py.free_m))
            assert py.place(nodes, gang, g, cc, m, free=free) == c.place(nodes, gang, g, cc, m, free=free)
        op = rng.random()
        if op < 0.45:
            pl_ = py.place_in(grp_py, rng.random() < 0.2, g, cc, m)
            if pl_ is not None:
                py.allocate(pl_)
                c.allocate(pl_)
                held.append(pl_)
        elif op < 0.75 and held:
            a = held.pop(rng.randrange(len(held)))
            py.release(a)
            c.release(a)
        else:
            n, up = rng.randrange(cluster.size), rng.random() < 0.6
            py.set_avail(n, up)
            c.set_avail(n, up)
        assert state(py) == state(c)
        assert reservation(py, held, key, rng) == reservation(c, held, key, rng)
    # over-allocation and over-release fail alike, with the same partial effect (the epoch)
    n = 0
    for pool in (py, c):
        with pytest.raises(AssertionError, match="over-allocated"):
            pool.allocate(((n, pool.free_g[n] + 1, 0, 0),))
        with pytest.raises(AssertionError, match="over-released"):
            pool.release(((n, pool.cap_g[n] - pool.free_g[n] + 1, 0, 0),))
    assert state(py) == state(c)


# ------------------------------------------------------------------------------ whole simulations
ACCOUNTS = ["lab/a/x", "lab/a/y", "lab/b", "ops"]
BUDGETS = [None, {"lab": 3, "lab/a": 2, "lab/a/x": 1, "lab/a/y": 1, "lab/b": 1, "ops": 1},
           {"lab": {"share": 3, "max_gpus": 12}, "lab/a/x": {"share": 1, "max_gpus": 6}, "lab/a/y": 1,
            "lab/b": {"share": 2, "guaranteed_gpus": 4}, "ops": {"share": 1, "max_gpus": 5}}]
BACKFILL = [("none", None), ("easy", None), ("conservative", None), ("easy", 2)]
CONTRACTS = [{}, {"default": 0.0}, {"default": 20.0}, {"training": 40.0, "debug": 0.0}]
POLICIES = ["fcfs", "fairshare", "drf", "priority", "multifactor"]


def node_cluster() -> Cluster:
    """Two GPU types in two partitions, one node without a memory figure: several placement groups."""
    return Cluster(("a1", "a2", "a3", "b1", "b2"), (8.0, 8.0, 4.0, 4.0, 2.0), (32.0, 32.0, 16.0, 16.0, 8.0),
                   (256 * 2.0**30, 256 * 2.0**30, None, 64 * 2.0**30, 64 * 2.0**30),
                   ("gpu", "gpu", "gpu", "small", "small"), ("h100", "h100", "a100", "l40s", "l40s"))


def random_node_workload(seed, n):
    rng = np.random.default_rng(seed)
    gpus = rng.choice([0, 1, 2, 4, 8, 12, 16], n, p=[.05, .3, .2, .15, .15, .1, .05])
    run = rng.integers(1, 150, n).astype(float)
    return pl.DataFrame({
        "job_id": [str(i + 1) for i in range(n)],
        "submit": np.sort(np.round(rng.uniform(0, 500, n))),
        "elapsed_s": run, "time_limit_s": np.where(rng.random(n) < 0.3, run, np.round(run * rng.uniform(1, 3, n))),
        "req_gpus": gpus.astype(float), "req_cpus": np.maximum(gpus, 1) * rng.choice([1.0, 3.0], n),
        "req_mem_bytes": pl.Series(rng.choice([np.nan, 8 * 2.0**30, 100 * 2.0**30], n)).fill_nan(None),
        "partition": rng.choice(["gpu", "small", ""], n, p=[.5, .3, .2]),
        "gpu_type": rng.choice(["h100", "a100", "l40s", ""], n),
        "account": rng.choice(ACCOUNTS, n), "job_class": rng.choice(["training", "debug"], n),
        "priority": rng.integers(0, 5, n).astype(float),
        "min_runtime_s": pl.Series(rng.choice([np.nan, 0.0, 30.0], n)).fill_nan(None),
    })


def run_engine(monkeypatch, engine, jobs, cluster, cfg):
    """The run's result, or the ``ConfigError`` it stopped with (a preemption livelock: both engines must stop
    alike, ``assert_identical``)."""
    with monkeypatch.context() as m:
        m.setenv(fastpath.ENGINE_ENV, engine)
        return outcome(simulate, jobs, cluster, cfg)


def outcome(run, *args):
    try:
        return run(*args)
    except ConfigError as exc:
        return exc


def assert_identical(py, c):
    if isinstance(py, ConfigError) or isinstance(c, ConfigError):
        assert str(py) == str(c), (py, c)
        return
    diff = [col for col in py.jobs.columns if not py.jobs[col].equals(c.jobs[col], null_equal=True)]
    assert not diff, f"columns differ: {diff}"
    assert py.timeline.equals(c.timeline, null_equal=True)
    assert metrics_json(py.metrics) == metrics_json(c.metrics)


@needs_compiled
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(5, 90), policy=st.sampled_from(POLICIES),
       backfill=st.sampled_from(BACKFILL), contract=st.sampled_from(CONTRACTS), budgets=st.sampled_from(BUDGETS),
       preemption=st.booleans(), events=st.booleans(), margin=st.sampled_from([0.0, 0.2]))
def test_random_node_simulations_identical(monkeypatch, seed, n, policy, backfill, contract, budgets, preemption,
                                          events, margin):
    rule, depth = backfill
    if budgets is None and policy == "fairshare":
        budgets = BUDGETS[1]
    cfg = SimConfig(policy=policy, backfill=rule, reservation_depth=depth, budgets=budgets, lookback_s=300,
                    min_runtime_by_class=contract, preemption=preemption, walltime_margin=margin,
                    checkpoint_interval_s=(None, 15.0)[seed % 2],
                    node_events=((120.0, "a2", "fail"), (200.0, "b1", "drain")) if events else (),
                    repair_time_s=90.0)
    w, cluster = random_node_workload(seed, n), node_cluster()
    py = run_engine(monkeypatch, "python", w, cluster, cfg)
    c = run_engine(monkeypatch, "compiled", w, cluster, cfg)
    assert_identical(py, c)


@needs_compiled
def test_sample_store_in_node_mode(sample_store, monkeypatch):
    """The sample (136 nodes, 1,024 GPUs): FCFS + EASY, and the Fair share page's warm-started week with its
    budgets and 8 h training contracts."""
    from queries.store import Store

    from engine.budgets import load

    s = Store(sample_store)
    jobs, cluster = s.read("jobs"), Cluster.from_frame(s.read("nodes"))
    tree = load(REPO / "sample_data" / "budgets.toml")
    last = jobs["submit"].max()
    for cfg in (SimConfig(policy="fcfs", backfill="easy", preemption=False),
                SimConfig(policy="fairshare", backfill="easy", budgets=tree, min_runtime_by_class={"training": 8 * 3600.0},
                          warm_start=last - __import__("datetime").timedelta(days=7))):
        py = run_engine(monkeypatch, "python", jobs, cluster, cfg)
        c = run_engine(monkeypatch, "compiled", jobs, cluster, cfg)
        assert py.jobs.height > 1000
        assert_identical(py, c)


class HandReservation:
    """Four idle 8-GPU nodes; jobs 0 and 1 hold all of nodes 3 and 1 and end (by estimate) at t = 50, job 0
    first in the running order; job 2 holds 4 GPUs of node 0 until t = 30; nodes 2 is down."""

    def __init__(self, pool, g, gang):
        self.pool = pool
        self.health = types.SimpleNamespace(capacity=None)  # no processor drains over time
        full = (8000, 32000, pool.cap_m[0])
        self.alloc = [((3, *full),), ((1, *full),), ((0, 4000, 16000, 0),), ()]
        for a in self.alloc:
            pool.allocate(a)
        pool.set_avail(2, False)
        self.running_by_end = [(30.0, 3, 2), (50.0, 1, 0), (50.0, 2, 1)]
        grp = pool.group(None, None)
        self.group, self.gang = {3: grp}, {3: gang}
        self.req_g, self.req_c, self.req_m = {3: g}, {3: 1000}, {3: 0}

    def eligible(self, j):
        return frozenset(self.group[j][1])


@pytest.mark.parametrize("compiled", [False, True])
def test_reservation_hand_computed(monkeypatch, compiled):
    if compiled and nodepool.compiled is None:
        pytest.skip("compiled node pool not built")
    monkeypatch.setattr(nodepool, "ENABLED", compiled)
    cluster = Cluster.uniform(4, 8, 32)
    cap_m = UNLIMITED  # no memory figure
    # 6 GPUs: node 0 has 4 free now and 8 at t = 30 -> T = 30 on node 0, leaving (2, 31, unlimited)
    sim = HandReservation(Pool(cluster), 6000, False)
    assert easy._reservation(sim, 3) == (30.0, {0: (2000, 31000, cap_m)})
    # 8 GPUs: node 0 frees at 30 (8 free: a fit, leftover 0) -> T = 30 on node 0
    sim = HandReservation(Pool(cluster), 8000, False)
    assert easy._reservation(sim, 3) == (30.0, {0: (0, 31000, cap_m)})
    # a 16-GPU gang: at 30 only node 0 is idle (8 GPUs); at 50 nodes 3 and 1 become idle: the gang order
    # (largest first, then lowest index) takes nodes 0 and 1
    sim = HandReservation(Pool(cluster), 16000, True)
    assert easy._reservation(sim, 3) == (50.0, {0: (0, 0, 0), 1: (0, 0, 0)})
    # 8 GPUs after node 0 is taken too: ties at t = 50 between nodes 3 and 1 (both empty): the lowest index wins,
    # whatever order the running jobs release them in
    sim = HandReservation(Pool(cluster), 8000, False)
    sim.pool.allocate(((0, 4000, 0, 0),))
    sim.alloc[2] = ((0, 4000, 16000, 0),)
    sim.running_by_end[0] = (60.0, 3, 2)
    sim.running_by_end.sort()
    assert easy._reservation(sim, 3) == (50.0, {1: (0, 31000, cap_m)})


def test_a_compiled_pool_is_freed(monkeypatch):
    """The pool and its NodeOps refer to each other: the cycle must be collectable (a slider session builds a pool
    per run)."""
    import gc
    import weakref

    pool = Pool(Cluster.uniform(4, 8, 32))
    ref = weakref.ref(pool)
    pool.allocate(pool.place_in(pool.group(None, None), False, 1000, 1000, 0))
    del pool
    gc.collect()
    assert ref() is None
