"""The compiled first test of the preemption search (``NodeOps.release_fits`` in ``engine/_nodecore.c``, called by
``preempt._victims`` when the node pool is compiled) against its oracle, the Python lines of ``_victims`` it
stands for (candidate filter, every candidate released, one placement): the same answer on random pools and
candidate sets, by hand on a small case, and byte-identical simulations with min-runtime preemption across
policy x backfill x contract x budgets, warm starts and the sample store. A counting proxy on the pool checks that
the compiled test really ran, answering both ways, in the generated simulations.
"""
from __future__ import annotations

import gc
import math
import random
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compiled_pool import (BACKFILL, BUDGETS, CONTRACTS, assert_identical, both, node_cluster, random_cluster,
                                random_node_workload, run_engine)

import engine.nodepool as nodepool
from engine import Cluster, SimConfig
from engine.pool import Pool
from engine.units import UNLIMITED

needs_compiled = pytest.mark.skipif(nodepool.compiled is None, reason="compiled node pool not built (see "
                                    "test_compiled_pool.py's build check, which fails in that case when gcc is here)")


def python_first_test(pool, near, min_rt, acct, acct_ok, alloc, elig, nodes, gang, g, c, m) -> bool:
    """``preempt._victims``' lines up to its first ``return None`` after the all-released placement (the
    reference): True when the preemptor fits with every candidate released."""
    vs = [v for v in near if min_rt[v] == 0 or (acct_ok is not None and acct_ok[acct[v]])]
    if not vs:
        return False
    fg, fc, fm = list(pool.free_g), list(pool.free_c), list(pool.free_m)
    touched_all = set()
    for v in vs:
        for n, a, b, d in alloc[v]:
            fg[n] += a
            fc[n] += b
            fm[n] += d
            if n in elig and pool.avail[n]:
                touched_all.add(n)
    return bool(touched_all) and pool.place(nodes if gang else sorted(touched_all), gang, g, c, m,
                                            free=(fg, fc, fm)) is not None


def python_search(pool, near, min_rt, acct, acct_ok, served, burst, att_start, alloc, elig, nodes, gang, g, c, m,
                  now, ci):
    """``preempt._victims``' lines after its first test, without QoS pairs or reclaim (the reference): candidates
    keyed by preference, released in turn until the preemptor is placed, then the victims that placement needs."""
    vs = [v for v in near if min_rt[v] == 0 or (acct_ok is not None and acct_ok[acct[v]])]
    cands = []
    for v in vs:
        elapsed = now - att_start[v]
        lost = elapsed - (math.floor(elapsed / ci) * ci if ci else 0.0)
        sv = served[acct[v]] if min_rt[v] != 0 else 0.0
        cands.append((min_rt[v] != 0, not burst[v], -sv, lost, -att_start[v], v))
    cands.sort()
    fg, fc, fm = list(pool.free_g), list(pool.free_c), list(pool.free_m)
    chosen, placement = [], None
    for *_, v in cands:
        touched = []
        for n, a, b, d in alloc[v]:
            fg[n] += a
            fc[n] += b
            fm[n] += d
            if n in elig and pool.avail[n]:
                touched.append(n)
        chosen.append(v)
        if not touched:
            continue
        placement = pool.place(nodes if gang else sorted(touched), gang, g, c, m, free=(fg, fc, fm))
        if placement is not None:
            break
    if placement is None:
        return None
    used = {n for n, *_ in placement}
    need = [v for v in chosen if any(n in used for n, *_ in alloc[v])]
    if not gang:
        (n0, *_), = placement
        for v in reversed(list(need)):
            rest = [u for u in need if u != v]
            a = pool.free_g[n0] + sum(x[1] for u in rest for x in alloc[u] if x[0] == n0)
            b = pool.free_c[n0] + sum(x[2] for u in rest for x in alloc[u] if x[0] == n0)
            d = pool.free_m[n0] + sum(x[3] for u in rest for x in alloc[u] if x[0] == n0)
            if a >= g and b >= c and d >= m:
                need = rest
    return need, placement


