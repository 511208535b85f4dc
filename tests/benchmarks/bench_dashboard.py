"""Dashboard speed, measured in a real browser, beside the bare query / engine times of the same run.

For each page: time to first full render in headless Chromium (navigation until Streamlit reports the script
done and no skeleton is left) on a cold server cache and again warm, printed next to the page's server-side
script time (AppTest, empty caches) and the sum of the bare ``queries.run`` times of exactly the queries that
page issued (recorded during the script run, then re-run uncached on the same store in the same run), so the
dashboard's own overhead (Streamlit, Plotly, the browser) is visible as the difference and the ratio. Then the slider-to-result
latency of a simulation (move a budget slider, press Simulate, wait for the comparison) beside a bare
``engine.simulate`` of the same two runs. Cold renders come from a server started with ``QUOTALOOP_WARM=0``,
once it logged that its data layer is loaded (code imported, no query run, nothing cached); a
second server with the start-up warm-up (``dashboard/data/prewarm.py``) gives the first visit after it finished.

Stores: the bundled sample store (built by ``quotaloop sample`` when missing; ``QUOTALOOP_BENCH_SAMPLE=0`` skips
it), and the 10M-job store of the query benchmark when it exists (``QUOTALOOP_BENCH_BIG_STORE``, default
``QUOTALOOP_BENCH_CACHE``/jobs-10000000, built by bench_queries.py with its rollup and cube).

Run: ``python -m pytest tests/benchmarks/bench_dashboard.py -m benchmark -s``
"""
from __future__ import annotations

import datetime as dt
import os
import re
import time
from pathlib import Path

import pytest

import dashboard_browser as br  # tests/support is on pytest's pythonpath (pyproject.toml)

pytestmark = pytest.mark.benchmark
REPO = br.REPO
SAMPLE = REPO / "sample_data" / "store"
BIG = Path(os.environ.get("QUOTALOOP_BENCH_BIG_STORE") or
           Path(os.environ.get("QUOTALOOP_BENCH_CACHE", "/tmp/quotaloop-bench-queries")) / "jobs-10000000")
WITH_SAMPLE = os.environ.get("QUOTALOOP_BENCH_SAMPLE", "1") != "0"
PAGES = {"overview": "/", "waste": "/waste", "layout": "/layout", "rankings": "/rankings",
         "fairshare": "/fairshare", "my_jobs": "/my-jobs", "reports": "/reports"}
PAGE_FILES = {name: name for name in PAGES}


def _window(store) -> tuple[dt.datetime, dt.datetime]:
    """The sidebar's default window: the last 30 days up to the store's last event, whole UTC days."""
    from queries.store import Store
    import polars as pl

    files = Store(store).files("jobs")
    lf = pl.scan_parquet(files, hive_partitioning=False, missing_columns="insert", extra_columns="ignore")
    row = lf.select(pl.col("submit").min().alias("a"),
                    pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())
                    .alias("b")).collect().row(0)
    last = row[1].date()
    first = max(row[0].date(), last - dt.timedelta(days=30))
    utc = dt.timezone.utc
    return (dt.datetime(first.year, first.month, first.day, tzinfo=utc),
            dt.datetime(last.year, last.month, last.day, tzinfo=utc) + dt.timedelta(days=1))


MEMORY = os.environ.get("QUOTALOOP_BENCH_MEMORY", "8GB")  # DuckDB's bound, for the server and the bare runs


def _auth(store: Path) -> str:
    return "demo" if store.resolve() == SAMPLE.resolve() else "open"


