"""Fair share, the metric pyramid, queue waits and the dashboard's small helper queries on the hand-made store
of ``test_queries_fixture.py`` (its docstring tabulates the jobs); expected values worked out in the comments."""
from __future__ import annotations

import polars as pl
import pytest

import queries

from test_queries_fixture import H, M, T0, build, fixture_jobs, rows_by, store  # noqa: F401 - store is a fixture


# ------------------------------------------------------------------ fair share, pyramid, waits
def test_fairshare_equal_shares(store):
    got = rows_by(queries.run("fairshare_attainment", store=store, team_level=2), "team")
    # teams at level 2: lab/vision, lab/speech, other -> top level: lab 1/2, other 1/2; lab's two children 1/4 each
    assert {t: r["share"] for t, r in got.items()} == pytest.approx({"lab/vision": 0.25, "lab/speech": 0.25,
                                                                      "other": 0.5})
    # capacity from the nodes table: 16 GPUs; span t0 (first submit) .. t0+3h30 (last end) = 3.5 h
    v = got["lab/vision"]
    assert (v["capacity_gpus"], v["capacity_source"], v["span_hours"]) == (16.0, "nodes", 3.5)
    assert v["entitled_gpu_hours"] == pytest.approx(0.25 * 16 * 3.5)
    # received: j1 2 x 2 h + j2 1 x 60 s; nothing queued
    assert v["received_gpu_hours"] == pytest.approx(4 + 60 / 3600)
    assert v["demanded_gpu_hours"] == pytest.approx(4 + 60 / 3600)
    assert v["attainment"] == pytest.approx(1.0)
    s = got["lab/speech"]
    # j3: 4 GPUs x 3 h received + 4 x 30 min queued
    assert (s["received_gpu_hours"], s["demanded_gpu_hours"]) == pytest.approx((12.0, 14.0))
    assert s["attainment"] == pytest.approx(12 / min(14, 14.0))  # entitled 14 = demanded 14
    o = got["other"]
    # j4 pending 2 GPUs from t0+1h to the span end (t0+3h30): 5 GPU-hours demanded, nothing received
    assert (o["received_gpu_hours"], o["demanded_gpu_hours"], o["attainment"]) == pytest.approx((0.0, 5.0, 0.0))
    assert v["occupancy"] == pytest.approx((4 + 60 / 3600 + 12) / (16 * 3.5))


@pytest.mark.parametrize("elapsed_s, last_end_h", [(3600.0 * 5, 4 + 5), (None, 4), (60.0, 4 + 1 / 60)])
def test_fairshare_span_ends_at_a_job_without_an_end(tmp_path, elapsed_s, last_end_h):
    """The span's last end, when it comes from a job without an end (open_runs' own scan): its start +
    elapsed_s, or its start without an elapsed time (hand-computed; the fixture's other jobs end by t0+3h30)."""
    running = dict(job_id="j6", user="dave", account="other", state="RUNNING", job_class="training",
                   job_name="long", partition="gpu", submit=T0 + 3 * H, start=T0 + 4 * H, end=None,
                   elapsed_s=elapsed_s, req_cpus=2.0, req_gpus=1.0, req_mem_bytes=4e9)
    build(tmp_path, jobs=pl.concat([fixture_jobs(), pl.DataFrame([running]).with_columns(pl.lit("c").alias("cluster"))],
                                   how="diagonal_relaxed"))
    got = queries.run("fairshare_attainment", store=tmp_path, team_level=2)
    assert got["span_hours"].unique().to_list() == pytest.approx([last_end_h])


