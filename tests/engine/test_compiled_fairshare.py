"""The compiled fair-share arithmetic (``engine/_fsorder.c``, selected by ``engine/fsorder.py``) against its oracle, the
Python loops in ``tenants.Ledger.window_all`` and ``policies.fairshare.FairShareQueue.funded_order``.

Three levels: the routines alone on random inputs (ledgers built by random rate changes and queried at random
non-decreasing instants, windows summed up random chains, descents over random trees with tied keys and
zero fractions: the same floats bit for bit, the same pointers left behind, the same bucket); whole simulations on
node clusters, fair share (and DRF, which reads the same ledger) with and without borrowing caps, every backfill
mode, min-runtime contracts, preemption and warm starts (``QUOTALOOP_ENGINE=python`` against the compiled
engine, and the compiled fair-share routines alone switched off with the compiled pool kept: jobs, timeline,
metrics); and the sample store (30-day fair share + EASY + 8 h contracts, and the warm-started week). The build
check FAILS (never skips) when gcc is here but the module is absent or stale.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import hashlib
import math
import os
import random
import shutil
import struct
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compiled_pool import (ACCOUNTS, BACKFILL, BUDGETS, CONTRACTS, assert_identical, node_cluster, outcome,
                                random_node_workload, run_engine)
from test_engine_backlog import CAPPED, THRESHOLDS, random_capped_workload
from test_engine_warm import NODES, logged

import engine.backfill.fastpath as fastpath
import engine.fsorder as fsorder
import engine.policies.buckets as buckets
import engine.preempt as preempt
from engine import Cluster, ConfigError, SimConfig, simulate
import engine.policies.fairshare as fairshare
from engine.policies.fairshare import python_descend
from engine.tenants import Ledger

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "engine" / "_fsorder.c"

needs_compiled = pytest.mark.skipif(fsorder.compiled is None, reason="compiled fair-share order not built (see "
                                    "test_compiled_fairshare_is_built, which fails in that case when gcc is here)")


def bits(xs):
    """Floats as their bit patterns: equal means byte-identical (signed zeros and NaNs included)."""
    return [struct.pack("<d", x) for x in xs]


# ------------------------------------------------------------------------------ the build
def test_compiled_fairshare_is_built():
    if os.environ.get(fastpath.ENGINE_ENV, "").strip().lower() == "python":
        pytest.skip(f"{fastpath.ENGINE_ENV}=python selects the Python order for this run")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if shutil.which("gcc") is None or not headers.is_file():
        pytest.skip("no gcc or no Python headers: the package runs the Python order by design")
    assert fsorder.compiled is not None, "gcc is here but engine._fsorder is not built: pip install -e ."
    assert fsorder.compiled.SOURCE_SHA256 == hashlib.sha256(SOURCE.read_bytes()).hexdigest(), \
        "engine._fsorder was built from another _fsorder.c: rebuild with pip install -e ."
    assert Ledger(2, 10.0)._compiled is fsorder.compiled  # bound by default


@needs_compiled
def test_engine_variable_selects_the_routines(monkeypatch):
    monkeypatch.setenv(fastpath.ENGINE_ENV, "python")
    assert Ledger(2, 10.0)._compiled is None
    monkeypatch.setenv(fastpath.ENGINE_ENV, "compiled")
    assert Ledger(2, 10.0)._compiled is fsorder.compiled
    monkeypatch.setattr(fsorder, "compiled", None)
    with pytest.raises(ValueError, match="not built"):
        Ledger(2, 10.0)
    monkeypatch.delenv(fastpath.ENGINE_ENV)
    assert Ledger(2, 10.0)._compiled is None  # no compiled module: the Python loop runs


# ------------------------------------------------------------------------------ the routines alone
def random_ledgers(seed):
    """A compiled and a Python ledger fed the same random rate changes, and the instants to query them at."""
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    L = rng.choice([5.0, 37.5, 1000.0, math.inf])
    both = []
    for on in (True, False):
        fsorder.ENABLED = on
        try:
            both.append(Ledger(n, L))
        finally:
            fsorder.ENABLED = True
    t, steps = 0.0, []
    for _ in range(rng.randint(0, 60)):
        t += rng.choice([0.0, 0.0, 0.1, 1.0, rng.uniform(0, 30), 1e-9])
        if rng.random() < 0.6:
            steps.append(("change", rng.randrange(n), t, rng.choice([1.0, -1.0, 0.125, 3.7, 1e-3, 8.0])))
        else:
            steps.append(("window", t))
    return both, steps


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_window_all_matches_the_python_loop(seed):
    (c, py), steps = random_ledgers(seed)
    assert c._compiled is not None and py._compiled is None
    for step in steps:
        if step[0] == "change":
            for led in (c, py):
                led.change(*step[1:])
        else:
            got, want = c.window_all(step[1]), py.window_all(step[1])
            assert bits(got) == bits(want)
            assert c.ptr == py.ptr
    t = max((s[2] if s[0] == "change" else s[1] for s in steps), default=0.0) + 1.0
    assert bits(c.window_all(t)) == bits(py.window_all(t)) and c.ptr == py.ptr


@needs_compiled
def test_window_all_hand_computed():
    # account 0: rate 2 from t=0 to t=10, then 0.5; account 1: never charged. Window L=4 at t=12:
    # cum(12) = 20 + 0.5*2 = 21; cum(8) = 16 -> 5. At t=12 the pointer of account 0 stays on (0, 0, 2) (t=10 > 8).
    fsorder.ENABLED = True
    led = Ledger(2, 4.0)
    led.change(0, 0.0, 2.0)
    led.change(0, 10.0, -1.5)
    assert led.window_all(12.0) == [5.0, 0.0]
    assert led.ptr == [1, 0]
    # at t=20 the window [16, 20] lies after the change: 0.5*4 = 2, and the pointer moves onto (10, 20, 0.5)
    assert led.window_all(20.0) == [2.0, 0.0]
    assert led.ptr == [2, 0]


def python_tree_usage(window, chains, n):
    usage = [0.0] * n
    for u, chain in zip(window, chains):
        if u:
            for i in chain:
                usage[i] += u
    return usage


def random_tree(rng):
    """parent links of a random shallow tree (node 0 the root), its paths and fractions (some zero)."""
    n = rng.randint(2, 14)
    parent = [-1] + [rng.randrange(i) for i in range(1, n)]
    children = [[] for _ in range(n)]
    for i in range(1, n):
        children[parent[i]].append(i)
    paths = [""]
    for i in range(1, n):
        p = paths[parent[i]]
        paths.append((p + "/" if p else "") + rng.choice(["a", "b", "ab", "é", "Z", "a0"]) + str(i))
    frac = [1.0] + [rng.choice([0.0, 0.25, 0.5, 1 / 3, 0.1, 1.0]) for _ in range(1, n)]
    chains = []
    for i in range(n):
        chain, k = [], i
        while k > 0:
            chain.append(k)
            k = parent[k]
        chains.append(tuple(chain))
    return children, paths, frac, chains


@needs_compiled
@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_tree_usage_and_descent_match_the_python_loops(seed):
    rng = random.Random(seed)
    children, paths, frac, chains = random_tree(rng)
    n = len(paths)
    leaves = [i for i in range(n) if not children[i]]
    acct_chain = [chains[rng.choice(leaves)] for _ in range(rng.randint(1, 8))]
    # few distinct values: many exact ties in usage / fraction, so the path decides
    window = [rng.choice([0.0, 0.0, 1.0, 2.0, 0.1, 0.2, 0.3, 1e300, -0.0, 7.5]) for _ in acct_chain]
    usage = fsorder.compiled.tree_usage(window, acct_chain, n)
    assert bits(usage) == bits(python_tree_usage(window, acct_chain, n))
    rem = [0] * n
    for leaf in leaves:
        k = rng.choice([0, 0, 1, 3])
        for i in chains[leaf]:
            rem[i] += k
    if not any(rem[c] for c in children[0]):
        with pytest.raises(ValueError, match="no child"):
            fsorder.compiled.descend(children, rem, frac, usage, paths)
        return
    assert fsorder.compiled.descend(children, rem, frac, usage, paths) == python_descend(children, rem, frac, usage,
                                                                                         paths)


@needs_compiled
def test_descent_hand_computed():
    # root -> A (frac .5), B (frac .25), C (frac 0, the direct bucket) -> A's children A/x, A/y (.25 each)
    children = [[1, 2, 3], [4, 5], [], [], [], []]
    paths = ["", "A", "B", "C", "A/x", "A/y"]
    frac = [1.0, 0.5, 0.25, 0.0, 0.25, 0.25]
    rem = [6, 2, 1, 3, 1, 1]
    d = fsorder.compiled.descend
    # usage / frac: A 1/.5 = 2, B .5/.25 = 2: tie, "A" < "B"; in A, x and y 1/.25 = 4 each: "A/x"
    usage = [1.5, 1.0, 0.5, 0.0, 0.5, 0.5]
    assert d(children, rem, frac, usage, paths) == 4
    usage[5] = 0.25  # A/y now lower
    assert d(children, rem, frac, usage, paths) == 5
    usage[2] = 0.25  # B 1.0 < A 2.0
    assert d(children, rem, frac, usage, paths) == 2
    # nothing pending in A or B: the zero-fraction bucket, whatever its usage
    assert d(children, [3, 0, 0, 3, 0, 0], frac, [9.0, 0, 0, 9.0, 0, 0], paths) == 3


# ------------------------------------------------------------------------------ whole simulations
FS_BUDGETS = BUDGETS[1:]  # shares only, and shares with borrowing caps and a guarantee


@needs_compiled
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(5, 90), policy=st.sampled_from(["fairshare", "fairshare", "drf"]),
       backfill=st.sampled_from(BACKFILL), contract=st.sampled_from(CONTRACTS), budgets=st.sampled_from(FS_BUDGETS),
       preemption=st.booleans(), lookback=st.sampled_from([40.0, 300.0, 1e9]))
def test_random_fairshare_simulations_identical(monkeypatch, seed, n, policy, backfill, contract, budgets,
                                                preemption, lookback):
    rule, depth = backfill
    cfg = SimConfig(policy=policy, backfill=rule, reservation_depth=depth, budgets=budgets, lookback_s=lookback,
                    min_runtime_by_class=contract, preemption=preemption,
                    checkpoint_interval_s=(None, 15.0)[seed % 2])
    w, cluster = random_node_workload(seed, n), node_cluster()
    py = run_engine(monkeypatch, "python", w, cluster, cfg)
    c = run_engine(monkeypatch, "compiled", w, cluster, cfg)
    assert_identical(py, c)
    # the order's loop per bucket in Python around the compiled walk (``fairshare.CURSOR`` off): a difference is
    # the cursor's (``Funded``)
    with monkeypatch.context() as m:
        m.setattr(fairshare, "CURSOR", False)
        assert_identical(outcome(simulate, w, cluster, cfg), c)
    # the fair-share routines alone (the compiled pool on both sides): a difference is theirs
    monkeypatch.setattr(fsorder, "ENABLED", False)
    assert_identical(outcome(simulate, w, cluster, cfg), c)


@needs_compiled
@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_a_preemption_livelock_stops_with_an_error(monkeypatch, engine):
    """Found by the property test above (seed 460): a 40 s lookback and a 40 s min runtime without checkpoints let
    two buckets trade places every 40 s for ever (each run loses its work; simulated time grew past 1.6M s with
    two jobs preempting each other 20,000 times each). The run stops with an error naming the job, alike in both
    engines, instead of never returning."""
    cfg = SimConfig(policy="fairshare", backfill="easy", reservation_depth=2, budgets=FS_BUDGETS[0],
                    lookback_s=40.0, min_runtime_by_class={"training": 40.0, "debug": 0.0}, preemption=True)
    out = run_engine(monkeypatch, engine, random_node_workload(460, 77), node_cluster(), cfg)
    assert isinstance(out, ConfigError) and "preemption livelock" in str(out)
    assert f"preempted {preempt.MAX_PREEMPTIONS_PER_JOB} times" in str(out)
    # with checkpoints the preempted work is kept: the same workload finishes
    done = run_engine(monkeypatch, engine, random_node_workload(460, 77), node_cluster(),
                      dataclasses.replace(cfg, checkpoint_interval_s=15.0))
    assert not isinstance(done, ConfigError) and done.jobs["end"].null_count() == 0


@needs_compiled
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(5, 160), backfill=st.sampled_from(BACKFILL),
       contract=st.sampled_from(CONTRACTS), budgets=st.sampled_from(CAPPED), thresholds=st.sampled_from(THRESHOLDS),
       interval=st.sampled_from([0.0, 0.0, 7.0]))
def test_random_capped_backlogs_identical(monkeypatch, seed, n, backfill, contract, budgets, thresholds, interval):
    """Capped accounts with a backlog, the class index forced on, flapping or off (test_engine_backlog's
    thresholds): the compiled walk notes the same "quota" jobs, hands over the same ones and counts the same
    held-back jobs (the index decisions depend on them)."""
    rule, depth = backfill
    cfg = SimConfig(policy="fairshare", backfill=rule, reservation_depth=depth, budgets=budgets, lookback_s=300,
                    min_runtime_by_class=contract, checkpoint_interval_s=(None, 15.0)[seed % 2],
                    sched_interval_s=interval, sched_cycle=("all", "backfill")[seed % 3 == 0])
    w, cluster = random_capped_workload(seed, n), Cluster.uniform(2, 4, 16)
    with monkeypatch.context() as m:
        for name, v in zip(("INDEX_FROM", "INDEX_UNTIL", "INDEX_EVERY"), thresholds):
            m.setattr(buckets, name, v)
        py = run_engine(m, "python", w, cluster, cfg)
        c = run_engine(m, "compiled", w, cluster, cfg)
    assert_identical(py, c)


def adapt_trace(monkeypatch, engine, cursor, w, cluster, cfg):
    """The run's output and, at every order started, what ``BucketQueue.adapt`` reads (held-back jobs passed,
    orders, whether the index is kept): outputs do not depend on the index, so this is where a held-back count
    that differs would show."""
    trace = []
    adapt = buckets.BucketQueue.adapt

    def traced(self):
        trace.append((self.held_seen, self.n_orders, self.indexed))
        adapt(self)

    with monkeypatch.context() as m:
        m.setattr(buckets.BucketQueue, "adapt", traced)
        m.setattr(fairshare, "CURSOR", cursor)
        return run_engine(m, engine, w, cluster, cfg), trace


@needs_compiled
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(5, 160), backfill=st.sampled_from(BACKFILL),
       contract=st.sampled_from(CONTRACTS), budgets=st.sampled_from(CAPPED), thresholds=st.sampled_from(THRESHOLDS))
def test_cursor_counts_the_held_back_jobs_as_python(monkeypatch, seed, n, backfill, contract, budgets, thresholds):
    """The compiled order's cursor (``_fsorder.Funded``) adds the held-back jobs it passes to ``held_seen`` where
    the Python loop does, so the class index is built and dropped at the same orders; outputs identical too."""
    rule, depth = backfill
    cfg = SimConfig(policy="fairshare", backfill=rule, reservation_depth=depth, budgets=budgets, lookback_s=300,
                    min_runtime_by_class=contract)
    w, cluster = random_capped_workload(seed, n), Cluster.uniform(2, 4, 16)
    with monkeypatch.context() as m:
        for name, v in zip(("INDEX_FROM", "INDEX_UNTIL", "INDEX_EVERY"), thresholds):
            m.setattr(buckets, name, v)
        py, py_trace = adapt_trace(m, "python", True, w, cluster, cfg)
        c, c_trace = adapt_trace(m, "compiled", True, w, cluster, cfg)
        walked, walked_trace = adapt_trace(m, "compiled", False, w, cluster, cfg)
    assert c_trace == py_trace == walked_trace
    assert_identical(py, c)
    assert_identical(walked, c)


def random_logged(seed, n):
    """A logged workload around the warm start T (test_engine_warm's ``logged`` rows) on its two 4-GPU nodes:
    history before T, jobs running at T on a logged node, jobs pending at T and jobs arriving after it."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        gpus = rng.choice([1, 1, 2, 4])
        sub = rng.uniform(-400, 300)
        run = float(rng.randint(5, 150))
        limit = run * rng.choice([1.0, 1.5, 3.0])
        kind = rng.random()
        if sub < 0 and kind < 0.4:  # started before T: history, or running at T on a logged node
            start = sub + rng.uniform(0, 50)
            start = min(start, -1.0)
            end = start + run
            rows.append((f"j{i}", rng.choice(ACCOUNTS), gpus, sub, start, end, limit, rng.choice(["n1", "n2"])))
        else:  # pending at T or arriving later: the simulator places it
            start = max(sub, 0.0) + rng.uniform(0, 200)
            rows.append((f"j{i}", rng.choice(ACCOUNTS), gpus, sub, start, start + run, limit, None))
    return logged(rows)


@needs_compiled
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(3, 60), backfill=st.sampled_from(BACKFILL),
       budgets=st.sampled_from(FS_BUDGETS), contract=st.sampled_from([{}, {"default": 20.0}]))
