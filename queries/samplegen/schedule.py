"""A small built-in scheduler that turns submissions into start times and node lists, one partition at a time.

Policy: priority order (QoS + fair-share tier, then submit time), EASY backfill: the first job that does not
fit gets a reservation on the nodes that free up first (by the running jobs' walltime limits); later jobs
start now if they fit and either avoid the reserved nodes or end (by their limit) before the reservation.
Single-node jobs go best-fit (fewest GPUs, then CPUs, left over); multi-node gangs take whole idle nodes.
Tasks of a throttled array (``--array=...%N``) beyond N running are not eligible and are skipped.
A pass examines at most ``DEPTH`` queued jobs (Slurm's backfill has the same kind of bound).

Demand feedback: users see the queue. A submission is kept with probability
``min(1 - mine / (user_backlog * size), (thin_hi - load) / (thin_hi - thin_lo))`` (clipped to 0..1), where
``mine`` is what that user already has waiting in the partition, ``load`` the pending work over the size
of the nodes the job could use (GPUs, or CPUs on a CPU partition): a job pinned to h100 looks at the h100
queue (plus its share of untyped work), an untyped job at the whole partition. The per-user term makes
the owner of a stuck 64-GPU gang hold back while everybody else keeps submitting (so small jobs are there
to backfill); the global term holds the backlog, and hence demand / capacity, steady instead of growing
without bound.

Invariants:
- ``start >= submit``; no node ever holds more GPUs, CPUs or memory than it has;
- a job runs exactly ``runtime_s`` once started (TIMEOUTs were given runtime == limit by the workload);
- only the state at ``t_end`` is cut: jobs running then keep their (future) end, pending ones have start -1.
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from itertools import islice

import numpy as np

FINISH, SUBMIT, CANCEL = 0, 1, 2  # processing order at equal times: free resources before placing
DEPTH = 200                        # queued jobs examined per pass
RES_TTL_S = 600                    # a head job's reservation is recomputed at most this often (like a backfill cycle)
NEVER = 2**62


@dataclass
class Result:
    accepted: np.ndarray      # bool: the user did submit it
    submit: np.ndarray        # int: submit time (follow-ups get theirs here)
    start: np.ndarray         # int, -1 never started
    end: np.ndarray           # int, -1 never ended (pending at t_end); cancel time for pending cancels
    cancelled_pending: np.ndarray  # bool
    node_idx: list            # per job: list of node indices (global), [] if never started
    alloc_cpus: np.ndarray    # per node
    alloc_mem: np.ndarray     # per node


def simulate(jobs: dict[str, np.ndarray], idx: np.ndarray, node_ids: np.ndarray, layout, t_end: int,
             user_backlog: float = np.inf, thin_lo: float = np.inf, thin_hi: float = np.inf) -> Result:
    """Schedule jobs ``idx`` (indices into the global job columns) on nodes ``node_ids`` until ``t_end``."""
    n = len(idx)
    col = {k: jobs[k][idx] for k in ("submit", "runtime_s", "limit_s", "gpn", "nodes", "req_cpus", "req_mem",
                                      "gpu_type", "priority_base", "patience_s", "u_accept", "sub_id",
                                      "parent", "followup_delay_s", "user", "throttle")}
    sub = col["submit"].astype(np.int64).tolist()
    runtime, limit = col["runtime_s"].tolist(), col["limit_s"].tolist()
    gpn, k_nodes = col["gpn"].tolist(), col["nodes"].tolist()
    gtype, prio, user = col["gpu_type"].tolist(), col["priority_base"].tolist(), col["user"].tolist()
    patience, u_accept = col["patience_s"].tolist(), col["u_accept"].tolist()
    sub_id, delay = col["sub_id"].tolist(), col["followup_delay_s"].tolist()
    is_child = (col["parent"] >= 0).tolist()
    throttle = col["throttle"].tolist()
    running_in: dict[int, int] = {}  # array (sub_id) -> tasks running, for throttled arrays
    alloc_c_a = np.where(col["nodes"] > 1, 0, col["req_cpus"] + col["req_cpus"] % 2).astype(np.int64)
    alloc_m_a = np.where(col["nodes"] > 1, 0, col["req_mem"]).astype(np.int64)
    alloc_c, alloc_m = alloc_c_a.tolist(), alloc_m_a.tolist()
    # What a user "sees" pending: GPUs on a GPU partition, CPUs on a CPU-only one.
    weight = np.where(col["gpn"] > 0, col["gpn"] * col["nodes"], col["nodes"] * col["req_cpus"]).tolist()

    pos_of = {int(g): i for i, g in enumerate(idx)}
    children: dict[int, list[int]] = {}
    for i in np.flatnonzero(col["parent"] >= 0).tolist():
        children.setdefault(pos_of[int(col["parent"][i])], []).append(i)

    cap_g = layout.gpus[node_ids].astype(np.int64)
    cap_c = layout.cpus[node_ids].astype(np.int64)
    cap_m = layout.mem_bytes[node_ids].astype(np.int64)
    cap_c_l, cap_m_l = cap_c.tolist(), cap_m.tolist()
    free_g, free_c, free_m = cap_g.copy(), cap_c.copy(), cap_m.copy()
    n_running_on = np.zeros(len(node_ids), np.int64)
    on_node: list[dict[int, int]] = [dict() for _ in node_ids]  # local job -> limit end
    types = layout.gpu_type[node_ids]
    cand = {t: np.flatnonzero(types == t) for t in set(types.tolist())}
    cand[""] = np.arange(len(node_ids))
    gpu_partition = int(cap_g.sum()) > 0
    size = int(cap_g.sum()) or int(cap_c.sum())
    backlog_cap = user_backlog * size

    accepted = np.zeros(n, bool)
    start = np.full(n, -1, np.int64)
    end = np.full(n, -1, np.int64)
    cancelled_pending = np.zeros(n, bool)
    placed: list[list[int]] = [[] for _ in range(n)]
    sub_decision: dict[int, bool] = {}
    pending_user: dict[int, int] = {}
    totals = {"pending": 0, "free_g": int(cap_g.sum()), "free_c": int(cap_c.sum())}
    stats_cache: dict[str, tuple] = {}
    cap_type = {t: int(cap_g[nd].sum()) or int(cap_c[nd].sum()) for t, nd in cand.items()}
    pending_type = dict.fromkeys(cand, 0)

    events: list[tuple[int, int, int]] = [(sub[i], SUBMIT, i) for i in range(n) if not is_child[i]]
    heapq.heapify(events)
    pending: list[tuple[int, int, int]] = []  # (-priority, submit, local index)
    kept = {"res": None, "head": -1, "dirty": True, "res_t": 0}
    new_jobs: list[int] = []

    def key(i):
        return (-prio[i], sub[i], i)

    def unpend(i):
        pending_user[user[i]] -= weight[i]
        totals["pending"] -= weight[i]
        pending_type[gtype[i]] -= weight[i]

    def load(t):
        """Pending work per unit of capacity on the nodes a job of GPU type t could use."""
        if t == "":
            return totals["pending"] / size
        share = cap_type[t] / size
        return (pending_type[t] + pending_type[""] * share) / cap_type[t]

    def stats(t):
        """(max free GPUs, CPUs, memory on one node, idle nodes) among nodes of GPU type t.

        Cached until resources are released: launches only shrink these maxima, so a stale value is still
        a valid upper bound for ``could_fit`` (it may let through a fit attempt that then fails)."""
        s = stats_cache.get(t)
        if s is None:
            nd = cand[t]
            s = (int(free_g[nd].max()), int(free_c[nd].max()), int(free_m[nd].max()),
                 int((n_running_on[nd] == 0).sum()))
            stats_cache[t] = s
        return s

    def release(i, t):
        k = k_nodes[i]
        for nd in placed[i]:
            free_g[nd] += gpn[i]
            free_c[nd] += alloc_c[i] if k == 1 else cap_c_l[nd]
            free_m[nd] += alloc_m[i] if k == 1 else cap_m_l[nd]
            n_running_on[nd] -= 1
            del on_node[nd][i]
        if throttle[i]:
            running_in[sub_id[i]] -= 1
        totals["free_g"] += gpn[i] * k
        totals["free_c"] += alloc_c[i] if k == 1 else sum(cap_c_l[nd] for nd in placed[i])
        stats_cache.clear()
        for c in children.get(i, ()):
            sub[c] = t + delay[c]
            if sub[c] < t_end:
                heapq.heappush(events, (sub[c], SUBMIT, c))

    def launch(i, nds, t):
        start[i] = t
        end[i] = t + runtime[i]
        placed[i] = nds
        k = k_nodes[i]
        for nd in nds:
            free_g[nd] -= gpn[i]
            free_c[nd] -= alloc_c[i] if k == 1 else cap_c_l[nd]
            free_m[nd] -= alloc_m[i] if k == 1 else cap_m_l[nd]
            n_running_on[nd] += 1
            on_node[nd][i] = t + limit[i]
        if throttle[i]:
            running_in[sub_id[i]] = running_in.get(sub_id[i], 0) + 1
        totals["free_g"] -= gpn[i] * k
        totals["free_c"] -= alloc_c[i] if k == 1 else sum(cap_c_l[nd] for nd in nds)
        if end[i] < t_end:
            heapq.heappush(events, (int(end[i]), FINISH, i))

    def could_fit(i):
        """Cheap necessary condition (no node can take it -> False)."""
        mg, mc, mm, idle = stats(gtype[i])
        if k_nodes[i] > 1:
            return idle >= k_nodes[i]
        return gpn[i] <= mg and alloc_c[i] <= mc and alloc_m[i] <= mm

    def fit(i, t, res):
        """Nodes for job i now (respecting reservation ``res``), or None."""
        nodes = cand[gtype[i]]
        blocked = res is not None and t + limit[i] > res[0]
        if k_nodes[i] > 1:
            ok = nodes[n_running_on[nodes] == 0]
            if blocked:
                ok = ok[~res[1][ok]]
            return ok[: k_nodes[i]].tolist() if len(ok) >= k_nodes[i] else None
        ok = nodes[(free_g[nodes] >= gpn[i]) & (free_c[nodes] >= alloc_c[i]) & (free_m[nodes] >= alloc_m[i])]
        if blocked and len(ok):
            ok = ok[~res[1][ok]]
        if not len(ok):
            return None
        if len(ok) == 1:
            return [int(ok[0])]
        best = np.lexsort((ok, free_c[ok], free_g[ok]))[0]
        return [int(ok[best])]

    def reserve(i, t):
        """(shadow time, reserved-node mask) for blocked job i, from running jobs' limit ends."""
        nodes = cand[gtype[i]].tolist()
        ready = []
        g, c, m = gpn[i], alloc_c[i], alloc_m[i]
        for nd in nodes:
            if k_nodes[i] > 1:
                ready.append((max(on_node[nd].values(), default=t), nd))
                continue
            fg, fc, fm = int(free_g[nd]), int(free_c[nd]), int(free_m[nd])
            tt = t
            if not (fg >= g and fc >= c and fm >= m):
                tt = NEVER
                for le, j in sorted((le, j) for j, le in on_node[nd].items()):
                    fg += gpn[j]
                    fc += alloc_c[j] if k_nodes[j] == 1 else cap_c_l[nd]
                    fm += alloc_m[j] if k_nodes[j] == 1 else cap_m_l[nd]
                    if fg >= g and fc >= c and fm >= m:
                        tt = le
                        break
            ready.append((tt, nd))
        ready.sort()
        chosen = ready[: k_nodes[i]]
        mask = np.zeros(len(node_ids), bool)
        mask[[nd for _, nd in chosen]] = True
        return chosen[-1][0], mask

    def full_pass(t):
        head, res = -1, None
        failed: set = set()
        started: list[int] = []
        for p, (_, _, i) in enumerate(islice(pending, DEPTH)):
            if totals["free_c"] <= 0 or (gpu_partition and totals["free_g"] <= 0):
                break  # the partition is full: nothing can start, the reservation does not matter
            if throttle[i] and running_in.get(sub_id[i], 0) >= throttle[i]:
                continue  # held by its array's throttle: not eligible, so neither started nor reserved for
            if head < 0:
                if could_fit(i):
                    nds = fit(i, t, None)
                    if nds is not None:
                        launch(i, nds, t)
                        started.append(p)
                        continue
                head = i
                continue
            if not could_fit(i):
                continue
            if res is None:  # computed only once some backfill candidate might start
                reuse = kept["head"] == head and kept["res"] is not None and t - kept["res_t"] < RES_TTL_S
                res = kept["res"] if reuse else reserve(head, t)
                if not reuse:
                    kept["res_t"] = t
            can_res = t + limit[i] <= res[0]
            shape = (gpn[i], k_nodes[i], alloc_c[i], alloc_m[i], gtype[i], can_res)
            if shape in failed:
                continue
            nds = fit(i, t, res)
            if nds is None:
                failed.add(shape)
                continue
            launch(i, nds, t)
            started.append(p)
        for p in reversed(started):
            unpend(pending[p][2])
            del pending[p]
        if res is None and kept["head"] == head:
            res = kept["res"]  # not needed this pass; keep the last one (and its age) for the same head
        kept.update(res=res, head=head, dirty=False)

    def quick_pass(t, fresh):
        """Only new submissions changed since the last pass: try just them against the kept reservation."""
        head = kept["head"]
        for i in fresh:
            if head < 0 or key(i) < key(head):
                return full_pass(t)  # no blocked head, or a new job outranks it: redo everything
            if throttle[i] and running_in.get(sub_id[i], 0) >= throttle[i]:
                continue
            if not could_fit(i):
                continue
            if kept["res"] is None or t - kept["res_t"] >= RES_TTL_S:
                kept["res"], kept["res_t"] = reserve(head, t), t
            nds = fit(i, t, kept["res"])
            if nds is not None:
                launch(i, nds, t)
                del pending[bisect.bisect_left(pending, key(i))]
                unpend(i)

    thin = np.isfinite(thin_hi)
    per_user = np.isfinite(backlog_cap)
    while events and events[0][0] < t_end:
        t = events[0][0]
        while events and events[0][0] == t:
            _, kind, i = heapq.heappop(events)
            if kind == FINISH:
                release(i, t)
                kept["dirty"] = True
            elif kind == SUBMIT:
                sid = sub_id[i]
                if sid not in sub_decision:
                    p_keep = 1.0
                    if per_user:
                        p_keep = 1.0 - pending_user.get(user[i], 0) / backlog_cap
                    if thin:
                        p_keep = min(p_keep, (thin_hi - load(gtype[i])) / (thin_hi - thin_lo))
                    sub_decision[sid] = u_accept[i] < p_keep or is_child[i]
                if not sub_decision[sid]:
                    continue
                accepted[i] = True
                bisect.insort(pending, key(i))
                pending_user[user[i]] = pending_user.get(user[i], 0) + weight[i]
                totals["pending"] += weight[i]
                pending_type[gtype[i]] += weight[i]
                new_jobs.append(i)
                if patience[i] != np.inf:
                    heapq.heappush(events, (int(t + patience[i]), CANCEL, i))
            elif start[i] < 0:  # CANCEL: the user gave up waiting
                p = bisect.bisect_left(pending, key(i))
                if p < len(pending) and pending[p][2] == i:
                    del pending[p]
                    unpend(i)
                    cancelled_pending[i] = True
                    end[i] = t
                    kept["dirty"] = True
        if kept["dirty"]:
            full_pass(t)
        elif new_jobs:
            quick_pass(t, new_jobs)
        new_jobs.clear()

    return Result(accepted, np.array(sub, np.int64), start, end, cancelled_pending,
                  [[int(node_ids[x]) for x in p] for p in placed], alloc_c_a, alloc_m_a)
