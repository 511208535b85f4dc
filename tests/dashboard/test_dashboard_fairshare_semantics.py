"""Fair share page semantics, as pure functions (no Streamlit): delta badges point the way the number moved and
are coloured by whether that is good for the metric; "gains / loses" is defined in words and agrees with the
table; the per-team table has human columns; the attainment chart shows percentages."""
from __future__ import annotations

import polars as pl
import pytest

from dashboard import charts, shaping
from dashboard.whatif import frames, runner

# every metric the page can show a badge for: the comparison of every scenario kind (the custom mix included)
ALL_METRICS = sorted({(key, better) for key, _, better in runner.METRICS})


@pytest.mark.parametrize("key, better", ALL_METRICS)
def test_badge_arrow_follows_the_sign_and_colour_the_metric(key, better):
    up, down, zero = (shaping.delta_badge(d, better) for d in (2.5, -2.5, 0.0))
    assert (up["arrow"], down["arrow"], zero["arrow"]) == ("up", "down", "off"), key
    assert zero["color"] == "gray"
    want = {1: ("green", "red"), -1: ("red", "green"), 0: ("gray", "gray")}[better]
    assert (up["color"], down["color"]) == want, key


def test_the_issues_examples():
    # "Worst team's attainment ↑ −2.3 pts" was green: now down and red; lost GPU-hours −1,632: down and green
    better = {k: b for k, _, b in runner.METRICS}
    assert shaping.delta_badge(-0.023, better["attainment.worst"]) == {"arrow": "down", "color": "red"}
    assert shaping.delta_badge(-1632.0, better["lost_gpu_hours"]) == {"arrow": "down", "color": "green"}
    assert shaping.delta_badge(-6.0, better["preemptions"]) == {"arrow": "down", "color": "green"}
    assert shaping.delta_badge(-48 * 60.0, better["wait_s_by_class.training.p90"]) == {"arrow": "down",
                                                                                       "color": "green"}


def test_no_badge_for_missing_or_rounded_away_deltas():
    assert shaping.delta_badge(None, 1) == {"arrow": "off", "color": "gray"}
    assert shaping.delta_badge(float("nan"), -1) == {"arrow": "off", "color": "gray"}
    assert shaping.delta_badge(1e-9, 1, shaping.NO_CHANGE) == {"arrow": "off", "color": "gray"}


def _teams(rows):
    cols = ["node", "verdict", "attainment_baseline", "attainment_scenario", "entitled_baseline_h",
            "entitled_scenario_h", "received_baseline_h", "received_scenario_h", "received_delta_h",
            "p50_wait_s_baseline", "p50_wait_s_scenario", "p90_wait_s_baseline", "p90_wait_s_scenario"]
    return pl.DataFrame([dict(zip(cols, r)) for r in rows])


def test_verdict_notes_explain_attainment_moving_against_the_verdict():
    t = _teams([
        # the issue's case: assistant received fewer GPU-hours, but its entitlement fell further
        ("assistant", "loses", 0.648, 0.882, 500.0, 300.0, 324.0, 264.6, -59.4, 0, 0, 3600.0, 7200.0),
        ("research", "gains", 0.9, 1.1, 1000.0, 1500.0, 900.0, 1650.0, 750.0, 0, 0, 0.0, 0.0),  # agrees
        ("recsys", "gains", 1.2, 1.0, 300.0, 500.0, 360.0, 500.0, 140.0, 0, 0, None, None),
    ])
    notes = runner.verdict_notes(t)
    assert len(notes) == 2
    assert notes[0].startswith("**assistant** loses (59 fewer GPU-hours received) while its attainment rose from "
                               "64.8 % to 88.2 %: its entitlement fell from 500 to 300")
    assert "**recsys** gains" in notes[1] and "attainment fell" in notes[1] and "entitlement rose" in notes[1]
    assert runner.verdict_notes(t, "attainment") == []  # by attainment the verdict and attainment agree
    assert "received more / fewer GPU-hours" in runner.verdict_rule("received")
    assert "attainment" in runner.verdict_rule("attainment") and "percentage points" in runner.verdict_rule(
        "attainment")
    assert runner.verdict_basis("rightsize") == "attainment" and runner.verdict_basis("shares") == "received"
    assert runner.verdict_basis(None) == "received"


def test_team_view_says_baseline_to_scenario_with_units():
    t = _teams([("a", "loses", 0.5, 0.6, 10.0, 8.0, 5.0, 4.0, -1.0, 60.0, 60.0, 14536.5, 7200.0)])
    v = shaping.team_view(t, frames.fmt_duration)
    assert set(shaping.TEAM_SHOWN) <= set(v.columns) and "attainment_scenario" in v.columns
    row = v.row(0, named=True)
    assert row["received"] == "5 → 4 (-1)"
    assert row["attainment"] == "50.0 % → 60.0 %" and row["entitled"] == "10 → 8"
    assert row["p90_wait"] == "4.0 h → 2.0 h"  # a duration, not 14536.5
    assert shaping.team_view(t).row(0, named=True)["p90_wait"] == "4.0 h → 2.0 h"
    from dashboard import ui

    assert set(shaping.TEAM_SHOWN) == set(ui.team_columns())  # every shown column has a human header


def test_attainment_bars_in_percent_with_the_reference_labelled():
    att = pl.DataFrame({"team": ["a", "b"], "baseline": [0.5, 3.3], "scenario": [1.0, 2.0]})
    fig = charts.compare_bars(att, category="team", baseline="baseline", scenario="scenario", unit="attainment",
                              title="t", reference=1.0, percent=True)
    assert fig.layout.yaxis.tickformat == ".0%"
    assert fig.layout.annotations[0].text.startswith("100 %")
    assert "%{y:.1%}" in fig.data[0].hovertemplate


def test_comparison_view_formats_by_kind():
    from dashboard import ui

    cmp = pl.DataFrame({"metric": ["occupancy", "wait_s.p90", "preemptions"],
                        "label": ["Occupancy", "p90 wait", "Preemptions"], "better": [1, -1, -1],
                        "baseline": [0.9123, 14536.5, 10.0], "scenario": [0.95, 7200.0, 4.0],
                        "delta": [0.0377, -7336.5, -6.0]})
    v = shaping.comparison_view(cmp, runner.metric_kind, ui.fmt_kind, ui.fmt_delta)
    rows = {r["label"]: r for r in v.iter_rows(named=True)}
    assert (rows["Occupancy"]["baseline"], rows["Occupancy"]["change"]) == ("91.2 %", "+3.8 pts")
    assert rows["p90 wait"]["baseline"] == "4.0 h" and rows["p90 wait"]["better_when"] == "lower"
    assert rows["Preemptions"]["change"] == "−6"
    assert set(v.columns) <= set(ui.comparison_columns())
