"""Canonical CSV/Parquet (the store's own schema): table choice by header, row-wise casting, impossible values."""
from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from queries.store import schema
from queries.ingest import IngestError, canonical, detect_format, ingest
from queries.store import Store

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "canonical"
UTC = dt.timezone.utc


def by(frame: pl.DataFrame, key: str) -> dict[str, dict]:
    return {r[key]: r for r in frame.iter_rows(named=True)}


def test_jobs_csv_values_and_rejects():
    res = canonical.parse_csv(FIX / "jobs.csv")
    assert (res.rows_read, res.rows_accepted, res.rejects.height) == (14, 3, 11)
    assert res.jobs.columns == list(schema.JOBS)  # extra_tool_column ignored
    jobs = by(res.jobs, "job_id")
    a1, a2, a3 = jobs["a1"], jobs["a2"], jobs["a3"]
    assert a1["submit"] == dt.datetime(2024, 3, 1, 10, tzinfo=UTC)
    assert a1["end"] == dt.datetime(2024, 3, 1, 11, 5, tzinfo=UTC)
    assert (a1["elapsed_s"], a1["state"], a1["cluster"], a1["req_mem_bytes"], a1["mean_gpu_util"]) == (
        3600.0, "COMPLETED", "c1", 8589934592.0, 0.25)
    # +02:00 offset converted to UTC; never started -> elapsed 0; empty cluster stays null (ingest fills it)
    assert (a2["submit"], a2["start"], a2["elapsed_s"], a2["cluster"]) == (
        dt.datetime(2024, 3, 1, 10, tzinfo=UTC), None, 0.0, None)
    assert a2["job_name"] == "name, with comma"
    # Unix seconds, a fractional end, a quoted name spanning two lines
    assert (a3["start"], a3["elapsed_s"], a3["job_name"]) == (
        dt.datetime(2024, 3, 1, 10, 1, tzinfo=UTC), 60.5, "multi\nline name")

    rej = {r["line"]: (r["field"], r["reason"], r["raw"]) for r in res.rejects.iter_rows(named=True)}
    assert rej[6] == ("req_cpus", "not a number: abc", "b1,2024-03-01T10:00:00Z,,,abc,,,,,,")
    assert rej[7][:2] == ("submit", "not a timestamp: yesterday")
    assert rej[8][:2] == ("end", "end before start")
    assert rej[9][0] == "req_cpus" and "negative" in rej[9][1]
    assert rej[10][0] == "req_cpus" and "> 1e6" in rej[10][1]
    assert rej[11][0] == "req_mem_bytes" and "1 PB" in rej[11][1]
    assert rej[12][0] == "mean_gpu_util" and "0..1" in rej[12][1]
    assert rej[13][:2] == ("state", "unknown state: EXPLODED")
    assert rej[14][:2] == ("record", "expected 11 fields, found 5")
    assert rej[15][:2] == ("job_id", "required value missing")
    assert rej[16][:2] == ("req_cpus", "not a number: nan")


def test_samples_and_nodes_csv():
    res = canonical.parse_csv(FIX / "samples.csv")
    assert (res.rows_read, res.rows_accepted, res.jobs.height, res.samples.height) == (4, 2, 0, 2)
    assert res.samples["cpu_used"].to_list() == [3.5, 2.0]
    assert {r["line"]: r["field"] for r in res.rejects.iter_rows(named=True)} == {4: "gpu_util", 5: "ts"}
    assert canonical.parse_samples(FIX / "samples.csv").samples.equals(res.samples)

    res = canonical.parse_csv(FIX / "nodes.csv")
    assert (res.rows_read, res.rows_accepted) == (4, 3)
    nodes = by(res.nodes, "node")
    assert (nodes["gpu001"]["gpus"], nodes["gpu001"]["mem_bytes"], nodes["gpu001"]["state"]) == (8.0, 2.0**40, "idle")
    assert res.rejects["field"].to_list() == ["cpus"]


