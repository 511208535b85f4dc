"""``sacct --json`` ingest: the real Slurm 21.08-23.11 outputs (schema drift) and hand-made edge cases."""
from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

from queries.ingest import IngestError, detect_format, ingest, sacct_json
from queries.store import Store

GiB, MiB = 2**30, 2**20
UTC = dt.timezone.utc


def ts(epoch: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, UTC)


def only(parsed) -> dict:
    assert parsed.jobs.height == 1
    return parsed.jobs.to_dicts()[0]


def by_id(parsed, job_id: str) -> dict:
    rows = parsed.jobs.filter(pl.col("job_id") == job_id).to_dicts()
    assert len(rows) == 1
    return rows[0]


def write(tmp_path, jobs, name="s.json", **top):
    f = tmp_path / name
    f.write_text(json.dumps({"meta": {}, "jobs": jobs, **top}))
    return f


def base_job(**over) -> dict:
    """A minimal Slurm 23.11-style record; numbers in the ``{set, infinite, number}`` wrapper."""
    n = lambda v: {"set": True, "infinite": False, "number": v}  # noqa: E731
    job = {
        "job_id": 100, "name": "train-x", "user": "u1", "account": "org/a", "partition": "gpu", "qos": "normal",
        "cluster": "c1", "state": {"current": ["COMPLETED"], "reason": "None"}, "nodes": "g01",
        "allocation_nodes": 1, "array": {"job_id": 0, "task_id": {"set": False, "infinite": False, "number": 0},
                                         "task": ""},
        "het": {"job_id": 0, "job_offset": {"set": False, "infinite": False, "number": 0}},
        "exit_code": {"status": ["SUCCESS"], "return_code": n(0), "signal": {"id": {"set": False, "number": 0}}},
        "priority": n(10), "required": {"CPUs": 4, "memory_per_node": n(8192), "memory_per_cpu": {"set": False}},
        "time": {"submission": 1700000000, "start": 1700000100, "end": 1700003700, "elapsed": 3600,
                 "limit": n(120), "total": {"seconds": 7200, "microseconds": 500000}},
        "tres": {"requested": [{"type": "cpu", "name": "", "count": 4}, {"type": "mem", "name": "", "count": 8192},
                               {"type": "node", "name": "", "count": 1},
                               {"type": "gres", "name": "gpu:a100", "count": 2}],
                 "allocated": [{"type": "cpu", "name": "", "count": 4}, {"type": "mem", "name": "", "count": 8192},
                               {"type": "node", "name": "", "count": 1},
                               {"type": "gres", "name": "gpu:a100", "count": 2}]},
        "comment": {"administrator": "", "job": "min_runtime_s=3600", "system": ""},
        "steps": [],
    }
    job.update(over)
    return job


def step(step_id, elapsed, cpu_s, cpus, mem_max=None, util_ave=None, util_max=None, gpumem=None):
    usage_max = [{"type": "mem", "name": "", "count": mem_max}] if mem_max is not None else []
    if util_max is not None:
        usage_max.append({"type": "gres", "name": "gpuutil", "count": util_max})
    if gpumem is not None:
        usage_max.append({"type": "gres", "name": "gpumem", "count": gpumem})
    usage_ave = [{"type": "gres", "name": "gpuutil", "count": util_ave}] if util_ave is not None else []
    return {"step": {"id": step_id}, "time": {"elapsed": elapsed, "total": {"seconds": cpu_s, "microseconds": 0}},
            "tres": {"allocated": [{"type": "cpu", "name": "", "count": cpus}],
                     "requested": {"max": usage_max, "average": usage_ave, "min": [], "total": []}}}


