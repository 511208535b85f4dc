"""``sacct --json`` (Slurm 21.08 to 23.11, data_parser v0.0.37 to v0.0.40) -> canonical jobs (``schema.JOBS``).

One job record -> one job; its ``steps[]`` are rolled up like sacct's step rows. ``line`` in rejects is the
1-based index of the record in ``jobs[]`` (a JSON file has no meaningful line per job); ``raw`` is the record
re-serialised. ``Parsed.cluster`` is the records' ``cluster`` when they all agree; each job keeps its own.

Schema drift handled (seen in the SARC test files): numbers as plain ints or ``{"set", "infinite", "number"}``
(unset -> null, infinite -> null); ``state`` as ``{"current": "X"}`` or ``{"current": ["X", ...]}``;
``exit_code.return_code``/``signal`` plain or wrapped; ``comment`` as a string or
``{"administrator", "job", "system"}``; ``required.memory`` (<= 22.05) vs ``memory_per_node``/``memory_per_cpu``.

Units: ``time.limit`` minutes; ``time.elapsed``/``submission``/``start``/``end`` seconds (0 = not set ->
null); TRES ``mem`` counts in MB for ``tres.requested``/``tres.allocated`` (the job's request), bytes in a
step's TRES usage (``steps[].tres.requested.{max,average}`` = sacct TRESUsageIn*); ``gres/gpuutil`` percent.
GPUs are counted once (``gres`` ``gpu`` entry, else the sum of typed ``gpu:TYPE`` entries).
Per job: ``cpu_seconds_used`` = ``time.total`` (user + system), else the steps' sum; ``max_rss_bytes``,
``max_gpu_util``, ``gpu_mem_used_bytes`` = max over steps; ``mean_gpu_util`` = Elapsed-weighted mean of the
steps' average; ``max_cpu_util`` = max over the job and its steps of CPU time / (elapsed x CPUs), capped at 1.
``comment.administrator`` (sacct's AdminComment) may hold a jobstats summary: decoded and applied as for text
dumps (``jobstats`` module); a malformed or untrusted one is a field reject, the record stays accepted.
Records rejected: not an object, no job id, unknown state, end before start, negative or absurd sizes.
"""
from __future__ import annotations

import datetime as dt
import json

import polars as pl

from .. import schema
from . import IngestError, Parsed
from . import common as c
from . import jobstats
from . import textio

MAX_COUNT = 1e6
MAX_BYTES = float(2**60)
MiB = 2**20


def sniff(head: bytes, name: str) -> bool:
    text = head.lstrip()
    return text.startswith(b"{") and b'"jobs"' in head and (b'"job_id"' in head or b'"meta"' in head)


