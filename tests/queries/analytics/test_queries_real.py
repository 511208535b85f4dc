"""The queries on real exports from ../shared/data, ingested through the real path: sane numbers, the
documented identities, and where the source allows it a figure computed independently from the raw file.

* Parallel Workloads Archive HPC2N (SWF, 202 k jobs): used / allocated core-seconds over the whole log is
  about 0.96 (DOMAIN.md section 8) from the raw SWF fields, 0.943 once each job's usage is capped at its
  allocation as the queries define it; the queries give exactly the capped figure.
* Slurm: the AWS sacct dumps, the slurm-jobinfo dump and the SARC ``sacct --json`` cluster dumps (Mila,
  DRAC clusters): every required query runs; efficiencies stay in 0..1; rankings, gap areas and job_waste
  agree; per-job amounts equal the Polars re-implementation of test_queries_random.

Skipped with a reason when ../shared/data is absent.
"""
from __future__ import annotations

import gzip
import math

import polars as pl
import pytest

import queries
from queries.ingest import ingest

from real_stores import AWS_FIELDS, JOBINFO_FIELDS
from test_queries_random import assert_job_waste_equals_reference, reference_job_waste

pytestmark = pytest.mark.shared_data


def _swf_core_seconds(path) -> tuple[float, float, float]:
    """(used capped, used, allocated) core-seconds over the log straight from the SWF fields: avg CPU time per
    processor x allocated processors (capped: at most the run time, as the queries cap usage at the
    allocation), over run x allocated processors, for the records that have all three."""
    capped = used = alloc_s = 0.0
    with gzip.open(path, "rt") as fh:
        for line in fh:
            f = line.split()
            if not f or line.startswith(";"):
                continue
            run, procs, cpu = float(f[3]), float(f[4]), float(f[5])
            if run > 0 and procs > 0 and cpu >= 0:
                capped += min(cpu, run) * procs
                used += cpu * procs
                alloc_s += run * procs
    return capped, used, alloc_s


@pytest.fixture(scope="module")
def hpc2n(shared_data, tmp_path_factory):
    path = shared_data / "swf" / "HPC2N-2002-2.2-cln.swf.gz"
    store = tmp_path_factory.mktemp("hpc2n")
    (summary,) = ingest([path], store, procs_per_node=2)
    assert summary.rows_read == summary.rows_accepted + summary.rows_rejected
    return path, store


def test_hpc2n_used_over_allocated_core_seconds(hpc2n):
    path, store = hpc2n
    used, uncapped, alloc_s = _swf_core_seconds(path)
    overview = queries.run("overview", store=store).row(0, named=True)
    # the archive's figure for HPC2N (DOMAIN.md section 8: 0.96) is the raw ratio; 25,811 records report more
    # CPU time than run time, which the queries cap at the allocation: 0.943
    assert uncapped / alloc_s == pytest.approx(0.96, abs=0.01)
    assert used / alloc_s == pytest.approx(0.943, abs=0.001)
    assert overview["cpu_efficiency"] == pytest.approx(used / alloc_s, rel=1e-9)
    assert overview["cpu_hours_requested"] >= alloc_s / 3600 * (1 - 1e-9)  # + jobs without a CPU-time field
    waste = queries.run("job_waste", store=store)
    known = waste.filter(pl.col("cpu_seconds_used").is_not_null())
    assert known["cpu_seconds_used"].sum() == pytest.approx(used, rel=1e-6)
    assert known["cpu_seconds_requested"].sum() == pytest.approx(alloc_s, rel=1e-6)


def test_hpc2n_sane_and_consistent(hpc2n):
    _, store = hpc2n
    waste = queries.run("job_waste", store=store)
    assert waste.height > 190_000
    for r in ("cpu", "mem"):
        eff = waste[f"{r}_efficiency"].drop_nulls()
        assert eff.len() > 0 and eff.min() >= 0 and eff.max() <= 1 + 1e-12, r
        # used known implies requested known: HPC2N has used memory for jobs without a memory request
        assert waste.filter(pl.col(f"{r}_seconds_used").is_not_null()
                            & pl.col(f"{r}_seconds_requested").is_null()).height == 0, r
    assert set(waste["usage_source"].drop_nulls()) == {"totals"}  # SWF has no samples
    users = queries.run("user_ranking", store=store)
    assert users["job_count"].sum() == waste.height
    assert users["cpu_hours_wasted"].sum() == pytest.approx(waste["cpu_seconds_wasted"].sum() / 3600, rel=1e-9)
    assert users["rec_efficiency"].drop_nulls().max() <= 1 + 1e-12
    gap = queries.run("gap_area", store=store, resource="cpu", bucket_s=7 * 86400.0)
    assert gap["wasted_seconds"].sum() == pytest.approx(waste["cpu_seconds_wasted"].sum(), rel=1e-9)
    assert gap["used_seconds"].sum() == pytest.approx(waste["cpu_seconds_used"].sum(), rel=1e-9)
    waits = queries.run("queue_waits", store=store).filter((pl.col("job_class") == "(all)") & (pl.col("team") == "(all)"))
    w = waits.row(0, named=True)
    assert 0 <= w["wait_median_s"] <= w["wait_p90_s"] <= w["wait_p99_s"] <= w["wait_max_s"]
    back = queries.run("quota_backtest", store=store)
    assert back["coefficient"].min() >= 0.25 and back["coefficient"].max() <= 3.0


