"""Issue 13's reproducers: one hostile value rejects its own record (with field and reason), never the file;
absurd values are rejected against the documented limits in every format; an unreadable file is one line
naming it; a name that cannot be a directory never reaches the file system; an aborted transaction leaves no
file and raises nothing of its own. The fuzz suite (test_ingest_fuzz.py) generalises these."""
from __future__ import annotations

import gzip
import hashlib
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from queries.ingest import IngestError, detect_format, ingest, openb, sacct, sacct_json, swf
from queries.ingest import alibaba
from queries.store import Store, name_problem

REPO = Path(__file__).resolve().parents[3]
FIX = Path(__file__).resolve().parents[2] / "fixtures"
B = ('"job_id":1,"account":"a","partition":"p","state":{"current":["COMPLETED"]},'
     '"time":{"submission":1700000000,"start":1700000010,"end":1700000100}')
GOOD = '{"job_id":2,"user":"v","account":"a","partition":"p","state":{"current":["COMPLETED"]},' \
       '"time":{"submission":1700000000,"start":1700000010,"end":1700000100}}'


def tree_hash(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


# ------------------------------------------------------------------------------------ 1. sacct --json
@pytest.mark.parametrize("record,field,reason", [
    ('{' + B + ',"user":{"set":true,"number":1}}', "user", 'not a string: {"set": true, "number": 1}'),
    ('{' + B + ',"user":"u","name":5}', "name", "not a string: 5"),
    ('{' + B + ',"user":"u","comment":{"job":{"x":1}}}', "comment.job", 'not a string: {"x": 1}'),
    ('{"job_id":1,"account":"a","partition":"p","user":"u","state":{"current":["COMPLETED"]},'
     '"time":{"submission":1e300,"start":1700000010,"end":1700000100}}', "time.submission",
     "implausible epoch seconds: 1e+300"),
    ('{"job_id":1,"array":{"job_id":Infinity,"task_id":1}}', "array.job_id", "not a finite number: inf"),
    ('{' + B + ',"user":"u","tres":{"requested":"cpu=4"}}', "tres.requested",
     'not a list of TRES entries: "cpu=4"'),
    ('{' + B + ',"user":"u","time":[1]}', "time", "not a JSON object: [1]"),
    ('{' + B + ',"user":"\\ud800"}', "user", 'not valid Unicode text: "\\ud800"'),
    ('{' + B + ',"user":"u","cluster":"a\\u0000b"}', "cluster", "control character in cluster name"),
    ('{' + B + ',"user":"u","required":{"CPUs":1e30}}', "tres",
     "absurd size (> 1e6 CPUs/GPUs/nodes, > 1 EiB or > 100 years)"),
    ('{"job_id":99999999999999999999999,' + B[11:] + ',"user":"u"}', "job_id", "missing or non-numeric job id"),
])
def test_sacct_json_bad_record_rejects_only_itself(tmp_path, record, field, reason):
    """The issue's five reproducers and their kin: that record rejected with its reason, the good one kept."""
    f = tmp_path / "j.json"
    f.write_text('{"jobs":[' + record + "," + GOOD + '],"meta":{}}')
    p = sacct_json.parse(f)
    assert (p.rows_read, p.rows_accepted) == (2, 1)
    assert p.rejects.select("line", "field", "reason").rows() == [(1, field, reason)]
    assert p.rejects["raw"][0]
    assert p.jobs["job_id"].to_list() == ["2"] and p.jobs["user"].to_list() == ["v"]


def test_sacct_json_reproducer_through_the_cli(tmp_path):
    """Reproducer j3 end to end: exit 0, the summary counts it, the reject is stored."""
    f = tmp_path / "j3.json"
    f.write_text('{"jobs":[{' + B + ',"user":"u","comment":{"job":{"x":1}}}],"meta":{}}')
    r = subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", str(f), "--store", str(tmp_path / "s")],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "read 1 = accepted 0 + rejected 1" in r.stdout
    assert Store(tmp_path / "s").read("rejects")["field"].to_list() == ["comment.job"]


def test_deeply_nested_json_is_one_line_error(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text('{"jobs":[' + "[" * 100_000 + "]" * 100_000 + '],"meta":{}}')
    with pytest.raises(IngestError) as err:
        sacct_json.parse(f)
    assert "nested" in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------ 2 + 3. limits
def test_swf_huge_number_rejects_the_row_not_the_file(tmp_path):
    f = tmp_path / "big.swf"
    f.write_text("; MaxProcs: 100\n1 0 10 100 4 -1 -1 4 3600 -1 1 1e26 1 1 -1 -1 -1 -1\n"
                 "2 0 10 100 4 -1 -1 4 3600 -1 1 7 1 1 -1 -1 -1 -1\n"
                 "3 0 10 100 4 -1 -1 4 3600 9e30 1 7 1 1 -1 -1 -1 -1\n"
                 "4 0 10 100 4e7 -1 -1 4 3600 -1 1 7 1 1 -1 -1 -1 -1\n")
    p = swf.parse(f)
    assert (p.rows_read, p.rows_accepted) == (4, 1)
    assert p.rejects.select("line", "field", "reason").rows() == [
        (2, "user", "implausible number: 1e26"), (4, "req_memory", "implausible memory (> 1 EiB): 9e30"),
        (5, "alloc_procs", "implausible processor count: 4e7")]
    assert p.jobs["user"].to_list() == ["user7"]


def test_swf_absurd_header_is_one_line_error(tmp_path):
    f = tmp_path / "h.swf"
    f.write_text("; Version: 2.2\n; UnixStartTime: 99999999999999999999\n"
                 "1 0 10 100 4 -1 -1 4 3600 -1 1 7 1 1 -1 -1 -1 -1\n")
    with pytest.raises(IngestError) as err:
        swf.parse(f)
    assert (err.value.line, err.value.field) == (2, "UnixStartTime")
    f.write_text("; MaxProcs: 100000000000000000000000000\n1 0 10 100 4 -1 -1 4 3600 -1 1 7 1 1 -1 -1 -1 -1\n")
    with pytest.raises(IngestError) as err:
        swf.parse(f, procs_per_node=4)  # would build a node table of 2.5e25 rows
    assert (err.value.line, err.value.field) == (1, "MaxProcs")


def test_openb_huge_values_reject_their_row(tmp_path):
    head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
           "scheduled_time\n"
    f = tmp_path / "openb_pod_list_x.csv"
    f.write_text(head + "p1,1000,100,1,1000,V100,LS,Succeeded,0,2e27,10\n"
                        "p2,1000,100,1e26,1000,V100,LS,Succeeded,0,20,10\n"
                        "p3,1000,1e40,1,1000,V100,LS,Succeeded,0,20,10\n"
                        "p4,1000,100,1,1000,V100,LS,Succeeded,0,20,10\n")
    p = openb.parse_openb(f)
    assert (p.rows_read, p.rows_accepted) == (4, 1)
    assert p.rejects.select("line", "field", "reason").rows() == [
        (2, "deletion_time", "implausible value (> 100 years): 2e27"),
        (3, "num_gpu", "implausible value (> 1e6 CPUs/GPUs/tasks): 1e26"),
        (4, "memory_mib", "implausible value (> 1 EiB): 1e40")]
    assert p.jobs["req_gpus"].to_list() == [1.0]


def test_pai_huge_times_reject_the_row(tmp_path):
    f = tmp_path / "pai_job_table.csv"
    f.write_text("j1,i1,u1,Terminated,1e30,1e31\nj2,i2,u2,Terminated,10,20\n")
    p = alibaba.parse_pai(f)
    assert (p.rows_read, p.rows_accepted) == (2, 1)
    assert p.rejects.select("line", "field", "reason").rows() == [
        (1, "start_time", "implausible value (> 100 years): 1e30")]


def test_sacct_absurd_reqmem_is_rejected(tmp_path):
    """ReqMem 99999999999999999999999999 (MB) was stored as 1.05e32 bytes; the documented limit is 1 EiB."""
    f = tmp_path / "s.txt"
    f.write_text("JobID|User|State|Submit|Start|End|ReqMem|Timelimit\n"
                 "1|u|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00|99999999999999999999999999|01:00:00\n"
                 "2|u|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00|4G|01:00:00\n"
                 "3|u|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00|4G|99999999-00:00:00\n")
    p = sacct.parse(f)
    assert (p.rows_read, p.rows_accepted) == (3, 1)
    assert p.rejects["line"].to_list() == [2, 4]
    assert all("absurd size" in r for r in p.rejects["reason"])
    assert p.jobs["req_mem_bytes"].to_list() == [4 * 2**30]


# ------------------------------------------------------------------------------------ 4. corrupt gzip
def test_bit_flipped_gzip_is_one_line_error(tmp_path):
    body = "".join(f"{i} {i} 0 10 1 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n" for i in range(1, 2000)).encode()
    data = bytearray(gzip.compress(body, mtime=0))
    data[20] ^= 0x55  # inside the first deflate block header: zlib.error within the bytes detect_format reads
    f = tmp_path / "flip.swf.gz"
    f.write_bytes(bytes(data))
    store = tmp_path / "s"
    ingest([FIX / "swf" / "tiny.swf"], store)
    before = tree_hash(store)
    r = subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", str(f), "--store", str(store)],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and str(f) in r.stderr, r.stderr
    assert "gzip" in r.stderr and "Traceback" not in r.stderr
    assert tree_hash(store) == before
    g = tmp_path / "flip.csv.gz"
    g.write_bytes(bytes(data))
    with pytest.raises(IngestError) as err:
        detect_format(g)
    assert "gzip" in str(err.value)


# ------------------------------------------------------------------------------------ 5. names
@pytest.mark.parametrize("name,problem", [
    ("a\x00b", "control character in cluster name"), ("x" * 256, "cluster name longer than 200 bytes"),
    ("é" * 101, "cluster name longer than 200 bytes"), ("  ", "empty cluster name"), ("gpu/a100", None),
    ("x" * 200, None),
])
def test_name_problem(name, problem):
    assert name_problem(name) == problem
    assert pl.select(__import__("queries.store", fromlist=["x"]).name_problem_expr(pl.lit(name))).item() == problem


def test_bad_cluster_names_reject_rows_before_any_path(tmp_path):
    store = tmp_path / "s"
    ingest([FIX / "swf" / "tiny.swf"], store)
    before = tree_hash(store)
    f = tmp_path / "jobs.csv"
    f.write_text(f"job_id,submit,cluster\n1,2026-11-01T00:00:00Z,a\x00b\n2,2026-11-01T00:00:00Z,{'x' * 300}\n"
                 "3,2026-11-01T00:00:00Z,ok\n")
    (s,) = ingest([f], store)
    assert (s.rows_read, s.rows_accepted, s.rows_rejected) == (3, 1, 2)
    rej = Store(store).read("rejects").filter(pl.col("source_file") == str(f))
    assert rej.select("line", "field").rows() == [(2, "cluster"), (3, "cluster")]
    for bad in ("a\x00b", "y" * 300):  # the flag: refused before anything is read or written
        after = tree_hash(store)
        with pytest.raises(IngestError) as err:
            ingest([FIX / "swf" / "tiny.swf"], store, cluster=bad)
        assert err.value.field == "--cluster" and "\n" not in str(err.value)
        assert tree_hash(store) == after
    assert set(before) <= set(tree_hash(store))


def test_abort_never_raises_and_leaves_no_file(tmp_path):
    store = Store(tmp_path / "s")
    with store.transaction() as tx:
        tx.append("ingest_log", pl.DataFrame({"ingest_id": ["a"]}))
    before = tree_hash(store.root)
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction() as tx:
            tx.append("ingest_log", pl.DataFrame({"ingest_id": ["b"]}))
            tx.written.append(store.root / "bad\x00name.parquet")         # unlink: ValueError
            tx.written.append(store.root / ("n" * 300) / "x.parquet")     # unlink: ENAMETOOLONG
            raise RuntimeError("boom")
    assert tree_hash(store.root) == before


# ------------------------------------------------------------------------------------ 6. SWF line ends, empty
def test_swf_lone_cr_line_endings(tmp_path):
    text = (FIX / "swf" / "tiny.swf").read_text()
    f = tmp_path / "cr.swf"
    f.write_bytes(text.replace("\n", "\r").encode())
    lf = swf.parse(FIX / "swf" / "tiny.swf")
    cr = swf.parse(f)
    assert (cr.rows_read, cr.rows_accepted) == (lf.rows_read, lf.rows_accepted) and lf.rows_read > 0
    assert cr.jobs.equals(lf.jobs) and cr.cluster == lf.cluster
    assert cr.rejects.select("line", "field", "reason").equals(lf.rejects.select("line", "field", "reason"))


# mtime=0 and explicit ids: pytest-xdist workers must collect identical test ids.
@pytest.mark.parametrize("content", [b"", b"   \n\n", b"\xef\xbb\xbf", gzip.compress(b"", mtime=0),
                                     b"; Version: 2.2\n; MaxJobs: 0\n"],
                         ids=["empty", "blank-lines", "bom-only", "empty-gzip", "header-only"])
def test_swf_without_a_record_is_refused_like_every_format(tmp_path, content):
    f = tmp_path / ("e.swf.gz" if content[:2] == b"\x1f\x8b" else "e.swf")
    f.write_bytes(content)
    with pytest.raises(IngestError) as err:
        swf.parse(f)
    assert "no SWF record" in str(err.value) and err.value.line == 1


# ------------------------------------------------------------------------------------ 10. rejects once
def test_same_content_under_another_name_keeps_one_copy_of_each_reject(tmp_path):
    store = tmp_path / "s"
    a = tmp_path / "a.csv"
    a.write_bytes((FIX / "canonical" / "jobs.csv").read_bytes())
    b = tmp_path / "b.csv"
    b.write_bytes(a.read_bytes())
    (sa,) = ingest([a], store)
    n_jobs, n_rej = Store(store).read("jobs").height, Store(store).read("rejects").height
    assert n_rej == sa.rows_rejected > 0
    (sb,) = ingest([b], store)
    assert sb.rows_rejected == sa.rows_rejected  # the summary still counts what this file held
    rej = Store(store).read("rejects")
    assert (Store(store).read("jobs").height, rej.height) == (n_jobs, n_rej)
    assert set(rej["source_file"]) == {str(b)}  # the newer copy wins, as for jobs
    ingest([a], store)
    assert Store(store).read("rejects").height == n_rej


def test_error_messages_are_one_terminal_line():
    """A value quoted from the file (a CR, a NUL, an escape sequence, U+2028) is escaped, never printed raw."""
    msg = str(IngestError("f.swf", "bad value 'a\rb\x00c\x1b[31md\u2028e'\nnext", line=3, field="x"))
    assert msg == "f.swf:3: x: bad value 'a\\x0db\\x00c\\x1b[31md\\u2028e' next"


def test_csv_header_with_a_stray_cr_is_one_line_error(tmp_path):
    """Found by the fuzzer: csv.Error escaped from the header split."""
    f = tmp_path / "samples.csv"
    f.write_bytes(b"job_id,ts\r,cpu\n1,2026-01-01,1\n")
    with pytest.raises(IngestError) as err:
        ingest([f], tmp_path / "s", fmt="samples")
    assert err.value.line == 1 and "malformed header line" in str(err.value)
    assert not (tmp_path / "s").exists()


def test_sacct_cluster_column_that_cannot_be_a_directory_rejects_the_row(tmp_path):
    f = tmp_path / "s.txt"
    long = "c" * 201
    f.write_text("JobID|Cluster|User|State|Submit|Start|End\n"
                 f"1|{long}|u|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00\n"
                 "1|ok|u|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00\n")
    (s,) = ingest([f], tmp_path / "st", timezone="UTC")
    assert (s.rows_read, s.rows_accepted, s.rows_rejected) == (2, 1, 1)
    rej = Store(tmp_path / "st").read("rejects")
    assert rej.select("line", "field").rows() == [(2, "Cluster")] and rej["raw"][0].startswith("1|ccc")
    assert Store(tmp_path / "st").read("jobs")["cluster"].to_list() == ["ok"]


def test_sacct_json_meta_of_the_wrong_type_is_ignored(tmp_path):
    f = tmp_path / "j.json"
    f.write_text('{"jobs":[' + GOOD + '],"meta":[{"slurm":{"cluster":5}}]}')
    p = sacct_json.parse(f)
    assert (p.rows_accepted, p.cluster) == (1, None)
    f.write_text('{"jobs":[' + GOOD + '],"meta":{"slurm":{"cluster":5}}}')
    assert sacct_json.parse(f).cluster is None


def test_sacct_comment_min_runtime_that_is_no_duration_claims_nothing(tmp_path):
    f = tmp_path / "s.txt"
    rows = "".join(f"{i}|u|COMPLETED|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T11:00:00|min_runtime_s={v}\n"
                   for i, v in enumerate(["inf", "nan", "-5", "1e300", "3600"], 1))
    f.write_text("JobID|User|State|Submit|Start|End|Comment\n" + rows)
    p = sacct.parse(f)
    assert p.rows_accepted == 5
    assert p.jobs.sort("job_id")["min_runtime_s"].to_list() == [None, None, None, None, 3600.0]
