"""The Philly job-attempts format (``queries/ingest/philly.py``): the hand-made fixture with hand-computed rows,
bad input, fuzzed records, and the real published subset against an independent count."""
from __future__ import annotations

import datetime as dt
import gzip
import json
import re

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from queries.ingest import IngestError, ingest
from queries.ingest.pipeline import detect_format, parse_file
from queries.store import Store

from tests.queries.ingest.test_ingest_fuzz import FIX as FIXTURES, HOSTILE_JSON, mutate_json

FIX = FIXTURES / "philly" / "jobs.json"
UTC = dt.timezone.utc


def _t(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)


def test_fixture_rows_by_hand():
    fmt, parsed = parse_file(FIX)
    assert fmt == "philly" and detect_format(FIX) == "philly"
    assert (parsed.rows_read, parsed.rows_accepted, parsed.rejects.height) == (7, 3, 4)
    jobs = parsed.jobs.sort("submit", "job_id")
    got = {r["job_id"]: r for r in jobs.iter_rows(named=True)}
    assert sorted(got) == ["application_1_0001", "application_1_0002", "application_1_0002;1",
                           "application_1_0002;2", "application_1_0003"]
    one = got["application_1_0001"]
    assert (one["state"], one["submit"], one["start"], one["end"], one["elapsed_s"], one["req_gpus"]) == (
        "COMPLETED", _t("2017-10-01 00:00:00"), _t("2017-10-01 00:10:00"), _t("2017-10-01 01:10:00"), 3600.0, 8.0)
    # three attempts: each a run submitted when the one before it went back to the queue
    p1, p2, last = got["application_1_0002;1"], got["application_1_0002;2"], got["application_1_0002"]
    assert (p1["state"], p1["submit"], p1["start"], p1["elapsed_s"]) == (
        "PREEMPTED", _t("2017-10-01 01:00:00"), _t("2017-10-01 02:00:00"), 1800.0)
    assert (p2["state"], p2["submit"], p2["start"], p2["elapsed_s"]) == (
        "PREEMPTED", _t("2017-10-01 02:30:00"), _t("2017-10-01 02:31:00"), 3600.0)
    assert (last["state"], last["submit"], last["start"], last["end"], last["elapsed_s"]) == (
        "COMPLETED", _t("2017-10-01 03:31:00"), _t("2017-10-01 05:31:00"), _t("2017-10-01 06:00:00"), 1740.0)
    # the job's GPU-seconds are its attempts' (the record's "runtime", 999 min, is not read)
    assert sum(got[k]["elapsed_s"] * got[k]["req_gpus"] for k in got if k.startswith("application_1_0002")) \
        == 4 * (1800 + 3600 + 1740)
    never = got["application_1_0003"]
    assert (never["state"], never["start"], never["end"], never["elapsed_s"], never["alloc_gpus"]) == (
        "CANCELLED", None, _t("2017-10-02 00:00:00"), 0.0, None)
    assert parsed.cluster == "philly"
    assert "user" not in jobs.columns or jobs["user"].is_null().all()  # the record names no user
    rej = {r["line"]: (r["field"], r["reason"]) for r in parsed.rejects.iter_rows(named=True)}
    assert rej == {
        29: ("attempts[1].end_time", "end before start"),
        38: ("id", "duplicate id application_1_0001"),
        45: ("num_gpus", "not a whole number: 2.5"),
        51: ("attempts[2].start_time", "start before attempt 1 ended"),
    }
    raw = parsed.rejects.filter(pl.col("line") == 45)["raw"][0]
    assert json.loads(raw)["id"] == "application_1_0005"


def test_ingest_into_a_store_counts_and_keeps_rejects(tmp_path):
    store = tmp_path / "s"
    (summary,) = ingest([FIX], store)
    assert (summary.rows_read, summary.rows_accepted, summary.rows_rejected, summary.jobs) == (7, 3, 4, 5)
    s = Store(store)
    jobs = s.read("jobs")
    assert set(jobs["cluster"]) == {"philly"} and set(jobs["source"]) == {"philly"}
    assert s.read("rejects").height == 4


