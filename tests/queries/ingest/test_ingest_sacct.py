"""sacct text ingest: hand-made dumps and edge cases, the public ingest path and the CLI.

Expected values are computed by hand in the comments next to them. The field parsers alone are in
``test_ingest_sacct_values.py``, the real dumps of ``../shared/data`` in ``test_ingest_sacct_real.py``.
"""
from __future__ import annotations

import datetime as dt
import gzip
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from queries.ingest import IngestError, detect_format, ingest, sacct, textio
from queries.store import Store

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "sacct"
GiB, MiB = 2**30, 2**20
UTC = dt.timezone.utc
def job(parsed, job_id: str) -> dict:
    rows = parsed.jobs.filter(pl.col("job_id") == job_id).to_dicts()
    assert len(rows) == 1, f"{job_id}: {len(rows)} rows"
    return rows[0]


# ------------------------------------------------------------------------------------------------ fixtures
def test_gpu_cluster_fixture_hand_computed():
    p = sacct.parse(FIX / "gpu_cluster.txt")
    # 9 data rows: 5 allocations + 4 steps, all valid
    assert (p.rows_read, p.rows_accepted, p.rejects.height, p.jobs.height) == (9, 9, 0, 5)
    a = job(p, "1001")
    assert (a["state"], a["job_class"], a["user"], a["account"], a["qos"]) == (
        "COMPLETED", "training", "alice", "org/nlp/llm", "normal")
    assert a["submit"] == dt.datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert (a["elapsed_s"], a["time_limit_s"], a["nodes"], a["node_list"]) == (7200.0, 86400.0, 1, "gpu01")
    assert (a["req_cpus"], a["req_gpus"], a["gpu_type"], a["req_mem_bytes"]) == (32.0, 4.0, "a100", 256 * GiB)
    assert (a["alloc_cpus"], a["alloc_gpus"], a["alloc_mem_bytes"]) == (32.0, 4.0, 256 * GiB)
    assert a["cpu_seconds_used"] == 86400.0        # TotalCPU 1-00:00:00 = steps 7200 + 0 + 79200
    assert a["max_rss_bytes"] == 100 * GiB          # max(2048M, 0, 100G)
    # GPU util, Elapsed-weighted: (0.60 x 7200 + 0.80 x 7080) / (7200 + 7080) = 9984 / 14280
    assert a["mean_gpu_util"] == pytest.approx(9984 / 14280)
    assert a["max_gpu_util"] == 1.0                 # gres/gpuutil=100 on .0
    assert a["gpu_mem_used_bytes"] == 40 * GiB      # max(30000M, 40G)
    # CPU util per row: job 86400/(7200 x 32) = 0.375; .batch 7200/(7200 x 32); .0 79200/(7080 x 32) = 0.3496
    assert a["max_cpu_util"] == pytest.approx(0.375)
    assert (a["min_runtime_s"], a["priority"], a["exit_code"], a["array_job_id"]) == (28800.0, 5000.0, "0:0", None)

    b = job(p, "1002_3")  # array task, typed GPU entry only, cancelled by a user, no steps
    assert (b["array_job_id"], b["state"], b["exit_code"], b["job_class"]) == ("1002", "CANCELLED", "0:15", "eval")
    assert (b["req_gpus"], b["gpu_type"], b["alloc_gpus"]) == (1.0, "h100", 1.0)
    assert b["cpu_seconds_used"] == 3600.0
    assert b["max_cpu_util"] == pytest.approx(3600 / (1800 * 8))
    assert b["max_rss_bytes"] is None and b["mean_gpu_util"] is None

    c = job(p, "1003_[1-5%2]")  # pending array record: one PENDING job
    assert (c["array_job_id"], c["state"], c["start"], c["end"], c["elapsed_s"]) == ("1003", "PENDING", None, None, 0.0)
    assert (c["node_list"], c["alloc_cpus"], c["alloc_gpus"], c["req_gpus"]) == (None, None, None, 1.0)
    assert c["max_cpu_util"] is None and c["job_class"] == "batch"

    d = job(p, "1004+0")  # het job component: running, 4000Mc x 16 CPUs, UNLIMITED, one running step
    assert (d["state"], d["end"], d["time_limit_s"], d["nodes"], d["job_class"]) == ("RUNNING", None, None, 2, "debug")
    assert d["req_mem_bytes"] == 4000 * MiB * 16
    assert d["alloc_mem_bytes"] == 62.5 * GiB
    assert (d["req_gpus"], d["array_job_id"]) == (0.0, None)
    # allocation row TotalCPU 0 (sacct fills it at the end), the step already has 10 minutes
    assert d["cpu_seconds_used"] == 600.0
    assert d["max_rss_bytes"] == 512 * MiB
    assert d["max_cpu_util"] == pytest.approx(600 / (3600 * 16))

    e = job(p, "1005")  # OUT_OF_ME+ (truncated column) and 8Gn x 1 node
    assert (e["state"], e["req_mem_bytes"], e["job_class"], e["max_cpu_util"]) == (
        "OUT_OF_MEMORY", 8 * GiB, "dataprep", pytest.approx(1200 / (600 * 4)))


