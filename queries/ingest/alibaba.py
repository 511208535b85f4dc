"""Alibaba GPU cluster trace PAI v2020 (``cluster-trace-gpu-v2020``); openb v2023 lives in ``openb``.

PAI v2020 (``parse_pai``): headerless CSV tables whose columns are given by the trace's ``*.header`` files.
A directory ingests every ``pai_<table>.csv[.gz]`` in it; a single file is recognised by its name, else by its
column count and content. Units (trace README): ``plan_cpu``/``cpu_usage`` are percent of a core (600 = 6
cores), ``plan_gpu``/``gpu_wrk_util`` percent of a GPU (50 = half a GPU), memory in GB (= GiB: the README's
29.296875 is 30000 MiB). Times are seconds minus a secret constant; the trace guarantees only that read as Unix
time in UTC+8 they keep the real time of day and weekday. We place them at ``PAI_EPOCH`` = 2020-07-02T00:00Z, a
whole number of weeks after 1970-01-01 (so both survive) and inside the trace's real July-August 2020.
Roll-up, one job per ``job_name`` (its ``job_id``):

- job table: ``submit = start_time``, ``end = end_time``, ``user``, state Terminated -> COMPLETED,
  Failed -> FAILED, Running -> RUNNING (no end), Waiting -> PENDING (no start, no end);
- task table: ``req_cpus = sum(plan_cpu/100 * inst_num)``, ``req_gpus = sum(plan_gpu/100 * inst_num)``
  (fractions kept), ``req_mem_bytes = sum(plan_mem GiB * inst_num)``, ``gpu_type`` of the task asking most
  GPUs; ``start`` = earliest task start (earliest instance start when no task has one); a null inst_num is 1;
- instance table: ``nodes`` = distinct machines, ``node_list`` = those machines, comma-separated;
- sensor table (one row per instance, lifetime means): ``cpu_seconds_used = sum(cpu_usage/100 * instance
  duration)`` (instance duration from the instance table, else the job's), ``max_rss_bytes`` and
  ``gpu_mem_used_bytes`` = sum over instances of their peaks (an upper bound of the job's peak),
  ``mean_gpu_util = sum(gpu_wrk_util * duration) / sum(plan_gpu * duration)``, ``max_gpu_util`` = highest
  instance ratio; both clipped to 0..1, null without a GPU request;
- ``pai_machine_spec`` -> nodes (cap_cpu, cap_mem GiB, cap_gpu, gpu_type; ``CPU`` machines get no GPU type).
Task/instance/sensor rows need the job table: in a directory without it they raise ``IngestError``, and rows
whose job is not in it are rejected. ``pai_group_tag_table`` and ``pai_machine_metric`` are not read.
The cluster is reported as ``pai``. A directory needs ``--format pai`` (format detection reads files).

Fields are split on commas without quote handling: neither trace quotes fields. Rows read = data lines;
every line is accepted or rejected (line number, field, reason, raw text).
"""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import polars as pl

from ..store import schema
from ..store.units import GIB, MIB
from .pipeline import IngestError, Parsed
from .canonical import BAD_UTF8, first_failure, read_text
from .limits import MAX_BYTES, MAX_COUNT, MAX_SECONDS

