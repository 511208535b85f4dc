"""Every named query on a tiny store whose expected values are worked out by hand in the comments.

The store (cluster ``c``, t0 = Monday 2026-01-05 00:00 UTC):

=====  =====  ==============  =========  ====================  =====  =====  ======  ================
job    user   account         state      run                   cpus   gpus   mem GB  usage
=====  =====  ==============  =========  ====================  =====  =====  ======  ================
j1     alice  lab/vision/a    COMPLETED  t0 .. t0+2h           8      2      64      4 samples x 30 min
j2     alice  lab/vision/a    FAILED     t0+1h .. +60 s        4      1      8       totals only
j3     bob    lab/speech      COMPLETED  t0+30m .. t0+3h30     12(16) 4      100(128) 2 samples x 1.5 h, over cap
j4     bob    other           PENDING    never (submit t0+1h)  2      2      4       -
j5     carol  lab/vision/b    CANCELLED  t0+1h .. t0+1h30      2      0      4       none; min_runtime 0
=====  =====  ==============  =========  ====================  =====  =====  ======  ================

(j3 asked 16 CPUs / 128 GB and was allocated 12 / 100: allocation wins.)
"""
from __future__ import annotations

import datetime as dt
import math

import polars as pl
import pytest

import queries
from queries.store import Store

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 5, tzinfo=UTC)
H = dt.timedelta(hours=1)
M = dt.timedelta(minutes=1)
GB = 1e9


def fixture_jobs() -> pl.DataFrame:
    rows = [
        dict(job_id="j1", user="alice", account="lab/vision/a", state="COMPLETED", job_class="training",
             job_name="train_01", partition="gpu", submit=T0, start=T0, end=T0 + 2 * H, elapsed_s=7200.0,
             req_cpus=8.0, alloc_cpus=8.0, req_gpus=2.0, alloc_gpus=2.0, req_mem_bytes=64 * GB,
             max_cpu_util=0.5, max_gpu_util=0.9, mean_gpu_util=0.6, max_rss_bytes=40 * GB, node_list="gpu-01",
             nodes=1, min_runtime_s=3600.0),
        dict(job_id="j2", user="alice", account="lab/vision/a", state="FAILED", job_class="debug",
             job_name="dbg", partition="gpu", submit=T0 + H, start=T0 + H, end=T0 + H + dt.timedelta(seconds=60),
             elapsed_s=60.0, req_cpus=4.0, req_gpus=1.0, req_mem_bytes=8 * GB, cpu_seconds_used=24.0,
             mean_gpu_util=0.1, max_rss_bytes=1 * GB, max_cpu_util=0.2, node_list="gpu-02", nodes=1),
        dict(job_id="j3", user="bob", account="lab/speech", state="COMPLETED", job_class="training",
             job_name="train_02", partition="gpu", submit=T0, start=T0 + 30 * M, end=T0 + 3 * H + 30 * M,
             elapsed_s=10800.0, req_cpus=16.0, alloc_cpus=12.0, req_gpus=4.0, alloc_gpus=4.0,
             req_mem_bytes=128 * GB, alloc_mem_bytes=100 * GB, node_list="gpu-[01-02]", nodes=2),
        dict(job_id="j4", user="bob", account="other", state="PENDING", job_class="training", job_name="big",
             partition="gpu", submit=T0 + H, req_cpus=2.0, req_gpus=2.0, req_mem_bytes=4 * GB, elapsed_s=0.0),
        dict(job_id="j5", user="carol", account="lab/vision/b", state="CANCELLED", job_class="interactive",
             job_name="nb", partition="cpu", submit=T0, start=T0 + H, end=T0 + H + 30 * M, elapsed_s=1800.0,
             req_cpus=2.0, req_gpus=0.0, req_mem_bytes=4 * GB, node_list="cpu-01", nodes=1, min_runtime_s=0.0),
    ]
    return pl.DataFrame(rows).with_columns(pl.lit("c").alias("cluster"))


