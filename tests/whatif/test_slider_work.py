"""A slider press does only the scenario's work (issue 16, "sliders at scale"): with the window's baseline kept,
its replay, its measures (attainment, queueing, waits per bucket) and its explanation are not recomputed, the store
is not read again, and the result is the same as computing everything afresh. Counted, not timed: the runner's
and the page's calls of the engine, of ``attainment_of`` and of the loader are wrapped in counters."""
from __future__ import annotations

import collections
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

import dashboard_fixture as fx
import engine
from dashboard.whatif import loader, runner
from dashboard.whatif.spec import ScenarioSpec
from queries.analytics import budgets as qb
from test_scenarios import contention, inputs

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def counting(monkeypatch, calls: collections.Counter, module, name: str, label: str | None = None) -> None:
    real = getattr(module, name)

    def wrapped(*args, **kwargs):
        calls[label or name] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, wrapped)


def test_kept_measures_measure_only_the_scenario(monkeypatch, tmp_path):
    inp = inputs(contention(6), end=24.0)
    spec = ScenarioSpec.make("shares", shares={"lab/a": 3})
    fresh = runner.run(spec, inp)
    base = runner.baseline(ScenarioSpec.make("shares"), inp)
    measured = runner.measure_baseline(ScenarioSpec.make("shares"), inp, base)
    calls = collections.Counter()
    for name in ("attainment_of", "usage_metrics", "_waits_by_bucket"):
        counting(monkeypatch, calls, runner, name)
    counting(monkeypatch, calls, engine, "simulate")
    kept = runner.run(spec, inp, baseline=base, measured=measured)
    # the scenario alone: one replay, one attainment, one queueing measure, one wait table
    assert calls == {"simulate": 1, "attainment_of": 1, "usage_metrics": 1, "_waits_by_bucket": 1}
    calls.clear()
    runner.run(spec, inp, baseline=base)  # the baseline kept without its measures: both runs measured
    assert calls == {"simulate": 1, "attainment_of": 2, "usage_metrics": 2, "_waits_by_bucket": 2}
    calls.clear()
    runner.run(spec, inp, measured=measured)  # measures without their baseline are ignored: it is replayed
    assert calls == {"simulate": 2, "attainment_of": 2, "usage_metrics": 2, "_waits_by_bucket": 2}
    a, b = fresh.write(tmp_path / "fresh"), kept.write(tmp_path / "kept")
    for f in ("comparison.csv", "teams.csv", "scenario.json", "baseline/jobs.parquet", "scenario/jobs.parquet"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert fresh.comparison["delta"].abs().max() > 0  # the shares moved something: not a trivial equality


def test_a_scenario_equal_to_its_baseline_is_measured_once(monkeypatch):
    inp = inputs(contention(4), end=24.0)
    calls = collections.Counter()
    counting(monkeypatch, calls, runner, "attainment_of")
    res = runner.run(ScenarioSpec.make("shares"), inp)
    assert res.scenario is res.baseline and calls["attainment_of"] == 1
    assert (res.comparison["delta"].fill_null(0.0) == 0).all()


@pytest.fixture
def page(tmp_path, monkeypatch):
    store = fx.build(tmp_path / "store")  # a store of its own: no other test's cached runs
    monkeypatch.setenv("QUOTALOOP_STORE", str(store))
    monkeypatch.setenv("QUOTALOOP_AUTH", "open")
    monkeypatch.setenv("QUOTALOOP_ADMINS", "")
    monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/fairshare.py").run()
    return at


def test_a_slider_press_replays_and_measures_only_the_scenario(page, monkeypatch):
    # AppTest runs the page in this process: the counters see every call the page's what-if path makes
    from dashboard.data import sim

    calls = collections.Counter()
    counting(monkeypatch, calls, engine, "simulate")
    counting(monkeypatch, calls, runner, "attainment_of", "runner attainment_of")
    counting(monkeypatch, calls, qb, "attainment_of", "explain attainment_of")  # sim._explain's qb.attainment_of
    counting(monkeypatch, calls, loader, "load")
    counting(monkeypatch, calls, loader, "layout_inferred")
    at = page
    slider = at.slider(key="share_lab/vision")
    first_share = round(slider.value * 3, 1)
    slider.set_value(first_share)
    at.button(key="fs_simulate").click().run()
    assert not at.exception and not at.error
    # first press: baseline and scenario replayed and measured, both explained (the window's inputs were read
    # when the page opened: its contract sliders show the logged contracts)
    assert calls["simulate"] == 2 and calls["load"] <= 1 and calls["layout_inferred"] == 1
    assert calls["runner attainment_of"] == 2 and calls["explain attainment_of"] == 2
    calls.clear()
    at.slider(key="share_lab/vision").set_value(round(first_share / 6, 1))
    at.button(key="fs_simulate").click().run()
    assert not at.exception and not at.error
    flt, spec = at.session_state["last_scenario"]
    assert "vision=" in spec.describe()
    # a slider press: the scenario alone is replayed, measured and explained; nothing is read from the store
    assert calls == {"simulate": 1, "runner attainment_of": 1, "explain attainment_of": 1}, calls
    # and it equals the same scenario computed afresh, baseline included
    key = (str(sim.store_dir()), sim.store_token(), flt.start, flt.end, sim.sim_cluster(flt))
    shown = sim.run_scenario(flt, spec)
    fresh = runner.run(spec, sim._named_inputs(*key))
    assert shown.comparison.equals(fresh.comparison, null_equal=True)
    assert shown.teams.equals(fresh.teams, null_equal=True)
    assert shown.scenario.jobs.equals(fresh.scenario.jobs, null_equal=True)
    assert shown.teams.filter(pl.col("verdict") != "same").height > 0  # the shares moved someone
