"""Chart builders for budgets and scenarios (pure: Polars frame in, Plotly figure out), in the style of
``dashboard.charts`` (its colours, label escaping and layout); captions in ``CAPTIONS`` by builder name."""
from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from .charts import BASELINE, SCENARIO, WASTED, _layout, empty_figure, fixed_colors, label

CAPTIONS = {
    "attainment_history": "Each point is one sliding window ending that day: the blue line is the teams' mean "
                          "attainment (received / entitled, capped at 100 %), the red line the worst team; the "
                          "dotted line is the 95 % a team should reach.",
    "multiplier_series": "Each line is one team's budget multiplier from the quota loop, period by period (1 = its "
                         "share as funded). A line that keeps changing direction is the oscillation the loop's "
                         "smoothing, dead band and step cap are there to prevent.",
}


def attainment_history(df: pl.DataFrame, *, t: str, mean: str, worst: str, threshold: float = 0.95,
                       title: str = "Fair-share attainment over sliding windows") -> go.Figure:
    """Mean and worst attainment per window end, with the ``threshold`` line."""
    df = df.drop_nulls(mean).sort(t) if not df.is_empty() else df
    if df.is_empty():
        return empty_figure(title, "No window with budgeted demand.")
    x = df[t].to_list()
    fig = go.Figure([
        go.Scatter(x=x, y=df[mean].to_list(), mode="lines+markers", name="mean", line={"color": SCENARIO},
                   hovertemplate="%{x}<br>mean %{y:.1%}<extra></extra>"),
        go.Scatter(x=x, y=df[worst].to_list(), mode="lines+markers", name="worst team", line={"color": WASTED},
                   hovertemplate="%{x}<br>worst %{y:.1%}<extra></extra>"),
    ])
    fig.add_hline(y=threshold, line={"color": BASELINE, "dash": "dot"})
    _layout(fig, title, "window end (UTC)", "attainment")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return fig


def multiplier_series(df: pl.DataFrame, *, t: str, bucket: str, value: str,
                      title: str = "Quota loop: budget multiplier per team and period",
                      colors: dict | None = None) -> go.Figure:
    """One line per bucket: the multiplier in force from each ``t`` on (a step line)."""
    if df.is_empty():
        return empty_figure(title, "The back-test produced no coefficients in this window.")
    names = sorted(set(df[bucket].to_list()))
    colors = fixed_colors(colors, names)
    fig = go.Figure()
    for name in names:
        part = df.filter(pl.col(bucket) == name).sort(t)
        fig.add_trace(go.Scatter(x=part[t].to_list(), y=part[value].to_list(), mode="lines+markers",
                                 line={"shape": "hv", "color": colors[name]}, name=label(name),
                                 hovertemplate="%{x}<br>x%{y:.2f}<extra>" + label(name) + "</extra>"))
    fig.add_hline(y=1.0, line={"color": BASELINE, "dash": "dot"})
    return _layout(fig, title, "effective from (UTC)", "multiplier of the team's share")
