"""The Fair share page carries the fidelity of its baseline (issue 18, "shown where it matters"): after Simulate,
the line "How far to trust this: On the last ... the modeled baseline reproduces logged p90 waits within N %
..., Spearman S ..." renders, deltas inside the baseline's error are marked on their cards, and the detail sits in
an expander. On the sample store and on the real KTH-SP2 SWF log (100 single-processor nodes, ingested here with
``procs_per_node=1`` so the page has a node list to replay on; skipped with the reason when ../shared/data is
absent)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import dashboard_browser as br
from queries.ingest import ingest

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")

HEADLINE = re.compile(r"How far to trust this: On the last (\d+ (days|weeks|day)|\d+ hours) the modeled baseline "
                      r"reproduces logged p90 waits within \d+ %.*Spearman (-?\d\.\d\d|n/a) over [\d,]+ jobs")


@pytest.fixture(scope="module")
def browser():
    br.require_chromium()
    with sync_api.sync_playwright() as p:
        b = br.launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1500, "height": 1100})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors
    yield pg
    ctx.close()


@pytest.fixture(scope="module")
def kth_store(shared_data, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("kth-nodes") / "store"
    ingest([shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"], store, procs_per_node=1)
    return store


def shots(tmp_path: Path) -> Path:
    """Where the screenshots go: ``$QUOTALOOP_ARTIFACTS`` (as the other browser tests), else the test's tmp dir."""
    path = Path(os.environ.get("QUOTALOOP_ARTIFACTS") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def simulate_and_read(page, url: str, shot: Path) -> str:
    br.open_page(page, url + "/fairshare")
    page.get_by_role("button", name="Simulate").click()
    try:
        page.get_by_text("Baseline vs scenario", exact=True).wait_for(timeout=300_000)
    finally:
        br.wait_done(page, 300_000)
        br.screenshot_full(page, shot)
    assert page.locator("[data-testid=stException]").count() == 0
    assert not page.errors, page.errors
    return page.locator("[data-testid=stMain]").inner_text()


def check(main: str) -> None:
    assert HEADLINE.search(main.replace("\n", " ")), main[:3000]
    # the unchanged scenario: every validated figure reads "No validated figure changed"; the detail expander
    assert "No validated figure changed." in main
    assert "How far to trust the comparison: the baseline against the log" in main
    assert "Fidelity of the baseline not measured" not in main


def test_the_fidelity_line_renders_on_the_sample_store(sample_store, page, tmp_path):
    with br.serve(sample_store, auth=None, log=tmp_path / "server.log") as url:
        check(simulate_and_read(page, url, shots(tmp_path) / "sample-fairshare-fidelity.png"))


@pytest.mark.shared_data
def test_the_fidelity_line_renders_on_the_kth_swf_store(kth_store, page, tmp_path):
    with br.serve(kth_store, auth=None, log=tmp_path / "server.log") as url:
        check(simulate_and_read(page, url, shots(tmp_path) / "kth-fairshare-fidelity.png"))