def test_fairshare_with_budget_shares(store):
    shares = pl.DataFrame({"account": ["LAB/vision", "lab/speech/nobody"], "share": [3.0, 1.0]})
    con = queries.connect(store, extra={"budget_shares": shares})
    got = rows_by(queries.run("fairshare_attainment", con=con, capacity_gpus=8.0), "team")
    con.close()
    # lab/vision matches case-insensitively; lab/speech is not under lab/speech/nobody -> unbudgeted with "other"
    assert got["LAB/vision"]["share"] == pytest.approx(0.75) and got["LAB/vision"]["share_source"] == "budget_shares"
    assert got["LAB/vision"]["entitled_gpu_hours"] == pytest.approx(0.75 * 8 * 3.5)
    assert got["LAB/vision"]["received_gpu_hours"] == pytest.approx(4 + 60 / 3600)
    assert got["lab/speech/nobody"]["received_gpu_hours"] == 0.0
    assert got["unbudgeted"]["share"] == 0.0
    assert got["unbudgeted"]["received_gpu_hours"] == pytest.approx(12.0)
    assert got["unbudgeted"]["demanded_gpu_hours"] == pytest.approx(14.0 + 5.0)
    assert got["unbudgeted"]["attainment"] is None  # entitled 0
    assert got["unbudgeted"]["capacity_source"] == "parameter"


def test_metric_pyramid(store):
    got = rows_by(queries.run("metric_pyramid", store=store, team_level=2), "team")
    allrow = got["(all)"]
    # nodes: 16 GPUs, gpu-02 (8) drained -> availability 8 / 16 (cpu-01 has no GPUs)
    assert allrow["availability"] == pytest.approx(0.5)
    assert allrow["capacity_gpu_hours"] == pytest.approx(16 * 3.5)
    assert allrow["available_gpu_hours"] == pytest.approx(8 * 3.5)
    allocated = 4 + 60 / 3600 + 12
    assert allrow["allocated_gpu_hours"] == pytest.approx(allocated)
    assert allrow["occupancy"] == pytest.approx(allocated / (8 * 3.5))
    assert allrow["impact"] == pytest.approx(1.0)  # every GPU job is funded (equal shares, min runtime not 0)
    used = (10800 + 6 + 21600) / 3600
    assert allrow["utilisation"] == pytest.approx(used / allocated)
    assert got["lab/speech"]["utilisation"] == pytest.approx(0.5)
    assert "other" not in got  # j4 never ran


def test_queue_waits(store):
    got = queries.run("queue_waits", store=store, team_level=2)
    key = {(r["job_class"], r["team"]): r for r in got.iter_rows(named=True)}
    # started jobs: j1 wait 0, j2 0, j3 1800, j5 3600; j4 never started
    assert key[("training", "lab/speech")]["wait_median_s"] == 1800
    tr = key[("training", "(all)")]
    assert (tr["jobs_started"], tr["jobs_never_started"]) == (2, 1)
    assert tr["wait_median_s"] == pytest.approx(900) and tr["wait_p90_s"] == pytest.approx(1620)
    everything = key[("(all)", "(all)")]
    assert everything["jobs_started"] == 4 and everything["jobs_never_started"] == 1
    # waits 0, 0, 1800, 3600: median 900, p90 = 1800 + 0.7 x 1800 = 3060, p99 = 1800 + 0.97 x 1800
    assert everything["wait_median_s"] == pytest.approx(900)
    assert everything["wait_p90_s"] == pytest.approx(3060)
    assert everything["wait_p99_s"] == pytest.approx(1800 + 0.97 * 1800)
    assert everything["share_started_immediately"] == pytest.approx(0.5)
    windowed = rows_by(queries.run("queue_waits", store=store, start=T0 + 20 * M).filter(
        pl.col("team") == "(all)"), "job_class")
    assert windowed["(all)"]["jobs_started"] == 3  # by start time: j1 started before the window


# ------------------------------------------------------------------ small helpers for the dashboard
def test_overview(store):
    got = queries.run("overview", store=store).row(0, named=True)
    assert (got["jobs"], got["users"], got["teams"]) == (4, 3, 1)
    assert got["gpu_hours_requested"] == pytest.approx((14400 + 60 + 43200) / 3600)
    assert got["cpu_efficiency"] == pytest.approx((21600 + 24 + 129600) / (57600 + 240 + 129600))
    assert (got["jobs_with_samples"], got["jobs_with_totals"], got["jobs_without_usage"]) == (2, 1, 1)
    assert got["wait_median_s"] == pytest.approx(900)


