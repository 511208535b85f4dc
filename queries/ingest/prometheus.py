"""GPU metrics from Prometheus (NVIDIA's DCGM exporter, jobstats' GPU exporter) -> ``samples`` rows.

Input: the JSON body Prometheus' HTTP API returns for a range query (``/api/v1/query_range``)::

    {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "gpu01", "gpu": "0", "jobid": "1234"},
         "values": [[1764583200, "87"], [1764583230, "91"], ...]}, ...]}}

A *row* is one series of ``result`` (``line`` in rejects is its 1-based index there).

Label mapping (options ``job_label``, ``step``, ``metric``; CLI ``--job-label``, ``--step``, ``--metric``):
- job: ``job_label`` (default: the first of ``jobid``, ``hpc_job``, ``slurm_job_id`` a series has; DCGM's HPC
  job mapping writes ``hpc_job``; never ``job``, Prometheus' own label for the scrape job). A comma list joins
  several labels with ``/``: ``--job-label namespace,pod`` gives Kubernetes jobs the id ``namespace/pod``. A
  series without the label (a GPU no job held) *matches no job*: it is counted, rejected with that reason and
  named in the summary, never silently dropped.
- node: ``Hostname`` (DCGM), else ``instance`` without its port; GPU: ``gpu`` (DCGM), else ``minor_number``
  (jobstats' exporter), else ``UUID``/``device``. A series without a GPU label stands for one GPU of its own.
- cluster: a ``cluster`` label when present (jobstats' relabelling adds one), else ``--cluster`` / default.

Metrics (``__name__``; a series without one - PromQL drops it from ``avg_over_time(...)`` and the like - takes
``metric``): ``DCGM_FI_DEV_GPU_UTIL`` and ``nvidia_gpu_duty_cycle`` (percent, as nvidia-smi's utilisation),
``DCGM_FI_PROF_SM_ACTIVE`` (a 0..1 ratio; used for a job only when it has neither of the first two, since it
reads lower for the same work), ``DCGM_FI_DEV_FB_USED`` (MiB) and ``nvidia_gpu_memory_used_bytes`` (bytes).
Other metrics are rejected rows. jobstats' exporter names the job in a metric's *value*, not a label:
``nvidia_gpu_jobId`` (one series per GPU, labels ``instance`` and ``minor_number`` like the others; 0 = no
job). Fetch it in the same query (``{__name__=~"nvidia_gpu_duty_cycle|nvidia_gpu_memory_used_bytes|
nvidia_gpu_jobId"}``) and each point of a series without a job label gets the job that held its GPU at that
instant; points of a GPU no job held are counted in the summary and not stored.

Time (Prometheus' documented query semantics): a range query evaluates its expression at ``start + k x step``;
at each instant a series has the value of its latest raw sample within the lookback delta (5 min by default)
and no point at all when there is none or the series went stale (a staleness marker: target gone, series
ended). So a missing point means *no data* - it is never read as zero; a point at ``t`` stands for the
interval ``[t, t + step)`` (``interval_s = step``), and a gap in a series is a gap in the samples (no row is
written for it; the usage queries report it as ``sample_coverage`` < 1). ``step`` is inferred as the smallest
gap between two points of one series (every point of a range query lies on the step grid) unless given. A
restarted exporter starts a new series (another ``instance``/``pod`` label) for the same GPU: where two series
of one job, node, GPU and metric have a point at the same instant, the newer series (latest first point) wins,
so a GPU is never counted twice.

Per job and instant the GPUs that reported are combined: ``gpu_util`` = their mean utilisation (0..1; a GPU
without a point at that instant is left out, not taken as idle), ``gpu_mem_bytes`` = their sum. Points that are
not finite non-negative numbers (``NaN``, ``+Inf``), utilisation above 100 % and malformed pairs are field
rejects (the series stays). Every sample has ``source = 'prometheus'``.

Invariants: ``rows_read = rows_accepted + rows_rejected`` over series; samples of one job are unique per ``ts``.
"""
from __future__ import annotations

import json
import math

import polars as pl

from ..store import schema
from .pipeline import IngestError, Parsed
from . import textio
from .limits import MAX_BYTES

