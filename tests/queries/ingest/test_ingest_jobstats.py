"""jobstats summaries in sacct's AdminComment: decoded in text and ``--json`` dumps, applied per node and per GPU,
hostile ones rejected as fields (the row kept), untrusted ones flagged. The summaries are built with the schema
jobstats documents ("Generating Job Summaries": gpus, total_time, per node cpus / total_time / total_memory /
used_memory and per GPU index gpu_utilization / gpu_used_memory / gpu_total_memory)."""
from __future__ import annotations

import base64
import gzip
import json

import polars as pl
import pytest

import queries
from queries.ingest import ingest, jobstats, sacct, sacct_json
from queries.store import Store

GiB = 2**30


def summary(doc) -> str:
    """What jobstats' epilog writes: JS1: + base64(gzip(JSON))."""
    return "JS1:" + base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()


def gpu_node(cpus, cpu_s, used, total, utils, gmem=40 * GiB):
    return {"cpus": cpus, "total_time": cpu_s, "used_memory": used, "total_memory": total,
            "gpu_utilization": {str(i): u for i, u in enumerate(utils)},
            "gpu_used_memory": {str(i): gmem if u else 0 for i, u in enumerate(utils)},
            "gpu_total_memory": {str(i): 80 * GiB for i, _ in enumerate(utils)}}


def cpu_node(cpus, cpu_s, used, total):
    return {"cpus": cpus, "total_time": cpu_s, "used_memory": used, "total_memory": total}


GPU_JOB = {"gpus": 4, "total_time": 3600, "nodes": {"g01": gpu_node(16, 7200, 64 * GiB, 128 * GiB, [98.6, 50, 75.4, 80])}}
MULTI_CPU = {"gpus": 0, "total_time": 3600, "nodes": {"c01": cpu_node(32, 40000, 20 * GiB, 64 * GiB),
                                                     "c02": cpu_node(32, 38000, 30 * GiB, 64 * GiB)}}
ONE_IDLE = {"gpus": 2, "total_time": 3600, "nodes": {"g02": gpu_node(8, 3600, 10 * GiB, 64 * GiB, [90, 0])}}
UNTRUSTED = {"gpus": 0, "total_time": 3600, "nodes": {"c03": cpu_node(8, 20000, 5 * GiB, 32 * GiB)}}


def bomb() -> str:
    """64 MiB of spaces gzipped: about 64 KiB of base64 that would inflate a thousandfold."""
    return "JS1:" + base64.b64encode(gzip.compress(b" " * (64 << 20))).decode()


HOSTILE = {  # job id -> (AdminComment, words the reason must contain)
    "201": ("JS1:!!!not-base64!!!", "not base64"),
    "202": (None, "zip bomb"),  # filled in lazily (64 MiB of spaces, gzipped)
    "203": ("JS1:" + base64.b64encode(gzip.compress(b'{"nodes": {')).decode(), "not JSON"),
    "204": (summary({"nodes": {"g": {"cpus": 1, "total_time": 1, "used_memory": 1,
                                     "gpu_utilization": {"0": "high"}}}}), "not a number"),
    "205": (summary({"nodes": {"g": {"cpus": 1, "total_time": -5, "used_memory": 1}}}), "non-negative"),
    "206": (summary({"nodes": {"g": {"cpus": 1, "total_time": 1, "used_memory": 1e300}}}), "beyond any real job"),
    "207": ("JS1:" + base64.b64encode(gzip.compress(json.dumps(GPU_JOB).encode())[:-12]).decode(), "truncated"),
    "208": (summary([1, 2, 3]), "not a JSON object"),
    "209": (summary({"nodes": {"g": {"cpus": 1, "total_time": 1, "used_memory": 1,
                                     "gpu_utilization": {"0": 250}}}}), "beyond any real job"),
}


