"""Cached what-if runs (``dashboard.whatif``) for the Fair share and Layout pages (report builds:
``data/reports.py``).

Every replay is a ``ScenarioSpec`` run by ``whatif.runner`` on the rows of ``whatif.loader`` (the
``replay_jobs`` query): one scenario model, one loader. The caches here only key and keep the runs, and beside
each window's baseline its fidelity against the log (``whatif.fidelity``) and its measures (``runner.Measured``:
attainment, queueing, waits per bucket), each computed once per baseline: a slider press simulates and measures
only the scenario, and reads nothing from the store (inputs, node layout and budget tree are cached).
"""
from __future__ import annotations

import datetime as dt
import types
from pathlib import Path

import polars as pl
import streamlit as st

from dashboard import shaping
from dashboard.whatif import budgets as whatif_budgets
from dashboard.whatif import calibration as whatif_calibration
from dashboard.whatif import explain as ex
from dashboard.whatif import frames, loader, runner
from dashboard.whatif.spec import ScenarioSpec
from engine import budgets as bt
from engine.tenants import to_tree
from queries.analytics import budgets as qb

from .analytics import capacity_gpus
from .query_cache import (Filters, NotAvailable, SimulationError, available, config, options, query, scan,
                          store_dir, store_token)

# ------------------------------------------------------------------ simulation (engine)
def budgets_path() -> Path | None:
    return config().budgets_path


@st.cache_resource(show_spinner=False, max_entries=8)
def _budget_tree(path: str, mtime_ns: int):
    return bt.load(path)


def budgets():
    """The baseline budgets: the budget file's tree, else share 1 per leaf account
    (``whatif.budgets.default_budgets``).

    Returns (budgets, source label). A broken budget file raises ``engine.budgets.BudgetError``."""
    path = budgets_path()
    if path is not None and Path(path).is_file():
        return _budget_tree(str(path), Path(path).stat().st_mtime_ns), str(path)
    return whatif_budgets.default_budgets(options().accounts), "equal shares per account (no budget file)"


@st.cache_resource(show_spinner=False, max_entries=8)
def _calibration(path: str, mtime_ns: int, discovered: bool):
    return whatif_calibration.load(path, discovered=discovered)


def calibration():
    """The simulator calibration the Fair share page replays under (``Config.calibration_path``), or None.
    A file that is not one raises ValueError (one line naming it): the page says so instead of hiding it."""
    cfg = config()
    path = cfg.calibration_path
    if path is None:
        return None
    try:
        mtime_ns = Path(path).stat().st_mtime_ns
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _calibration(str(path), mtime_ns, cfg.calibration is None)


def replay_filters(flt: Filters, days: int) -> Filters:
    """The window a replay covers: the last ``days`` days of the sidebar window (0 = all of it), its cluster."""
    start = flt.start
    if days and flt.end is not None:
        start = max(flt.start, flt.end - dt.timedelta(days=days)) if flt.start else flt.end - dt.timedelta(days=days)
    return Filters(start, flt.end, flt.cluster)


# Without a cluster in the sidebar, the replay takes the cluster with the most jobs submitted in this many days
# before the window's end (the page's default replay): in a store whose clusters' logs end at different times,
# the cluster with the most jobs overall may have nothing left to replay there (sarc's dump: fromage ends a
# month before raisin, so the default week of fromage was "nothing to replay").
ACTIVE_DAYS = 7


def sim_cluster(flt: Filters | None) -> str | None:
    """The one cluster a simulation replays: the sidebar's, else the one with the most jobs submitted in the
    ``ACTIVE_DAYS`` before the window's end (ties by name), else the one with the most jobs. It depends on the
    window's end only, so the sidebar window and every replay window cut from it (``replay_filters``) agree."""
    opts = options()
    if flt is not None and flt.cluster:
        return flt.cluster
    if len(opts.clusters) == 1:
        return opts.clusters[0]
    store, token = str(store_dir()), store_token()
    busiest = _busiest_cluster(store, token, flt.end) if flt is not None and flt.end is not None else None
    return busiest or _largest_cluster(store, token)