PAI_EPOCH = dt.datetime(2020, 7, 2, tzinfo=dt.timezone.utc)
PAI_TABLES = {
    "job": ("job_name", "inst_id", "user", "status", "start_time", "end_time"),
    "task": ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
             "plan_gpu", "gpu_type"),
    "instance": ("job_name", "task_name", "inst_name", "worker_name", "inst_id", "status", "start_time",
                 "end_time", "machine"),
    "sensor": ("job_name", "task_name", "worker_name", "inst_id", "machine", "gpu_name", "cpu_usage",
               "gpu_wrk_util", "avg_mem", "max_mem", "avg_gpu_wrk_mem", "max_gpu_wrk_mem", "read", "write",
               "read_count", "write_count"),
    "machine_spec": ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"),
}
PAI_NUMERIC = {
    "job": ("start_time", "end_time"),
    "task": ("inst_num", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu"),
    "instance": ("start_time", "end_time"),
    "sensor": ("cpu_usage", "gpu_wrk_util", "avg_mem", "max_mem", "avg_gpu_wrk_mem", "max_gpu_wrk_mem"),
    "machine_spec": ("cap_cpu", "cap_mem", "cap_gpu"),
}
PAI_REQUIRED = {"job": ("job_name", "start_time", "status"), "task": ("job_name",),
                "instance": ("job_name", "worker_name"), "sensor": ("job_name", "worker_name"),
                "machine_spec": ("machine",)}
PAI_STATUS = {"Terminated": "COMPLETED", "Failed": "FAILED", "Running": "RUNNING", "Waiting": "PENDING"}
# Numeric columns of both traces (PAI v2020 and openb v2023), by name: (factor to the limit's unit, limit, what).
# A value beyond its limit is corrupt input and rejects its row (it would also overflow a timestamp or a count).
_COUNT, _BYTES, _SECONDS = (MAX_COUNT, "1e6 CPUs/GPUs/tasks"), (MAX_BYTES, "1 EiB"), (MAX_SECONDS, "100 years")
LIMITS = {
    "inst_num": (1.0, *_COUNT), "plan_cpu": (0.01, *_COUNT), "plan_gpu": (0.01, *_COUNT), "cpu_usage": (0.01, *_COUNT),
    "gpu_wrk_util": (0.01, *_COUNT), "cap_cpu": (1.0, *_COUNT), "cap_gpu": (1.0, *_COUNT),
    "cpu_milli": (0.001, *_COUNT), "num_gpu": (1.0, *_COUNT), "gpu": (1.0, *_COUNT),
    **{c: (GIB, *_BYTES) for c in ("plan_mem", "avg_mem", "max_mem", "avg_gpu_wrk_mem", "max_gpu_wrk_mem",
                                   "cap_mem")},
    "memory_mib": (MIB, *_BYTES),
    **{c: (1.0, *_SECONDS) for c in ("start_time", "end_time", "creation_time", "deletion_time", "scheduled_time")},
}
_NAME = re.compile(r"pai_(job|task|instance|sensor|machine_spec|group_tag|machine_metric)(_table)?\b")


# ------------------------------------------------------------------ shared line splitting
def _split(path: Path, columns: tuple[str, ...], numeric: tuple[str, ...], required: tuple[str, ...],
           header: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split comma lines into string columns (numeric ones also cast to ``<name>__f``); check shape, numbers,
    required values. Returns (ok rows with ``line`` and ``raw``, rejects)."""
    text, bad_utf8 = read_text(path)
    lines = pl.DataFrame({"raw": text.split("\n")}).with_row_index("line", offset=1)
    lines = lines.with_columns(pl.col("line").cast(pl.Int64), pl.col("raw").str.strip_chars_end("\r"))
    lines = lines.filter(pl.col("raw").str.strip_chars() != "")
    if header and lines.height:
        lines = lines.slice(1)  # the caller checked the header line
    elif lines.height and lines["raw"][0].replace(" ", "") == ",".join(columns):
        lines = lines.slice(1)  # a headerless table that nevertheless starts with its header
    df = lines.with_columns(pl.col("raw").str.split(",").alias("__tok"))  # split once, not once per column
    df = df.with_columns(pl.col("__tok").list.len().alias("__n"), *[
        pl.col("__tok").list.get(i, null_on_oob=True).str.strip_chars().alias(c) for i, c in enumerate(columns)])
    df = df.with_columns(pl.when(pl.col(c) != "").then(pl.col(c)).alias(c) for c in columns)
    df = df.with_columns(pl.col(c).cast(pl.Float64, strict=False).alias(f"{c}__f") for c in numeric)
    checks = []
    if bad_utf8:
        checks.append((pl.col("raw").str.contains(BAD_UTF8, literal=True), "record", "invalid UTF-8 bytes"))
    checks.append((pl.col("__n") != len(columns), "record",
                   pl.format(f"expected {len(columns)} fields, found {{}}", pl.col("__n"))))
    for c in required:
        checks.append((pl.col(c).is_null(), c, "required value missing"))
    for c in numeric:
        f = pl.col(f"{c}__f")
        checks.append((pl.col(c).is_not_null() & (f.is_null() | ~f.is_finite()), c,
                       pl.format("not a number: {}", pl.col(c))))
        checks.append((f < 0, c, pl.format("negative value: {}", pl.col(c))))
        if c in LIMITS:
            factor, limit, what = LIMITS[c]
            checks.append((f * factor > limit, c, pl.format(f"implausible value (> {what}): {{}}", pl.col(c))))
    field, reason = first_failure(checks)
    df = df.with_columns(field.alias("__field"), reason.alias("__reason"))
    ok = df.filter(pl.col("__field").is_null())
    return ok, _rejects(df.filter(pl.col("__field").is_not_null()))


def _rejects(df: pl.DataFrame) -> pl.DataFrame:
    return df.select(pl.col("line"), pl.col("__field").alias("field"), pl.col("__reason").alias("reason"),
                     pl.col("raw"))


def _reject_where(ok: pl.DataFrame, cond: pl.Expr, field: str, reason) -> tuple[pl.DataFrame, pl.DataFrame]:
    reason = reason if isinstance(reason, pl.Expr) else pl.lit(reason)
    cond = cond.fill_null(False)  # a null comparison (missing value) is not a failure, and must not drop the row
    bad = ok.filter(cond).with_columns(pl.lit(field).alias("__field"), reason.alias("__reason"))
    return ok.filter(~cond), _rejects(bad)


def _ts(seconds: pl.Expr, epoch: dt.datetime) -> pl.Expr:
    return pl.lit(epoch).cast(schema.UTC_TS) + pl.duration(microseconds=(seconds * 1e6).round().cast(pl.Int64))


def _job_class(gpus: pl.Expr) -> pl.Expr:
    # Local rule until ingest/common.job_class lands: these traces carry no QoS class names we can map.
    return pl.when(gpus.fill_null(0) > 0).then(pl.lit("training")).otherwise(pl.lit("batch"))


def _no_valid(path: Path, n_read: int, n_ok: int, rej: pl.DataFrame, what: str) -> None:
    if n_read and n_ok == 0:
        first = rej.sort("line").row(0, named=True)
        raise IngestError(path, f"no valid {what} row; first problem: {first['reason']}", line=first["line"],
                          field=first["field"])


# ------------------------------------------------------------------ PAI v2020
def sniff_pai(head: bytes, name: str) -> bool:
    if _NAME.search(name) and name.endswith((".csv", ".csv.gz")):
        return True
    return _pai_table_of(head.split(b"\n", 1)[0].decode("utf-8", errors="replace")) is not None


def _pai_table_of(first_line: str) -> str | None:
    """Which PAI table a headerless line belongs to, by column count and content (None if none fits)."""
    f = [x.strip() for x in first_line.split(",")]
    if not f or not re.fullmatch(r"[0-9A-Za-z]+", f[0]):  # hashed names (hex) in the trace
        return None

    def num(i: int) -> bool:
        try:
            float(f[i])
        except (ValueError, IndexError):
            return f[i] == "" if i < len(f) else False
        return True

    if len(f) == 6 and f[3] in PAI_STATUS and num(4) and num(5):
        return "job"
    if len(f) == 10 and all(num(i) for i in (2, 4, 5, 6, 7, 8)):
        return "task"
    if len(f) == 9 and num(6) and num(7):
        return "instance"
    if len(f) == 16 and all(num(i) for i in range(6, 16)):
        return "sensor"
    if len(f) == 5 and all(num(i) for i in (2, 3, 4)) and f[2] != "":
        return "machine_spec"
    return None


def _pai_table_of_file(path: Path) -> str:
    m = _NAME.search(path.name)
    if m:
        table = m.group(1)
        if table not in PAI_TABLES:
            raise IngestError(path, f"pai_{table} carries no job, usage or node fields; it is not ingested")
        return table
    text, _ = read_text(path)
    first = next((ln for ln in text.split("\n") if ln.strip()), "")
    table = _pai_table_of(first)
    if table is None:
        raise IngestError(path, "not a PAI v2020 table: column count/content match none of "
                          + ", ".join(f"pai_{t}" for t in PAI_TABLES), line=1)
    return table


def parse_pai(path: str | Path, **_options) -> Parsed:
    """A PAI v2020 directory or table file; see the module docstring for the roll-up."""
    path = Path(path)
    if path.is_dir():
        files = {}
        for t in PAI_TABLES:
            found = [p for p in (path / f"pai_{t}_table.csv", path / f"pai_{t}.csv",
                                 path / f"pai_{t}_table.csv.gz", path / f"pai_{t}.csv.gz") if p.is_file()]
            if found:
                files[t] = found[0]
        if not files:
            raise IngestError(path, "directory holds no pai_<table>.csv file")
    else:
        files = {_pai_table_of_file(path): path}
    needs_job = [t for t in ("task", "instance", "sensor") if t in files]
    if needs_job and "job" not in files:
        raise IngestError(files[needs_job[0]], "PAI task/instance/sensor rows need pai_job_table.csv: "
                          "ingest the directory holding all tables")
    tables, rejs, n_read = {}, {t: [] for t in files}, 0
    for t, p in files.items():
        ok, rej = _split(p, PAI_TABLES[t], PAI_NUMERIC[t], PAI_REQUIRED[t], header=False)
        n_read += ok.height + rej.height
        tables[t] = ok
        rejs[t].append(rej)
    jobs = schema.empty("jobs")
    accepted = 0
    if "job" in tables:
        job = tables["job"]
        for cond, fld, why in (
            (~pl.col("status").is_in(list(PAI_STATUS)), "status", pl.format("unknown status: {}", pl.col("status"))),
            (pl.col("end_time__f") < pl.col("start_time__f"), "end_time", pl.lit("end_time before start_time")),
            (pl.int_range(pl.len()).over("job_name") > 0, "job_name", pl.lit("duplicate job_name")),
        ):
            job, rej = _reject_where(job, cond, fld, why)
            rejs["job"].append(rej)
        known = job["job_name"].implode()
        for t in ("task", "instance", "sensor"):
            if t in tables:
                tables[t], rej = _reject_where(tables[t], ~pl.col("job_name").is_in(known), "job_name",
                                               "job_name not among the accepted pai_job_table rows")
                rejs[t].append(rej)
        tables["job"] = job
        jobs = _pai_jobs(job, tables.get("task"), tables.get("instance"), tables.get("sensor"))
        accepted += sum(tables[t].height for t in ("job", "task", "instance", "sensor") if t in tables)
    nodes = schema.empty("nodes")
    if "machine_spec" in tables:
        spec, rej = _reject_where(tables["machine_spec"], pl.int_range(pl.len()).over("machine") > 0,
                                  "machine", "duplicate machine")
        rejs["machine_spec"].append(rej)
        accepted += spec.height
        nodes = schema.conform(spec.select(
            pl.col("machine").alias("node"),
            pl.col("cap_cpu__f").alias("cpus"),
            pl.col("cap_gpu__f").fill_null(0.0).alias("gpus"),
            pl.when(pl.col("cap_gpu__f") > 0).then(pl.col("gpu_type")).alias("gpu_type"),
            (pl.col("cap_mem__f") * GIB).alias("mem_bytes"),
        ), "nodes")
    # A directory's rejects share one source_file: the reason names the table file the line is in.
    def tagged(r: pl.DataFrame, t: str) -> pl.DataFrame:
        return r.with_columns(pl.format("{}: {}", pl.lit(files[t].name), pl.col("reason")).alias("reason"))

    parts = [r if len(files) == 1 else tagged(r, t) for t, rs in rejs.items() for r in rs]
    rejects = pl.concat(parts).sort("line", maintain_order=True)
    _no_valid(path, n_read, accepted, rejects, "PAI")
    return Parsed(rows_read=n_read, rows_accepted=accepted, jobs=jobs, nodes=nodes, rejects=rejects, cluster="pai")


def _pai_jobs(job: pl.DataFrame, task, inst, sensor) -> pl.DataFrame:
    out = job.select(
        pl.col("job_name").alias("job_id"), pl.col("job_name"), pl.col("user"),
        pl.col("status").replace_strict(PAI_STATUS, return_dtype=pl.String).alias("state"),
        pl.col("start_time__f").alias("__submit"), pl.col("end_time__f").alias("__end"),
    )
    if task is not None:
        t = task.with_columns(pl.col("inst_num__f").fill_null(1.0).alias("__n"))
        agg = t.group_by("job_name").agg(
            (pl.col("plan_cpu__f").fill_null(0) / 100 * pl.col("__n")).sum().alias("req_cpus"),
            (pl.col("plan_gpu__f").fill_null(0) / 100 * pl.col("__n")).sum().alias("req_gpus"),
            (pl.col("plan_mem__f").fill_null(0) * GIB * pl.col("__n")).sum().alias("req_mem_bytes"),
            pl.col("gpu_type").sort_by(pl.col("plan_gpu__f").fill_null(0) * pl.col("__n"), descending=True,
                                       maintain_order=True)
            .filter(pl.col("plan_gpu__f").sort_by(pl.col("plan_gpu__f").fill_null(0) * pl.col("__n"),
                                                  descending=True, maintain_order=True) > 0)
            .first().alias("gpu_type"),
            pl.col("start_time__f").min().alias("__task_start"),
        )
        out = out.join(agg, left_on="job_id", right_on="job_name", how="left")
    if inst is not None:
        agg = inst.group_by("job_name").agg(
            pl.col("machine").drop_nulls().n_unique().cast(pl.Int32).alias("nodes"),
            pl.col("machine").drop_nulls().unique().sort().str.join(",").alias("node_list"),
            pl.col("start_time__f").min().alias("__inst_start"),
        )
        out = out.join(agg, left_on="job_id", right_on="job_name", how="left")
    for c in ("__task_start", "__inst_start"):
        if c not in out.columns:
            out = out.with_columns(pl.lit(None, pl.Float64).alias(c))
    start = pl.when(pl.col("state") != "PENDING").then(pl.coalesce("__task_start", "__inst_start"))
    end = pl.when(pl.col("state").is_in(["COMPLETED", "FAILED"])).then(pl.col("__end"))
    out = out.with_columns(start.alias("__start"), end.alias("__end"))
    if sensor is not None:
        out = out.join(_pai_usage(sensor, task, inst, out), on="job_id", how="left")
    out = out.with_columns(
        _ts(pl.col("__submit"), PAI_EPOCH).alias("submit"),
        _ts(pl.col("__start"), PAI_EPOCH).alias("start"),
        _ts(pl.col("__end"), PAI_EPOCH).alias("end"),
        pl.when(pl.col("__start").is_null()).then(0.0)
        .otherwise(pl.col("__end") - pl.col("__start")).alias("elapsed_s"),
    )
    if "req_gpus" in out.columns:
        out = out.with_columns(_job_class(pl.col("req_gpus")).alias("job_class"))
    return schema.conform(out, "jobs")


def _pai_usage(sensor: pl.DataFrame, task, inst, jobs: pl.DataFrame) -> pl.DataFrame:
    s = sensor.select("job_name", "task_name", "worker_name", "cpu_usage__f", "gpu_wrk_util__f", "max_mem__f",
                      "max_gpu_wrk_mem__f")
    if inst is not None:
        dur = inst.select("worker_name", (pl.col("end_time__f") - pl.col("start_time__f")).alias("__dur"))
        s = s.join(dur.unique("worker_name", keep="first", maintain_order=True), on="worker_name", how="left")
    else:
        s = s.with_columns(pl.lit(None, pl.Float64).alias("__dur"))
    job_dur = jobs.select(pl.col("job_id").alias("job_name"), (pl.col("__end") - pl.col("__start")).alias("__jdur"))
    s = s.join(job_dur, on="job_name", how="left").with_columns(pl.coalesce("__dur", "__jdur").alias("__dur"))
    if task is not None:
        plan = task.select("job_name", "task_name", pl.col("plan_gpu__f").alias("__plan_gpu"))
        s = s.join(plan.unique(["job_name", "task_name"], keep="first", maintain_order=True),
                   on=["job_name", "task_name"], how="left")
    else:
        s = s.with_columns(pl.lit(None, pl.Float64).alias("__plan_gpu"))
    has_gpu = pl.col("__plan_gpu") > 0

    def total(e: pl.Expr) -> pl.Expr:  # a sum that stays null when every term is unknown
        return pl.when(e.is_not_null().any()).then(e.sum())

    agg = s.group_by("job_name").agg(
        total(pl.col("cpu_usage__f") / 100 * pl.col("__dur")).alias("cpu_seconds_used"),
        total(pl.col("max_mem__f") * GIB).alias("max_rss_bytes"),
        total(pl.col("max_gpu_wrk_mem__f") * GIB).alias("gpu_mem_used_bytes"),
        (total((pl.col("gpu_wrk_util__f") * pl.col("__dur")).filter(has_gpu))
         / total((pl.col("__plan_gpu") * pl.col("__dur")).filter(has_gpu))).alias("mean_gpu_util"),
        (pl.col("gpu_wrk_util__f") / pl.col("__plan_gpu")).filter(has_gpu).max().alias("max_gpu_util"),
    )
    return agg.with_columns(pl.col("mean_gpu_util", "max_gpu_util").clip(0.0, 1.0)).rename({"job_name": "job_id"})