@pytest.mark.parametrize("text, line, needle", [
    (b"", 1, "not a JSON array"),
    (b'{"jobs": []}', 1, "not a JSON array"),
    (b'[\n {"id": "a", "num_gpus": 1, "submitted_time": "2017-10-01 00:00:00", "attempts": []},\n {"id": ',
     3, "invalid JSON"),
    (b'[\n {"id": "a", "num_gpus": 1, "submitted_time": "2017-10-01 00:00:00", "attempts": []}\n {}]', 3,
     "expected ',' or ']'"),
    (b'[\n {"id": "a", "num_gpus": 0, "submitted_time": "2017-10-01 00:00:00", "attempts": []}]', 2,
     "no valid Philly job record"),
])
def test_a_file_that_cannot_be_read_stops_with_one_line_and_leaves_the_store(tmp_path, text, line, needle):
    store = tmp_path / "s"
    ingest([FIX], store)
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    bad = tmp_path / "bad.json"
    bad.write_bytes(text)
    with pytest.raises(IngestError) as err:
        ingest([bad], store, fmt="philly")
    msg = str(err.value)
    assert msg.startswith(f"{bad}:{line}:") and needle in msg and "\n" not in msg
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_gzip_and_empty_array(tmp_path):
    gz = tmp_path / "jobs.json.gz"
    gz.write_bytes(gzip.compress(FIX.read_bytes()))
    assert parse_file(gz)[1].jobs.height == 5
    empty = tmp_path / "empty.json"
    empty.write_text("[ ]")
    parsed = parse_file(empty, "philly")[1]
    assert (parsed.rows_read, parsed.jobs.height) == (0, 0)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzzed_records_are_counted_and_never_crash(tmp_path_factory, data):
    """Hostile values anywhere in a record: every record is accepted or rejected with a reason, or the whole
    file is refused with one line naming it."""
    records = json.loads(FIX.read_text())
    doc, _ = mutate_json(data.draw, {"r": records}, records=lambda d: d["r"], top="zz",
                         add_keys=("id", "num_gpus", "attempts", "start_time", "end_time", "submitted_time", "zz"),
                         values=HOSTILE_JSON + ["2017-10-01 00:00:00", "2017-13-01 00:00:00", 0, -4, 8, [], {}])
    path = tmp_path_factory.mktemp("fz") / "jobs.json"
    path.write_text(json.dumps(doc["r"], indent=1))
    try:
        parsed = parse_file(path, "philly")[1]
    except IngestError as exc:
        assert str(exc).startswith(str(path)) and not re.search(r"[\x00-\x1f]", str(exc))
        return
    assert parsed.rows_read == len(doc["r"]) == parsed.rows_accepted + parsed.rejects.height
    assert parsed.rejects["reason"].str.len_chars().min() or parsed.rejects.height == 0
    assert parsed.jobs["job_id"].n_unique() == parsed.jobs.height


def test_the_published_subset(shared_data, tmp_path):
    path = shared_data / "gpu-clusters" / "philly-helios" / "philly_subset_jobs_attempts.json"
    records = json.loads(path.read_text())
    # independent count: one row per attempt, GPU-seconds as the attempts' durations x GPUs
    rows = sum(max(1, len(r["attempts"])) for r in records)
    gpu_s = sum((_t(a["end_time"]) - _t(a["start_time"])).total_seconds() * r["num_gpus"]
                for r in records for a in r["attempts"])
    (summary,) = ingest([path], tmp_path / "s")
    assert (summary.rows_read, summary.rows_accepted, summary.rows_rejected) == (len(records), len(records), 0)
    jobs = Store(tmp_path / "s").read("jobs")
    assert jobs.height == summary.jobs == rows
    assert jobs.select((pl.col("elapsed_s") * pl.col("req_gpus")).sum()).item() == pytest.approx(gpu_s, rel=1e-12)
    assert jobs.filter(pl.col("state") == "PREEMPTED").height == rows - len(records)


def test_simulate_replays_a_philly_file(tmp_path):
    """A job log: ``simulate --workload`` takes it through the format registry. On an empty 2 x 8-GPU cluster
    under FCFS every run starts when it is submitted, as in the record (by hand from the fixture)."""
    from dashboard.cli import main

    out = tmp_path / "sim"
    assert main(["simulate", "--workload", str(FIX), "--nodes", "2", "--gpus-per-node", "8", "--policy", "fcfs",
                 "--backfill", "none", "--out", str(out)]) == 0
    sim = pl.read_parquet(out / "jobs.parquet")
    ran = sim.filter(pl.col("start").is_not_null())
    assert sorted(ran["job_id"]) == ["application_1_0001", "application_1_0002", "application_1_0002;1",
                                     "application_1_0002;2"]
    assert (ran["start"] == ran["submit"]).all()
