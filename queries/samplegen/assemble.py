"""Turn scheduled jobs into the exported window: final states, Slurm job ids, usage, files.

Invariants:
- job ids follow submission order (one counter, array tasks take consecutive raw ids after their master);
- a job is exported iff it was pending, running or ended inside [window start, window end]
  (``sacct -S -E`` semantics); at the window end running jobs are RUNNING (End=Unknown) and queued ones
  PENDING (Start=Unknown), whatever the simulation would have done later;
- usage (samples and sacct totals) is generated only for exported jobs that started.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import export, usage
from .org import GPU_MEM_BYTES

FIRST_JOB_ID = 1_200_000
ADMIN_CANCEL_SHARE = 0.04  # cancellations by an operator (uid 0), e.g. draining a broken host


def _ranges(idx: list[int]) -> str:
    idx = sorted(idx)
    out, lo, prev = [], idx[0], idx[0]
    for v in idx[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(lo) if lo == prev else f"{lo}-{prev}")
        lo = prev = v
    return ",".join(out)


def _job_ids(j: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(raw id, printed JobID, array master id) for every job; unaccepted jobs get -1 / ''."""
    n = len(j["cls"])
    acc = np.flatnonzero(j["accepted"])
    order = acc[np.lexsort((j["array_index"][acc], j["sub_id"][acc], j["submit"][acc]))]
    raw = np.full(n, -1, np.int64)
    raw[order] = FIRST_JOB_ID + np.arange(len(order))
    master = raw.copy()
    is_task = j["array_index"] >= 0
    first_task = {}
    for i in order[is_task[order]].tolist():
        first_task.setdefault(int(j["sub_id"][i]), int(raw[i]))
    for i in np.flatnonzero(is_task & j["accepted"]).tolist():
        master[i] = first_task[int(j["sub_id"][i])]
    printed = np.array([f"{m}_{a}" if a >= 0 else str(r)
                        for r, m, a in zip(raw.tolist(), master.tolist(), j["array_index"].tolist())])
    return raw, printed, master


