"""The EASY pass's bindings kept per run and the compiled order's per-version cursor arguments (issue 16).

``easy.node_pass`` binds what it reads of a run once (``easy.PassBindings``, built at the run's first node pass)
and resets that object, which is also the pass's hint, at every pass; ``FairShareQueue.funded_order`` keeps the
compiled cursor's arguments on each budget version's ``_Plan`` (``plan.cursor``) and leaves the pending-count copy
and the usage sums to ``_fsorder.Funded``. Checked here: whole simulations byte-identical against the pure-Python
engine, against bindings rebuilt at every pass (the code before) and against the per-bucket order (``CURSOR``
off), across policies x backfills x min-runtime contracts; one bindings object per run; and budgets whose version
changes mid-run, where a cursor built for the first version and reused for the second would give other start
times than the hand-computed ones.
"""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compiled_pool import (BACKFILL, BUDGETS, CONTRACTS, assert_identical, node_cluster, random_node_workload,
                                run_engine)

import engine.backfill.easy as easy
import engine.fsorder as fsorder
import engine.policies.fairshare as fairshare
from engine import Cluster, SimConfig
from engine.budgets import tree as bt
from engine.tenants import _root_from_dict

needs_compiled = pytest.mark.skipif(fsorder.compiled is None, reason="compiled fair-share order not built (see "
                                    "test_compiled_fairshare_is_built)")

POLICIES = ["fairshare", "fairshare", "drf", "fcfs", "priority", "multifactor"]


def count_bindings(monkeypatch):
    """Wrap ``easy.PassBindings`` to count the objects built: returns the list the counts go to."""
    built = []
    init = easy.PassBindings.__init__

    def counted(self, sim):
        built.append(id(sim))
        init(self, sim)

    monkeypatch.setattr(easy.PassBindings, "__init__", counted)
    return built


@needs_compiled
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(5, 90), policy=st.sampled_from(POLICIES),
       backfill=st.sampled_from(BACKFILL), contract=st.sampled_from(CONTRACTS), budgets=st.sampled_from(BUDGETS),
       preemption=st.booleans(), margin=st.sampled_from([0.0, 0.2]))
def test_pass_bindings_kept_per_run_identical(monkeypatch, seed, n, policy, backfill, contract, budgets, preemption,
                                              margin):
    rule, depth = backfill
    cfg = SimConfig(policy=policy, backfill=rule, reservation_depth=depth, budgets=budgets,
                    min_runtime_by_class=contract, preemption=preemption, walltime_margin=margin,
                    checkpoint_interval_s=(None, 15.0)[seed % 2], lookback_s=300.0)
    w, cluster = random_node_workload(seed, n), node_cluster()
    py = run_engine(monkeypatch, "python", w, cluster, cfg)
    with monkeypatch.context() as m:
        built = count_bindings(m)
        c = run_engine(m, "compiled", w, cluster, cfg)
    assert_identical(py, c)
    assert len(built) <= 1  # one bindings object per run (none when no node pass ran: the whole-run kernel)
    # the bindings rebuilt at every pass, as the code before kept them: a difference is the per-run object's
    with monkeypatch.context() as m:
        m.setattr(easy, "bindings", easy.PassBindings)
        assert_identical(run_engine(m, "compiled", w, cluster, cfg), c)
    if policy == "fairshare":  # the order's loop per bucket in Python around the compiled walk: no cursor at all
        with monkeypatch.context() as m:
            m.setattr(fairshare, "CURSOR", False)
            assert_identical(run_engine(m, "compiled", w, cluster, cfg), c)


def at(seconds):
    """A version start at ``seconds`` on the clock of a workload with numeric submit times (seconds since 1970)."""
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=seconds)


def two_versions(first, second, start):
    return bt.BudgetTree((bt.BudgetVersion(None, _root_from_dict(first)),
                          bt.BudgetVersion(at(start), _root_from_dict(second))))


def one_gpu_jobs(accounts, run=20.0):
    """One-GPU jobs all submitted at 0, in the given account order (job ids 1, 2, ...), each running ``run`` s."""
    k = len(accounts)
    return pl.DataFrame({
        "job_id": [str(i + 1) for i in range(k)], "submit": [0.0] * k, "elapsed_s": [run] * k,
        "time_limit_s": [run] * k, "req_gpus": [1.0] * k, "req_cpus": [1.0] * k,
        "req_mem_bytes": pl.Series([None] * k, dtype=pl.Float64), "partition": [""] * k, "gpu_type": [""] * k,
        "account": accounts, "job_class": ["training"] * k, "priority": [0.0] * k,
        "min_runtime_s": pl.Series([None] * k, dtype=pl.Float64),
    })