def _page_calls(store: Path) -> dict[str, tuple[float, list]]:
    """Per page: (seconds of one cold server-side script run under AppTest, the ``queries.run`` calls it made).

    The calls are recorded, not listed by hand, so the bare times below are exactly the queries each page issues
    on first render with its default widget values (the same defaults the browser gets)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import queries

    env = {"QUOTALOOP_STORE": str(store), "QUOTALOOP_AUTH": _auth(store), "QUOTALOOP_MEMORY_LIMIT": MEMORY}
    saved = {k: os.environ.get(k) for k in (*env, "QUOTALOOP_CONFIG")}
    os.environ.update(env)
    os.environ.pop("QUOTALOOP_CONFIG", None)
    calls: list = []
    real_run = queries.run

    def recording_run(name, store=None, *, con=None, **params):
        calls.append((name, params))
        return real_run(name, store, con=con, **params)

    queries.run = recording_run
    out = {}
    try:
        for name in PAGES:
            at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=1800)
            at.run()  # the default page first (AppTest switches pages only in a running app); then forget it
            st.cache_data.clear()
            st.cache_resource.clear()
            calls.clear()
            t0 = time.perf_counter()
            at.switch_page(f"views/{PAGE_FILES[name]}.py").run()
            seconds = time.perf_counter() - t0
            assert not at.exception, (name, [e.value for e in at.exception])
            out[name] = (seconds, list(calls))
    finally:
        queries.run = real_run
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        st.cache_data.clear()
        st.cache_resource.clear()
    return out


def _bare(store: Path, calls: list) -> float:
    """Seconds of the recorded queries run bare: one connection each, as the dashboard opens them, no cache."""
    import queries

    total = 0.0
    for name, params in calls:
        t0 = time.perf_counter()
        con = queries.connect(store, memory_limit=MEMORY)
        try:
            queries.run(name, con=con, **params)
        finally:
            con.close()
        total += time.perf_counter() - t0
    return total


def _render_times(url: str, browser) -> dict[str, tuple[float, float]]:
    out = {}
    for name, path in PAGES.items():
        times = []
        for _ in range(2):  # cold server cache, then warm
            ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
            page = ctx.new_page()
            times.append(br.open_page(page, url + path, timeout_ms=600_000))
            assert page.locator("[data-testid=stException]").count() == 0, name
            ctx.close()
        out[name] = (times[0], times[1])
    return out


def _slider_latency(url: str, browser) -> tuple[float, float]:
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = ctx.new_page()
    br.open_page(page, url + "/fairshare", timeout_ms=600_000)
    t0 = time.perf_counter()
    page.get_by_role("button", name="Simulate").click()
    page.get_by_text("Baseline vs scenario", exact=True).wait_for(timeout=900_000)
    br.wait_done(page, 900_000)
    baseline_s = time.perf_counter() - t0
    thumb = page.locator("[data-testid=stSlider] input[type=range]").first
    thumb.focus()
    page.keyboard.press("End")
    t0 = time.perf_counter()
    page.get_by_role("button", name="Simulate").click()
    page.get_by_text(re.compile(r"Scenario:.*shares")).wait_for(timeout=900_000)
    br.wait_done(page, 900_000)
    scenario_s = time.perf_counter() - t0
    ctx.close()
    return baseline_s, scenario_s


def _bare_engine(store, start, end) -> float:
    """One bare engine run of the Fair share page's default replay (the last 7 days of the window, warm-started
    from the logged state there, as ``dashboard.data.sim`` runs it), no dashboard around it."""
    import engine
    from dashboard.whatif.budgets import has_guarantees
    from engine.warm_start import window_filter
    from queries.store import schema
    from queries.store import Store

    s = Store(store)
    lo = end - dt.timedelta(days=7)
    jobs = schema.conform(s.read("jobs").filter(window_filter(lo, end)).sort("submit", "job_id"), "jobs")
    nodes = s.read("nodes")
    budgets_file = REPO / "sample_data" / "budgets.toml"
    tree = None
    if budgets_file.is_file() and Path(store).resolve() == SAMPLE.resolve():
        from engine import budgets

        tree = budgets.load(budgets_file)
    quota = "guarantee" if tree is not None and has_guarantees(tree) else "none"
    cfg = engine.SimConfig(policy="fairshare", backfill="easy", budgets=tree, quota=quota, warm_start=lo, window_end=end)
    t0 = time.perf_counter()
    engine.simulate(jobs, nodes, cfg)
    return time.perf_counter() - t0


def _first_visits(url: str, browser) -> dict[str, float]:
    out = {}
    for name, path in PAGES.items():
        ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
        page = ctx.new_page()
        out[name] = br.open_page(page, url + path, timeout_ms=600_000)
        assert page.locator("[data-testid=stException]").count() == 0, name
        ctx.close()
    return out


def _wait_for_warm_up(log: Path, timeout_s: float = 3600.0, line: str = "quotaloop: warm-up done") -> float:
    t0 = time.perf_counter()
    while line not in log.read_text():
        assert time.perf_counter() - t0 < timeout_s, f"the server never logged {line!r}"
        time.sleep(0.5)
    return time.perf_counter() - t0


def _report(label: str, store: Path, browser) -> None:
    start, end = _window(store)
    server = _page_calls(store)
    bare = {name: (_bare(store, calls), len(calls)) for name, (_, calls) in server.items()}
    env = {"QUOTALOOP_MEMORY_LIMIT": MEMORY}
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"quotaloop-bench-dashboard-{os.getpid()}.log"
    with br.serve(store, auth=_auth(store), extra_env={**env, "QUOTALOOP_WARM": "0"}, timeout_s=300, log=log) as url:
        # cold = no query result cached, the code loaded: the server imports its data layer at start-up (no
        # query), as a server that has been up a while before its first visitor has
        _wait_for_warm_up(log, line="quotaloop: data layer loaded")
        renders = _render_times(url, browser)
        slider = _slider_latency(url, browser) if store.resolve() == SAMPLE.resolve() else None
    log.unlink()
    with br.serve(store, auth=_auth(store), extra_env=env, timeout_s=300, log=log) as url:
        warm_s = _wait_for_warm_up(log)
        warmed = _first_visits(url, browser)
    done = next(line for line in log.read_text().splitlines() if "warm-up done" in line)
    log.unlink()
    print(f"\n== dashboard on {label} ({store}), window {start:%Y-%m-%d} – {end:%Y-%m-%d}, "
          f"DuckDB memory_limit {MEMORY}")
    print(f"{'page':<10} {'cold s':>8} {'2nd visit s':>11} {'warmed s':>9} {'script s':>9} {'bare s':>8} "
          f"{'queries':>7} {'cold/bare':>9}")
    for name, (cold, warm) in renders.items():
        q, n = bare[name]
        ratio = f"{cold / q:9.2f}" if q > 0 else f"{'–':>9}"
        print(f"{name:<10} {cold:8.2f} {warm:11.2f} {warmed[name]:9.2f} {server[name][0]:9.2f} {q:8.2f} {n:7d} "
              f"{ratio}")
    print("cold = first visit in headless Chromium (navigation to fully drawn page) after a server start without "
          "warm-up, so the cache holds only earlier pages' results; 2nd visit = the same page again; warmed = "
          f"first visit after the start-up warm-up finished ({warm_s:.1f} s after the server was up: {done}); "
          "script = the page's server-side run under AppTest with empty caches; bare = the same named queries, "
          "uncached.")
    if slider is not None:
        base_s, scen_s = slider
        engine_s = _bare_engine(store, start, end)
        print(f"simulate (7-day replay): first press {base_s:.2f} s (baseline + scenario runs), slider-to-result "
              f"{scen_s:.2f} s; bare engine.simulate {engine_s:.2f} s per run -> overhead ratio "
              f"{scen_s / engine_s:.2f}x of one run")


def test_dashboard_speed():
    sync_api = pytest.importorskip("playwright.sync_api")
    br.require_chromium()
    if WITH_SAMPLE and not (SAMPLE / "_manifest.json").exists():
        from dashboard.cli.serve import ensure_sample_store

        ensure_sample_store(SAMPLE)
    with sync_api.sync_playwright() as p:
        browser = br.launch(p)
        try:
            if WITH_SAMPLE:
                _report("the sample store", SAMPLE, browser)
            if (BIG / "_manifest.json").exists() or (BIG / "jobs").is_dir():
                _report(f"the big store ({BIG.name})", BIG, browser)
            else:
                print(f"\n(10M-job store not found at {BIG}: run tests/benchmarks/bench_queries.py first to build it)")
        finally:
            browser.close()