def jobs_spec():
    """(job id, nodes, node list, cpus, gpus, ReqMem, TotalCPU seconds, MaxRSS bytes, AdminComment)."""
    rows = [
        ("101", 1, "g01", 16, 4, "128G", 7150, 60 * GiB, summary(GPU_JOB)),
        ("102", 2, "c[01-02]", 64, 0, "128G", 78000, 15 * GiB, summary(MULTI_CPU)),
        ("103", 1, "g02", 8, 2, "64G", 3600, 9 * GiB, summary(ONE_IDLE)),
        ("104", 1, "c04", 4, 0, "8G", 10, 1 * GiB, "JS1:Short"),
        ("105", 1, "c05", 4, 0, "8G", 100, 1 * GiB, "JS1:None"),
        ("106", 1, "c03", 8, 0, "32G", 3600, 4 * GiB, summary(UNTRUSTED)),
        ("107", 1, "c06", 4, 0, "8G", 1000, 2 * GiB, "ticket 42: node drained"),  # an ordinary admin comment
    ]
    for jid, (text, _) in HOSTILE.items():
        rows.append((jid, 1, "c07", 4, 0, "8G", 500, 1 * GiB, text if text is not None else bomb()))
    return rows


def hms(s: int) -> str:
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def write_text_dump(path):
    head = ("JobID|JobName|User|Account|Partition|State|Submit|Start|End|Elapsed|NNodes|NodeList|ReqCPUS|"
            "AllocCPUS|ReqMem|AllocTRES|TotalCPU|MaxRSS|AdminComment")
    lines = [head]
    for jid, nodes, nl, cpus, gpus, mem, cpu_s, rss, admin in jobs_spec():
        tres = f"cpu={cpus},mem={mem},node={nodes}" + (f",gres/gpu={gpus}" if gpus else "")
        lines.append(f"{jid}|job{jid}|alice|org/a|p|COMPLETED|2026-11-01T09:00:00|2026-11-01T10:00:00|"
                     f"2026-11-01T11:00:00|01:00:00|{nodes}|{nl}|{cpus}|{cpus}|{mem}|{tres}|{hms(cpu_s)}||"
                     f"{admin or ''}")
        lines.append(f"{jid}.batch|batch|||p|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00|"
                     f"01:00:00|1|{nl}||{cpus}|||{hms(cpu_s)}|{rss // 1024}K|")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_json_dump(path):
    recs = []
    for jid, nodes, nl, cpus, gpus, mem, cpu_s, rss, admin in jobs_spec():
        mem_mb = int(mem[:-1]) * 1024
        tres = [{"type": "cpu", "name": "", "count": cpus}, {"type": "mem", "name": "", "count": mem_mb},
                {"type": "node", "name": "", "count": nodes}] + (
            [{"type": "gres", "name": "gpu", "count": gpus}] if gpus else [])
        recs.append({
            "job_id": int(jid), "name": f"job{jid}", "user": "alice", "account": "org/a", "partition": "p",
            "cluster": "c1", "state": {"current": ["COMPLETED"]}, "nodes": nl, "allocation_nodes": nodes,
            "required": {"CPUs": cpus}, "time": {"submission": 1793523600, "start": 1793527200, "end": 1793530800,
                                                 "elapsed": 3600, "total": {"seconds": cpu_s, "microseconds": 0}},
            "tres": {"requested": tres, "allocated": tres},
            "comment": {"administrator": admin or "", "job": "", "system": ""},
            "steps": [{"step": {"id": "batch"}, "time": {"elapsed": 3600, "total": {"seconds": cpu_s}},
                       "tres": {"allocated": [{"type": "cpu", "name": "", "count": cpus}],
                                "requested": {"max": [{"type": "mem", "name": "", "count": rss}], "average": []}}}],
        })
    path.write_text(json.dumps({"meta": {}, "jobs": recs}))
    return path


