"""End to end: the real ``quotaloop serve`` driven in headless Chromium (Playwright, sync API).

Opens every page (a screenshot of each, kept under ``$QUOTALOOP_ARTIFACTS``, default a tmp dir, printed), moves
a budget slider and runs a simulation, downloads a CSV, proves the trusted-header identity path, and loads the
waste explorer in 20 concurrent sessions. Runs on a small fixture store by default; ``QUOTALOOP_E2E_STORE=sample``
(or a store path) uses another store. The first run on real data (issue 12): ``quotaloop serve --store DIR``
without any auth or config on the HPC2N SWF store and the slurm-jobinfo sacct store (built from ../shared/data,
skipped with the reason when absent): single-operator mode, every page, Fair share simulate on HPC2N.
"""
from __future__ import annotations

import csv
import functools
import io
import os
import re
import sys
import time
from pathlib import Path

import pytest

import dashboard_browser as br
from header_proxy import header_proxy
import dashboard_fixture as fx
import real_stores

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")


@functools.cache
def artifacts() -> Path:
    """Where screenshots and server logs are kept: ``$QUOTALOOP_ARTIFACTS``, else a fresh tmp dir made on first use
    (``say_where_the_artifacts_are`` prints it)."""
    import tempfile

    path = Path(os.environ.get("QUOTALOOP_ARTIFACTS") or tempfile.mkdtemp(prefix="quotaloop-e2e-"))
    path.mkdir(parents=True, exist_ok=True)
    return path
PAGES = {"overview": "/", "waste": "/waste", "layout": "/layout", "rankings": "/rankings",
         "fairshare": "/fairshare", "my_jobs": "/my-jobs", "reports": "/reports"}
TITLES = {"overview": "Cluster overview", "waste": "Waste explorer", "layout": "Cluster layout",
          "rankings": "Rankings & quota loop", "fairshare": "Fair share & budgets", "my_jobs": "My jobs",
          "reports": "Reports"}


def _store(tmp_path_factory) -> Path:
    choice = os.environ.get("QUOTALOOP_E2E_STORE")
    if choice == "sample":
        return br.REPO / "sample_data" / "store"
    if choice:
        return Path(choice)
    return fx.build(tmp_path_factory.mktemp("e2e_store"))


@pytest.fixture(scope="module", autouse=True)
def say_where_the_artifacts_are(request):
    """After the module: one line in pytest's own output (not captured) naming the artifacts directory."""
    yield
    if artifacts.cache_info().currsize:
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\nbrowser test artifacts (screenshots, server logs): {artifacts()}", file=sys.stderr)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    br.require_chromium()
    return _store(tmp_path_factory)


@pytest.fixture(scope="module")
def server(store):
    with br.serve(store, auth="demo", log=artifacts() / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = br.launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1100}, accept_downloads=True)
    pg = ctx.new_page()
    PAGE_ERRORS[id(pg)] = []
    pg.on("pageerror", lambda exc: PAGE_ERRORS[id(pg)].append(str(exc)))
    # a script injected through a job name would show up as a dialog (alert(1))
    pg.on("dialog", lambda d: (PAGE_ERRORS[id(pg)].append(f"dialog: {d.message}"), d.dismiss()))
    yield pg
    ctx.close()


PAGE_ERRORS: dict = {}
OTHERS = re.compile(r"\b(bob|carol|dave|erin)\b")  # the fixture's users other than alice
LOAD_BOUND_S = 480


def _no_app_errors(pg):
    exceptions = pg.locator("[data-testid=stException]")
    assert exceptions.count() == 0, exceptions.first.inner_text()
    assert not PAGE_ERRORS.get(id(pg)), PAGE_ERRORS.get(id(pg))


@pytest.mark.parametrize("name", list(PAGES))
def test_each_page_renders_and_is_screenshotted(server, page, name):
    seconds = br.open_page(page, server + PAGES[name])
    page.wait_for_timeout(800)  # let Plotly finish drawing before the screenshot
    _no_app_errors(page)
    assert page.locator("h1").first.inner_text().strip() == TITLES[name]
    br.screenshot_full(page, artifacts() / f"{name}.png")
    assert seconds < 120


