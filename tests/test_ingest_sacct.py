"""sacct text ingest: shared parsing helpers, hand-made edge cases, real dumps, the public ingest path and the CLI.

Expected values are computed by hand in the comments next to them; real-file checks compare with another
tool's parsed output (aws hpc-cost-simulator ``exp_jobs*.csv``) where the two can be compared.
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
from hypothesis import given, settings
from hypothesis import strategies as st

from queries.ingest import IngestError, common, detect_format, ingest, sacct, textio
from queries.store import Store

FIX = Path(__file__).parent / "fixtures" / "sacct"
GiB, MiB = 2**30, 2**20
UTC = dt.timezone.utc
AWS_FIELDS = ("State,JobID,ReqCPUS,ReqMem,ReqNodes,Constraints,Submit,Eligible,Start,Elapsed,Suspended,End,"
              "ExitCode,DerivedExitCode,AllocNodes,NCPUS,MaxDiskRead,MaxDiskWrite,MaxPages,MaxRSS,MaxVMSize,"
              "CPUTime,UserCPU,SystemCPU,TotalCPU")
JOBINFO_FIELDS = ("JobID,JobName,User,Partition,NodeList,NNodes,ncpus,NTasks,State,Submit,start,end,timelimit,"
                  "elapsed,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,TRESUsageInTot,TRESUsageOutTot,MaxDiskWrite,"
                  "MaxDiskRead,MaxRSSNode,MaxDiskWriteNode,MaxDiskReadNode,Comment")  # from its README.md


def col(values, dtype=pl.String) -> pl.DataFrame:
    return pl.DataFrame({"x": values}, schema={"x": dtype})


def one(df: pl.DataFrame, expr: pl.Expr) -> list:
    return df.select(expr.alias("v"))["v"].to_list()


def job(parsed, job_id: str) -> dict:
    rows = parsed.jobs.filter(pl.col("job_id") == job_id).to_dicts()
    assert len(rows) == 1, f"{job_id}: {len(rows)} rows"
    return rows[0]


# ------------------------------------------------------------------------------------------------ durations
DURATIONS = [
    ("00:05.908", 5.908), ("59:59", 3599.0), ("01:02:03", 3723.0), ("01:02:03.5", 3723.5),
    ("1-02:03:04", 93784.0), ("34-15:26:01", 34 * 86400 + 15 * 3600 + 26 * 60 + 1), ("7:05:00", 25500.0),
    ("123:00:00", 442800.0),
]


@pytest.mark.parametrize("text,seconds", DURATIONS)
def test_duration_forms(text, seconds):
    df = col([text])
    assert one(df, common.duration_expr(pl.col("x"))) == [pytest.approx(seconds)]
    assert common.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["UNLIMITED", "Partition_Limit", "INVALID", "Unknown", "", None])
def test_duration_no_value_tokens_are_null_not_errors(text):
    df = col([text])
    value = common.duration_expr(pl.col("x"))
    assert one(df, value) == [None]
    assert one(df, common.unparsed(pl.col("x"), value, common.DURATION_NULL)) == [False]
    assert common.parse_duration(text) is None


@pytest.mark.parametrize("text", ["1:xx:00", "12", "00:61", "01:60:00", "1-2", "abc", "-01:00:00"])
def test_duration_garbage_is_flagged(text):
    df = col([text])
    value = common.duration_expr(pl.col("x"))
    assert one(df, value) == [None]
    assert one(df, common.unparsed(pl.col("x"), value, common.DURATION_NULL)) == [True]
    with pytest.raises(ValueError):
        common.parse_duration(text)


def test_fast_timestamp_path_hands_other_forms_to_the_general_parser():
    df = col(["2026-11-01T10:00:00", "2026-11-01 10:00:00", "1700000000", "bogus", "Unknown", None])
    out = common.with_fallbacks(df, [("t", "x", common.timestamp_fast_expr(pl.col("x")),
                                      common.timestamp_expr(pl.col("x")))])
    ten = dt.datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert out["t"].to_list() == [ten, ten, dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), None, None, None]


def _sacct_duration(d, h, m, s, ms):
    base = f"{h:02d}:{m:02d}:{s:02d}" if (h or d) else f"{m:02d}:{s:02d}"
    return (f"{d}-" if d else "") + base + (f".{ms:03d}" if ms is not None else "")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59),
       st.one_of(st.none(), st.integers(0, 999)))
def test_duration_expression_scalar_and_arithmetic_agree(d, h, m, s, ms):
    text = _sacct_duration(d, h, m, s, ms)
    expected = d * 86400 + h * 3600 + m * 60 + s + (ms or 0) / 1000
    assert one(col([text]), common.duration_expr(pl.col("x")))[0] == pytest.approx(expected)
    assert common.parse_duration(text) == pytest.approx(expected)


# ------------------------------------------------------------------------------------------------ memory
@pytest.mark.parametrize("text,default,bytes_,per", [
    ("12756K", "", 12756 * 1024, None), ("4M", "", 4 * MiB, None), ("0", "", 0.0, None),
    ("1.19M", "", 1.19 * MiB, None), ("2T", "M", 2 * 2**40, None), ("4000", "M", 4000 * MiB, None),
    ("100Gn", "M", 100 * GiB, "n"), ("750Mc", "M", 750 * MiB, "c"), ("0n", "M", 0.0, "n"),
    ("1P", "", 2**50, None), ("512k", "", 512 * 1024, None),
])
def test_memory_units_are_binary_and_bare_numbers_take_the_field_default(text, default, bytes_, per):
    value, suffix = common.memory_expr(pl.col("x"), default)
    assert one(col([text]), value) == [pytest.approx(bytes_)]
    assert one(col([text]), suffix) == [per]
    assert common.parse_memory(text, default) == (pytest.approx(bytes_), per)


@pytest.mark.parametrize("text", ["100Mcd", "0.07Mnz", "12Q", "-5K", "1e5", "K", "1KK"])
def test_memory_garbage_is_flagged(text):
    value, _ = common.memory_expr(pl.col("x"), "M")
    assert one(col([text]), value) == [None]
    assert one(col([text]), common.unparsed(pl.col("x"), value)) == [True]
    with pytest.raises(ValueError):
        common.parse_memory(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**7), st.sampled_from(["", "K", "M", "G", "T"]), st.sampled_from(["", "n", "c"]))
def test_memory_expression_and_scalar_agree(num, unit, per):
    text = f"{num}{unit}{per}"
    expected = num * common.UNIT_BYTES[unit or "M"]
    value, suffix = common.memory_expr(pl.col("x"), "M")
    assert one(col([text]), value)[0] == pytest.approx(expected)
    assert one(col([text]), suffix)[0] == (per or None)
    assert common.parse_memory(text, "M") == (pytest.approx(expected), per or None)


# ------------------------------------------------------------------------------------------------ TRES
TRES = [
    # the brief's example: one GPU count (gres/gpu=4), not typed + untyped = 8; mem 199 GiB
    ("billing=24,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=199G,node=1",
     {"cpu": 8.0, "gpus": 4.0, "gpu_type": "a100", "mem_bytes": 199 * GiB, "nodes": 1.0}),
    # typed entries only: summed (2 + 1)
    ("cpu=16,gres/gpu:a100=2,gres/gpu:v100=1,mem=64000,node=2",
     {"cpu": 16.0, "gpus": 3.0, "gpu_type": "a100", "mem_bytes": 64000 * MiB, "nodes": 2.0}),
    ("billing=4,cpu=4,mem=8G,node=1", {"cpu": 4.0, "gpus": 0.0, "gpu_type": None, "mem_bytes": 8 * GiB, "nodes": 1.0}),
    ("", {"cpu": None, "gpus": None, "gpu_type": None, "mem_bytes": None, "nodes": None}),
]


@pytest.mark.parametrize("text,expected", TRES)
def test_tres_strings(text, expected):
    df = common.on_distinct(col([text, text]), "x", {k: e for k, e in common.tres_expr(pl.col("x")).items()})
    for key, value in expected.items():
        assert df[key].to_list() == [value, value], key
    assert df["bad"].to_list() == [False, False]
    assert common.parse_tres(text) == expected


def test_tres_with_unparseable_memory_is_bad():
    df = col(["cpu=4,mem=lots,node=1", "cpu=four,node=1", "garbage"]).with_columns(
        **{k: e for k, e in common.tres_expr(pl.col("x")).items()})
    assert df["bad"].to_list() == [True, True, True]


def test_gres_strings():
    df = col(["gpu:2", "gpu:tesla:2", "gpu:a100:4(IDX:0-3)", "craynetwork:1", None]).with_columns(
        **common.gres_expr(pl.col("x")))
    assert df["gpus"].to_list() == [2.0, 2.0, 4.0, 0.0, None]
    assert df["gpu_type"].to_list() == [None, "tesla", "a100", None, None]


# ------------------------------------------------------------------------------------------------ states
STATES = [("COMPLETED", "COMPLETED"), ("CANCELLED by 1234", "CANCELLED"), ("CANCELLED+", "CANCELLED"),
          ("OUT_OF_ME+", "OUT_OF_MEMORY"), ("OUT_OF_MEMORY", "OUT_OF_MEMORY"), ("REQUEUED", "PREEMPTED"),
          ("BOOT_FAIL", "NODE_FAIL"), ("DEADLINE", "TIMEOUT"), ("SUSPENDED", "RUNNING"),
          ("COMPLETING", "RUNNING"), ("NODE_FAIL", "NODE_FAIL"), ("PD", "PENDING"), ("CD", "COMPLETED"),
          ("SPECIAL_EXIT", "FAILED"), ("REVOKED", "CANCELLED"), ("running", "RUNNING"), ("TIMEOU+", "TIMEOUT"),
          ("INVALID", None), ("EXPLODED", None), ("", None), (None, None), ("CO+", None)]


@pytest.mark.parametrize("raw,state", STATES)
def test_state_normalisation(raw, state):
    assert one(col([raw]), common.state_expr(pl.col("x"))) == [state]
    assert common.normalise_state(raw) == state
    assert state is None or state in common.schema.STATES


# ------------------------------------------------------------------------------------------------ timestamps
def test_timestamps_default_to_utc_and_tokens_are_null():
    df = col(["2026-11-01T10:00:00", "Unknown", "None", "", None, "2026-13-01T00:00:00", "1700000000"])
    value = common.timestamp_expr(pl.col("x"))
    got = one(df, value)
    assert got[:5] == [dt.datetime(2026, 11, 1, 10, tzinfo=UTC), None, None, None, None]
    assert got[5] is None
    assert got[6] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)  # epoch 1.7e9
    assert one(df, common.unparsed(pl.col("x"), value, common.TIME_NULL)) == [False] * 5 + [True, False]


def test_timestamps_in_a_local_zone():
    df = col(["2026-07-01T12:00:00", "2026-01-15T12:00:00", "2026-03-29T02:30:00", "2026-10-25T02:30:00"])
    got = one(df, common.timestamp_expr(pl.col("x"), tz="Europe/Berlin"))
    assert got[0] == dt.datetime(2026, 7, 1, 10, tzinfo=UTC)   # CEST = UTC+2
    assert got[1] == dt.datetime(2026, 1, 15, 11, tzinfo=UTC)  # CET = UTC+1
    assert got[2] is None                                       # does not exist (clocks jump 02:00 -> 03:00)
    assert got[3] == dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # ambiguous: the earlier (CEST) instant


# ------------------------------------------------------------------------------------------------ class, comment
@pytest.mark.parametrize("qos,name,gpus,cls", [
    ("training", "whatever", 0, "training"), ("Debug", "train", 8, "debug"), ("normal", "bash", 1, "interactive"),
    ("normal", "jupyter-lab", 1, "interactive"), ("normal", "eval_ckpt", 1, "eval"), ("high", "prep_data", 0, "dataprep"),
    ("normal", "llama-sft-v2", 8, "training"), ("normal", "sweep", 8, "training"), ("normal", "sweep", 4, "batch"),
    (None, None, None, "batch"), ("normal", "my_debug_run", 1, "debug"),
])
def test_job_class(qos, name, gpus, cls):
    assert common.job_class(qos, name, gpus) == cls
    df = pl.DataFrame({"q": [qos], "n": [name], "g": [gpus]}, schema={"q": pl.String, "n": pl.String, "g": pl.Float64})
    assert one(df, common.job_class_expr(pl.col("q"), pl.col("n"), pl.col("g"))) == [cls]


def test_comment_key_values():
    text = "min_runtime_s=28800 team=nlp;prio=high"
    assert common.parse_comment(text) == {"min_runtime_s": "28800", "team": "nlp", "prio": "high"}
    df = col([text, "x min_runtime_s=60", "no_min_runtime_s=5", None])
    assert one(df, common.comment_value_expr(pl.col("x"), "min_runtime_s")) == ["28800", "60", None, None]


def test_on_distinct_keeps_row_order_and_maps_nulls():
    df = col(["b", None, "a", "b"])
    out = common.on_distinct(df, "x", {"u": pl.col("x").str.to_uppercase(), "n": pl.col("x").is_null()})
    assert out["u"].to_list() == ["B", None, "A", "B"]
    assert out["n"].to_list() == [False, True, False, False]


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
    assert p.rejects.select("line", "field").rows() == [(3, "Submit")]  # 02:30 does not exist that night
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
             "from dashboard.commands import ingest\n"
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
