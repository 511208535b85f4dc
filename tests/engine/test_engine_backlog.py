"""Linear in the backlog: the fair-share order skips a capped bucket's held-back request classes unseen
(``policies.buckets.BucketQueue`` class index, ``fairshare._capped_segment``). It must change nothing: runs with
the skipping on and off (``buckets.SKIP``) give identical jobs (wait reasons included), timelines and metrics,
across policies x backfill rules x min-runtime contracts, with caps at several levels of the budget tree, with and
without a per-user running limit."""
from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.policies.buckets as buckets
import engine.reasons as reasons
from engine import Cluster, SimConfig, simulate

ACCOUNTS = ["lab/a/x", "lab/a/y", "lab/b", "ops", "lab"]
CAPPED = [
    {"lab": {"share": 3, "max_gpus": 6}, "lab/a": {"share": 2, "max_gpus": 4}, "lab/a/x": 1, "lab/a/y": 1,
     "lab/b": 1, "ops": {"share": 1, "max_gpus": 3}},
    {"lab": {"share": 1, "max_gpus": 10, "guaranteed_gpus": 2}, "lab/a/x": {"share": 1, "max_gpus": 2},
     "lab/a/y": 1, "lab/b": 2, "ops": 1},
]
BACKFILL = [("none", None), ("easy", None), ("conservative", None), ("easy", 2)]  # depth-K: EASY with K = 2
CONTRACTS = [{}, {"default": 0.0}, {"default": 20.0}, {"default": 20.0, "debug": 0.0}]