# ------------------------------------------------------------------------------------------------ real files
def test_slurm_21_08(shared_data):
    p = sacct_json.parse(shared_data / "sacct" / "sarc-json" / "versions" / "slurm_21_8_8.json")
    j = only(p)
    assert (p.rows_read, p.rows_accepted, p.rejects.height, p.cluster) == (1, 1, 0, "cedar")
    assert (j["job_id"], j["array_job_id"], j["user"], j["account"], j["partition"]) == (
        "55978384", None, "purah", "rrg-bengioy-ad_gpu", "gpubackfill")
    assert j["state"] == "PREEMPTED"  # "current": "REQUEUED" (plain string in 21.08)
    assert (j["start"], j["end"], j["elapsed_s"]) == (ts(1673275023), ts(1673369386), 86301.0)
    assert j["time_limit_s"] == 1440 * 60  # limit: plain int, minutes
    assert (j["req_cpus"], j["req_gpus"], j["gpu_type"], j["req_mem_bytes"]) == (4.0, 1.0, None, 40960 * MiB)
    assert (j["alloc_cpus"], j["alloc_gpus"], j["alloc_mem_bytes"], j["nodes"]) == (4.0, 1.0, 40960 * MiB, 1)
    # time.total is 0 with no steps for a job that ran a day: unknown, not idle
    assert j["cpu_seconds_used"] is None and j["max_cpu_util"] is None
    assert (j["priority"], j["exit_code"], j["node_list"], j["job_class"]) == (1314155.0, "0:0", "cdr896", "batch")


def test_slurm_22_05_array_task(shared_data):
    j = only(sacct_json.parse(shared_data / "sacct" / "sarc-json" / "versions" / "slurm_22_5_9.json"))
    assert (j["job_id"], j["array_job_id"], j["cluster"], j["state"]) == ("20247445_100", "20247445", "narval", "FAILED")
    assert (j["nodes"], j["node_list"], j["req_cpus"], j["req_gpus"]) == (4, "ng[30103,30203,30706-30707]", 96.0, 16.0)
    assert (j["req_mem_bytes"], j["time_limit_s"]) == (262144 * MiB, 2880 * 60)
    assert j["job_class"] == "training"  # no name rule matches; 16 GPUs >= a whole 8-GPU node
    assert j["elapsed_s"] == 124403.0 and j["end"] - j["start"] == dt.timedelta(seconds=124403)


@pytest.mark.parametrize("name", ["slurm_23_2_6.json", "slurm_23_11_5.json"])
def test_slurm_23_wrapped_numbers(shared_data, name):
    j = only(sacct_json.parse(shared_data / "sacct" / "sarc-json" / "versions" / name))
    assert (j["job_id"], j["cluster"], j["state"], j["end"]) == ("4", "mila", "RUNNING", None)
    assert j["time_limit_s"] == 7200 * 60 and j["priority"] == 499522.0  # {"set", "infinite", "number"}
    assert (j["req_cpus"], j["req_gpus"], j["req_mem_bytes"], j["exit_code"]) == (4.0, 2.0, 32768 * MiB, "0:0")
    assert j["job_class"] == "interactive"  # job name "sh"
    assert j["start"] == ts(1613725209)