@pytest.fixture(params=["text", "json"])
def parsed(request, tmp_path):
    if request.param == "text":
        return sacct.parse(write_text_dump(tmp_path / "dump.txt"))
    return sacct_json.parse(write_json_dump(tmp_path / "dump.json"))


def job(p, jid) -> dict:
    rows = p.jobs.filter(pl.col("job_id") == jid).to_dicts()
    assert len(rows) == 1, jid
    return rows[0]


def test_every_row_accepted_and_hostile_summaries_are_field_rejects(parsed):
    n = len(jobs_spec())
    assert parsed.rejects.height == 0 and parsed.rows_accepted == parsed.rows_read
    assert parsed.jobs.height == n
    fr = {r["reason"]: r for r in parsed.field_rejects.to_dicts()}
    assert parsed.field_rejects["field"].unique().len() == 1
    assert parsed.field_rejects["field"][0] in ("AdminComment", "comment.administrator")
    for jid, (_, words) in HOSTILE.items():
        j = job(parsed, jid)
        assert j["jobstats"] == "rejected", jid
        assert j["cpu_seconds_used"] == 500.0 and j["gpus_idle"] is None  # sacct's values stand
        assert any(words in reason for reason in fr), (jid, words, list(fr))
    assert job(parsed, "106")["jobstats"] == "untrusted"
    # one field reject per hostile summary, plus the untrusted one
    assert parsed.field_rejects.height == len(HOSTILE) + 1
    lines = sorted(parsed.field_rejects["line"].to_list())
    assert len(set(lines)) == len(lines)


def test_single_node_gpu_job(parsed):
    j = job(parsed, "101")
    assert j["jobstats"] == "ok"
    # 7200 s from the summary vs TotalCPU 7150 s: 50 s apart, within the 60 s tolerance -> the summary's
    assert j["cpu_seconds_used"] == 7200.0
    assert j["mean_gpu_util"] == pytest.approx((98.6 + 50 + 75.4 + 80) / 4 / 100)
    assert (j["gpus_measured"], j["gpus_idle"]) == (4.0, 0.0)
    assert j["gpu_mem_used_bytes"] == 40 * GiB
    assert j["max_rss_bytes"] == j["node_mem_peak_bytes"] == 64 * GiB


def test_multi_node_cpu_job_memory_is_per_node(parsed):
    j = job(parsed, "102")
    assert j["jobstats"] == "ok"
    assert j["cpu_seconds_used"] == 78000.0
    assert j["max_rss_bytes"] == 50 * GiB  # the two nodes' peaks added: not the 15 GiB per-task MaxRSS
    assert j["node_mem_peak_bytes"] == 30 * GiB
    assert j["gpus_measured"] == 0.0 and j["mean_gpu_util"] is None


def test_one_idle_gpu(parsed):
    j = job(parsed, "103")
    assert (j["gpus_measured"], j["gpus_idle"]) == (2.0, 1.0)
    assert j["mean_gpu_util"] == pytest.approx(0.45)  # the average alone would hide the idle GPU


def test_markers_and_other_comments(parsed):
    assert job(parsed, "104")["jobstats"] == "short" and job(parsed, "105")["jobstats"] == "none"
    assert job(parsed, "104")["cpu_seconds_used"] == 10.0
    j = job(parsed, "107")
    assert j["jobstats"] is None and j["gpus_idle"] is None
    # the untrusted summary (20000 s against TotalCPU 3600 s) is not used
    u = job(parsed, "106")
    assert u["cpu_seconds_used"] == 3600.0 and u["max_rss_bytes"] == 4 * GiB and u["node_mem_peak_bytes"] is None
    reason = parsed.field_rejects.filter(pl.col("reason").str.contains("disagrees"))["reason"].item()
    assert "20000 s" in reason and "3600 s" in reason


