"""Chart builders: titles and unit-bearing axes, captions, and the plotted numbers equal the input's."""
from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go
import polars as pl
import pytest

from dashboard import charts

T0 = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)


def _title(fig: go.Figure) -> str:
    return fig.layout.title.text or ""


def _gap_frame() -> pl.DataFrame:
    rows = []
    # three teams, two buckets; hand-made numbers (GPUs held on average / GPUs busy)
    for team, req, used in [("vision", 10, 4), ("nlp", 6, 6), ("speech", 3, 1)]:
        for b in range(2):
            rows.append(dict(t=T0 + dt.timedelta(hours=b), team=team, req=float(req + b), used=float(used)))
    return pl.DataFrame(rows)


def test_gap_area_stack_tops_out_at_requested_and_shades_the_gap():
    fig = charts.gap_area(_gap_frame(), t="t", requested="req", used="used", group="team", unit="GPUs")
    assert "Requested vs used GPUs" in _title(fig) and "by team" in _title(fig)
    assert "GPUs" in fig.layout.yaxis.title.text and "UTC" in fig.layout.xaxis.title.text
    # order: biggest waster first (vision 6+7=13, speech 2+3=5, nlp 0+1=1)
    names = [tr.name for tr in fig.data]
    assert names[:2] == ["vision", "vision held, unused"] and names[2].startswith("speech")
    assert [tr.showlegend for tr in fig.data[:2]] == [None, False]  # one legend entry per team
    # stacked sum at each bucket equals the total request (no group over-uses here)
    tops = [sum(tr.y[b] for tr in fig.data) for b in range(2)]
    assert tops == [19.0, 22.0]
    gaps = {tr.name: list(tr.y) for tr in fig.data if tr.name.endswith("unused")}
    assert gaps["vision held, unused"] == [6.0, 7.0] and gaps["nlp held, unused"] == [0.0, 1.0]
    assert all(tr.fillpattern.shape == "/" for tr in fig.data if tr.name.endswith("unused"))


def test_gap_area_folds_small_groups_into_other_and_clips_overuse():
    df = _gap_frame().with_columns(pl.when(pl.col("team") == "nlp").then(pl.col("used") + 5)
                                   .otherwise(pl.col("used")).alias("used"))
    fig = charts.gap_area(df, t="t", requested="req", used="used", group="team", unit="GPUs", top_n=1)
    names = [tr.name for tr in fig.data]
    assert names == ["vision", "vision held, unused", "other", "other held, unused"]
    other_gap = list(fig.data[3].y)
    # speech gap 2, 3; nlp overuses (gap -5, -4) and is clipped to 0 *before* folding
    assert other_gap == [2.0, 3.0]


def test_gap_area_keeps_unknown_usage_out_of_the_waste():
    # vision holds 10 / 11 GPUs, uses 4, and 3 of the held GPUs belong to jobs without usage data
    df = _gap_frame().with_columns(pl.when(pl.col("team") == "vision").then(3.0).otherwise(0.0).alias("unk"))
    fig = charts.gap_area(df, t="t", requested="req", used="used", group="team", unit="GPUs", unknown="unk")
    by = {tr.name: list(tr.y) for tr in fig.data}
    assert by["vision held, unused"] == [3.0, 4.0]          # 10 - 3 - 4, 11 - 3 - 4: not 6, 7
    assert by["held, usage unknown"] == [3.0, 3.0]          # one grey band, summed over groups
    assert by["vision"] == [4.0, 4.0] and by["nlp held, unused"] == [0.0, 1.0]
    assert [sum(tr.y[b] for tr in fig.data) for b in range(2)] == [19.0, 22.0]  # still tops out at requested
    # ordering by waste uses the known gap: vision 7, speech 5, nlp 1
    assert [tr.name for tr in fig.data][:4] == ["vision", "vision held, unused", "speech", "speech held, unused"]
    # no unknown usage: no grey band
    plain = charts.gap_area(df.with_columns(pl.lit(0.0).alias("unk")), t="t", requested="req", used="used",
                            group="team", unit="GPUs", unknown="unk")
    assert "held, usage unknown" not in [tr.name for tr in plain.data]


def test_normalise_gap_carries_unknown_usage():
    from dashboard import shaping

    raw = pl.DataFrame({"bucket_start": [T0, T0], "group_key": ["a", "b"], "resource": ["gpu", "gpu"],
                        "requested_level": [8.0, 2.0], "used_level": [3.0, None], "unknown_usage_level": [2.0, None]})
    got = shaping.normalise_gap(raw, "gpu", "team")
    assert got.select("group", "requested", "used", "unknown").rows() == [("a", 8.0, 3.0, 2.0), ("b", 2.0, 0.0, 0.0)]