@pytest.fixture(scope="module")
def slurm(shared_data, tmp_path_factory):
    """Every Slurm export in ../shared/data/sacct, one cluster per source."""
    d = shared_data / "sacct"
    store = tmp_path_factory.mktemp("slurm")
    ingest([d / "aws-hpc-cost-simulator" / "sacct-output-v1.txt"], store, cluster="aws", fields=AWS_FIELDS)
    ingest([d / "slurm-jobinfo" / "sacct.txt"], store, cluster="jobinfo", fields=JOBINFO_FIELDS)
    clusters = sorted((d / "sarc-json" / "clusters").glob("*.json"))
    for path in clusters:
        ingest([path], store)
    return store


def test_slurm_exports_per_job_equal_the_reference(slurm):
    got = queries.run("job_waste", store=slurm)
    ref = reference_job_waste(slurm)
    assert got.height == ref.height > 100
    assert got["cluster"].n_unique() >= 4
    assert_job_waste_equals_reference(got, ref)


def test_slurm_exports_sane(slurm):
    waste = queries.run("job_waste", store=slurm)
    for r in ("cpu", "mem"):
        eff = waste[f"{r}_efficiency"].drop_nulls()
        assert eff.len() > 100 and eff.min() >= 0 and eff.max() <= 1 + 1e-12, r
    # these exports record GPUs held (SARC) but no GPU utilisation: GPU use unknown, so no GPU waste either
    gpu_jobs = waste.filter(pl.col("gpu_seconds_requested") > 0)
    assert gpu_jobs.height > 0 and gpu_jobs["gpu_seconds_used"].null_count() == gpu_jobs.height
    assert waste["gpu_seconds_wasted"].drop_nulls().sum() == 0
    overview = queries.run("overview", store=slurm).row(0, named=True)
    # a shared research cluster's CPU efficiency: far below the MPI machines' 0.65-0.96 (DOMAIN.md 8)
    assert 0.1 < overview["cpu_efficiency"] < 0.6
    assert overview["jobs"] == waste.height
    for cluster in waste["cluster"].unique():
        users = queries.run("user_ranking", store=slurm, cluster=cluster)
        mine = waste.filter(pl.col("cluster") == cluster)
        assert users["job_count"].sum() == mine.height
        for col, src in (("gpu_hours_wasted", "gpu_seconds_wasted"), ("cpu_hours_wasted", "cpu_seconds_wasted"),
                         ("mem_tb_hours_wasted", "mem_seconds_wasted")):
            want = (mine[src].sum() or 0.0) / (3.6e6 if col.startswith("mem") else 3600)
            assert (users[col].sum() or 0.0) == pytest.approx(want, rel=1e-9, abs=1e-9), (cluster, col)
        for resource in ("cpu", "gpu", "mem"):
            gap = queries.run("gap_area", store=slurm, cluster=cluster, resource=resource, bucket_s=3600.0)
            assert gap["wasted_seconds"].sum() == pytest.approx(mine[f"{resource}_seconds_wasted"].sum() or 0.0,
                                                                rel=1e-9, abs=1e-6), (cluster, resource)
        # fair share counts the cluster's own resource by default: GPU-hours, core-hours where no job held a GPU
        res = queries.run("selection_resource", store=slurm, cluster=cluster).row(0, named=True)["resource"]
        assert res == ("gpu" if mine["gpu_seconds_requested"].sum() > 0 else "cpu"), cluster
        fair = queries.run("fairshare_attainment", store=slurm, cluster=cluster)
        assert fair["received_gpu_hours"].sum() == pytest.approx(mine[f"{res}_seconds_requested"].sum() / 3600,
                                                                 rel=1e-9, abs=1e-9)
        assert (fair["attainment"].drop_nulls() >= 0).all()
        waits = queries.run("queue_waits", store=slurm, cluster=cluster)
        assert (waits["wait_median_s"].drop_nulls() >= 0).all()
        for user in users["user"].drop_nulls().head(2):
            low = queries.run("user_low_efficiency_jobs", store=slurm, cluster=cluster, user=user,
                              min_footprint_gpu_equiv_hours=0.0)
            assert (low["suggested_request"].drop_nulls() <= low["requested"].filter(
                low["suggested_request"].is_not_null()) + 1e-9).all()
    back = queries.run("quota_backtest", store=slurm, period_s=86400.0)
    assert not back.is_empty() and back["coefficient"].is_between(0.25, 3.0).all()
    assert not math.isnan(back["raw_coefficient"].drop_nulls().sum())
