""""Why does my team get less?": one budget bucket's shortfall, cause by cause, in numbers (DOMAIN.md section 6).

``explain(team, jobs, allocations, nodes, row)`` is pure (frames in, an ``Explanation`` out) and serves both
paths: the real logs (``log_allocations`` turns the jobs' node lists into per-node allocations) and a
simulation (its ``timeline`` is already per node and attempt; its jobs are one row per attempt, each waiting from
its (re)submit, carrying ``wait_reason``, ``preemptions`` and ``lost_gpu_seconds``; a warm start's pinned rows
waited before the window). Causes, each measured on the team's jobs that waited inside the window:

- ``demand``: demanded vs funded (static share x capacity) and water-filled entitled GPU-hours, from the
  attainment ``row`` of ``queries.analytics.budgets`` (same definition on both paths).
- ``holes``: waiting GPU-hours during which the job's partition had at least as many free GPUs as it asked
  for, but no block it could use: no node with that many free GPUs (a job within one node), or not enough
  entirely free nodes (a gang wider than a node). On the sim path also the waits whose longest reason was
  ``fragmentation`` or ``reservation``.
- ``protection``: waiting GPU-hours during which the partition had fewer free GPUs than the job asked for
  while other teams' jobs that could not be preempted (inside their min runtime, or without a contract) held
  at least that many: what min-runtime protection of others cost the team.
- ``requests``: waiting GPU-hours during which a usable GPU block was free: CPU or memory requests (the job's,
  or its neighbours' on that node) or the queue order / a reservation held it back; ``full``: the rest (too
  few free GPUs and not enough of them protected). holes + requests + protection + full = the waiting
  GPU-hours. On the sim path also the waiting GPU-hours per engine ``wait_reason``.
- ``preemption``: preemptions suffered and GPU-hours lost (sim: lost since the last checkpoint; logs: rows in
  state PREEMPTED, whose whole attempt counts as lost: the log does not record checkpoints).
- ``waits``: p50 / p90 queue wait per job class (linear interpolation).

On a cluster without GPUs (``resource="cpu"``: the budget counts core-hours) every GPU above reads CPU cores:
the waits, blocks, protection and losses are measured in core-hours on the nodes' cores (``RESOURCES``), so a
CPU-only log does not explain a shortfall with zeros.

Invariants: holes, requests, protection and full partition the team's waiting GPU-hours (disjoint at every
instant, summing to the total); ``sentences`` only state numbers that are in ``table``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from dashboard.shaping import expand_hostlist
from engine import budgets as bt

from .frames import fmt_duration as _dur

TABLE_SCHEMA = {"cause": pl.String, "measure": pl.String, "value": pl.Float64, "unit": pl.String}


@dataclass(frozen=True)
class Resource:
    """What an explanation counts: the nodes' and allocations' column, the jobs' request / allocation / loss
    columns, and the words its measures use."""
    col: str
    req: str
    alloc: str
    lost: str
    hours: str
    noun: str
    others: str  # the requests that can hold a job back although a block of this resource was free


RESOURCES = {
    "gpu": Resource("gpus", "req_gpus", "alloc_gpus", "lost_gpu_seconds", "GPU-hours", "GPUs", "CPU, memory"),
    "cpu": Resource("cpus", "req_cpus", "alloc_cpus", "lost_cpu_seconds", "core-hours", "cores", "memory"),
}
WAITS_SCHEMA = {"job_class": pl.String, "jobs": pl.UInt32, "waited": pl.UInt32, "p50_wait_s": pl.Float64,
                "p90_wait_s": pl.Float64}


@dataclass(frozen=True)
class Explanation:
    team: str
    source: str                 # "logs" or "simulation"
    table: pl.DataFrame         # cause, measure, value, unit (TABLE_SCHEMA)
    waits: pl.DataFrame         # per job class (WAITS_SCHEMA)
    sentences: tuple[str, ...]

    def value(self, measure: str) -> float | None:
        hit = self.table.filter(pl.col("measure") == measure)
        return hit["value"][0] if hit.height else None


# ------------------------------------------------------------------------------------------ inputs
def log_allocations(jobs: pl.DataFrame, end=None) -> pl.DataFrame:
    """Per-node allocations (node, job_id, start, end, gpus, cpus) from logged jobs' node lists; a RUNNING job
    with no end runs to ``end``. GPUs and cores are split evenly over the job's nodes (Slurm gives gangs whole
    nodes)."""
    ran = jobs.filter(pl.col("start").is_not_null() & pl.col("node_list").is_not_null())
    stop = pl.col("end")
    if end is not None:
        stop = stop.fill_null(pl.lit(end, dtype=pl.Datetime("us", "UTC")))
    ran = ran.with_columns(stop.alias("end")).filter(pl.col("end").is_not_null() & (pl.col("end") > pl.col("start")))
    lists = ran["node_list"].unique().to_list()
    hosts = pl.DataFrame({"node_list": lists, "node": [expand_hostlist(x) for x in lists]},
                         schema={"node_list": pl.String, "node": pl.List(pl.String)})
    held = [pl.coalesce(r.alloc, r.req).fill_null(0.0).cast(pl.Float64).alias(r.col) for r in RESOURCES.values()]
    out = (ran.select("job_id", "start", "end", "node_list", *held)
           .join(hosts, on="node_list", how="left").with_columns(pl.col("node").list.len().alias("k"))
           .explode("node").filter(pl.col("node").is_not_null())
           .select("node", "job_id", "start", "end", *[(pl.col(r.col) / pl.col("k")).alias(r.col)
                                                       for r in RESOURCES.values()]))
    return out


def with_bucket(jobs: pl.DataFrame, tree, when=None) -> pl.DataFrame:
    """``jobs`` plus ``bucket``: a simulation's ``budget_bucket``, else each account's bucket in the tree at
    ``when`` (``engine.budgets.bucket``; ``unbudgeted`` when the tree does not name it)."""
    if "budget_bucket" in jobs.columns:
        return jobs.with_columns(pl.col("budget_bucket").alias("bucket"))
    root = tree.at(when) if isinstance(tree, bt.BudgetTree) else tree
    names = jobs["account"].unique().to_list()
    lookup = pl.DataFrame({"account": names, "bucket": [bt.bucket(root, a) for a in names]},
                          schema={"account": pl.String, "bucket": pl.String})
    return jobs.join(lookup, on="account", how="left", maintain_order="left")


def _seconds(col: str, t0) -> pl.Expr:
    return (pl.col(col) - pl.lit(t0)).dt.total_microseconds().cast(pl.Float64) / 1e6


def _partitions(nodes: pl.DataFrame) -> dict[str, list[int]]:
    """partition name -> node row indices (a node may list several partitions, comma-separated)."""
    out: dict[str, list[int]] = {}
    parts = nodes["partition"].to_list() if "partition" in nodes.columns else [None] * nodes.height
    for i, p in enumerate(parts):
        for name in (p or "").split(","):
            if name.strip():
                out.setdefault(name.strip(), []).append(i)
    return out


def _cumsum_by_run(x: np.ndarray, run_start: np.ndarray) -> np.ndarray:
    """The running sum of ``x`` restarted wherever ``run_start`` is true (``run_start[0]`` must be)."""
    out = np.cumsum(x)
    if len(x):
        base = np.maximum.accumulate(np.where(run_start, np.arange(len(x)), 0))  # where each element's run starts
        out = out - np.where(base > 0, out[base - 1], 0.0)
    return out


class _Profile:
    """Piecewise-constant state of one node set: per segment [t_k, t_k+1) the total free GPUs, the number of
    entirely free nodes' GPUs, GPUs held by other teams' unpreemptible jobs, and (``block_fits``) whether some
    node has a free block of a given size.

    Kept as each node's change points, not as a segments x nodes matrix: a busy week on 512 nodes has about
    80,000 segments, and the matrix (330 MB there, 1.3 GB on 1,024 nodes) cost more than the replay it
    explains. Each node's use is cumulated over its own change points only; the per-segment figures are sums
    of what changes at each segment, cumulated over time."""

    def __init__(self, caps: np.ndarray, node_ix: np.ndarray, s: np.ndarray, e: np.ndarray, g: np.ndarray,
                 protected_g: tuple[np.ndarray, np.ndarray, np.ndarray]):
        times = np.unique(np.concatenate([s, e, protected_g[0], protected_g[1], [0.0]]))
        self.t = times
        n_seg = len(times)
        self.caps = caps
        self.node_gpus = float(caps.max()) if len(caps) else 0.0
        # each allocation's +g at its start segment and -g at its end segment, grouped by (node, segment) in
        # that order (starts before ends within a cell), then each node's use after each of its cells
        seg = np.concatenate([np.searchsorted(times, s), np.searchsorted(times, e)])
        node = np.concatenate([node_ix, node_ix]).astype(np.int64)
        d = np.concatenate([g, -g]).astype(float)
        order = np.lexsort((seg, node))
        seg, node, d = seg[order], node[order], d[order]
        first = np.ones(len(seg), dtype=bool)
        first[1:] = (seg[1:] != seg[:-1]) | (node[1:] != node[:-1])
        starts = np.flatnonzero(first)
        cell_seg, cell_node = seg[starts], node[starts]
        cell_d = np.add.reduceat(d, starts) if len(starts) else np.zeros(0)
        new_node = np.ones(len(starts), dtype=bool)
        new_node[1:] = cell_node[1:] != cell_node[:-1]
        used = _cumsum_by_run(cell_d, new_node)
        cap = caps[cell_node] if len(caps) else np.zeros(0)
        self._seg = cell_seg
        self._after = np.maximum(cap - used, 0.0)      # the node's free GPUs from this cell on
        before = np.empty_like(self._after)              # ... and before it (a node starts entirely free)
        before[new_node] = cap[new_node]
        before[~new_node] = self._after[:-1][~new_node[1:]]
        self._before = before
        self._n_seg = n_seg
        total_cap = float(caps.sum())
        self.total = total_cap + self._cum(self._after - before)
        whole_after = (self._after >= cap - 1e-9).astype(float) * cap
        whole_before = (before >= cap - 1e-9).astype(float) * cap
        self.whole = total_cap + self._cum(whole_after - whole_before)
        ps, pe, pg = protected_g
        pd = np.zeros(n_seg + 1)
        np.add.at(pd, np.searchsorted(times, ps), pg)
        np.add.at(pd, np.searchsorted(times, pe), -pg)
        self.protected = np.cumsum(pd)[:n_seg]

    def _cum(self, delta: np.ndarray) -> np.ndarray:
        """Per segment, the running sum of ``delta`` (one value per cell) over the cells up to that segment."""
        return np.cumsum(np.bincount(self._seg, weights=delta, minlength=self._n_seg))[:self._n_seg]

    def block_fits(self, need: float) -> np.ndarray:
        """Per segment, whether some node has at least ``need`` GPUs free."""
        if not len(self.caps):
            return np.zeros(self._n_seg, dtype=bool)
        n0 = int((self.caps >= need).sum())
        return n0 + self._cum((self._after >= need).astype(float) - (self._before >= need).astype(float)) > 0.5

    def measure(self, mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Seconds of [a_i, b_i) during which ``mask`` (per segment) holds."""
        widths = np.diff(np.append(self.t, self.t[-1]))
        cum = np.concatenate([[0.0], np.cumsum(widths * mask)])
        knots = np.append(self.t, self.t[-1] + 1.0)
        return np.maximum(np.interp(b, knots, cum) - np.interp(a, knots, cum), 0.0)

    def causes(self, ask: float, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
        """Seconds of waits [a, b) asking ``ask`` GPUs, split four ways (they partition each wait):
        holes (enough free GPUs, no usable block), fits (a usable block was free: CPU, memory or the queue held
        the job back), protected (too few free GPUs while others' unpreemptible jobs held >= ask), full (the rest)."""
        eps = 1e-9
        fits = self.block_fits(ask - eps) if ask <= self.node_gpus else (self.whole >= ask - eps)
        enough = self.total >= ask - eps
        prot = ~enough & (self.protected >= ask - eps)
        return (self.measure(enough & ~fits, a, b), self.measure(enough & fits, a, b), self.measure(prot, a, b),
                self.measure(~enough & ~prot, a, b))


# ------------------------------------------------------------------------------------------ explain
def explain(team: str, jobs: pl.DataFrame, allocations: pl.DataFrame, nodes: pl.DataFrame, row: dict | None, *,
            source: str = "logs", start=None, end=None, unit: str = "GPU-hours", resource: str = "gpu") -> Explanation:
    """The explanation for budget bucket ``team``.

    ``jobs`` need ``bucket`` (the budget bucket of each job: ``budget_bucket`` of a simulation, or
    ``queries.analytics.budgets``' mapping), submit, start, req_gpus, job_class, partition, min_runtime_s, end;
    the sim's wait_reason / preemptions / lost_gpu_seconds and the log's ``state`` are used when present.
    ``allocations``: node, job_id, start, end, gpus. ``nodes``: node, gpus, partition. ``row``: the team's row of
    ``queries.analytics.budgets.attainment`` (entitled / static / demanded / received GPU-hours, attainment) or None.
    Waits are clipped to [start, end) when given. ``unit``: the hours ``row`` is counted in (``Attainment.unit_label``:
    core-hours for a budget of a cluster without GPUs); ``resource``: what the wait analysis counts ("gpu", or
    "cpu": req_cpus, the nodes' and allocations' cpus, lost_cpu_seconds, in core-hours).
    """
    r = RESOURCES[resource]
    table: list[tuple[str, str, float | None, str]] = []
    if row:
        for key, label in (("demanded_gpu_hours", "demanded"), ("static_gpu_hours", "funded (share x capacity)"),
                           ("entitled_gpu_hours", "entitled (water-filled)"), ("received_gpu_hours", "received")):
            table.append(("demand", label, row.get(key), unit))
        table.append(("demand", "attainment", row.get("attainment"), "fraction"))
    mine = jobs.filter(pl.col("bucket") == team)
    t0 = _origin(jobs, allocations, start)
    lo = 0.0 if start is None else _secs(start, t0)
    hi = math.inf if end is None else _secs(end, t0)
    waits = _waits(mine, t0, lo, hi)
    holes_h, fits_h, prot_h, full_h, wait_h = _blocking(mine, jobs, allocations, nodes, team, t0, lo, hi, r)
    table.append(("waits", f"waiting {r.hours}", wait_h, r.hours))
    table.append(("holes", f"free {r.noun} but no block that fits", holes_h, r.hours))
    if "wait_reason" in mine.columns:
        w = mine.filter(pl.col("wait_reason").is_in(["fragmentation", "reservation"]))
        table.append(("holes", "jobs whose longest wait reason was fragmentation/reservation", float(w.height), "jobs"))
        table.append(("holes", "their queue wait", float(w["wait_s"].fill_null(0).sum()) / 3600.0, "hours"))
    table.append(("protection", "waiting behind other teams' unpreemptible jobs", prot_h, r.hours))
    table.append(("requests", _fits_measure(r), fits_h, r.hours))
    table.append(("full", f"too few free {r.noun}, held by preemptible or own work", full_h, r.hours))
    if "wait_reason" in mine.columns:
        a, b = _wait_spans(mine, t0, lo, hi)
        by = (mine.select(pl.col("wait_reason").fill_null("(none)"), pl.col(r.req).fill_null(0.0))
              .with_columns(pl.Series("gh", b - a) * pl.col(r.req) / 3600.0)
              .group_by("wait_reason").agg(pl.col("gh").sum()).filter(pl.col("gh") > 0).sort("wait_reason"))
        table += [("engine reason", f"waiting {r.hours}, engine reason {why}", gh, r.hours)
                  for why, gh in by.iter_rows()]
    pre, lost = _preemptions(mine, r)
    table.append(("preemption", "preemptions suffered", pre, "count"))
    table.append(("preemption", f"{r.hours} lost", lost, r.hours))
    frame = pl.DataFrame(table, schema=TABLE_SCHEMA, orient="row")
    return Explanation(team, source, frame, waits, tuple(_sentences(team, frame, waits, source, unit, r)))


def _fits_measure(r: Resource) -> str:
    block = "GPU" if r.col == "gpus" else "core"
    return f"a fitting {block} block was free ({r.others} or queue order held the job)"


def _origin(jobs, allocations, start):
    if start is not None:
        return start
    cands = [x for x in (jobs["submit"].min() if jobs.height else None,
                         allocations["start"].min() if allocations.height else None) if x is not None]
    return min(cands) if cands else None


def _secs(when, t0) -> float:
    return (when - t0).total_seconds()


def _wait_spans(df: pl.DataFrame, t0, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Each job's queue wait [submit, first start) (never started: until ``hi``), clipped to [lo, hi)."""
    if df.is_empty():
        return np.zeros(0), np.zeros(0)
    a = df.select(_seconds("submit", t0)).to_series().to_numpy()
    b = df.select(_seconds("start", t0)).to_series().fill_null(np.nan).to_numpy()
    b = np.where(np.isnan(b), hi if math.isfinite(hi) else a, b)
    a, b = np.maximum(a, lo), np.minimum(b, hi)
    return a, np.maximum(b, a)


def _waits(mine: pl.DataFrame, t0, lo, hi) -> pl.DataFrame:
    if mine.is_empty():
        return pl.DataFrame(schema=WAITS_SCHEMA)
    a, b = _wait_spans(mine, t0, lo, hi)
    df = mine.select(pl.col("job_class").fill_null("(none)")).with_columns(pl.Series("w", b - a))
    return (df.group_by("job_class").agg(pl.len().alias("jobs"), (pl.col("w") > 0).sum().alias("waited"),
                                         pl.col("w").quantile(0.5, "linear").alias("p50_wait_s"),
                                         pl.col("w").quantile(0.9, "linear").alias("p90_wait_s"))
            .sort("job_class").cast(WAITS_SCHEMA))


def _blocking(mine, jobs, allocations, nodes, team, t0, lo, hi, r: Resource) -> tuple[float, float, float, float, float]:
    """Waiting resource-hours of the team's jobs, per partition's node set: (holes, fits, protected, full, total)."""
    if mine.is_empty() or nodes.is_empty():
        return 0.0, 0.0, 0.0, 0.0, 0.0
    a, b = _wait_spans(mine, t0, lo, hi)
    ask = mine[r.req].fill_null(0.0).cast(pl.Float64).to_numpy()
    wait_h = float((ask * (b - a)).sum()) / 3600.0
    keep = (b > a) & (ask > 0)
    parts_h = np.zeros(4)
    if not keep.any():
        return 0.0, 0.0, 0.0, 0.0, wait_h
    caps_all = nodes[r.col].fill_null(0.0).cast(pl.Float64).to_numpy()
    name_ix = {n: i for i, n in enumerate(nodes["node"].to_list())}
    parts = _partitions(nodes)
    alloc = allocations.with_columns(_seconds("start", t0).alias("s"), _seconds("end", t0).alias("e"),
                                     pl.col("node").replace_strict(name_ix, default=-1, return_dtype=pl.Int64)
                                     .alias("ix")).filter(pl.col("ix") >= 0)
    prot = _protected(alloc, jobs, team, r)
    job_part = mine["partition"].cast(pl.String).to_list() if "partition" in mine.columns else [None] * mine.height
    for part in sorted({p for p, k in zip(job_part, keep) if k}, key=str):
        node_rows = np.array(parts.get(part, range(len(caps_all))) if part else range(len(caps_all)), dtype=np.int64)
        local = {int(g): k for k, g in enumerate(node_rows)}
        sub = alloc.filter(pl.col("ix").is_in(node_rows.tolist()))
        psub = prot.filter(pl.col("ix").is_in(node_rows.tolist()))
        prof = _Profile(caps_all[node_rows], np.array([local[i] for i in sub["ix"].to_list()], dtype=np.int64),
                        sub["s"].to_numpy(), sub["e"].to_numpy(), sub[r.col].to_numpy(),
                        (psub["s"].to_numpy(), psub["e"].to_numpy(), psub[r.col].to_numpy()))
        sel = np.array([k and p == part for p, k in zip(job_part, keep)])
        for g in np.unique(ask[sel]):
            m = sel & (ask == g)
            parts_h += [float((x * g).sum()) / 3600.0 for x in prof.causes(float(g), a[m], b[m])]
    return (*parts_h.tolist(), wait_h)


def _protected(alloc: pl.DataFrame, jobs: pl.DataFrame, team: str, r: Resource) -> pl.DataFrame:
    """Other teams' allocations while they could not be preempted: [start, start + min runtime) of each
    attempt, the whole attempt for a job without a contract (null min runtime)."""
    info = jobs.select("job_id", "bucket", pl.col("min_runtime_s").cast(pl.Float64) if "min_runtime_s" in
                       jobs.columns else pl.lit(None, dtype=pl.Float64).alias("min_runtime_s")).unique("job_id")
    out = alloc.join(info, on="job_id", how="inner").filter(pl.col("bucket") != team)
    out = out.with_columns(pl.min_horizontal("e", pl.col("s") + pl.col("min_runtime_s").fill_null(math.inf))
                           .alias("e"))
    return out.filter(pl.col("e") > pl.col("s")).select("ix", "s", "e", r.col)


def _preemptions(mine: pl.DataFrame, r: Resource) -> tuple[float, float]:
    if "preemptions" in mine.columns:
        lost = mine[r.lost].fill_null(0.0).sum() / 3600.0 if r.lost in mine.columns else 0.0
        return float(mine["preemptions"].fill_null(0).sum()), float(lost)
    if "state" not in mine.columns:
        return 0.0, 0.0
    p = mine.filter(pl.col("state") == "PREEMPTED")
    if p.is_empty():
        return 0.0, 0.0
    run_s = p["elapsed_s"].fill_null(0.0) if "elapsed_s" in p.columns else pl.Series([0.0] * p.height)
    held = p.select(pl.coalesce(r.alloc, r.req).fill_null(0.0)).to_series()
    return float(p.height), float((held * run_s).sum()) / 3600.0


# ------------------------------------------------------------------------------------------ sentences
def _sentences(team: str, t: pl.DataFrame, waits: pl.DataFrame, source: str, unit: str = "GPU-hours",
               r: Resource = RESOURCES["gpu"]) -> list[str]:
    v = {m: x for m, x in zip(t["measure"].to_list(), t["value"].to_list())}
    out = []
    dem, stat = v.get("demanded"), v.get("funded (share x capacity)")
    ent, rec, att = v.get("entitled (water-filled)"), v.get("received"), v.get("attainment")
    if dem is not None:
        head = (f"`{team}` asked for {dem:,.0f} {unit}, is funded for {stat:,.0f} (its share of the cluster), "
                f"was entitled to {ent:,.0f} after water-filling and received {rec:,.0f}")
        out.append(head + (f": attainment {100 * att:.0f} %." if att is not None else "."))
        if stat is not None and dem < stat:
            out.append(f"Demand below entitlement: it asked for {dem:,.0f} of the {stat:,.0f} {unit} its share "
                       f"funds ({100 * dem / stat:.0f} %); the unused part went to its siblings, then up the tree.")
        elif ent is not None and dem > ent + 1e-9:
            out.append(f"Its demand exceeds its entitlement by {dem - ent:,.0f} {unit}: the other teams' shares "
                       "claim the rest while they have work queued; a larger share is the lever.")
    hours, noun = r.hours, r.noun
    wait_h = v.get(f"waiting {hours}") or 0.0
    holes = v.get(f"free {noun} but no block that fits") or 0.0
    if wait_h > 0:
        out.append(f"Its jobs waited {wait_h:,.0f} {hours} in the queue ({source}).")
    if holes > 0:
        out.append(f"Jobs too large for the holes: {holes:,.0f} of those {hours} ({100 * holes / wait_h:.0f} %) "
                   f"passed while enough {noun} were free in its partition, but scattered so no block fitted the job.")
    n_frag = v.get("jobs whose longest wait reason was fragmentation/reservation")
    if n_frag:
        out.append(f"{n_frag:,.0f} of its jobs waited mostly for fragmentation or a larger job's reservation "
                   f"({v.get('their queue wait') or 0.0:,.0f} hours of queue wait).")
    prot = v.get("waiting behind other teams' unpreemptible jobs") or 0.0
    if prot > 0:
        out.append(f"Min-runtime protection of others: {prot:,.0f} waiting {hours} "
                   f"({100 * prot / wait_h:.0f} %) passed while the partition was full and other teams' jobs "
                   f"that could not yet be preempted held at least the {noun} it asked for.")
    fits = v.get(_fits_measure(r)) or 0.0
    if fits > 0:
        out.append(f"For {fits:,.0f} waiting {hours} ({100 * fits / wait_h:.0f} %) a node had the {noun} it asked for: "
                   f"its (or its neighbours') {r.others.replace(', ', ' and ')} requests, or the queue order, held it "
                   "back; right-sizing requests is the lever there.")
    full = v.get(f"too few free {noun}, held by preemptible or own work") or 0.0
    if full > 0:
        out.append(f"For {full:,.0f} waiting {hours} ({100 * full / wait_h:.0f} %) the partition simply had too few "
                   f"free {noun}.")
    reasons = [(m.rsplit(" ", 1)[-1], x) for m, x in v.items() if m.startswith(f"waiting {hours}, engine reason ")]
    if reasons:
        out.append("The simulator's own wait reasons: " + ", ".join(
            f"{why} {x:,.0f} {hours}" for why, x in sorted(reasons, key=lambda rx: -rx[1])) + ".")
    pre, lost = v.get("preemptions suffered") or 0.0, v.get(f"{hours} lost") or 0.0
    if pre:
        out.append(f"It was preempted {pre:,.0f} times and lost {lost:,.1f} {hours} of work"
                   + (" since the last checkpoints." if source == "simulation" else
                      " (whole attempts: the log does not record checkpoints)."))
    parts = [f"{r['job_class']} p50 {_dur(r['p50_wait_s'])} / p90 {_dur(r['p90_wait_s'])}"
             for r in waits.iter_rows(named=True)]
    if parts:
        out.append("Queue wait by job class: " + "; ".join(parts) + ".")
    return out