def fixture_samples() -> pl.DataFrame:
    half = 30 * M
    rows = [dict(job_id="j1", ts=T0 + i * half, interval_s=1800.0, cpu_used=c, gpu_util=g, mem_bytes=m * GB)
            for i, (c, g, m) in enumerate([(2, 0.5, 20), (4, 0.5, 40), (4, 1.0, 40), (2, 1.0, 20)])]
    rows += [dict(job_id="j3", ts=T0 + 30 * M, interval_s=5400.0, cpu_used=12.0, gpu_util=0.25, mem_bytes=50 * GB),
             dict(job_id="j3", ts=T0 + 2 * H, interval_s=5400.0, cpu_used=20.0, gpu_util=0.75, mem_bytes=120 * GB)]
    return pl.DataFrame(rows).with_columns(pl.lit("c").alias("cluster"))


def fixture_nodes() -> pl.DataFrame:
    return pl.DataFrame({"node": ["gpu-01", "gpu-02", "cpu-01"], "partition": ["gpu", "gpu", "cpu"],
                         "cpus": [64.0, 64.0, 32.0], "gpus": [8.0, 8.0, 0.0], "mem_bytes": [512 * GB] * 3,
                         "state": ["mixed", "drain", "idle"]})


def build(root, jobs=None, samples=None, nodes=True):
    with Store(root).transaction() as tx:
        tx.upsert("jobs", fixture_jobs() if jobs is None else jobs)
        tx.upsert("samples", fixture_samples() if samples is None else samples)
        if nodes:
            tx.replace_nodes("c", fixture_nodes())
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("fixture_store"))


def rows_by(df: pl.DataFrame, key: str) -> dict:
    return {r[key]: r for r in df.iter_rows(named=True)}


# ------------------------------------------------------------------ job_waste
def test_job_waste_per_job(store):
    got = rows_by(queries.run("job_waste", store=store), "job_id")
    assert set(got) == {"j1", "j2", "j3", "j5"}  # j4 never ran
    j1, j2, j3, j5 = got["j1"], got["j2"], got["j3"], got["j5"]
    # j1: samples 30 min each: cpu (2+4+4+2) x 1800 = 21600 of 8 x 7200 = 57600
    assert j1["cpu_seconds_requested"] == pytest.approx(57600)
    assert j1["cpu_seconds_used"] == pytest.approx(21600)
    assert j1["cpu_seconds_wasted"] == pytest.approx(36000)
    assert j1["cpu_efficiency"] == pytest.approx(0.375)
    # gpu: 2 GPUs x (0.5 + 0.5 + 1 + 1) x 1800 = 10800 of 14400 (mean_gpu_util 0.6 is ignored: samples win)
    assert (j1["gpu_seconds_used"], j1["gpu_efficiency"]) == pytest.approx((10800, 0.75))
    # mem: (20 + 40 + 40 + 20) GB x 1800 = 216000 GB-s of 64 x 7200 = 460800
    assert (j1["mem_seconds_used"], j1["mem_seconds_requested"]) == pytest.approx((216000, 460800))
    assert (j1["usage_source"], j1["mem_used_basis"], j1["sample_coverage"]) == ("samples", "samples", 1.0)
    assert (j1["peak_cpu_util"], j1["peak_gpu_util"]) == (0.5, 0.9)  # the job's own peaks come first
    assert j1["peak_mem_util"] == pytest.approx(40 / 64)
    # j2: totals over 60 s: 24 CPU-s of 240; gpu 0.1 x 1 x 60 = 6 of 60; memory: peak 1 GB x 60 = 60 of 480
    assert (j2["cpu_seconds_used"], j2["cpu_efficiency"]) == pytest.approx((24, 0.1))
    assert (j2["gpu_seconds_used"], j2["gpu_seconds_wasted"]) == pytest.approx((6, 54))
    assert (j2["mem_seconds_used"], j2["mem_efficiency"]) == pytest.approx((60, 0.125))
    assert (j2["usage_source"], j2["mem_used_basis"]) == ("totals", "peak")
    # j3: allocated 12 CPUs / 100 GB count as the request; the second sample's 20 CPUs and 120 GB are
    # capped at 12 and 100: cpu 12 x 5400 x 2 = 129600 = all of 12 x 10800
    assert (j3["cpu_seconds_requested"], j3["cpu_seconds_used"]) == pytest.approx((129600, 129600))
    assert j3["cpu_efficiency"] == pytest.approx(1.0)
    assert (j3["gpu_seconds_used"], j3["gpu_efficiency"]) == pytest.approx((4 * 5400, 0.5))
    assert (j3["mem_seconds_used"], j3["mem_seconds_requested"]) == pytest.approx((50 * 5400 + 100 * 5400, 1.08e6))
    assert j3["peak_cpu_util"] == pytest.approx(20 / 12)  # no job-level peak: the sampled one, uncapped
    # j5: no usage at all; no GPUs: GPU use is known to be 0, CPU and memory use unknown
    assert j5["usage_source"] is None and j5["cpu_seconds_used"] is None and j5["cpu_efficiency"] is None
    assert (j5["gpu_seconds_requested"], j5["gpu_seconds_used"], j5["gpu_efficiency"]) == (0.0, 0.0, None)
    # ordered by job; with limit_rows the most wasted GPU-seconds first: j3 (21600) > j1 (3600) > j2 (54) > j5 (0)
    assert queries.run("job_waste", store=store)["job_id"].to_list() == ["j1", "j2", "j3", "j5"]
    assert queries.run("job_waste", store=store, limit_rows=4)["job_id"].to_list() == ["j3", "j1", "j2", "j5"]


