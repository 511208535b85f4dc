"""Each audience's exported HTML opened from disk in headless Chromium: the charts render, nothing is fetched
from the network, nothing logs an error, and hostile names from the logs stay inert text."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_report_support import BREAKOUT_NAME, EVIL_USER, XSS_NAME, built_reports, figures

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]

if not CHROMIUM.exists() and os.environ.get("CI") != "true":
    pytest.skip(f"{CHROMIUM} is missing (scripts/test installs Debian's chromium); report browser checks skipped",
                allow_module_level=True)
sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return built_reports(tmp_path_factory.getbasetemp())


@pytest.mark.parametrize("audience", ["platform", "manager", "user"])
def test_report_renders_offline_without_errors(browser, reports, audience):
    [html] = [p for p in reports[audience] if p.suffix == ".html"]
    url = html.resolve().as_uri()
    expected = len(figures(html.read_text()))
    assert expected >= 4
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, requests, dialogs = [], [], []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url, wait_until="load")
    page.wait_for_function(f"document.querySelectorAll('div.plotly-graph-div svg.main-svg').length >= {expected}",
                           timeout=30_000)
    rendered = page.evaluate("""() => Array.from(document.querySelectorAll('div.plotly-graph-div')).map(
        d => ({id: d.id, svgs: d.querySelectorAll('svg').length,
               marks: d.querySelectorAll('.trace, .point, path.point, .bars path').length}))""")
    assert len(rendered) == expected
    assert all(r["svgs"] > 0 and r["marks"] > 0 for r in rendered), rendered
    page.wait_for_timeout(300)
    assert requests == [url], requests  # the file itself, nothing else: plotly.js is inline
    assert errors == [] and dialogs == []
    # hostile values came through as text, not markup
    assert page.locator("img").count() == 0
    assert page.evaluate("() => document.querySelectorAll('script').length") == 1 + expected
    if audience == "user":
        cells = page.locator("table[data-table=low_efficiency_jobs] td[data-col=job_name]").all_inner_texts()
        assert XSS_NAME in cells and BREAKOUT_NAME in cells
    if audience == "platform":
        assert EVIL_USER in page.locator("table[data-table=user_ranking]").inner_text()
        ticks = page.locator("#fig-top_wasters .ytick text").all_text_contents()
        assert EVIL_USER in ticks  # Plotly drew the escaped label literally
    page.close()