@st.cache_data(show_spinner=False, max_entries=16)
def _busiest_cluster(store: str, token: str, end) -> str | None:
    lo = end - dt.timedelta(days=ACTIVE_DAYS)
    df = (scan("jobs", store).filter((pl.col("submit") >= lo) & (pl.col("submit") < end) & pl.col("cluster").is_not_null())
          .group_by("cluster").agg(pl.len().alias("jobs")).collect())
    return df.sort(["jobs", "cluster"], descending=[True, False])["cluster"][0] if df.height else None


@st.cache_data(show_spinner=False, max_entries=8)
def _largest_cluster(store: str, token: str) -> str | None:
    df = query("filter_options") if available("filter_options") else pl.DataFrame()
    if df.height and {"field", "value", "jobs"} <= set(df.columns):
        c = df.filter(pl.col("field") == "cluster").sort("jobs", descending=True)
        return c["value"][0] if c.height else None
    return (options().clusters or [None])[0]


@st.cache_resource(show_spinner=False, max_entries=8)
def _engine_inputs(store: str, token: str, start, end, cluster):
    """The workload and nodes a replay of [start, end) needs (``whatif.loader``). With a window start the replay
    is warm-started there (``engine.warm_start``): the jobs running or pending at ``start``, those submitted in the
    window and those that ran in the fair-share lookback before it; without one, every job submitted before
    ``end``."""
    return loader.load(store, cluster=cluster, start=start, end=end)


def logged_contracts(flt: Filters) -> dict:
    """Per job class (jobs with a logged min runtime, jobs, median seconds) in the replayed window: the contracts
    the baseline keeps unless a scenario overrides them (``whatif.budgets.logged_contracts``)."""
    store = str(store_dir())
    return _logged_contracts(store, store_token(store), flt.start, flt.end, sim_cluster(flt))


@st.cache_data(show_spinner=False, max_entries=16)
def _logged_contracts(store: str, token: str, start, end, cluster) -> dict:
    jobs, _ = _engine_inputs(store, token, start, end, cluster)
    if start is not None:
        jobs = jobs.filter(pl.col("submit") >= start)
    return whatif_budgets.logged_contracts(jobs)


def _has_work(jobs: pl.DataFrame, start) -> bool:
    """Something to simulate: a job submitted in the window, or one pending at its (warm) start."""
    if start is None:
        return not jobs.is_empty()
    return jobs.filter(pl.col("submit").ge(start) | pl.col("start").is_null() | pl.col("start").ge(start)).height > 0


def is_cached(flt: Filters | None, scn) -> bool:
    """Whether this scenario's run is already cached (the page then skips the progress display)."""
    return (_scenario_key(flt, scn)) in st.session_state.get("sim_done", set())


def _scenario_key(flt, scn) -> tuple:
    return (str(store_dir()), store_token(), flt.start if flt else None, flt.end if flt else None,
            sim_cluster(flt), scn)


def mark_done(flt, scn) -> None:
    st.session_state.setdefault("sim_done", set()).add(_scenario_key(flt, scn))
    st.session_state["last_scenario"] = (flt, scn)


def sim_slots_at(result, flt: Filters, at) -> pl.DataFrame:
    """The node x GPU slot grid of a simulated run at ``at`` (same states as the real-history grid)."""
    store = str(store_dir())
    _, nodes = _engine_inputs(store, store_token(store), flt.start, flt.end, sim_cluster(flt))
    occ = shaping.sim_occupancy_at(result.timeline, result.jobs, nodes, at)
    return shaping.node_slots(occ, shaping.sim_efficiency(result.jobs))


