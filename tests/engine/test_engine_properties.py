"""Property tests of the engine over many random small workloads (hypothesis).

Invariants from the engine issue: never more than a node's resources in use; no job starts before it is
submitted; every job ends; with exact estimates EASY starts every reserved job no later than its reservation
and conservative every job no later than the reservation it got on arrival; no preemption before the min
runtime; identical inputs give byte-identical output. Plus agreement between the engine's implementations of
one algorithm (fast kernel, scalar pass, node pass on one node, profile pass at depth 1).
"""
from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import engine.backfill.depth_k as depth_k
import engine.backfill.easy as easy
import engine.backfill.fastpath as fastpath
from engine.backfill import BACKFILLS
from engine import Cluster, SimConfig, simulate
from engine.result import metrics_json

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
P = 6  # processors / CPUs of the small machines


@st.composite
def workloads(draw, max_jobs=18, gpus=False, exact=False, teams=1):
    n = draw(st.integers(1, max_jobs))
    rows = []
    for i in range(n):
        submit = draw(st.integers(0, 40))
        size = draw(st.integers(1, P))
        run = draw(st.integers(1, 30))
        if exact:
            limit = run
        else:
            limit = draw(st.one_of(st.none(), st.just(run), st.integers(1, 60)))
        rows.append((str(i + 1), float(submit), float(size), float(run), None if limit is None else float(limit),
                     f"t{draw(st.integers(0, teams - 1))}", f"job{draw(st.integers(0, 3))}"))
    cols = list(zip(*rows))
    df = pl.DataFrame({"job_id": list(cols[0]), "submit": list(cols[1]), "elapsed_s": list(cols[3]),
                       "time_limit_s": pl.Series(list(cols[4]), dtype=pl.Float64), "account": list(cols[5]),
                       "job_name": list(cols[6])})
    if gpus:
        return df.with_columns(pl.Series("req_gpus", list(cols[2])), pl.lit(1.0).alias("req_cpus"))
    return df.with_columns(pl.Series("req_cpus", list(cols[2])))


def schedule(res) -> pl.DataFrame:
    return res.jobs.select("job_id", "start", "end", "start_seq", "reserved_start", "wait_reason").sort("job_id")


def check_capacity(res, cluster: Cluster):
    """Sweep each node's allocation intervals: ends before starts at the same instant, never above capacity."""
    caps = {n: (g, c) for n, g, c in zip(cluster.names, cluster.gpus, cluster.cpus)}
    for node, rows in res.timeline.group_by("node"):
        events = []
        for s, e, g, c in rows.select("start", "end", "gpus", "cpus").iter_rows():
            assert e >= s
            events += [(s, 1, g, c), (e, 0, -g, -c)]
        used_g = used_c = 0.0
        for _, _, g, c in sorted(events):
            used_g += g
            used_c += c
            cap_g, cap_c = caps[node[0]]
            assert used_g <= cap_g + 1e-9 and used_c <= cap_c + 1e-9, f"{node[0]} over capacity"


def check_basics(res, w):
    j = res.jobs
    final = j.filter(~pl.col("job_id").str.contains(";"))
    # every job simulated (none is skipped in these workloads): one final row each, plus one per requeue
    assert sorted(final["job_id"].to_list()) == sorted(w["job_id"].to_list())
    assert j.height == w.height + int(j["preemptions"].sum() + j["failures"].sum())
    assert j["end"].null_count() == 0 and j["start"].null_count() == 0
    assert (j["start"] >= j["submit"]).all()
    assert (j["end"] >= j["start"]).all()
    # attempts follow each other: attempt k > 0 is (re)submitted when attempt k - 1 ended
    base = pl.col("job_id").str.split(";").list.first()
    att = j.with_columns(base.alias("base")).sort("base", "attempt")
    prev_end = att.select(pl.col("end").shift(1).over("base"))["end"]
    again = att["attempt"] > 0
    assert (att.filter(again)["submit"] == prev_end.filter(again)).all()
    first = att.filter(~again).join(w.select("job_id", pl.col("submit").alias("logged")), left_on="base",
                                    right_on="job_id")
    assert (first["submit"] == first["logged"]).all()