def test_job_waste_window_clips(store):
    # window [t0+1h, t0+2h15): j1 keeps its last hour (samples 3, 4), j3 1h15 of its first sample
    got = rows_by(queries.run("job_waste", store=store, start=T0 + H, end=T0 + 2 * H + 15 * M), "job_id")
    assert set(got) == {"j1", "j2", "j3", "j5"}
    assert got["j1"]["in_window_s"] == 3600
    assert got["j1"]["cpu_seconds_used"] == pytest.approx((4 + 2) * 1800)
    assert got["j1"]["gpu_seconds_used"] == pytest.approx(2 * (1.0 + 1.0) * 1800)
    # j3 in window: t0+1h .. t0+2h15 = 4500 s: first sample covers t0+1h..t0+2h (3600 s at 12 CPUs, 0.25),
    # second from t0+2h..t0+2h15 (900 s at 20 -> 12 CPUs, 0.75)
    assert got["j3"]["in_window_s"] == 4500
    assert got["j3"]["cpu_seconds_used"] == pytest.approx(12 * 4500)
    assert got["j3"]["gpu_seconds_used"] == pytest.approx(4 * (0.25 * 3600 + 0.75 * 900))
    # j2's totals spread evenly over its minute, all inside
    assert got["j2"]["cpu_seconds_used"] == pytest.approx(24)
    later = queries.run("job_waste", store=store, start=T0 + 3 * H)
    assert later["job_id"].to_list() == ["j3"]
    assert later["cpu_seconds_requested"][0] == pytest.approx(12 * 1800)


def test_job_waste_filters(store):
    assert sorted(queries.run("job_waste", store=store, account_prefix="lab/vision")["job_id"]) == ["j1", "j2", "j5"]
    assert sorted(queries.run("job_waste", store=store, account_prefix="lab/vision/")["job_id"]) == ["j1", "j2", "j5"]
    assert queries.run("job_waste", store=store, account_prefix="lab/vis").height == 0  # a subtree, not a prefix
    assert sorted(queries.run("job_waste", store=store, account_prefix="lab")["job_id"]) == ["j1", "j2", "j3", "j5"]
    assert queries.run("job_waste", store=store, state="FAILED")["job_id"].to_list() == ["j2"]
    assert sorted(queries.run("job_waste", store=store, job_class="training")["job_id"]) == ["j1", "j3"]
    assert queries.run("job_waste", store=store, user="carol")["job_id"].to_list() == ["j5"]
    assert queries.run("job_waste", store=store, partition="cpu")["job_id"].to_list() == ["j5"]
    assert queries.run("job_waste", store=store, cluster="elsewhere").height == 0
    assert queries.run("job_waste", store=store, limit_rows=2)["job_id"].to_list() == ["j3", "j1"]


