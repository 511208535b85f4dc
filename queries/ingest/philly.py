"""Microsoft Philly job records with their scheduling attempts (the ``jobs.json`` of the Philly trace analyses).

A JSON array of records ``{"id", "num_gpus", "submitted_time", "attempts": [{"start_time", "end_time"}, ...],
"runtime"}``, plain or gzip. Times are wall-clock ``YYYY-MM-DD HH:MM:SS`` without a zone; the trace states
none, so they are stored as written, read as UTC (``--timezone`` does not shift them).

Mapping (the decisions the format leaves open are here):
- One attempt is one run on the cluster. A job retried K times (preempted, or failed and restarted: the record
  does not say which) becomes K+1 rows, as the simulator writes a requeued job (queries/README.md, "Store
  layout"): every attempt but the last is a ``PREEMPTED`` row with job id ``ID;K`` (K = 1.. in attempt order),
  submitted when the job was (K = 1) or
  when the attempt before it ended (the moment it went back to the queue); the last attempt keeps ``ID``, is
  submitted likewise and is ``COMPLETED`` (the record holds no outcome; "ended" is the least wrong reading).
  So a row's wait is the time that run waited, and the rows' GPU-seconds add up to the job's.
- A record with no attempt never ran: one ``CANCELLED`` row, no start, ``end = submit``, ``elapsed_s = 0``.
- ``req_gpus = alloc_gpus = num_gpus``; ``job_class`` training (every record asks for GPUs). No user, team,
  node or usage field exists: ``user``, ``account``, ``nodes`` and every usage column stay null, so per-user
  figures and waste cannot be computed from this file alone (its GPU-seconds and waits can).
- ``runtime`` (minutes) is not read: in the published subset it differs from the attempts' summed durations for
  a quarter of the jobs (by up to 129 h), and the attempts are the primary record.
- Cluster ``philly`` (``Parsed.cluster``; ``--cluster`` wins).

``line`` in rejects is the 1-based line on which the record's ``{`` stands; ``raw`` the record re-serialised.
Records rejected (field, reason): not an object; a missing, empty or duplicate id; ``num_gpus`` missing, not a
whole number, below 1 or absurd; a submit, start or end time missing or not a time; ``attempts`` not a list or
an attempt not an object; an attempt ending before it starts, starting before the job was submitted, or before
the previous attempt ended. Text that is not a JSON array of values stops the ingest with the line it fails on.
Rows read = records = accepted + rejected.
"""
from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import polars as pl

