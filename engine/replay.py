"""The as-logged replay (``SimConfig(replay="logged")``): the log's own schedule run through the engine.

Each job starts at its logged start, on its logged nodes (a Slurm hostlist such as ``h100-[034,037]``) when they
all name nodes of the layout, with its logged allocation split evenly over them (integer units, remainder on
the first nodes), runs its logged elapsed time and ends in its logged state. Jobs that never started (no
``start``) and RUNNING jobs (no ``end``) pass through as logged; a RUNNING job occupies its nodes for its
elapsed time so far. Nothing is queued, preempted or killed, and node capacity is not enforced (the log is the
truth), so fragmentation is not measured.

It is the "replay with no policy change": attainment, waits and waste computed on its output equal those of
the original store (tests), which checks the output schema end to end.

Invariants: one attempt per started job; intervals appended in end order (ties by start order); a job whose
node list names an unknown node (or none) has no timeline rows; no randomness, no wall clock.
"""
from __future__ import annotations

import re

import polars as pl

from .pool import mib_up, milli

_GROUP = re.compile(r"^(.*?)\[([^\]]*)\](.*)$")


def expand_hostlist(text) -> list[str]:
    """``"h100-[001-003,007],cpu-01"`` -> the node names, in order (a plain name is itself)."""
    if not text:
        return []
    parts, depth, cur = [], 0, []
    for ch in str(text):
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur.append(ch)
    parts.append("".join(cur))
    out = []
    for part in (p.strip() for p in parts):
        m = _GROUP.match(part)
        if not m:
            if part:
                out.append(part)
            continue
        pre, body, post = m.groups()
        for r in body.split(","):
            a, _, b = r.partition("-")
            if a.isdigit() and b.isdigit():
                names = [f"{pre}{i:0{len(a)}d}" for i in range(int(a), int(b) + 1)]
            else:  # a single index (or something that is not a range: kept as written)
                names = [pre + r]
            for name in names:
                out.extend(expand_hostlist(name + post) if "[" in post else [name + post])
    return out


def _split(total: int, k: int) -> list[int]:
    base, extra = divmod(total, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def logged_runs(sim, only=None) -> list[tuple]:
    """``(start, j, run_s, alloc, (g, c, m))`` of every job with a logged start (of the jobs in ``only`` when given), in
    start order (ties by index), on the simulation clock: the logged run time (else end - start, else 0) and
    the logged allocation on the logged nodes (``()`` when a node is unknown; processor-count mode: its one
    pool) and its totals (integer units)."""
    wl = sim.wl
    f = wl.frame
    n = sim.n
    is_dt = wl.datetime_dtype is not None
    rows = range(n) if only is None else sorted(only)

    def seconds(name):
        if name not in f.columns:
            return [None] * n
        s = f[name]
        if is_dt:
            return ((s.dt.epoch("us") - wl.origin_us) / 1e6).to_list()
        return s.cast(pl.Float64).to_list()

    def floats(name):
        return f[name].cast(pl.Float64).to_list() if name in f.columns else [None] * n

    start, end = seconds("start"), seconds("end")
    names = f["node_list"].cast(pl.String).to_list() if "node_list" in f.columns else [None] * n
    a_g, a_c, a_m = floats("alloc_gpus"), floats("alloc_cpus"), floats("alloc_mem_bytes")
    index = {name: k for k, name in enumerate(sim.pool.names)}
    procs = sim.pool.cluster.procs_mode
    node_ix: dict = {}  # node list text -> its node indices (None where unknown): jobs share a few lists each
    out = []
    for s, j in sorted((start[j], j) for j in rows if start[j] is not None):
        run_s = wl.raw_run[j]
        if run_s is None or run_s != run_s or run_s < 0:
            run_s = max(end[j] - s, 0.0) if end[j] is not None else 0.0
        g = milli(a_g[j]) if a_g[j] is not None else sim.req_g[j]
        c = milli(a_c[j]) if a_c[j] is not None else sim.req_c[j]
        m = mib_up(a_m[j]) if a_m[j] is not None else sim.req_m[j]
        if procs:
            alloc = ((0, g, c, 0),)
        else:
            nodes = node_ix.get(names[j])
            if nodes is None:
                nodes = node_ix[names[j]] = [index.get(x) for x in expand_hostlist(names[j])]
            if nodes and None not in nodes:
                k = len(nodes)
                alloc = tuple(zip(nodes, _split(g, k), _split(c, k), _split(m, k)))
            else:
                alloc = ()
        out.append((s, j, run_s, alloc, (g, c, m)))
    return out


def run(sim) -> None:
    ends = []
    for s, j, run_s, alloc, _ in logged_runs(sim):
        e = s + run_s
        sim.pin_start(j, s)
        sim.pin_done(j, alloc, e, run_s)
        ends.append((e, sim.start_seq[j], j))
    for e, _, j in sorted(ends):
        sim.intervals.add(j, 0, sim.first_start[j], e, sim.alloc[j], "end", seq=sim.start_seq[j])