# ------------------------------------------------------------------ gap_area
def test_gap_area_hourly_gpu(store):
    got = queries.run("gap_area", store=store, resource="gpu", bucket_s=3600)
    assert got["bucket_start"].to_list() == [T0 + i * H for i in range(4)]
    # requested GPUs: j1 2 (0-2h), j2 1 (1h..1h01), j3 4 (0h30..3h30)
    # hour 0: 2 x 3600 + 4 x 1800 = 14400; hour 1: 2 x 3600 + 60 + 4 x 3600 = 21660; hour 2: 4 x 3600; hour 3: 4 x 1800
    assert got["requested_seconds"].to_list() == pytest.approx([14400, 21660, 14400, 7200])
    # used: j1 2 x (0.5, 0.5 | 1, 1) x 1800; j2 6 in hour 1; j3 4 x 0.25 from 0h30 to 2h, 4 x 0.75 from 2h to 3h30
    used = [2 * 0.5 * 3600 + 1.0 * 1800, 2 * 1.0 * 3600 + 6 + 1.0 * 3600, 3.0 * 3600, 3.0 * 1800]
    assert got["used_seconds"].to_list() == pytest.approx(used)
    assert got["wasted_seconds"].to_list() == pytest.approx([r - u for r, u in zip([14400, 21660, 14400, 7200], used)])
    assert got["requested_level"].to_list() == pytest.approx([4.0, 21660 / 3600, 4.0, 2.0])


def test_gap_area_unknown_usage_is_not_waste(store):
    # j5 (2 CPUs, t0+1h .. t0+1h30) has no usage data: its CPUs are held (requested) and unknown, not wasted
    got = queries.run("gap_area", store=store, resource="cpu", bucket_s=3600)
    # requested: h0 j1 8 x 3600 + j3 12 x 1800; h1 j1 28800 + j2 4 x 60 + j3 12 x 3600 + j5 2 x 1800; h2, h3 j3
    assert got["requested_seconds"].to_list() == pytest.approx([50400, 75840, 43200, 21600])
    assert got["unknown_usage_seconds"].to_list() == pytest.approx([0, 3600, 0, 0])
    # used: j1 (2 + 4) x 1800 per hour, j2 24 CPU-s, j3 12 CPUs all the time (its 20 capped at 12)
    assert got["used_seconds"].to_list() == pytest.approx([10800 + 21600, 10800 + 24 + 43200, 43200, 21600])
    # wasted = requested - unknown - used: j1's 36000 + j2's 216 = job_waste's CPU waste (j5's is null there)
    assert got["wasted_seconds"].to_list() == pytest.approx([18000, 18216, 0, 0])
    assert got["unknown_usage_level"].to_list() == pytest.approx([0, 1.0, 0, 0])
    gpu = queries.run("gap_area", store=store, resource="gpu", bucket_s=3600)
    assert gpu["unknown_usage_seconds"].to_list() == [0.0] * 4  # j5 holds no GPUs: its GPU use is known (0)


def test_gap_area_sums_equal_job_waste(store):
    waste = queries.run("job_waste", store=store)
    for resource in ("cpu", "gpu", "mem"):
        unknown = waste.filter(pl.col(f"{resource}_seconds_used").is_null())[f"{resource}_seconds_requested"].sum()
        for bucket_s in (60.0, 1000.0, 3600.0, 86400.0 * 7):
            got = queries.run("gap_area", store=store, resource=resource, bucket_s=bucket_s)
            assert got["requested_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_requested"].sum(), rel=1e-12)
            # used: jobs without usage (j5's CPU and memory) add nothing on either side
            assert got["used_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_used"].sum(), rel=1e-12)
            # wasted: job_waste's sum skips j5's null; gap_area carries j5 as unknown usage instead
            assert got["wasted_seconds"].sum() == pytest.approx(waste[f"{resource}_seconds_wasted"].sum(), rel=1e-12)
            assert got["unknown_usage_seconds"].sum() == pytest.approx(unknown, rel=1e-12, abs=1e-9)