def test_states_fixture():
    p = sacct.parse(FIX / "states.txt")
    got = dict(zip(p.jobs["job_id"], p.jobs["state"]))
    assert got == {"2101": "PREEMPTED", "2102": "NODE_FAIL", "2103": "TIMEOUT", "2104": "RUNNING",
                   "2105": "RUNNING", "2106": "NODE_FAIL", "2107": "PREEMPTED", "2108": "TIMEOUT", "2109": "FAILED",
                   "2110": "CANCELLED", "2111": "COMPLETED", "2112": "FAILED"}
    assert p.rejects.select("line", "field", "reason").rows() == [(14, "State", "unknown state 'INVALID'")]
    assert job(p, "2110")["start"] is None  # Start=None: cancelled before it started
    assert (p.rows_read, p.rows_accepted) == (13, 12)


def test_bad_rows_are_rejected_with_line_field_and_reason():
    p = sacct.parse(FIX / "bad_rows.txt")
    got = p.rejects.select("line", "field", "reason").rows()
    assert got == [
        (4, None, "expected 14 fields, found 13"),
        (5, None, "expected 14 fields, found 15"),
        (6, "State", "unknown state 'EXPLODED'"),
        (7, "Submit", "unparseable timestamp '2026-13-01T00:00:00'"),
        (8, "Elapsed", "unparseable duration '1:xx:00'"),
        (9, "NNodes", "not a non-negative number '-1'"),
        (10, None, "absurd size (> 1e6 CPUs/GPUs/nodes, > 1 EiB or > 100 years)"),
        (11, "End", "end before start '2026-01-01T01:00:00'"),
        (12, "JobID", "parent allocation row 2009 was rejected"),
        (13, "JobID", "parent allocation row 2010 is missing"),
        (14, None, "line is not valid UTF-8"),
        (18, "ReqMem", "unparseable memory size '12Q'"),
        (19, "JobID", "malformed job id 'abc'"),
    ]
    raw = dict(zip(p.rejects["line"], p.rejects["raw"]))
    assert raw[4] == (FIX / "bad_rows.txt").read_bytes().split(b"\n")[3].decode()
    assert raw[14].startswith("2011|caf\\xe9|")  # the bad byte shown, not dropped
    # data rows: lines 2-14 and 17-20 (15 is blank, 16 a comment) = 17 = 4 accepted + 13 rejected
    assert (p.rows_read, p.rows_accepted) == (17, 4)
    assert sorted(p.jobs["job_id"]) == ["2001", "2013"]
    assert job(p, "2001")["job_name"] == "ok-again"  # the later duplicate wins
    assert job(p, "2001")["max_rss_bytes"] == GiB     # its step (line 3) still rolls up
    assert job(p, "2013")["state"] == "PENDING"


