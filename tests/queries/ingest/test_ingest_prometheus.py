"""``quotaloop ingest --format prometheus``: query_range responses of DCGM metrics -> samples; label mapping,
gaps (no data, not zero), a restarted exporter series, unmatched series reported; the per-job GPU-seconds the
queries integrate equal an independent Polars computation straight from the JSON."""
from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

import queries
from dashboard.cli import main
from queries.ingest import IngestError, detect_format, ingest, prometheus
from queries.store import Store

T0 = int(dt.datetime(2026, 11, 1, 10, 0, tzinfo=dt.timezone.utc).timestamp())
STEP = 30
MiB = 2**20

JOBS_DUMP = """JobID|JobName|User|Account|Partition|State|Submit|Start|End|Elapsed|NNodes|NodeList|AllocCPUS|ReqMem|AllocTRES
301|train-a|alice|org/a|gpu|COMPLETED|2026-11-01T09:50:00|2026-11-01T10:00:00|2026-11-01T10:10:00|00:10:00|1|g01|8|64G|cpu=8,mem=64G,node=1,gres/gpu=2
302|train-b|bob|org/b|gpu|COMPLETED|2026-11-01T09:50:00|2026-11-01T10:00:00|2026-11-01T10:10:00|00:10:00|1|g02|8|64G|cpu=8,mem=64G,node=1,gres/gpu=2
"""


def series(name, job, host, gpu, points, **labels):
    metric = {"__name__": name, "Hostname": host, "gpu": str(gpu), "UUID": f"GPU-{host}-{gpu}", **labels}
    if job is not None:
        metric["jobid"] = job
    return {"metric": metric, "values": [[t, v] for t, v in points]}


def grid(t_from, t_to, value):
    """Points every STEP seconds in [t_from, t_to] (offsets from T0); value: a function of the offset."""
    return [(T0 + s, str(value(s))) for s in range(t_from, t_to + 1, STEP)]


def response(result):
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def two_jobs() -> dict:
    """Job 301 on g01 (GPUs 0, 1; GPU 1 silent 10:03-10:05; a minute before the job starts in the query), job 302
    on g02 (both GPUs silent 10:06-10:08: no data at all; GPU 0's exporter restarted at 10:04 with an overlap),
    frame-buffer memory for 301, one GPU no job holds, one NaN point."""
    out = [
        series("DCGM_FI_DEV_GPU_UTIL", "301", "g01", 0, grid(-60, 570, lambda s: 80 + s % 7)),
        series("DCGM_FI_DEV_GPU_UTIL", "301", "g01", 1,
               [p for p in grid(-60, 570, lambda s: 40) if not T0 + 180 <= p[0] < T0 + 300]),
        series("DCGM_FI_DEV_FB_USED", "301", "g01", 0, grid(0, 570, lambda s: 1000 + s)),
        series("DCGM_FI_DEV_FB_USED", "301", "g01", 1, grid(0, 570, lambda s: 500)),
        # 302 GPU 0: the old exporter's series until 10:04:00, the new one from 10:03:30 (two shared instants)
        series("DCGM_FI_DEV_GPU_UTIL", "302", "g02", 0,
               [p for p in grid(0, 240, lambda s: 10) if not T0 + 360 <= p[0] < T0 + 480], instance="exp-a:9400"),
        series("DCGM_FI_DEV_GPU_UTIL", "302", "g02", 0,
               [p for p in grid(210, 570, lambda s: 60) if not T0 + 360 <= p[0] < T0 + 480], instance="exp-b:9400"),
        series("DCGM_FI_DEV_GPU_UTIL", "302", "g02", 1,
               [p for p in grid(0, 570, lambda s: 100) if not T0 + 360 <= p[0] < T0 + 480]),
        series("DCGM_FI_DEV_GPU_UTIL", None, "g03", 0, grid(0, 570, lambda s: 0)),  # no job: unmatched
    ]
    out[0]["values"][5][1] = "NaN"  # an exporter hiccup: a field reject, not a zero
    return response(out)