def test_random_warm_started_fairshare_identical(monkeypatch, seed, n, backfill, budgets, contract):
    from test_engine_warm import T

    rule, depth = backfill
    caps = {k: (dict(v, max_gpus=min(v["max_gpus"], 6)) if isinstance(v, dict) and "max_gpus" in v else v)
            for k, v in budgets.items()}  # the caps within the two nodes' 8 GPUs
    cfg = SimConfig(policy="fairshare", backfill=rule, reservation_depth=depth, budgets=caps, lookback_s=500.0,
                    min_runtime_by_class=contract, warm_start=T)
    w = random_logged(seed, n)
    py = run_engine(monkeypatch, "python", w, NODES, cfg)
    c = run_engine(monkeypatch, "compiled", w, NODES, cfg)
    assert_identical(py, c)


@needs_compiled
def test_sample_store_fairshare(sample_store, monkeypatch):
    """The sample (136 nodes, 1,024 GPUs), its budgets (with borrowing caps) and 8 h training contracts: the
    30-day fair share + EASY run of issue 16's benchmark, and the Fair share page's warm-started week."""
    from queries.store import Store

    from engine import min_runtime
    from engine.budgets import load

    s = Store(sample_store)
    jobs, cluster = s.read("jobs"), Cluster.from_frame(s.read("nodes"))
    tree = load(REPO / "sample_data" / "budgets.toml")
    mr = min_runtime.parse_overrides(["8h"], "--min-runtime")
    last = jobs["submit"].max()
    for cfg in (SimConfig(policy="fairshare", backfill="easy", budgets=tree, min_runtime_by_class=mr),
                SimConfig(policy="fairshare", backfill="easy", budgets=tree, min_runtime_by_class=mr,
                          warm_start=last - dt.timedelta(days=7))):
        py = run_engine(monkeypatch, "python", jobs, cluster, cfg)
        c = run_engine(monkeypatch, "compiled", jobs, cluster, cfg)
        assert py.jobs.height > 1000 and py.metrics["scheduler"]["full_passes"] > 100
        assert_identical(py, c)


