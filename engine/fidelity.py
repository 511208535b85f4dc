"""Simulator fidelity: how closely a replay under the *modeled* policy reproduces the log (DOMAIN.md section 10).

``compare(logged, simulated, ...)`` takes the log's jobs frame and a run's jobs frame (the engine's output rows,
store schema plus ``wait_s``, ``attempt``, ``pinned``) and returns one JSON-ready dict; ``verdict`` turns it into
words; ``loss`` is the single number calibration minimises. Pure numpy/polars: no store, no DuckDB.

Definitions (times in seconds; a datetime column counts seconds since the epoch):
- compared jobs: those the run scheduled itself (not ``pinned``), submitted in [window_start, window_end), that
  started both in the log and in the run; the run's first attempt (``attempt == 0``, the row ``ID;0`` of a requeued
  job) gives the simulated start.
  Wait = start - submit, logged and simulated alike (so a requeue does not shorten the simulated wait).
- ``pearson``: the sample correlation of the two wait vectors; ``spearman``: Pearson of their average ranks
  (ties share the mean of their ranks). None when n < 2 or either vector is constant.
- mean / p50 / p90: ``numpy.mean`` and ``numpy.percentile`` (linear interpolation); relative error =
  (simulated - logged) / logged, None when the logged value is 0. ``median_abs_err_s`` = median |sim - log|.
- groups: per ``job_class`` and per size bucket of the sizing resource (GPUs when the cluster has GPUs, else
  processors): sizes in [2^k, 2^(k+1)) share the bucket ``"2^k-(2^(k+1)-1)"`` (``"1"``, ``"2-3"``, ``"4-7"``...),
  sizes below 1 the bucket ``"<1"``.
- start order: over every pair of compared jobs at most ``ORDER_NEIGHBOURS`` (50) apart in (submit, job_id) order
  (the jobs a scheduler chooses between), a pair strictly ordered in both the log and the run is concordant or
  discordant;
  ``concordant_fraction`` = C / (C + D) and ``gamma`` = (C - D) / (C + D) (Goodman-Kruskal gamma, i.e. Kendall's
  tau over the untied pairs). Pairs tied in either are left out (counted in ``tied_pairs``).
- ``zero_wait_share``: the share of compared jobs with wait <= ``ZERO_WAIT_S`` (started "at once").
- occupancy: hourly bins from window_start (the last one possibly shorter); occupancy of a bin = resource-seconds
  of every row's [start, end) inside it / (capacity x bin length), over all rows of each frame (pinned included:
  they hold the cluster in both); ``mean_abs_diff`` = mean over bins of |sim - log|.
- attainment: per team, logged and simulated attainment (``engine.attainment`` computed by the caller on each
  frame) and ``abs_err`` in points of attainment; ``mean_abs_err`` over the teams where both exist.

Invariants: the same inputs give the same dict (no randomness, no sampling); every figure is a
finite float or None (never NaN); a frame with no compared job gives ``n == 0`` and None statistics.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

ORDER_NEIGHBOURS = 50
ZERO_WAIT_S = 0.0
HOUR_S = 3600.0


# ---------------------------------------------------------------------------- statistics
def average_ranks(x) -> np.ndarray:
    """1-based ranks of ``x``, ties sharing the mean of the ranks they span (as ``scipy.stats.rankdata``)."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x), dtype=float)
    i = 0
    n = len(x)
    while i < n:
        k = i
        while k + 1 < n and xs[k + 1] == xs[i]:
            k += 1
        ranks[order[i:k + 1]] = (i + k) / 2.0 + 1.0
        i = k + 1
    return ranks


def pearson(x, y) -> float | None:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2:
        return None
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return None if den == 0 else _f(float((dx * dy).sum()) / den)


def spearman(x, y) -> float | None:
    if len(x) < 2:
        return None
    return pearson(average_ranks(x), average_ranks(y))


def rel_err(sim, log) -> float | None:
    if sim is None or log is None or log == 0:
        return None
    return _f((sim - log) / log)