@needs_compiled
@pytest.mark.parametrize("seed", range(200))
def test_release_fits_matches_the_python_lines(monkeypatch, seed):
    rng = random.Random(seed)
    cluster = random_cluster(rng)
    py, c = both(monkeypatch, cluster)
    keys = [(rng.choice([None, "a", "b"]), rng.choice([None, "h100", "l40s"])) for _ in range(3)]
    alloc, min_rt, acct = [], [], []
    for _ in range(rng.randint(0, 40)):  # running jobs: allocations on both pools
        grp = py.group(*rng.choice(keys))
        g, cc, m = rng.choice([0, 1000, 2000, 4000, 8000]), rng.choice([0, 1000, 4000]), rng.choice([0, 4096, 65536])
        pl_ = py.place_in(grp, rng.random() < 0.2, g, cc, m)
        if pl_ is None:
            continue
        py.allocate(pl_)
        c.allocate(pl_)
        alloc.append(pl_)
        min_rt.append(rng.choice([0.0, 0, 30.0, float("inf")]))
        acct.append(rng.randrange(3))
    for n in range(cluster.size):  # some nodes down (a down node's releases are counted, not touched)
        if rng.random() < 0.15:
            py.set_avail(n, False)
            c.set_avail(n, False)
    found = 0
    for _ in range(12):
        grp = py.group(*rng.choice(keys))
        near = set(rng.sample(range(len(alloc)), rng.randint(0, len(alloc))))
        acct_ok = rng.choice([None, [rng.random() < 0.5 for _ in range(3)]])
        elig = frozenset(grp[1])
        gang = rng.random() < 0.3
        g, cc, m = (rng.choice([0, 1000, 4000, 8000, 16000]), rng.choice([0, 1000, 16000]),
                    rng.choice([0, 4096, 300000]))
        want = python_first_test(py, near, min_rt, acct, acct_ok, alloc, elig, grp[2], gang, g, cc, m)
        got = c.ops.release_fits(near, min_rt, acct, acct_ok, alloc, elig, grp[2], gang, g, cc, m)
        assert got is want
        # the search itself (any near set: the compiled search does not rely on the first test)
        served = [rng.choice([0.5, 1.2, 3.0, float("inf")]) for _ in range(3)]
        burst = [rng.random() < 0.2 for _ in alloc]
        att = [float(rng.choice([0, 10, 10, 35, 90])) for _ in alloc]
        now, ci = 100.0, rng.choice([0.0, 15.0, 7.5])
        want = python_search(py, near, min_rt, acct, acct_ok, served, burst, att, alloc, elig, grp[2], gang, g, cc,
                             m, now, ci)
        got = c.ops.victims(near, min_rt, acct, acct_ok, served if acct_ok is not None else None, burst, att, alloc,
                            elig, grp[2], gang, g, cc, m, now, ci)
        assert got == want
        found += got is not None
    assert py.free_g == c.free_g and py.free_c == c.free_c and py.free_m == c.free_m  # read only
    FOUND.append(found)


FOUND: list = []


def test_the_random_searches_found_victims():
    """Runs after the random cases above (file order): some of them found victims, so the comparison compared
    placements and victim lists, not only Nones."""
    if nodepool.compiled is None:
        pytest.skip("compiled node pool not built")
    if len(FOUND) < 200:
        pytest.skip("run with the random cases (the whole file)")
    assert sum(FOUND) > 100


