"""Chart builders for the exported report: every chart kind once as Plotly (interactive, inside the HTML) and
once as Altair (static PNG/SVG through vl-convert, which renders without a browser).

``plotly(kind, frame, title, **args)`` and ``altair(kind, frame, title, **args)`` take a small Polars frame
with the columns listed in ``KINDS`` (the report shapes query results into them). The Plotly side reuses the
dashboard's builders (``dashboard.charts``) where one exists, so the report looks like the dashboard; the
rest are here. Pure functions: no I/O, no queries.

Invariant: text from the logs reaches Plotly only entity-escaped (``charts.label``), because Plotly renders a
subset of HTML in labels; escaped text is displayed literally. Vega renders text as text.
"""
from __future__ import annotations

import altair as alt
import plotly.graph_objects as go
import polars as pl

from .. import charts
from ..charts import REQUESTED, USED, WASTED, label

CAPACITY = charts.CAPACITY
DEMANDED = "#e9c46a"

# kind -> the columns its frame must have (checked, so a shaping bug fails loudly, not as a blank chart)
KINDS = {
    "occupancy": ("t", "capacity", "allocated", "used"),
    "gap": ("t", "requested", "used"),
    "gap_by": ("t", "group", "requested", "used"),
    "trend": ("t", "value"),
    "ranked": ("label", "value", "efficiency"),
    "pyramid": ("level", "value"),
    "coef": ("label", "previous", "current"),
    "attainment": ("team", "entitled", "demanded", "received", "attainment"),
    "waits": ("job_class", "p50_min", "p90_min", "p99_min"),
}


