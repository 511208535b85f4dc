"""Edge cases of the per-job definitions and the researcher lookup, on small stores built from the hand-computed
fixture of test_queries_fixture (same jobs, same arithmetic in the comments)."""
from __future__ import annotations

import polars as pl
import pytest

import queries

from test_queries_fixture import GB, H, M, T0, build, fixture_jobs, fixture_samples, rows_by, store  # noqa: F401


def test_usage_without_a_known_level_is_unknown(tmp_path):
    """A job with no memory request (SWF logs often have none) but a measured memory: usage is capped at the
    level, so without the level its used and wasted memory are unknown, never an efficiency above 1."""
    dave = dict(cluster="c", job_id="j6", user="dave", account="lab/x", state="COMPLETED", job_class="batch",
                job_name="swf", partition="cpu", submit=T0, start=T0, end=T0 + H, elapsed_s=3600.0, req_cpus=4.0,
                req_gpus=0.0, max_rss_bytes=10 * GB, max_cpu_util=0.5)
    nocpu = dict(dave, job_id="j7", req_cpus=None, req_mem_bytes=8 * GB, cpu_seconds_used=3600.0, max_rss_bytes=None)
    jobs = pl.concat([fixture_jobs(), pl.DataFrame([dave, nocpu])], how="diagonal_relaxed")
    # j6: two 30-minute samples at 2 CPUs and 10 GB
    samples = pl.concat([fixture_samples(), pl.DataFrame(
        [dict(cluster="c", job_id="j6", ts=T0 + i * 30 * M, interval_s=1800.0, cpu_used=2.0, gpu_util=None,
              mem_bytes=10 * GB) for i in range(2)])], how="diagonal_relaxed")
    build(tmp_path, jobs=jobs, samples=samples)
    got = rows_by(queries.run("job_waste", store=tmp_path, user="dave"), "job_id")
    j6, j7 = got["j6"], got["j7"]
    assert (j6["cpu_seconds_requested"], j6["cpu_seconds_used"], j6["cpu_efficiency"]) == pytest.approx((14400, 7200, 0.5))
    assert (j6["mem_seconds_requested"], j6["mem_seconds_used"], j6["mem_seconds_wasted"]) == (None, None, None)
    assert j6["mem_efficiency"] is None
    # j7: no CPU count: its 3600 CPU-seconds cannot be capped, so they are unknown; memory requested 8 GB x 1 h
    assert (j7["cpu_seconds_requested"], j7["cpu_seconds_used"]) == (None, None)
    assert (j7["mem_seconds_requested"], j7["mem_seconds_used"]) == (8 * 3600.0, None)
    dave_row = rows_by(queries.run("user_ranking", store=tmp_path), "user")["dave"]
    # only j6's CPUs are known: 7200 / 16 used of 14400 / 16 held (memory of j6 unknown, not 10 GB x 1 h used)
    assert dave_row["rec_efficiency"] == pytest.approx(0.5)
    assert dave_row["cpu_efficiency"] == pytest.approx(0.5) and dave_row["mem_efficiency"] is None
    for resource in ("cpu", "mem"):
        gap = queries.run("gap_area", store=tmp_path, resource=resource, bucket_s=1800, user="dave")
        waste = queries.run("job_waste", store=tmp_path, user="dave")
        assert gap["used_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_used"].sum() or 0.0)
        assert gap["wasted_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_wasted"].sum() or 0.0)
    back = queries.run("quota_backtest", store=tmp_path, user="dave", min_jobs=1, min_gpu_equiv_hours=0.0)
    assert back["rec_efficiency"].to_list() == pytest.approx([0.5])

def test_job_waste_has_the_required_columns(store):
    """The columns scripts depend on (issue 3): job_id, user, account, and per resource requested / used /
    wasted resource-seconds and efficiency, plus where the usage came from and the peak beside it."""
    cols = queries.run("job_waste", store=store).columns
    required = ["job_id", "user", "account", "usage_source", "mem_used_basis"]
    for r in ("cpu", "gpu", "mem"):
        required += [f"{r}_seconds_requested", f"{r}_seconds_used", f"{r}_seconds_wasted", f"{r}_efficiency",
                     f"peak_{r}_util"]
    assert [c for c in required if c not in cols] == []


def test_researcher_lookup_leaves_out_jobs_that_ended_early(tmp_path):
    """Failed, cancelled, preempted, out-of-memory and node-failed jobs shorter than min_run_s are left out
    (their cause may not be the request); longer ones, and a short job that ended otherwise, stay."""
    states = ["FAILED", "CANCELLED", "PREEMPTED", "OUT_OF_MEMORY", "NODE_FAIL", "TIMEOUT", "COMPLETED"]
    rows = []
    for i, state in enumerate(states):
        for minutes in (5, 30):
            rows.append(dict(cluster="c", job_id=f"{state.lower()}-{minutes}", user="erin", account="x",
                             state=state, job_class="training", job_name=f"run{i}", submit=T0, start=T0,
                             end=T0 + minutes * M, elapsed_s=60.0 * minutes, req_cpus=32.0, req_gpus=1.0,
                             req_mem_bytes=64 * GB, cpu_seconds_used=60.0 * minutes, mean_gpu_util=0.5,
                             max_rss_bytes=8 * GB, max_cpu_util=0.1))
    build(tmp_path, jobs=pl.DataFrame(rows), samples=pl.DataFrame(schema={"job_id": pl.String}), nodes=False)
    got = queries.run("user_low_efficiency_jobs", store=tmp_path, user="erin", per_resource=20, min_run_s=600,
                      min_footprint_gpu_equiv_hours=0.0)
    kept = set(got["job_id"])
    early = {f"{s.lower()}-5" for s in states[:5]}
    assert kept == {r["job_id"] for r in rows} - early
    # footprint of a 5-minute job: (1 GPU + 32 / 16 + 64 / 128) x 300 s = 0.29 GPU-equivalent hours
    small = queries.run("user_low_efficiency_jobs", store=tmp_path, user="erin", per_resource=20, min_run_s=0,
                        min_footprint_gpu_equiv_hours=0.3)
    assert set(small["job_id"]) == {f"{s.lower()}-30" for s in states}