def test_headerless_file_with_fields_and_trailing_delimiter():
    fields = "JobID,State,Submit,Start,End,Elapsed,NNodes,NCPUS,ReqMem,TotalCPU"
    p = sacct.parse(FIX / "noheader_parsable.txt", fields=fields)
    j = job(p, "3001")
    # 2000Mc x 4 CPUs (NCPUS: no ReqCPUS column) = 8000 MiB; CPU 3 h over 1.5 h x 4 CPUs = 0.5
    assert (j["req_cpus"], j["req_mem_bytes"], j["cpu_seconds_used"], j["max_cpu_util"]) == (
        4.0, 8000 * MiB, 10800.0, 0.5)
    assert (p.rows_read, p.rows_accepted, p.rejects.height) == (2, 2, 0)
    # widths as sacct --format accepts them are ignored; the delimiter can be given explicitly
    q = sacct.parse(FIX / "noheader_parsable.txt", fields=fields.replace("State", "State%20"), delimiter="|")
    assert q.jobs.equals(p.jobs)


@pytest.mark.parametrize("name,line,message", [
    ("empty.txt", 1, "empty file"),
    ("only_blank_and_comments.txt", 1, "empty file"),
    ("truncated_header.txt", 1, "header line is not terminated"),
    ("headless.txt", 1, "no header line and no field list"),
    ("fixed_width.txt", 1, "fixed-width sacct output is not supported"),
])
def test_unreadable_files_raise_one_line_ingest_errors(name, line, message):
    with pytest.raises(IngestError) as err:
        sacct.parse(FIX / name)
    assert err.value.line == line and message in err.value.message
    assert "\n" not in str(err.value) and str(err.value).startswith(str(FIX / name) + f":{line}: ")