@needs_compiled
def test_no_references_leak(monkeypatch):
    """The routines hold no reference they should not: repeated calls leave the objects' counts as they were."""
    import sys

    led = Ledger(3, 10.0)
    led.change(0, 0.0, 1.0)
    led.change(2, 1.0, 2.0)
    children, rem, frac, paths = [[1, 2], [], []], [2, 1, 1], [1.0, 0.5, 0.5], ["", "a", "b"]
    window = led.window_all(5.0)
    usage = fsorder.compiled.tree_usage(window, [(1,), (2,), (1,)], 3)
    probes = [led.hist[0], led.hist[0][0], led.ptr, window, usage, children, children[0], paths[1], frac[1]]
    before = [sys.getrefcount(x) for x in probes]
    for k in range(2000):
        led._all_t = None
        fsorder.compiled.window_all(led.hist, led.cum, led.rate, led.last, led.ptr, 5.0 + k, 10.0)
        fsorder.compiled.tree_usage(window, [(1,), (2,), (1,)], 3)
        fsorder.compiled.descend(children, rem, frac, usage, paths)
    gc.collect()
    assert [sys.getrefcount(x) for x in probes] == before
    assert gc.garbage == []


@needs_compiled
def test_cursor_leaks_no_references(monkeypatch):
    """The cursor (``_fsorder.Funded``) and its examination of backfill candidates hold no reference they should
    not: whole runs (EASY, fair share, caps, contracts) leave the counts of the reasons they write and of the
    cursor's own type as they were."""
    import sys

    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=CAPPED[0], lookback_s=300,
                    min_runtime_by_class={"default": 20.0})
    w, cluster = random_capped_workload(7, 120), Cluster.uniform(2, 4, 16)
    probes = ["reservation", "long", "resources", "fragmentation", "quota", fsorder.compiled.Funded, math.inf]
    run_engine(monkeypatch, "compiled", w, cluster, cfg)
    gc.collect()
    before = [sys.getrefcount(x) for x in probes]
    for _ in range(3):
        run_engine(monkeypatch, "compiled", w, cluster, cfg)
    gc.collect()
    assert [sys.getrefcount(x) for x in probes] == before