# ------------------------------------------------------------------------------ implementations agree
@SETTINGS
@given(w=workloads(), backfill=st.sampled_from(["none", "easy"]), margin=st.sampled_from([0.0, 0.25]))
def test_fast_kernel_equals_generic_path(w, backfill, margin):
    cfg = SimConfig(backfill=backfill, walltime_margin=margin)
    fast = simulate(w, Cluster.procs(P), cfg)
    fastpath.ENABLED = False
    try:
        slow = simulate(w, Cluster.procs(P), cfg)
    finally:
        fastpath.ENABLED = True
    assert schedule(fast).equals(schedule(slow))
    assert metrics_json({k: v for k, v in fast.metrics.items() if k != "scheduler"}) == \
        metrics_json({k: v for k, v in slow.metrics.items() if k != "scheduler"})


@SETTINGS
@given(w=workloads(), backfill=st.sampled_from(["none", "easy"]))
def test_node_pass_on_one_node_equals_processor_mode(w, backfill):
    cfg = SimConfig(backfill=backfill)
    procs = simulate(w, Cluster.procs(P), cfg)
    node = simulate(w, Cluster.uniform(1, 0, P), cfg)
    # wait reasons may differ: a pass stops scanning once nothing else can start (the scalar pass when no
    # processor is free, the node pass when every request shape failed), and unexamined jobs keep theirs
    keep = ["job_id", "start", "end", "reserved_start"]
    assert schedule(procs).select(keep).equals(schedule(node).select(keep))


def _easy_vs_profile(w, cluster, cfg):
    easy = simulate(w, cluster, cfg)
    class ProfileAtDepthOne(type(BACKFILLS["easy"])):  # EASY's depth, the depth-K kernel
        def pass_for(self, sim):
            return depth_k.profile_pass

        def whole_run(self, sim):
            return None

    original = BACKFILLS["easy"]
    BACKFILLS["easy"] = ProfileAtDepthOne()
    try:
        prof = simulate(w, cluster, cfg)
    finally:
        BACKFILLS["easy"] = original
    return easy, prof


@pytest.mark.xfail(strict=True, reason="known divergence: in processor-count mode with a walltime margin the "
                   "depth-K profile pass at depth 1 starts a job one instant later than the EASY pass (found by "
                   "the property below once the profile pass really ran in that mode; outputs of every shipped "
                   "configuration are unchanged, since processor-count EASY runs the fast path)")
def test_profile_pass_at_depth_one_equals_easy_procs_with_margin():
    rows = [("1", 0, 1, 1), ("2", 0, 1, 1), ("3", 2, 1, 1), ("4", 1, 1, 2), ("5", 1, 1, 4), ("6", 0, 2, 2),
            ("7", 0, 2, 3), ("8", 0, 1, 1), ("9", 0, 1, 1)]
    w = pl.DataFrame({"job_id": [r[0] for r in rows], "submit": [float(r[1]) for r in rows],
                      "elapsed_s": [float(r[2]) for r in rows], "time_limit_s": [None] * len(rows),
                      "account": ["t0"] * len(rows), "job_name": ["job0"] * len(rows),
                      "req_gpus": [float(r[3]) for r in rows], "req_cpus": [1.0] * len(rows)},
                     schema_overrides={"time_limit_s": pl.Float64})
    easy, prof = _easy_vs_profile(w, Cluster.procs(P, resource="gpus"), SimConfig(backfill="easy",
                                                                                    walltime_margin=0.2))
    cols = ["job_id", "start", "end", "reserved_start"]
    assert schedule(easy).select(cols).equals(schedule(prof).select(cols))


@SETTINGS
@given(w=workloads(gpus=True), layout=st.sampled_from(["procs", "nodes"]), margin=st.sampled_from([0.0, 0.2]))
def test_profile_pass_at_depth_one_equals_easy(w, layout, margin):
    # processor-count mode with a margin diverges (the strict xfail above pins it); the rest must agree
    assume(not (layout == "procs" and margin > 0))
    cluster = Cluster.procs(P, resource="gpus") if layout == "procs" else Cluster.uniform(3, P, 8)
    easy, prof = _easy_vs_profile(w, cluster, SimConfig(backfill="easy", walltime_margin=margin))
    a, b = schedule(easy), schedule(prof)
    assert a.select("job_id", "start", "end", "reserved_start").equals(b.select("job_id", "start", "end", "reserved_start"))
    assert res_nodes(easy) == res_nodes(prof)


