"""SWF ingest: a hand-made log with hand-computed values, then the nine real Parallel Workloads Archive logs."""
from __future__ import annotations

import datetime as dt
import functools
import gzip
import re
import shutil
import statistics
import time
from pathlib import Path

import polars as pl
import pytest

from queries.ingest import IngestError, ingest, swf
from queries.store import Store

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "swf" / "tiny.swf"
T0 = dt.datetime(2001, 9, 9, 1, 46, 40, tzinfo=dt.timezone.utc)  # UnixStartTime 1000000000


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def by_id(parsed) -> dict[str, dict]:
    return {r["job_id"]: r for r in parsed.jobs.iter_rows(named=True)}


def test_tiny_log_values_by_hand():
    res = swf.parse(FIXTURE, procs_per_node=2)
    assert res.cluster == "tc-tiny"
    assert (res.rows_read, res.rows_accepted, res.rejects.height) == (12, 7, 5)
    jobs = by_id(res)
    assert set(jobs) == {"1", "2", "3", "4", "5-part1", "5", "10"}

    j = jobs["1"]  # 4 procs, 50 s CPU per proc, 1024 KB used / 2048 KB requested per proc
    assert (j["submit"], j["start"], j["end"]) == (at(0), at(10), at(110))
    assert (j["elapsed_s"], j["time_limit_s"], j["state"]) == (100.0, 200.0, "COMPLETED")
    assert (j["req_cpus"], j["alloc_cpus"], j["nodes"]) == (4.0, 4.0, 2)
    assert j["cpu_seconds_used"] == 200.0
    assert j["max_rss_bytes"] == 1024 * 1024 * 4 and j["req_mem_bytes"] == 2048 * 1024 * 4
    assert (j["user"], j["account"], j["job_name"], j["qos"], j["partition"]) == (
        "user1", "swf/group1", "app1", "batch", "main")

    j = jobs["2"]  # fractional times, wait -1 (start = submit), requested procs -1 (falls back to allocated)
    assert (j["submit"], j["start"], j["end"]) == (at(5.5), at(5.5), at(35.75))
    assert (j["state"], j["req_cpus"], j["time_limit_s"], j["account"]) == ("FAILED", 1.0, None, None)
    assert (j["qos"], j["partition"], j["job_class"]) == ("interactive", "interactive", "interactive")
    assert j["cpu_seconds_used"] is None and j["max_rss_bytes"] is None

    j = jobs["3"]  # cancelled before it ran: run -1, end = submit + wait
    assert (j["start"], j["end"], j["elapsed_s"], j["state"]) == (None, at(27), 0.0, "CANCELLED")
    assert (j["req_cpus"], j["alloc_cpus"], j["nodes"]) == (8.0, None, 4)

    j = jobs["4"]  # tab-separated, status -1 with a run time -> COMPLETED
    assert (j["state"], j["start"], j["end"], j["cpu_seconds_used"]) == ("COMPLETED", at(8), at(68), 120.0)

    part, final = jobs["5-part1"], jobs["5"]  # a checkpointed job: status 2 then 3
    assert (part["state"], part["start"], part["end"]) == ("PREEMPTED", at(10), at(50))
    assert (final["state"], final["start"], final["end"]) == ("COMPLETED", at(70), at(120))

    j = jobs["10"]  # queue 3 has no header name
    assert (j["qos"], j["partition"], j["cpu_seconds_used"], j["nodes"]) == ("queue3", "main", 45.0, 2)

    rej = {r["line"]: (r["field"], r["reason"]) for r in res.rejects.iter_rows(named=True)}
    assert rej[21] == ("record", "expected 18 fields, found 17")
    assert rej[22] == ("run", "not a number: abc")
    assert rej[23][0] == "run" and "negative" in rej[23][1]
    assert rej[24] == ("job", "duplicate job number (first at line 13)")
    assert rej[25] == ("status", "unknown status: 7")
    assert res.rejects.filter(pl.col("line") == 22)["raw"][0].startswith("7 12 0 abc")

    # MaxProcs 8 / 2 per node = 4 nodes (= MaxNodes; the text after MaxNodes' number is ignored)
    assert res.nodes["node"].to_list() == ["n00001", "n00002", "n00003", "n00004"]
    assert res.nodes["cpus"].to_list() == [2.0] * 4 and res.nodes["gpus"].to_list() == [0.0] * 4