@needs_compiled
def test_release_fits_hand_computed():
    """Three 8-GPU nodes, node 2 down. Job 0 (min runtime 0) holds 6 GPUs of node 0, job 1 (account 1, a contract)
    4 GPUs of node 1, job 2 (account 0) all of node 2."""
    pool = Pool(Cluster.uniform(3, 8, 32))
    alloc = [((0, 6000, 6000, 0),), ((1, 4000, 4000, 0),), ((2, 8000, 32000, 0),)]
    for a in alloc:
        pool.allocate(a)
    pool.set_avail(2, False)
    min_rt, acct = [0.0, 30.0, 30.0], [0, 1, 0]
    grp = pool.group(None, None)
    elig = frozenset(grp[1])

    def fits(near, ok, gang, g):
        return pool.ops.release_fits(near, min_rt, acct, ok, alloc, elig, grp[2], gang, g, 0, 0)

    assert fits({0, 1, 2}, None, False, 8000) is True        # job 0 released: node 0 has 8 free
    assert fits({1}, None, False, 6000) is False             # no candidate (job 1 has a contract, no over-served flag)
    assert fits({1}, [False, True], False, 8000) is True     # job 1's account over-served: node 1 has 4 + 4
    assert fits({1}, [False, True], False, 9000) is False    # no single node holds 9
    assert fits({0, 1}, [False, True], True, 16000) is True  # nodes 0 and 1 idle: a 16-GPU gang
    assert fits({0, 2}, [True, False], True, 16000) is False  # node 2 is down, node 1 busy
    assert fits((), [True, True], False, 0) is False         # nothing near: hopeless


class CountingOps:
    """The compiled pool's routines, counting the answers of ``release_fits`` (the rest passes through)."""

    answers: list = []

    def __init__(self, ops):
        self._ops = ops

    def __getattr__(self, name):
        return getattr(self._ops, name)

    def release_fits(self, *args):
        got = self._ops.release_fits(*args)
        CountingOps.answers.append(got)
        return got

    def victims(self, *args):
        got = self._ops.victims(*args)
        CountingOps.answers.append("found" if got is not None else "unpaid")
        return got


@pytest.fixture
def counted(monkeypatch):
    real = nodepool.bind
    CountingOps.answers = []

    def bind(pool):
        if real(pool):
            pool.ops = CountingOps(pool.ops)
            return True
        return False

    monkeypatch.setattr(nodepool, "bind", bind)  # engine.pool calls nodepool.bind for every pool it builds
    return CountingOps.answers


PREEMPTING = [{"default": 0.0}, {"default": 20.0}, {"training": 40.0, "debug": 0.0}, {"training": 10.0}]


@needs_compiled
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(10, 120), policy=st.sampled_from(["fairshare", "drf", "fcfs"]),
       backfill=st.sampled_from(BACKFILL), contract=st.sampled_from(PREEMPTING + CONTRACTS[:1]),
       budgets=st.sampled_from(BUDGETS[1:]), factor=st.sampled_from([0.0, 1.0]), quota=st.sampled_from([None, "guarantee"]))
def test_random_preempting_simulations_identical(monkeypatch, seed, n, policy, backfill, contract, budgets, factor,
                                                quota):
    rule, depth = backfill
    kw = {"quota": quota} if quota else {}
    cfg = SimConfig(policy=policy, backfill=rule, reservation_depth=depth, budgets=budgets, lookback_s=300,
                    min_runtime_by_class=contract, preemption=True, preemption_cost_factor=factor,
                    checkpoint_interval_s=(None, 15.0)[seed % 2], **kw)
    w, cluster = random_node_workload(seed, n), node_cluster()
    py = run_engine(monkeypatch, "python", w, cluster, cfg)
    c = run_engine(monkeypatch, "compiled", w, cluster, cfg)
    assert_identical(py, c)


