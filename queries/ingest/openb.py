"""Alibaba GPU cluster trace v2023 (``cluster-trace-gpu-v2023``): openb node and pod lists.

``parse_openb``: CSV with header. ``openb_node_list_*`` -> nodes (cpu_milli/1000 CPUs,
memory_mib MiB, gpu, model). ``openb_pod_list_*`` -> jobs: ``req_cpus = cpu_milli/1000``, ``req_gpus = num_gpu
* gpu_milli/1000`` (gpu_milli < 1000 only occurs with num_gpu == 1: a shared fraction of one GPU),
``gpu_type`` = the allowed-model list ``gpu_spec`` as given (``V100M16|V100M32``), ``qos`` as given; times are
seconds from the trace start, placed at ``OPENB_EPOCH`` = 2023-01-01T00:00Z (the trace gives no date).
``submit = creation``, ``start = scheduled``, ``end = deletion``. pod_phase Succeeded -> COMPLETED, Failed ->
FAILED, Pending (deleted before scheduling) -> CANCELLED, Running -> COMPLETED (the pod ran until deleted),
except Running pods deleted at the file's last deletion time (the trace cut-off) -> RUNNING with no end.
Pod lists without phase/time columns (``multigpu50``) are pure request lists: state PENDING, submitted at the
epoch. Both node and pod lists report cluster ``openb``; pod names repeat across the pod lists (each list is a
separate sample of one workload), so ingest each pod list under its own ``--cluster`` to keep them apart.

Fields are split on commas without quote handling: neither trace quotes fields. Rows read = data lines;
every line is accepted or rejected (line number, field, reason, raw text).
"""
from __future__ import annotations

import datetime as dt
import gzip
import zlib
from pathlib import Path

import polars as pl

from ..store import schema
from .pipeline import IngestError, Parsed
from .alibaba import MIB, _job_class, _no_valid, _reject_where, _rejects, _split, _ts
from .canonical import first_failure, read_text

OPENB_EPOCH = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)
OPENB_PHASES = ("Succeeded", "Failed", "Running", "Pending")
OPENB_NODE_COLS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
OPENB_POD_COLS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                  "creation_time", "deletion_time", "scheduled_time")


def _openb_header(head: bytes) -> list[str]:
    return [c.strip() for c in head.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip("\r\ufeff").split(",")]


def sniff_openb(head: bytes, name: str) -> bool:
    cols = _openb_header(head)
    return cols[:2] in (["sn", "cpu_milli"], ["name", "cpu_milli"])