def test_missing_required_column_names_the_field(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("JobID|JobName\n1|a\n")
    with pytest.raises(IngestError) as err:
        sacct.parse(f)
    assert (err.value.field, err.value.line) == ("State", 1)


def test_snowman_delimiter_parsable_and_gzip_give_the_same_jobs(tmp_path):
    base = sacct.parse(FIX / "gpu_cluster.txt")
    text = (FIX / "gpu_cluster.txt").read_text()
    snow = tmp_path / "snow.txt"  # --parsable --delimiter=☃: multi-byte delimiter and a trailing one
    snow.write_text("".join(line.replace("|", "☃") + "☃\n" for line in text.splitlines()))
    gz = tmp_path / "dump.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    bom = tmp_path / "bom.txt"  # a byte-order mark in front of the header
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    for f in (snow, gz, crlf, bom):
        p = sacct.parse(f)
        assert (p.rows_read, p.rows_accepted, p.rejects.height) == (9, 9, 0), f
        assert p.jobs.equals(base.jobs), f
    assert detect_format(snow) == "sacct" and detect_format(gz) == "sacct"


@pytest.mark.parametrize("name,delim,n", [("bad_rows.txt", "|", 14), ("gpu_cluster.txt", "|", 27)])
def test_reading_a_path_equals_reading_its_bytes(tmp_path, name, delim, n):
    data = (FIX / name).read_bytes()
    snow = tmp_path / "snow.txt"
    snow.write_bytes(data.replace(b"|", "☃".encode()))
    for path, raw, d in ((FIX / name, data, delim), (snow, snow.read_bytes(), "☃")):
        f1, l1, b1 = textio.read_delimited(path, d, n)
        f2, l2, b2 = textio.read_delimited(raw, d, n)
        every = pl.Series(range(1, len(l1) + 1))
        assert f1.equals(f2) and l1.text(every).equals(l2.text(every)) and b1 == b2
        assert len(l1) == f1.height == data.count(b"\n")
        if name == "bad_rows.txt":  # the raw text keeps the file's own delimiter
            assert b1 == [(14, "2011|caf\\xe9|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:10|2026-01-01T01:00:10|"
                                "01:00:00|02:00:00|1|2|2|4G|01:00:00|".replace("|", d))]
            assert l1.text(pl.Series([4]))[0] == "2002|short|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:10|2026-01-01T01:00:10|" \
                            "01:00:00|02:00:00|1|2|2|4G|01:00:00".replace("|", d)


def test_a_file_larger_than_the_head_is_read_from_its_path(tmp_path):
    """Over 1 MiB Polars reads the path itself; line numbers, UTF-8 rejects and roll-up must not change."""
    rows = ["JobID|State|Elapsed|AllocCPUS|TotalCPU|MaxRSS|Comment"]
    pad = "x" * 60
    for i in range(12000):
        rows += [f"{i}|COMPLETED|01:00:00|2|01:00:00||{pad}", f"{i}.batch|COMPLETED|01:00:00|2|01:00:00|{i}K|"]
    data = ("\n".join(rows) + "\n").encode()
    bad_at = 5002  # physical line of job 2500's allocation row (line 1 is the header, then job k at 2k + 2)
    lines = data.split(b"\n")
    assert lines[bad_at - 1].startswith(b"2500|")
    lines[bad_at - 1] = b"2500|COMPLETED|01:00:00|2|01:00:00||caf\xe9"
    f = tmp_path / "big.txt"
    f.write_bytes(b"\n".join(lines))
    assert f.stat().st_size > 1 << 20
    p = sacct.parse(f)
    assert p.rejects.select("line", "reason").rows() == [(bad_at, "line is not valid UTF-8"),
                                                         (bad_at + 1, "parent allocation row 2500 is missing")]
    assert (p.rows_read, p.rows_accepted, p.jobs.height) == (24000, 23998, 11999)
    assert job(p, "11999")["max_rss_bytes"] == 11999 * 1024 and job(p, "11999")["max_cpu_util"] == 0.5


def test_tz_option_converts_local_timestamps(tmp_path):
    f = tmp_path / "berlin.txt"
    f.write_text("JobID|State|Submit|Start|End\n"
                 "1|COMPLETED|2026-07-01T12:00:00|2026-07-01T12:00:00|2026-07-01T13:00:00\n"
                 "2|COMPLETED|2026-03-29T02:30:00|2026-03-29T03:00:00|2026-03-29T04:00:00\n")
    p = sacct.parse(f, tz="Europe/Berlin")
    assert job(p, "1")["start"] == dt.datetime(2026, 7, 1, 10, tzinfo=UTC)
    assert job(p, "1")["elapsed_s"] == 3600.0  # no Elapsed column: end - start
    # 02:30 does not exist that night (02:00 CET -> 03:00 CEST): read with the offset before the gap, +01:00
    assert job(p, "2")["submit"] == dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC) and p.rejects.height == 0
    assert job(sacct.parse(f), "1")["start"] == dt.datetime(2026, 7, 1, 12, tzinfo=UTC)  # default: UTC


def test_duplicate_steps_count_once(tmp_path):
    f = tmp_path / "dup.txt"
    f.write_text("JobID|State|Elapsed|AllocCPUS|TotalCPU|MaxRSS\n"
                 "7|COMPLETED|01:00:00|2||\n"
                 "7.0|COMPLETED|01:00:00|2|00:30:00|1G\n"
                 "7.0|COMPLETED|01:00:00|2|00:40:00|2G\n")
    p = sacct.parse(f)
    j = job(p, "7")
    assert (j["cpu_seconds_used"], j["max_rss_bytes"]) == (2400.0, 2 * GiB)  # the last 7.0 only, not 1800 + 2400
    assert (p.rows_read, p.rows_accepted) == (3, 3)