def test_gap_area_grouped_and_windowed(store):
    got = queries.run("gap_area", store=store, resource="cpu", bucket_s=1800, group_by="user",
                      start=T0 + H, end=T0 + 2 * H)
    assert sorted(set(got["group_key"])) == ["alice", "bob", "carol"]
    alice = got.filter(pl.col("group_key") == "alice").sort("bucket_start")
    # alice: j1 8 CPUs for both halves, j2 4 CPUs for 60 s in the first; used j1 4 then 2 CPUs, j2 24 CPU-s
    assert alice["requested_seconds"].to_list() == pytest.approx([8 * 1800 + 240, 8 * 1800])
    assert alice["used_seconds"].to_list() == pytest.approx([4 * 1800 + 24, 2 * 1800])
    carol = got.filter(pl.col("group_key") == "carol").sort("bucket_start")
    assert carol["requested_seconds"].to_list() == pytest.approx([2 * 1800, 0.0])
    assert carol["used_seconds"].to_list() == pytest.approx([0.0, 0.0])  # unknown usage adds nothing
    team = queries.run("gap_area", store=store, resource="mem", bucket_s=86400, group_by="team", team_level=2)
    assert set(team["group_key"]) == {"lab/vision", "lab/speech"}


def test_gap_area_rejects_bad_values(store):
    import duckdb

    with pytest.raises(duckdb.Error, match="resource must be"):
        queries.run("gap_area", store=store, resource="disk")
    with pytest.raises(duckdb.Error, match="group_by must be"):
        queries.run("gap_area", store=store, group_by="planet")
    with pytest.raises(duckdb.Error, match="bucket_s must be"):
        queries.run("gap_area", store=store, bucket_s=0)


# ------------------------------------------------------------------ rankings and scores
def _legacy_task(cpus, minutes, peak):
    return math.log(cpus * minutes + 50) * math.exp(2.5 - peak)


def test_user_ranking_hand_computed(store):
    got = rows_by(queries.run("user_ranking", store=store), "user")
    assert list(queries.run("user_ranking", store=store)["user"]) == ["bob", "alice", "carol"]  # by wasted GPU-h
    a = got["alice"]
    assert a["job_count"] == 2
    assert a["gpu_hours_requested"] == pytest.approx((14400 + 60) / 3600)
    assert a["gpu_hours_wasted"] == pytest.approx((3600 + 54) / 3600)
    assert a["gpu_efficiency"] == pytest.approx(10806 / 14460)
    assert a["cpu_hours_wasted"] == pytest.approx((36000 + 216) / 3600)
    assert a["mem_tb_hours_wasted"] == pytest.approx((460800 + 480 - 216000 - 60) / 3.6e6)
    # GPU-equivalent seconds (16 CPUs = 128 GB = 1 GPU): footprint 14460 + 57840/16 + 461280/128
    foot = 14460 + 57840 / 16 + 461280 / 128
    used = 10806 + 21624 / 16 + 216060 / 128
    assert a["footprint_gpu_equiv_hours"] == pytest.approx(foot / 3600)
    assert a["rec_efficiency"] == pytest.approx(used / foot)
    assert a["rec_confidence"] == pytest.approx(foot / (foot + 36000))
    span = 3.5 * 3600  # the store's extent: t0 .. t0+3h30
    assert a["rec_demand"] == pytest.approx(used / span / 8)
    x = (used / foot - 0.1) / 0.8
    factor = 0.25 * 12 ** x
    assert a["rec_efficiency_factor"] == pytest.approx(factor)
    cap = max(1.0, 2 * used / span / 8)
    assert a["rec_coefficient"] == pytest.approx(min(factor ** (foot / (foot + 36000)), cap))
    # legacy: j1 8 CPUs x 120 min at peak 0.5, j2 4 CPUs x 1 min at peak 0.2; j3's sampled peak 20/12
    tasks = [_legacy_task(8, 120, 0.5), _legacy_task(4, 1, 0.2)]
    assert a["legacy_task_score_avg"] == pytest.approx(sum(tasks) / 2)
    assert a["legacy_score"] == pytest.approx(sum(tasks) / 2 / math.log(2 / 10 + 1))
    b = got["bob"]
    assert b["legacy_score"] == pytest.approx(_legacy_task(16, 180, 20 / 12) / math.log(1.1))
    assert got["carol"]["legacy_score"] is None  # no peak CPU utilisation recorded
    assert got["carol"]["rec_efficiency"] is None and got["carol"]["rec_coefficient"] == 1.0
    # bob's score (about 193) is lower, i.e. better, than alice's (about 249): his peak above 1 shrinks the
    # exp() term although he wasted more GPU-hours. Ranks 1, 2 -> coefficients 3 and 0.25
    assert b["legacy_score"] < a["legacy_score"]
    assert (b["legacy_rank"], a["legacy_rank"]) == (1, 2)
    assert (b["legacy_coefficient"], a["legacy_coefficient"]) == pytest.approx((3.0, 0.25))