def _f(v) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def wait_stats(log_w, sim_w) -> dict:
    """n, mean / p50 / p90 logged and simulated with relative errors, median absolute error, correlations."""
    log_w, sim_w = np.asarray(log_w, dtype=float), np.asarray(sim_w, dtype=float)
    out: dict = {"n": int(len(log_w))}
    for name, fn in (("mean", np.mean), ("p50", lambda a: np.percentile(a, 50)), ("p90", lambda a: np.percentile(a, 90))):
        lo = _f(float(fn(log_w))) if len(log_w) else None
        si = _f(float(fn(sim_w))) if len(sim_w) else None
        out[f"{name}_log_s"], out[f"{name}_sim_s"], out[f"{name}_rel_err"] = lo, si, rel_err(si, lo)
    out["median_abs_err_s"] = _f(float(np.median(np.abs(sim_w - log_w)))) if len(log_w) else None
    out["pearson"] = pearson(log_w, sim_w)
    out["spearman"] = spearman(log_w, sim_w)
    out["zero_wait_share_log"] = _f(float((log_w <= ZERO_WAIT_S).mean())) if len(log_w) else None
    out["zero_wait_share_sim"] = _f(float((sim_w <= ZERO_WAIT_S).mean())) if len(sim_w) else None
    return out


def size_bucket(size: float) -> str:
    """``"<1"`` below 1, else ``"2^k-(2^(k+1)-1)"`` for 2^k <= size < 2^(k+1) (``"1"``, ``"2-3"``, ``"4-7"``)."""
    if size is None or not math.isfinite(size) or size < 1:
        return "<1"
    lo = 1 << int(math.floor(math.log2(size)))
    while lo * 2 <= size:  # guard the float log
        lo *= 2
    while lo > size:
        lo //= 2
    hi = 2 * lo - 1
    return str(lo) if hi == lo else f"{lo}-{hi}"


def order_agreement(start_log, start_sim, neighbours: int = ORDER_NEIGHBOURS) -> dict:
    """Concordance of start order over the pairs of jobs at most ``neighbours`` apart in the given (submit) order:
    the jobs a scheduler really chooses between (far-apart pairs are trivially concordant and would swamp it)."""
    a, b = np.asarray(start_log, dtype=float), np.asarray(start_sim, dtype=float)
    n = len(a)
    c = d = tied = 0
    for k in range(1, min(neighbours, n - 1) + 1):  # one diagonal of the pair matrix at a time: O(n) memory
        s = np.sign(a[k:] - a[:-k]) * np.sign(b[k:] - b[:-k])
        c += int((s > 0).sum())
        d += int((s < 0).sum())
        tied += int((s == 0).sum())
    cd = c + d
    return {"neighbours": int(neighbours), "pairs": int(cd), "tied_pairs": int(tied),
            "concordant_fraction": _f(c / cd) if cd else None, "gamma": _f((c - d) / cd) if cd else None}


def hourly_occupancy(start, end, size, capacity: float, t0: float, t1: float) -> np.ndarray:
    """Occupancy of each hourly bin of [t0, t1): resource-seconds of the [start, end) intervals inside the bin over
    capacity x bin length. The usage integral is piecewise linear, so sampling it at bin edges is exact."""
    if not capacity or t1 <= t0:
        return np.zeros(0)
    s, e, w = (np.asarray(v, dtype=float) for v in (start, end, size))
    ok = np.isfinite(s) & np.isfinite(e) & np.isfinite(w) & (e > s)
    s, e, w = np.clip(s[ok], t0, t1), np.clip(e[ok], t0, t1), w[ok]
    edges = np.append(np.arange(t0, t1, HOUR_S), t1)
    if len(s) == 0:
        return np.zeros(len(edges) - 1)
    times = np.concatenate([s, e])
    delta = np.concatenate([w, -w])
    order = np.argsort(times, kind="mergesort")
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)  # usage right after each breakpoint
    integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])  # usage integral at each breakpoint
    at = np.interp(edges, times, integral, left=0.0, right=integral[-1])
    return np.diff(at) / (capacity * np.diff(edges))


# ---------------------------------------------------------------------------- frames
def seconds(col: pl.Series) -> np.ndarray:
    """A submit/start/end column as float seconds (datetimes: since the epoch); nulls as NaN."""
    if col.dtype == pl.Datetime or isinstance(col.dtype, pl.Datetime):
        col = col.dt.epoch("us").cast(pl.Float64) / 1e6
    return col.cast(pl.Float64).fill_null(np.nan).to_numpy().astype(float)