@SETTINGS
@given(w=workloads(gpus=True, teams=3), budgets=st.sampled_from([None, {"t0": 3, "t1": 1, "t2": 1}]),
       mrt=st.sampled_from([None, 0.0, 6.0]), caps=st.booleans())
def test_fair_share_scan_hints_change_nothing(w, budgets, mrt, caps):
    # the fair-share order skips jobs the pass already knows cannot start; the outcome must be identical
    if caps:
        budgets = {"t0": {"share": 3, "max_gpus": 8}, "t1": 1, "t2": 1}
    cfg = SimConfig(policy="fairshare", budgets=budgets, min_runtime_s=mrt, preemption_threshold=0.0)
    cluster = Cluster.uniform(3, P, 8)
    a = simulate(w, cluster, cfg)
    easy.HINTS = False
    try:
        b = simulate(w, cluster, cfg)
    finally:
        easy.HINTS = True
    assert a.jobs.equals(b.jobs)
    assert a.timeline.equals(b.timeline)


def res_nodes(res):
    if "node_list" not in res.jobs.columns:  # processor-count mode places nothing on nodes
        return None
    return dict(zip(res.jobs["job_id"].to_list(), res.jobs["node_list"].to_list()))


# ------------------------------------------------------------------------------ invariants
CONFIGS = [
    SimConfig(backfill="none"), SimConfig(backfill="easy"), SimConfig(backfill="conservative"),
    SimConfig(reservation_depth=2), SimConfig(backfill_order="area"), SimConfig(backfill_order="smallest"),
    SimConfig(policy="priority"), SimConfig(policy="fairshare", budgets={"t0": 2, "t1": 1}),
    SimConfig(policy="drf"), SimConfig(walltime_margin=0.3),
]


@SETTINGS
@given(w=workloads(gpus=True, teams=2), cfg=st.sampled_from(CONFIGS),
       layout=st.sampled_from(["3x6", "2x4+gang", "procs"]))
def test_capacity_submit_and_completion_invariants(w, cfg, layout):
    cluster = {"3x6": Cluster.uniform(3, P, 8), "2x4+gang": Cluster.uniform(2, 4, 8),
               "procs": Cluster.procs(P, resource="gpus")}[layout]
    if layout == "2x4+gang":  # 5..6-GPU jobs become gangs of both nodes
        w = w.with_columns(pl.col("req_gpus").clip(1, 8))
    res = simulate(w, cluster, cfg)
    check_basics(res, w)
    check_capacity(res, cluster)
    j = res.jobs.join(w.select("job_id", pl.col("elapsed_s").alias("log_run_s")), on="job_id")
    lim = pl.coalesce(pl.col("time_limit_s"), pl.col("log_run_s"))
    # no preemption here: each job runs once, min(run, limit) long
    off = j.select(((pl.col("end") - pl.col("start")) - pl.min_horizontal(pl.col("log_run_s"), lim)).abs().max())
    assert off.item() < 1e-9
    assert (j["preemptions"] == 0).all()


@SETTINGS
@given(w=workloads(exact=True, gpus=True), layout=st.sampled_from(["procs", "nodes"]))
def test_easy_starts_reserved_jobs_no_later_than_their_reservation(w, layout):
    cluster = Cluster.procs(P, resource="gpus") if layout == "procs" else Cluster.uniform(3, P, 8)
    res = simulate(w, cluster, SimConfig(backfill="easy"))
    r = res.jobs.filter(pl.col("reserved_start").is_not_null())
    assert (r["start"] <= r["reserved_start"] + 1e-9).all()