def test_steps_may_come_before_or_apart_from_their_job(tmp_path):
    f = tmp_path / "order.txt"
    f.write_text("JobID|State|Elapsed|AllocCPUS|TotalCPU|MaxRSS\n"
                 "11.0|COMPLETED|01:00:00|1|00:10:00|3G\n"      # before its job
                 "10|COMPLETED|01:00:00|1|00:20:00|\n"
                 "11|COMPLETED|01:00:00|1|00:10:00|\n"
                 "10.batch|COMPLETED|01:00:00|1|00:20:00|1G\n"  # after another job's row
                 "11.batch|COMPLETED|01:00:00|1|00:00:00|2G\n")
    p = sacct.parse(f)
    assert (job(p, "10")["max_rss_bytes"], job(p, "11")["max_rss_bytes"]) == (GiB, 3 * GiB)
    assert (p.rows_read, p.rows_accepted, p.rejects.height) == (5, 5, 0)


def test_no_step_rows_and_zero_usage_means_unknown(tmp_path):
    f = tmp_path / "x.txt"  # sacct -X: allocation rows only, usage reported as zero
    f.write_text("JobID|State|Start|End|Elapsed|AllocCPUS|TotalCPU\n"
                 "8|COMPLETED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|4|00:00:00\n"
                 "9|PENDING|Unknown|Unknown|00:00:00|0|00:00:00\n")
    p = sacct.parse(f)
    assert job(p, "8")["cpu_seconds_used"] is None and job(p, "8")["max_cpu_util"] is None
    assert job(p, "9")["cpu_seconds_used"] == 0.0  # never ran: zero is the truth


def test_cluster_column_keeps_jobs_apart(tmp_path):
    f = tmp_path / "multi.txt"
    f.write_text("Cluster|JobID|State|Elapsed|TotalCPU\n"
                 "a|5|COMPLETED|00:10:00|00:05:00\na|5.0|COMPLETED|00:10:00|00:05:00\n"
                 "b|5|FAILED|00:10:00|00:01:00\nb|5.0|FAILED|00:10:00|00:01:00\n")
    p = sacct.parse(f)
    assert sorted(p.jobs.select("cluster", "state", "cpu_seconds_used").rows()) == [
        ("a", "COMPLETED", 300.0), ("b", "FAILED", 60.0)]
    assert p.cluster is None
    one_cluster = sacct.parse(FIX / "gpu_cluster.txt")
    assert one_cluster.cluster is None


def test_sample_generator_output_parses_cleanly(tmp_path):
    samplegen = pytest.importorskip("queries.samplegen", reason="sample generator not available")
    out = samplegen.generate(tmp_path / "sample", seed=3, days=2, nodes=8)
    p = sacct.parse(out["sacct"])
    lines = Path(out["sacct"]).read_text().splitlines()
    assert lines[0].split("|") == sacct_header_of_sample()
    n_alloc = sum(1 for line in lines[1:] if "." not in line.split("|", 1)[0])
    assert (p.rows_read, p.rows_accepted, p.rejects.height, p.jobs.height) == (
        len(lines) - 1, len(lines) - 1, 0, n_alloc)
    gpu = p.jobs.filter(pl.col("mean_gpu_util").is_not_null())
    assert gpu.height > 0 and gpu["mean_gpu_util"].is_between(0, 1).all()
    assert p.jobs["min_runtime_s"].is_not_null().all()


def sacct_header_of_sample() -> list[str]:
    return ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|Timelimit|"
            "NNodes|NodeList|ReqCPUS|AllocCPUS|ReqMem|ReqTRES|AllocTRES|TotalCPU|MaxRSS|TRESUsageInAve|"
            "TRESUsageInMax|Priority|Comment").split("|")


