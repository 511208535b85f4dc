"""Alibaba PAI v2020 and openb v2023: hand-made tables (PAI's job/task/instance/sensor tables are not in
../shared, only their headers), then the real machine spec and the real openb node/pod lists."""
from __future__ import annotations

import collections
import csv
import datetime as dt
import shutil
from pathlib import Path

import polars as pl
import pytest

from queries.ingest import IngestError, alibaba, detect_format, ingest, openb
from queries.store import Store

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "alibaba"
PAI = FIX / "pai"
OPENB = FIX / "openb"
GIB = 1 << 30
PAI_T0 = dt.datetime(2020, 7, 2, tzinfo=dt.timezone.utc)
OPENB_T0 = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)
J = "aaaaaaaaaaaaaaaaaaaaaaa"  # + 1..4: the fixture's job names


def jobs_by_id(res) -> dict[str, dict]:
    return {r["job_id"]: r for r in res.jobs.iter_rows(named=True)}


# ---------------------------------------------------------------------------------------------- PAI
def test_pai_directory_rolls_tasks_instances_sensors_up_to_jobs():
    res = alibaba.parse_pai(PAI)
    assert res.cluster == "pai"
    # 7 job + 5 task + 4 instance + 5 sensor + 4 machine lines; 3 + 1 + 0 + 1 + 1 rejected
    assert (res.rows_read, res.rows_accepted, res.rejects.height) == (25, 19, 6)
    jobs = jobs_by_id(res)
    assert set(jobs) == {J + "1", J + "2", J + "3", J + "4"}

    j = jobs[J + "1"]  # ps: 1 x 600 % CPU, 29.296875 GB; worker: 2 x (400 % CPU, 50 % GPU, 10 GB)
    assert (j["req_cpus"], j["req_gpus"]) == (14.0, 1.0)
    assert j["req_mem_bytes"] == pytest.approx((29.296875 + 2 * 10) * GIB)
    assert (j["gpu_type"], j["state"], j["user"]) == ("V100", "COMPLETED", "u0000000001")
    assert j["submit"] == PAI_T0 + dt.timedelta(seconds=1000)
    assert j["start"] == PAI_T0 + dt.timedelta(seconds=1100)  # earliest task start
    assert j["end"] == PAI_T0 + dt.timedelta(seconds=4600) and j["elapsed_s"] == 3500.0
    assert (j["nodes"], j["node_list"]) == (2, "m1,m2")
    # instance durations ps 3500 s, ww0 3400 s, ww1 2400 s at 300 %, 200 %, 100 % CPU
    assert j["cpu_seconds_used"] == pytest.approx(3 * 3500 + 2 * 3400 + 1 * 2400)
    assert j["max_rss_bytes"] == pytest.approx((4 + 8 + 8) * GIB)
    assert j["gpu_mem_used_bytes"] == pytest.approx((0 + 6 + 2) * GIB)
    # GPU instances only (plan 50 %): (40*3400 + 20*2400) / (50*3400 + 50*2400)
    assert j["mean_gpu_util"] == pytest.approx(184_000 / 290_000)
    assert j["max_gpu_util"] == pytest.approx(40 / 50)

    j = jobs[J + "2"]
    assert (j["state"], j["req_cpus"], j["req_gpus"], j["gpu_type"]) == ("FAILED", 8.0, 1.0, "T4")
    assert j["cpu_seconds_used"] == pytest.approx(8 * 550) and j["mean_gpu_util"] == pytest.approx(0.9)

    j = jobs[J + "3"]  # running: fractional GPU, no end, no instances or sensors
    assert (j["state"], j["req_gpus"], j["end"], j["elapsed_s"]) == ("RUNNING", 0.25, None, None)
    assert j["start"] == PAI_T0 + dt.timedelta(seconds=3100) and j["cpu_seconds_used"] is None

    j = jobs[J + "4"]  # waiting: no task rows at all
    assert (j["state"], j["start"], j["req_cpus"], j["elapsed_s"]) == ("PENDING", None, None, 0.0)

    rej = {(r["reason"].split(":")[0], r["line"]): r["field"] for r in res.rejects.iter_rows(named=True)}
    assert res.rejects.filter(pl.col("field") == "job_name")["reason"].to_list() == [
        "pai_task_table.csv: job_name not among the accepted pai_job_table rows"]
    assert rej == {
        ("pai_job_table.csv", 5): "status", ("pai_job_table.csv", 6): "end_time",
        ("pai_job_table.csv", 7): "start_time", ("pai_task_table.csv", 5): "job_name",
        ("pai_sensor_table.csv", 5): "cpu_usage", ("pai_machine_spec.csv", 4): "cap_cpu",
    }

    nodes = {r["node"]: r for r in res.nodes.iter_rows(named=True)}
    assert set(nodes) == {"m1", "m2", "m3"}
    assert (nodes["m1"]["cpus"], nodes["m1"]["gpus"], nodes["m1"]["gpu_type"]) == (96.0, 8.0, "V100")
    assert nodes["m1"]["mem_bytes"] == 512 * GIB
    assert (nodes["m2"]["gpus"], nodes["m2"]["gpu_type"]) == (0.0, None)  # "CPU" machines have no GPU model


