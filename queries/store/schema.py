"""The canonical job-log schema: one definition used by ingest, the store, the engine's output check and docs.

Invariants:
- Every table written to a store is cast to exactly these columns, in this order (``conform``).
- Timestamps are UTC microseconds; durations are float seconds (``*_s``); memory is bytes (``*_bytes``);
  utilisation is a fraction 0..1; GPU counts are floats because some sources allocate fractions of a GPU.
- ``(cluster, job_id)`` identifies a job; a re-ingested job replaces the earlier row.

This module imports only polars (and ``units``) so that any layer may use it.
"""
from __future__ import annotations

import polars as pl

from .units import UTC_TS

STATES = (
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED",
    "OUT_OF_MEMORY", "NODE_FAIL", "RUNNING", "PENDING",
)

JOB_CLASSES = ("debug", "interactive", "training", "eval", "dataprep", "batch")

# name -> (dtype, unit/description). The description feeds queries/README.md's column table.
JOBS: dict[str, tuple[pl.DataType, str]] = {
    "cluster": (pl.String, "cluster name (given at ingest, or from the source)"),
    "job_id": (pl.String, "job id as the scheduler prints it; array tasks keep `123_4`"),
    "array_job_id": (pl.String, "parent array id (`123` for `123_4`), null when not an array task"),
    "job_name": (pl.String, "job name"),
    "user": (pl.String, "user name"),
    "account": (pl.String, "team path `org/team/project` (Slurm account)"),
    "partition": (pl.String, "partition / queue"),
    "qos": (pl.String, "QoS / priority class"),
    "job_class": (pl.String, "debug | interactive | training | eval | dataprep | batch (from QoS/name/size)"),
    "state": (pl.String, "normalised state: " + ", ".join(STATES)),
    "exit_code": (pl.String, "`exit:signal` as reported"),
    "submit": (UTC_TS, "submit time, UTC"),
    "start": (UTC_TS, "start time, UTC; null if never started"),
    "end": (UTC_TS, "end time, UTC; null while running/pending"),
    "elapsed_s": (pl.Float64, "end - start in seconds (0 if never started)"),
    "time_limit_s": (pl.Float64, "walltime limit in seconds; null = none/unknown"),
    "nodes": (pl.Int32, "number of nodes allocated (or requested if never started)"),
    "node_list": (pl.String, "Slurm hostlist expression of allocated nodes"),
    "req_cpus": (pl.Float64, "requested CPU cores"),
    "req_gpus": (pl.Float64, "requested GPUs (fractions allowed)"),
    "gpu_type": (pl.String, "GPU model, e.g. a100"),
    "req_mem_bytes": (pl.Float64, "requested memory in bytes (whole job)"),
    "alloc_cpus": (pl.Float64, "allocated CPU cores (AllocTRES), null if the source does not distinguish"),
    "alloc_gpus": (pl.Float64, "allocated GPUs, null if the source does not distinguish"),
    "alloc_mem_bytes": (pl.Float64, "allocated memory bytes, null if the source does not distinguish"),
    "cpu_seconds_used": (pl.Float64, "CPU core-seconds consumed (sacct TotalCPU); null = unknown"),
    "max_rss_bytes": (pl.Float64, "peak resident memory of the job in bytes; null = unknown"),
    "mean_gpu_util": (pl.Float64, "time-mean GPU utilisation over allocated GPUs, 0..1"),
    "max_gpu_util": (pl.Float64, "peak GPU utilisation, 0..1"),
    "max_cpu_util": (pl.Float64, "peak CPU utilisation (used cores / allocated cores), 0..1"),
    "gpu_mem_used_bytes": (pl.Float64, "peak GPU memory used, bytes"),
    "gpus_measured": (pl.Float64, "GPUs with a per-GPU usage summary (jobstats); null = no per-GPU data"),
    "gpus_idle": (pl.Float64, "of gpus_measured, GPUs whose mean utilisation over the run was 0 % (never used)"),
    "node_mem_peak_bytes": (pl.Float64, "peak memory of the job's busiest node, bytes (jobstats); null = unknown"),
    "jobstats": (pl.String, "jobstats summary in AdminComment: ok, short, none, rejected, untrusted; null = none"),
    "min_runtime_s": (pl.Float64, "declared minimum runtime (non-preemptible period), seconds"),
    "priority": (pl.Float64, "scheduler priority"),
    "source": (pl.String, "ingest format: sacct, sacct-json, swf, pai, openb, csv, parquet, sample, sim"),
    "source_file": (pl.String, "file the job came from"),
}

