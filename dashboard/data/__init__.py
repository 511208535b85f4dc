"""The one place that owns the dashboard's caches and talks to ``queries`` and ``engine``. Pages import
``dashboard.data`` and see one namespace; every name it offers is re-exported below from the module that
defines it:

- ``query_cache``: the configured store and its token, the sidebar's ``Filters``, cached named-query runs,
  filter options, and the ``NotAvailable`` / ``SimulationError`` a page shows;
- ``analytics``: the waste, ranking, capacity and layout views the analytics pages draw;
- ``sim``: budget trees, replays and what-if scenarios (cached engine runs) for the Fair share page;
- ``reports``: the Reports page's cached ``dashboard.report`` builds;
- ``prewarm``: every page's default view (``page_views``), ``warm()``, which computes them all at server start,
  and ``prefetch()``, which starts a page's views in the background.

Invariants:
- Queries are called by name (``queries.run``); a query or engine feature that does not exist yet raises
  ``NotAvailable`` so the page can say so instead of failing.
- ``st.cache_data`` holds result frames, keyed by the store's manifest token (a new ingest invalidates them)
  and the bound parameters; ``st.cache_resource`` holds engine inputs and simulation results (large, read-only,
  shared by every session), keyed the same way. Aggregates are cached as aggregates, so a rerun never reloads a
  per-job frame just to sum it again.
- Only the parameters a query declares are passed; a global filter a query does not take is reported by
  ``ignored_filters`` so the page can say "this view ignores ...", never silently.
- Pure shaping of the results lives in ``dashboard.shaping`` and the what-if service ``dashboard.whatif``.
"""
from .analytics import (GAMING_COLUMNS, GAMING_REPLAY_MAX_JOBS, RANK_BY, RESOURCES, TEAM_LEVELS, capacity,
                        capacity_gpus, coefficient_explanation, efficiency_column, gaming_check, gaming_everyone,
                        gantt_rows, gap_series, job_waste, layout_at, low_efficiency_jobs, occupancy_series,
                        overview_totals, pyramid, quota_backtest, rank_default, resource, score_drivers, team_depth,
                        team_ranking, user_ranking, user_row, waste_by, waste_trend, wasted_column)
from .prewarm import (BUCKETS_S, GANTT_SPAN_H, default_bucket_s, default_layout_at, default_window, gantt_span,
                      layout_range, page_views, prefetch, warm, window_filters)
from .query_cache import (Filters, NotAvailable, SimulationError, config, ignored_filters, options, param_default, query,
                          store_dir, store_token)
from .reports import report_files, report_request
from .sim import (attainment_history, budget_tree, budget_unit, budgets, calibration, explain_team, is_cached, last_scenario,
                  logged_contracts, mark_done, replay_filters, run_scenario, sim_cluster, sim_occupancy, sim_slots_at)

__all__ = [
    # query_cache
    "Filters", "NotAvailable", "SimulationError", "config", "ignored_filters", "options", "param_default", "query",
    "store_dir", "store_token",
    # analytics
    "GAMING_COLUMNS", "GAMING_REPLAY_MAX_JOBS", "RANK_BY", "RESOURCES", "TEAM_LEVELS", "capacity", "capacity_gpus",
    "coefficient_explanation", "efficiency_column", "gaming_check", "gaming_everyone", "gantt_rows", "gap_series",
    "job_waste", "layout_at", "low_efficiency_jobs", "occupancy_series", "overview_totals", "pyramid",
    "quota_backtest", "rank_default", "resource", "score_drivers", "team_depth", "team_ranking", "user_ranking",
    "user_row", "waste_by", "waste_trend", "wasted_column",
    # sim
    "attainment_history", "budget_tree", "budget_unit", "budgets", "calibration", "explain_team", "is_cached", "last_scenario",
    "logged_contracts", "mark_done", "replay_filters", "run_scenario", "sim_cluster", "sim_occupancy", "sim_slots_at",
    # reports
    "report_files", "report_request",
    # prewarm
    "BUCKETS_S", "GANTT_SPAN_H", "default_bucket_s", "default_layout_at", "default_window", "gantt_span",
    "layout_range", "page_views", "prefetch", "warm", "window_filters",
]