def test_window_bounds_and_filter_options(store):
    wb = rows_by(queries.run("window_bounds", store=store), "cluster")
    assert wb["(all)"]["jobs"] == 5 and wb["(all)"]["samples"] == 6
    assert wb["c"]["first_submit"] == T0 and wb["c"]["last_end"] == T0 + 3 * H + 30 * M
    opts = queries.run("filter_options", store=store, team_level=2)
    accounts = opts.filter(pl.col("field") == "account")
    assert dict(zip(accounts["value"], accounts["jobs"])) == {
        "lab": 4, "lab/speech": 1, "lab/vision": 3, "lab/vision/a": 2, "lab/vision/b": 1, "other": 1}
    assert set(opts.filter(pl.col("field") == "state")["value"]) == {"COMPLETED", "FAILED", "PENDING", "CANCELLED"}
    assert set(opts.filter(pl.col("field") == "team")["value"]) == {"lab/vision", "lab/speech", "other"}



def test_store_values_are_the_distinct_values_of_every_job(store):
    """The sidebar's values: every distinct non-null value of each filter column, whatever the window, equal to the
    distinct values of the jobs read back with Polars (and to filter_options' own, which counts them)."""
    from queries.store import Store

    jobs = pl.concat([pl.read_parquet(f) for f in Store(store).files("jobs")], how="diagonal_relaxed")
    got = queries.run("store_values", store=store)
    assert got.columns == ["field", "value"] and got.height > 0
    fields = ("cluster", "partition", "account", "state", "job_class", "user")
    assert set(got["field"]) <= set(fields)
    for f in fields:
        want = sorted(jobs[f].drop_nulls().unique().to_list()) if f in jobs.columns else []
        assert got.filter(pl.col("field") == f)["value"].to_list() == want, f
    opts = queries.run("filter_options", store=store)
    for f in ("cluster", "partition", "state", "user"):
        assert set(got.filter(pl.col("field") == f)["value"]) == set(opts.filter(pl.col("field") == f)["value"]), f

def test_job_timeline(store):
    got = queries.run("job_timeline", store=store)
    assert got["job_id"].to_list() == ["j1", "j3", "j2", "j5"]  # by start
    j3 = rows_by(got, "job_id")["j3"]
    assert (j3["wait_s"], j3["run_s"], j3["gpus"]) == (1800.0, 10800.0, 4.0)
    assert queries.run("job_timeline", store=store, limit_rows=1)["job_id"].to_list() == ["j3"]  # biggest GPU area


def test_node_occupancy_at(store):
    got = queries.run("node_occupancy_at", store=store, at=T0 + H + 10 * M)
    # running at t0+1h10: j1 (gpu-01), j3 (gpu-01, gpu-02: 2 GPUs each), j5 (cpu-01); j2 ended at t0+1h01
    pairs = {(r["node"], r["job_id"]): r for r in got.iter_rows(named=True)}
    assert set(pairs) == {("gpu-01", "j1"), ("gpu-01", "j3"), ("gpu-02", "j3"), ("cpu-01", "j5")}
    assert pairs[("gpu-01", "j3")]["gpus_on_node"] == 2.0 and pairs[("gpu-01", "j3")]["cpus_on_node"] == 6.0
    assert pairs[("gpu-01", "j1")]["node_allocated_gpus"] == 4.0
    assert pairs[("gpu-02", "j3")]["node_state"] == "drain" and pairs[("gpu-02", "j3")]["node_gpus"] == 8.0
    idle = queries.run("node_occupancy_at", store=store, at=T0 + 3 * H)
    assert {(r["node"], r["job_id"]) for r in idle.iter_rows(named=True)} == {
        ("gpu-01", "j3"), ("gpu-02", "j3"), ("cpu-01", None)}