def test_gpu_mode_maps_processors_to_gpus():
    jobs = by_id(swf.parse(FIXTURE, gpus_per_node=4))
    j = jobs["1"]
    assert (j["req_gpus"], j["alloc_gpus"], j["nodes"]) == (4.0, 4.0, 1)
    assert j["req_cpus"] is None and j["cpu_seconds_used"] is None
    assert j["mean_gpu_util"] == 0.5  # 50 s busy per processor over a 100 s run
    assert j["job_class"] == "training"
    assert jobs["3"]["nodes"] == 2  # 8 requested processors / 4 GPUs per node
    nodes = swf.parse(FIXTURE, gpus_per_node=4).nodes
    assert nodes.height == 2 and nodes["gpus"].to_list() == [4.0, 4.0]


def test_without_layout_options_no_nodes():
    res = swf.parse(FIXTURE)
    assert res.nodes.height == 0
    assert res.jobs["nodes"].null_count() == res.jobs.height


def test_gzip_equals_plain(tmp_path):
    gz = tmp_path / "tiny.swf.gz"
    gz.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    a, b = swf.parse(FIXTURE), swf.parse(gz)
    assert a.jobs.equals(b.jobs) and a.rejects.equals(b.rejects)


def test_truncated_gzip_names_the_line(tmp_path):
    body = "".join(f"{i} {i} 0 10 1 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n" for i in range(1, 200_001))
    data = gzip.compress(body.encode())
    path = tmp_path / "cut.swf.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(IngestError) as err:
        swf.parse(path)
    assert err.value.line is not None and 1 < err.value.line < 200_000
    assert "truncated" in str(err.value) and str(path) in str(err.value)


def test_invalid_utf8_rejects_only_that_line(tmp_path):
    path = tmp_path / "bad.swf"
    lines = FIXTURE.read_bytes().split(b"\n")
    lines[12] = lines[12].replace(b" 1 -1 -1", b" 1 \xff\xfe -1")  # line 13 (job 1)
    path.write_bytes(b"\n".join(lines))
    res = swf.parse(path)
    row = res.rejects.filter(pl.col("line") == 13).row(0, named=True)
    assert (row["field"], row["reason"]) == ("record", "invalid UTF-8 bytes")
    # with line 13 gone, line 24 is no longer a duplicate of job 1: it is job 1 now
    assert (res.rows_read, res.rows_accepted, res.rejects.height) == (12, 7, 5)
    assert 24 not in res.rejects["line"].to_list()
    assert by_id(res)["1"]["submit"] == at(14)


