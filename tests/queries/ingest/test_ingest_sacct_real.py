"""sacct ingest on the real dumps in ``../shared/data/sacct`` (skipped with a reason when absent): compared
with another tool's parsed output (aws hpc-cost-simulator ``exp_jobs*.csv``) where the two can be compared, and
hand-checked jobs of the edge-case dumps and of a header-less snowman-delimited jobinfo export."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from queries.ingest import common, sacct

from real_stores import AWS_FIELDS, JOBINFO_FIELDS
from test_ingest_sacct import job

GiB, MiB = 2**30, 2**20
UTC = dt.timezone.utc


# ------------------------------------------------------------------------------------------------ real dumps
def _hms(text: str) -> float:
    h, m, s = text.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def _compare_with_aws(ours: pl.DataFrame, exp_csv: Path) -> pl.DataFrame:
    """Join on job id and check every column both tools derive from the same sacct fields."""
    exp = pl.read_csv(exp_csv, infer_schema=False)
    m = ours.join(exp, on="job_id", how="inner")
    for r in m.iter_rows(named=True):
        assert r["req_cpus"] == float(r["num_cores"]), r["job_id"]
        assert r["nodes"] == int(r["num_hosts"]), r["job_id"]
        if r["max_mem_gb"]:  # theirs: ReqMem in GiB (0 for "--mem=0", which we leave unknown)
            expected_mem = float(r["max_mem_gb"]) * GiB
            assert r["req_mem_bytes"] == pytest.approx(expected_mem) or (expected_mem == 0 and r["req_mem_bytes"] is None)
        if r["ru_maxrss"]:
            assert r["max_rss_bytes"] == float(r["ru_maxrss"]), r["job_id"]
        assert r["submit"] == dt.datetime.fromisoformat(r["submit_time"]).replace(tzinfo=UTC)
        assert r["start"] == dt.datetime.fromisoformat(r["start_time"]).replace(tzinfo=UTC)
        assert r["end"] == dt.datetime.fromisoformat(r["finish_time"]).replace(tzinfo=UTC)
        assert r["elapsed_s"] == _hms(r["run_time"])
        # TotalCPU = UserCPU + SystemCPU (sacct rounds each to ms). A job that ran but has no step rows and a
        # zero total is "unknown" to us (sacct -X style), 0 to them.
        theirs = _hms(r["ru_utime"]) + _hms(r["ru_stime"])
        if r["cpu_seconds_used"] is None:
            assert theirs == 0 and r["start"] is not None, r["job_id"]
        else:
            assert r["cpu_seconds_used"] == pytest.approx(theirs, abs=0.002), r["job_id"]
    return m


def test_aws_v1_matches_the_other_parser(shared_data):
    d = shared_data / "sacct" / "aws-hpc-cost-simulator"
    p = sacct.parse(d / "sacct-output-v1.txt", fields=AWS_FIELDS)
    assert (p.rows_read, p.rows_accepted, p.rejects.height) == (878, 878, 0)
    exp = pl.read_csv(d / "exp_jobs-v1.csv", infer_schema=False)
    assert sorted(p.jobs["job_id"]) == sorted(exp["job_id"])  # 483 jobs, same ids
    assert _compare_with_aws(p.jobs, d / "exp_jobs-v1.csv").height == 483
    states = dict(p.jobs["state"].value_counts().rows())
    assert sum(states.values()) == 483 and set(states) <= set(common.schema.STATES)


def test_aws_v2_mixes_two_field_lists(shared_data):
    """32 lines carry the trailing Partition field, 846 do not: each pass accepts one kind and rejects the
    other with a field-count reason (the other tool pads silently). Together they give its 483 jobs."""
    d = shared_data / "sacct" / "aws-hpc-cost-simulator"
    with_part = sacct.parse(d / "sacct-output-v2.txt", fields=AWS_FIELDS + ",Partition")
    without = sacct.parse(d / "sacct-output-v2.txt", fields=AWS_FIELDS)
    assert (with_part.rows_accepted, with_part.rejects.height) == (32, 846)
    assert (without.rows_accepted, without.rejects.height) == (846, 32)
    assert set(with_part.rejects["reason"]) == {"expected 26 fields, found 25"}
    assert set(without.rejects["reason"]) == {"expected 25 fields, found 26"}
    both = pl.concat([with_part.jobs, without.jobs])
    exp = pl.read_csv(d / "exp_jobs-v2.csv", infer_schema=False)
    assert sorted(both["job_id"]) == sorted(exp["job_id"])
    assert set(with_part.jobs["partition"]) == {"partition1", "partition2"}
    _compare_with_aws(both, d / "exp_jobs-v2.csv")


@pytest.mark.parametrize("case,ours,theirs,why", [
    ("array", {f"846_{i}" for i in range(8)}, {f"846_{i}" for i in range(8)}, "same"),
    ("multi-node", {"845"}, {"845"}, "same: 4 nodes from AllocNodes (ReqNodes says 1)"),
    # .extern row without its allocation row: they invent job 2346371, we reject the orphan step;
    # job 39 never started: they drop it, we keep it as CANCELLED with no start
    ("issues/17", {"2346372", "39"}, {"2346371", "2346372"}, "orphan step / never started"),
    ("issues/5", {"31259618"}, set(), "pending job kept"),
    ("issues/59", {"12"}, {"12"}, "same"),
    ("issues/61", {"141"}, set(), "CANCELLED before start kept; the INVALID row is rejected"),
    ("issues/63", set(), {"2346371"}, ".interactive step without allocation row rejected"),
    # 67108868: its bad value sits in MaxDiskRead, a field we do not read; 67108872: the allocation row is
    # valid, only its truncated .batch row is rejected (so max_rss is unknown, not the job)
    ("issues/gl-20", {"67108865", "67108867", "67108868", "67108869", "67108871", "67108872", "67108873",
                      "67108874", "67108875"},
     {"67108865", "67108867", "67108869", "67108871", "67108873", "67108874", "67108875"}, "see comment"),
])
def test_aws_edge_case_dumps(shared_data, case, ours, theirs, why):
    d = shared_data / "sacct" / "aws-hpc-cost-simulator" / case
    f = d / "sacct-output.txt"
    fields = AWS_FIELDS + (",Partition" if case in ("issues/59", "issues/61") else "")
    p = sacct.parse(f, fields=fields)
    exp = pl.read_csv(d / "exp_jobs.csv", infer_schema=False)
    assert set(p.jobs["job_id"]) == ours, why
    assert set(exp["job_id"]) == theirs
    assert p.rows_read == p.rows_accepted + p.rejects.height
    _compare_with_aws(p.jobs.filter(pl.col("job_id").is_in(list(ours & theirs))), d / "exp_jobs.csv")


def test_aws_edge_case_details(shared_data):
    d = shared_data / "sacct" / "aws-hpc-cost-simulator"
    p17 = sacct.parse(d / "issues/17/sacct-output.txt", fields=AWS_FIELDS)
    assert p17.rejects.select("line", "field", "reason").rows() == [
        (2, "JobID", "parent allocation row 2346371 is missing")]
    assert job(p17, "2346372")["req_mem_bytes"] is None  # ReqMem 0n: "all of the node", not zero bytes
    assert (job(p17, "39")["state"], job(p17, "39")["start"]) == ("CANCELLED", None)
    p61 = sacct.parse(d / "issues/61/sacct-output.txt", fields=AWS_FIELDS + ",Partition")
    assert p61.rejects.select("line", "field", "reason").rows() == [(4, "State", "unknown state 'INVALID'")]
    assert (job(p61, "141")["state"], job(p61, "141")["req_mem_bytes"]) == ("CANCELLED", 2 * 2**40)
    p5 = sacct.parse(d / "issues/5/sacct-output.txt", fields=AWS_FIELDS)
    assert (job(p5, "31259618")["state"], job(p5, "31259618")["start"]) == ("PENDING", None)
    gl = sacct.parse(d / "issues/gl-20/sacct-output.txt", fields=AWS_FIELDS)
    assert gl.rejects.select("line", "reason").rows() == [
        (6, "unparseable memory size '100Mcd'"), (7, "parent allocation row 67108866 was rejected"),
        (22, "expected 25 fields, found 24"), (23, "parent allocation row 67108870 was rejected"),
        (31, "expected 25 fields, found 24")]
    assert job(gl, "67108865")["req_mem_bytes"] == 100 * MiB  # 100Mc x 1 CPU


def test_slurm_jobinfo_snowman_noheader(shared_data):
    p = sacct.parse(shared_data / "sacct" / "slurm-jobinfo" / "sacct.txt", fields=JOBINFO_FIELDS)
    # 85 lines, every job listed twice (anonymised twice): 20 distinct jobs, the second listing wins
    assert (p.rows_read, p.rows_accepted, p.rejects.height, p.jobs.height) == (85, 85, 0, 20)
    j = job(p, "20872560")
    assert j["job_name"] == "RWPJ5HK6DNUQXFX"
    assert j["req_mem_bytes"] == 100 * GiB                      # 100Gn x 1 node
    assert j["cpu_seconds_used"] == 7 * 86400 + 17 * 3600 + 10 * 60 + 15  # TotalCPU 7-17:10:15
    assert j["max_rss_bytes"] == 12653376 * 1024                # .0 step, KiB
    assert j["time_limit_s"] == 8 * 86400
    r = job(p, "21085537")                                      # running, 21 nodes, 750Mc x 80 CPUs
    assert (r["state"], r["nodes"], r["req_mem_bytes"], r["end"]) == ("RUNNING", 21, 750 * MiB * 80, None)
    assert r["node_list"].startswith("mycluster2-node[022-023")
    arr = job(p, "20963999_982")
    assert (arr["array_job_id"], arr["req_mem_bytes"]) == ("20963999", 4 * GiB)
    pend = p.jobs.filter(pl.col("state") == "PENDING")
    assert pend.height == 3 and pend["node_list"].is_null().all() and (pend["elapsed_s"] == 0).all()