def _metric_values(pg) -> dict:
    out = {}
    for card in pg.locator("[data-testid=stMetric]").all():
        label = card.locator("[data-testid=stMetricLabel]").inner_text().strip()
        value = card.locator("[data-testid=stMetricValue]").inner_text().strip()
        delta = card.locator("[data-testid=stMetricDelta]")
        out[label] = (value, delta.inner_text().strip() if delta.count() else None)
    return out


def test_budget_slider_and_simulation_change_the_comparison(server, page):
    br.open_page(page, server + "/fairshare")
    page.get_by_role("button", name="Simulate").click()
    page.get_by_text("Baseline vs scenario", exact=True).wait_for(timeout=180_000)
    br.wait_done(page, 180_000)
    same = _metric_values(page)
    assert same and all(d in (None, "no change") for _, d in same.values()), same

    thumb = page.locator("[data-testid=stSlider] input[type=range]").first
    before = thumb.input_value()
    thumb.focus()
    page.keyboard.press("End")  # the slider's maximum: triple the largest sibling share
    page.wait_for_timeout(300)
    assert float(thumb.input_value()) > float(before)
    page.get_by_role("button", name="Simulate").click()
    page.get_by_text(re.compile(r"Scenario:.*shares")).wait_for(timeout=180_000)
    br.wait_done(page, 180_000)
    changed = _metric_values(page)
    _no_app_errors(page)
    assert any(d not in (None, "no change") for _, d in changed.values()), changed
    assert page.get_by_text("Why does my team get less?").count() == 1
    br.screenshot_full(page, artifacts() / "fairshare_simulated.png")


def test_csv_download_from_the_waste_explorer(server, page, store):
    br.open_page(page, server + "/waste")
    with page.expect_download(timeout=60_000) as info:
        page.locator("[data-testid=stDownloadButton] button").first.click()
    download = info.value
    body = Path(download.path()).read_text()
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0][:2] == ["team", "jobs"] and len(rows) > 1
    assert download.suggested_filename.endswith(".csv")
    if os.environ.get("QUOTALOOP_E2E_STORE"):
        return
    # the fixture's teams, with job counts that add up to the fixture's jobs
    assert sorted(r[0] for r in rows[1:]) == ["lab/nlp/llm", "lab/vision/detect", "lab/vision/seg"]
    assert sum(int(r[1]) for r in rows[1:]) == fx.jobs_frame().height


def test_twenty_concurrent_sessions_on_the_waste_explorer(server, browser):
    """20 tabs, each its own Streamlit session (own websocket), opened at once after one warm-up visit.

    The bound is generous: on 2 cores most of the time is Chromium drawing 20 copies of the page (about 5 s of
    browser CPU per page load against ~0.3 s on the server with warm caches); the point is no errors."""
    br.open_page(browser.new_page(), server + "/waste")  # warm the caches once, as a first visitor would
    ctx = browser.new_context(viewport={"width": 1000, "height": 700})
    pages, errors = [], []
    t0 = time.perf_counter()
    try:
        for _ in range(20):
            pg = ctx.new_page()
            pg.on("pageerror", lambda exc: errors.append(str(exc)))
            pg.goto(server + "/waste", wait_until="commit")
            pages.append(pg)
        for pg in pages:
            pg.wait_for_selector("[data-testid=stMetric]", timeout=LOAD_BOUND_S * 1000)
            br.wait_done(pg, LOAD_BOUND_S * 1000)
        elapsed = time.perf_counter() - t0
        for pg in pages:
            assert pg.locator("[data-testid=stException]").count() == 0
            assert pg.locator("h1").first.inner_text().strip() == "Waste explorer"
            assert "Wasted GPU-hours" in pg.locator("[data-testid=stMetric]").all_inner_texts()[2]
        assert not errors, errors
        assert elapsed < LOAD_BOUND_S
        print(f"\n20 concurrent waste-explorer sessions rendered in {elapsed:.1f} s")
    finally:
        ctx.close()