SAMPLES: dict[str, tuple[pl.DataType, str]] = {
    "cluster": (pl.String, "cluster name"),
    "job_id": (pl.String, "job id (matches jobs.job_id)"),
    "ts": (UTC_TS, "sample time, UTC: the value holds from ts for interval_s seconds"),
    "interval_s": (pl.Float64, "length of the interval this sample represents, seconds"),
    "cpu_used": (pl.Float64, "CPU cores in use (mean over the interval)"),
    "mem_bytes": (pl.Float64, "resident memory, bytes"),
    "gpu_util": (pl.Float64, "mean utilisation of the job's GPUs, 0..1"),
    "gpu_mem_bytes": (pl.Float64, "GPU memory in use, bytes"),
    "source": (pl.String, "where the sample came from: the ingest format (samples, prometheus, ...) unless the file names one"),
}

NODES: dict[str, tuple[pl.DataType, str]] = {
    "cluster": (pl.String, "cluster name"),
    "node": (pl.String, "host name"),
    "partition": (pl.String, "partition the node belongs to"),
    "cpus": (pl.Float64, "CPU cores"),
    "gpus": (pl.Float64, "GPUs"),
    "gpu_type": (pl.String, "GPU model"),
    "mem_bytes": (pl.Float64, "memory, bytes"),
    "state": (pl.String, "node state when known (idle, alloc, drain, down)"),
}

REJECTS: dict[str, tuple[pl.DataType, str]] = {
    "ingest_id": (pl.String, "ingest run id"),
    "cluster": (pl.String, "cluster name"),
    "source_file": (pl.String, "input file"),
    "line": (pl.Int64, "1-based line number in the file (record index for JSON)"),
    "field": (pl.String, "field that failed, if one did"),
    "reason": (pl.String, "why the row was rejected"),
    "raw": (pl.String, "the raw input text of the row"),
    "kind": (pl.String, "row: the row was rejected; field: only this field was (the row was kept); null = row"),
}

INGEST_LOG: dict[str, tuple[pl.DataType, str]] = {
    "ingest_id": (pl.String, "ingest run id"),
    "ts": (UTC_TS, "when the ingest ran, UTC"),
    "source_file": (pl.String, "input file"),
    "format": (pl.String, "detected or given format"),
    "time_zone": (pl.String, "zone the file's local wall-clock times were read in (sacct text: `--timezone`, "
                             "else the machine's), or the site zone the file names (SWF `TimeZoneString`); "
                             "null when its times are absolute or relative and it names none. Stored times are UTC"),
    "cluster": (pl.String, "cluster name"),
    "rows_read": (pl.Int64, "data rows read (= rows_accepted + rows_rejected)"),
    "rows_accepted": (pl.Int64, "rows that contributed to a stored job/sample/node"),
    "rows_rejected": (pl.Int64, "rows written to rejects"),
    "fields_rejected": (pl.Int64, "fields of accepted rows rejected or flagged (rejects with kind = field)"),
    "jobs": (pl.Int64, "jobs written after roll-up"),
    "samples": (pl.Int64, "samples written"),
    "nodes": (pl.Int64, "nodes written"),
    "duration_s": (pl.Float64, "wall time of the ingest"),
}

