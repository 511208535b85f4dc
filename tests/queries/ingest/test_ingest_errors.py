"""Bad input through the real CLI (``python -m dashboard.cli ingest``): every file either ingests with
``read = accepted + rejected`` and its rejects kept, or the command exits non-zero with one stderr line naming
the file (and the line and field where there is one) and leaves the store as it was."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from queries.store import MANIFEST, Store

REPO = Path(__file__).resolve().parents[3]
FIX = Path(__file__).resolve().parents[2] / "fixtures"


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "QUOTALOOP_DEBUG"}
    return subprocess.run([sys.executable, "-m", "dashboard.cli", "ingest", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def store(tmp_path) -> Path:
    root = tmp_path / "store"
    r = cli(str(FIX / "swf" / "tiny.swf"), "--store", str(root))
    assert r.returncode == 0, r.stderr
    return root


def fails_cleanly(r: subprocess.CompletedProcess, store: Path, manifest: bytes, *needles: str) -> str:
    assert r.returncode != 0
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert "Traceback" not in r.stderr
    assert (store / MANIFEST).read_bytes() == manifest
    return lines[0]


def test_json_summary_parses_and_counts(tmp_path, store):
    r = cli(str(FIX / "canonical" / "jobs.csv"), str(FIX / "alibaba" / "openb" / "openb_pod_list_tiny.csv"),
            "--store", str(store), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(s["format"], s["rows_read"], s["rows_accepted"], s["rows_rejected"]) for s in out] == [
        ("csv", 14, 3, 11), ("openb", 11, 5, 6)]
    assert all(s["rows_read"] == s["rows_accepted"] + s["rows_rejected"] for s in out)
    rej = Store(store).read("rejects")
    assert rej.filter(pl.col("source_file").str.ends_with("jobs.csv")).height == 11
    assert rej.filter(pl.col("source_file").str.ends_with("openb_pod_list_tiny.csv")).height == 6


def test_unknown_format(tmp_path, store):
    manifest = (store / MANIFEST).read_bytes()
    path = tmp_path / "notes.txt"
    path.write_text("hello\nthis is not a scheduler export\n")
    fails_cleanly(cli(str(path), "--store", str(store)), store, manifest, f"{path}:1:", "unknown format")


def test_missing_required_column(tmp_path, store):
    manifest = (store / MANIFEST).read_bytes()
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,state,req_cpus\n1,COMPLETED,4\n")
    line = fails_cleanly(cli(str(path), "--store", str(store), "--format", "csv"), store, manifest)
    assert line == f"quotaloop ingest: {path}:1: submit: missing required column for a jobs table"


def test_unreadable_inputs(tmp_path, store):
    """Root can read any file whatever its mode, so use inputs no one can read: a directory, a symlink loop,
    and a file whose read() fails with EIO (/proc/self/mem at offset 0 is unmapped)."""
    manifest = (store / MANIFEST).read_bytes()
    d = tmp_path / "a_directory"
    d.mkdir()
    fails_cleanly(cli(str(d), "--store", str(store)), store, manifest, str(d), "cannot read")
    fails_cleanly(cli(str(d), "--store", str(store), "--format", "swf"), store, manifest, str(d), "cannot read")
    loop = tmp_path / "loop.swf"
    loop.symlink_to(loop)
    fails_cleanly(cli(str(loop), "--store", str(store)), store, manifest, str(loop))
    if Path("/proc/self/mem").exists():
        fails_cleanly(cli("/proc/self/mem", "--store", str(store), "--format", "swf"), store, manifest,
                      "/proc/self/mem", "cannot read")
    # a good file before the unreadable one in the same call is not written either
    fails_cleanly(cli(str(FIX / "canonical" / "nodes.csv"), str(d), "--store", str(store)), store, manifest, str(d))


def test_truncated_gzip_names_file_and_line(tmp_path, store):
    manifest = (store / MANIFEST).read_bytes()
    body = "".join(f"{i} {i} 0 10 1 10 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n" for i in range(1, 100_001))
    data = gzip.compress(body.encode())
    path = tmp_path / "cut.swf.gz"
    path.write_bytes(data[: int(len(data) * 0.8)])  # past the 64 KiB the format sniffer reads
    line = fails_cleanly(cli(str(path), "--store", str(store)), store, manifest, str(path), "truncated")
    complete = int(line.split("after ")[1].split(" complete")[0])
    assert f"{path}:{complete + 1}:" in line and complete > 1000


def test_non_utf8_bytes_reject_the_row(tmp_path, store):
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"job_id,submit,user\nj1,2024-01-01,ann\nj2,2024-01-01,b\xff\xfea\n")
    r = cli(str(path), "--store", str(store), "--json")
    assert r.returncode == 0, r.stderr
    [s] = json.loads(r.stdout)
    assert (s["rows_read"], s["rows_accepted"], s["rows_rejected"]) == (2, 1, 1)
    rej = Store(store).read("rejects").filter(pl.col("source_file") == str(path)).row(0, named=True)
    assert (rej["line"], rej["field"], rej["reason"]) == (2 + 1, "record", "invalid UTF-8 bytes")


def test_impossible_values_are_rejected_with_reason(tmp_path, store):
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,submit,start,end,req_cpus,req_mem_bytes,max_gpu_util,nodes\n"
                    "ok,2024-01-01T00:00:00Z,2024-01-01T00:01:00Z,2024-01-01T00:02:00Z,2,1e9,0.5,1\n"
                    "e1,2024-01-01T00:00:00Z,2024-01-01T00:02:00Z,2024-01-01T00:01:00Z,2,1e9,0.5,1\n"
                    "e2,2024-01-01T00:00:00Z,,,2e6,1e9,0.5,1\n"
                    "e3,2024-01-01T00:00:00Z,,,2,3e15,0.5,1\n"
                    "e4,2024-01-01T00:00:00Z,,,2,1e9,-0.1,1\n"
                    "e5,2024-01-01T00:00:00Z,,,2,1e9,0.5,-3\n"
                    "e6,2024-01-01T00:00:00Z,,,2,1e9,0.5,1.5\n")
    r = cli(str(path), "--store", str(store), "--json")
    assert r.returncode == 0, r.stderr
    [s] = json.loads(r.stdout)
    assert (s["rows_read"], s["rows_accepted"], s["rows_rejected"], s["jobs"]) == (7, 1, 6, 1)
    rej = Store(store).read("rejects").filter(pl.col("source_file") == str(path)).sort("line")
    assert rej["field"].to_list() == ["end", "req_cpus", "req_mem_bytes", "max_gpu_util", "nodes", "nodes"]
    assert rej["raw"][0].startswith("e1,")
    assert rej["reason"][-1] == "not an integer: 1.5"


def test_no_such_file_and_empty_file(tmp_path, store):
    manifest = (store / MANIFEST).read_bytes()
    fails_cleanly(cli(str(tmp_path / "nope.csv"), "--store", str(store)), store, manifest, "nope.csv", "no such file")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    fails_cleanly(cli(str(empty), "--store", str(store), "--format", "csv"), store, manifest, f"{empty}:1:", "empty")


def test_pai_table_without_job_table(tmp_path, store):
    manifest = (store / MANIFEST).read_bytes()
    task = FIX / "alibaba" / "pai" / "pai_task_table.csv"
    fails_cleanly(cli(str(task), "--store", str(store)), store, manifest, str(task), "pai_job_table")


# ------------------------------------------------------------------ Slurm exports through the CLI
SACCT = FIX / "sacct"


def _gzip_cut(path: Path, text: bytes, keep: float) -> int:
    """Write a gzip of ``text`` cut after ``keep`` of its bytes; return the lines that survive whole."""
    data = gzip.compress(text)
    cut = data[: int(len(data) * keep)]
    path.write_bytes(cut)
    import zlib

    return zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")


def test_truncated_sacct_gzip_names_file_and_line(tmp_path, store):
    manifest = (store / MANIFEST).read_bytes()
    lines = (SACCT / "gpu_cluster.txt").read_bytes().split(b"\n")
    body = b"\n".join([lines[0]] + [line for _ in range(4000) for line in lines[1:] if line]) + b"\n"
    path = tmp_path / "sacct.txt.gz"
    complete = _gzip_cut(path, body, 0.6)
    assert complete > 1000
    line = fails_cleanly(cli(str(path), "--store", str(store), "--format", "sacct"), store, manifest,
                         f"{path}:{complete + 1}:", "truncated")
    assert f"after {complete} complete lines" in line


def test_truncated_sacct_json_gzip_names_file_and_line(tmp_path, store, shared_data):
    manifest = (store / MANIFEST).read_bytes()
    src = shared_data / "sacct" / "sarc-json" / "versions" / "slurm_21_8_8.json"
    path = tmp_path / "sacct.json.gz"
    complete = _gzip_cut(path, src.read_bytes(), 0.5)
    fails_cleanly(cli(str(path), "--store", str(store), "--format", "sacct-json"), store, manifest,
                  f"{path}:{complete + 1}:", "truncated")


def test_sacct_missing_state_column_names_file_line_and_field(tmp_path, store):
    manifest = (store / MANIFEST).read_bytes()
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|Elapsed\n1|a|00:01:00\n")
    line = fails_cleanly(cli(str(path), "--store", str(store), "--format", "sacct"), store, manifest)
    assert line == f"quotaloop ingest: {path}:1: State: required column missing"


def test_sacct_rejects_through_the_cli(tmp_path, store):
    """bad_rows.txt: 17 data lines, 4 accepted, 13 rejected (hand-counted in tests/queries/ingest/test_ingest_sacct.py)."""
    src = SACCT / "bad_rows.txt"
    r = cli(str(src), "--store", str(store), "--cluster", "lab", "--json")
    assert r.returncode == 0, r.stderr
    [s] = json.loads(r.stdout)
    assert (s["format"], s["rows_read"], s["rows_accepted"], s["rows_rejected"], s["jobs"]) == ("sacct", 17, 4, 13, 2)
    rej = Store(store).read("rejects").filter(pl.col("source_file") == str(src)).sort("line")
    assert rej.height == 13 and set(rej["cluster"]) == {"lab"}
    assert rej.select("line", "field").row(0) == (4, None) and rej.select("line", "field").row(-1) == (19, "JobID")
    log = Store(store).read("ingest_log").filter(pl.col("source_file") == str(src)).row(0, named=True)
    assert (log["rows_read"], log["rows_accepted"], log["rows_rejected"]) == (17, 4, 13)
    # the plain summary line says the same
    plain = cli(str(src), "--store", str(store), "--cluster", "lab")
    assert plain.returncode == 0, plain.stderr
    # ... and names the three commonest reasons (most frequent first, then by first line), counted here by hand
    counts: dict[str, list[int]] = {}
    for line, reason in rej.select("line", "reason").iter_rows():
        counts.setdefault(reason, []).append(line)
    top = sorted(counts.items(), key=lambda kv: (-len(kv[1]), min(kv[1]), kv[0]))[:3]
    assert len(top) == 3
    why = "".join(f"; {len(lines)} rejected: {reason} (first at line {min(lines)})" for reason, lines in top)
    assert plain.stdout.strip() == (f"{src}: sacct: read 17 = accepted 4 + rejected 13; 2 jobs, 0 samples, 0 nodes;"
                                    " local times read in UTC (this machine's zone; pass --timezone to change)" + why)
    assert json.loads(cli(str(src), "--store", str(store), "--cluster", "lab", "--json").stdout)[0][
        "top_rejects"] == [[len(lines), min(lines), reason] for reason, lines in top]


def test_the_summary_names_the_commonest_reject_reasons():
    from queries.ingest.pipeline import FileSummary, top_rejects

    long = "x" * 300
    rejects = pl.DataFrame({"line": [9, 3, 5, 7, 2, 11, 4],
                            "field": [None] * 7,
                            "reason": ["b", "a", "b", "c\nd", "a", "b", long],
                            "raw": [""] * 7})
    top = top_rejects(rejects)
    # b three times (first at 5), a twice (first at 2), then the once-seen ones by first line: the long one (4)
    assert top == [[3, 5, "b"], [2, 2, "a"], [1, 4, "x" * 117 + "..."]]
    s = FileSummary("f.csv", "csv", "c", 10, 3, 7, 3, 0, 0, top_rejects=top_rejects(rejects, n=4))
    assert s.line().endswith("; 1 rejected: c d (first at line 7)")  # one line: the newline in a reason is a space
    assert top_rejects(rejects.clear()) == []