from ..store import schema
from .canonical import read_text
from .limits import MAX_COUNT
from .pipeline import IngestError, Parsed

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_REJECT_SCHEMA = {"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String}


def sniff(head: bytes, name: str) -> bool:
    text = head.lstrip()
    return text.startswith(b"[") and b'"attempts"' in head and b'"submitted_time"' in head


class _Bad(Exception):
    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field, self.reason = field, reason


def _records(path: Path, text: str):
    """Yield (line, record) for each element of the top-level JSON array, in order."""
    dec = json.JSONDecoder()
    n, pos, line, counted = len(text), 0, 1, 0

    def skip(p: int) -> int:
        while p < n and text[p] in " \t\r\n":
            p += 1
        return p

    def line_at(p: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, p)
        counted = p
        return line

    pos = skip(pos)
    if pos >= n or text[pos] != "[":
        raise IngestError(path, "not a JSON array of Philly job records", line=line_at(min(pos, n)))
    pos = skip(pos + 1)
    if pos < n and text[pos] == "]":
        return
    while True:
        where = line_at(pos)
        try:
            value, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise IngestError(path, f"invalid JSON: {err.msg}", line=err.lineno) from None
        yield where, value
        pos = skip(pos)
        if pos < n and text[pos] == ",":
            pos = skip(pos + 1)
            continue
        if pos < n and text[pos] == "]":
            return
        raise IngestError(path, "invalid JSON: expected ',' or ']' after a record", line=line_at(min(pos, n)))


def _utf8(text: str) -> bool:
    """JSON may escape lone surrogates (``\\ud800``), which no UTF-8 file can store."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _time(value, field: str) -> dt.datetime:
    if not isinstance(value, str):
        raise _Bad(field, "required value missing" if value is None else f"not a time: {value!r}")
    try:
        return dt.datetime.strptime(value.strip(), TIME_FORMAT).replace(tzinfo=dt.timezone.utc)
    except ValueError:
        raise _Bad(field, f"not a time ({TIME_FORMAT}): {value!r}") from None


def _gpus(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad("num_gpus", "required value missing" if value is None else f"not a number: {value!r}")
    if not math.isfinite(value) or value != int(value):
        raise _Bad("num_gpus", f"not a whole number: {value!r}")
    if value < 1:
        raise _Bad("num_gpus", f"below 1: {value!r}")
    if value > MAX_COUNT:
        raise _Bad("num_gpus", f"absurd GPU count: {value!r}")
    return float(value)


def _rows(rec, seen: set) -> list[dict]:
    """The job rows of one record, or ``_Bad`` naming the first problem."""
    if not isinstance(rec, dict):
        raise _Bad("record", f"not an object: {type(rec).__name__}")
    job_id = rec.get("id")
    if job_id is None or (isinstance(job_id, str) and not job_id.strip()):
        raise _Bad("id", "required value missing")
    if not isinstance(job_id, (str, int)) or isinstance(job_id, bool):
        raise _Bad("id", f"not an id: {job_id!r}")
    job_id = str(job_id).strip()
    if not _utf8(job_id):
        raise _Bad("id", f"not valid Unicode: {job_id!r}")
    if job_id in seen:
        raise _Bad("id", f"duplicate id {job_id}")
    gpus = _gpus(rec.get("num_gpus"))
    submit = _time(rec.get("submitted_time"), "submitted_time")
    attempts = rec.get("attempts", [])
    if not isinstance(attempts, list):
        raise _Bad("attempts", f"not a list: {type(attempts).__name__}")
    runs = []
    queued_at = submit
    for k, att in enumerate(attempts, 1):
        if not isinstance(att, dict):
            raise _Bad(f"attempts[{k}]", f"not an object: {type(att).__name__}")
        start = _time(att.get("start_time"), f"attempts[{k}].start_time")
        end = _time(att.get("end_time"), f"attempts[{k}].end_time")
        if end < start:
            raise _Bad(f"attempts[{k}].end_time", "end before start")
        if start < queued_at:
            raise _Bad(f"attempts[{k}].start_time",
                       "start before submit" if k == 1 else f"start before attempt {k - 1} ended")
        runs.append((queued_at, start, end))
        queued_at = end
    seen.add(job_id)
    common = {"array_job_id": None, "job_class": "training", "req_gpus": gpus, "alloc_gpus": gpus}
    if not runs:
        return [{**common, "job_id": job_id, "state": "CANCELLED", "submit": submit, "start": None, "end": submit,
                 "elapsed_s": 0.0, "alloc_gpus": None}]
    last = len(runs)
    return [{**common, "job_id": job_id if k == last else f"{job_id};{k}",
             "state": "COMPLETED" if k == last else "PREEMPTED",
             "submit": queued, "start": start, "end": end, "elapsed_s": (end - start).total_seconds()}
            for k, (queued, start, end) in enumerate(runs, 1)]


def parse(path: str | Path, **_options) -> Parsed:
    """A Philly job-attempts JSON file; see the module docstring."""
    path = Path(path)
    text, bad_utf8 = read_text(path)
    rows: list[dict] = []
    rejects: list[dict] = []
    seen: set = set()
    n_read = 0
    for line, rec in _records(path, text):
        n_read += 1
        try:
            rows.extend(_rows(rec, seen))
        except _Bad as bad:
            rejects.append({"line": line, "field": bad.field, "reason": bad.reason,
                            "raw": json.dumps(rec, ensure_ascii=False, sort_keys=True)
                            .encode("utf-8", "backslashreplace").decode("utf-8")})
    rej = pl.DataFrame(rejects, schema=_REJECT_SCHEMA)
    n_ok = n_read - rej.height
    if n_read and n_ok == 0:
        first = rejects[0]
        raise IngestError(path, f"no valid Philly job record; first problem: {first['reason']}", line=first["line"],
                          field=first["field"])
    cols = {name: dtype for name, (dtype, _) in schema.JOBS.items()}
    wanted = ("job_id", "array_job_id", "job_class", "state", "submit", "start", "end", "elapsed_s", "req_gpus",
              "alloc_gpus")
    jobs = pl.DataFrame(rows, schema={c: cols[c] for c in wanted}) if rows else schema.empty("jobs")
    notes = ["text had invalid UTF-8 (replaced)"] if bad_utf8 else []
    return Parsed(rows_read=n_read, rows_accepted=n_ok, jobs=jobs, rejects=rej, cluster="philly", notes=notes)
