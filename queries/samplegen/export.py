"""Write the files a real cluster would export: ``sacct --parsable2`` text, a samples Parquet, a nodes CSV.

Formats follow Slurm 23.x as printed by
``sacct --parsable2 --allusers --duplicates=no -S <window start> -E <window end> --format=<SACCT_FIELDS>``:
- an allocation row per job (requests, ReqTRES/AllocTRES, TotalCPU summed over its steps, no MaxRSS), then
  ``.batch``, ``.extern`` and, for multi-node gangs, an ``.0`` srun step carrying the work; steps carry
  TotalCPU, MaxRSS and TRESUsageInAve/Max (``gres/gpuutil`` in percent, ``gres/gpumem`` in MiB, ``mem`` in KiB),
  per task (a gang's ``.0`` step runs one task per node);
- timestamps ``YYYY-MM-DDTHH:MM:SS`` (UTC), ``Unknown`` for an end (or start) that has not happened;
  ``Start=None`` and ``NodeList=None assigned`` for a job cancelled while pending;
- durations ``[D-]HH:MM:SS``; TotalCPU ``MM:SS.mmm`` below an hour; array tasks ``123_4``; still-pending
  tasks of one array collapse into ``123_[5-9]`` as sacct prints them;
- ReqMem is the whole job's request without ``n``/``c`` suffix (Slurm >= 21.08), like ReqTRES ``mem=``.
Output is a pure function of its inputs: same arrays -> byte-identical files.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from ..store.units import GIB, UTC_TS

SACCT_FIELDS = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|"
                "Timelimit|NNodes|NodeList|ReqCPUS|AllocCPUS|ReqMem|ReqTRES|AllocTRES|TotalCPU|MaxRSS|"
                "TRESUsageInAve|TRESUsageInMax|Priority|Comment").split("|")
BILLING_PER_GPU = {"h100": 12, "a100": 8, "l40s": 4, "": 8}


# ------------------------------------------------------------------ value formatting
def fmt_ts(t: np.ndarray) -> np.ndarray:
    return np.datetime_as_string(np.asarray(t, dtype=np.int64).astype("datetime64[s]"), unit="s")


def hostlist(names: list[str]) -> str:
    """Compress host names the way Slurm prints them: ``h100-[001-003,007],a100-002``."""
    if not names:
        return "None assigned"
    groups: dict[str, list[str]] = {}
    for nm in names:
        prefix, num = nm.rsplit("-", 1)
        groups.setdefault(prefix, []).append(num)
    parts = []
    for prefix in sorted(groups):
        nums = sorted(set(groups[prefix]), key=int)
        if len(nums) == 1:
            parts.append(f"{prefix}-{nums[0]}")
            continue
        runs, lo, prev = [], nums[0], nums[0]
        for x in nums[1:] + [None]:
            if x is not None and int(x) == int(prev) + 1:
                prev = x
                continue
            runs.append(lo if lo == prev else f"{lo}-{prev}")
            lo = prev = x
        parts.append(f"{prefix}-[{','.join(runs)}]")
    return ",".join(parts)


# ------------------------------------------------------------------ vectorised (polars) formatting
def _s(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Int64).cast(pl.String)


def _dur(e: pl.Expr) -> pl.Expr:
    e = e.cast(pl.Int64)
    hms = pl.concat_str([_s((e % 86400) // 3600).str.zfill(2), _s((e % 3600) // 60).str.zfill(2),
                         _s(e % 60).str.zfill(2)], separator=":")
    return pl.when(e >= 86400).then(pl.concat_str([_s(e // 86400), pl.lit("-"), hms])).otherwise(hms)


def _cputime(e: pl.Expr) -> pl.Expr:
    ms = (e * 1000).round(0).cast(pl.Int64).clip(upper_bound=3_599_999)
    short = pl.concat_str([_s(ms // 60_000).str.zfill(2), pl.lit(":"), _s((ms % 60_000) // 1000).str.zfill(2),
                           pl.lit("."), _s(ms % 1000).str.zfill(3)])
    return pl.when(e < 3600).then(short).otherwise(_dur(e.round(0)))


def _ts(e: pl.Expr) -> pl.Expr:
    return pl.from_epoch(e, time_unit="s").dt.strftime("%Y-%m-%dT%H:%M:%S")


def _mem(e: pl.Expr) -> pl.Expr:
    e = e.cast(pl.Int64)
    return pl.when(e % GIB == 0).then(pl.concat_str([_s(e // GIB), pl.lit("G")])) \
        .otherwise(pl.concat_str([_s(e // 1024**2), pl.lit("M")]))


def _gres(gpus: pl.Expr, gtype: pl.Expr, typed: bool) -> pl.Expr:
    plain = pl.concat_str([pl.lit("gres/gpu="), _s(gpus), pl.lit(",")])
    with_type = pl.concat_str([pl.lit("gres/gpu:"), gtype, pl.lit("="), _s(gpus), pl.lit(","), plain])
    g = pl.when((gtype != "") & pl.lit(typed)).then(with_type).otherwise(plain)
    return pl.when(gpus > 0).then(g).otherwise(pl.lit(""))


def _tres(cpus: pl.Expr, gpus: pl.Expr, gtype: pl.Expr, mem: pl.Expr, nodes: pl.Expr, typed=True) -> pl.Expr:
    """``billing=24,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=199G,node=1``."""
    bill = cpus + gpus * gtype.replace_strict(BILLING_PER_GPU, return_dtype=pl.Int64)
    return pl.concat_str([pl.lit("billing="), _s(bill), pl.lit(",cpu="), _s(cpus), pl.lit(","),
                          _gres(gpus, gtype, typed), pl.lit("mem="), _mem(mem), pl.lit(",node="), _s(nodes)])


def _usage(cpu_s: pl.Expr, rss: pl.Expr, gutil: pl.Expr, gmem: pl.Expr, disk: pl.Expr, gpu: pl.Expr) -> pl.Expr:
    """TRESUsageIn{Ave,Max}: per-task CPU time, disk, GPU memory (MiB) / utilisation (%), RSS and VM (KiB)."""
    kib = (rss // 1024).cast(pl.Int64)
    gres = pl.when(gpu).then(pl.concat_str([pl.lit("gres/gpumem="), _s(gmem // 1024**2), pl.lit("M,gres/gpuutil="),
                                            _s((gutil * 100).round(0)), pl.lit(",")])).otherwise(pl.lit(""))
    return pl.concat_str([pl.lit("cpu="), _dur(cpu_s.round(0)), pl.lit(",energy=0,fs/disk="), _s(disk), pl.lit(","),
                          gres, pl.lit("mem="), _s(kib), pl.lit("K,pages=0,vmem="), _s(kib * 13 // 10), pl.lit("K")])


STEP_STATE = {  # job state -> (batch/srun step state, exit code ("" = the job's), extern state, extern exit)
    "COMPLETED": ("COMPLETED", "", "COMPLETED", "0:0"),
    "FAILED": ("FAILED", "", "COMPLETED", "0:0"),
    "CANCELLED": ("CANCELLED", "0:15", "COMPLETED", "0:0"),
    "TIMEOUT": ("CANCELLED", "0:15", "COMPLETED", "0:0"),
    "OUT_OF_MEMORY": ("OUT_OF_MEMORY", "0:125", "OUT_OF_MEMORY", "0:125"),
    "NODE_FAIL": ("CANCELLED", "0:9", "CANCELLED", "0:9"),
    "PREEMPTED": ("CANCELLED", "0:15", "COMPLETED", "0:0"),
    "RUNNING": ("RUNNING", "0:0", "RUNNING", "0:0"),
}
GANG_RSS_BATCH = 64 * 1024**2  # a gang's batch script only runs srun: a few dozen MiB
EXTERN_RSS = 1024 * 1024


def sacct_frame(x: dict, node_names: np.ndarray) -> pl.DataFrame:
    """All sacct rows (allocation + steps) for the jobs in ``x`` (column arrays, one entry per job).

    Keys: job_id, raw_id, raw_sort, name, user, account, partition, qos, state (final, incl. RUNNING and
    PENDING), exit_code, cancel_uid, submit, start, end (-1 = unknown), t_end, limit_s, nodes, node_idx,
    req_cpus (total), alloc_cpus (total), req_mem (per node), req_mem_total, alloc_mem_total, gpus,
    gpu_type_req, gpu_type, priority, min_runtime_s, never_started, cpu_s, max_rss, mean_gpu, max_gpu,
    max_gmem, disk.
    """
    names = node_names.tolist()
    hosts = [[names[k] for k in nd] for nd in x["node_idx"]]
    j = pl.DataFrame({
        "job_id": x["job_id"].astype(str), "raw_id": x["raw_id"].astype(str), "raw_sort": x["raw_sort"],
        "name": x["name"], "user": x["user"], "account": x["account"], "partition": x["partition"],
        "qos": x["qos"], "st": x["state"], "exit_code": x["exit_code"], "cancel_uid": x["cancel_uid"],
        "submit": x["submit"], "start": x["start"], "end": x["end"], "limit_s": x["limit_s"],
        "k": x["nodes"], "node_list": [hostlist(h) for h in hosts], "first_node": [h[0] if h else "" for h in hosts],
        "req_cpus": x["req_cpus"], "alloc_cpus": x["alloc_cpus"], "req_mem": x["req_mem"],
        "req_mem_total": x["req_mem_total"], "alloc_mem_total": x["alloc_mem_total"], "gpus": x["gpus"],
        "gtype_req": x["gpu_type_req"], "gtype": x["gpu_type"], "priority": x["priority"],
        "min_runtime_s": x["min_runtime_s"], "never": x["never_started"], "cpu_s": np.nan_to_num(x["cpu_s"]),
        "max_rss": np.nan_to_num(x["max_rss"]), "mean_gpu": np.nan_to_num(x["mean_gpu"]),
        "max_gpu": np.nan_to_num(x["max_gpu"]), "max_gmem": np.nan_to_num(x["max_gmem"]), "disk": x["disk"],
    }).with_columns(
        running=pl.col("st") == "RUNNING", pending=pl.col("st") == "PENDING",
        elapsed=pl.when(pl.col("start") < 0).then(0)
        .otherwise(pl.when(pl.col("end") >= 0).then(pl.col("end")).otherwise(x["t_end"]) - pl.col("start")),
    ).with_columns(no_alloc=pl.col("pending") | pl.col("never"))

    c = pl.col
    alloc = j.select(
        c("raw_sort"), pl.lit(0).alias("order"),
        c("job_id").alias("JobID"), c("raw_id").alias("JobIDRaw"), c("name").alias("JobName"),
        c("user").alias("User"), c("account").alias("Account"), c("partition").alias("Partition"),
        c("qos").alias("QOS"),
        pl.when(c("st") == "CANCELLED").then(pl.concat_str([pl.lit("CANCELLED by "), _s(c("cancel_uid"))]))
        .otherwise(c("st")).alias("State"),
        c("exit_code").alias("ExitCode"), _ts(c("submit")).alias("Submit"),
        pl.when(c("pending")).then(pl.lit("Unknown")).when(c("never")).then(pl.lit("None"))
        .otherwise(_ts(c("start"))).alias("Start"),
        pl.when(c("pending") | c("running")).then(pl.lit("Unknown")).otherwise(_ts(c("end"))).alias("End"),
        _dur(c("elapsed")).alias("Elapsed"), _dur(c("limit_s")).alias("Timelimit"), _s(c("k")).alias("NNodes"),
        c("node_list").alias("NodeList"), _s(c("req_cpus")).alias("ReqCPUS"),
        pl.when(c("no_alloc")).then(pl.lit("0")).otherwise(_s(c("alloc_cpus"))).alias("AllocCPUS"),
        _mem(c("req_mem_total")).alias("ReqMem"),  # Slurm >= 21.08: the whole job's request, no n/c suffix
        _tres(c("req_cpus"), c("gpus"), c("gtype_req"), c("req_mem_total"), c("k")).alias("ReqTRES"),
        pl.when(c("no_alloc")).then(pl.lit(""))
        .otherwise(_tres(c("alloc_cpus"), c("gpus"), c("gtype"), c("alloc_mem_total"), c("k"))).alias("AllocTRES"),
        pl.when(c("no_alloc") | c("running")).then(pl.lit("00:00:00")).otherwise(_cputime(c("cpu_s")))
        .alias("TotalCPU"),
        pl.lit("").alias("MaxRSS"), pl.lit("").alias("TRESUsageInAve"), pl.lit("").alias("TRESUsageInMax"),
        _s(c("priority")).alias("Priority"),
        pl.concat_str([pl.lit("min_runtime_s="), _s(c("min_runtime_s"))]).alias("Comment"),
    )

    # Steps exist for jobs that started. A gang's batch script only launches srun; its .0 step does the work.
    ran = j.filter(~c("no_alloc")).with_columns(
        gang=c("k") > 1, has_gpu=c("gpus") > 0,
        cpn=c("alloc_cpus") // c("k"), mpn=c("alloc_mem_total") // c("k"), gpn=c("gpus") // c("k"),
        bstate=c("st").replace_strict({k: v[0] for k, v in STEP_STATE.items()}),
        bexit=c("st").replace_strict({k: v[1] for k, v in STEP_STATE.items()}),
        estate=c("st").replace_strict({k: v[2] for k, v in STEP_STATE.items()}),
        eexit=c("st").replace_strict({k: v[3] for k, v in STEP_STATE.items()}),
        rss_task=c("max_rss") / c("k"), gmem_task=c("max_gmem") / c("k"),
    ).with_columns(
        bexit=pl.when(c("bexit") == "").then(c("exit_code")).otherwise(c("bexit")),
        batch_cpu=pl.when(c("gang")).then(pl.min_horizontal(c("cpu_s"), 1.5 + 0.0005 * c("elapsed")).round(3))
        .otherwise(c("cpu_s")),
    ).with_columns(step_cpu=(c("cpu_s") - c("batch_cpu")).clip(lower_bound=0.0))

    def step(df, suffix, order, name, state, exitc, nn, nodelist, cpus, gpus, mem, cpu_s, rss, ave, mx):
        tres = pl.concat_str([pl.lit("cpu="), _s(cpus), pl.lit(","), _gres(gpus, c("gtype"), True), pl.lit("mem="),
                              _s(mem // 1024**2), pl.lit("M,node="), _s(nn)])
        return df.select(
            c("raw_sort"), pl.lit(order).alias("order"),
            pl.concat_str([c("job_id"), pl.lit("." + suffix)]).alias("JobID"),
            pl.concat_str([c("raw_id"), pl.lit("." + suffix)]).alias("JobIDRaw"), pl.lit(name).alias("JobName"),
            pl.lit("").alias("User"), c("account").alias("Account"), pl.lit("").alias("Partition"),
            pl.lit("").alias("QOS"), state.alias("State"), exitc.alias("ExitCode"), _ts(c("start")).alias("Submit"),
            _ts(c("start")).alias("Start"),
            pl.when(c("running")).then(pl.lit("Unknown")).otherwise(_ts(c("end"))).alias("End"),
            _dur(c("elapsed")).alias("Elapsed"), pl.lit("").alias("Timelimit"), _s(nn).alias("NNodes"),
            nodelist.alias("NodeList"), _s(cpus).alias("ReqCPUS"), _s(cpus).alias("AllocCPUS"),
            pl.lit("").alias("ReqMem"), pl.lit("").alias("ReqTRES"), tres.alias("AllocTRES"),
            pl.when(c("running")).then(pl.lit("00:00:00")).otherwise(_cputime(cpu_s)).alias("TotalCPU"),
            pl.when(c("running")).then(pl.lit(""))
            .otherwise(pl.concat_str([_s(rss // 1024), pl.lit("K")])).alias("MaxRSS"),
            pl.when(c("running")).then(pl.lit("")).otherwise(ave).alias("TRESUsageInAve"),
            pl.when(c("running")).then(pl.lit("")).otherwise(mx).alias("TRESUsageInMax"),
            pl.lit("").alias("Priority"), pl.lit("").alias("Comment"),
        )

    single = ran.filter(~c("gang"))
    gang = ran.filter(c("gang"))
    no = pl.lit(False)
    zero = pl.lit(0)
    parts = [
        alloc,
        step(single, "batch", 1, "batch", c("bstate"), c("bexit"), pl.lit(1), c("first_node"), c("cpn"), c("gpn"),
             c("mpn"), c("batch_cpu"), c("rss_task"),
             _usage(c("batch_cpu"), c("rss_task"), c("mean_gpu"), c("gmem_task"), c("disk"), c("has_gpu")),
             _usage(c("batch_cpu"), c("rss_task"), c("max_gpu"), c("gmem_task"), c("disk"), c("has_gpu"))),
        step(gang, "batch", 1, "batch", c("bstate"), c("bexit"), pl.lit(1), c("first_node"), c("cpn"), zero,
             c("mpn"), c("batch_cpu"), pl.lit(GANG_RSS_BATCH),
             _usage(c("batch_cpu"), pl.lit(GANG_RSS_BATCH), zero, zero, c("disk") // 100, no),
             _usage(c("batch_cpu"), pl.lit(GANG_RSS_BATCH), zero, zero, c("disk") // 100, no)),
        step(ran, "extern", 2, "extern", c("estate"), c("eexit"), c("k"), c("node_list"), c("cpn") * c("k"),
             c("gpus"), c("mpn") * c("k"), pl.lit(0.0), pl.lit(EXTERN_RSS),
             _usage(pl.lit(0.0), pl.lit(EXTERN_RSS), zero, zero, zero, no),
             _usage(pl.lit(0.0), pl.lit(EXTERN_RSS), zero, zero, zero, no)),
        step(gang, "0", 3, "python", c("bstate"), c("bexit"), c("k"), c("node_list"), c("cpn") * c("k"),
             c("gpus"), c("mpn") * c("k"), c("step_cpu"), c("rss_task"),
             _usage(c("step_cpu") / c("k"), c("rss_task"), c("mean_gpu"), c("gmem_task"), c("disk"), c("has_gpu")),
             _usage(c("step_cpu") / c("k"), c("rss_task"), c("max_gpu"), c("gmem_task"), c("disk"), c("has_gpu"))),
    ]
    return pl.concat(parts).sort(["raw_sort", "order"], maintain_order=True).select(SACCT_FIELDS)


def write_sacct(path: Path, rows: pl.DataFrame) -> None:
    rows.write_csv(path, separator="|", quote_style="never", null_value="", line_terminator="\n")


# ------------------------------------------------------------------ samples and nodes
def write_samples(path: Path, job_ids: np.ndarray, ts: np.ndarray, s: dict) -> int:
    df = pl.DataFrame({
        "job_id": job_ids,
        "ts": pl.Series(ts.astype(np.int64) * 1_000_000).cast(UTC_TS),
        "interval_s": s["interval_s"].astype(float),
        "cpu_used": s["cpu_used"].astype(float),
        "mem_bytes": s["mem_bytes"].astype(float),
        "gpu_util": pl.Series(s["gpu_util"]).fill_nan(None),
        "gpu_mem_bytes": pl.Series(s["gpu_mem_bytes"]).fill_nan(None),
    })
    df.write_parquet(path, compression="zstd", statistics=True, row_group_size=1_000_000)
    return df.height


def write_nodes(path: Path, cluster: str, layout, state: np.ndarray) -> None:
    pl.DataFrame({
        "cluster": [cluster] * len(layout), "node": layout.node, "partition": layout.partition,
        "cpus": layout.cpus, "gpus": layout.gpus, "gpu_type": layout.gpu_type,
        "mem_bytes": layout.mem_bytes, "state": state,
    }).write_csv(path)
