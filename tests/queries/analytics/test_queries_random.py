"""Big aggregates cross-checked against an independent Polars / NumPy computation on a random store.

The store has two clusters that reuse job ids, running / pending / zero-length jobs, samples that stick out of
their job's run, values above the request, null values, jobs with totals only and jobs with no usage at all:
every branch of the definitions in queries/README.md. The reference below re-implements those definitions
directly (per-sample overlap loops in Polars, a brute-force bucket split in NumPy), not by reusing the SQL.
"""
from __future__ import annotations

import datetime as dt
import math

import numpy as np
import polars as pl
import pytest

import queries
from queries.store import Store

from test_queries_scores import reference_loop

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)  # a Monday
T0_S = T0.timestamp()
# The last instant each cluster's log knows (recorded at ingest): a RUNNING job runs until then, never to the
# window's end; "west" has none recorded, so its RUNNING jobs run until start + elapsed_s, as sacct reports them.
SNAPSHOT_S = {"east": T0_S + 9 * 86400.0}
DAY = 86400.0


def random_store(root, seed=3, n_jobs=300):
    rng = np.random.default_rng(seed)
    users = [f"u{i}" for i in range(9)]
    accounts = ["org/a/x", "org/a/y", "org/b", "lab/z", "lab"]
    rows, samples = [], []
    for i in range(n_jobs):
        cluster = ("east", "west")[i % 2]
        job_id = str(i // 2)  # every id twice: once per cluster
        submit = T0_S + rng.uniform(0, 10 * DAY)
        state = rng.choice(["COMPLETED", "FAILED", "CANCELLED", "RUNNING", "PENDING"], p=[.6, .15, .12, .08, .05])
        wait = 0.0 if rng.random() < 0.4 else rng.exponential(3600)
        run = 0.0 if rng.random() < 0.03 else rng.exponential(6 * 3600)
        start = None if state == "PENDING" else submit + wait
        end = None if state in ("PENDING", "RUNNING") else start + run
        gpus = float(rng.choice([0, 0, 1, 2, 4, 0.5]))
        cpus = float(rng.choice([1, 2, 4, 8, 16]))
        alloc = rng.random() < 0.5
        usage = rng.choice(["samples", "totals", "none"], p=[.5, .35, .15])
        eff = rng.beta(2, 3)
        row = dict(cluster=cluster, job_id=job_id, user=str(rng.choice(users)), account=str(rng.choice(accounts)),
                   partition=str(rng.choice(["gpu", "cpu"])), job_class=str(rng.choice(["debug", "training", "eval"])),
                   job_name=f"job_{i % 7}_{i}", state=str(state), submit=submit, start=start, end=end,
                   elapsed_s=run if start is not None else 0.0, req_cpus=cpus, req_gpus=gpus,
                   req_mem_bytes=cpus * 4e9, alloc_cpus=cpus * 0.75 if alloc else None,
                   alloc_gpus=gpus if alloc else None, alloc_mem_bytes=cpus * 3e9 if alloc else None,
                   min_runtime_s=float(rng.choice([0.0, 3600.0])),
                   # Slurm sources record one task's (node's) peak RSS, the others the whole job's
                   nodes=(1, 1, 2, 4)[i % 4], source=("sacct", "swf", "sacct-json")[i % 3])
        if i % 37 == 5:  # no memory level at all (SWF logs often lack the request): memory usage unknown
            row.update(req_mem_bytes=None, alloc_mem_bytes=None)
        if i % 41 == 7:  # no CPU count: CPU usage cannot be capped, so it is unknown
            row.update(req_cpus=None, alloc_cpus=None)
        if usage == "totals":
            row.update(cpu_seconds_used=eff * cpus * run, mean_gpu_util=eff if gpus else None,
                       max_rss_bytes=eff * cpus * 5e9, max_cpu_util=min(1.0, eff * 1.4))
        rows.append(row)
        if usage == "samples" and start is not None:
            t = start - rng.uniform(0, 600)  # may begin before the job
            stop = start + run + rng.uniform(0, 900)  # and run past its end
            while t < stop:
                step = float(rng.choice([60.0, 300.0, 1800.0, 7200.0]))
                samples.append(dict(cluster=cluster, job_id=job_id, ts=t, interval_s=step,
                                    cpu_used=None if rng.random() < 0.05 else rng.uniform(0, 1.3) * cpus,
                                    gpu_util=None if not gpus else min(1.2, rng.uniform(0, 1.1)),
                                    mem_bytes=rng.uniform(0.1, 1.2) * cpus * 3e9))
                t += step
    to_ts = lambda c: (pl.col(c) * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    jobs = pl.DataFrame(rows, infer_schema_length=None).with_columns(*(to_ts(c) for c in ("submit", "start", "end")))
    samp = pl.DataFrame(samples, infer_schema_length=None).with_columns(to_ts("ts"))
    with Store(root).transaction() as tx:
        tx.upsert("jobs", jobs)
        tx.upsert("samples", samp)
        for cluster, t_s in SNAPSHOT_S.items():
            tx.record_snapshot(cluster, dt.datetime.fromtimestamp(t_s, UTC))
    return root


def running_end(st: Store):
    """Where a RUNNING job without an end stops: its cluster's snapshot recorded in the store, else
    start + elapsed_s."""
    snapshot_s = {cluster: t.timestamp() for cluster, t in st.snapshots().items()}
    snap = pl.col("cluster").replace_strict(snapshot_s, default=None, return_dtype=pl.Float64)
    return pl.when(pl.col("state") == "RUNNING").then(pl.coalesce(snap, _epoch("start") + pl.col("elapsed_s")))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return random_store(tmp_path_factory.mktemp("random_store"))


def _epoch(col):
    return pl.col(col).dt.epoch("us") / 1e6


def whole_job_rss(jobs: pl.DataFrame) -> pl.DataFrame:
    """max_rss_bytes as the whole job's peak: Slurm's MaxRSS (sacct, sacct-json) is one task's, i.e. one node's,
    so x nodes; a jobstats summary and the other sources already record the whole job's."""
    nodes = pl.max_horizontal(pl.col("nodes").fill_null(1), pl.lit(1))
    # a trusted jobstats summary already gives the sum of the nodes' peaks
    summed = (pl.col("jobstats") == "ok").fill_null(False) | pl.col("node_mem_peak_bytes").is_not_null() \
        if "jobstats" in jobs.columns else pl.lit(False)
    return jobs.with_columns(pl.when(pl.col("source").is_in(["sacct", "sacct-json"]) & ~summed)
                             .then(pl.col("max_rss_bytes") * nodes).otherwise(pl.col("max_rss_bytes"))
                             .alias("max_rss_bytes"))


def reference_job_waste(store, w0=None, w1=None) -> pl.DataFrame:
    """The job_waste definitions, written again in Polars."""
    st = Store(store)
    jobs, samples = whole_job_rss(st.read("jobs")), st.read("samples")
    lo_w = -math.inf if w0 is None else w0.timestamp()
    hi_w = math.inf if w1 is None else w1.timestamp()
    j = jobs.filter(pl.col("start").is_not_null()).with_columns(
        t0=_epoch("start"),
        t1=pl.coalesce(_epoch("end"), running_end(st), _epoch("start") + pl.col("elapsed_s")),
        cpus=pl.coalesce("alloc_cpus", "req_cpus"), gpus=pl.coalesce("alloc_gpus", "req_gpus", pl.lit(0.0)),
        mem=pl.coalesce("alloc_mem_bytes", "req_mem_bytes") / 1e9,
    ).with_columns(t1=pl.max_horizontal("t0", "t1"))
    j = j.with_columns(lo=pl.max_horizontal("t0", pl.lit(lo_w)), hi=pl.min_horizontal("t1", pl.lit(hi_w)))
    j = j.filter((pl.col("hi") > pl.col("lo")) | ((pl.col("t1") == pl.col("t0")) & (pl.col("t0") >= lo_w)
                                                  & (pl.col("t0") < hi_w)))
    j = j.with_columns(win=(pl.col("hi") - pl.col("lo")).clip(lower_bound=0), run=pl.col("t1") - pl.col("t0"))
    s = samples.join(j.select("cluster", "job_id", "lo", "hi", "cpus", "gpus", "mem"), on=["cluster", "job_id"])
    s = s.with_columns(a=_epoch("ts")).with_columns(
        ov=(pl.min_horizontal(pl.col("a") + pl.col("interval_s"), "hi") - pl.max_horizontal("a", "lo")).clip(lower_bound=0))
    # min(v, c) that is null when either is: a null usage stays unknown, and so does one without a level
    cap = lambda v, c: pl.when(v > c).then(c).when(v <= c).then(v)  # noqa: E731
    s = s.group_by("cluster", "job_id").agg(
        n_cpu=pl.col("cpu_used").count(), n_gpu=pl.col("gpu_util").count(), n_mem=pl.col("mem_bytes").count(),
        cpu_s=(cap(pl.col("cpu_used"), pl.col("cpus")) * pl.col("ov")).sum(),
        gpu_s=(pl.col("gpu_util").clip(upper_bound=1.0) * pl.col("gpus") * pl.col("ov")).sum(),
        mem_s=(cap(pl.col("mem_bytes") / 1e9, pl.col("mem")) * pl.col("ov")).sum(),
        peak_cpus=pl.col("cpu_used").max())
    j = j.join(s, on=["cluster", "job_id"], how="left")
    return j.select(
        "cluster", "job_id", "user", "account", "job_class", "state", "win",
        cpu_req=pl.col("cpus") * pl.col("win"), gpu_req=pl.col("gpus") * pl.col("win"),
        mem_req=pl.col("mem") * pl.col("win"),
        cpu_used=pl.when(pl.col("cpus").is_null()).then(None).when(pl.col("n_cpu") > 0).then("cpu_s").otherwise(
            pl.when(pl.col("cpus").is_null()).then(None)
            .when(pl.col("run") == 0).then(pl.col("cpu_seconds_used") * 0)
            .otherwise(cap(pl.col("cpu_seconds_used") / pl.col("run"), pl.col("cpus"))) * pl.col("win")),
        gpu_used=pl.when(pl.col("gpus") == 0).then(0.0).when(pl.col("n_gpu") > 0).then("gpu_s").otherwise(
            pl.col("mean_gpu_util").clip(upper_bound=1.0) * pl.col("gpus") * pl.col("win")),
        mem_used=pl.when(pl.col("mem").is_null()).then(None).when(pl.col("n_mem") > 0).then("mem_s").otherwise(
            cap(pl.col("max_rss_bytes") / 1e9, pl.col("mem")) * pl.col("win")),
        peak_cpu=pl.coalesce("max_cpu_util", pl.col("peak_cpus") / pl.col("cpus")),
    )


WINDOWS = [(None, None), (T0 + dt.timedelta(days=2), T0 + dt.timedelta(days=5, hours=7)),
           (None, T0 + dt.timedelta(days=3)), (T0 + dt.timedelta(days=8, minutes=13), None)]


def _close(a, b, rel=1e-9, abs_=1e-6):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def assert_job_waste_equals_reference(got: pl.DataFrame, ref: pl.DataFrame) -> None:
    """Every job of ``ref`` (``reference_job_waste``) is in ``got`` (``job_waste``) with the same requested and
    used seconds of each resource (relative 1e-9) and nulls in the same places."""
    both = ref.join(got, on=["cluster", "job_id"], how="inner")
    assert both.height == ref.height
    for mine, theirs in [("cpu_req", "cpu_seconds_requested"), ("cpu_used", "cpu_seconds_used"),
                         ("gpu_req", "gpu_seconds_requested"), ("gpu_used", "gpu_seconds_used"),
                         ("mem_req", "mem_seconds_requested"), ("mem_used", "mem_seconds_used")]:
        diff = both.select(((pl.col(mine) - pl.col(theirs)).abs() / (pl.col(mine).abs() + 1.0)).max()).item()
        nulls = both.select((pl.col(mine).is_null() != pl.col(theirs).is_null()).sum()).item()
        assert nulls == 0 and (diff or 0.0) < 1e-9, (mine, diff, nulls)


@pytest.mark.parametrize("w0, w1", WINDOWS)
def test_job_waste_matches_polars(store, w0, w1):
    got = queries.run("job_waste", store=store, start=w0, end=w1)
    ref = reference_job_waste(store, w0, w1)
    assert got.height == ref.height > 50
    both = ref.join(got, on=["cluster", "job_id"], how="inner")
    assert both.height == ref.height
    pairs = [("cpu_req", "cpu_seconds_requested"), ("cpu_used", "cpu_seconds_used"),
             ("gpu_req", "gpu_seconds_requested"), ("gpu_used", "gpu_seconds_used"),
             ("mem_req", "mem_seconds_requested"), ("mem_used", "mem_seconds_used"), ("win", "in_window_s")]
    for r in both.iter_rows(named=True):
        for mine, theirs in pairs:
            assert _close(r[mine], r[theirs]), (r["cluster"], r["job_id"], mine, r[mine], r[theirs])
    assert (got["cpu_efficiency"].drop_nulls() <= 1 + 1e-12).all() and (got["gpu_efficiency"].drop_nulls() >= 0).all()


def _brute_force_buckets(store, resource, bucket_s, origin, w0, w1):
    """Every job and sample interval against every bucket, in NumPy."""
    ref = reference_job_waste(store, w0, w1)
    st = Store(store)
    jobs = whole_job_rss(st.read("jobs"))
    lo_w = -math.inf if w0 is None else w0.timestamp()
    hi_w = math.inf if w1 is None else w1.timestamp()
    meta = ref.join(jobs.select("cluster", "job_id", "start", "end", "elapsed_s", "state", "alloc_cpus", "req_cpus",
                                "alloc_gpus", "req_gpus", "alloc_mem_bytes", "req_mem_bytes", "cpu_seconds_used",
                                "mean_gpu_util", "max_rss_bytes"), on=["cluster", "job_id"])
    intervals = []  # (lo, hi, req_level, used_level)
    samples = st.read("samples").join(meta.select("cluster", "job_id"), on=["cluster", "job_id"])
    sampled = set()
    snapshot_s = {cluster: t.timestamp() for cluster, t in st.snapshots().items()}
    for m in meta.iter_rows(named=True):
        t0 = m["start"].timestamp()
        snap = snapshot_s.get(m["cluster"]) if m["state"] == "RUNNING" else None
        t1 = m["end"].timestamp() if m["end"] else (snap if snap is not None else t0 + m["elapsed_s"])
        t1 = max(t0, t1)
        lo, hi = max(t0, lo_w), min(t1, hi_w)
        mem_bytes = m["alloc_mem_bytes"] or m["req_mem_bytes"]
        level = {"cpu": m["alloc_cpus"] or m["req_cpus"], "gpu": m["alloc_gpus"] or m["req_gpus"] or 0.0,
                 "mem": None if mem_bytes is None else mem_bytes / 1e9}[resource]
        mine = samples.filter((pl.col("cluster") == m["cluster"]) & (pl.col("job_id") == m["job_id"]))
        col = {"cpu": "cpu_used", "gpu": "gpu_util", "mem": "mem_bytes"}[resource]
        if level is None:  # nothing held that is known, and usage cannot be capped: unknown, not waste
            intervals.append((lo, hi, 0.0, 0.0, 0.0))
            continue
        has_samples = bool(mine[col].drop_nulls().len())
        run = t1 - t0
        rate = {"cpu": None if m["cpu_seconds_used"] is None else
                0.0 if run == 0 else min(m["cpu_seconds_used"] / run, level),
                "gpu": None if m["mean_gpu_util"] is None else min(m["mean_gpu_util"], 1.0) * level,
                "mem": None if m["max_rss_bytes"] is None else min(m["max_rss_bytes"] / 1e9, level)}[resource]
        known = has_samples or rate is not None or (resource == "gpu" and level == 0)
        intervals.append((lo, hi, level, 0.0 if known else level, 0.0))
        if has_samples:
            sampled.add((m["cluster"], m["job_id"]))
            for s in mine.iter_rows(named=True):
                if s[col] is None:
                    continue
                v = {"cpu": min(s[col], level), "gpu": min(s[col], 1.0) * level, "mem": min(s[col] / 1e9, level)}[resource]
                a = max(s["ts"].timestamp(), lo)
                b = min(s["ts"].timestamp() + s["interval_s"], hi)
                intervals.append((a, b, 0.0, 0.0, v))
        elif rate is not None:
            intervals.append((lo, hi, 0.0, 0.0, rate))
    iv = np.array([x for x in intervals if x[1] > x[0]])
    first = math.floor(((lo_w if w0 else iv[:, 0].min()) - origin) / bucket_s)
    last = math.ceil(((hi_w if w1 else iv[:, 1].max()) - origin) / bucket_s) - 1
    starts = origin + bucket_s * np.arange(first, last + 1)
    ov = np.clip(np.minimum(iv[:, 1][:, None], starts + bucket_s) - np.maximum(iv[:, 0][:, None], starts), 0, None)
    return starts, *((iv[:, c][:, None] * ov).sum(0) for c in (2, 3, 4))


@pytest.mark.parametrize("resource, bucket_s, window", [("gpu", 3600.0, 0), ("cpu", 7 * 3600.0 + 13, 1),
                                                        ("mem", DAY, 2), ("cpu", 900.0, 3)])
def test_gap_area_matches_brute_force(store, resource, bucket_s, window):
    w0, w1 = WINDOWS[window]
    got = queries.run("gap_area", store=store, resource=resource, bucket_s=bucket_s, start=w0, end=w1)
    origin = dt.datetime(1970, 1, 5, tzinfo=UTC).timestamp()
    starts, req, unknown, used = _brute_force_buckets(store, resource, bucket_s, origin, w0, w1)
    assert [t.timestamp() for t in got["bucket_start"]] == pytest.approx(list(starts))
    assert got["requested_seconds"].to_numpy() == pytest.approx(req, rel=1e-9, abs=1e-5)
    assert got["used_seconds"].to_numpy() == pytest.approx(used, rel=1e-9, abs=1e-5)
    assert got["unknown_usage_seconds"].to_numpy() == pytest.approx(unknown, rel=1e-9, abs=1e-5)
    assert unknown.sum() > 0  # the random store has jobs without usage: the unknown branch is exercised
    assert got["wasted_seconds"].to_numpy() == pytest.approx(req - unknown - used, rel=1e-9, abs=1e-5)
    waste = queries.run("job_waste", store=store, start=w0, end=w1)
    assert got["requested_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_requested"].sum(), rel=1e-9)
    assert got["used_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_used"].sum(), rel=1e-9)
    assert got["wasted_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_wasted"].sum(), rel=1e-9)