# The per-job usage rollup (``queries.analytics.rollup``): derived, never ingested. One row per job of ``jobs``,
# written in the same commit as the rows it derives from; the sample integrals are over the job's whole run
# interval [t_start, t_end) as the queries stage it, capped at the levels the row records.
JOB_ROLLUP: dict[str, tuple[pl.DataType, str]] = {
    "cluster": (pl.String, "cluster name"),
    "job_id": (pl.String, "job id (matches jobs.job_id)"),
    "submit": (UTC_TS, "the job's submit time, UTC (partitions the table by month, as jobs)"),
    "t_start": (pl.Float64, "run interval start the integrals are clipped to, epoch seconds; null = never started"),
    "t_end": (pl.Float64, "run interval end the integrals are clipped to, epoch seconds (a RUNNING job: its cluster's snapshot); null = an open run whose samples all end by its run end: the row holds for any run end at or after samples_end_s"),
    "cpus": (pl.Float64, "CPU level the CPU integral is capped at (allocated, else requested)"),
    "gpus": (pl.Float64, "GPU level the GPU integral is capped at (allocated, else requested, else 0)"),
    "mem_gb": (pl.Float64, "memory level the memory integral is capped at, GB (allocated, else requested)"),
    "n_samples": (pl.Int64, "samples of the job (with a time and an interval), inside its run or not"),
    "n_cpu": (pl.Int64, "of n_samples, those with a CPU value"),
    "n_gpu": (pl.Int64, "of n_samples, those with a GPU utilisation"),
    "n_mem": (pl.Int64, "of n_samples, those with a memory value"),
    "cpu_used_s": (pl.Float64, "integral of min(cpu_used, cpus) over the run, CPU-seconds; null = no CPU sample"),
    "gpu_used_s": (pl.Float64, "integral of min(gpu_util, 1) x gpus over the run, GPU-seconds; null = no GPU sample"),
    "mem_used_gbs": (pl.Float64, "integral of min(mem, mem_gb) over the run, GB-seconds; null = no memory sample"),
    "sampled_s": (pl.Float64, "seconds of the run covered by samples (overlaps counted twice); null = no sample"),
    "peak_cpus_sampled": (pl.Float64, "largest sampled cpu_used, CPUs"),
    "peak_gpu_util_sampled": (pl.Float64, "largest sampled gpu_util, 0..1"),
    "peak_mem_gb_sampled": (pl.Float64, "largest sampled memory, GB (whole job)"),
    "samples_end_s": (pl.Float64, "latest end (ts + interval_s) of the job's samples, epoch seconds; null = none or not recorded (lets a snapshot move skip a RUNNING job its samples do not reach past)"),
}

# Per job and UTC day its run's samples reach: the integrals of job_rollup over that day's part of the run. Summed
# over the days of a window of whole days they give the window's integrals. Written with the job's job_rollup row.
JOB_DAY_ROLLUP: dict[str, tuple[pl.DataType, str]] = {
    "cluster": (pl.String, "cluster name"),
    "job_id": (pl.String, "job id (matches jobs.job_id)"),
    "submit": (UTC_TS, "the job's submit time, UTC (partitions the table by month, as jobs)"),
    "day_s": (pl.Float64, "the UTC day's first second, epoch seconds"),
    "cpu_used_s": (pl.Float64, "as job_rollup.cpu_used_s, over the day's part of the run"),
    "gpu_used_s": (pl.Float64, "as job_rollup.gpu_used_s, over the day's part of the run"),
    "mem_used_gbs": (pl.Float64, "as job_rollup.mem_used_gbs, over the day's part of the run"),
    "sampled_s": (pl.Float64, "as job_rollup.sampled_s, over the day's part of the run"),
}