def test_missing_required_column_names_field_and_line_1(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,state,req_cpus\n1,COMPLETED,4\n")
    with pytest.raises(IngestError) as err:
        canonical.parse_csv(path)
    assert (err.value.line, err.value.field) == (1, "submit")
    assert str(err.value).startswith(f"{path}:1: submit: ")

    path.write_text("node_name,cpus\nx,1\n")  # a nodes-like file without `node`
    with pytest.raises(IngestError) as err:
        canonical.parse_csv(path)
    assert (err.value.line, err.value.field) == (1, "node")

    path.write_text("alpha,beta\n1,2\n")
    with pytest.raises(IngestError, match="no column of the jobs, samples or nodes"):
        canonical.parse_csv(path)

    with pytest.raises(IngestError) as err:
        canonical.parse_samples(FIX / "jobs.csv")
    assert err.value.field == "ts"


def test_non_utf8_row_rejected_rest_kept(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"job_id,submit,user\nj1,2024-01-01,ann\nj2,2024-01-01,b\xe9a\nj3,2024-01-02,cy\n")
    res = canonical.parse_csv(path)
    assert (res.rows_read, res.rows_accepted) == (3, 2)
    assert res.rejects.select("line", "field", "reason").row(0) == (3, "record", "invalid UTF-8 bytes")


def test_gzip_csv(tmp_path):
    path = tmp_path / "jobs.csv.gz"
    path.write_bytes(gzip.compress((FIX / "jobs.csv").read_bytes()))
    assert canonical.parse_csv(path).jobs.equals(canonical.parse_csv(FIX / "jobs.csv").jobs)


def test_parquet_round_trip_and_row_rejects(tmp_path):
    good = canonical.parse_csv(FIX / "jobs.csv").jobs
    path = tmp_path / "jobs.parquet"
    good.write_parquet(path)
    res = canonical.parse_parquet(path)
    assert (res.rows_read, res.rows_accepted) == (3, 3)
    assert res.jobs.equals(good)

    # a tool's export with loose types: strings where numbers belong, naive timestamps, an out-of-range util
    loose = pl.DataFrame({
        "job_id": ["p1", "p2", "p3"],
        "submit": [dt.datetime(2024, 1, 1, 8), dt.datetime(2024, 1, 1, 9), dt.datetime(2024, 1, 1, 10)],
        "req_cpus": ["4", "abc", "2"],
        "mean_gpu_util": [0.5, 0.5, 2.0],
        "Unrelated": [1, 2, 3],
    })
    loose.write_parquet(path)
    res = canonical.parse_parquet(path)
    assert (res.rows_read, res.rows_accepted) == (3, 1)
    assert res.jobs.row(0, named=True)["submit"] == dt.datetime(2024, 1, 1, 8, tzinfo=UTC)  # naive = UTC
    rej = {r["line"]: r for r in res.rejects.iter_rows(named=True)}
    assert (rej[2]["field"], rej[2]["reason"]) == ("req_cpus", "not a number: abc")
    assert json.loads(rej[2]["raw"])["job_id"] == "p2"
    assert rej[3]["field"] == "mean_gpu_util"

    pl.DataFrame({"job_id": ["s1"], "ts": [dt.datetime(2024, 1, 1, tzinfo=UTC)], "gpu_util": [0.3]}).write_parquet(path)
    assert canonical.parse_samples(path).samples["gpu_util"].to_list() == [0.3]

    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"PAR1" + b"\0" * 64)
    with pytest.raises(IngestError, match="Parquet"):
        canonical.parse_parquet(bad)


def test_detection():
    assert detect_format(FIX / "jobs.csv") == "csv"
    assert detect_format(FIX / "nodes.csv") == "csv"
    assert detect_format(FIX / "samples.csv") == "samples"
    assert canonical.sniff_parquet(b"PAR1....", "x")
    assert not canonical.sniff_csv(b"sn,cpu_milli,memory_mib,gpu,model\n", "x.csv")


def test_clusters_in_the_file_are_kept_unless_overridden(tmp_path):
    store = tmp_path / "store"
    [s] = ingest([FIX / "jobs.csv"], store)
    assert (s.rows_read, s.rows_accepted, s.rows_rejected, s.cluster) == (14, 3, 11, "default")
    jobs = by(Store(store).read("jobs"), "job_id")
    assert {k: v["cluster"] for k, v in jobs.items()} == {"a1": "c1", "a2": "default", "a3": "c2"}
    assert {v["source"] for v in jobs.values()} == {"csv"}

    other = tmp_path / "other"
    ingest([FIX / "jobs.csv"], other, cluster="lab")
    assert set(Store(other).read("jobs")["cluster"]) == {"lab"}


def test_store_export_reingests_identically(tmp_path):
    """What the store holds, exported as Parquet and as CSV, re-ingests to the same rows."""
    first = tmp_path / "first"
    ingest([FIX / "jobs.csv", FIX / "samples.csv", FIX / "nodes.csv"], first, cluster="lab")
    st = Store(first)
    for table, fmt in (("jobs", "parquet"), ("samples", "parquet"), ("nodes", "csv")):
        original = st.read(table)
        export = tmp_path / f"{table}.{fmt}"
        original.write_parquet(export) if fmt == "parquet" else original.write_csv(export)
        again = tmp_path / f"again-{table}"
        ingest([export], again)
        back = Store(again).read(table)
        if table == "jobs":
            back, original = back.drop("source", "source_file"), original.drop("source", "source_file")
        key = {"jobs": "job_id", "samples": "ts", "nodes": "node"}[table]
        assert back.sort(key).equals(original.sort(key)), table


def test_crlf_ragged_and_malformed_quoting(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"job_id,submit,user\r\nj1,2024-01-01,ann\r\nj2,2024-01-01\r\n\r\nj3,2024-01-02,cy\r\n")
    res = canonical.parse_csv(path)  # no quote anywhere: one record per line
    assert (res.rows_read, res.rows_accepted) == (3, 2)
    assert res.jobs["user"].to_list() == ["ann", "cy"]
    assert res.rejects.select("line", "reason", "raw").row(0) == (3, "expected 3 fields, found 2", "j2,2024-01-01")

    path.write_text('job_id,submit,user\nj1,2024-01-01,"a"b\nj2,2024-01-01,"x\n\ny"\nj3,2024-01-02,"c ""d"""\n')
    res = canonical.parse_csv(path)  # a blank line inside quotes belongs to the field
    assert (res.rows_read, res.rows_accepted) == (3, 2)
    assert res.jobs["user"].to_list() == ["x\n\ny", 'c "d"']
    assert res.rejects.select("line", "field", "reason").row(0) == (2, "record", "malformed quoting")