def test_cluster_wide_gap_area_and_empty_frame_message():
    df = _gap_frame().group_by("t").agg(pl.col("req").sum(), pl.col("used").sum())
    fig = charts.gap_area(df, t="t", requested="req", used="used", unit="CPU cores")
    assert "cluster-wide" in _title(fig) and len(fig.data) == 2
    empty = charts.gap_area(df.head(0), t="t", requested="req", used="used", unit="GPUs")
    assert "No jobs match" in empty.layout.annotations[0].text and not empty.data


def test_ranked_bars_order_colour_and_escaping():
    df = pl.DataFrame({"user": ["a", "<b>x</b>", "c"], "w": [5.0, 50.0, 20.0], "eff": [0.9, 0.1, None]})
    fig = charts.ranked_bars(df, name="user", value="w", unit="GPU-hours", efficiency="eff", top_n=2)
    bar = fig.data[0]
    assert list(bar.y) == ["&lt;b&gt;x&lt;/b&gt;", "c"] and list(bar.x) == [50.0, 20.0]
    assert list(bar.marker.color) == [charts.efficiency_color(0.1), charts.UNKNOWN]
    assert charts.efficiency_color(0.0) == charts.efficiency_color(-1) != charts.efficiency_color(1.0)
    assert fig.layout.xaxis.title.text == "GPU-hours"


def test_occupancy_vs_utilisation_traces():
    df = pl.DataFrame({"t": [T0, T0 + dt.timedelta(hours=1)], "cap": [32.0, 32.0], "alloc": [30.0, 20.0],
                       "used": [12.0, 15.0]})
    fig = charts.occupancy_vs_utilisation(df, t="t", capacity="cap", allocated="alloc", used="used")
    by_name = {tr.name: list(tr.y) for tr in fig.data}
    assert by_name == {"allocated": [30.0, 20.0], "busy (used)": [12.0, 15.0], "capacity": [32.0, 32.0]}
    assert "GPUs" in fig.layout.yaxis.title.text


def test_pyramid_shows_unknown_levels():
    fig = charts.pyramid([("availability", None), ("occupancy", 0.9), ("impact", 0.5), ("utilisation", 0.25)])
    assert list(fig.data[0].text) == ["unknown", "90.0 %", "50.0 %", "25.0 %"]
    assert "%" in fig.layout.xaxis.title.text


def test_compare_bars_baseline_and_scenario():
    df = pl.DataFrame({"team": ["a", "b"], "base": [0.8, 1.0], "scen": [0.95, 0.9]})
    fig = charts.compare_bars(df, category="team", baseline="base", scenario="scen", unit="attainment",
                              title="Attainment per team", reference=1.0)
    assert [tr.name.split(" ")[0] for tr in fig.data] == ["baseline", "scenario"]
    assert list(fig.data[1].y) == [0.95, 0.9]


def test_node_heatmap_codes_each_slot():
    df = pl.DataFrame({"node": ["n10", "n10", "n2", "n2"], "slot": [0, 1, 0, 1],
                       "state": ["busy", "stranded free", "free", "allocated, idle"], "job": ["j1", None, None, "j2"]})
    fig = charts.node_heatmap(df, node="node", slot="slot", state="state", hover="job")
    hm = fig.data[0]
    assert list(hm.y) == ["n2", "n10"]  # natural order
    code = {s: i for i, s in enumerate(charts.SLOT_STATES)}
    assert [list(r) for r in hm.z] == [[code["free"], code["allocated, idle"]], [code["busy"], code["stranded free"]]]


