"""How far to trust a what-if: the fidelity of a scenario's baseline replay against the log it replays, and which
of the scenario's deltas are inside that error (issue 18, DOMAIN.md section 10).

``of_baseline(inputs, baseline, cfg)`` compares the baseline run with the logged jobs of its window through
``engine.fidelity.compare_run`` (the code path of ``quotaloop validate``): the baseline is already the modeled
configuration replayed over [start, end), warm-started from the logged state at ``start`` (``engine.warm_start``)
as ``validate`` does, so no extra replay is needed; per-team attainment error comes from ``engine.attainment``
on the logged window, as ``validate --budgets`` computes it. ``headline`` says it in one sentence,
``judge(comparison, fid)`` marks each comparison row.

Error bands, in each metric's own unit (``BANDS``): a delta is *inside the simulator's error* when
|delta| <= band, where band is
- waits (median, p90, a class's p90): |that figure simulated - logged| over the compared jobs, in seconds (the
  class's p90 when the class has at least ``MIN_CLASS_JOBS`` compared jobs, else the overall p90's);
- mean-wait-driven figures (queued GPU- / core- / job-hours, mean bounded slowdown): |mean wait relative error| x
  |the baseline's value|;
- occupancy and useful utilisation: |mean hourly occupancy simulated - logged| (fraction points);
- attainment (mean, worst): the mean absolute per-team attainment error (points).
Other rows (preemptions, lost hours, idle reservations, ...) have no logged counterpart: "not validated".

Invariants: pure (frames and dicts in, dict / frame out; no store, no Streamlit); the same baseline and log give
the same dict; every figure is a finite float or None; a window with no logged start is ``available: False`` with
the reason in words, never an exception.
"""
from __future__ import annotations

import math

import polars as pl

from engine import attainment as engine_attainment
from engine import fidelity


MIN_CLASS_JOBS = 10
TRUSTED_REL = 0.25  # the headline says "reproduces ... within" up to this relative error (issue 18's target)
INSIDE, BEYOND, NOT_VALIDATED, NO_CHANGE = "inside error", "beyond error", "not validated", "no change"

# comparison metric -> (band kind, what the band is, in words)
_MEAN = ("mean", "the baseline's mean wait error")
BANDS = {
    "wait_s.p50": ("p50", "the baseline's median wait error"),
    "wait_s.p90": ("p90", "the baseline's p90 wait error"),
    "usage.waiting_gpu_hours": _MEAN, "usage.waiting_cpu_hours": _MEAN, "usage.wait_job_hours": _MEAN,
    "bounded_slowdown_mean": _MEAN,
    "occupancy": ("occupancy", "the baseline's occupancy error"),
    "utilisation": ("occupancy", "the baseline's occupancy error"),
    "attainment.mean": ("attainment", "the baseline's per-team attainment error"),
    "attainment.worst": ("attainment", "the baseline's per-team attainment error"),
}
JUDGED_SCHEMA = {"metric": pl.String, "label": pl.String, "delta": pl.Float64, "error": pl.Float64,
                 "error_basis": pl.String, "status": pl.String}


def of_baseline(inputs, baseline, cfg) -> dict:
    """The baseline run's fidelity over ``inputs``' window: ``available``, ``reason`` (when not), ``window``,
    ``days``, ``warm_start``, ``report`` (``engine.fidelity.compare``), ``verdict`` and ``headline``."""
    start, end = inputs.start, inputs.end
    doc = {"window": {"start": start.isoformat(), "end": end.isoformat()},
           "days": (end - start).total_seconds() / 86400.0, "warm_start": bool(inputs.warm_start)}
    logged = inputs.jobs
    inside = logged.filter((pl.col("submit") >= start) & (pl.col("submit") < end))
    started = inside.filter(pl.col("start").is_not_null()).height if "start" in inside.columns else 0
    if not started:
        return {**doc, "available": False,
                "reason": (f"the log has no start time for any of the {inside.height} jobs submitted in this window, "
                           "so there is nothing to check the modeled baseline against: its fidelity is unknown")
                if inside.height else "no job was submitted in this window: nothing to check the baseline against"}
    m = baseline.metrics
    t0_s, t1_s = start.timestamp(), end.timestamp()
    att_log = att_sim = None
    if cfg.budgets is not None and (m.get("attainment") or {}).get("teams"):
        att_log = engine_attainment.of_run(logged, cfg.budgets, m["capacity"], m["resource"], cfg.lookback_s,
                                           window_us=(round(t0_s * 1e6), round(t1_s * 1e6)))["teams"]
        att_sim = m["attainment"]["teams"]
    report = fidelity.compare_run(logged, baseline, window_start=t0_s, window_end=t1_s, attainment_log=att_log,
                                  attainment_sim=att_sim)
    if not report["jobs_compared"]:
        return {**doc, "available": False, "report": report, "reason": fidelity.verdict(report)}
    doc.update(available=True, report=report, verdict=fidelity.verdict(report))
    doc["headline"] = headline(doc)
    return doc