def _in_window(result):
    """The run with its timeline clipped to its measured window (a warm start's history before it is the log)."""
    params = result.metrics.get("params", {})
    w0, w1 = params.get("warm_start"), params.get("window_end")
    if w0 is None:
        return result
    tl = result.timeline
    lo = dt.datetime.fromisoformat(w0)
    tl = tl.filter(pl.col("end") > lo).with_columns(pl.max_horizontal("start", pl.lit(lo)).alias("start"))
    if w1 is not None:
        hi = dt.datetime.fromisoformat(w1)
        tl = tl.filter(pl.col("start") < hi).with_columns(pl.min_horizontal("end", pl.lit(hi)).alias("end"))
    return types.SimpleNamespace(timeline=tl, jobs=result.jobs, metrics=result.metrics)


def sim_occupancy(base, scen, bucket_s: float = 3600.0, resource: str = "gpus") -> pl.DataFrame:
    """t, baseline, scenario: GPUs (``resource="cpus"``: cores) allocated per bucket in both runs (outer-joined
    on time)."""
    runs = [_in_window(base), _in_window(scen)]
    # one grid for both runs, on the measured window when there is one (else both timelines' extent), so the
    # curves share their buckets and neither drops to 0 past the window's end
    params = base.metrics.get("params", {})
    tls = [r.timeline.filter(pl.col("end") > pl.col("start")) for r in runs]
    tls = [tl for tl in tls if tl.height]
    if not tls:
        return pl.DataFrame(schema={"t": pl.Datetime("us", "UTC"), "baseline": pl.Float64, "scenario": pl.Float64})
    lo = dt.datetime.fromisoformat(params["warm_start"]) if params.get("warm_start") else \
        min(tl["start"].min() for tl in tls)
    hi = dt.datetime.fromisoformat(params["window_end"]) if params.get("window_end") else \
        max(tl["end"].max() for tl in tls)
    a = frames.occupancy_series(runs[0], bucket_s, lo, hi, resource).rename({resource: "baseline"})
    b = frames.occupancy_series(runs[1], bucket_s, lo, hi, resource).rename({resource: "scenario"})
    return a.join(b, on="t", how="full", coalesce=True).fill_null(0.0).sort("t")


# ------------------------------------------------------------------ named scenarios and explanations
def budget_tree():
    """The baseline budgets as a ``BudgetTree`` (the default equal shares become a one-version tree)."""
    b, source = budgets()
    return to_tree(b), source


def budget_unit(cluster: str | None) -> str:
    """"gpu" or "cpu": what the Fair share page's budgets count (``queries.analytics.budgets.budget_unit``: budgets.toml's
    ``unit``, else core-hours for a cluster whose node list has no GPUs)."""
    store = str(store_dir())
    return _budget_unit(store, store_token(store), cluster, _budgets_key())


@st.cache_data(show_spinner=False, max_entries=16)
def _budget_unit(store: str, token: str, cluster, budgets_key: str) -> str:
    return qb.budget_unit(budget_tree()[0], store=store, cluster=cluster)


def _budgets_key() -> str:
    path = budgets_path()
    return f"{path}:{Path(path).stat().st_mtime_ns}" if path and Path(path).is_file() else "default"


def _window(jobs: pl.DataFrame, start, end) -> tuple[dt.datetime, dt.datetime]:
    lo = start if start is not None else jobs["submit"].min()
    hi = end if end is not None else jobs["submit"].max() + dt.timedelta(microseconds=1)
    return lo, hi


@st.cache_data(show_spinner=False, max_entries=16)
def _layout_inferred(store: str, token: str, cluster) -> bool:
    return loader.layout_inferred(store, cluster)


def _named_inputs(store: str, token: str, start, end, cluster):
    jobs, nodes = _engine_inputs(store, token, start, end, cluster)
    tree, source = budget_tree()
    lo, hi = _window(jobs, start, end)
    return runner.Inputs(jobs, nodes, tree, lo, hi, store=store, cluster=cluster, budgets_source=source,
                         warm_start=start is not None,
                         layout_inferred=nodes.height > 0 and _layout_inferred(store, token, cluster))