def test_pai_single_tables(tmp_path):
    res = alibaba.parse_pai(PAI / "pai_job_table.csv")  # the job table alone: jobs without resources
    assert (res.rows_read, res.rows_accepted, res.jobs.height) == (7, 4, 4)
    assert res.jobs["req_cpus"].null_count() == 4
    with pytest.raises(IngestError, match="need pai_job_table"):
        alibaba.parse_pai(PAI / "pai_task_table.csv")
    # recognised by content when the name says nothing
    for table in ("job", "task", "instance", "sensor", "machine_spec"):
        copy = tmp_path / f"{table}_renamed.csv"
        shutil.copy(PAI / f"pai_{table}{'' if table == 'machine_spec' else '_table'}.csv", copy)
        assert alibaba._pai_table_of_file(copy) == table
    other = tmp_path / "pai_group_tag_table.csv"
    other.write_text("f7f6218cb5cb82e00b85476691d15d50,d2d3b77d342e,V100M32,fbeb14d671c629b6,nmt\n")
    with pytest.raises(IngestError, match="not ingested"):
        alibaba.parse_pai(other)


def test_pai_headerless_file_with_header_line_is_accepted(tmp_path):
    path = tmp_path / "pai_job_table.csv"
    path.write_text("job_name,inst_id,user,status,start_time,end_time\n" + (PAI / "pai_job_table.csv").read_text())
    res = alibaba.parse_pai(path)
    assert (res.rows_read, res.rows_accepted) == (7, 4)