def span_words(days: float) -> str:
    """"4 weeks", "7 days", "36 hours": the window's length as a manager reads it."""
    if days >= 14 and abs(days / 7 - round(days / 7)) < 1e-6:
        return f"{round(days / 7)} weeks"
    if days >= 1 and abs(days - round(days)) < 1e-6:
        return "1 day" if round(days) == 1 else f"{round(days)} days"
    return f"{days * 24:.0f} hours"


def _clause(figure: str, rel, first: bool) -> str:
    """"reproduces logged p90 waits within 18 % (simulated shorter)" when |rel| <= ``TRUSTED_REL``, else "misses
    logged p90 waits by 79 % (simulated shorter)": a large error must not read as a reproduction."""
    what = f"logged {figure}" if first else figure
    if rel is None:
        return f"cannot compare {what} (the logged value is 0)"
    pct = f"{100 * abs(rel):.0f} %"
    side = "" if not round(100 * abs(rel)) else f" (simulated {'shorter' if rel < 0 else 'longer'})"
    return (f"reproduces {what} within {pct if round(100 * abs(rel)) else '1 %'}{side}" if abs(rel) <= TRUSTED_REL
            else f"misses {what} by {pct}{side}")


def headline(fid: dict) -> str:
    """One sentence: "On the last 7 days the modeled baseline reproduces logged p90 waits within 18 % (...)" (or
    "misses logged p90 waits by 79 %" beyond ``TRUSTED_REL``); for an unavailable fidelity, its reason."""
    if not fid.get("available"):
        return f"Fidelity of the baseline not measured: {fid.get('reason', 'unknown')}."
    o = fid["report"]["overall"]
    sp = "n/a" if o["spearman"] is None else f"{o['spearman']:.2f}"
    words = (f"On the last {span_words(fid['days'])} the modeled baseline {_clause('p90 waits', o['p90_rel_err'], True)}"
             f", {_clause('mean waits', o['mean_rel_err'], False)}, Spearman {sp} over "
             f"{fid['report']['jobs_compared']:,} jobs")
    occ = fid["report"]["occupancy"]
    if occ.get("mean_log") is not None and occ.get("mean_sim") is not None:
        words += f"; occupancy {100 * occ['mean_sim']:.1f} % simulated against {100 * occ['mean_log']:.1f} % logged"
    att = fid["report"].get("attainment")
    if att and att.get("mean_abs_err") is not None:
        words += f"; per-team attainment within {100 * att['mean_abs_err']:.1f} points on average"
    if not fid.get("warm_start"):
        words += " (cold start: the baseline begins on an empty cluster, the log did not)"
    return words + "."