def starts(res):
    return dict(zip(res.jobs["job_id"].to_list(), res.jobs["start"].to_list()))


def seconds(v):
    return v if isinstance(v, (int, float)) else (v - dt.datetime(1970, 1, 1)).total_seconds()


ENGINES = [("python", True), ("compiled", True), ("compiled", False)]  # (QUOTALOOP_ENGINE, fairshare.CURSOR)


@needs_compiled
@pytest.mark.parametrize("backfill", ["easy", "none"])
@pytest.mark.parametrize("engine,cursor", ENGINES)
def test_versioned_budgets_reach_both_versions(monkeypatch, engine, cursor, backfill):
    """One GPU; accounts a and b queue four 20 s one-GPU jobs each at 0. Version 1 (until 50 s) gives a all the
    share (b has a zero share: after every funded team), version 2 (from 50 s) the reverse. The passes at 0, 20
    and 40 s run under version 1: a's jobs 1-3 start at 0, 20, 40. From the pass at 60 s version 2 is in force: b's
    four jobs at 60, 80, 100, 120, then a's last at 140. A cursor that kept version 1's arguments would start a's
    job 4 at 60 and b's jobs from 80."""
    tree = two_versions({"a": 1, "b": 0}, {"a": 0, "b": 1}, 50)
    w = one_gpu_jobs(["a", "b", "a", "b", "a", "b", "a", "b"])
    cfg = SimConfig(policy="fairshare", backfill=backfill, budgets=tree, lookback_s=1e9)
    with monkeypatch.context() as m:
        m.setattr(fairshare, "CURSOR", cursor)
        res = run_engine(m, engine, w, Cluster.uniform(1, 1, 8), cfg)
    got = {k: seconds(v) for k, v in starts(res).items()}
    # job ids: a = 1, 3, 5, 7; b = 2, 4, 6, 8
    assert got == {"1": 0.0, "3": 20.0, "5": 40.0, "2": 60.0, "4": 80.0, "6": 100.0, "8": 120.0, "7": 140.0}


@needs_compiled
@pytest.mark.parametrize("engine,cursor", ENGINES)
def test_versioned_caps_reach_both_versions(monkeypatch, engine, cursor):
    """Borrowing caps that change with the version (the cursor's ``held_g``/``cap_floor``/``capped_chain`` are per
    version). Two GPUs; a queues four 20 s one-GPU jobs at 0, b none. Version 1 (until 30 s) caps a at 1 GPU,
    version 2 lifts the cap. Under version 1 one job at a time: job 1 at 0, job 2 at 20 (the other GPU stays idle,
    "quota"). From the pass at 40 s two at a time: jobs 3 and 4 at 40."""
    tree = two_versions({"a": {"share": 1, "max_gpus": 1}, "b": 1}, {"a": 1, "b": 1}, 30)
    w = one_gpu_jobs(["a", "a", "a", "a"])
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=tree, lookback_s=1e9)
    with monkeypatch.context() as m:
        m.setattr(fairshare, "CURSOR", cursor)
        res = run_engine(m, engine, w, Cluster.uniform(1, 2, 8), cfg)
    got = {k: seconds(v) for k, v in starts(res).items()}
    assert got == {"1": 0.0, "2": 20.0, "3": 40.0, "4": 40.0}


@needs_compiled
def test_versioned_budgets_keep_one_cursor_per_version(monkeypatch):
    """Each budget version's ``_Plan`` gets its own cursor arguments, built from that version's tree."""
    from engine.core import Simulator

    tree = two_versions({"a": 1, "b": 0}, {"a": 0, "b": 1}, 50)
    w = one_gpu_jobs(["a", "b", "a", "b", "a", "b", "a", "b"])
    seen = []
    run = Simulator.run

    def keep(self):
        run(self)
        seen.append(self)

    monkeypatch.setattr(Simulator, "run", keep)
    run_engine(monkeypatch, "compiled", w, Cluster.uniform(1, 1, 8),
               SimConfig(policy="fairshare", backfill="easy", budgets=tree, lookback_s=1e9))
    sim, = seen
    versions = sim.budgeting.versions
    plans = [sim.queue._plans[id(ten)] for ten in versions]
    assert [p.cursor[1] for p in plans] == [ten.frac for ten in versions]  # frac: each version's own list
    assert plans[0].cursor[1] is not plans[1].cursor[1]
    assert [p.cursor[-1] for p in plans] == [len(ten.paths) for ten in versions]