# Per-cell usage totals (``queries.analytics.cube``): derived, never ingested. A cell is the jobs of one cluster,
# submit month, user and account whose staged run interval lies in the same span of whole UTC days
# [day_lo_s, day_hi_s); its columns are sums of the per-job figures ``_job_usage`` gives for a window holding the
# whole run. A window of whole days answers a cell it holds whole from these sums (exact up to the order of a
# floating-point sum); a job the window cuts is derived as before. RUNNING jobs without an end are in no cell
# (their run end moves with every snapshot: the queries derive them per job).
USAGE_CUBE: dict[str, tuple[pl.DataType, str]] = {
    "cluster": (pl.String, "cluster name"),
    "submit": (UTC_TS, "first instant of the cell's jobs' submit month, UTC (partitions the table as jobs)"),
    "running": (pl.Boolean, "false; true (in a partition month=running) or null in a cube written when RUNNING "
                            "jobs had cells, which the queries do not read and the next refresh rebuilds"),
    "user": (pl.String, "user"),
    "account": (pl.String, "account ('(none)' when the jobs have none)"),
    "day_lo_s": (pl.Float64, "UTC midnight at or before the jobs' run start, epoch seconds"),
    "day_hi_s": (pl.Float64, "UTC midnight at or after the jobs' run end (day_lo_s + 86400 at least)"),
    "jobs": (pl.Int64, "jobs in the cell"),
    "t_start_min": (pl.Float64, "first run start of the cell's jobs, epoch seconds (the store's extent)"),
    "t_end_max": (pl.Float64, "last run end of the cell's jobs, epoch seconds"),
    "run_s": (pl.Float64, "sum of the jobs' run seconds"),
    "cpu_req_s": (pl.Float64, "sum of cpu_seconds_requested"),
    "cpu_used_s": (pl.Float64, "sum of cpu_seconds_used"),
    "cpu_waste_s": (pl.Float64, "sum of cpu_seconds_requested - cpu_seconds_used"),
    "cpu_req_known_s": (pl.Float64, "sum of cpu_seconds_requested of the jobs whose CPU usage is known"),
    "gpu_req_s": (pl.Float64, "sum of gpu_seconds_requested"),
    "gpu_used_s": (pl.Float64, "sum of gpu_seconds_used"),
    "gpu_waste_s": (pl.Float64, "sum of gpu_seconds_requested - gpu_seconds_used"),
    "gpu_req_known_s": (pl.Float64, "sum of gpu_seconds_requested of the jobs whose GPU usage is known"),
    "mem_req_gbs": (pl.Float64, "sum of mem_seconds_requested, GB-seconds"),
    "mem_used_gbs": (pl.Float64, "sum of mem_seconds_used, GB-seconds"),
    "mem_waste_gbs": (pl.Float64, "sum of mem_seconds_requested - mem_seconds_used, GB-seconds"),
    "mem_req_known_gbs": (pl.Float64, "sum of mem_seconds_requested of the jobs whose memory usage is known"),
    "jobs_with_samples": (pl.Int64, "jobs whose usage_source is 'samples'"),
    "jobs_with_totals": (pl.Int64, "jobs whose usage_source is 'totals'"),
    "gpu_held_jobs": (pl.Int64, "jobs holding GPUs (gpus > 0): the metric pyramid's jobs"),
    "gpu_held_used_s": (pl.Float64, "sum of gpu_seconds_used over those jobs"),
    "gpu_held_known_s": (pl.Float64, "sum of gpu_seconds_requested over those of them whose usage is known"),
    "gpu_held_funded_s": (pl.Float64, "sum of gpu_seconds_requested over those of them with a minimum runtime not 0"),
    "gpu_held_unalloc_s": (pl.Float64, "sum of gpu_seconds_requested over those of them with min_runtime_s = 0"),
    "cpu_held_jobs": (pl.Int64, "jobs holding CPUs (cpus > 0): the metric pyramid's jobs"),
    "cpu_held_used_s": (pl.Float64, "sum of cpu_seconds_used over those jobs"),
    "cpu_held_known_s": (pl.Float64, "sum of cpu_seconds_requested over those of them whose usage is known"),
    "cpu_held_funded_s": (pl.Float64, "sum of cpu_seconds_requested over those of them with a minimum runtime not 0"),
    "cpu_held_unalloc_s": (pl.Float64, "sum of cpu_seconds_requested over those of them with min_runtime_s = 0"),
    "legacy_jobs": (pl.Int64, "jobs with a legacy task score (a peak CPU utilisation and a CPU count)"),
    "legacy_task_score_sum": (pl.Float64, "sum of the jobs' legacy task scores at _scores' default time unit (60 s)"),
    "footprint_max_s": (pl.Float64, "largest job footprint in GPU-equivalent seconds at _scores' default rates "
                                    "(16 CPUs, 128 GB per GPU): what picks an entity's main account"),
}