def test_trusted_header_identity_shows_only_that_users_jobs(store, browser):
    if os.environ.get("QUOTALOOP_E2E_STORE"):
        pytest.skip("uses the fixture store's users")
    with (br.serve(store, auth="header", extra_env={"QUOTALOOP_AUTH_HEADER": "X-Forwarded-User"}) as server_url,
          header_proxy(server_url, "X-Forwarded-User", "alice") as url):  # the trusted proxy in front of it
        ctx = browser.new_context()
        pg = ctx.new_page()
        br.open_page(pg, url + "/my-jobs?user=bob&view_user=bob")
        text = pg.locator("[data-testid=stMain]").inner_text()
        assert "All of alice's jobs" in text and "bob" not in text
        assert pg.locator("[data-testid=stSelectbox]").filter(has_text="view the page").count() == 0
        with pg.expect_download(timeout=60_000) as info:
            pg.locator("[data-testid=stDownloadButton] button").last.click()
        rows = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text())))
        assert rows and {r["user"] for r in rows} == {"alice"}
        assert {r["job_id"] for r in rows} == set(fx.jobs_frame().filter(fx.pl.col("user") == "alice")["job_id"])
        # every page, with the URL asking for bob: no other user's name anywhere in the drawn page (text, tables,
        # the SVG of every chart), and alice's own figures are there
        for name, path in PAGES.items():
            br.open_page(pg, url + path + "?user=bob&view_user=bob&demo_as=bob&w_by=user")
            pg.wait_for_timeout(500)
            _no_app_errors(pg)
            html = pg.content()
            assert not OTHERS.findall(html), (name, sorted(set(OTHERS.findall(html))))
        br.open_page(pg, url + "/waste")
        pg.locator("[data-testid=stButtonGroup] button", has_text=re.compile(r"^User$")).click()
        br.wait_done(pg)
        pg.wait_for_timeout(800)
        legend = pg.locator("[data-testid=stPlotlyChart] .legend").first.text_content()
        assert "alice" in legend and "4 other users" in legend and not OTHERS.findall(legend)
        br.screenshot_full(pg, artifacts() / "waste_as_researcher.png")
        ctx.close()
        anon = browser.new_context()  # past the proxy, straight to the server: no header
        pg = anon.new_page()
        br.open_page(pg, server_url + "/my-jobs")
        assert "did not identify you" in pg.locator("[data-testid=stMain]").inner_text()
        anon.close()


def test_demo_view_as_a_researcher_in_the_browser(server, page):
    """The demo's "View as" picker applies the researcher rule across pages of one session."""
    if os.environ.get("QUOTALOOP_E2E_STORE"):
        pytest.skip("uses the fixture store's users")
    br.open_page(page, server + "/rankings")
    assert page.get_by_text("Largest waster").count() == 1  # the platform view
    page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(has_text="View as").click()
    page.get_by_role("option", name="Researcher alice").click()
    br.wait_done(page)
    page.get_by_text("Your rank by wasted GPU-hours").wait_for(timeout=60_000)
    page.wait_for_timeout(800)
    main = page.locator("[data-testid=stMain]")
    assert not OTHERS.findall(main.inner_html())
    br.screenshot_full(page, artifacts() / "rankings_as_researcher.png")
    page.locator("[data-testid=stSidebarNav] a", has_text="Overview").click()
    page.get_by_text("Biggest GPU wasters (teams)").wait_for(timeout=60_000)
    br.wait_done(page)
    page.wait_for_timeout(800)
    _no_app_errors(page)
    assert not OTHERS.findall(page.locator("[data-testid=stMain]").inner_html())
    br.screenshot_full(page, artifacts() / "overview_as_researcher.png")


def test_report_built_and_downloaded_from_the_reports_page(server, page):
    br.open_page(page, server + "/reports")
    page.get_by_role("button", name="Build report").click()
    page.get_by_text(re.compile(r"Report built: \d+ file")).wait_for(timeout=180_000)
    br.wait_done(page)
    _no_app_errors(page)
    command = page.locator("[data-testid=stCode]").inner_text()
    assert command.startswith("quotaloop report --store") and "--audience platform" in command
    with page.expect_download(timeout=60_000) as info:
        page.locator("[data-testid=stDownloadButton] button", has_text=".html").click()
    name = info.value.suggested_filename
    assert re.fullmatch(r"quotaloop-report-\d{4}-\d\d-\d\d_\d{4}-\d\d-\d\d\.html", name), name
    body = Path(info.value.path()).read_text()
    assert body.lstrip().lower().startswith("<!doctype html") and "Plotly.newPlot" in body
    br.screenshot_full(page, artifacts() / "reports_built.png")


