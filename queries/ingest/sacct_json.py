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
import math
import re

import polars as pl

from ..store import name_problem, schema
from .pipeline import IngestError, Parsed
from . import common as c
from . import jobstats
from . import textio
from .limits import MAX_BYTES, MAX_COUNT, MAX_EPOCH_S, MAX_SECONDS

MiB = 2**20


def sniff(head: bytes, name: str) -> bool:
    text = head.lstrip()
    return text.startswith(b"{") and b'"jobs"' in head and (b'"job_id"' in head or b'"meta"' in head)


class _Bad(Exception):
    """A record that cannot be read: rejected with ``field`` and ``reason``; the other records go on."""

    def __init__(self, field: str | None, reason: str):
        super().__init__(reason)
        self.field, self.reason = field, reason


def _num(v, field: str | None = None):
    """Plain number, or Slurm's ``{"set", "infinite", "number"}`` wrapper -> float; absent/unset/infinite -> None.
    Anything else (a string, a list, a NaN, an overflowing number) is not a value Slurm writes: ``_Bad``."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Bad(field, f"not a number: {_short(v)}")
    try:
        f = float(v)
    except OverflowError:  # an integer beyond float range
        raise _Bad(field, f"number out of range: {_short(v)}") from None
    if not math.isfinite(f):
        raise _Bad(field, f"not a finite number: {_short(v)}")
    return f


def _short(v) -> str:
    text = json.dumps(v) if not isinstance(v, float) or math.isfinite(v) else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _obj(parent: dict, key: str, field: str) -> dict:
    """``parent[key]`` as an object ({} when absent or null); ``_Bad`` when it is something else."""
    v = parent.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Bad(field, f"not a JSON object: {_short(v)}")
    return v


def _list(parent: dict, key: str, field: str) -> list:
    v = parent.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Bad(field, f"not a JSON list: {_short(v)}")
    return v


def _text(parent: dict, key: str, field: str | None = None) -> str | None:
    """A string field (empty -> None); ``_Bad`` for a number, object or list where Slurm writes text."""
    v = parent.get(key)
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        raise _Bad(field or key, f"not a string: {_short(v)}")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800" escape): not text any store can hold
        raise _Bad(field or key, f"not valid Unicode text: {_short(v)}") from None
    return v


def _ts(v, field: str):
    """Epoch seconds -> UTC datetime; 0 (not set) -> None; beyond the plausible range -> ``_Bad``."""
    n = _num(v, field)
    if not n:
        return None
    if not 0 < n < MAX_EPOCH_S:
        raise _Bad(field, f"implausible epoch seconds: {_short(v)}")
    return dt.datetime.fromtimestamp(n, dt.timezone.utc)


def _tres(entries, field: str) -> dict:
    """List of ``{type, name, count}`` -> cpu, gpus, gpu_type, mem (count as given), nodes, gres name -> count."""
    out: dict = {"cpu": None, "gpus": None, "gpu_type": None, "mem": None, "nodes": None, "gres": {}}
    if not entries:
        return out
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _Bad(field, f"not a list of TRES entries: {_short(entries)}")
    typed = 0.0
    for e in entries:
        kind, name, count = e.get("type"), _text(e, "name", field) or "", _num(e.get("count"), field)
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


def _cpu_seconds(t, field: str):
    if not isinstance(t, dict):
        return None
    s, us = _num(t.get("seconds"), field), _num(t.get("microseconds"), field)
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
    rc = _num(ec.get("return_code"), "exit_code")
    sig = ec.get("signal")
    sig = _num(sig.get("id"), "exit_code") if isinstance(sig, dict) else None
    return None if rc is None else f"{int(rc)}:{int(sig or 0)}"


def _id(v, field: str) -> int | None:
    """A job, array or het id: a whole number in 0..2**63 (what Slurm's ids fit in), else ``_Bad``."""
    n = _num(v, field)
    if n is None:
        return None
    if n != int(n) or not 0 <= n < 2**63:
        raise _Bad(field, f"not a job id: {_short(v)}")
    return int(n)


def _job_id(job: dict) -> tuple[str | None, str | None]:
    """-> (job id as sacct prints it, array parent id)."""
    try:
        jid = _id(job.get("job_id"), "job_id")
    except _Bad:
        return None, None
    if jid is None:
        return None, None
    arr, het = _obj(job, "array", "array"), _obj(job, "het", "het")
    parent, task = _id(arr.get("job_id"), "array.job_id"), _id(arr.get("task_id"), "array.task_id")
    if parent and task is not None:
        return f"{parent}_{task}", str(parent)
    task_range = arr.get("task") if isinstance(arr.get("task"), str) else None
    if parent and task_range:  # a pending array record: 123_[1-5]
        return f"{parent}_[{_text(arr, 'task', 'array.task')}]", str(parent)
    het_id, offset = _id(het.get("job_id"), "het.job_id"), _id(het.get("job_offset"), "het.job_offset")
    if het_id and offset is not None:
        return f"{het_id}+{offset}", None
    return str(jid), None


def _comment(job: dict) -> str | None:
    com = job.get("comment")
    if isinstance(com, dict):
        parts = [_text(com, k, f"comment.{k}") for k in ("job", "administrator", "system")]
        return " ".join(v for v in parts if v) or None
    return _text(job, "comment")


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
    t = _obj(job, "time", "time")
    submit, start = _ts(t.get("submission"), "time.submission"), _ts(t.get("start"), "time.start")
    end = _ts(t.get("end"), "time.end")
    if start and end and end < start:
        return None, "time.end", "end before start"
    elapsed = _num(t.get("elapsed"), "time.elapsed")
    tres = _obj(job, "tres", "tres")
    req, alloc = _tres(tres.get("requested"), "tres.requested"), _tres(tres.get("allocated"), "tres.allocated")
    required = _obj(job, "required", "required")
    req_cpus = _num(required.get("CPUs"), "required.CPUs") or req["cpu"]
    nodes = alloc["nodes"] or req["nodes"] or _num(job.get("allocation_nodes"), "allocation_nodes")
    mem_mb = req["mem"]
    if mem_mb is None:  # no TRES: memory per node / per CPU (23.02+) or the old single figure (per node)
        per_node = _num(required.get("memory_per_node"), "required.memory_per_node")
        per_cpu = _num(required.get("memory_per_cpu"), "required.memory_per_cpu")
        mem_mb = (per_node * (nodes or 1) if per_node else per_cpu * (req_cpus or 1) if per_cpu
                  else _num(required.get("memory"), "required.memory"))
    started = start is not None
    limit_min = _num(t.get("limit"), "time.limit")
    total = _cpu_seconds(t.get("total"), "time.total")
    sizes = [req_cpus, nodes, req["gpus"], alloc["cpu"], alloc["gpus"]]
    mems_mb = [mem_mb, alloc["mem"]]
    durations = [elapsed, total, limit_min * 60 if limit_min is not None else None]
    if any(v is not None and v < 0 for v in sizes + durations + mems_mb):
        return None, "tres", "negative count or duration"
    if (any(v is not None and v > MAX_COUNT for v in sizes) or any((v or 0) * MiB > MAX_BYTES for v in mems_mb)
            or any((v or 0) > MAX_SECONDS for v in durations)):
        return None, "tres", "absurd size (> 1e6 CPUs/GPUs/nodes, > 1 EiB or > 100 years)"

    cpus = alloc["cpu"] or req_cpus
    if started and total == 0 and (elapsed or 0) > 0 and not job.get("steps"):
        total = None  # sacct -X reports zero usage without steps: unknown, not idle
    utils = [total / (elapsed * cpus)] if total is not None and elapsed and cpus else []
    step_cpu, rss, gmem, umax, uw, w = [], [], [], [], 0.0, 0.0
    for k, step in enumerate(_list(job, "steps", "steps")):
        where = f"steps[{k}]"
        if not isinstance(step, dict):
            raise _Bad(where, f"not a JSON object: {_short(step)}")
        st, step_tres = _obj(step, "time", f"{where}.time"), _obj(step, "tres", f"{where}.tres")
        s_cpu, s_el = _cpu_seconds(st.get("total"), f"{where}.time.total"), _num(st.get("elapsed"), f"{where}.time")
        s_cpus = _tres(step_tres.get("allocated"), f"{where}.tres.allocated")["cpu"] or cpus
        if any(v is not None and not 0 <= v <= MAX_SECONDS for v in (s_cpu, s_el)):
            raise _Bad(f"{where}.time", "negative or absurd duration (> 100 years)")
        if s_cpu is not None:
            step_cpu.append(s_cpu)
            if s_el and s_cpus:
                utils.append(s_cpu / (s_el * s_cpus))
        usage = _obj(step_tres, "requested", f"{where}.tres.requested")
        mx = _tres(usage.get("max"), f"{where}.tres.requested.max")
        av = _tres(usage.get("average"), f"{where}.tres.requested.average")
        if any(v is not None and not 0 <= v <= MAX_BYTES for v in (mx["mem"], mx["gres"].get("gpumem"))):
            raise _Bad(f"{where}.tres.requested.max", "negative or absurd memory (> 1 EiB)")
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
    min_rt = float(min_rt) if min_rt and re.fullmatch(r"[0-9]{1,12}(?:\.[0-9]*)?", min_rt) else None
    nodelist = _text(job, "nodes")
    cluster = _text(job, "cluster")
    if cluster is not None and name_problem(cluster):  # the name becomes a directory of the store
        raise _Bad("cluster", name_problem(cluster))
    row = {
        "cluster": cluster, "job_id": job_id, "array_job_id": array_id,
        "job_name": _text(job, "name"), "user": _text(job, "user"),
        "account": _text(job, "account"), "partition": _text(job, "partition"),
        "qos": _text(job, "qos"), "state": state, "exit_code": _exit_code(job),
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
        "min_runtime_s": min_rt,
        "priority": _num(job.get("priority"), "priority"),
    }
    row["job_class"] = c.job_class(row["qos"], row["job_name"], row["req_gpus"])
    return row, None, None


def parse(path, **_) -> Parsed:
    doc = textio.read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise IngestError(path, "not sacct --json output: no top-level \"jobs\" list", line=1, field="jobs")
    rows, rejects, admin, where = [], [], [], []
    for i, job in enumerate(doc["jobs"], 1):
        try:
            row, field, reason = _job(job)
        except _Bad as bad:
            row, field, reason = None, bad.field, bad.reason
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
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    slurm = meta.get("slurm") if isinstance(meta.get("slurm"), dict) else {}
    meta_cluster = slurm.get("cluster") if isinstance(slurm.get("cluster"), str) else None
    rej = pl.DataFrame(rejects, schema={"line": pl.Int64, "field": pl.String, "reason": pl.String, "raw": pl.String})
    return Parsed(rows_read=len(doc["jobs"]), rows_accepted=len(rows), jobs=jobs, rejects=rej,
                  field_rejects=field_rejects,
                  cluster=clusters.pop() if len(clusters) == 1 else (meta_cluster if not clusters else None))