def test_cluster_files(shared_data):
    d = shared_data / "sacct" / "sarc-json" / "clusters"
    counts = {}
    for f in sorted(d.glob("*.json")):
        p = sacct_json.parse(f)
        assert p.rows_read == p.rows_accepted + p.rejects.height
        counts[f.name] = (p.rows_read, p.rejects.height, p.cluster)
        assert set(p.jobs["state"]) <= set(sacct_json.schema.STATES)
        assert p.jobs["job_id"].is_unique().all()
    assert counts == {"fromage_1714003200.json": (13, 0, "fromage"), "mila_1706227200.json": (7, 0, "mila"),
                      "raisin_1716595200.json": (5, 0, "raisin"), "raisin_base_job.json": (1, 0, "raisin")}
    f6 = by_id(sacct_json.parse(d / "fromage_1714003200.json"), "6")
    assert (f6["state"], f6["gpu_type"], f6["req_gpus"], f6["req_mem_bytes"], f6["time_limit_s"]) == (
        "RUNNING", "v100", 1.0, 4096 * MiB, 240 * 60)
    # CPU time equals elapsed on 2 CPUs: 7850778 / (7850778 x 2) for the job and each step
    assert (f6["cpu_seconds_used"], f6["max_cpu_util"], f6["job_class"]) == (7850778.0, 0.5, "eval")
    m2 = by_id(sacct_json.parse(d / "mila_1706227200.json"), "2")
    assert (m2["job_name"], m2["job_class"], m2["req_gpus"], m2["gpu_type"], m2["state"]) == (
        "preprocess", "dataprep", 4.0, "a100", "COMPLETED")
    assert m2["max_cpu_util"] == pytest.approx(4516 / (4516 * 4))
    r6 = by_id(sacct_json.parse(d / "raisin_1716595200.json"), "6")
    assert (r6["state"], r6["start"], r6["alloc_cpus"], r6["elapsed_s"], r6["cpu_seconds_used"]) == (
        "PENDING", None, None, 0.0, 0.0)
    assert (r6["req_gpus"], r6["gpu_type"], r6["node_list"]) == (1.0, "l40s", None)  # "None assigned"
    base = only(sacct_json.parse(d / "raisin_base_job.json"))
    assert base["alloc_cpus"] is None and base["req_cpus"] == 8.0  # tres.allocated is an empty list


def test_real_files_are_detected(shared_data):
    for f in sorted((shared_data / "sacct" / "sarc-json").glob("*/*.json")):
        assert detect_format(f) == "sacct-json", f


# ------------------------------------------------------------------------------------------------ hand-made
def test_steps_roll_up(tmp_path):
    steps = [step("100.batch", 3600, 1800, 4, mem_max=2 * GiB, util_ave=50, util_max=70, gpumem=10 * GiB),
             step("100.0", 1200, 4000, 4, mem_max=5 * GiB, util_ave=90, util_max=100, gpumem=20 * GiB),
             step("100.extern", 3600, 0, 4)]
    j = only(sacct_json.parse(write(tmp_path, [base_job(steps=steps)])))
    assert j["cpu_seconds_used"] == 7200.5          # time.total 7200 s + 500000 us
    assert j["max_rss_bytes"] == 5 * GiB             # bytes in step usage
    assert j["gpu_mem_used_bytes"] == 20 * GiB
    assert j["mean_gpu_util"] == pytest.approx((0.5 * 3600 + 0.9 * 1200) / 4800)  # Elapsed-weighted = 0.6
    assert j["max_gpu_util"] == 1.0
    # job 7200.5 / (3600 x 4) = 0.50003; .0 4000 / (1200 x 4) = 0.8333
    assert j["max_cpu_util"] == pytest.approx(4000 / 4800)
    assert (j["req_gpus"], j["gpu_type"], j["req_mem_bytes"], j["min_runtime_s"]) == (2.0, "a100", 8 * GiB, 3600.0)
    assert (j["time_limit_s"], j["job_class"], j["exit_code"]) == (7200.0, "training", "0:0")


def test_ids_limits_and_memory_without_tres(tmp_path):
    jobs = [
        base_job(job_id=51, array={"job_id": 50, "task_id": {"set": False, "number": 0}, "task": "1-5"},
                 state={"current": ["PENDING"]}, time={"submission": 1700000000, "start": 0, "end": 0, "elapsed": 0,
                                                        "limit": {"set": True, "infinite": True, "number": 0}}),
        base_job(job_id=61, het={"job_id": 60, "job_offset": 1}, tres={},
                 required={"CPUs": 8, "memory_per_cpu": {"set": True, "number": 1000},
                           "memory_per_node": {"set": False}},
                 time={"submission": 1700000000, "start": 1700000000, "end": 1700000060, "elapsed": 60,
                       "limit": {"set": False}, "total": {"seconds": 60, "microseconds": 0}}),
        base_job(job_id=70, array={"job_id": 70, "task_id": 3}, exit_code={"return_code": 2, "signal": {"id": 9}}),
    ]
    p = sacct_json.parse(write(tmp_path, jobs))
    pend = by_id(p, "50_[1-5]")
    assert (pend["array_job_id"], pend["state"], pend["time_limit_s"], pend["start"], pend["elapsed_s"]) == (
        "50", "PENDING", None, None, 0.0)  # infinite limit -> null
    het = by_id(p, "60+1")
    assert (het["req_mem_bytes"], het["time_limit_s"], het["req_gpus"]) == (8 * 1000 * MiB, None, None)
    arr = by_id(p, "70_3")
    assert (arr["array_job_id"], arr["exit_code"]) == ("70", "2:9")