def test_decode_never_raises_other_than_summary_error():
    for text in ["JS1:", "JS1:=", "JS1:" + "A" * 5, "JS1:" + base64.b64encode(b"\x1f\x8b garbage").decode(),
                 "JS1:" + "A" * (jobstats.MAX_ENCODED_CHARS + 4), summary({"nodes": {}}), summary({"nodes": []}),
                 summary({"nodes": {"x": {"total_time": True, "used_memory": 1}}}),
                 summary({"nodes": {"x": {"total_time": 1, "used_memory": 1, "gpu_utilization": {"a": 1}}}}),
                 summary({"nodes": {"x": {"total_time": float("nan"), "used_memory": 1}}})]:
        with pytest.raises(jobstats.SummaryError):
            jobstats.decode(text)
    assert jobstats.decode(None) == (None, None) and jobstats.decode("JS1:Short") == ("short", None)


def test_tolerance_rule():
    assert not jobstats.disagrees(1000, 1059)  # within 60 s
    assert not jobstats.disagrees(100000, 109000)  # 9 % apart
    assert jobstats.disagrees(100000, 112000)  # 12 % and 12000 s apart
    assert jobstats.disagrees(5, 100)  # 95 s and 95 % apart
    assert not jobstats.disagrees(5, 50)  # 95 % apart but within 60 s: jitter on a short job
    assert not jobstats.disagrees(5, None)  # sacct without CPU time: nothing to check against


@pytest.mark.parametrize("kind", ["text", "json"])
def test_store_round_trip_and_job_waste(tmp_path, kind):
    src = write_text_dump(tmp_path / "d.txt") if kind == "text" else write_json_dump(tmp_path / "d.json")
    store = tmp_path / "store"
    [s] = ingest([src], store, cluster="c1")
    assert s.fields_rejected == len(HOSTILE) + 1 and s.rows_rejected == 0
    assert "fields rejected (rows kept)" in s.line()
    rej = Store(store).read("rejects")
    assert set(rej["kind"].to_list()) == {"field"} and rej.height == len(HOSTILE) + 1
    w = queries.run("job_waste", store)
    by = {r["job_id"]: r for r in w.to_dicts()}
    assert (by["103"]["gpus_idle"], by["103"]["gpus_measured"]) == (1.0, 2.0)
    assert by["101"]["gpus_idle"] == 0.0 and by["104"]["gpus_idle"] is None
    # used GPU-seconds from the per-GPU means: 2 GPUs x 3600 s x 0.45
    assert by["103"]["gpu_seconds_used"] == pytest.approx(2 * 3600 * 0.45)
    assert by["102"]["cpu_seconds_used"] == pytest.approx(78000.0)
    # multi-node jobs with a summary: peak >= mean memory (the job's peak is the sum of its nodes' peaks)
    multi = w.filter((pl.col("jobstats") == "ok") & (pl.col("mem_efficiency").is_not_null()))
    assert multi.height >= 3
    assert (multi["peak_mem_util"] >= multi["mem_efficiency"] - 1e-12).all()
    # per-node memory (Slurm's --mem is per node): the busiest node's 30 GiB peak over its share of the
    # 128 GiB request, not the nodes' summed 50 GiB over the whole request
    assert by["102"]["peak_mem_util"] == pytest.approx(30 * GiB / (128 * GiB / 2))


def test_a_real_summary():
    """A della CPU job's AdminComment as shown by `sacct -o jobid,admincomment` in the public jdh4/jobstats
    README (job 39861033): "gpus" is false for a CPU job, one node, 8 cores."""
    text = ("JS1:H4sIACj7KWIC/1XNQQrCMBCF4bvMOkonIzNpLyOhGUVIGmnSRSm5u1FEcPt/PN4BSw5aYDogaIz+tNoZF+R3qLn6eE2a8rrDxE5w"
            "vAgLsYGtaPiJFbRCxCMP5juqj6QdHJE79zg/t37hWvt34gEN3D9487FoewEKn+eojwAAAA==")
    status, doc = jobstats.decode(text)
    assert status == "ok"
    got = jobstats.values(doc)
    assert got["cpu_seconds_used"] == 28338.0 and got["max_rss_bytes"] == 27127336960.0
    assert got["gpus_measured"] == 0.0 and got["mean_gpu_util"] is None
    assert not jobstats.disagrees(got["cpu_seconds_used"], 28338.0)