def test_node_heatmap_turns_a_large_cluster_on_its_side():
    n = charts.WIDE_GRID_NODES + 1
    df = pl.DataFrame({"node": [f"n{i}" for i in range(n) for _ in range(2)], "slot": [0, 1] * n,
                       "state": ["busy", "free"] * (n - 1) + ["down", "down"], "job": [None] * (2 * n)})
    fig = charts.node_heatmap(df, node="node", slot="slot", state="state", hover="job")
    panels = [tr for tr in fig.data if tr.type == "heatmap"]
    # wrapped into panels of PANEL_NODES nodes, every node labelled (no label dropped), in natural order
    assert len(panels) == -(-n // charts.PANEL_NODES) == 2
    assert [x for hm in panels for x in hm.x] == [f"n{i}" for i in range(n)]
    assert all(list(hm.y) == ["GPU 0", "GPU 1"] for hm in panels)
    assert list(fig.layout.xaxis.tickvals) == [f"n{i}" for i in range(charts.PANEL_NODES)]
    assert fig.layout.xaxis.tickfont.size >= 10
    code = {s: i for i, s in enumerate(charts.SLOT_STATES)}
    first, last = panels[0], panels[-1]
    assert len(first.z) == 2 and len(first.z[0]) == charts.PANEL_NODES
    assert first.z[0][0] == code["busy"] and first.z[1][0] == code["free"]
    assert last.z[0][-1] == last.z[1][-1] == code["down"]
    assert fig.layout.height < 2 * 400  # a few panels, not one row per node


def test_gantt_one_bar_per_job_with_duration():
    df = pl.DataFrame({"node": ["n1", "n2"], "start": [T0, T0], "end": [T0 + dt.timedelta(hours=2), T0 + dt.timedelta(minutes=30)],
                       "team": ["x", "y"], "job": ["j1", "j2"]})
    fig = charts.gantt(df, node="node", start="start", end="end", color_by="team", hover="job")
    durations = sorted(v for tr in fig.data for v in tr.x)
    assert durations == [30 * 60 * 1000, 2 * 3600 * 1000]
    assert list(fig.layout.yaxis.tickvals) == ["n1", "n2"] and fig.layout.yaxis.tickfont.size >= 10


def test_pyramid_ticks_reach_100():
    fig = charts.pyramid([("availability", 1.0), ("occupancy", 0.9)])
    assert list(fig.layout.xaxis.tickvals)[-1] == 100 and fig.layout.xaxis.range[1] >= 100


def test_team_colours_are_one_map_for_every_chart():
    accounts = ["acme/research/rl", "acme/research/vision", "acme/product/ads"]
    colours = charts.team_colors(accounts)
    # leaves first, sorted, then the inner accounts: all distinct
    assert list(colours)[:3] == ["acme/product/ads", "acme/research/rl", "acme/research/vision"]
    assert len(set(colours.values())) == len(colours) == 6
    # a chart showing a subset keeps each team's colour (colors_for would renumber them)
    df = pl.DataFrame({"node": ["n1"], "start": [T0], "end": [T0 + dt.timedelta(hours=1)],
                       "team": ["acme/research/vision"], "job": ["j"]})
    fig = charts.gantt(df, node="node", start="start", end="end", color_by="team", hover="job", colors=colours)
    assert fig.data[0].marker.color == colours["acme/research/vision"] != charts.PALETTE[0]
    mixed = charts.fixed_colors(colours, ["acme/research/rl", "(none)"])
    assert mixed["acme/research/rl"] == colours["acme/research/rl"] and mixed["(none)"] != mixed["acme/research/rl"]


@pytest.mark.parametrize("name", ["occupancy_vs_utilisation", "pyramid", "waste_trend", "gap_area", "ranked_bars",
                                  "score_scatter", "coefficient_series", "compare_bars", "node_heatmap", "gantt",
                                  "waste_scatter"])
def test_every_builder_has_a_caption(name):
    assert hasattr(charts, name) and len(charts.CAPTIONS[name]) > 30


def test_colours_are_distinct_within_a_chart_and_stable():
    names = [f"team{i}" for i in range(20)]
    colours = charts.colors_for(names)
    assert len(set(colours.values())) == 20
    assert charts.colors_for(names) == colours
    assert charts.colors_for(["b", "a"]) == {"b": charts.PALETTE[0], "a": charts.PALETTE[1]}


def test_waste_scatter_of_jobs_without_usage_says_so():
    """An SWF log or a bare sacct dump: requests known, waste unknown (null). A dotless chart would read as
    "no waste"; the chart says the usage is not recorded instead."""
    df = pl.DataFrame({"req": [1.0, 2.0], "wasted": [None, None], "job_name": ["a", "b"]},
                      schema_overrides={"wasted": pl.Float64})
    fig = charts.waste_scatter(df, requested="req", wasted="wasted", hover="job_name", unit="core-hours")
    assert not fig.data and "No usage recorded" in fig.layout.annotations[0].text
    some = df.with_columns(pl.Series("wasted", [None, 0.5]))
    fig = charts.waste_scatter(some, requested="req", wasted="wasted", hover="job_name", unit="core-hours")
    assert list(fig.data[0].y) == [None, 0.5]


def test_waste_scatter_of_jobs_that_requested_none_of_the_resource_says_so():
    """CPU-only jobs on the GPU-hours view (a researcher on a GPU cluster with one CPU job): not a dot at the
    origin on axes labelled in nano-units."""
    df = pl.DataFrame({"req": [0.0, None], "wasted": [0.0, None], "job_name": ["a", "b"]})
    fig = charts.waste_scatter(df, requested="req", wasted="wasted", hover="job_name", unit="GPU-hours")
    assert not fig.data and "requested any GPU-hours" in fig.layout.annotations[0].text
    one = df.with_columns(pl.Series("req", [0.0, 2.0]))
    fig = charts.waste_scatter(one, requested="req", wasted="wasted", hover="job_name", unit="GPU-hours")
    assert list(fig.data[1].x) == [0, 2.0]  # the "wasted everything" diagonal spans the largest request
