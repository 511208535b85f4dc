"""Memory as Slurm means it (DOMAIN.md section 9): MaxRSS / TRESUsageInMax ``mem`` are one task's peak (one node's
share of a multi-node job) while ``--mem`` is per node, so peaks are compared per node, and the right-size
suggestion is a per-node ``--mem`` in GiB.

Invariants, on hand-made jobs, on every job of the sample store and of the real sacct dumps:
- ``peak_mem_util`` (per-node peak / per-node request) >= ``mem_efficiency`` (mean use / request over the run);
- the suggested ``--mem`` is never below the job's mean use per node.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

import queries
from queries.ingest import ingest
from queries.store import Store

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 5, tzinfo=UTC)
H = dt.timedelta(hours=1)
GIB = 2**30
REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "sample_data" / "store"


def _job(job_id, **kw):
    row = dict(cluster="c", job_id=job_id, user="mo", account="lab/x", state="COMPLETED", job_class="training",
               job_name=f"run-{job_id}", submit=T0, start=T0, end=T0 + 2 * H, elapsed_s=7200.0, req_cpus=32.0,
               req_gpus=0.0, cpu_seconds_used=16 * 7200.0)
    row.update(kw)
    return row


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory_store")
    jobs = pl.DataFrame([
        # sacct, 4 nodes, --mem=64G per node (ReqMem 256 GiB for the job), MaxRSS 48 GiB on the largest task
        _job("slurm4", source="sacct", nodes=4, req_mem_bytes=4 * 64 * GIB, max_rss_bytes=48 * GIB),
        # sacct --json, 2 nodes of 32 GiB, MaxRSS 10 GiB, but samples of the whole job at 40 GiB: 20 GiB a node
        _job("json2", source="sacct-json", nodes=2, req_mem_bytes=2 * 32 * GIB, max_rss_bytes=10 * GIB),
        # SWF records the whole job's memory: 2 nodes, 100 GiB asked, 40 GiB used -> 20 of 50 GiB a node
        _job("swf2", source="swf", nodes=2, req_mem_bytes=100 * GIB, max_rss_bytes=40 * GIB),
        # sacct with a trusted jobstats summary: max_rss is the sum of the nodes' peaks (60 GiB), the busiest node
        # peaked at 40 of its 64 GiB
        _job("js2", source="sacct", nodes=2, req_mem_bytes=2 * 64 * GIB, max_rss_bytes=60 * GIB,
             node_mem_peak_bytes=40 * GIB, jobstats="ok"),
    ])
    samples = pl.DataFrame([dict(cluster="c", job_id="json2", ts=T0 + k * H, interval_s=3600.0, cpu_used=16.0,
                                 mem_bytes=40.0 * GIB) for k in range(2)])
    with Store(root).transaction() as tx:
        tx.upsert("jobs", jobs)
        tx.upsert("samples", samples)
    return root


def _by_job(df):
    return {r["job_id"]: r for r in df.iter_rows(named=True)}


def test_peaks_are_per_node(store):
    w = _by_job(queries.run("job_waste", store=store))
    # slurm4: 48 of 64 GiB a node at the peak; whole job at most 4 x 48 = 192 of 256 GiB over the run
    assert w["slurm4"]["peak_mem_util"] == pytest.approx(0.75)
    assert w["slurm4"]["mem_efficiency"] == pytest.approx(0.75)
    assert w["slurm4"]["mem_seconds_used"] == pytest.approx(192 * GIB / 1e9 * 7200)
    # json2: the samples' 40 GiB over 2 nodes beat the 10 GiB MaxRSS: 20 of 32 GiB a node
    assert w["json2"]["peak_mem_util"] == pytest.approx(20 / 32)
    assert w["json2"]["mem_efficiency"] == pytest.approx(40 / 64)
    # swf2: a whole-job figure is not multiplied by the node count
    assert w["swf2"]["peak_mem_util"] == pytest.approx(0.4)
    assert w["swf2"]["mem_efficiency"] == pytest.approx(0.4)
    # js2: the busiest node's 40 of 64 GiB; the whole job's 60 of 128 GiB held (not 2 x 60)
    assert w["js2"]["peak_mem_util"] == pytest.approx(40 / 64)
    assert w["js2"]["mem_efficiency"] == pytest.approx(60 / 128)


def test_suggestion_is_a_per_node_mem_in_gib(store):
    low = queries.run("user_low_efficiency_jobs", store=store, user="mo", per_resource=10)
    mem = _by_job(low.filter(pl.col("resource") == "mem"))
    s4 = mem["slurm4"]
    assert (s4["requested"], s4["peak"], s4["nodes"]) == pytest.approx((64.0, 48.0, 4))
    # 48 GiB + 20 % = 57.6 -> 58 (the three jobs are not similar: different name stems)
    assert s4["suggested_request"] == 58.0
    assert "asked --mem=64G per node on 4 nodes" in s4["suggestion"]
    assert "peak 48G on a node" in s4["suggestion"] and "request --mem=58G" in s4["suggestion"]
    # waste in GiB-hours of the whole job: (256 - 192) GiB x 2 h
    assert s4["unit"] == "GiB-hours" and s4["wasted_hours"] == pytest.approx(128.0)
    assert mem["swf2"]["requested"] == pytest.approx(50.0) and mem["swf2"]["suggested_request"] == 24.0  # 20 x 1.2


def test_history_never_suggests_below_the_jobs_own_peak(tmp_path):
    # four similar jobs (stem "fit"): three peak at 8 GiB, one at 60 GiB of its 64 GiB node
    rows = [_job(f"fit-{k}", job_name=f"fit-{k}", source="sacct", nodes=1, req_mem_bytes=64 * GIB,
                 max_rss_bytes=(60 if k == 3 else 8) * GIB) for k in range(4)]
    with Store(tmp_path).transaction() as tx:
        tx.upsert("jobs", pl.DataFrame(rows))
    mem = _by_job(queries.run("user_low_efficiency_jobs", store=tmp_path, user="mo", per_resource=10)
                  .filter(pl.col("resource") == "mem"))
    # p95 of [8, 8, 8, 60] = 8 + 0.85 x 52 = 52.2 -> x 1.2 = 62.64 -> 63 covers fit-0's 8 GiB peak
    assert mem["fit-0"]["suggested_request"] == 63.0 and "p95 peak of 4 similar jobs" in mem["fit-0"]["suggestion"]
    # fit-3 held 60 GiB for the whole run (totals: MaxRSS held): the history's 63 covers it too
    assert mem["fit-3"]["suggested_request"] == 63.0


def test_history_below_the_peak_falls_back_to_the_peak(tmp_path):
    rows = [_job(f"fit-{k}", job_name=f"fit-{k}", source="sacct", nodes=1, req_mem_bytes=64 * GIB,
                 max_rss_bytes=(50 if k == 4 else 4) * GIB) for k in range(8)]
    with Store(tmp_path).transaction() as tx:
        tx.upsert("jobs", pl.DataFrame(rows))
    mem = _by_job(queries.run("user_low_efficiency_jobs", store=tmp_path, user="mo", per_resource=10)
                  .filter(pl.col("resource") == "mem"))
    # p95 of seven 4s and one 50: 4 + 0.65 x 46 = 33.9 -> 40.68 -> 41, below fit-4's 50 GiB: its own 50 x 1.2 = 60
    assert mem["fit-4"]["similar_p95_peak"] == pytest.approx(33.9)
    assert mem["fit-4"]["suggested_request"] == 60.0
    assert "its 8 similar jobs peak lower" in mem["fit-4"]["suggestion"]
    assert mem["fit-0"]["suggested_request"] == 41.0  # the history covers a 4 GiB job


def assert_memory_invariants(store: Path, users: list[str], **params) -> int:
    """peak_mem_util >= mem_efficiency on every job with both, and the suggestion >= mean use per node for every
    memory row of ``users``; returns how many multi-node jobs had both (so a test can insist there were some)."""
    w = queries.run("job_waste", store=store, **params).join(
        Store(store).read("jobs").select("cluster", "job_id", "nodes"), on=["cluster", "job_id"], how="left")
    both = w.filter(pl.col("peak_mem_util").is_not_null() & pl.col("mem_efficiency").is_not_null())
    bad = both.filter(pl.col("peak_mem_util") < pl.col("mem_efficiency") - 1e-9)
    assert bad.is_empty(), bad.select("cluster", "job_id", "nodes", "peak_mem_util", "mem_efficiency").head()
    for user in users:
        low = queries.run("user_low_efficiency_jobs", store=store, user=user, per_resource=100_000,
                          min_footprint_gpu_equiv_hours=0.0, min_run_s=0, **params)
        mem = low.filter((pl.col("resource") == "mem") & pl.col("suggested_request").is_not_null()).join(
            w.select("cluster", "job_id", "mem_seconds_used", "in_window_s", pl.col("nodes").alias("n")),
            on=["cluster", "job_id"])
        mean_gib_per_node = (pl.col("mem_seconds_used") * 1e9 / GIB / pl.col("in_window_s")
                             / pl.max_horizontal(pl.col("n").fill_null(1), pl.lit(1)))
        below = mem.filter(pl.col("in_window_s") > 0).filter(pl.col("suggested_request") < mean_gib_per_node - 1e-6)
        assert below.is_empty(), below.select("job_id", "requested", "peak", "suggested_request").head()
        assert (mem["suggested_request"] <= mem["requested"] + 1e-9).all()
    return both.filter(pl.col("nodes") > 1).height


def test_memory_invariants_on_the_sample(store):
    if not (SAMPLE / "_manifest.json").exists():
        pytest.skip(f"sample store not built: {SAMPLE} (run `quotaloop sample --store sample_data/store`)")
    jobs = Store(SAMPLE).read("jobs")
    # peak >= mean on every job; the suggestion on the users who own the most multi-node jobs (one query per
    # user costs ~1 s; the suggestion follows from the peak, which every job checks)
    owners = (jobs.filter(pl.col("nodes") > 1).group_by("user").len()
              .sort(["len", "user"], descending=[True, False])["user"].head(4).to_list())
    assert assert_memory_invariants(SAMPLE, owners) > 100


@pytest.mark.shared_data
def test_memory_invariants_on_the_real_sacct_dumps(shared_data, tmp_path):
    from real_stores import AWS_FIELDS, JOBINFO_FIELDS

    d = shared_data / "sacct"
    aws = d / "aws-hpc-cost-simulator"
    ingest([aws / "sacct-output-v1.txt"], tmp_path, cluster="aws", fields=AWS_FIELDS)
    ingest([aws / "multi-node" / "sacct-output.txt"], tmp_path, cluster="aws-multi", fields=AWS_FIELDS)
    ingest([d / "slurm-jobinfo" / "sacct.txt"], tmp_path, cluster="jobinfo", fields=JOBINFO_FIELDS)
    for path in sorted((d / "sarc-json" / "clusters").glob("*.json")):
        ingest([path], tmp_path)
    jobs = Store(tmp_path).read("jobs")
    assert jobs.filter(pl.col("max_rss_bytes").is_not_null()).height > 100
    users = sorted(jobs["user"].drop_nulls().unique().to_list())
    assert_memory_invariants(tmp_path, users)
