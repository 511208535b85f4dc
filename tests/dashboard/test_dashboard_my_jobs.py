"""My jobs: the admin view opens on a user with jobs in the window; the list ranks by wasted area with units a
researcher types (``--mem`` in GiB per node); the headline cards and "the jobs that drove your score" share one
unit (GPU-equivalent hours). Pure shaping on hand-made frames, the page under AppTest on the dashboard fixture."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

import dashboard_fixture as fx
import queries
from dashboard import shaping
from queries.store import Store

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def test_default_user_prefers_the_viewer_then_the_largest_footprint():
    ranking = pl.DataFrame({"user": ["bo", "al", "cy"], "footprint_gpu_equiv_hours": [5.0, 2.0, 5.0]})
    assert shaping.default_user(ranking, "al") == "al"  # the viewer ran jobs in the window
    assert shaping.default_user(ranking, "zed") == "bo"  # largest footprint, ties by name: bo before cy
    assert shaping.default_user(ranking, None) == "bo"
    assert shaping.default_user(ranking.head(0), "al") is None  # nobody ran anything
    assert shaping.default_user(pl.DataFrame({"user": ["x", "y"], "job_count": [1, 3]}), None) == "y"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The dashboard fixture plus ``aaron``, alphabetically first, whose only job ran 60 days before the window."""
    root = fx.build(tmp_path_factory.mktemp("my_jobs_store"))
    old = fx.jobs_frame().row(0, named=True)
    shift = dt.timedelta(days=60)
    old.update(job_id="old-1", user="aaron", job_name="aaron-old", submit=old["submit"] - shift,
               start=old["start"] - shift, end=old["end"] - shift)
    with Store(root).transaction() as tx:
        tx.upsert("jobs", pl.DataFrame([old], schema=fx.jobs_frame().schema))
    return root


def _app(store, monkeypatch, auth="open"):
    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.setenv("QUOTALOOP_AUTH", auth)
    monkeypatch.setenv("QUOTALOOP_ADMINS", "")
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/my_jobs.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_admin_opens_on_a_user_with_jobs_in_the_window(store, monkeypatch):
    at = _app(store, monkeypatch)
    picked = at.selectbox(key="view_user").value
    assert "aaron" in at.selectbox(key="view_user").options  # still pickable
    # the biggest footprint of the window, computed independently from the fixture: GPU-hours dominate it
    jobs = fx.jobs_frame()
    held = jobs.group_by("user").agg((pl.col("req_gpus") * pl.col("elapsed_s")).sum().alias("gpu_s"))
    assert picked == held.sort("gpu_s", descending=True)["user"][0]
    assert not any("No jobs of" in i.value for i in at.info)
    assert int([m.value for m in at.metric if m.label == "Jobs in window"][0].replace(",", "")) > 0


def test_headline_and_drivers_share_one_unit(store, monkeypatch):
    at = _app(store, monkeypatch)
    at.selectbox(key="view_user").select("erin").run()
    labels = [m.label for m in at.metric]
    assert "Wasted (GPU-eq. h)" in labels and "GPU-hours wasted" not in labels
    wasted = [m.value for m in at.metric if m.label == "Wasted (GPU-eq. h)"][0]
    summary = queries.run("user_summary", store=store, user="erin", start=at.session_state["flt_window"][0],
                          end=at.session_state["flt_window"][1] + dt.timedelta(days=1))
    total = summary["user_wasted_gpu_equiv_hours"][0]
    # the card's compact number is the user's total GPU-eq. waste, of which the drivers table lists shares
    assert float(wasted.replace(",", "").replace(" k", "e3")) == pytest.approx(total, rel=5e-3)
    assert summary["wasted_gpu_equiv_hours"].sum() <= total + 1e-9


def test_low_efficiency_tab_ranks_by_wasted_hours(store, monkeypatch):
    at = _app(store, monkeypatch)
    at.selectbox(key="view_user").select("dave").run()
    tables = [t.value for t in at.dataframe if "wasted_hours" in t.value.columns]
    assert tables, "no low-efficiency table"
    for t in tables:
        wasted = t["wasted_hours"].tolist()
        assert wasted == sorted(wasted, reverse=True)
    text = " ".join(c.value for c in at.caption)
    assert "ranked by the resource-hours wasted" in text and "0.25 GPU-equivalent hours" in text


def test_metric_labels_wrap_on_every_page(store, monkeypatch):
    """A <style> on every page makes metric labels wrap ("GPU occupa…" at 1440 px), with nothing fetched."""
    at = _app(store, monkeypatch)
    styles = [h.proto.body for h in at.get("html")]
    assert any("stMetricLabel" in s and "white-space: normal" in s for s in styles), styles
    assert not any("<script" in s or "http" in s for s in styles)