def _check(kind: str, frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with NaN turned into null (a NaN from the logs must not break a colour scale or an axis)."""
    missing = [c for c in KINDS[kind] if c not in frame.columns]
    if missing:
        raise ValueError(f"chart {kind!r} needs columns {missing}")
    return frame.with_columns(pl.col(pl.Float32, pl.Float64).fill_nan(None))


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 380) -> go.Figure:
    fig.update_layout(
        title=dict(text=label(title), x=0.0, xanchor="left", font=dict(size=16)), height=height,
        template="plotly_white", margin=dict(l=10, r=10, t=56, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"),
        xaxis_title=label(x_title), yaxis_title=label(y_title))
    return fig


# ------------------------------------------------------------------ Plotly
def plotly(kind: str, frame: pl.DataFrame, title: str, **args) -> go.Figure:
    frame = _check(kind, frame)
    if frame.is_empty():
        return charts.empty_figure(title, "No data in this window.")
    unit = args.get("unit", "")
    if kind == "occupancy":
        return charts.occupancy_vs_utilisation(frame, t="t", capacity="capacity", allocated="allocated",
                                               used="used", unit=unit, title=title)
    if kind == "gap":
        return charts.gap_area(frame, t="t", requested="requested", used="used", unit=unit, title=title,
                               unknown="unknown" if "unknown" in frame.columns else None)
    if kind == "gap_by":
        fig = charts.gap_area(frame, t="t", requested="requested", used="used", group="group", unit=unit,
                              unknown="unknown" if "unknown" in frame.columns else None,
                              title=title, top_n=args.get("top_n", 8))
        # Up to 18 legend entries: below the plot, where they cannot cover the title.
        return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, xanchor="left"),
                                 height=520, margin=dict(b=40))
    if kind == "trend":
        return charts.waste_trend(frame, t="t", value="value", unit=unit, title=title)
    if kind == "ranked":
        return charts.ranked_bars(frame, name="label", value="value", efficiency="efficiency", unit=unit,
                                  top_n=args.get("top_n", 15), title=title)
    if kind == "pyramid":
        return charts.pyramid(list(zip(frame["level"].to_list(), frame["value"].to_list())), title=title)
    if kind == "attainment":
        return _attainment(frame, title, unit or "GPU-hours")
    return {"coef": _coef, "waits": _waits}[kind](frame, title)


def _coef(frame: pl.DataFrame, title: str) -> go.Figure:
    names = [label(v) for v in frame["label"].to_list()]
    prev, cur = frame["previous"].to_list(), frame["current"].to_list()
    fig = go.Figure()
    for name, p, c in zip(names, prev, cur):
        if p is not None and c is not None:
            fig.add_trace(go.Scatter(x=[p, c], y=[name, name], mode="lines", showlegend=False, hoverinfo="skip",
                                     line=dict(color=USED if c >= p else WASTED, width=3)))
    fig.add_trace(go.Scatter(x=prev, y=names, mode="markers", name="previous period",
                             marker=dict(color=REQUESTED, size=9)))
    fig.add_trace(go.Scatter(x=cur, y=names, mode="markers", name="this period",
                             marker=dict(color=CAPACITY, size=11, symbol="diamond")))
    fig.update_yaxes(type="category", autorange="reversed")
    return _layout(fig, title, "quota coefficient (× base quota)", "", height=max(260, 26 * frame.height + 100))


def _attainment(frame: pl.DataFrame, title: str, unit: str = "GPU-hours") -> go.Figure:
    teams = [label(v) for v in frame["team"].to_list()]
    fig = go.Figure([
        go.Bar(x=teams, y=frame["entitled"].to_list(), name="entitled", marker_color=REQUESTED),
        go.Bar(x=teams, y=frame["demanded"].to_list(), name="demanded", marker_color=DEMANDED),
        go.Bar(x=teams, y=frame["received"].to_list(), name="received", marker_color=USED),
        go.Scatter(x=teams, y=[None if a is None else 100 * a for a in frame["attainment"].to_list()],
                   name="attainment % (right axis)", mode="markers", yaxis="y2",
                   marker=dict(color=CAPACITY, size=10, symbol="diamond")),
    ])
    top = max([100.0] + [100 * a for a in frame["attainment"].to_list() if a is not None])
    fig.update_layout(barmode="group", yaxis2=dict(title="attainment (%)", overlaying="y", side="right",
                                                   range=[0, 1.1 * top], showgrid=False,
                                                   dtick=25 if top <= 150 else 50 if top <= 300 else 100))
    fig.update_xaxes(type="category")
    return _layout(fig, title, "team", unit, height=420)


def _waits(frame: pl.DataFrame, title: str) -> go.Figure:
    classes = [label(v) for v in frame["job_class"].to_list()]
    fig = go.Figure([go.Bar(x=classes, y=frame[c].to_list(), name=name, marker_color=color)
                     for c, name, color in (("p50_min", "median", USED), ("p90_min", "p90", DEMANDED),
                                            ("p99_min", "p99", WASTED))])
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="log")  # waits span seconds to days; a linear axis hides all but the longest
    return _layout(fig, title, "job class", "queue wait (minutes, log scale)", height=360)


# ------------------------------------------------------------------ Altair (static)
def altair(kind: str, frame: pl.DataFrame, title: str, **args) -> alt.TopLevelMixin:
    frame = _check(kind, frame)
    unit = args.get("unit", "")
    cols = list(KINDS[kind])
    has_unknown = kind in ("gap", "gap_by") and "unknown" in frame.columns
    if has_unknown:  # held by jobs without usage data: neither used nor waste
        frame = frame.with_columns((pl.col("requested") - pl.col("unknown").fill_null(0.0)).clip(lower_bound=0)
                                   .alias("known"))
        cols += ["known"]
    data = frame.select(cols).to_pandas()
    if kind in ("gap", "occupancy"):
        base = alt.Chart(data).encode(x=alt.X("t:T", title="time (UTC)"))
        top = "known" if has_unknown else "requested" if kind == "gap" else "allocated"
        layers = [base.mark_area(color=USED, opacity=0.6).encode(y=alt.Y("used:Q", title=unit)),
                  base.mark_area(color=WASTED, opacity=0.3).encode(y=f"{top}:Q", y2="used:Q")]
        if has_unknown:
            layers.append(base.mark_area(color=charts.UNKNOWN, opacity=0.6).encode(y="requested:Q", y2="known:Q"))
        if kind == "occupancy":
            layers.append(base.mark_line(color=CAPACITY, strokeDash=[6, 3]).encode(y="capacity:Q"))
        chart = alt.layer(*layers)
    elif kind == "gap_by":
        top = pl.col("known") if has_unknown else pl.col("requested")
        waste = frame.select("t", "group", (top - pl.col("used")).clip(lower_bound=0).alias("w"))
        chart = alt.Chart(waste.to_pandas()).mark_area().encode(
            x=alt.X("t:T", title="time (UTC)"), y=alt.Y("w:Q", stack="zero", title=f"held but unused {unit}"),
            color=alt.Color("group:N", title=None, scale=alt.Scale(range=charts.PALETTE)))
    elif kind == "trend":
        chart = alt.Chart(data).mark_bar(color=WASTED).encode(x=alt.X("t:T", title="time (UTC)"),
                                                               y=alt.Y("value:Q", title=f"wasted {unit}"))
    elif kind == "ranked":
        top = frame.sort("value", descending=True, nulls_last=True).head(args.get("top_n", 15))
        chart = alt.Chart(top.select(cols).to_pandas()).mark_bar().encode(
            x=alt.X("value:Q", title=unit), y=alt.Y("label:N", sort="-x", title=None),
            color=alt.Color("efficiency:Q", title="efficiency", scale=alt.Scale(domain=[0, 1],
                                                                                range=[WASTED, DEMANDED, USED])))
    elif kind == "pyramid":
        chart = alt.Chart(data).mark_bar(color=CAPACITY).encode(
            x=alt.X("value:Q", title="share of the level above",
                    axis=alt.Axis(format="%", values=[v / 100 for v in charts.PYRAMID_TICKS]),
                    scale=alt.Scale(domain=[0, 1])), y=alt.Y("level:N", sort=None, title=None))
    elif kind == "coef":
        base = alt.Chart(data).encode(y=alt.Y("label:N", title=None, sort=None))
        chart = (base.mark_rule(color=REQUESTED, strokeWidth=2).encode(
            x=alt.X("previous:Q", title="quota coefficient (× base quota)"), x2="current:Q")
            + base.mark_point(color=REQUESTED, filled=True, size=60).encode(x="previous:Q")
            + base.mark_point(color=CAPACITY, filled=True, shape="diamond", size=90).encode(x="current:Q"))
    else:
        index = {"attainment": "team", "waits": "job_class"}[kind]
        values = [c for c in cols if c not in (index, "attainment")]
        colors = {"attainment": [REQUESTED, DEMANDED, USED],
                  "waits": [USED, DEMANDED, WASTED]}[kind]
        long = frame.select([index] + values).unpivot(index=index, variable_name="series")
        if kind == "waits":  # log scale as in the Plotly version; a zero wait has no bar
            long = long.filter(pl.col("value") > 0)
        y_scale = alt.Scale(type="log") if kind == "waits" else alt.Undefined
        enc = dict(x=alt.X(f"{index}:N", title=index.replace("_", " ")),
                   y=alt.Y("value:Q", scale=y_scale, title={"attainment": args.get("unit") or "GPU-hours",
                                                            "waits": "queue wait (minutes, log scale)"}[kind]),
                   color=alt.Color("series:N", title=None, scale=alt.Scale(domain=values, range=colors)))
        enc["xOffset"] = "series:N"
        chart = alt.Chart(long.to_pandas()).mark_bar().encode(**enc)
    return chart.properties(title=title, width=640, height=args.get("height", 300))