class Hint:
    """A pass's hint as ``easy.node_pass`` publishes it: answers by job, failures by shape, a stop count."""

    def __init__(self, answers, failed, shape, n_shapes):
        self.answers, self.failed, self.shape, self.n_shapes = answers, failed, shape, n_shapes
        self.state = type("State", (), {"n_failed_short": 0})()
        self.asked = []

    def __call__(self, j):
        self.asked.append(j)
        return self.answers.get(j)


@needs_compiled
def test_walk_hand_computed():
    # jobs 0..6 requesting (milli-GPUs) 1000, 4000, 1000, 2000, 1000, 1000, 1000 under a room of 2000: 1 is held
    # back (noted "quota"); 0's shape already failed outright ("resources": skipped without asking the hint, its
    # reason noted); 2 is asked (answer None: handed over); then 3 is handed over; 4's shape is "long": asked,
    # answer "reservation"; 5 is asked, answer False: the order stops. Job 6 is never taken.
    req_g = [1000, 4000, 1000, 2000, 1000, 1000, 1000]
    shape = ["s0", "s1", "s2", "s3", "long", "s5", "s6"]
    hint = Hint({4: "reservation", 5: False}, {"s0": "resources", "long": "long"}, shape, 3)
    reason = ["priority", "quota", None, None, None, None, None]
    notes = []

    def note(j, r, now):
        notes.append((j, r, now))
        reason[j] = r

    dirty = {0: {g: set() for g in set(req_g)}}
    it = iter(range(7))
    st = [0, 0]
    walk = fsorder.compiled.walk
    args = (dirty, [0] * 7, req_g, reason, note, 5.0, hint, hint.failed, shape, hint.state, hint.n_shapes)
    assert walk(it, st, 2000, *args) == 2
    assert st == [3, 1] and notes == [(0, "resources", 5.0)]  # 1 already held "quota": not noted again
    assert hint.asked == [2]
    assert walk(it, st, 2000, *args) == 3 and st == [4, 1]
    assert walk(it, st, 2000, *args) is False
    assert st == [6, 1] and hint.asked == [2, 3, 4, 5] and notes[1:] == [(4, "reservation", 5.0)]
    assert dirty[0] == {1000: {0, 2, 4, 5}, 4000: {1}, 2000: {3}}
    # the stop count reached: False before looking at the job; uncapped without a hint: every job in turn; the end
    hint.state.n_failed_short = 3
    assert walk(iter([6]), st, None, *args) is False and st == [7, 1]
    none = (None, [0] * 7, req_g, reason, note, 5.0, None, None, None, None, None)
    st = [0, 0]
    it = iter([1, 6])
    assert walk(it, st, None, *none) == 1 and walk(it, st, None, *none) == 6 and walk(it, st, None, *none) is None
    assert st == [2, 0]