def independent_gpu_seconds(doc, runs: dict[str, tuple[int, int]], gpus: dict[str, float]) -> dict[str, float]:
    """Per job: integral over its run of (mean utilisation of the GPUs reporting at t) x GPUs, each point
    holding for [t, t + STEP); the newer series wins an instant two series of one GPU share."""
    rows = []
    for k, s in enumerate(doc["data"]["result"]):
        m = s["metric"]
        if m.get("__name__") != "DCGM_FI_DEV_GPU_UTIL" or "jobid" not in m:
            continue
        first = min(t for t, _ in s["values"])
        rows += [{"k": k, "first": first, "job": m["jobid"], "gpu": (m["Hostname"], m["gpu"]), "t": t, "v": v}
                 for t, v in s["values"]]
    df = pl.DataFrame(rows).with_columns(pl.col("v").cast(pl.Float64)).filter(pl.col("v").is_not_nan())
    df = df.with_columns(pl.col("gpu").list.join(":"))
    newest = df.group_by("job", "gpu", "t").agg(pl.col("v").sort_by("first").last())
    per_t = newest.group_by("job", "t").agg((pl.col("v") / 100).mean().alias("u"))
    bounds = pl.DataFrame({"job": list(runs), "lo": [r[0] for r in runs.values()],
                           "hi": [r[1] for r in runs.values()], "g": [gpus[j] for j in runs]})
    per_t = per_t.join(bounds, on="job").with_columns(
        (pl.min_horizontal(pl.col("t") + STEP, "hi") - pl.max_horizontal("t", "lo")).clip(0).alias("overlap"))
    out = per_t.group_by("job").agg((pl.col("u").clip(0, 1) * pl.col("g") * pl.col("overlap")).sum().alias("s"))
    return dict(zip(out["job"], out["s"]))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "jobs.txt").write_text(JOBS_DUMP)
    (tmp_path / "util.json").write_text(json.dumps(two_jobs()))
    return tmp_path


def test_parse_counts_unmatched_and_bad_points(files):
    p = prometheus.parse(files / "util.json")
    assert (p.rows_read, p.rows_accepted, p.rejects.height) == (8, 7, 1)
    assert "matches no job" in p.rejects["reason"][0] and p.rejects["line"][0] == 8
    assert p.notes == ["1 series matched no job (rejected)"]
    assert p.field_rejects.height == 1 and "NaN" in p.field_rejects["reason"][0]
    s = p.samples
    assert set(s["source"]) == {"prometheus"} and set(s["interval_s"]) == {30.0}
    assert s.select(pl.struct("job_id", "ts").is_unique().all()).item()
    at = lambda job, off: s.filter((pl.col("job_id") == job) & (pl.col("ts") == dt.datetime.fromtimestamp(  # noqa
        T0 + off, dt.timezone.utc)))
    # GPU 1 silent at 10:03: the mean of the GPUs that reported (GPU 0 alone), not of GPU 0 and a zero
    assert at("301", 180)["gpu_util"].item() == pytest.approx((80 + 180 % 7) / 100)
    assert at("301", 120)["gpu_util"].item() == pytest.approx((80 + 120 % 7 + 40) / 200)
    # memory: the job's GPUs added, MiB -> bytes
    assert at("301", 60)["gpu_mem_bytes"].item() == (1000 + 60 + 500) * MiB
    # 302 at 10:06-10:08: no point from any GPU -> no sample at all (no data, not a zero)
    assert at("302", 390).height == 0 and at("302", 360).height == 0
    # the restart overlap at 10:04: the newer series (60 %) wins over the old one (10 %)
    assert at("302", 240)["gpu_util"].item() == pytest.approx((60 + 100) / 200)
    assert at("302", 180)["gpu_util"].item() == pytest.approx((10 + 100) / 200)


def test_job_integrals_equal_an_independent_computation(files):
    store = files / "store"
    summaries = ingest([files / "jobs.txt", files / "util.json"], store)
    assert [s.format for s in summaries] == ["sacct", "prometheus"]  # detected
    assert "1 series matched no job" in summaries[1].line()
    w = queries.run("job_waste", store).sort("job_id")
    runs = {"301": (T0, T0 + 600), "302": (T0, T0 + 600)}
    expect = independent_gpu_seconds(two_jobs(), runs, {"301": 2.0, "302": 2.0})
    got = dict(zip(w["job_id"], w["gpu_seconds_used"]))
    assert got == pytest.approx(expect, rel=1e-12)
    assert set(w["usage_source"]) == {"samples"}
    by = {r["job_id"]: r for r in w.to_dicts()}
    # 302 has no data for 4 of the 20 steps: coverage 16/20, and used GPU-seconds count only what was seen
    assert by["302"]["sample_coverage"] == pytest.approx(16 / 20)
    assert by["301"]["sample_coverage"] == pytest.approx(1.0)  # the minute before the start is clipped off
    samples = Store(store).read("samples")
    assert set(samples["source"]) == {"prometheus"}


def test_cron_windows_add_up_and_reingest_is_idempotent(files, tmp_path):
    doc = two_jobs()
    early = {"status": "success", "data": {"resultType": "matrix", "result": [
        {**s, "values": [v for v in s["values"] if v[0] < T0 + 300]} for s in doc["data"]["result"]]}}
    late = {"status": "success", "data": {"resultType": "matrix", "result": [
        {**s, "values": [v for v in s["values"] if v[0] >= T0 + 270]} for s in doc["data"]["result"]]}}
    (tmp_path / "early.json").write_text(json.dumps(early))
    (tmp_path / "late.json").write_text(json.dumps(late))
    store = tmp_path / "s"
    ingest([files / "jobs.txt"], store)
    ingest([tmp_path / "early.json"], store, step=STEP)
    ingest([tmp_path / "late.json"], store, step=STEP)  # overlaps the early window by one point
    ingest([tmp_path / "late.json"], store, step=STEP)  # the same hour again: replaced, not doubled
    whole = prometheus.parse(files / "util.json").samples.drop("cluster")
    got = Store(store).read("samples").drop("cluster")
    assert got.sort("job_id", "ts").equals(whole.sort("job_id", "ts"))