@needs_compiled
def test_the_compiled_test_runs_and_answers_both_ways(monkeypatch, counted):
    """Over a batch of preempting fair-share runs the compiled test is asked, says both "hopeless" and "may fit",
    and the runs stay identical to the Python engine (which never asks it)."""
    for seed in range(12):
        cfg = SimConfig(policy="fairshare", backfill="easy", budgets=BUDGETS[1], lookback_s=300,
                        min_runtime_by_class={"training": 10.0, "debug": 0.0}, preemption=True,
                        preemption_cost_factor=(0.0, 1.0)[seed % 2])
        w, cluster = random_node_workload(seed, 120), node_cluster()
        before = len(counted)
        py = run_engine(monkeypatch, "python", w, cluster, cfg)
        assert len(counted) == before  # the reference path never calls it
        c = run_engine(monkeypatch, "compiled", w, cluster, cfg)
        assert_identical(py, c)
    assert True in counted and False in counted and "found" in counted, counted[:20]


@needs_compiled
def test_sample_store_warm_week_with_preemption(sample_store, monkeypatch):
    """The sample's budgets, 8 h training contracts (preemption on), the Fair share page's warm-started week."""
    import datetime as dt
    from pathlib import Path

    from queries.store import Store

    from engine import min_runtime
    from engine.budgets import load

    repo = Path(__file__).resolve().parents[2]
    s = Store(sample_store)
    jobs, cluster = s.read("jobs"), Cluster.from_frame(s.read("nodes"))
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=load(repo / "sample_data" / "budgets.toml"),
                    min_runtime_by_class=min_runtime.parse_overrides(["8h"], "--min-runtime"),
                    warm_start=jobs["submit"].max() - dt.timedelta(days=7))
    py = run_engine(monkeypatch, "python", jobs, cluster, cfg)
    c = run_engine(monkeypatch, "compiled", jobs, cluster, cfg)
    assert py.jobs.height > 1000
    assert_identical(py, c)


@needs_compiled
def test_release_fits_leaks_no_reference():
    """Repeated calls, answering both ways and raising, leave every argument's reference count as it was."""
    pool = Pool(Cluster.uniform(3, 8, 32))
    alloc = [((0, 6000, 6000, 0),), ((1, 4000, 4000, 0),)]
    for a in alloc:
        pool.allocate(a)
    min_rt, acct, ok, served = [0.0, 30.0], [0, 1], [False, True], [0.5, 2.0]
    burst, att = [False, False], [1.0, 2.0]
    grp = pool.group(None, None)
    elig = frozenset(grp[1])
    near = {0, 1}
    # containers only: a number may be a constant shared with code whose garbage a collection frees meanwhile
    probes = [alloc, alloc[0], alloc[0][0], min_rt, acct, ok, elig, near, grp[2], pool.free_g, pool.avail, served,
              burst, att, pool.cap_g]
    gc.collect()
    before = [sys.getrefcount(x) for x in probes]
    for k in range(3000):
        gang = k % 2 == 0
        assert pool.ops.release_fits(near, min_rt, acct, ok, alloc, elig, grp[2], gang, 8000, 0, 0) is True
        big = 24000 if gang else 9000  # a gang: nodes 0 and 2 idle (16 GPUs), node 1 busy; one node: 8 at most
        assert pool.ops.release_fits(near, min_rt, acct, None, alloc, elig, grp[2], gang, big, 0, 0) is False
        found = pool.ops.victims(near, min_rt, acct, ok, served, burst, att, alloc, elig, grp[2], gang, 8000, 0, 0,
                                 50.0, 15.0)
        # job 0 (unfunded) first: node 0 becomes idle, which holds 8 GPUs either way (a gang takes the whole node)
        assert found == ([0], ((0, 8000, 32000, UNLIMITED),) if gang else ((0, 8000, 0, 0),))
        assert pool.ops.victims(near, min_rt, acct, None, None, burst, att, alloc, elig, grp[2], gang, 24000, 0, 0,
                                50.0, 0.0) is None
        with pytest.raises(IndexError):
            pool.ops.victims({5}, min_rt, acct, ok, served, burst, att, alloc, elig, grp[2], gang, 1000, 0, 0, 1.0, 0.0)
        with pytest.raises(IndexError):
            pool.ops.release_fits({5}, min_rt, acct, ok, alloc, elig, grp[2], gang, 1000, 0, 0)
        with pytest.raises(TypeError):
            pool.ops.release_fits(near, min_rt, acct, ok, [("bad",), ()], elig, grp[2], gang, 1000, 0, 0)
    gc.collect()
    assert [sys.getrefcount(x) for x in probes] == before
    assert pool.free_g == [2000, 4000, 8000]