@st.cache_resource(show_spinner=False, max_entries=8)
def _named_baseline(store: str, token: str, start, end, cluster, policy: str, backfill: str, seed: int,
                    budgets_key: str, sim_knobs: tuple = ()):
    """The baseline replay every scenario of this window shares (a slider re-runs only the scenario)."""
    spec = ScenarioSpec.make("shares", policy=policy, backfill=backfill, seed=seed, sim_knobs=dict(sim_knobs))
    return runner.baseline(spec, _named_inputs(store, token, start, end, cluster))


@st.cache_resource(show_spinner=False, max_entries=8)
def _named_fidelity(store: str, token: str, start, end, cluster, policy: str, backfill: str, seed: int,
                    budgets_key: str, sim_knobs: tuple, _baseline):
    """The baseline's fidelity against the log of its window (``whatif.fidelity``), kept beside the baseline: no
    replay, one comparison per window and baseline."""
    spec = ScenarioSpec.make("shares", policy=policy, backfill=backfill, seed=seed, sim_knobs=dict(sim_knobs))
    return runner.fidelity_of(spec, _named_inputs(store, token, start, end, cluster), _baseline)


@st.cache_resource(show_spinner=False, max_entries=8)
def _named_measured(store: str, token: str, start, end, cluster, policy: str, backfill: str, seed: int,
                    budgets_key: str, sim_knobs: tuple, _baseline):
    """The baseline's measures (``runner.measure_baseline``), kept beside it: a slider measures only the
    scenario."""
    spec = ScenarioSpec.make("shares", policy=policy, backfill=backfill, seed=seed, sim_knobs=dict(sim_knobs))
    return runner.measure_baseline(spec, _named_inputs(store, token, start, end, cluster), _baseline)


@st.cache_resource(show_spinner=False, max_entries=16)
def _run_named(store: str, token: str, start, end, cluster, spec, budgets_key: str, _baseline, _fidelity=None,
               _measured=None):
    return runner.run(spec, _named_inputs(store, token, start, end, cluster), baseline=_baseline,
                      fidelity=_fidelity, measured=_measured)


def run_scenario(flt: Filters, spec, progress=None):
    """A scenario (``dashboard.whatif.spec``) replayed over ``flt``'s window: its ``ScenarioResult``,
    cached by store, window, cluster, spec and budget file; ``progress(fraction, text)`` is called between the
    runs. The progress display stays outside the cached functions: Streamlit records the element calls a cached
    function makes and replays them on a hit, which fails in another session whose progress bar is another."""
    say = progress or (lambda f, t: None)
    store = str(store_dir())
    key = (store, store_token(store), flt.start, flt.end, sim_cluster(flt))
    jobs, nodes = _engine_inputs(*key)
    if not _has_work(jobs, flt.start):
        raise NotAvailable("no jobs were submitted in this window on this cluster, so there is nothing to replay")
    if nodes.is_empty():
        raise NotAvailable(loader.NO_LAYOUT)
    budgets_key = _budgets_key()
    try:
        say(0.1, "Replaying the baseline (kept for every scenario of this window) ...")
        # the calibrated knobs are part of the baseline: a spec with other knobs must not reuse it
        base = _named_baseline(*key, spec.policy, spec.backfill, spec.seed, budgets_key, spec.sim_knobs)
        fidelity = _named_fidelity(*key, spec.policy, spec.backfill, spec.seed, budgets_key, spec.sim_knobs, base)
        measured = _named_measured(*key, spec.policy, spec.backfill, spec.seed, budgets_key, spec.sim_knobs, base)
        say(0.5, f"Replaying the scenario ({spec.label.lower()}) and comparing ...")
        result = _run_named(*key, spec, budgets_key, base, fidelity, measured)
    except Exception as exc:  # an engine or scenario error must read as a message, never a traceback
        raise SimulationError(f"{type(exc).__name__}: {exc}") from exc
    say(1.0, "Done")
    return result