def test_kubernetes_label_mapping_and_options(tmp_path):
    doc = response([
        {"metric": {"__name__": "DCGM_FI_PROF_SM_ACTIVE", "namespace": "ml", "pod": "trainer-0", "gpu": "0",
                    "Hostname": "n1"}, "values": [[T0, "0.5"], [T0 + 60, "0.7"]]},
        {"metric": {"namespace": "ml", "pod": "trainer-0", "gpu": "1", "Hostname": "n1"},  # name dropped by PromQL
         "values": [[T0, "0.1"]]},
        {"metric": {"__name__": "node_load1", "namespace": "ml", "pod": "x"}, "values": [[T0, "1"]]},
    ])
    f = tmp_path / "k8s.json"
    f.write_text(json.dumps(doc))
    p = prometheus.parse(f, job_label="namespace,pod", metric="DCGM_FI_PROF_SM_ACTIVE")
    assert set(p.samples["job_id"]) == {"ml/trainer-0"}
    assert p.samples["interval_s"].unique().to_list() == [60.0]  # inferred: the smallest gap in one series
    assert p.samples["gpu_util"].to_list() == pytest.approx([0.3, 0.7])
    assert p.rejects["reason"].to_list() == ["metric 'node_load1' is not one quotaloop reads"]
    assert prometheus.parse(f, job_label="namespace,pod", step=15).samples["interval_s"].unique().to_list() == [15.0]


def test_util_metric_preference(tmp_path):
    """SM_ACTIVE reads lower for the same work: it is used only for a job without GPU_UTIL."""
    doc = response([
        series("DCGM_FI_DEV_GPU_UTIL", "1", "n", 0, [(T0, "90"), (T0 + 30, "90")]),
        series("DCGM_FI_PROF_SM_ACTIVE", "1", "n", 0, [(T0, "0.4"), (T0 + 30, "0.4")]),
        series("DCGM_FI_PROF_SM_ACTIVE", "2", "n", 1, [(T0, "0.4"), (T0 + 30, "0.4")]),
    ])
    f = tmp_path / "m.json"
    f.write_text(json.dumps(doc))
    s = prometheus.parse(f).samples
    assert dict(zip(s["job_id"], s["gpu_util"])) == pytest.approx({"1": 0.9, "2": 0.4})


@pytest.mark.parametrize("doc, words", [
    ({"status": "error", "errorType": "bad_data", "error": "parse error", "data": {}}, "Prometheus reported an error"),
    (response([]) | {"data": {"resultType": "vector", "result": []}}, "query_range"),
    ({"status": "success"}, "no \"data\" object"),
    (response([series("DCGM_FI_DEV_GPU_UTIL", "1", "n", 0, [(T0, "5")])]), "--step"),
])
def test_unusable_files_fail_with_one_line(tmp_path, doc, words):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(IngestError, match=words.replace("-", r"\-")) as err:
        prometheus.parse(f)
    assert "\n" not in str(err.value)


def test_hostile_points_are_field_rejects(tmp_path):
    pts = [[T0, "50"], [T0 + 30, "+Inf"], [T0 + 60, "-3"], [T0 + 90, "250"], ["x", "1"], [T0 + 120], [T0 + 150, 7],
           [T0 + 180, "60"]]
    f = tmp_path / "h.json"
    f.write_text(json.dumps(response([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "jobid": "9", "gpu": "0"},
                                       "values": pts}, "not a series"])))
    p = prometheus.parse(f, step=30)
    assert (p.rows_read, p.rows_accepted, p.rejects.height) == (2, 1, 1)
    assert p.field_rejects.height == 6 and p.samples.height == 2