def test_gap_area_groups_add_up(store):
    total = queries.run("gap_area", store=store, resource="gpu", bucket_s=DAY)
    for group_by in ("user", "team", "account"):
        grouped = queries.run("gap_area", store=store, resource="gpu", bucket_s=DAY, group_by=group_by)
        summed = grouped.group_by("bucket_start").agg(pl.col("requested_seconds", "used_seconds").sum()).sort("bucket_start")
        assert summed["bucket_start"].to_list() == total["bucket_start"].to_list()
        assert summed["requested_seconds"].to_numpy() == pytest.approx(total["requested_seconds"].to_numpy(), rel=1e-9, abs=1e-6)
        assert summed["used_seconds"].to_numpy() == pytest.approx(total["used_seconds"].to_numpy(), rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("w0, w1", WINDOWS[:2])
def test_user_ranking_matches_polars(store, w0, w1):
    ref = reference_job_waste(store, w0, w1)
    jobs = Store(store).read("jobs")
    first, last = reference_extent(jobs)
    span = (w1.timestamp() if w1 else last) - (w0.timestamp() if w0 else first)
    ref = ref.join(jobs.select("cluster", "job_id", "req_cpus", "alloc_cpus"), on=["cluster", "job_id"])
    per = ref.group_by("user").agg(
        jobs=pl.len(),
        gpu_wasted=(pl.col("gpu_req") - pl.col("gpu_used")).sum() / 3600,
        cpu_eff=pl.col("cpu_used").sum() / pl.col("cpu_req").filter(pl.col("cpu_used").is_not_null()).sum(),
        mem_wasted=(pl.col("mem_req") - pl.col("mem_used")).sum() / 3.6e6,
        known=(pl.when(pl.col("gpu_used").is_not_null()).then("gpu_req").otherwise(0)
               + pl.when(pl.col("cpu_used").is_not_null()).then("cpu_req").otherwise(0) / 16
               + pl.when(pl.col("mem_used").is_not_null()).then("mem_req").otherwise(0) / 128).sum(),
        used=(pl.col("gpu_used").fill_null(0) + pl.col("cpu_used").fill_null(0) / 16
              + pl.col("mem_used").fill_null(0) / 128).sum(),
        legacy=(((pl.coalesce("req_cpus", "alloc_cpus") * pl.col("win") / 60 + 50).log()
                 * (2.5 - pl.col("peak_cpu")).exp()).mean()
                # job_count = the jobs with a task score (a peak and a CPU count)
                / ((pl.col("peak_cpu") + pl.coalesce("req_cpus", "alloc_cpus")).count() / 10 + 1).log()),
    )
    got = {r["user"]: r for r in queries.run("user_ranking", store=store, start=w0, end=w1).iter_rows(named=True)}
    assert set(got) == set(per["user"])
    for r in per.iter_rows(named=True):
        g = got[r["user"]]
        assert g["job_count"] == r["jobs"]
        assert _close(g["gpu_hours_wasted"], r["gpu_wasted"]) and _close(g["mem_tb_hours_wasted"], r["mem_wasted"])
        assert _close(g["cpu_efficiency"], r["cpu_eff"])
        assert _close(g["rec_efficiency"], r["used"] / r["known"] if r["known"] else None)
        assert _close(g["rec_confidence"], r["known"] / (r["known"] + 36000))
        assert _close(g["rec_demand"], r["used"] / span / 8)
        assert _close(g["legacy_score"], r["legacy"] if r["legacy"] == r["legacy"] else None)
    ranked = sorted(got.values(), key=lambda g: (g["legacy_score"] is None, g["legacy_score"] or 0))
    n = sum(g["legacy_score"] is not None for g in ranked)
    for i, g in enumerate(ranked[:n]):
        assert g["legacy_coefficient"] == pytest.approx(3 * (0.25 / 3) ** (i / (n - 1)))


def reference_extent(jobs):
    started = jobs.filter(pl.col("start").is_not_null())
    t0 = started.select(_epoch("start")).to_series()
    t1 = started.select(pl.max_horizontal(pl.coalesce(_epoch("end"), _epoch("start") + pl.col("elapsed_s")),
                                          _epoch("start"))).to_series()
    return t0.min(), t1.max()


def test_team_ranking_sums_equal_user_ranking(store):
    users = queries.run("user_ranking", store=store)
    for level in (1, 2, 3):
        teams = queries.run("team_ranking", store=store, team_level=level)
        for col in ("gpu_hours_wasted", "cpu_hours_requested", "mem_tb_hours_used", "footprint_gpu_equiv_hours"):
            assert teams[col].sum() == pytest.approx(users[col].sum(), rel=1e-9)
        assert teams["job_count"].sum() == users["job_count"].sum()
    assert set(queries.run("team_ranking", store=store)["team"]) == {"org", "lab"}


def test_queue_waits_match_numpy(store):
    jobs = Store(store).read("jobs").filter(pl.col("start").is_not_null()).with_columns(
        wait=((pl.col("start") - pl.col("submit")).dt.total_microseconds() / 1e6).clip(lower_bound=0),
        team=pl.col("account").str.split("/").list.slice(0, 2).list.join("/"))
    got = queries.run("queue_waits", store=store, team_level=2)
    rows = {(r["job_class"], r["team"]): r for r in got.iter_rows(named=True)}
    for (cls, team), part in jobs.group_by("job_class", "team"):
        w = part["wait"].to_numpy()
        r = rows[(cls, team)]
        assert r["jobs_started"] == len(w)
        for q, col in ((0.5, "wait_median_s"), (0.9, "wait_p90_s"), (0.99, "wait_p99_s")):
            assert r[col] == pytest.approx(np.quantile(w, q), rel=1e-9, abs=1e-9)
    allw = jobs["wait"].to_numpy()
    assert rows[("(all)", "(all)")]["wait_p90_s"] == pytest.approx(np.quantile(allw, 0.9))


def test_fairshare_matches_polars(store):
    w0, w1 = T0 + dt.timedelta(days=1), T0 + dt.timedelta(days=6)
    a, b = w0.timestamp(), w1.timestamp()
    jobs = Store(store).read("jobs").filter(pl.col("cluster") == "east").with_columns(
        team=pl.col("account").str.split("/").list.first(), t_sub=_epoch("submit"), t0=_epoch("start"),
        t1=pl.coalesce(_epoch("end"), running_end(Store(store)), _epoch("start") + pl.col("elapsed_s")),
        gpus=pl.coalesce("alloc_gpus", "req_gpus", pl.lit(0.0)), asked=pl.coalesce("req_gpus", "alloc_gpus", pl.lit(0.0)))
    jobs = jobs.with_columns(
        received=pl.when(pl.col("t0").is_null()).then(0.0).otherwise(
            pl.col("gpus") * (pl.min_horizontal("t1", pl.lit(b)) - pl.max_horizontal("t0", pl.lit(a))).clip(lower_bound=0)),
        waiting=pl.col("asked") * (pl.min_horizontal(pl.coalesce("t0", _epoch("end"), pl.lit(b)), pl.lit(b))
                                   - pl.max_horizontal("t_sub", pl.lit(a))).clip(lower_bound=0))
    per = jobs.group_by("team").agg(received=pl.col("received").sum() / 3600,
                                    demanded=(pl.col("received") + pl.col("waiting")).sum() / 3600)
    got = {r["team"]: r for r in queries.run("fairshare_attainment", store=store, start=w0, end=w1, cluster="east",
                                             capacity_gpus=20.0).iter_rows(named=True)}
    for r in per.iter_rows(named=True):
        g = got[r["team"]]
        assert g["received_gpu_hours"] == pytest.approx(r["received"], rel=1e-9, abs=1e-9)
        assert g["demanded_gpu_hours"] == pytest.approx(r["demanded"], rel=1e-9, abs=1e-9)
        assert g["share"] == pytest.approx(0.5) and g["entitled_gpu_hours"] == pytest.approx(0.5 * 20 * 5 * 24)
        ent, dem = g["entitled_gpu_hours"], g["demanded_gpu_hours"]
        assert _close(g["attainment"], g["received_gpu_hours"] / min(ent, dem) if min(ent, dem) else None)


def test_backtest_recursion_on_random_history(store):
    params = dict(alpha=0.35, dead_band=0.07, max_step=0.2, min_jobs=3, min_gpu_equiv_hours=2.0)
    got = queries.run("quota_backtest", store=store, period_s=DAY, **params)
    assert got["held"].any() and (~got["held"]).any()
    for _user, part in got.group_by("user"):
        part = part.sort("period_k")
        expected = reference_loop(part["raw_coefficient"].fill_null(1.0).to_list(), (~part["held"]).to_list(),
                                  alpha=0.35, dead_band=0.07, max_step=0.2)
        assert part["coefficient"].to_list() == pytest.approx([e[1] for e in expected], rel=1e-9)
        assert part["held"].to_list() == [n < 3 or h < 2.0 for n, h in zip(part["job_count"], part["known_gpu_equiv_hours"])]
