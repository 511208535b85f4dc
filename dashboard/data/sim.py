"""Cached simulations (the engine) for the Fair share and Layout pages (report builds: ``data/reports.py``)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import streamlit as st

from .core import (Filters, NotAvailable, SimulationError, available, config, options, query, scan, store_dir,
                   store_token)

# ------------------------------------------------------------------ simulation (engine)
def budgets_path() -> Path | None:
    return config().budgets_path


@st.cache_resource(show_spinner=False, max_entries=8)
def _budget_tree(path: str, mtime_ns: int):
    from engine import budget_tree

    return budget_tree.load(path)


def budgets():
    """The baseline budgets: the budget file's tree, else share 1 per leaf account (``scenario.default_budgets``).

    Returns (budgets, source label). A broken budget file raises ``engine.budget_tree.BudgetError``."""
    from dashboard import scenario

    path = budgets_path()
    if path is not None and Path(path).is_file():
        return _budget_tree(str(path), Path(path).stat().st_mtime_ns), str(path)
    return scenario.default_budgets(options().accounts), "equal shares per account (no budget file)"


def replay_filters(flt: Filters, days: int) -> Filters:
    """The window a replay covers: the last ``days`` days of the sidebar window (0 = all of it), its cluster."""
    start = flt.start
    if days and flt.end is not None:
        start = max(flt.start, flt.end - dt.timedelta(days=days)) if flt.start else flt.end - dt.timedelta(days=days)
    return Filters(start, flt.end, flt.cluster)


def sim_cluster(flt: Filters | None) -> str | None:
    """The one cluster a simulation replays: the sidebar's, else the one with the most jobs."""
    opts = options()
    if flt is not None and flt.cluster:
        return flt.cluster
    return opts.clusters[0] if len(opts.clusters) == 1 else _largest_cluster(str(store_dir()), store_token())


@st.cache_data(show_spinner=False, max_entries=8)
def _largest_cluster(store: str, token: str) -> str | None:
    df = query("filter_options") if available("filter_options") else pl.DataFrame()
    if df.height and {"field", "value", "jobs"} <= set(df.columns):
        c = df.filter(pl.col("field") == "cluster").sort("jobs", descending=True)
        return c["value"][0] if c.height else None
    return (options().clusters or [None])[0]


@st.cache_resource(show_spinner=False, max_entries=8)
def _engine_inputs(store: str, token: str, start, end, cluster):
    jobs, nodes = scan("jobs", store), scan("nodes", store)
    if cluster is not None:
        jobs = jobs.filter(pl.col("cluster") == cluster)
        nodes = nodes.filter(pl.col("cluster") == cluster)
    if start is not None:
        jobs = jobs.filter(pl.col("submit") >= start)
    if end is not None:
        jobs = jobs.filter(pl.col("submit") < end)
    from queries import schema

    return schema.conform(jobs.sort("submit", "job_id").collect(), "jobs"), schema.conform(nodes.collect(), "nodes")


@st.cache_resource(show_spinner=False, max_entries=24)
def _simulate(store: str, token: str, start, end, cluster, scn, budgets_key: str):
    import engine
    from dashboard import scenario

    jobs, nodes = _engine_inputs(store, token, start, end, cluster)
    if jobs.is_empty():
        raise NotAvailable("no jobs were submitted in this window on this cluster, so there is nothing to replay")
    if nodes.is_empty():
        raise NotAvailable("the store has no node list for this cluster; the simulator needs one")
    try:
        return engine.simulate(jobs, nodes, scenario.sim_config(scn, budgets()[0]))
    except engine.ConfigError as exc:
        raise SimulationError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - an engine bug must read as a message, never a traceback
        raise SimulationError(f"{type(exc).__name__}: {exc}") from exc


def simulate(flt: Filters | None, scn):
    """The engine's replay of the window under scenario ``scn`` (cached by store, window, cluster, scenario)."""
    store = str(store_dir())
    path = budgets_path()
    bkey = f"{path}:{Path(path).stat().st_mtime_ns}" if path and Path(path).is_file() else "default"
    return _simulate(store, store_token(store), flt.start if flt else None, flt.end if flt else None,
                     sim_cluster(flt), scn, bkey)


def is_cached(flt: Filters | None, scn) -> bool:
    """Whether this scenario's run is already cached (the page then skips the progress display)."""
    return (_scenario_key(flt, scn)) in st.session_state.get("sim_done", set())


def _scenario_key(flt, scn) -> tuple:
    return (str(store_dir()), store_token(), flt.start if flt else None, flt.end if flt else None,
            sim_cluster(flt), scn)


def mark_done(flt, scn) -> None:
    st.session_state.setdefault("sim_done", set()).add(_scenario_key(flt, scn))
    st.session_state["last_scenario"] = (flt, scn)


def last_scenario():
    """(SimResult, description, replayed filters) of the session's most recent scenario, or None."""
    last = st.session_state.get("last_scenario")
    if not last:
        return None
    flt, scn = last
    return simulate(flt, scn), scn.describe(), flt


def sim_slots_at(result, flt: Filters, at) -> pl.DataFrame:
    """The node x GPU slot grid of a simulated run at ``at`` (same states as the real-history grid)."""
    from dashboard import shaping

    store = str(store_dir())
    _, nodes = _engine_inputs(store, store_token(store), flt.start, flt.end, sim_cluster(flt))
    occ = shaping.sim_occupancy_at(result.timeline, result.jobs, nodes, at)
    return shaping.node_slots(occ, shaping.sim_efficiency(result.jobs))


def compare(base, scen) -> pl.DataFrame:
    import engine

    return engine.compare(base, scen)


def sim_occupancy(base, scen, bucket_s: float = 3600.0) -> pl.DataFrame:
    """t, baseline, scenario: GPUs allocated per bucket in both runs (outer-joined on time)."""
    from dashboard import scenario

    a = scenario.occupancy_series(base, bucket_s).rename({"gpus": "baseline"})
    b = scenario.occupancy_series(scen, bucket_s).rename({"gpus": "scenario"})
    return a.join(b, on="t", how="full", coalesce=True).fill_null(0.0).sort("t")
