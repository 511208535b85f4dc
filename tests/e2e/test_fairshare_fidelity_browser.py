"""The Fair share page carries the fidelity of its baseline (issue 18, "shown where it matters"): after Simulate,
the line "How far to trust this: On the last ... the modeled baseline reproduces logged p90 waits within N %
..., Spearman S ..." renders, deltas inside the baseline's error are marked on their cards (a grey "≈"), and the detail sits in
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
                      r"(reproduces logged p90 waits within|misses logged p90 waits by) \d+ %.*"
                      r"Spearman (-?\d\.\d\d|n/a) over [\d,]+ jobs")


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


def cards(page) -> dict:
    out = {}
    for card in page.locator("[data-testid=stMetric]").all():
        label = card.locator("[data-testid=stMetricLabel]").inner_text().strip()
        delta = card.locator("[data-testid=stMetricDelta]")
        out[label] = delta.inner_text().strip() if delta.count() else ""
    return out


def inside_labels(main: str) -> set[str]:
    """The labels the caption lists as inside the simulator's error ("p90 wait −2 min (error ±14 min); ...")."""
    m = re.search(r"Inside the simulator's error \(read as no change\): (.*?)\.(?: Beyond it:|$)", main, re.S)
    if not m:
        return set()
    return {re.split(r" [+−]", item, maxsplit=1)[0].strip() for item in m.group(1).split("; ")}


def test_the_fidelity_line_renders_on_the_sample_store(sample_store, page, tmp_path):
    with br.serve(sample_store, auth=None, log=tmp_path / "server.log") as url:
        check(simulate_and_read(page, url, shots(tmp_path) / "sample-fairshare-fidelity.png"))
        # a real change: the first share to its maximum; the deltas inside the error are marked on their cards
        thumb = page.locator("[data-testid=stSlider] input[type=range]").first
        thumb.focus()
        page.keyboard.press("End")
        page.wait_for_timeout(300)
        page.get_by_role("button", name="Simulate").click()
        page.get_by_text(re.compile(r"Scenario:.*shares")).wait_for(timeout=300_000)
        br.wait_done(page, 300_000)
        br.screenshot_full(page, shots(tmp_path) / "sample-fairshare-fidelity-changed.png")
        main = page.locator("[data-testid=stMain]").inner_text()
        assert HEADLINE.search(main.replace("\n", " "))
        assert "Inside the simulator's error" in main or "Beyond it:" in main, main[:3000]
        shown = cards(page)
        inside = inside_labels(main) & set(shown)
        assert inside, (main[:3000], shown)
        for label, delta in shown.items():
            assert delta.startswith("≈") == (label in inside), (label, delta, inside)


@pytest.mark.shared_data
def test_the_fidelity_line_renders_on_the_kth_swf_store(kth_store, page, tmp_path):
    with br.serve(kth_store, auth=None, log=tmp_path / "server.log") as url:
        check(simulate_and_read(page, url, shots(tmp_path) / "kth-fairshare-fidelity.png"))