def test_missing_or_implausible_times_rejected(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text("1 0 0 10 1 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n"
                    "2 -1 0 10 1 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n"
                    "3 1e12 0 10 1 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n"
                    "4 5 0 10 1.5 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n")
    res = swf.parse(path)
    assert res.cluster is None and res.jobs["submit"][0] == dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert [(r["line"], r["field"]) for r in res.rejects.iter_rows(named=True)] == [
        (2, "submit"), (3, "submit"), (4, "alloc_procs")]
    assert res.rejects["reason"].to_list() == [
        "submit time missing", "implausible time in seconds: 1e12", "not an integer: 1.5"]


def test_used_memory_equal_to_the_request_is_said_at_ingest(tmp_path):
    """HPC2N records the requested memory as the used one for 170k of 178k jobs: the summary says so when at
    least half of the jobs stating both fields state them equal (jobs missing either do not count)."""
    row = "{job} 0 0 10 1 10 {used} 1 60 {req} 1 1 1 1 1 1 -1 -1\n"
    path = tmp_path / "m.swf"
    path.write_text(row.format(job=1, used=100, req=100) + row.format(job=2, used=50, req=100)
                    + row.format(job=3, used=-1, req=100) + row.format(job=4, used=70, req=70))
    assert swf.parse(path).notes == [
        "2 of 3 jobs state a used memory equal to their requested memory (fields 7 and 10): likely the limit "
        "recorded as the use, so their memory efficiency reads 100 %"]
    path.write_text(row.format(job=1, used=100, req=100) + row.format(job=2, used=50, req=100)
                    + row.format(job=3, used=60, req=100))
    assert swf.parse(path).notes == []


def test_records_without_a_wait_are_said_at_ingest(tmp_path):
    """Field 3 = -1 reads as wait 0 (LLNL-Atlas, NASA-iPSC): the summary says how many started jobs had none.
    A never-run job (run -1) does not count; a log whose every wait is known gets no note."""
    row = "{job} 0 {wait} {run} 1 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n"
    path = tmp_path / "w.swf"
    path.write_text(row.format(job=1, wait=-1, run=10) + row.format(job=2, wait=-1, run=5)
                    + row.format(job=3, wait=-1, run=-1))
    assert swf.parse(path).notes == ["no record states its wait (field 3 is -1 in every started job): waits read "
                                     "as 0, so wait figures describe nothing of this log"]
    path.write_text(row.format(job=1, wait=-1, run=10) + row.format(job=2, wait=30, run=5))
    assert swf.parse(path).notes == ["1 of 2 started jobs state no wait (field 3 is -1): read as 0"]
    (summary,) = ingest([path], tmp_path / "s")
    assert summary.line().endswith("; 1 of 2 started jobs state no wait (field 3 is -1): read as 0")
    path.write_text(row.format(job=1, wait=0, run=10) + row.format(job=2, wait=-1, run=-1))
    assert swf.parse(path).notes == []


def test_not_swf_raises(tmp_path):
    path = tmp_path / "x.swf"
    path.write_text("job_id,submit\n1,2024-01-01\n")
    with pytest.raises(IngestError) as err:
        swf.parse(path)
    assert err.value.line == 1 and err.value.field == "record"


def test_sniff():
    head = FIXTURE.read_bytes()
    assert swf.sniff(head, "anything.log")
    assert swf.sniff(b"", "x.swf.gz")
    assert not swf.sniff(b"job_id,submit\n1,2\n3,4\n", "jobs.csv")


# ---------------------------------------------------------------------------------------------- real logs
def _header(path: Path) -> tuple[dict[str, int], int, int]:
    """Independent reading of the header and a plain count of data lines (no polars, no parser code)."""
    values, removed, records = {}, 0, 0
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.startswith(";"):
                m = re.match(r";\s*(MaxJobs|MaxRecords):\s*(\d+)", line)
                if m:
                    values[m.group(1)] = int(m.group(2))
                m = re.search(r"\((\d+) jobs removed\)", line)
                if m:
                    removed += int(m.group(1))
            elif line.strip():
                records += 1
    return values, removed, records


SWF_FILES = ["CTC-SP2-1996-3.1-cln", "HPC2N-2002-2.2-cln", "KTH-SP2-1996-2.1-cln", "LANL-CM5-1994-4.1-cln",
             "LLNL-Atlas-2006-2.1-cln", "NASA-iPSC-1993-3.1-cln", "OSC-Clust-2000-3.1-cln", "SDSC-Par-1996-3.1-cln",
             "SDSC-SP2-1998-4.2-cln"]


@functools.lru_cache(maxsize=None)
def _parse_real(path: Path):
    return swf.parse(path)


@pytest.mark.parametrize("name", SWF_FILES)
def test_real_log_job_counts_match_header(shared_data, name):
    """Every line parses. The header's MaxJobs is the *uncleaned* log's count: the cleaned file holds
    MaxJobs minus the jobs its ``(N jobs removed)`` filter notes list. MaxRecords was updated to the cleaned count
    only in HPC2N, KTH and SDSC-SP2; in the other six it still equals MaxJobs."""
    path = shared_data / "swf" / f"{name}.swf.gz"
    res = _parse_real(path)
    header, removed, records = _header(path)
    assert res.rejects.height == 0
    assert res.rows_read == res.rows_accepted == records == res.jobs.height
    assert res.jobs.height == header["MaxJobs"] - removed
    if header["MaxRecords"] != header["MaxJobs"]:
        assert res.jobs.height == header["MaxRecords"]
    assert res.jobs["job_id"].n_unique() == res.jobs.height
    assert res.jobs["submit"].min() > dt.datetime(1990, 1, 1, tzinfo=dt.timezone.utc)


def test_real_logs_have_distinct_cluster_slugs(shared_data):
    slugs = {name: _parse_real(shared_data / "swf" / f"{name}.swf.gz").cluster for name in SWF_FILES}
    assert len(set(slugs.values())) == len(SWF_FILES), slugs
    assert slugs["HPC2N-2002-2.2-cln"] == "hpc2n-seth" and slugs["LLNL-Atlas-2006-2.1-cln"] == "llnl-atlas"


def test_hpc2n_domain_facts(shared_data):
    """DOMAIN.md section 8: used/allocated core-seconds ~0.96 on HPC2N; median job runs 47 % of its requested
    time and 38 % run less than a fifth of it. Checked against a plain-Python pass over the raw file."""
    path = shared_data / "swf" / "HPC2N-2002-2.2-cln.swf.gz"
    used = alloc = 0.0
    ratios = []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.startswith(";") or not line.strip():
                continue
            f = [float(x) for x in line.split()]
            run, procs, cpu, req_t = f[3], f[4], f[5], f[8]
            if cpu >= 0 and procs >= 0 and run >= 0:
                used += cpu * procs
                alloc += run * procs
            if req_t > 0 and run >= 0:
                ratios.append(run / req_t)
    jobs = _parse_real(path).jobs
    known = jobs.filter(pl.col("cpu_seconds_used").is_not_null())
    ratio_parsed = known["cpu_seconds_used"].sum() / (known["elapsed_s"] * known["alloc_cpus"]).sum()
    assert ratio_parsed == pytest.approx(used / alloc, rel=1e-9)
    assert ratio_parsed == pytest.approx(0.96, abs=0.01)

    est = jobs.filter(pl.col("time_limit_s") > 0).select(pl.col("elapsed_s") / pl.col("time_limit_s"))
    est = est.to_series()
    assert est.len() == len(ratios)
    assert est.median() == pytest.approx(statistics.median(ratios), abs=1e-12)
    assert est.median() == pytest.approx(0.47, abs=0.01)
    assert (est < 0.2).mean() == pytest.approx(0.38, abs=0.01)


def test_hpc2n_ingest_into_store_end_to_end(shared_data, tmp_path):
    src = tmp_path / "HPC2N-2002-2.2-cln.swf.gz"
    shutil.copy(shared_data / "swf" / src.name, src)
    t0 = time.perf_counter()
    [summary] = ingest([src], tmp_path / "store", procs_per_node=2)
    took = time.perf_counter() - t0
    print(f"\nHPC2N: {summary.rows_read} rows parsed + stored in {took:.2f} s")
    assert (summary.rows_read, summary.rows_accepted, summary.rows_rejected) == (202_871, 202_871, 0)
    assert summary.format == "swf" and summary.cluster == "hpc2n-seth"
    store = Store(tmp_path / "store")
    jobs = store.read("jobs")
    assert jobs.height == 202_871 and jobs["cluster"].unique().to_list() == ["hpc2n-seth"]
    nodes = store.read("nodes")
    assert nodes.height == 120 and nodes["cpus"].sum() == 240  # MaxProcs 240 at 2 per node


# ------------------------------------------------------------------ the CSV fast path (swf._numbers)
PLAIN = """; UnixStartTime: 1000000000
; MaxProcs: 8
   1    0   10  100  4  50 1024  4  200 2048  1  1  1  1  1  1 -1 -1
   2  5.5   -1 30.25 1  -1   -1 -1   -1   -1  0  2 -1 -1  2 -1 -1 -1
   3    7  -20   -1 -1  -1   -1  8  500   -1  5  1  1  2  1  1 -1 -1
   4    8    0   60 2.5 60   -1  2   60   -1 -1  3  2  1  1  1 -1 -1
   5   10    0   40  2  40   -1  2  100   -1  2  1  1  1  1  1 -1 -1
   5   10   60   50  2  50   -1  2  100   -1  3  1  1  1  1  1 -1 -1
   1   14    0   10  1  10   -1  1   60   -1  1  1  1  1  1  1 -1 -1
   9   15    0   10  1  10   -1  1   60   -1  7  1  1  1  1  1 -1 -1
  10  16.   .5  -.0 3.  15   -1 03   60   -1  1  4  1  1  3  1 -1 -1
"""


def _same_parsed(a, b) -> None:
    assert (a.rows_read, a.rows_accepted, a.cluster, a.time_zone) == (b.rows_read, b.rows_accepted, b.cluster,
                                                                      b.time_zone)
    for name in ("jobs", "rejects", "nodes"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.schema == y.schema and x.equals(y), name


def _tokenised(path, monkeypatch, **kw):
    """The parse with the fast path switched off: every record tokenised and cast (the reference)."""
    with monkeypatch.context() as m:
        m.setattr(swf, "_numbers", lambda raw: None)
        return swf.parse(path, **kw)


def test_plain_decimals_take_the_csv_path_and_keep_every_rule(tmp_path, monkeypatch):
    path = tmp_path / "plain.swf"
    path.write_text(PLAIN)
    raw = pl.Series([ln for ln in PLAIN.splitlines() if not ln.startswith(";")])
    nums = swf._numbers(raw)
    assert nums is not None and nums.shape == (9, 18)
    assert nums.row(8)[:5] == (10.0, 16.0, 0.5, -0.0, 3.0)  # "16." ".5" "-.0" "3." read as the cast reads them
    res = swf.parse(path, procs_per_node=2)
    # by hand: line 5 negative wait, line 6 fractional alloc_procs, line 9 job 1 again, line 10 status 7
    assert res.rejects.select("line", "field", "reason").rows() == [
        (5, "wait", "negative value other than -1: -20"), (6, "alloc_procs", "not an integer: 2.5"),
        (9, "job", "duplicate job number (first at line 3)"), (10, "status", "unknown status: 7")]
    assert (res.rows_read, res.rows_accepted) == (9, 5)
    assert set(res.jobs["job_id"]) == {"1", "2", "5-part1", "5", "10"}
    _same_parsed(res, _tokenised(path, monkeypatch, procs_per_node=2))


@pytest.mark.parametrize("bad", ["  11  12 -1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1",  # 17 fields
                                 "  11  12 -1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1 -1 5",  # 19
                                 "  11  1-2 -1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1 -1",  # not a number
                                 "  11  12 -1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1 --1",
                                 "  11  12 -1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1 1.2.3",
                                 "  11  12 -1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1 .",
                                 "  11  12\t-1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1 -1",  # a tab
                                 "  11  1e3 -1 -1 1 1 -1 1 1 -1 1 1 1 1 1 1 -1 -1"])
def test_anything_but_plain_decimals_falls_back_to_tokens(tmp_path, monkeypatch, bad):
    text = PLAIN + bad + "\n"
    raw = pl.Series([ln for ln in text.splitlines() if not ln.startswith(";")])
    assert swf._numbers(raw) is None  # 1e3 too: the cast reads it, the CSV path leaves it to the cast
    path = tmp_path / "odd.swf"
    path.write_text(text)
    res = swf.parse(path)
    assert res.rows_read == 10 and res.rows_accepted + res.rejects.height == 10
    _same_parsed(res, _tokenised(path, monkeypatch))


@pytest.mark.parametrize("name", SWF_FILES)
def test_real_logs_csv_path_equals_tokenised(shared_data, monkeypatch, name):
    """The fast path on every real log gives exactly what tokenising every record gives."""
    path = shared_data / "swf" / f"{name}.swf.gz"
    raw = pl.Series([ln for ln in gzip.open(path, "rt").read().split("\n")
                     if ln.strip() and not ln.strip().startswith(";")])
    assert swf._numbers(raw) is not None  # the logs are plain decimals: the CSV path is the one taken
    _same_parsed(_parse_real(path), _tokenised(path, monkeypatch))
