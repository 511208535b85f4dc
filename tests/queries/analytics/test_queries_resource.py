"""selection_resource and the core-hour forms of metric_pyramid / fairshare_attainment (issue 12): the resource
follows the data in the selection, including the CPU partition of a mixed cluster (the sample store's `cpu`
partition: 8 nodes x 128 cores, no GPUs), checked against an independent Polars computation."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import queries
from queries.ingest import ingest
from queries.store import Store

SAMPLE = Path(__file__).resolve().parents[3] / "sample_data" / "store"
TINY = Path(__file__).resolve().parents[2] / "fixtures" / "swf" / "tiny.swf"
START, END = dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc), dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc)


def held_core_hours(store: Path, start, end, partition: str | None) -> float:
    """Allocated (else requested) cores x the run clipped to [start, end), from the Parquet, independently."""
    jobs = Store(store).read("jobs").filter(pl.col("start").is_not_null())
    if partition is not None:
        jobs = jobs.filter(pl.col("partition") == partition)
    run_end = pl.coalesce("end", pl.col("start") + pl.duration(seconds=pl.col("elapsed_s")))
    lo = pl.max_horizontal("start", pl.lit(start))
    hi = pl.min_horizontal(run_end, pl.lit(end))
    secs = ((hi - lo).dt.total_microseconds() / 1e6).clip(lower_bound=0.0)
    return jobs.select((secs * pl.coalesce("alloc_cpus", "req_cpus")).sum()).item() / 3600.0


@pytest.mark.parametrize("partition, want", [("cpu", "cpu"), ("gpu", "gpu"), ("dev", "gpu"), (None, "gpu")])
def test_the_resource_of_a_partition_of_a_mixed_cluster(partition, want):
    row = queries.run("selection_resource", store=SAMPLE, start=START, end=END, partition=partition).row(0, named=True)
    assert row["resource"] == want and row["resource_source"] == "jobs"
    assert row["cpu_hours_held"] == pytest.approx(held_core_hours(SAMPLE, START, END, partition), rel=1e-9)
    assert (row["gpu_hours_held"] > 0) == (want == "gpu")


def test_a_filter_without_gpu_jobs_never_turns_a_gpu_cluster_into_cores():
    """A user who ran nothing: the selection's jobs held no GPUs, but its node list (every partition) has them,
    so it stays in GPU-hours rather than flipping units with a filter."""
    row = queries.run("selection_resource", store=SAMPLE, user="nobody-ran-this").row(0, named=True)
    assert (row["resource"], row["resource_source"], row["gpu_hours_held"]) == ("gpu", "nodes", 0.0)


def test_the_cpu_partition_pyramid_and_attainment_are_in_core_hours():
    """metric_pyramid / fairshare_attainment with resource = 'cpu' on the cpu partition: allocated and received
    core-hours equal the independent sum, occupancy is it over 1,024 cores x 48 h."""
    want = held_core_hours(SAMPLE, START, END, "cpu")
    pyr = queries.run("metric_pyramid", store=SAMPLE, start=START, end=END, partition="cpu", resource="cpu")
    row = pyr.filter(pl.col("team") == "(all)").row(0, named=True)
    assert row["capacity_gpus"] == 1024.0 and row["capacity_source"] == "nodes"
    assert row["allocated_gpu_hours"] == pytest.approx(want, rel=1e-9)
    assert row["occupancy"] == pytest.approx(want / (1024 * 48), rel=1e-9)
    assert 0 < row["utilisation"] <= 1
    fa = queries.run("fairshare_attainment", store=SAMPLE, start=START, end=END, partition="cpu", resource="cpu")
    assert fa["received_gpu_hours"].sum() == pytest.approx(want, rel=1e-9)
    # the GPU form of the same selection: no GPU job ran there, so nothing was received
    gpu = queries.run("fairshare_attainment", store=SAMPLE, start=START, end=END, partition="cpu", resource="gpu")
    assert gpu["received_gpu_hours"].sum() == 0.0


@pytest.mark.parametrize("partition, want", [("cpu", "cpu"), (None, "gpu")])
def test_query_defaults_follow_the_selection(partition, want):
    """Without a resource (or order_by) the queries take the selection's: the cpu partition ranks, draws and
    counts fair share in core-hours, the whole GPU cluster in GPU-hours, exactly as when it is asked for."""
    p = dict(store=SAMPLE, start=START, end=END, partition=partition)
    default, asked = queries.run("user_ranking", **p), queries.run("user_ranking", order_by=want, **p)
    assert default["user"].to_list() == asked["user"].to_list()
    assert default[f"rank_{want}_wasted"].to_list() == sorted(default[f"rank_{want}_wasted"].to_list())
    gap = queries.run("gap_area", bucket_s=86400.0, **p)
    assert gap["resource"].unique().to_list() == [want]
    for name in ("fairshare_attainment", "metric_pyramid"):
        # equal up to the order DuckDB's parallel sums add floats in
        assert_frame_equal(queries.run(name, **p), queries.run(name, resource=want, **p), rel_tol=1e-9)


def test_a_cpu_only_log_and_an_empty_window(tmp_path):
    store = tmp_path / "tiny"
    ingest([TINY], store, fmt="swf", procs_per_node=2)
    row = queries.run("selection_resource", store=store).row(0, named=True)
    assert (row["resource"], row["resource_source"], row["node_cpus"]) == ("cpu", "jobs", 8.0)
    # 760.25 core-s held (tests/dashboard/test_dashboard_cpu_only.py has the arithmetic)
    assert row["cpu_hours_held"] == pytest.approx(760.25 / 3600)
    empty = queries.run("selection_resource", store=store, start=dt.datetime(2030, 1, 1),
                        end=dt.datetime(2030, 1, 2)).row(0, named=True)
    assert (empty["resource"], empty["resource_source"]) == ("cpu", "nodes")  # nothing ran: the node list decides


def test_a_resource_the_queries_do_not_know_is_an_error():
    with pytest.raises(Exception, match="resource must be gpu or cpu"):
        queries.run("metric_pyramid", store=SAMPLE, start=START, end=END, resource="mem")


def test_score_drivers_are_jobs_with_recorded_usage(tmp_path):
    """user_summary lists the jobs that moved a user's score: a job whose usage the log does not record (tiny.swf's
    jobs 2 and 3: average CPU time -1) adds nothing to it, so it is never listed, even with room in top_n."""
    store = tmp_path / "tiny"
    ingest([TINY], store, fmt="swf", procs_per_node=2)
    user1 = queries.run("user_summary", store=store, user="user1", top_n=10)
    # user1 holds jobs 1, 3 (unknown usage), 5 and 5-part1; only job 1 wastes: 4 cores x 100 s, 200 core-s used
    assert user1["job_id"].to_list() == ["1", "5", "5-part1"]
    assert user1["known_gpu_equiv_hours"].min() > 0
    assert user1["share_of_user_waste"].to_list() == pytest.approx([1.0, 0.0, 0.0])
    assert queries.run("user_summary", store=store, user="user2").is_empty()  # job 2 alone, usage unknown