def test_team_ranking_levels(store):
    top = rows_by(queries.run("team_ranking", store=store), "team")
    assert set(top) == {"lab"}
    assert top["lab"]["job_count"] == 4 and top["lab"]["user_count"] == 3
    two = rows_by(queries.run("team_ranking", store=store, team_level=2), "team")
    assert set(two) == {"lab/vision", "lab/speech"}
    assert two["lab/speech"]["gpu_hours_wasted"] == pytest.approx(21600 / 3600)
    assert two["lab/vision"]["cpu_hours_requested"] == pytest.approx((57600 + 240 + 3600) / 3600)


# ------------------------------------------------------------------ researcher lookup
def test_user_low_efficiency_jobs(store):
    got = queries.run("user_low_efficiency_jobs", store=store, user="alice", min_footprint_gpu_equiv_hours=0.0,
                      min_run_s=600, min_similar=3)
    # j2 failed after 60 s < 600 s: left out, so only j1 remains for each resource
    assert got["job_id"].unique().to_list() == ["j1"]
    cpu = rows_by(got, "resource")["cpu"]
    assert cpu["efficiency"] == pytest.approx(0.375)
    assert cpu["wasted_hours"] == pytest.approx(36000 / 3600) and cpu["unit"] == "CPU-hours"
    # peak 0.5 x 8 = 4 CPUs; + 20 % = 4.8 -> 5
    assert (cpu["peak"], cpu["suggested_from_peak"], cpu["suggested_request"]) == (4.0, 5.0, 5.0)
    assert "request 5" in cpu["suggestion"] and "peak + 20 %" in cpu["suggestion"]
    mem = rows_by(got, "resource")["mem"]
    # memory in GiB per node, as --mem means it: 64 GB asked = 59.6 GiB; peak 40 GB = 37.25 GiB; + 20 % = 44.7 -> 45
    assert mem["requested"] == pytest.approx(64e9 / 2**30) and mem["peak"] == pytest.approx(40e9 / 2**30)
    assert mem["suggested_from_peak"] == 45.0 and "request --mem=45G" in mem["suggestion"]
    assert mem["unit"] == "GiB-hours" and mem["wasted_hours"] == pytest.approx((460800 - 216000) / 2**30 * 1e9 / 3600)
    gpu = rows_by(got, "resource")["gpu"]
    assert gpu["suggested_from_peak"] == 2.0  # 0.9 x 2 x 1.2 = 2.16 -> 3, but never above the 2 asked
    assert "keep 2" in gpu["suggestion"]
    with_failed = queries.run("user_low_efficiency_jobs", store=store, user="alice",
                              min_footprint_gpu_equiv_hours=0.0, min_run_s=0)
    # ranked by the area wasted, not by efficiency: j1 wasted 36000 CPU-s at 0.375, j2 216 CPU-s at 0.1
    assert [rows_by(with_failed.filter(pl.col("resource") == "cpu"), "rank")[k]["job_id"] for k in (1, 2)] == ["j1", "j2"]
    tiny = queries.run("user_low_efficiency_jobs", store=store, user="alice", min_run_s=0,
                       min_footprint_gpu_equiv_hours=0.05)
    assert "j2" not in tiny["job_id"].to_list()  # footprint 60 + 15 + 3.75 s = 0.02 GPU-equiv hours