def _num(v):
    """Plain number, or Slurm's ``{"set", "infinite", "number"}`` wrapper -> float; unset/infinite -> None."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if isinstance(v, bool) or v is None:
        return None
    return float(v) if isinstance(v, (int, float)) else None


def _ts(v):
    n = _num(v)
    return dt.datetime.fromtimestamp(n, dt.timezone.utc) if n else None


def _tres(entries) -> dict:
    """List of ``{type, name, count}`` -> cpu, gpus, gpu_type, mem (count as given), nodes, gres name -> count."""
    out: dict = {"cpu": None, "gpus": None, "gpu_type": None, "mem": None, "nodes": None, "gres": {}}
    if not entries:
        return out
    typed = 0.0
    for e in entries:
        kind, name, count = e.get("type"), e.get("name") or "", _num(e.get("count"))
        if kind == "cpu":
            out["cpu"] = count
        elif kind == "mem":
            out["mem"] = count
        elif kind == "node":
            out["nodes"] = count
        elif kind == "gres":
            out["gres"][name] = count
            if name == "gpu":
                out["gpus"] = count
            elif name.startswith("gpu:"):
                typed += count or 0
                out["gpu_type"] = out["gpu_type"] or name.split(":", 1)[1]
    if out["gpus"] is None:
        out["gpus"] = typed
    return out


def _cpu_seconds(t: dict | None):
    if not isinstance(t, dict):
        return None
    s, us = _num(t.get("seconds")), _num(t.get("microseconds"))
    return None if s is None else s + (us or 0) / 1e6


def _state(job: dict) -> str | None:
    cur = (job.get("state") or {}).get("current") if isinstance(job.get("state"), dict) else job.get("state")
    if isinstance(cur, list):
        cur = cur[0] if cur else None
    return c.normalise_state(cur) if isinstance(cur, str) else None


def _exit_code(job: dict) -> str | None:
    ec = job.get("exit_code")
    if not isinstance(ec, dict):
        return None
    rc = _num(ec.get("return_code"))
    sig = ec.get("signal")
    sig = _num(sig.get("id")) if isinstance(sig, dict) else None
    return None if rc is None else f"{int(rc)}:{int(sig or 0)}"


def _job_id(job: dict) -> tuple[str | None, str | None]:
    """-> (job id as sacct prints it, array parent id)."""
    jid = _num(job.get("job_id"))
    if jid is None:
        return None, None
    arr, het = job.get("array") or {}, job.get("het") or {}
    parent, task = _num(arr.get("job_id")), _num(arr.get("task_id"))
    if parent and task is not None:
        return f"{int(parent)}_{int(task)}", str(int(parent))
    if parent and isinstance(arr.get("task"), str) and arr["task"]:  # a pending array record: 123_[1-5]
        return f"{int(parent)}_[{arr['task']}]", str(int(parent))
    het_id, offset = _num(het.get("job_id")), _num(het.get("job_offset"))
    if het_id and offset is not None:
        return f"{int(het_id)}+{int(offset)}", None
    return str(int(jid)), None


def _comment(job: dict) -> str | None:
    com = job.get("comment")
    if isinstance(com, dict):
        com = " ".join(v for v in (com.get("job"), com.get("administrator"), com.get("system")) if v)
    return com if isinstance(com, str) else None


def _admin_comment(job: dict) -> str | None:
    """The administrator comment (where jobstats writes its summary), or None."""
    com = job.get("comment")
    admin = com.get("administrator") if isinstance(com, dict) else None
    return admin if isinstance(admin, str) else None


def _job(job: dict) -> tuple[dict | None, str | None, str | None]:
    """One record -> (row, rejected field, reason)."""
    if not isinstance(job, dict):
        return None, None, "record is not a JSON object"
    job_id, array_id = _job_id(job)
    if job_id is None:
        return None, "job_id", "missing or non-numeric job id"
    state = _state(job)
    if state is None:
        return None, "state", f"unknown state {json.dumps(job.get('state'))}"
    t = job.get("time") or {}
    submit, start, end = _ts(t.get("submission")), _ts(t.get("start")), _ts(t.get("end"))
    if start and end and end < start:
        return None, "time.end", "end before start"
    elapsed = _num(t.get("elapsed"))
    tres = job.get("tres") or {}
    req, alloc = _tres(tres.get("requested")), _tres(tres.get("allocated"))
    required = job.get("required") or {}
    req_cpus = _num(required.get("CPUs")) or req["cpu"]
    nodes = alloc["nodes"] or req["nodes"] or _num(job.get("allocation_nodes"))
    mem_mb = req["mem"]
    if mem_mb is None:  # no TRES: memory per node / per CPU (23.02+) or the old single figure (per node)
        per_node, per_cpu = _num(required.get("memory_per_node")), _num(required.get("memory_per_cpu"))
        mem_mb = (per_node * (nodes or 1) if per_node else per_cpu * (req_cpus or 1) if per_cpu
                  else _num(required.get("memory")))
    started = start is not None
    limit_min = _num(t.get("limit"))
    sizes = [req_cpus, nodes, req["gpus"], alloc["cpu"], alloc["gpus"]]
    if any(v is not None and v < 0 for v in sizes + [elapsed, mem_mb]):
        return None, "tres", "negative count or duration"
    if any(v is not None and v > MAX_COUNT for v in sizes) or (mem_mb or 0) * MiB > MAX_BYTES:
        return None, "tres", "absurd size (> 1e6 CPUs/GPUs/nodes or > 1 EiB)"

    cpus = alloc["cpu"] or req_cpus
    total = _cpu_seconds(t.get("total"))
    if started and total == 0 and (elapsed or 0) > 0 and not job.get("steps"):
        total = None  # sacct -X reports zero usage without steps: unknown, not idle
    utils = [total / (elapsed * cpus)] if total is not None and elapsed and cpus else []
    step_cpu, rss, gmem, umax, uw, w = [], [], [], [], 0.0, 0.0
    for step in job.get("steps") or []:
        st = step.get("time") or {}
        s_cpu, s_el = _cpu_seconds(st.get("total")), _num(st.get("elapsed"))
        s_cpus = _tres((step.get("tres") or {}).get("allocated"))["cpu"] or cpus
        if s_cpu is not None:
            step_cpu.append(s_cpu)
            if s_el and s_cpus:
                utils.append(s_cpu / (s_el * s_cpus))
        usage = (step.get("tres") or {}).get("requested") or {}
        mx, av = _tres(usage.get("max")), _tres(usage.get("average"))
        rss += [mx["mem"]] if mx["mem"] is not None else []
        gmem += [mx["gres"]["gpumem"]] if mx["gres"].get("gpumem") is not None else []
        u_max = mx["gres"].get("gpuutil", av["gres"].get("gpuutil"))
        umax += [u_max / 100] if u_max is not None else []
        if av["gres"].get("gpuutil") is not None:
            weight = max(s_el or 0, 1.0)
            uw, w = uw + av["gres"]["gpuutil"] / 100 * weight, w + weight
    gpus = (alloc["gpus"] if tres.get("allocated") else None) or req["gpus"]

    def gpu_util(u):  # summed over a task's GPUs above 100 %: spread over the job's GPUs
        return None if u is None else min(max(u / max(gpus or 1, 1) if u > 1 else u, 0.0), 1.0)

    com = _comment(job)
    min_rt = c.parse_comment(com).get("min_runtime_s")
    nodelist = job.get("nodes")
    row = {
        "cluster": job.get("cluster") or None, "job_id": job_id, "array_job_id": array_id,
        "job_name": job.get("name") or None, "user": job.get("user") or None,
        "account": job.get("account") or None, "partition": job.get("partition") or None,
        "qos": job.get("qos") or None, "state": state, "exit_code": _exit_code(job),
        "submit": submit, "start": start, "end": end,
        "elapsed_s": elapsed if elapsed is not None else 0.0 if not started else None,
        "time_limit_s": limit_min * 60 if limit_min is not None else None,
        "nodes": int(nodes) if nodes is not None else None,
        "node_list": nodelist if nodelist and nodelist not in ("None assigned", "(null)") else None,
        "req_cpus": req_cpus, "req_gpus": req["gpus"] if tres.get("requested") else None,
        "gpu_type": req["gpu_type"] or alloc["gpu_type"],
        "req_mem_bytes": mem_mb * MiB if mem_mb else None,
        "alloc_cpus": alloc["cpu"] if started else None,
        "alloc_gpus": alloc["gpus"] if started and tres.get("allocated") else None,
        "alloc_mem_bytes": alloc["mem"] * MiB if started and alloc["mem"] is not None else None,
        "cpu_seconds_used": total if total is not None else (sum(step_cpu) if step_cpu else None),
        "max_rss_bytes": max(rss) if rss else None,
        "mean_gpu_util": gpu_util(uw / w) if w else None, "max_gpu_util": gpu_util(max(umax)) if umax else None,
        "max_cpu_util": min(max(utils), 1.0) if utils else None,
        "gpu_mem_used_bytes": max(gmem) if gmem else None,
        "min_runtime_s": float(min_rt) if min_rt and min_rt.replace(".", "", 1).isdigit() else None,
        "priority": _num(job.get("priority")),
    }
    row["job_class"] = c.job_class(row["qos"], row["job_name"], row["req_gpus"])
    return row, None, None


def parse(path, **_) -> Parsed:
    data = textio.read_bytes(path)
    if not data.strip():
        raise IngestError(path, "empty file", line=1)
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as exc:
        raise IngestError(path, f"not UTF-8 text at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise IngestError(path, f"not valid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise IngestError(path, "not sacct --json output: no top-level \"jobs\" list", line=1, field="jobs")
    rows, rejects, admin, where = [], [], [], []
    for i, job in enumerate(doc["jobs"], 1):
        row, field, reason = _job(job)
        if row is None:
            rejects.append({"line": i, "field": field, "reason": reason, "raw": json.dumps(job, sort_keys=True)})
        else:
            rows.append(row)
            admin.append(_admin_comment(job))
            where.append(i)
    jobs = schema.conform(pl.DataFrame(rows, schema=schema.polars_schema("jobs"), orient="row"), "jobs") if rows \
        else schema.empty("jobs")
    # jobstats summaries in comment.administrator (before the de-duplication below, which keeps row order)
    jobs, field_rejects = jobstats.apply(jobs, pl.Series(admin, dtype=pl.String), pl.Series(where, dtype=pl.Int64),
                                         field="comment.administrator")
    jobs = jobs.unique(subset=["cluster", "job_id"], keep="last", maintain_order=True)
    clusters = {r["cluster"] for r in rows if r["cluster"]}
    meta_cluster = ((doc.get("meta") or {}).get("slurm") or {}).get("cluster")
    rej = pl.DataFrame(rejects, schema={"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String})
    return Parsed(rows_read=len(doc["jobs"]), rows_accepted=len(rows), jobs=jobs, rejects=rej,
                  field_rejects=field_rejects,
                  cluster=clusters.pop() if len(clusters) == 1 else (meta_cluster if not clusters else None))