@SETTINGS
# node layouts break this today: a full conservative pass rebuilds reservations by best fit and can start a job
# after the reservation it got (pinned by the strict xfail test_engine_schedules.py::
# test_conservative_keeps_every_reservation_it_gave); hypothesis found it in about one run in three
@given(w=workloads(exact=True, gpus=True), layout=st.sampled_from(["procs"]))
def test_conservative_starts_no_later_than_the_reservation_at_arrival(w, layout):
    cluster = Cluster.procs(P, resource="gpus") if layout == "procs" else Cluster.uniform(3, P, 8)
    res = simulate(w, cluster, SimConfig(backfill="conservative"))
    j = res.jobs
    waited = j.filter(pl.col("start") > pl.col("submit"))
    # every job that did not start on arrival got a reservation on arrival ...
    assert waited["reserved_start"].null_count() == 0
    # ... and started no later
    assert (waited["start"] <= waited["reserved_start"] + 1e-9).all()


@SETTINGS
@given(w=workloads(gpus=True, teams=2), mrt=st.sampled_from([0.0, 5.0, 12.0]),
       ckpt=st.sampled_from([None, 4.0]), quota=st.sampled_from(["none", "guarantee"]),
       policy=st.sampled_from(["fairshare", "drf", "fcfs"]))
def test_no_preemption_before_min_runtime(w, mrt, ckpt, quota, policy):
    # half the jobs carry a min runtime from the "log", the others get the config default (0 = unfunded)
    w = w.with_columns(pl.when(pl.col("job_id").cast(pl.Int64) % 2 == 0).then(pl.lit(8.0)).alias("min_runtime_s"))
    budgets = {"t0": {"share": 1, "guaranteed_gpus": 6}, "t1": {"share": 1, "guaranteed_gpus": 6}}
    cluster = Cluster.uniform(3, P, 8)
    cfg = SimConfig(policy=policy, budgets=budgets, quota=quota, min_runtime_s=mrt, checkpoint_interval_s=ckpt,
                    preemption_threshold=0.0)
    res = simulate(w, cluster, cfg)
    check_basics(res, w)
    check_capacity(res, cluster)
    mins = dict(zip(res.jobs["job_id"].to_list(), res.jobs["min_runtime_s"].to_list()))
    tl = res.timeline.filter(pl.col("ended_by") != "end")
    for jid, s, e in tl.select("job_id", "start", "end").iter_rows():
        assert e - s >= mins[jid] - 1e-9, f"job {jid} preempted after {e - s} s < min runtime {mins[jid]}"
    # every attempt ran sum(saved + lost); the last one the rest: useful time = the log's run time (capped)
    rows = res.jobs.with_columns(pl.col("job_id").str.split(";").list.first().alias("base"))
    per_job = rows.group_by("base").agg(
        (pl.col("run_s") - pl.col("lost_cpu_seconds") / pl.col("alloc_cpus")).sum().alias("useful"),  # 1 CPU a job
        pl.col("time_limit_s").first())
    j = per_job.join(w.select("job_id", pl.col("elapsed_s").alias("log_run_s")), left_on="base", right_on="job_id")
    lim = pl.coalesce(pl.col("time_limit_s"), pl.col("log_run_s"))
    assert j.select((pl.col("useful") - pl.min_horizontal(pl.col("log_run_s"), lim)).abs().max()).item() < 1e-6
    j = res.jobs
    if ckpt:  # with checkpoints every 4 s, no attempt loses 4 s or more
        assert (j["lost_cpu_seconds"] < 4.0 * (j["preemptions"] + j["failures"]) + 1e-9).all()


@SETTINGS
@given(w=workloads(gpus=True, teams=2), cfg=st.sampled_from(CONFIGS + [
    SimConfig(policy="fairshare", budgets={"t0": 1, "t1": 1}, min_runtime_s=5.0, checkpoint_interval_s=3.0,
              preemption_threshold=0.0)]))
def test_identical_inputs_give_byte_identical_output(w, cfg, tmp_path_factory):
    cluster = Cluster.uniform(3, P, 8)
    a = simulate(w, cluster, cfg).write(tmp_path_factory.mktemp("a"))
    b = simulate(w.clone(), cluster, cfg).write(tmp_path_factory.mktemp("b"))
    for name in ("jobs.parquet", "timeline.parquet", "metrics.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