def test_user_low_efficiency_jobs_history(tmp_path):
    # four similar jobs of one user (name stem "train", class training), CPU peaks 2, 3, 4, 8 of 16 asked
    rows = []
    for i, peak in enumerate([2.0, 3.0, 4.0, 8.0]):
        rows.append(dict(cluster="c", job_id=f"h{i}", user="dana", account="x", state="COMPLETED",
                         job_class="training", job_name=f"train-{i:03d}", submit=T0, start=T0 + i * H,
                         end=T0 + (i + 1) * H, elapsed_s=3600.0, req_cpus=16.0, req_gpus=0.0, req_mem_bytes=64 * GB,
                         cpu_seconds_used=peak / 2 * 3600, max_cpu_util=peak / 16, max_rss_bytes=8 * GB))
    build(tmp_path, jobs=pl.DataFrame(rows), samples=pl.DataFrame(schema={"job_id": pl.String}), nodes=False)
    got = queries.run("user_low_efficiency_jobs", store=tmp_path, user="dana", per_resource=1)
    cpu = rows_by(got, "resource")["cpu"]
    assert cpu["job_id"] == "h0"  # efficiency 1/16
    # p95 of [2, 3, 4, 8] (linear): 4 + 0.85 x 4 = 7.4 -> + 20 % = 8.88 -> 9
    assert cpu["similar_jobs"] == 4 and cpu["similar_p95_peak"] == pytest.approx(7.4)
    assert cpu["suggested_from_history"] == 9.0 and cpu["suggested_request"] == 9.0
    assert cpu["suggested_from_peak"] == 3.0  # 2 x 1.2 = 2.4 -> 3
    assert "p95 peak of 4 similar jobs" in cpu["suggestion"]


def test_user_summary(store):
    got = queries.run("user_summary", store=store, user="alice")
    assert got["job_id"].to_list() == ["j1", "j2"]
    j1, j2 = got.row(0, named=True), got.row(1, named=True)
    w1 = (14400 + 57600 / 16 + 460800 / 128) - (10800 + 21600 / 16 + 216000 / 128)
    w2 = (60 + 240 / 16 + 480 / 128) - (6 + 24 / 16 + 60 / 128)
    assert j1["wasted_gpu_equiv_hours"] == pytest.approx(w1 / 3600)
    assert j1["share_of_user_waste"] == pytest.approx(w1 / (w1 + w2))
    assert j2["cumulative_share_of_user_waste"] == pytest.approx(1.0)
    # without j1 only j2 is left: its own efficiency
    assert j1["rec_efficiency_without_job"] == pytest.approx((6 + 24 / 16 + 60 / 128) / (60 + 240 / 16 + 480 / 128))
    ranking = rows_by(queries.run("user_ranking", store=store), "user")["alice"]
    for col in ("rec_efficiency", "rec_confidence", "rec_demand", "rec_coefficient", "legacy_score"):
        assert j1[col] == pytest.approx(ranking[col]), col  # the same terms as the ranking
    assert queries.run("user_summary", store=store, user="alice", top_n=1).height == 1
    with pytest.raises(Exception, match="user parameter is required"):
        queries.run("user_summary", store=store)