def _pairs(logged: pl.DataFrame, simulated: pl.DataFrame, size_col: str, t0: float | None, t1: float | None):
    sim = simulated
    if "attempt" in sim.columns:
        sim = sim.filter(pl.col("attempt") == 0)
    if "pinned" in sim.columns:
        sim = sim.filter(~pl.col("pinned").fill_null(False))
    # a requeued job's first attempt is the row ``ID;0`` (``result.row_ids``): its start is the job's first start
    sim = sim.select(pl.col("job_id").cast(pl.String).str.replace(r";0$", ""), pl.col("start").alias("_sim_start"))
    log = logged.with_columns(pl.col("job_id").cast(pl.String))
    both = log.join(sim, on="job_id", how="inner")
    sub, ls, ss = seconds(both["submit"]), seconds(both["start"]), seconds(both["_sim_start"])
    keep = np.isfinite(sub) & np.isfinite(ls) & np.isfinite(ss)
    if t0 is not None:
        keep &= sub >= t0
    if t1 is not None:
        keep &= sub < t1
    cls = (both["job_class"].cast(pl.String).fill_null("(none)").to_numpy() if "job_class" in both.columns
           else np.full(both.height, "(none)", dtype=object))
    size = both[size_col].cast(pl.Float64).fill_null(0.0).to_numpy().astype(float)
    ids = both["job_id"].to_numpy()
    idx = np.flatnonzero(keep)
    order = idx[np.lexsort((ids[idx].astype(str), sub[idx]))]
    return {"submit": sub[order], "log_start": ls[order], "sim_start": ss[order], "job_class": cls[order],
            "size": size[order]}


def compare(logged: pl.DataFrame, simulated: pl.DataFrame, *, size_col: str, capacity: float,
            window_start: float | None = None, window_end: float | None = None,
            attainment_log: dict | None = None, attainment_sim: dict | None = None,
            order_neighbours: int = ORDER_NEIGHBOURS) -> dict:
    """The fidelity report of ``simulated`` against ``logged`` over [window_start, window_end) (seconds)."""
    p = _pairs(logged, simulated, size_col, window_start, window_end)
    lw, sw = p["log_start"] - p["submit"], p["sim_start"] - p["submit"]
    out = {"jobs_compared": int(len(lw)), "overall": wait_stats(lw, sw)}
    out["by_class"] = {c: wait_stats(lw[p["job_class"] == c], sw[p["job_class"] == c])
                       for c in sorted(set(p["job_class"].tolist()))}
    buckets = np.array([size_bucket(s) for s in p["size"]], dtype=object)
    keyed = sorted(set(buckets.tolist()), key=lambda b: -1 if b == "<1" else int(b.split("-")[0]))
    out["by_size"] = {b: wait_stats(lw[buckets == b], sw[buckets == b]) for b in keyed}
    out["start_order"] = order_agreement(p["log_start"], p["sim_start"], order_neighbours)
    out["occupancy"] = _occupancy(logged, simulated, size_col, capacity, window_start, window_end)
    out["attainment"] = _attainment(attainment_log, attainment_sim)
    return out


def _occupancy(logged, simulated, size_col, capacity, t0, t1) -> dict:
    run_col = {"req_cpus": "alloc_cpus", "req_gpus": "alloc_gpus"}.get(size_col)
    curves = []
    for df in (logged, simulated):
        s, e = seconds(df["start"]), seconds(df["end"])
        if "elapsed_s" in df.columns:  # a job still RUNNING in the log has no end: it ran start + elapsed_s by then
            e = np.where(np.isnan(e), s + df["elapsed_s"].cast(pl.Float64).fill_null(np.nan).to_numpy(), e)
        w = df[size_col].cast(pl.Float64).fill_null(0.0).to_numpy().astype(float)
        if run_col in df.columns:  # what the run held, when known (as attainment counts it)
            held = df[run_col].cast(pl.Float64).fill_null(np.nan).to_numpy().astype(float)
            w = np.where(np.isfinite(held), held, w)
        curves.append((s, e, w))
    lo = t0 if t0 is not None else float(np.nanmin(seconds(logged["submit"])))
    hi = t1 if t1 is not None else float(np.nanmax(np.concatenate([c[1] for c in curves])))
    occ_l = hourly_occupancy(*curves[0], capacity, lo, hi)
    occ_s = hourly_occupancy(*curves[1], capacity, lo, hi)
    if not len(occ_l):
        return {"hours": 0, "mean_log": None, "mean_sim": None, "mean_abs_diff": None}
    return {"hours": int(len(occ_l)), "mean_log": _f(float(occ_l.mean())), "mean_sim": _f(float(occ_s.mean())),
            "mean_abs_diff": _f(float(np.abs(occ_s - occ_l).mean()))}