# ------------------------------------------------------------------------------ the pass's hint inside the walk
class SpecHint:
    """A pass's hint with ``spec`` (as ``easy.node_pass`` publishes it): calling it back is an error, the walk must
    answer from the spec."""

    def __init__(self, spec, state, failed, shape, n_shapes):
        self.spec, self.state, self.failed, self.shape, self.n_shapes = spec, state, failed, shape, n_shapes

    def __call__(self, j):
        raise AssertionError("the walk called the hint back although it has a spec")


@pytest.mark.skipif(__import__("engine.fsorder", fromlist=["compiled"]).compiled is None,
                    reason="compiled fair-share order not built")
def test_walk_answers_the_hint_from_its_spec_by_hand():
    """Jobs 0-4 on a group whose bounds are (8 GPUs single node, 16 as a gang; 8 free anywhere in fragments):
    0 asks 12 GPUs (over every bound, fragments too: "resources"), 1 is a "long"
    shape beyond T ("reservation"), 2 is over its borrowing cap ("quota"), 3 over its user limit, 4 fits the bounds
    (handed over). Notes, ``failed`` and ``n_failed_short`` as the Python hint leaves them; refcounts unchanged."""
    import types

    from engine import fsorder
    from engine.user_limits import REASON as USER_LIMIT

    walk = fsorder.compiled.walk
    bounds_t = (8000, 64000, 10**6, 16000, 128000, 2 * 10**6, 8000, 64000, 10**6)
    req_g, req_c, req_m = [12000, 1000, 1000, 1000, 1000], [1000] * 5, [0] * 5
    est, shape = [100.0, 500.0, 10.0, 10.0, 10.0], ["big", "long", "s2", "s3", "s4"]
    needs_cap, gangs, group = [False, False, True, False, False], [False] * 5, [("k", (0,), (0,))] * 5
    over_cap = lambda j, now: j == 2  # noqa: E731 - the simulator's bound methods, by hand
    over_user = lambda j: j == 3  # noqa: E731
    notes = []
    reason = ["none"] * 5

    def note(j, r, now):
        notes.append((j, r))
        reason[j] = r

    probes = [est, req_g, shape, reason, bounds_t, USER_LIMIT, group[0], needs_cap, over_cap]
    for rnd in range(300):
        if rnd == 1:  # after one round: ``reason`` and ``notes`` hold what every round leaves
            gc.collect()
            before = [sys.getrefcount(x) for x in probes]
        notes.clear()
        reason[:] = ["none"] * 5
        state = types.SimpleNamespace(n_failed_short=0, T=200.0)
        failed = {"long": "long"}
        spec = (100.0, est, 1.0, True, needs_cap, over_cap, True, over_user, req_g, req_c, req_m, group, gangs,
                lambda grp: bounds_t, False, USER_LIMIT)
        hint = SpecHint(spec, state, failed, shape, 5)
        st = [0, 0]
        got = walk(iter(range(5)), st, None, None, [0] * 5, req_g, reason, note, 100.0, hint, failed, shape, state, 5)
        assert got == 4 and st == [5, 0]
        assert notes == [(0, "resources"), (1, "reservation"), (2, "quota"), (3, USER_LIMIT)]
        assert failed == {"long": "long", "big": "resources"} and state.n_failed_short == 1
        del spec, hint, state, failed
    gc.collect()
    assert [sys.getrefcount(x) for x in probes] == before