def test_idle_gpus_text_for_my_jobs():
    from dashboard import shaping

    df = pl.DataFrame({"gpus_idle": [2.0, 0.0, None, 0.0], "gpus_measured": [8.0, 4.0, None, 0.0]})
    assert shaping.idle_gpus_text(df)["idle_gpus"].to_list() == ["2 of 8 never used", "none of 4", None, None]
    assert "idle_gpus" not in shaping.idle_gpus_text(pl.DataFrame({"x": [1]})).columns
    # no job with per-GPU data (the sample store, sacct without jobstats): no column of blanks
    none = pl.DataFrame({"gpus_idle": [None, 0.0], "gpus_measured": [None, 0.0]}, schema_overrides={
        "gpus_idle": pl.Float64, "gpus_measured": pl.Float64})
    assert "idle_gpus" not in shaping.idle_gpus_text(none).columns


def test_a_store_written_before_the_new_columns_still_answers(tmp_path):
    """Parquet files without gpus_idle & co (an older quotaloop wrote them): the queries see null columns."""
    src = write_text_dump(tmp_path / "d.txt")
    store = tmp_path / "old"
    ingest([src], store, cluster="c1")
    for f in Store(store).files("jobs"):  # strip the new columns, as an older version would have written
        pl.read_parquet(f).drop("gpus_idle", "gpus_measured", "node_mem_peak_bytes", "jobstats").write_parquet(f)
    w = queries.run("job_waste", store)
    assert w.height == len(jobs_spec()) and w["gpus_idle"].null_count() == w.height


def test_arbitrary_summaries_never_raise_anything_but_summary_error():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                       st.text(max_size=6))
    keys = st.sampled_from(["nodes", "gpus", "total_time", "cpus", "used_memory", "total_memory", "gpu_utilization",
                            "gpu_used_memory", "gpu_total_memory", "0", "1", "n1", "x"])
    doc = st.recursive(scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(keys, c, max_size=5),
                       max_leaves=20)

    @settings(max_examples=300, deadline=None)
    @given(doc, st.booleans())
    def check(d, as_text):
        try:
            if as_text:
                status, got = jobstats.decode(summary(d))
                assert status == "ok"
            else:
                got = jobstats.check(d)
            v = jobstats.values(got)
        except jobstats.SummaryError:
            return
        assert v["gpus_idle"] <= v["gpus_measured"] and v["cpu_seconds_used"] >= 0

    check()


@pytest.mark.parametrize("node, words", [
    ({"cpus": 1, "total_time": 10**400, "used_memory": 1}, "401 digits is beyond any real job"),
    ({"cpus": 1, "total_time": 1, "used_memory": 1, "gpu_utilization": {"\u00b2": 50}}, "GPU index '²' is not"),
])
def test_summaries_the_fuzzer_found(node, words):
    """Found by the fuzz suite (tests/queries/ingest/test_ingest_fuzz.py): an integer beyond float's range (OverflowError) and a
    GPU index that str.isdigit() accepts but int() does not (ValueError) escaped as tracebacks; now rejects."""
    with pytest.raises(jobstats.SummaryError, match=words):
        jobstats.decode(summary({"nodes": {"g": node}}))
    jobs = pl.DataFrame({"cpu_seconds_used": [1.0]})
    out, rej = jobstats.apply(jobs, pl.Series([summary({"nodes": {"g": node}})]), pl.Series([2]))
    assert out["jobstats"].to_list() == ["rejected"] and rej["line"].to_list() == [2]
    assert words.split("'")[0] in rej["reason"][0]