def _attainment(log: dict | None, sim: dict | None) -> dict | None:
    """Per team: logged / simulated attainment (``metrics["attainment"]["teams"]`` shaped dicts)."""
    if log is None or sim is None:
        return None
    teams = {}
    errs = []
    for path in sorted(set(log) | set(sim)):
        a = (log.get(path) or {}).get("attainment")
        b = (sim.get(path) or {}).get("attainment")
        e = _f(abs(b - a)) if a is not None and b is not None else None
        if e is not None:
            errs.append(e)
        teams[path] = {"log": _f(a) if a is not None else None, "sim": _f(b) if b is not None else None, "abs_err": e}
    return {"teams": teams, "mean_abs_err": _f(float(np.mean(errs))) if errs else None}


def compare_run(logged: pl.DataFrame, result, *, window_start: float | None = None,
                window_end: float | None = None, attainment_log: dict | None = None,
                attainment_sim: dict | None = None) -> dict:
    """``compare`` of a whole run (an ``engine.SimResult``: its ``jobs`` and ``metrics``) against the log it replayed:
    the sizing resource and capacity come from the run's metrics. What ``validate``, calibration and the scenario's
    baseline fidelity (``dashboard.whatif.fidelity``) all call."""
    m = result.metrics
    return compare(logged, result.jobs, size_col=f"req_{m['resource']}", capacity=m["capacity"],
                   window_start=window_start, window_end=window_end, attainment_log=attainment_log,
                   attainment_sim=attainment_sim)


# ---------------------------------------------------------------------------- summaries
def loss(report: dict) -> float:
    """What calibration minimises (lower is better): |mean rel err| + |p90 rel err| + |zero-wait share gap|
    + (1 - Spearman). A missing figure counts as its worst value (1 each; Spearman None as 0)."""
    o = report["overall"]
    parts = [abs(o["mean_rel_err"]) if o["mean_rel_err"] is not None else 1.0,
             abs(o["p90_rel_err"]) if o["p90_rel_err"] is not None else 1.0,
             (abs(o["zero_wait_share_sim"] - o["zero_wait_share_log"])
              if o["zero_wait_share_sim"] is not None and o["zero_wait_share_log"] is not None else 1.0),
             1.0 - (o["spearman"] if o["spearman"] is not None else 0.0)]
    return float(sum(parts))


def _ratio_words(s: dict) -> str | None:
    lo, si = s["mean_log_s"], s["mean_sim_s"]
    if lo is None or si is None:
        return None
    if lo > 0 and si > 0:
        r = lo / si
        if r >= 1.5:
            return f"wait {r:.1f}x longer in reality"
        if r <= 1 / 1.5:
            return f"wait {1 / r:.1f}x longer in the simulation"
    return None


def verdict(report: dict, tolerance: float = 0.2) -> str:
    """Plain words from the numbers: overall mean / p90 error and rank agreement, which size buckets are within
    ``tolerance`` of the logged mean wait, which are off by 1.5x or more (and in which direction)."""
    o = report["overall"]
    if not report["jobs_compared"]:
        return "no job of the window started in both the log and the simulation: nothing to compare"
    pct = lambda v: "n/a" if v is None else f"{100 * v:+.0f} %"  # noqa: E731
    sp = "n/a" if o["spearman"] is None else f"{o['spearman']:.2f}"
    words = [f"over {report['jobs_compared']} jobs the simulated mean wait is {pct(o['mean_rel_err'])} and p90 "
             f"{pct(o['p90_rel_err'])} against the log (rank correlation of waits {sp})"]
    inside = [b for b, s in report["by_size"].items()
              if s["n"] >= 10 and s["mean_rel_err"] is not None and abs(s["mean_rel_err"]) <= tolerance]
    if inside:
        words.append(f"mean waits within {100 * tolerance:.0f} % for jobs of size {', '.join(inside)}")
    off = [f"size {b}: {w}" for b, s in report["by_size"].items() if s["n"] >= 10 and (w := _ratio_words(s))]
    if off:
        words.append("; ".join(off))
    zl, zs = o["zero_wait_share_log"], o["zero_wait_share_sim"]
    if zl is not None and zs is not None:
        words.append(f"{100 * zs:.0f} % of jobs start at once in the simulation against {100 * zl:.0f} % in the log")
    trusted = (o["spearman"] is not None and o["spearman"] >= 0.7 and o["mean_rel_err"] is not None
               and abs(o["mean_rel_err"]) <= 0.25 and o["p90_rel_err"] is not None and abs(o["p90_rel_err"]) <= 0.25)
    words.append("the baseline is close enough to read what-if deltas larger than these errors" if trusted else
                 "treat what-if deltas smaller than these errors as noise")
    return "; ".join(words) + "."
