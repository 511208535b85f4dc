"""The start-up warm-up fills the shared caches with exactly what each page's first render needs: after
``data.warm()`` a fresh session renders every default page without running a single query."""
from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import dashboard_fixture as fx
import queries

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
WARMED_PAGES = ["overview", "waste", "layout", "rankings", "my_jobs"]


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    store = fx.build(tmp_path / "store")
    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    calls: list = []
    real = queries.run

    def recording(name, store=None, *, con=None, **params):
        calls.append(name)
        return real(name, store, con=con, **params)

    monkeypatch.setattr(queries, "run", recording)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield calls
    st.cache_data.clear()
    st.cache_resource.clear()


def _first_render(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("page", WARMED_PAGES)
def test_after_the_warm_up_a_first_render_runs_no_query(recorded, page):
    from dashboard import data

    seconds = data.warm()
    assert set(seconds) == set(WARMED_PAGES) and recorded  # it did run the queries
    recorded.clear()
    at = _first_render(page)
    assert recorded == [], f"{page} still ran {recorded}"
    assert at.title and (at.metric or page == "layout")


def test_without_the_warm_up_the_first_render_queries(recorded):
    """The control: a cold first render does query (so the test above can fail)."""
    _first_render("overview")
    assert "overview" in recorded and "gap_area" in recorded


def test_warm_up_on_an_empty_store_does_nothing(tmp_path, monkeypatch):
    from dashboard import data

    monkeypatch.setenv("QUOTALOOP_STORE", str(tmp_path / "empty"))
    assert data.warm() == {}


@pytest.mark.parametrize("restricted", [False, True])
def test_the_overview_prefetch_computes_what_its_first_render_draws(recorded, restricted):
    """``prefetch`` starts the Overview's views in the background: once they are done, a first render runs no
    query. A researcher's render also draws the team ranking: prefetched only for one."""
    from dashboard import data

    opts = data.options()
    futures = data.prefetch("overview", data.window_filters(data.default_window(opts)), restricted=restricted)
    for f in futures:
        f.result()
    assert "overview" in recorded and "gap_area" in recorded
    assert ("team_ranking" in recorded) == restricted
    recorded.clear()
    _first_render("overview")
    assert recorded == [], recorded