def test_cli(files, capsys):
    store = files / "cli-store"
    assert main(["ingest", str(files / "jobs.txt"), "--store", str(store)]) == 0
    assert main(["ingest", str(files / "util.json"), "--format", "prometheus", "--job-label", "jobid",
                 "--step", "30", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "prometheus: read 8 = accepted 7 + rejected 1" in out and "1 series matched no job" in out
    assert detect_format(files / "util.json") == "prometheus"


def test_jobstats_exporter_job_from_the_jobid_metric(tmp_path):
    """jobstats' exporter: nvidia_gpu_jobId's value names the job holding a GPU; GPU 0 of node d1 is handed
    from job 7 to nobody (0) to job 8; the duty cycle follows its owner at every instant."""
    lab = {"instance": "d1:9445", "minor_number": "0", "cluster": "della"}
    doc = response([
        {"metric": {"__name__": "nvidia_gpu_jobId", **lab},
         "values": [[T0, "7"], [T0 + 30, "7"], [T0 + 60, "0"], [T0 + 90, "8"], [T0 + 120, "8"]]},
        {"metric": {"__name__": "nvidia_gpu_duty_cycle", **lab},
         "values": [[T0, "50"], [T0 + 30, "70"], [T0 + 60, "0"], [T0 + 90, "100"], [T0 + 120, "90"]]},
        {"metric": {"__name__": "nvidia_gpu_memory_used_bytes", **lab}, "values": [[T0, "1024"], [T0 + 90, "2048"]]},
        {"metric": {"__name__": "nvidia_gpu_duty_cycle", "instance": "d2:9445", "minor_number": "3",
                    "cluster": "della"}, "values": [[T0, "10"]]},  # no owner ever: unmatched
    ])
    f = tmp_path / "js.json"
    f.write_text(json.dumps(doc))
    p = prometheus.parse(f)
    assert (p.rows_read, p.rows_accepted, p.rejects.height) == (4, 3, 1)
    assert p.notes == ["1 series matched no job (rejected)", "1 points of GPUs no job held at the time (not stored)"]
    s = p.samples.sort("job_id", "ts")
    assert s["job_id"].to_list() == ["7", "7", "8", "8"] and set(s["cluster"]) == {"della"}
    assert s["gpu_util"].to_list() == pytest.approx([0.5, 0.7, 1.0, 0.9])
    assert s["gpu_mem_bytes"].to_list() == [1024.0, None, 2048.0, None]


def test_summary_names_jobs_missing_from_the_store(files):
    store = files / "only-samples"
    [s] = ingest([files / "util.json"], store, cluster="c1")
    assert "2 of 2 jobs are not in the store" in s.line()
    ingest([files / "jobs.txt"], store, cluster="c1")
    [s] = ingest([files / "util.json"], store, cluster="c1")
    assert "not in the store" not in s.line()


def test_arbitrary_json_never_raises_anything_but_ingest_error(tmp_path):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                       st.text(max_size=8), st.sampled_from(["NaN", "+Inf", "1e999", "7", "DCGM_FI_DEV_GPU_UTIL"]))
    anything = st.recursive(scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["__name__", "jobid", "gpu", "Hostname", "cluster", "minor_number", "x"]), c, max_size=4),
        max_leaves=12)
    label = st.one_of(st.sampled_from(["DCGM_FI_DEV_GPU_UTIL", "nvidia_gpu_jobId", "DCGM_FI_DEV_FB_USED"]),
                      anything)
    point = st.one_of(st.tuples(st.integers(T0, T0 + 300), st.sampled_from(["1", "50", "NaN", "-1", "x"])).map(list),
                      anything)
    series_st = st.one_of(st.fixed_dictionaries({
        "metric": st.one_of(st.fixed_dictionaries({"__name__": label, "jobid": anything, "gpu": anything}), anything),
        "values": st.one_of(st.lists(point, max_size=5), anything)}), anything)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(series_st, max_size=5))
    def check(result):
        f = tmp_path / "fuzz.json"
        f.write_text(json.dumps(response(result)))
        try:
            p = prometheus.parse(f)
        except IngestError as exc:
            assert "\n" not in str(exc)
            return
        assert p.rows_read == p.rows_accepted + p.rejects.height
        assert p.samples.select(pl.struct("cluster", "job_id", "ts").is_unique().all()).item()

    check()


def test_integers_beyond_float_and_int_parsing_are_refused_not_tracebacks(tmp_path):
    """Found by the fuzz suite: JSON allows integers of any length. A timestamp of 401 digits (beyond float's
    range) is a field reject; one of 5,000 digits (beyond what json.loads parses) refuses the file in one line."""
    doc = response([series("DCGM_FI_DEV_GPU_UTIL", "1", "n", 0, [(T0, "5"), (T0 + STEP, "6"), (T0 + 2 * STEP, "7")])])
    doc["data"]["result"][0]["values"][1][0] = 10**400
    f = tmp_path / "big.json"
    f.write_text(json.dumps(doc))
    p = prometheus.parse(f)
    assert (p.rows_accepted, p.field_rejects.height, p.samples.height) == (1, 1, 2)
    assert "is not epoch seconds" in p.field_rejects["reason"][0]
    f.write_text(json.dumps(doc).replace("1" + "0" * 400, "1" * 5000))
    with pytest.raises(IngestError, match="not valid JSON") as err:
        prometheus.parse(f)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(f))