# ------------------------------------------------------------------------------------------------ public path
def test_ingest_into_store_and_read_back(tmp_path):
    store = tmp_path / "store"
    s1, s2 = ingest([FIX / "gpu_cluster.txt", FIX / "bad_rows.txt"], store, fmt="sacct", cluster="lab")
    assert (s1.rows_read, s1.rows_accepted, s1.rows_rejected, s1.jobs) == (9, 9, 0, 5)
    assert (s2.rows_read, s2.rows_accepted, s2.rows_rejected, s2.jobs) == (17, 4, 13, 2)
    st = Store(store)
    jobs = st.read("jobs")
    assert jobs.height == 7 and set(jobs["cluster"]) == {"lab"} and set(jobs["source"]) == {"sacct"}
    assert jobs.filter(pl.col("job_id") == "1001")["req_mem_bytes"].to_list() == [256 * GiB]
    rej = st.read("rejects")
    assert rej.height == 13 and set(rej["source_file"]) == {str(FIX / "bad_rows.txt")}
    assert rej.filter(pl.col("line") == 14)["reason"].to_list() == ["line is not valid UTF-8"]
    log = st.read("ingest_log")
    assert sorted(log["rows_read"]) == [9, 17] and (log["rows_read"] == log["rows_accepted"] + log["rows_rejected"]).all()
    # re-ingesting the same file replaces its jobs and rejects instead of adding copies
    ingest([FIX / "bad_rows.txt"], store, fmt="sacct", cluster="lab")
    assert st.read("jobs").height == 7 and st.read("rejects").height == 13


def test_ingest_auto_detects_and_fails_before_writing(tmp_path):
    store = tmp_path / "store"
    (s,) = ingest([FIX / "gpu_cluster.txt"], store)
    assert s.format == "sacct"
    before = Store(store).manifest()
    with pytest.raises(IngestError):
        ingest([FIX / "gpu_cluster.txt", FIX / "headless.txt"], store, fmt="sacct")
    assert Store(store).manifest() == before  # nothing half-written


def test_cli_json_and_unreadable_file(tmp_path, repo):
    store = tmp_path / "store"
    ok = subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", str(FIX / "noheader_parsable.txt"),
                         "--store", str(store), "--format", "sacct", "--json",
                         "--fields", "JobID,State,Submit,Start,End,Elapsed,NNodes,NCPUS,ReqMem,TotalCPU"],
                        cwd=repo, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)
    assert [(s["rows_read"], s["rows_accepted"], s["jobs"]) for s in summary] == [(2, 2, 1)]
    bad = subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", str(tmp_path), "--store", str(store)],
                         cwd=repo, capture_output=True, text=True)  # a directory cannot be read as a file
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1 and str(tmp_path) in bad.stderr
    empty = subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", str(FIX / "empty.txt"), "--store",
                            str(store), "--format", "sacct"], cwd=repo, capture_output=True, text=True)
    assert empty.returncode != 0 and empty.stderr.strip().endswith("empty.txt:1: empty file: no header and no data line")


def test_ingest_command_keeps_freed_pages_only_before_polars_loads(repo):
    """``quotaloop ingest`` asks Polars' jemalloc to keep freed pages (set before Polars is imported); an explicit
    setting wins, and a process that already loaded Polars (which sets its own value) is left alone."""
    probe = ("import os, sys\n"
             "from dashboard.cli import ingest\n"
             "pre = sys.argv[1]\n"
             "if pre == 'polars': import polars\n"
             "if pre == 'explicit': os.environ['_RJEM_MALLOC_CONF'] = 'narenas:1'\n"
             "before = os.environ.get('_RJEM_MALLOC_CONF')\n"
             "ingest._keep_freed_pages()\n"
             "print(before, os.environ.get('_RJEM_MALLOC_CONF'))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "_RJEM_MALLOC_CONF"}
    out = {pre: subprocess.run([sys.executable, "-c", probe, pre], cwd=repo, env=env, capture_output=True,
                               text=True).stdout.split() for pre in ("fresh", "explicit", "polars")}
    assert out["fresh"] == ["None", "dirty_decay_ms:-1,muzzy_decay_ms:-1"]
    assert out["explicit"] == ["narenas:1", "narenas:1"]
    before, after = out["polars"]
    assert before == after and after != "dirty_decay_ms:-1,muzzy_decay_ms:-1"