def test_bad_records_are_rejected_by_index(tmp_path):
    jobs = [
        base_job(),                                                             # 1 ok
        "not a job",                                                            # 2
        base_job(job_id=None),                                                  # 3
        base_job(job_id=103, state={"current": ["EXPLODED"]}),                  # 4
        base_job(job_id=104, time={"submission": 1, "start": 2000000000, "end": 1900000000, "elapsed": 5}),  # 5
        base_job(job_id=105, required={"CPUs": -4}),                            # 6
        base_job(job_id=106, required={"CPUs": 5_000_000}),                     # 7
        base_job(job_id=100, name="again"),                                     # 8 duplicate of 1: last wins
    ]
    p = sacct_json.parse(write(tmp_path, jobs))
    assert p.rejects.select("line", "field", "reason").rows() == [
        (2, None, "record is not a JSON object"),
        (3, "job_id", "missing or non-numeric job id"),
        (4, "state", 'unknown state {"current": ["EXPLODED"]}'),
        (5, "time.end", "end before start"),
        (6, "tres", "negative count or duration"),
        (7, "tres", "absurd size (> 1e6 CPUs/GPUs/nodes, > 1 EiB or > 100 years)"),
    ]
    assert json.loads(p.rejects["raw"][0]) == "not a job"
    assert (p.rows_read, p.rows_accepted) == (8, 2)
    assert only(p)["job_name"] == "again"


@pytest.mark.parametrize("content,line,message", [
    (b"", 1, "empty file"),
    (b'{"jobs": [\n  {"job_id": 1},\n  oops\n]}', 3, "not valid JSON"),
    (b'{"meta": {}}', 1, 'no top-level "jobs" list'),
    (b'{"jobs": ["caf\xe9"]}', None, "not UTF-8"),
    (b'{"jobs": [{"job_id": ' + b"9" * 5000 + b'}]}', 1, "not valid JSON"),  # past int()'s 4,300 digits
    (b"[" * 100_000 + b"]" * 100_000, 1, "nested too deeply"),
])
def test_unreadable_json_raises(tmp_path, content, line, message):
    f = tmp_path / "bad.json"
    f.write_bytes(content)
    with pytest.raises(IngestError) as err:
        sacct_json.parse(f)
    assert err.value.line == line and message in err.value.message and "\n" not in str(err.value)


def test_ingest_takes_the_cluster_from_the_file(tmp_path, shared_data):
    store = tmp_path / "store"
    f = shared_data / "sacct" / "sarc-json" / "clusters" / "mila_1706227200.json"
    (s,) = ingest([f], store)
    assert (s.format, s.cluster, s.jobs, s.rows_rejected) == ("sacct-json", "mila", 7, 0)
    jobs = Store(store).read("jobs")
    assert set(jobs["cluster"]) == {"mila"} and set(jobs["source"]) == {"sacct-json"}
    (s,) = ingest([f], store, cluster="other")  # an explicit --cluster wins
    assert s.cluster == "other"
    assert sorted(Store(store).read("jobs").group_by("cluster").len().rows()) == [("mila", 7), ("other", 7)]