def parse_openb(path: str | Path, **_options) -> Parsed:
    """An openb node list or pod list (CSV with header); see the module docstring."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head[:2] == b"\x1f\x8b":  # only the header line is needed here: decompress the start, not the file
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(4096)
        except (OSError, EOFError, zlib.error):  # corrupt from the start: read_text names the first line it cannot read
            head = read_text(path)[0][:4096].encode()
    cols = _openb_header(head)
    if cols[:1] == ["sn"]:
        expected, numeric = OPENB_NODE_COLS, ("cpu_milli", "memory_mib", "gpu")
    elif cols[:1] == ["name"]:
        expected = OPENB_POD_COLS[:len(cols)]
        numeric = tuple(c for c in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time",
                                    "deletion_time", "scheduled_time") if c in expected)
    else:
        raise IngestError(path, "not an openb node list (sn,...) or pod list (name,...)", line=1, field=cols[0])
    if tuple(cols) != expected:
        # a missing column, else an unexpected one, else the first out of place (same names, other order or twice)
        missing = (next((c for c in expected if c not in cols), None) or next((c for c in cols if c not in expected), None)
                   or next((c for c, e in zip(cols, expected) if c != e), cols[-1]))
        raise IngestError(path, f"unexpected header; expected {','.join(expected)}", line=1, field=missing)
    ok, rej = _split(path, expected, numeric, expected[:1], header=True)
    n_read = ok.height + rej.height
    key = expected[0]
    ok, dup = _reject_where(ok, pl.int_range(pl.len()).over(key) > 0, key, f"duplicate {key}")
    rejs = [rej, dup]
    if key == "sn":
        nodes = schema.conform(ok.select(
            pl.col("sn").alias("node"), (pl.col("cpu_milli__f") / 1000).alias("cpus"),
            pl.col("gpu__f").fill_null(0.0).alias("gpus"), pl.col("model").alias("gpu_type"),
            (pl.col("memory_mib__f") * MIB).alias("mem_bytes")), "nodes")
        rejects = pl.concat(rejs).sort("line")
        _no_valid(path, n_read, nodes.height, rejects, "openb node")
        return Parsed(rows_read=n_read, rows_accepted=nodes.height, nodes=nodes, rejects=rejects, cluster="openb")
    checks = [
        (pl.col("gpu_milli__f") > 1000, "gpu_milli", pl.format("more than one GPU per GPU: {}", pl.col("gpu_milli"))),
        (pl.col("num_gpu__f") != pl.col("num_gpu__f").round(), "num_gpu",
         pl.format("not an integer: {}", pl.col("num_gpu"))),
    ]
    if "pod_phase" in expected:
        checks += [
            (pl.col("pod_phase").is_not_null() & ~pl.col("pod_phase").is_in(OPENB_PHASES), "pod_phase",
             pl.format("unknown pod phase: {}", pl.col("pod_phase"))),
            (pl.col("creation_time__f").is_null(), "creation_time", "required value missing"),
            (pl.col("deletion_time__f") < pl.col("creation_time__f"), "deletion_time", "deletion before creation"),
            (pl.col("scheduled_time__f") < pl.col("creation_time__f"), "scheduled_time", "scheduled before creation"),
            (pl.col("deletion_time__f") < pl.col("scheduled_time__f"), "deletion_time", "deletion before scheduling"),
        ]
    field, reason = first_failure(checks)
    ok = ok.with_columns(field.alias("__field"), reason.alias("__reason"))
    rejs.append(_rejects(ok.filter(pl.col("__field").is_not_null())))
    ok = ok.filter(pl.col("__field").is_null())
    jobs = _openb_jobs(ok, "pod_phase" in expected)
    rejects = pl.concat(rejs).sort("line")
    _no_valid(path, n_read, jobs.height, rejects, "openb pod")
    return Parsed(rows_read=n_read, rows_accepted=jobs.height, jobs=jobs, rejects=rejects, cluster="openb")


def _openb_jobs(ok: pl.DataFrame, timed: bool) -> pl.DataFrame:
    req_gpus = pl.col("num_gpu__f").fill_null(0) * pl.col("gpu_milli__f").fill_null(1000) / 1000
    out = ok.with_columns(
        pl.col("name").alias("job_id"), pl.col("name").alias("job_name"),
        (pl.col("cpu_milli__f") / 1000).alias("req_cpus"),
        (pl.col("memory_mib__f") * MIB).alias("req_mem_bytes"),
        req_gpus.alias("req_gpus"),
    )
    if timed:
        cutoff = ok["deletion_time__f"].max()
        phase = pl.col("pod_phase")
        running = (phase == "Running") & (pl.col("deletion_time__f") >= pl.lit(cutoff, pl.Float64))  # None: no cut-off
        state = (pl.when(phase == "Succeeded").then(pl.lit("COMPLETED"))
                 .when(phase == "Failed").then(pl.lit("FAILED"))
                 .when(phase == "Pending").then(pl.lit("CANCELLED"))
                 .when(running).then(pl.lit("RUNNING"))
                 .when(phase == "Running").then(pl.lit("COMPLETED"))
                 .otherwise(pl.lit("PENDING")))
        end = pl.when(~running & phase.is_not_null()).then(pl.col("deletion_time__f"))
        start = pl.when(phase != "Pending").then(pl.col("scheduled_time__f"))
        out = out.with_columns(
            state.alias("state"), pl.col("gpu_spec").alias("gpu_type"), pl.col("qos"),
            _ts(pl.col("creation_time__f"), OPENB_EPOCH).alias("submit"),
            _ts(start, OPENB_EPOCH).alias("start"), _ts(end, OPENB_EPOCH).alias("end"),
            pl.when(start.is_null()).then(0.0).otherwise(end - start).alias("elapsed_s"),
        )
    else:
        out = out.with_columns(pl.lit("PENDING").alias("state"),
                               pl.lit(OPENB_EPOCH).cast(schema.UTC_TS).alias("submit"),
                               pl.lit(0.0).alias("elapsed_s"))
    out = out.with_columns(_job_class(pl.col("req_gpus")).alias("job_class"))
    return schema.conform(out, "jobs")