def band(metric: str, baseline_value, fid: dict) -> tuple[float | None, str]:
    """(error band in the metric's unit, what it is in words); (None, reason) when the metric is not validated."""
    if not fid.get("available"):
        return None, "no fidelity measured"
    rep = fid["report"]
    kind, words = BANDS.get(metric, (None, "no logged counterpart"))
    if metric.startswith("wait_s_by_class.") and metric.endswith(".p90"):
        cls = metric[len("wait_s_by_class."):-len(".p90")]
        s = rep["by_class"].get(cls)
        if s and s["n"] >= MIN_CLASS_JOBS and s["p90_sim_s"] is not None:
            return abs(s["p90_sim_s"] - s["p90_log_s"]), f"the baseline's {cls} p90 wait error"
        kind, words = "p90", "the baseline's p90 wait error (too few compared jobs of the class)"
    o = rep["overall"]
    if kind in ("p50", "p90"):
        if o[f"{kind}_sim_s"] is None or o[f"{kind}_log_s"] is None:
            return None, words + " is unknown"
        return abs(o[f"{kind}_sim_s"] - o[f"{kind}_log_s"]), words
    if kind == "mean":
        rel = o["mean_rel_err"]
        return (None, words + " is unknown (the logged value is 0)") if rel is None else \
            (_rel_band(rel, baseline_value), words)
    if kind == "occupancy":
        occ = rep["occupancy"]
        if occ.get("mean_log") is None or occ.get("mean_sim") is None:
            return None, "no occupancy measured"
        return abs(occ["mean_sim"] - occ["mean_log"]), words
    if kind == "attainment":
        att = rep.get("attainment")
        if not att or att.get("mean_abs_err") is None:
            return None, "no per-team attainment to compare"
        return att["mean_abs_err"], words
    return None, words


def _rel_band(rel: float, baseline_value) -> float | None:
    if baseline_value is None or (isinstance(baseline_value, float) and math.isnan(baseline_value)):
        return None
    return abs(rel) * abs(float(baseline_value))


def judge(comparison: pl.DataFrame, fid: dict | None) -> pl.DataFrame:
    """One row per comparison row: metric, label, delta, error (the band, in the metric's unit), error_basis
    (the band in words) and status: inside error | beyond error | not validated | no change."""
    rows = []
    for r in comparison.iter_rows(named=True):
        err, basis = band(r["metric"], r["baseline"], fid or {})
        d = r["delta"]
        if d is None or (isinstance(d, float) and math.isnan(d)):
            status = NOT_VALIDATED
        elif d == 0:
            status = NO_CHANGE
        elif err is None:
            status = NOT_VALIDATED
        else:
            status = INSIDE if abs(d) <= err else BEYOND
        rows.append((r["metric"], r["label"], d, err, basis, status))
    return pl.DataFrame(rows, schema=JUDGED_SCHEMA, orient="row")


def conclusions(judged: pl.DataFrame, fmt) -> dict:
    """{"inside": [...], "beyond": [...]}: "p90 wait -5 min (error ±32 min)" phrases; ``fmt(value, metric)`` formats
    a delta or band in the metric's unit (``runner.fmt_value``)."""
    out = {"inside": [], "beyond": []}
    for r in judged.iter_rows(named=True):
        if r["status"] not in (INSIDE, BEYOND):
            continue
        sign = "+" if r["delta"] > 0 else "−"
        text = f"{r['label']} {sign}{fmt(abs(r['delta']), r['metric'])} (error ±{fmt(r['error'], r['metric'])})"
        out["inside" if r["status"] == INSIDE else "beyond"].append(text)
    return out


def conclusion_words(judged: pl.DataFrame, fmt) -> str:
    """The sentence the scenario output and the page print under the headline."""
    c = conclusions(judged, fmt)
    if not c["inside"] and not c["beyond"]:
        return "No validated figure changed."
    parts = []
    if c["inside"]:
        parts.append("Inside the simulator's error (read as no change): " + "; ".join(c["inside"]) + ".")
    if c["beyond"]:
        parts.append("Beyond it: " + "; ".join(c["beyond"]) + ".")
    return " ".join(parts)


def summary(fid: dict | None) -> dict | None:
    """The JSON-ready part for ``scenario.json`` and reports: availability, headline, verdict and the overall
    figures (the per-class / per-size detail stays in the full report)."""
    if fid is None:
        return None
    out = {k: fid[k] for k in ("available", "window", "days", "warm_start") if k in fid}
    out["headline"] = headline(fid)
    if not fid.get("available"):
        out["reason"] = fid.get("reason")
        return out
    rep = fid["report"]
    out.update(verdict=fid["verdict"], jobs_compared=rep["jobs_compared"], overall=rep["overall"],
               start_order=rep["start_order"], occupancy=rep["occupancy"],
               attainment_mean_abs_err=(rep.get("attainment") or {}).get("mean_abs_err"))
    return out