def test_pai_real_machine_spec(shared_data):
    """The real v2020 directory holds only the machine spec: 1,897 machines (SOURCE.md's breakdown
    798 + 497 + 280 + 135 + 104 + 83 sums to 1,897)."""
    d = shared_data / "gpu-clusters" / "alibaba-gpu-v2020"
    res = alibaba.parse_pai(d)
    with open(d / "pai_machine_spec.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert res.rows_read == res.rows_accepted == res.nodes.height == len(rows)
    assert res.nodes["gpus"].sum() == sum(int(r[4]) for r in rows)
    assert res.nodes["cpus"].sum() == sum(int(r[2]) for r in rows)
    want = collections.Counter(r[1] for r in rows if int(r[4]) > 0)
    got = collections.Counter(res.nodes.filter(pl.col("gpus") > 0)["gpu_type"].to_list())
    assert got == want and want["P100"] == 798


def test_pai_directory_ingests_with_explicit_format(tmp_path):
    store = tmp_path / "store"
    [s] = ingest([PAI], store, fmt="pai", cluster="pai")
    assert (s.rows_read, s.rows_accepted, s.rows_rejected, s.jobs, s.nodes) == (25, 19, 6, 4, 3)
    st = Store(store)
    assert st.read("jobs").height == 4 and st.read("nodes").height == 3
    assert st.read("rejects").height == 6


# ---------------------------------------------------------------------------------------------- openb
def test_openb_pods_by_hand():
    res = openb.parse_openb(OPENB / "openb_pod_list_tiny.csv")
    assert res.cluster == "openb"
    assert (res.rows_read, res.rows_accepted, res.rejects.height) == (11, 5, 6)
    jobs = jobs_by_id(res)
    t = lambda s: OPENB_T0 + dt.timedelta(seconds=s)  # noqa: E731

    j = jobs["p0"]  # GPU sharing: 1 GPU at 500 milli
    assert (j["req_cpus"], j["req_gpus"], j["req_mem_bytes"]) == (8.0, 0.5, 16384 * 2**20)
    assert (j["state"], j["submit"], j["start"], j["end"], j["elapsed_s"]) == (
        "COMPLETED", t(100), t(110), t(400), 290.0)
    assert (j["qos"], j["gpu_type"]) == ("LS", None)
    j = jobs["p1"]
    assert (j["req_gpus"], j["state"], j["gpu_type"], j["elapsed_s"]) == (4.0, "FAILED", "V100M16|V100M32", 10.0)
    j = jobs["p2"]  # deleted before it was scheduled
    assert (j["state"], j["start"], j["end"], j["elapsed_s"], j["req_gpus"]) == ("CANCELLED", None, t(900), 0.0, 0.0)
    j = jobs["p3"]  # still running at the file's last deletion time (the trace cut-off)
    assert (j["state"], j["end"], j["req_gpus"]) == ("RUNNING", None, 0.25)
    j = jobs["p4"]  # deleted while running, before the cut-off
    assert (j["state"], j["end"], j["elapsed_s"]) == ("COMPLETED", t(700), 620.0)

    rej = {r["line"]: r["field"] for r in res.rejects.iter_rows(named=True)}
    assert rej == {7: "gpu_milli", 8: "pod_phase", 9: "deletion_time", 10: "cpu_milli", 11: "record", 12: "name"}


def test_openb_request_only_pod_list():
    res = openb.parse_openb(OPENB / "openb_pod_list_requests.csv")
    jobs = jobs_by_id(res)
    assert jobs["r0"]["req_gpus"] == pytest.approx(0.46) and jobs["r1"]["req_gpus"] == 8.0
    assert {j["state"] for j in jobs.values()} == {"PENDING"}
    assert {j["submit"] for j in jobs.values()} == {OPENB_T0}


def test_openb_nodes_by_hand():
    res = openb.parse_openb(OPENB / "openb_node_list_tiny.csv")
    assert (res.rows_read, res.rows_accepted) == (4, 3)
    nodes = {r["node"]: r for r in res.nodes.iter_rows(named=True)}
    assert (nodes["n1"]["cpus"], nodes["n1"]["gpus"], nodes["n1"]["gpu_type"]) == (96.0, 8.0, "V100M32")
    assert nodes["n1"]["mem_bytes"] == 786432 * 2**20 and nodes["n0"]["gpu_type"] is None
    assert res.rejects.row(0, named=True)["line"] == 5


def test_openb_bad_header(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_millis\nr0,1,1,1,1\n")
    with pytest.raises(IngestError) as err:
        openb.parse_openb(path)
    assert err.value.line == 1 and err.value.field == "gpu_milli"


def test_sniffers():
    assert openb.sniff_openb((OPENB / "openb_node_list_tiny.csv").read_bytes(), "whatever.csv")
    assert openb.sniff_openb((OPENB / "openb_pod_list_tiny.csv").read_bytes(), "whatever.csv")
    assert alibaba.sniff_pai((PAI / "pai_task_table.csv").read_bytes(), "renamed.csv")
    assert alibaba.sniff_pai(b"", "pai_job_table.csv")
    assert not alibaba.sniff_pai(b"job_id,submit\n1,2\n", "jobs.csv")
    assert detect_format(OPENB / "openb_pod_list_tiny.csv") == "openb"
    assert detect_format(PAI / "pai_sensor_table.csv") == "pai"


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_openb_real_node_layout(shared_data, tmp_path):
    d = shared_data / "gpu-clusters" / "alibaba-gpu-v2023"
    rows = _csv_rows(d / "openb_node_list_all_node.csv")
    store = tmp_path / "store"
    [s] = ingest([d / "openb_node_list_all_node.csv"], store)
    assert (s.format, s.cluster, s.nodes, s.rows_rejected) == ("openb", "openb", len(rows), 0)
    nodes = Store(store).read("nodes")
    assert nodes.height == len(rows) == 1523
    assert nodes["gpus"].sum() == sum(int(r["gpu"]) for r in rows) == 6212
    assert (nodes["gpus"] > 0).sum() == sum(int(r["gpu"]) > 0 for r in rows) == 1213
    want = collections.Counter(r["model"] for r in rows if r["model"])
    got = collections.Counter(nodes["gpu_type"].drop_nulls().to_list())
    assert got == want
    assert nodes["cpus"].sum() == pytest.approx(sum(int(r["cpu_milli"]) for r in rows) / 1000)
    assert nodes["mem_bytes"].sum() == pytest.approx(sum(int(r["memory_mib"]) for r in rows) * 2**20)


@pytest.mark.parametrize("name", ["default", "gpushare40", "gpuspec33", "multigpu50"])
def test_openb_real_pod_lists(shared_data, name):
    path = shared_data / "gpu-clusters" / "alibaba-gpu-v2023" / f"openb_pod_list_{name}.csv"
    rows = _csv_rows(path)
    res = openb.parse_openb(path)
    assert res.rows_read == res.rows_accepted == res.jobs.height == len(rows)
    want_gpus = sum(int(r["num_gpu"]) * int(r["gpu_milli"]) / 1000 for r in rows)
    assert res.jobs["req_gpus"].sum() == pytest.approx(want_gpus)
    if "pod_phase" in rows[0]:
        phases = collections.Counter(r["pod_phase"] for r in rows)
        states = collections.Counter(res.jobs["state"].to_list())
        assert states["FAILED"] == phases["Failed"] and states["CANCELLED"] == phases["Pending"]
        assert states["RUNNING"] + states["COMPLETED"] == phases["Running"] + phases["Succeeded"]
        assert res.jobs.filter(pl.col("end") < pl.col("start")).height == 0