def write_export(out: Path, rng, org, layout, j: dict, t_win: int, t_end: int, params: dict) -> dict[str, Path]:
    raw, printed, master = _job_ids(j)
    started = j["start"] >= 0
    running = started & (j["end"] > t_end)
    pending = j["accepted"] & ~started & ~j["cancelled_pending"]
    visible = j["accepted"] & (pending | running | (j["end"] >= t_win))
    sel = np.flatnonzero(visible)
    sel = sel[np.lexsort((j["array_index"][sel], raw[sel]))]
    x = {k: v[sel] for k, v in j.items()}
    n = len(sel)
    x["raw"], x["job_id"], x["master"] = raw[sel], printed[sel], master[sel]
    run_x, pend_x = running[sel], pending[sel]

    state = x["state"].copy()
    state[run_x] = "RUNNING"
    state[pend_x] = "PENDING"
    state[x["cancelled_pending"]] = "CANCELLED"
    exit_code = np.where(run_x | pend_x | x["cancelled_pending"], "0:0", x["exit_code"])
    st = x["start"] >= 0
    elapsed = np.where(st, np.where(run_x, t_end, x["end"]) - x["start"], 0)

    node_type = np.array([layout.gpu_type[nd[0]] if nd else "" for nd in x["node_idx"]])
    gpu_type = np.where(st, node_type, x["gpu_type"])
    gang_cpus = np.array([int(layout.cpus[nd].sum()) if nd else 0 for nd in x["node_idx"]])
    gang_mem = np.array([int(layout.mem_bytes[nd].sum()) if nd else 0 for nd in x["node_idx"]])
    gang = x["nodes"] > 1
    alloc_cpus = np.where(st, np.where(gang, gang_cpus, x["alloc_cpus_node"]), 0)
    alloc_mem = np.where(st, np.where(gang, gang_mem, x["alloc_mem_node"]), x["req_mem"] * x["nodes"])
    wait = np.where(st, x["start"], np.where(x["cancelled_pending"], x["end"], t_end)) - x["submit"]
    priority = x["priority_base"] + np.round(1000 * np.minimum(wait, 7 * 86400) / (7 * 86400)).astype(np.int64)
    uid = org.users.uid[x["user"]]
    cancel_uid = np.where(rng.random(n) < ADMIN_CANCEL_SHARE, 0, uid)

    # --- usage for exported jobs that started
    s_idx = np.flatnonzero(st)
    u = {k: v[s_idx] for k, v in x.items() if isinstance(v, np.ndarray) and v.dtype != object}
    u.update(alloc_cpus_total=alloc_cpus[s_idx], req_mem_total=(x["req_mem"] * x["nodes"])[s_idx],
             state=state[s_idx])
    gmem = np.array([GPU_MEM_BYTES.get(t, 0) for t in gpu_type[s_idx]], dtype=float)
    levels = usage.job_levels(rng, org, u, gmem)
    samples, tot = usage.series(rng, u, levels, elapsed[s_idx].astype(np.int64))
    cols = {}
    for key in ("cpu_s", "max_rss", "mean_gpu", "max_gpu", "max_gmem"):
        cols[key] = np.full(n, np.nan)
        cols[key][s_idx] = tot[key]
    disk = np.floor(elapsed * rng.lognormal(np.log(2e6), 1.0, n)).astype(np.int64)

    # --- still-pending tasks of one array collapse into a single `123_[4-9]` row, as sacct prints them
    keep = np.ones(n, bool)
    job_id = x["job_id"].astype(object)
    raw_s = np.array([str(r) for r in x["raw"].tolist()], dtype=object)
    pend_tasks = np.flatnonzero(pend_x & (x["array_index"] >= 0))
    by_master: dict[int, list[int]] = {}
    for i in pend_tasks.tolist():
        by_master.setdefault(int(x["master"][i]), []).append(i)
    for m, rows in by_master.items():
        if len(rows) > 1:
            job_id[rows[0]] = f"{m}_[{_ranges([int(x['array_index'][r]) for r in rows])}]"
            raw_s[rows[0]] = str(m)
            keep[rows[1:]] = False

    names = org.users.name
    rowsrc = dict(
        job_id=job_id, raw_id=raw_s, raw_sort=x["raw"], name=x["name"], user=names[x["user"]],
        account=np.array(org.accounts)[x["team"]], partition=x["partition"], qos=x["qos"], state=state,
        exit_code=exit_code, cancel_uid=cancel_uid, submit=x["submit"], start=x["start"],
        end=np.where(run_x | pend_x, -1, x["end"]), t_end=t_end, limit_s=x["limit_s"], nodes=x["nodes"],
        node_idx=x["node_idx"], req_cpus=x["req_cpus"] * x["nodes"], alloc_cpus=alloc_cpus,
        req_mem=x["req_mem"], req_mem_total=x["req_mem"] * x["nodes"], alloc_mem_total=alloc_mem,
        gpus=x["gpus"], gpu_type_req=x["gpu_type"], gpu_type=gpu_type, priority=priority,
        min_runtime_s=x["min_runtime_s"], never_started=x["cancelled_pending"], disk=disk, **cols)
    rowsrc = {k: (v[keep] if isinstance(v, np.ndarray) and v.shape == (n,) else v) for k, v in rowsrc.items()}
    paths = {"sacct": out / "sacct.txt", "samples": out / "samples.parquet", "nodes": out / "nodes.csv",
             "truth": out / "ground_truth.json"}
    export.write_sacct(paths["sacct"], export.sacct_frame(rowsrc, layout.node))

    ts = x["start"][s_idx][samples["jid"]] + samples["offset_s"]
    n_samples = export.write_samples(paths["samples"], x["job_id"][s_idx][samples["jid"]], ts, samples)
    export.write_nodes(paths["nodes"], params["cluster"], layout, _node_state(layout, x, run_x))
    _write_truth(paths["truth"], org, params, t_win, t_end, n_jobs=int(keep.sum()), n_samples=n_samples)
    return paths


def _node_state(layout, x, run_x) -> np.ndarray:
    """Slurm-style node state at the window end: alloc (full), mixed (partly used) or idle."""
    used_g = np.zeros(len(layout), np.int64)
    used_c = np.zeros(len(layout), np.int64)
    for i in np.flatnonzero(run_x).tolist():
        for nd in x["node_idx"][i]:
            used_g[nd] += x["gpn"][i]
            used_c[nd] += layout.cpus[nd] if x["nodes"][i] > 1 else x["alloc_cpus_node"][i]
    full = np.where(layout.gpus > 0, used_g >= layout.gpus, used_c >= layout.cpus) | (used_c >= layout.cpus)
    return np.where(full, "alloc", np.where((used_g > 0) | (used_c > 0), "mixed", "idle"))


def _write_truth(path: Path, org, params, t_win, t_end, **counts) -> None:
    u = org.users
    users = [
        {"user": str(u.name[i]), "uid": int(u.uid[i]), "account": org.accounts[u.team[i]],
         "second_account": org.accounts[u.team2[i]] if u.team2[i] >= 0 else None,
         "habit": str(u.habit[i]), "cpu_inflation": round(float(u.cpu_inflation[i]), 3),
         "mem_inflation": round(float(u.mem_inflation[i]), 3), "gpu_efficiency": round(float(u.gpu_eff[i]), 3),
         "walltime_padding": round(float(u.wall_pad[i]), 3), "asks_max_walltime": bool(u.asks_max_wall[i]),
         "parks_interactive_gpus": bool(u.parker[i])}
        for i in range(len(u.name))
    ]
    doc = {"params": params, "window": [export.fmt_ts([t_win])[0] + "Z", export.fmt_ts([t_end])[0] + "Z"],
           "counts": counts, "users": users,
           "note": "planted per-user habits of the sample cluster (not ingested); see sample_data/README.md"}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