def last_scenario():
    """(SimResult, description, replayed filters) of the session's most recent scenario, or None."""
    last = st.session_state.get("last_scenario")
    if not last:
        return None
    flt, spec = last
    return run_scenario(flt, spec).scenario, spec.describe(), flt


@st.cache_resource(show_spinner=False, max_entries=64)
def _explain(store: str, token: str, start, end, cluster, run_key, which: str, team: str, budgets_key: str,
             _result, _tree):
    _, nodes = _engine_inputs(store, token, start, end, cluster)
    cap = float(nodes["gpus"].fill_null(0).sum())
    cores = float(nodes["cpus"].fill_null(0).sum())  # the capacity of a budget in core-hours (no GPUs)
    if which == "logs":
        lo, hi = start, end
        jobs = scan("jobs", store)
        if cluster is not None:
            jobs = jobs.filter(pl.col("cluster") == cluster)
        jobs = jobs.filter((pl.col("submit") < hi) & (pl.col("end").is_null() | (pl.col("end") > lo))).collect()
        att = qb.attainment(store, _tree, lo, hi, cluster=cluster, capacity_gpus=cap, capacity_cpus=cores)
        allocations = ex.log_allocations(jobs, hi)
        jobs = ex.with_bucket(jobs, _tree, hi)
    else:
        att = qb.attainment_of(_result.jobs, _tree, start, end, capacity_gpus=cap, capacity_cpus=cores)
        allocations, jobs = _result.timeline, ex.with_bucket(_result.jobs, _tree)
    rows = att.table.filter(pl.col("node") == team)
    row = rows.row(0, named=True) if rows.height else None
    return ex.explain(team, jobs, allocations, nodes, row, source="logs" if which == "logs" else "simulation",
                      start=start, end=end, unit=att.unit_label, resource=att.unit)


def explain_team(flt: Filters, run_key, which: str, team: str, result=None, tree=None):
    """"Why does my team get less?" for ``team`` in the ``baseline`` / ``scenario`` run (``result``, measured
    against ``tree``) or in the logged history (``logs``) of the replayed window; cached per run and team."""
    store = str(store_dir())
    token = store_token(store)
    jobs, _ = _engine_inputs(store, token, flt.start, flt.end, sim_cluster(flt))
    lo, hi = _window(jobs, flt.start, flt.end)
    if tree is None:
        tree = budget_tree()[0]
    if which == "logs":  # the logged history depends on the tree it is measured against, not on the run
        run_key = ("logs", hash(tree))
    elif which == "baseline" and isinstance(run_key, ScenarioSpec):
        # every scenario of the window shares its baseline (``_named_baseline``'s key): explain it once
        run_key = ("baseline", run_key.policy, run_key.backfill, run_key.seed, run_key.sim_knobs)
    return _explain(store, token, lo, hi, sim_cluster(flt), run_key, which, team, _budgets_key(), result, tree)


@st.cache_data(show_spinner=False, max_entries=16)
def _attainment_history(store: str, token: str, start, end, cluster, window_h: float, step_h: float,
                        budgets_key: str) -> pl.DataFrame:
    return qb.attainment_history(store, budget_tree()[0], start, end, window_hours=window_h, step_hours=step_h,
                                 cluster=cluster, capacity_gpus=capacity_gpus(cluster))


def attainment_history(flt: Filters, window_h: float = 168.0, step_h: float = 24.0) -> pl.DataFrame:
    """The logged history's attainment summary over sliding windows inside the sidebar window (the window
    shrinks to the sidebar's span when that is shorter), one row per window end."""
    if flt.start is None or flt.end is None:
        raise NotAvailable("pick a window in the sidebar first")
    span_h = (flt.end - flt.start).total_seconds() / 3600.0
    window_h = min(window_h, span_h)
    store = str(store_dir())
    return _attainment_history(store, store_token(store), flt.start, flt.end, sim_cluster(flt), window_h,
                               min(step_h, window_h), _budgets_key())