JOB_LABELS = ("jobid", "hpc_job", "slurm_job_id")
NODE_LABELS = ("Hostname", "instance")
GPU_LABELS = ("gpu", "minor_number", "UUID", "device")
MiB = float(2**20)
# metric -> (samples column, scale to the column's unit, preference among metrics for that column: lower wins)
METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util", 0.01, 0),
    "nvidia_gpu_duty_cycle": ("gpu_util", 0.01, 0),
    "DCGM_FI_PROF_SM_ACTIVE": ("gpu_util", 1.0, 1),
    "DCGM_FI_DEV_FB_USED": ("gpu_mem_bytes", MiB, 0),
    "nvidia_gpu_memory_used_bytes": ("gpu_mem_bytes", 1.0, 0),
}
JOB_ID_METRIC = "nvidia_gpu_jobId"  # jobstats' exporter: the value is the job holding the GPU (0 = none)
REJECT_SCHEMA = {"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String}


def sniff(head: bytes, name: str) -> bool:
    text = head.lstrip()
    return text.startswith(b"{") and b'"resultType"' in head and b'"result"' in head


def _job_id(labels: dict, job_label: str | None) -> str | None:
    if job_label:
        parts = [labels.get(k) for k in job_label.split(",") if k.strip()]
        return "/".join(parts) if parts and all(isinstance(p, str) and p for p in parts) else None
    for k in JOB_LABELS:
        v = labels.get(k)
        if isinstance(v, str) and v and v != "0":  # jobstats' exporter reports job 0 for a GPU no job holds
            return v
    return None


def _first(labels: dict, keys) -> str | None:
    for k in keys:
        v = labels.get(k)
        if isinstance(v, str) and v:
            return v.rsplit(":", 1)[0] if k == "instance" and v.count(":") == 1 else v
    return None


def _value(point, column: str, scale: float) -> tuple[float | None, float | None, str | None]:
    """``[ts, "v"]`` -> (epoch seconds, value in the column's unit, reason it is bad)."""
    if not isinstance(point, (list, tuple)) or len(point) != 2:
        return None, None, "point is not a [timestamp, \"value\"] pair"
    ts, v = point
    # 0 <= ts first: an integer beyond float's range (JSON allows one) would overflow math.isfinite
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 <= ts < 1e11 or not math.isfinite(ts):
        return None, None, f"timestamp {str(ts)[:40]!r} is not epoch seconds"
    try:
        x = float(v) if isinstance(v, str) else float("nan")
    except ValueError:
        x = float("nan")
    if not math.isfinite(x) or x < 0:
        return None, None, f"value {str(v)[:40]!r} is not a finite non-negative number"
    x *= scale
    if (column == "gpu_util" and x > 1.0 + 1e-9) or (column != "gpu_util" and x > MAX_BYTES):
        return None, None, f"value {str(v)[:40]!r} is out of range for {column}"
    return float(ts), x, None


def parse(path, *, job_label: str | None = None, step: float | None = None, metric: str | None = None,
          **_) -> Parsed:
    doc = textio.read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        raise IngestError(path, "not a Prometheus API response: no \"data\" object", line=1, field="data")
    if doc.get("status") not in (None, "success"):
        raise IngestError(path, f"Prometheus reported an error: {str(doc.get('error'))[:200]}", line=1,
                          field="status")
    kind = doc["data"].get("resultType")
    if kind != "matrix":
        raise IngestError(path, f"resultType {kind!r} is not a range query's \"matrix\"; use /api/v1/query_range",
                          line=1, field="resultType")
    result = doc["data"].get("result")
    if not isinstance(result, list):
        raise IngestError(path, "data.result is not a list", line=1, field="result")
    if step is not None and not (isinstance(step, (int, float)) and math.isfinite(step) and step > 0):
        raise IngestError(path, f"step {step!r} is not a positive number of seconds", field="step")

    rejects, field_rejects, points, pending = [], [], [], []
    owner: dict[tuple, str] = {}  # (cluster, node, GPU, t) -> job, from jobstats' nvidia_gpu_jobId series
    unmatched = unowned = 0
    for i, series in enumerate(result, 1):
        raw = json.dumps(series, sort_keys=True)
        raw = raw if len(raw) <= 2000 else raw[:2000] + "..."
        labels = series.get("metric") if isinstance(series, dict) else None
        values = series.get("values") if isinstance(series, dict) else None
        if not isinstance(labels, dict) or not isinstance(values, list):
            rejects.append((i, None, "series is not {\"metric\": {...}, \"values\": [...]}", raw))
            continue
        name = labels.get("__name__") or metric
        name = name if isinstance(name, str) else repr(name)[:80]
        node, gpu = _first(labels, NODE_LABELS), _first(labels, GPU_LABELS)
        cluster = labels.get("cluster") if isinstance(labels.get("cluster"), str) else None
        if name == JOB_ID_METRIC:
            n_ok = 0
            for p in values:
                ts, x, why = _value(p, "job", 1.0)
                if why or x != int(x):
                    field_rejects.append((i, name, why or f"job id {x!r} is not an integer", _shown(p)))
                    continue
                n_ok += 1
                if x > 0:  # 0: no job held the GPU
                    owner[(cluster, node, gpu, ts)] = str(int(x))
            if not n_ok:
                rejects.append((i, name, "series has no usable point", raw))
            continue
        if name not in METRICS:
            rejects.append((i, "__name__", f"metric {str(name)[:80]!r} is not one quotaloop reads", raw))
            continue
        pending.append((i, raw, name, _job_id(labels, job_label), cluster, node, gpu, values))
    for i, raw, name, job, cluster, node, gpu, values in pending:
        if job is None and not owner:
            unmatched += 1
            shown = job_label or "|".join(JOB_LABELS)
            rejects.append((i, shown, f"series matches no job: no {shown} label (and no {JOB_ID_METRIC} series)",
                            raw))
            continue
        column, scale, rank = METRICS[name]
        good = matched = idle = 0
        for p in values:
            ts, x, why = _value(p, column, scale)
            if why:
                field_rejects.append((i, name, why, _shown(p)))
                continue
            good += 1
            held_by = job if job is not None else owner.get((cluster, node, gpu, ts))
            if held_by is None:
                idle += 1
                continue
            matched += 1
            points.append((i, cluster, held_by, node, gpu if gpu is not None else f"series{i}", name, column, rank,
                           ts, x))
        unowned += idle if matched else 0  # an unmatched series is reported as such, not per point
        if not good:
            rejects.append((i, name, "series has no usable point", raw))
        elif not matched:
            unmatched += 1
            rejects.append((i, JOB_ID_METRIC, f"series matches no job: no {JOB_ID_METRIC} point names a job for "
                                              "its GPU at its instants", raw))
    parsed_rejects = pl.DataFrame(rejects, schema=REJECT_SCHEMA, orient="row")
    parsed_fields = pl.DataFrame(field_rejects, schema=REJECT_SCHEMA, orient="row")
    notes = [f"{unmatched} series matched no job (rejected)"] if unmatched else []
    if unowned:
        notes.append(f"{unowned} points of GPUs no job held at the time (not stored)")
    samples = _samples(path, points, step)
    return Parsed(rows_read=len(result), rows_accepted=len(result) - len(rejects), samples=samples,
                  rejects=parsed_rejects, field_rejects=parsed_fields, notes=notes)


def _shown(p) -> str:
    try:
        return json.dumps(p)[:200]
    except (TypeError, ValueError):
        return repr(p)[:200]


def _samples(path, points: list, step: float | None) -> pl.DataFrame:
    if not points:
        return schema.empty("samples")
    cols = ["series", "cluster", "job_id", "node", "gpu", "metric", "column", "rank", "t", "value"]
    df = pl.DataFrame(points, schema=dict(zip(cols, [pl.Int64, pl.String, pl.String, pl.String, pl.String,
                                                      pl.String, pl.String, pl.Int64, pl.Float64, pl.Float64])),
                      orient="row")
    if step is None:
        gaps = df.sort("series", "t").select((pl.col("t").diff().over("series")).filter(pl.col("t").diff().over(
            "series") > 0).min()).item()
        if gaps is None:
            raise IngestError(path, "cannot infer the query step: no series has two points; pass --step SECONDS",
                              field="step")
        step = float(gaps)
    # a restarted exporter: the newer series of a GPU wins where two have a point at the same instant
    first = pl.col("t").min().over("series")
    df = (df.with_columns(first.alias("_first"))
          .sort("_first", "series", descending=True)
          .unique(subset=["cluster", "job_id", "node", "gpu", "metric", "t"], keep="first", maintain_order=True))
    # per job and column the preferred metric only (SM_ACTIVE only where neither utilisation metric is present)
    df = df.filter(pl.col("rank") == pl.col("rank").min().over("cluster", "job_id", "column"))
    per_t = df.group_by("cluster", "job_id", "t").agg(
        pl.col("value").filter(pl.col("column") == "gpu_util").mean().alias("gpu_util"),
        pl.col("value").filter(pl.col("column") == "gpu_mem_bytes").sum().alias("_mem"),
        (pl.col("column") == "gpu_mem_bytes").any().alias("_has_mem"))
    out = per_t.select(
        "cluster", "job_id",
        pl.from_epoch((pl.col("t") * 1e6).round().cast(pl.Int64), time_unit="us").dt.replace_time_zone("UTC")
        .alias("ts"),
        pl.lit(step, pl.Float64).alias("interval_s"),
        "gpu_util",
        pl.when(pl.col("_has_mem")).then(pl.col("_mem")).alias("gpu_mem_bytes"),
        pl.lit("prometheus").alias("source"),
    ).sort("cluster", "job_id", "ts", nulls_last=True)
    return schema.conform(out, "samples")