def test_a_hostile_job_name_stays_text_in_the_browser(server, page):
    """erin's job ``<script>alert(1)</script>``: her page, every chart hovered point by point, no dialog."""
    if os.environ.get("QUOTALOOP_E2E_STORE"):
        pytest.skip("uses the fixture store's hostile job")
    br.open_page(page, server + "/my-jobs")
    page.locator("[data-testid=stSelectbox]").filter(has_text="open the page of").click()
    page.get_by_role("option", name="erin", exact=True).click()
    page.get_by_text("All of erin's jobs in the window").wait_for(timeout=60_000)
    br.wait_done(page)
    page.wait_for_timeout(800)
    points = page.locator("[data-testid=stPlotlyChart] .scatterlayer .point")
    assert points.count() > 10
    shown = set()
    for i in range(points.count()):
        points.nth(i).hover(force=True)
        shown.update(page.locator(".hoverlayer").all_text_contents())
    _no_app_errors(page)
    assert any(t.startswith("erin-") for t in shown), shown  # hover labels were drawn
    assert page.locator("script", has_text="alert(1)").count() == 0
    # what Plotly holds for the point: the name escaped, so its hover label draws it as literal text
    texts = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].flatMap("
                          "gd => (gd.data || []).flatMap(tr => tr.text || []))")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in texts and "<script>alert(1)</script>" not in texts


def test_the_server_warms_every_page_at_start_up(server):
    """``dashboard.server`` runs the warm-up in the real server process and logs one line when done."""
    log = artifacts() / "server.log"
    deadline = time.monotonic() + 120
    while "quotaloop: warm-up done" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.5)
    text = log.read_text()
    line = next(x for x in text.splitlines() if "warm-up done" in x)
    assert all(f"{p} " in line for p in ("overview", "waste", "layout", "rankings", "my_jobs")), line
    assert "warm-up of" not in text and "warm-up failed" not in text and "Traceback" not in text


# ------------------------------------------------------------------ first run on real exports (issue 12)
REAL_STORES = ["hpc2n", "sacct-jobinfo"]


@pytest.fixture(scope="module", params=REAL_STORES)
def real_server(request, shared_data, tmp_path_factory):
    """``quotaloop serve --store DIR`` on a real store, with no --auth, no config, no QUOTALOOP_AUTH."""
    br.require_chromium()
    store = real_stores.build(request.param, shared_data, tmp_path_factory.mktemp(f"e2e-{request.param}"))
    log = artifacts() / f"server-{request.param}.log"
    with br.serve(store, auth=None, log=log) as url:
        yield request.param, url, log


@pytest.mark.shared_data
@pytest.mark.parametrize("name", list(PAGES))
def test_first_run_on_a_real_store_every_page(real_server, page, name):
    store, url, log = real_server
    br.open_page(page, url + PAGES[name])
    page.wait_for_timeout(800)
    _no_app_errors(page)
    assert page.locator("h1").first.inner_text().strip() == TITLES[name]
    main = page.locator("[data-testid=stMain]").inner_text()
    assert "Single-operator mode" in main and "Sign in to see" not in main and "not signed in" not in main
    assert "auth operator" in log.read_text()  # what serve chose, on its start-up line
    br.screenshot_full(page, artifacts() / f"real-{store}-{name}.png")


@pytest.mark.shared_data
def test_fair_share_simulate_on_hpc2n(real_server, page):
    store, url, _ = real_server
    if store != "hpc2n":
        pytest.skip("the simulate step runs on HPC2N only")
    br.open_page(page, url + "/fairshare")
    page.get_by_role("button", name="Simulate").click()
    try:
        page.get_by_text("Baseline vs scenario", exact=True).wait_for(timeout=300_000)
    finally:
        br.wait_done(page, 300_000)
        br.screenshot_full(page, artifacts() / "real-hpc2n-fairshare-simulated.png")
    _no_app_errors(page)
    assert _metric_values(page)
    main = page.locator("[data-testid=stMain]").inner_text()
    # compared in the cluster's own resource, not the old dead end "Cannot compare the runs: ... no GPUs"
    assert "core-hours" in main and "Cannot compare the runs" not in main