def random_capped_workload(seed, n):
    """A month in miniature whose capped accounts submit far more than their caps let run (a backlog)."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice([0, 1, 2, 3, 4, 8], n, p=[.05, .35, .25, .1, .15, .1])
    run = rng.integers(1, 120, n).astype(float)
    return pl.DataFrame({
        "job_id": [str(i + 1) for i in range(n)],
        "submit": np.sort(np.round(rng.uniform(0, 600, n))),
        "elapsed_s": run, "time_limit_s": np.where(rng.random(n) < 0.3, run, np.round(run * rng.uniform(1, 3, n))),
        "req_gpus": gpus.astype(float), "req_cpus": np.maximum(gpus, 1) * rng.choice([1.0, 4.0], n),
        "account": rng.choice(ACCOUNTS, n, p=[.35, .2, .2, .15, .1]),
        "job_class": rng.choice(["training", "debug"], n),
        "min_runtime_s": pl.Series(rng.choice([np.nan, 0.0, 30.0], n)).fill_nan(None),
        "user": rng.choice(["u1", "u2", "u3", "u4"], n),  # drawn last: the columns above are as before
    })


def run_skip_on_off(monkeypatch, w, cluster, cfg):
    out = []
    for on in (True, False):
        with monkeypatch.context() as m:
            m.setattr(buckets, "SKIP", on)
            out.append(simulate(w, cluster, cfg))
    return out


def assert_identical(a, b):
    diff = [c for c in a.jobs.columns if not a.jobs[c].equals(b.jobs[c])]
    assert not diff, f"columns differ: {diff}"
    assert a.timeline.equals(b.timeline)
    assert a.metrics == b.metrics


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(5, 120),
       policy=st.sampled_from(["fairshare", "drf", "fcfs", "multifactor"]),
       backfill=st.sampled_from(BACKFILL), contract=st.sampled_from(CONTRACTS), budgets=st.sampled_from(CAPPED),
       interval=st.sampled_from([0.0, 0.0, 7.0]), user_limit=st.sampled_from([0, 0, 1, 3]))
def test_skipping_capped_classes_changes_nothing(monkeypatch, seed, n, policy, backfill, contract, budgets, interval,
                                                 user_limit):
    rule, depth = backfill
    cfg = SimConfig(policy=policy, backfill=rule, reservation_depth=depth, budgets=budgets, lookback_s=300,
                    min_runtime_by_class=contract, checkpoint_interval_s=(None, 15.0)[seed % 2],
                    sched_interval_s=interval, sched_cycle=("all", "backfill")[seed % 3 == 0],
                    max_running_jobs_per_user=user_limit)
    on, off = run_skip_on_off(monkeypatch, random_capped_workload(seed, n), Cluster.uniform(2, 4, 16), cfg)
    assert_identical(on, off)


class CountingList(list):
    reads = 0

    def __getitem__(self, k):
        CountingList.reads += 1
        return super().__getitem__(k)


def test_a_capped_backlog_is_skipped_not_walked(monkeypatch):
    # the skipping must actually happen: with a deep capped backlog, the passes read the queued jobs' wait
    # reasons far less often (the plain order reads each held-back job's reason at every pass), while the
    # result stays identical
    w = random_capped_workload(7, 400)
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=CAPPED[0], lookback_s=300,
                    min_runtime_by_class={"default": 20.0})
    original = reasons.WaitReasons.__init__

    def counting(self, n, default, attempt):
        original(self, n, default, attempt)
        self.reason = CountingList(self.reason)

    monkeypatch.setattr(reasons.WaitReasons, "__init__", counting)
    reads = {}
    for on in (True, False):
        with monkeypatch.context() as m:
            m.setattr(buckets, "SKIP", on)
            CountingList.reads = 0
            reads[on] = (simulate(w, Cluster.uniform(2, 4, 16), cfg), CountingList.reads)
    (on, on_reads), (off, off_reads) = reads[True], reads[False]
    assert_identical(on, off)
    assert (on.jobs["wait_reason"] == "quota").sum() > 20  # a real capped backlog
    assert on_reads * 3 < off_reads, (on_reads, off_reads)


# the adaptive index (``BucketQueue.adapt``): (INDEX_FROM, INDEX_UNTIL, INDEX_EVERY) forcing it on from the first
# order, on and off at every order as the held-back count crosses 1 or 3, after a few orders, or never
THRESHOLDS = [(0, 0, 1), (1, 1, 1), (3, 1, 1), (2, 2, 3), (1, 0, 2), (10**9, 0, 1)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(5, 160), backfill=st.sampled_from(BACKFILL),
       contract=st.sampled_from(CONTRACTS), budgets=st.sampled_from(CAPPED), thresholds=st.sampled_from(THRESHOLDS),
       interval=st.sampled_from([0.0, 0.0, 7.0]))
def test_switching_the_class_index_on_and_off_changes_nothing(monkeypatch, seed, n, backfill, contract, budgets,
                                                              thresholds, interval):
    rule, depth = backfill
    cfg = SimConfig(policy="fairshare", backfill=rule, reservation_depth=depth, budgets=budgets, lookback_s=300,
                    min_runtime_by_class=contract, checkpoint_interval_s=(None, 15.0)[seed % 2],
                    sched_interval_s=interval, sched_cycle=("all", "backfill")[seed % 3 == 0])
    w, cluster = random_capped_workload(seed, n), Cluster.uniform(2, 4, 16)
    builds = []
    original = buckets.BucketQueue._build_index

    def counting(self):
        builds.append(self.sim.now)
        original(self)

    with monkeypatch.context() as m:
        m.setattr(buckets, "INDEX_FROM", thresholds[0])
        m.setattr(buckets, "INDEX_UNTIL", thresholds[1])
        m.setattr(buckets, "INDEX_EVERY", thresholds[2])
        m.setattr(buckets.BucketQueue, "_build_index", counting)
        on = simulate(w, cluster, cfg)
    with monkeypatch.context() as m:
        m.setattr(buckets, "SKIP", False)
        off = simulate(w, cluster, cfg)
    assert_identical(on, off)
    if thresholds[0] == 10**9:
        assert not builds


def test_the_class_index_switches_on_and_off_with_the_backlog(monkeypatch):
    # the switching must actually happen both ways: a deep capped backlog builds the index (and the passes then
    # skip), a drained one drops it; thresholds 1 / 1 / every order make a small run switch many times
    w = random_capped_workload(7, 400)
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=CAPPED[0], lookback_s=300,
                    min_runtime_by_class={"default": 20.0})
    events = []
    original_build, original_adapt = buckets.BucketQueue._build_index, buckets.BucketQueue.adapt

    def build(self):
        events.append("on")
        original_build(self)

    def adapt(self):
        was = self.indexed
        original_adapt(self)
        if was and not self.indexed:
            events.append("off")

    with monkeypatch.context() as m:
        for name, v in (("INDEX_FROM", 1), ("INDEX_UNTIL", 1), ("INDEX_EVERY", 1)):
            m.setattr(buckets, name, v)
        m.setattr(buckets.BucketQueue, "_build_index", build)
        m.setattr(buckets.BucketQueue, "adapt", adapt)
        on = simulate(w, Cluster.uniform(2, 4, 16), cfg)
    with monkeypatch.context() as m:
        m.setattr(buckets, "SKIP", False)
        off = simulate(w, Cluster.uniform(2, 4, 16), cfg)
    assert_identical(on, off)
    assert events.count("on") >= 3 and events.count("off") >= 3, events[:20]
    assert events[0] == "on" and all(a != b for a, b in zip(events, events[1:]))  # strictly alternating