# Per-hour and per-day usage cells (``queries.analytics.usage_hours``): derived, never ingested. A cell is the
# jobs of one cluster, submit month, user and account, and one UTC hour (grain_s 3600) or day (grain_s 86400)
# [t_s, t_s + grain_s); its columns are the resource-seconds gap_area counts for that cell (requested, used,
# unknown usage), summed over the jobs. A query whose buckets and window are whole cells sums them (exact up to
# the order of a floating-point sum). RUNNING jobs whose run end depends on the query's window are in no cell; a
# RUNNING job without an end puts only its sampled usage into them (gap_area derives the rest per job).
USAGE_HOURS: dict[str, tuple[pl.DataType, str]] = {
    "cluster": (pl.String, "cluster name"),
    "submit": (UTC_TS, "first instant of the cell's jobs' submit month, UTC (partitions the table as jobs)"),
    "running": (pl.Boolean, "false; true (in a partition month=running) in a table written when RUNNING jobs had "
                            "whole cells, which gap_area does not read and the next refresh rebuilds"),
    "open_run": (pl.Boolean, "true: the sampled usage of RUNNING jobs without an end (cells and files of their own, "
                             "so that their new samples re-derive only these); false: every other job's"),
    "user": (pl.String, "user"),
    "account": (pl.String, "account ('(none)' when the jobs have none)"),
    "grain_s": (pl.Float64, "the cell's length: 3600 (an hour) or 86400 (a UTC day)"),
    "t_s": (pl.Float64, "the cell's first second, epoch seconds (a multiple of grain_s)"),
    "cpu_req_s": (pl.Float64, "CPU-seconds held in the cell (gap_area's requested_seconds)"),
    "cpu_used_s": (pl.Float64, "CPU-seconds used in the cell, capped at the allocation (used_seconds)"),
    "cpu_unknown_s": (pl.Float64, "CPU-seconds held by jobs whose CPU usage is unknown (unknown_usage_seconds)"),
    "gpu_req_s": (pl.Float64, "GPU-seconds held in the cell"),
    "gpu_used_s": (pl.Float64, "GPU-seconds used in the cell (utilisation capped at 1)"),
    "gpu_unknown_s": (pl.Float64, "GPU-seconds held by jobs whose GPU usage is unknown"),
    "mem_req_gbs": (pl.Float64, "memory GB-seconds held in the cell"),
    "mem_used_gbs": (pl.Float64, "memory GB-seconds used in the cell, capped at the allocation"),
    "mem_unknown_gbs": (pl.Float64, "memory GB-seconds held by jobs whose memory usage is unknown"),
}

TABLES = {"jobs": JOBS, "samples": SAMPLES, "nodes": NODES, "rejects": REJECTS, "ingest_log": INGEST_LOG,
          "job_rollup": JOB_ROLLUP, "job_day_rollup": JOB_DAY_ROLLUP,
          "usage_cube": USAGE_CUBE, "usage_hours": USAGE_HOURS}


def polars_schema(table: str) -> pl.Schema:
    return pl.Schema({k: v[0] for k, v in TABLES[table].items()})


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=polars_schema(table))


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Cast ``df`` to the table's schema: missing columns become null, extra columns are dropped."""
    schema = polars_schema(table)
    cols = []
    for name, dtype in schema.items():
        if name in df.columns:
            col = pl.col(name)
            if df.schema[name] != dtype:
                col = col.cast(dtype, strict=False)
            cols.append(col.alias(name))
        else:
            cols.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(cols)
