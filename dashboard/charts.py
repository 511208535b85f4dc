"""Pure chart builders for the dashboard: Polars frame in, Plotly figure out (no Streamlit, no queries).

Every builder takes the column names it reads as arguments (so a page can feed it any query's result), sets a
title that says what the chart shows and axis titles with units, and has a one-line "how to read it" caption
in ``CAPTIONS`` under the builder's name. Colours are fixed per meaning (requested / used / wasted, baseline /
scenario, node-slot state); groups within one chart get distinct colours in a deterministic order (``colors_for``).

Invariant: text from the logs (users, accounts, job names) reaches Plotly only through ``label``: Plotly renders
a subset of HTML in labels, entity-escaped text shows literally.
"""
from __future__ import annotations

import re

import plotly.graph_objects as go
import polars as pl
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

# Same meaning colours as the exported report (dashboard/report/charts.py), so screenshots and reports agree.
REQUESTED = "#8c9bb5"
USED = "#2a9d8f"
WASTED = "#e76f51"
CAPACITY = "#264653"
BASELINE = "#8d99ae"
SCENARIO = "#2563eb"
# Tableau 10 first (the most separable set for up to ten groups), then twelve more distinct hues
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4",
           "#b2df8a", "#fb9a99", "#cab2d6", "#6a3d9a"]
UNKNOWN = "#ced4da"
EFFICIENCY_SCALE = [[0.0, WASTED], [0.5, "#e9c46a"], [1.0, USED]]
SLOT_STATES = ("busy", "allocated, idle", "free", "stranded free", "down")
SLOT_COLORS = {"busy": USED, "allocated, idle": "#f4a261", "free": "#e9ecef", "stranded free": WASTED,
               "down": "#495057"}

CAPTIONS = {
    "occupancy_vs_utilisation": "The dark line is what the cluster has, the blue area what the scheduler handed "
                                "out (occupancy), the green area what was actually busy: the space between blue and "
                                "green is allocated but idle.",
    "pyramid": "Each bar is a share of the bar above it: healthy hardware, then allocated, then going to funded work, "
               "then actually used. The widest drop is where capacity is lost.",
    "waste_trend": "Bar height is resource-hours requested but not used in that period; a rising trend means "
                   "requests are getting more inflated.",
    "gap_area": "For each group the solid band is what its jobs used and the hatched band above it is what they held "
                "but did not use: the hatched area is the waste. The top edge is the total requested.",
    "ranked_bars": "Longest bar = most waste in absolute resource-hours; colour is efficiency (used / requested: red 0 %, "
                   "yellow 50 %, green 100 %), "
                   "so a long red bar is big and inefficient.",
    "score_scatter": "Each dot is a user: the legacy rank coefficient across, the recommended coefficient up. Dots "
                     "far from the diagonal are users the two scores disagree about.",
    "coefficient_series": "Thin dashed line: the raw coefficient a period would give; solid line: what the loop "
                          "applies after smoothing, dead band and change cap. A stable loop has few zig-zags.",
    "compare_bars": "Grey bars are the baseline replay of the real history, blue bars the scenario with your "
                    "settings; compare bar pairs per category.",
    "compare_lines": "Grey is the baseline replay, blue your scenario; where blue sits higher the scenario keeps "
                     "more GPUs allocated at that time. The dashed line is the cluster's capacity.",
    "node_heatmap": "One cell per GPU at the chosen time (a row per node, or a column per node on a large "
                    "cluster). Orange = held but idle, red = free GPUs stranded on partly used nodes, green = busy: "
                    "a job's busy cells are its measured GPU efficiency × its GPUs, spread over its cells (the logs "
                    "say how much of its GPUs a job used, not which GPU).",
    "gantt": "One row per node, one bar per job from start to end; bar colour is the team. Gaps between bars are "
             "idle time on that node.",
    "waste_scatter": "Each dot is one of your jobs: requested resource-hours across, wasted resource-hours up. Jobs "
                     "near the diagonal used almost nothing of what they asked for.",
}


def label(value) -> str:
    text = "" if value is None else str(value)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def colors_for(names) -> dict:
    """Distinct colours for the groups of one chart, in the order given (largest first gets the first colour).

    Deterministic: the same ordered list always gets the same colours; up to len(PALETTE) groups never share one."""
    out: dict = {}
    for name in names:
        key = str(name)
        if key not in out:
            out[key] = PALETTE[len(out) % len(PALETTE)]
    return out


def team_colors(accounts) -> dict:
    """One colour per team for every page: the leaf accounts of the whole store, sorted, take the palette in
    order, then the inner accounts (org, group) the colours after them. A chart showing a subset of teams keeps
    each team's colour (``colors_for`` numbers the groups of one chart, so the same team changed colour from
    page to page)."""
    names = {str(a) for a in accounts if a}
    prefixes = {"/".join(a.split("/")[: i + 1]) for a in names for i in range(a.count("/") + 1)}
    leaves = sorted(p for p in prefixes if not any(q.startswith(p + "/") for q in prefixes))
    inner = sorted(prefixes - set(leaves))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(leaves + inner)}


def fixed_colors(colors: dict | None, names) -> dict:
    """``colors`` (a page-wide map such as ``team_colors``) for the names it knows, distinct palette colours for
    the rest."""
    names = [str(n) for n in names]
    if not colors:
        return colors_for(names)
    out = {n: colors[n] for n in names if n in colors}
    spare = [c for c in PALETTE if c not in set(out.values())] or PALETTE
    for i, n in enumerate(n for n in names if n not in out):
        out[n] = spare[i % len(spare)]
    return out


def efficiency_color(e: float) -> str:
    """Red at 0 % efficiency, yellow at 50 %, green at 100 % (nulls: ``UNKNOWN`` grey)."""
    return sample_colorscale(EFFICIENCY_SCALE, [min(max(float(e), 0.0), 1.0)])[0]


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 380, **kw) -> go.Figure:
    fig.update_layout(
        title=dict(text=label(title), x=0.0, xanchor="left", font=dict(size=16)),
        height=height, template="plotly_white", margin=dict(l=10, r=10, t=56, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right", title_text=""),
        xaxis_title=label(x_title), yaxis_title=label(y_title), hovermode="closest", **kw,
    )
    return fig


def empty_figure(title: str, message: str) -> go.Figure:
    """A blank chart that says why it is blank (an empty selection must never look like a broken page)."""
    fig = go.Figure()
    fig.add_annotation(text=label(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(size=14, color="#6c757d"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, "", "", height=260)


# ------------------------------------------------------------------ overview
def occupancy_vs_utilisation(df: pl.DataFrame, *, t: str, capacity: str, allocated: str, used: str,
                             unit: str = "GPUs", title: str | None = None) -> go.Figure:
    """Capacity line, allocated area and used area over time (the 'numbers do not match' picture)."""
    title = title or f"{unit}: capacity vs allocated (occupancy) vs busy (utilisation)"
    if df.is_empty():
        return empty_figure(title, "No jobs in this window.")
    df = df.sort(t)
    x = df[t].to_list()
    fig = go.Figure([
        go.Scatter(x=x, y=df[allocated].to_list(), name="allocated", mode="lines", line=dict(color=SCENARIO, width=1),
                   fill="tozeroy", fillcolor=_rgba(SCENARIO, 0.18)),
        go.Scatter(x=x, y=df[used].to_list(), name="busy (used)", mode="lines", line=dict(color=USED, width=1),
                   fill="tozeroy", fillcolor=_rgba(USED, 0.55)),
        go.Scatter(x=x, y=df[capacity].to_list(), name="capacity", mode="lines",
                   line=dict(color=CAPACITY, width=2, dash="dash")),
    ])
    return _layout(fig, title, "time (UTC)", f"{unit} (mean over interval)")


PYRAMID_TICKS = [0, 25, 50, 75, 100]


def pyramid(levels: list[tuple[str, float | None]], title: str = "Metric pyramid: where GPU capacity goes") -> go.Figure:
    """``levels``: (name, fraction 0..1) top to bottom; missing values are shown as 'unknown'."""
    known = [(n, v) for n, v in levels if v is not None]
    if not known:
        return empty_figure(title, "No data for this window.")
    names = [label(n) for n, _ in levels]
    values = [round(100 * v, 1) if v is not None else 0 for _, v in levels]
    text = [f"{100 * v:.1f} %" if v is not None else "unknown" for _, v in levels]
    colors = [CAPACITY, SCENARIO, "#6d597a", USED][: len(levels)] + [REQUESTED] * max(0, len(levels) - 4)
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", text=text, textposition="auto",
                           marker_color=colors, hovertemplate="%{y}: %{text}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    # explicit ticks up to 100: with the range ending at 100 Plotly's own ticks could stop at 80 while bars reach 100
    fig.update_xaxes(range=[0, 101], tickmode="array", tickvals=PYRAMID_TICKS)
    return _layout(fig, title, "share of the level above (%)", "", height=300)


def waste_trend(df: pl.DataFrame, *, t: str, value: str, unit: str, title: str | None = None) -> go.Figure:
    title = title or f"Wasted {unit} per period"
    if df.is_empty():
        return empty_figure(title, "No jobs in this window.")
    df = df.sort(t)
    fig = go.Figure(go.Bar(x=df[t].to_list(), y=df[value].to_list(), marker_color=WASTED, name="wasted",
                           hovertemplate="%{x}<br>%{y:,.1f} " + unit + "<extra></extra>"))
    return _layout(fig, title, "time (UTC)", f"wasted {unit}", height=300)


# ------------------------------------------------------------------ waste explorer
def gap_area(df: pl.DataFrame, *, t: str, requested: str, used: str, group: str | None = None, unit: str,
             top_n: int = 8, title: str | None = None, legend: str | None = None,
             unknown: str | None = None, colors: dict | None = None) -> go.Figure:
    """Per group (or cluster-wide): used band, then the hatched gap up to requested, stacked over groups.

    Groups beyond the ``top_n`` largest wasters are summed into ``other``. ``unknown`` (optional) is the part of
    the request held by jobs without usage data: it is neither used nor waste, so it is taken out of each gap and
    drawn once, summed over groups, as a grey band on top. Per input row, used is capped at the known request
    and the gap is max(requested - unknown - used, 0), so the stack's top edge is exactly the total requested."""
    what = f"by {group}" if group else "cluster-wide"
    title = title or f"Requested vs used {unit} over time, {what} (hatched gap = waste)"
    if df.is_empty():
        return empty_figure(title, "No jobs match the filters in this window.")
    key = group or "__all"
    if not group:
        df = df.with_columns(pl.lit("all jobs").alias(key))
    df = df.with_columns(pl.col(key).cast(pl.String).fill_null("(none)"))
    known = (pl.col(requested) - pl.col(unknown).fill_null(0.0)).clip(lower_bound=0) if unknown else pl.col(requested)
    df = df.with_columns(known.alias("__known"), (pl.col(requested) - known).alias("__unknown"))
    waste = (df.group_by(key).agg((pl.col("__known") - pl.col(used)).clip(lower_bound=0).sum().alias("w"))
             .sort(["w", key], descending=[True, False]))
    top = waste[key].head(top_n).to_list()
    if waste.height > top_n:
        df = df.with_columns(pl.when(pl.col(key).is_in(top)).then(pl.col(key)).otherwise(pl.lit("other")).alias(key))
        top = top + ["other"]
    # clip per input row, before any summing: one group's overuse must not hide another's waste
    df = df.with_columns(pl.min_horizontal(pl.col(used), pl.col("__known")).alias(used),
                         (pl.col("__known") - pl.col(used)).clip(lower_bound=0).alias("__gap"))
    grid = df.group_by([t, key]).agg(pl.col(used).sum(), pl.col("__gap").sum())
    times = grid.select(t).unique().sort(t)
    palette = fixed_colors(colors, [n for n in top if n != "other"])
    fig = go.Figure()
    for name in top:
        g = times.join(grid.filter(pl.col(key) == name), on=t, how="left").fill_null(0).sort(t)
        color = REQUESTED if name == "other" else (palette[str(name)] if group else USED)
        x = g[t].to_list()
        # one legend entry per group (its used band); the hatched band above it toggles with it
        fig.add_trace(go.Scatter(
            x=x, y=g[used].to_list(), name=label(name) if group else "used", legendgroup=label(name),
            stackgroup="one", mode="lines", line=dict(width=0.5, color=color), fillcolor=_rgba(color, 0.85),
            hovertemplate=f"{label(name)} used: %{{y:,.1f}} {unit}<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=x, y=g["__gap"].to_list(), name=f"{label(name)} held, unused" if group else "held, unused (waste)",
            legendgroup=label(name), showlegend=not group, stackgroup="one", mode="lines",
            line=dict(width=0.5, color=color), fillcolor=_rgba(color, 0.25),
            fillpattern=dict(shape="/", fgcolor=_rgba(WASTED if not group else color, 0.8), solidity=0.3),
            hovertemplate=f"{label(name)} held, unused: %{{y:,.1f}} {unit}<extra></extra>"))
    unknown_total = times.join(df.group_by(t).agg(pl.col("__unknown").sum()), on=t, how="left").fill_null(0).sort(t)
    if unknown_total["__unknown"].max() > 0:
        fig.add_trace(go.Scatter(
            x=unknown_total[t].to_list(), y=unknown_total["__unknown"].to_list(), name="held, usage unknown",
            stackgroup="one", mode="lines", line=dict(width=0.5, color=UNKNOWN), fillcolor=_rgba(UNKNOWN, 0.6),
            fillpattern=dict(shape=".", fgcolor=_rgba("#6c757d", 0.6), solidity=0.2),
            hovertemplate=f"held by jobs without usage data: %{{y:,.1f}} {unit}<extra></extra>"))
    fig = _layout(fig, title, "time (UTC)", f"{unit} (mean over bucket)", height=440)
    if group:
        fig.update_layout(legend=dict(orientation="v", x=1.01, xanchor="left", y=1.0, yanchor="top",
                                      title_text=f"{legend or group} (hatched = held, unused)", font=dict(size=11)),
                          margin=dict(r=10))
    fig.update_layout(hovermode="x unified")
    return fig


def ranked_bars(df: pl.DataFrame, *, name: str, value: str, unit: str, efficiency: str | None = None,
                top_n: int = 15, title: str | None = None) -> go.Figure:
    """Horizontal bars of ``value`` (largest on top), coloured by ``efficiency`` 0..1 when given."""
    title = title or f"Largest wasters by {unit}"
    if df.is_empty():
        return empty_figure(title, "Nothing to rank for these filters.")
    if df[value].null_count() == df.height:  # usage unknown for everyone: bars of nothing would read as no waste
        return empty_figure(title, "No usage recorded in this log: the waste is unknown.")
    d = df.sort(value, descending=True, nulls_last=True).head(top_n)
    effs = d[efficiency].to_list() if efficiency and efficiency in d.columns else [None] * d.height
    colors = [WASTED if not efficiency else UNKNOWN if e is None else efficiency_color(e) for e in effs]
    names = [label(n) for n in d[name].to_list()]
    fig = go.Figure(go.Bar(
        x=d[value].to_list(), y=names, orientation="h", marker_color=colors,
        customdata=["unknown" if e is None else f"{100 * e:.0f} %" for e in effs],
        hovertemplate="%{y}: %{x:,.1f} " + unit + ", efficiency %{customdata}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    return _layout(fig, title, unit, "", height=max(260, 26 * d.height + 90))


def waste_scatter(df: pl.DataFrame, *, requested: str, wasted: str, hover: str, unit: str,
                  title: str | None = None) -> go.Figure:
    title = title or f"Your jobs: requested vs wasted {unit}"
    if df.is_empty():
        return empty_figure(title, "No jobs for this selection.")
    if df[wasted].null_count() == df.height:  # an SWF log or a bare sacct dump records no usage
        return empty_figure(title, f"No usage recorded for these jobs, so no {unit} can be measured as wasted.")
    top = max(df[requested].fill_null(0).to_list() or [0])
    if top <= 0:  # CPU-only jobs on the GPU view: a dot at the origin on axes in nano-units says nothing
        return empty_figure(title, f"None of these jobs requested any {unit}: nothing of it to waste.")
    fig = go.Figure([
        go.Scatter(x=df[requested].to_list(), y=df[wasted].to_list(), mode="markers", name="job",
                   text=[label(h) for h in df[hover].to_list()], marker=dict(color=WASTED, size=9, opacity=0.8),
                   hovertemplate="%{text}<br>requested %{x:,.1f}<br>wasted %{y:,.1f}<extra></extra>"),
        go.Scatter(x=[0, top], y=[0, top], mode="lines", name="wasted everything",
                   line=dict(color=REQUESTED, dash="dot")),
    ])
    return _layout(fig, title, f"requested {unit}", f"wasted {unit}", height=360)


# ------------------------------------------------------------------ rankings and quota loop
def score_scatter(df: pl.DataFrame, *, name: str, legacy: str, recommended: str,
                  title: str = "Legacy vs recommended quota coefficient per user",
                  highlight: str | None = None) -> go.Figure:
    """One dot per user; ``highlight`` (a name) is drawn as its own, larger "you" trace."""
    if df.is_empty():
        return empty_figure(title, "Nothing to rank for these filters.")
    if df[legacy].null_count() == df.height:  # SWF logs and many exports record no peak CPU
        return empty_figure(title, "No legacy coefficient to compare: it needs each job's peak CPU "
                                   "utilisation, and this log has none.")
    vals = [v for v in df[legacy].to_list() + df[recommended].to_list() if v is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0, 1)
    hover = "%{text}<br>legacy %{x:.2f} x<br>recommended %{y:.2f} x<extra></extra>"
    rest = df.filter(pl.col(name) != highlight) if highlight else df
    traces = [go.Scatter(x=rest[legacy].to_list(), y=rest[recommended].to_list(), mode="markers",
                         name="other users" if highlight else "user",
                         text=[label(n) for n in rest[name].to_list()],
                         marker=dict(color=SCENARIO, size=9, opacity=0.75), hovertemplate=hover)]
    me = df.filter(pl.col(name) == highlight) if highlight else df.clear()
    if me.height:
        traces.append(go.Scatter(x=me[legacy].to_list(), y=me[recommended].to_list(), mode="markers",
                                 name=f"you ({label(highlight)})", text=[label(highlight)] * me.height,
                                 marker=dict(color=WASTED, size=15, symbol="diamond",
                                             line=dict(color="#1f2937", width=1)), hovertemplate=hover))
    fig = go.Figure(traces + [go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="same coefficient",
                                         line=dict(color=REQUESTED, dash="dot"))])
    return _layout(fig, title, "legacy coefficient (x base quota)", "recommended coefficient (x base quota)")


def coefficient_series(df: pl.DataFrame, *, period: str, user: str, raw: str | None, smoothed: str,
                       title: str = "Quota coefficient per period: raw vs applied") -> go.Figure:
    if df.is_empty():
        return empty_figure(title, "No periods for this selection.")
    fig = go.Figure()
    names = sorted({u for u in df[user].to_list() if u is not None})
    palette = colors_for(names)
    for name in names:
        g = df.filter(pl.col(user) == name).sort(period)
        c = palette[str(name)]
        fig.add_trace(go.Scatter(x=g[period].to_list(), y=g[smoothed].to_list(), name=f"{label(name)} applied",
                                 mode="lines+markers", line=dict(color=c, width=2), legendgroup=label(name)))
        if raw and raw in g.columns:
            fig.add_trace(go.Scatter(x=g[period].to_list(), y=g[raw].to_list(), name=f"{label(name)} raw",
                                     mode="lines", line=dict(color=c, width=1, dash="dash"),
                                     legendgroup=label(name), opacity=0.7))
    return _layout(fig, title, "period start (UTC)", "coefficient (x base quota)")


# ------------------------------------------------------------------ fair share: baseline vs scenario
def compare_bars(df: pl.DataFrame, *, category: str, baseline: str, scenario: str, unit: str, title: str,
                 log_y: bool = False, reference: float | None = None, percent: bool = False) -> go.Figure:
    """Grouped bars baseline vs scenario per category; ``reference`` draws a horizontal target line; ``percent``
    shows fractions as percentages (axis, hover and the reference's label)."""
    if df.is_empty():
        return empty_figure(title, "No data to compare.")
    cats = [label(c) for c in df[category].to_list()]
    hover = "%{x}: %{y:.1%}<extra>%{fullData.name}</extra>" if percent else None
    fig = go.Figure([
        go.Bar(x=cats, y=df[baseline].to_list(), name="baseline (real history replayed)", marker_color=BASELINE,
               hovertemplate=hover),
        go.Bar(x=cats, y=df[scenario].to_list(), name="scenario", marker_color=SCENARIO, hovertemplate=hover),
    ])
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category")
    if log_y:
        fig.update_yaxes(type="log")
    if percent:
        fig.update_yaxes(tickformat=".0%")
    if reference is not None:
        ref = f"{100 * reference:g} %" if percent else f"{reference:g} {unit}"
        fig.add_hline(y=reference, line=dict(color=WASTED, dash="dot"), annotation_text=ref)
    return _layout(fig, title, category.replace("_", " "), unit)


def compare_lines(df: pl.DataFrame, *, t: str, baseline: str, scenario: str, unit: str, title: str,
                  reference: float | None = None) -> go.Figure:
    """Two time series, baseline (grey) and scenario (blue); ``reference`` draws the capacity line."""
    if df.is_empty():
        return empty_figure(title, "No simulated allocations to draw.")
    df = df.sort(t)
    x = df[t].to_list()
    fig = go.Figure([
        go.Scatter(x=x, y=df[baseline].to_list(), name="baseline (real history replayed)", mode="lines",
                   line=dict(color=BASELINE, width=1.5)),
        go.Scatter(x=x, y=df[scenario].to_list(), name="scenario", mode="lines", line=dict(color=SCENARIO, width=1.5)),
    ])
    if reference:
        fig.add_hline(y=reference, line=dict(color=CAPACITY, dash="dash"), annotation_text=f"capacity {reference:g}")
    return _layout(fig, title, "time (UTC)", f"{unit} (mean over hour)")


# ------------------------------------------------------------------ cluster layout
WIDE_GRID_NODES = 40  # more nodes than this: nodes across, GPUs down, in panels of PANEL_NODES nodes
PANEL_NODES = 32      # nodes per panel: at 1440 px each column is ~30 px, room for every node's label
LABEL_PX = 11         # node labels: every one shown, at a readable size


def node_heatmap(df: pl.DataFrame, *, node: str, slot: str, state: str, hover: str | None = None,
                 title: str = "GPU slots per node at the chosen time") -> go.Figure:
    """``df``: one row per (node, GPU slot) with ``state`` in SLOT_STATES; a categorical heatmap.

    Up to ``WIDE_GRID_NODES`` nodes one row per node; beyond, one column per node (the grid is transposed),
    wrapped into stacked panels of ``PANEL_NODES`` nodes so that every node keeps a readable label (128 nodes in
    one row left ~7 px per label and Plotly dropped every second one)."""
    if df.is_empty():
        return empty_figure(title, "No nodes known for this cluster (the store has no node list).")
    nodes = sorted(set(df[node].to_list()), key=_natural)
    slots = sorted(set(df[slot].to_list()))
    code = {s: i for i, s in enumerate(SLOT_STATES)}
    z = [[None] * len(slots) for _ in nodes]
    text = [[""] * len(slots) for _ in nodes]
    ni = {n: i for i, n in enumerate(nodes)}
    si = {s: i for i, s in enumerate(slots)}
    hv = df[hover].to_list() if hover else [None] * df.height
    for n, s, st, h in zip(df[node].to_list(), df[slot].to_list(), df[state].to_list(), hv):
        z[ni[n]][si[s]] = code.get(st)
        text[ni[n]][si[s]] = label(f"{st}" + (f" · {h}" if h else ""))
    k = len(SLOT_STATES)
    scale = []
    for i, s in enumerate(SLOT_STATES):
        scale += [[i / k, SLOT_COLORS[s]], [(i + 1) / k, SLOT_COLORS[s]]]
    node_labels, slot_labels = [label(n) for n in nodes], [f"GPU {s}" for s in slots]
    common = dict(zmin=-0.5, zmax=k - 0.5, colorscale=scale, xgap=1, ygap=1, showscale=False)
    wide = len(nodes) > WIDE_GRID_NODES
    if wide:
        chunks = [range(i, min(i + PANEL_NODES, len(nodes))) for i in range(0, len(nodes), PANEL_NODES)]
        fig = make_subplots(rows=len(chunks), cols=1, vertical_spacing=min(0.3 / len(chunks), 0.12))
        for r, idx in enumerate(chunks, start=1):
            fig.add_trace(go.Heatmap(
                z=[[z[i][j] for i in idx] for j in range(len(slots))],
                text=[[text[i][j] for i in idx] for j in range(len(slots))],
                x=[node_labels[i] for i in idx], y=slot_labels, hovertemplate="%{x} %{y}: %{text}<extra></extra>",
                **common), row=r, col=1)
            fig.update_xaxes(type="category", tickangle=-90, tickfont=dict(size=LABEL_PX), tickmode="array",
                             tickvals=[node_labels[i] for i in idx], showgrid=False, row=r, col=1)
            fig.update_yaxes(type="category", autorange="reversed", tickfont=dict(size=LABEL_PX), showgrid=False,
                             row=r, col=1)
    else:
        fig = go.Figure(go.Heatmap(z=z, text=text, x=slot_labels, y=node_labels,
                                   hovertemplate="%{y} %{x}: %{text}<extra></extra>", **common))
    # a discrete legend (a colour bar would suggest an order between the states)
    for s in SLOT_STATES:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=s, showlegend=True,
                                 marker=dict(symbol="square", size=12, color=SLOT_COLORS[s])))
    if wide:
        panel_px = 22 * len(slots) + 80
        fig = _layout(fig, title, "", "", height=panel_px * len(chunks) + 120)
        fig.update_layout(xaxis_title=None, yaxis_title=None)
    else:
        fig.update_yaxes(autorange="reversed", type="category", tickfont=dict(size=LABEL_PX), tickmode="array",
                         tickvals=node_labels)
        fig.update_xaxes(side="top")
        fig = _layout(fig, title, "GPU index on the node", "node", height=max(320, 18 * len(nodes) + 140))
        fig.update_layout(xaxis=dict(showgrid=False), yaxis=dict(showgrid=False))
    fig.update_layout(legend=dict(orientation="v", x=1.01, xanchor="left", y=1.0, yanchor="top", title_text="GPU"),
                      plot_bgcolor="white")
    return fig


def gantt(df: pl.DataFrame, *, node: str, start: str, end: str, color_by: str, hover: str,
          title: str = "Jobs on nodes over time", colors: dict | None = None) -> go.Figure:
    """One horizontal bar per (job, node) from ``start`` to ``end``; colour per ``color_by`` value (from
    ``colors`` where given: the page-wide team colours)."""
    if df.is_empty():
        return empty_figure(title, "No jobs ran on these nodes in this window.")
    nodes = sorted(set(df[node].to_list()), key=_natural)
    fig = go.Figure()
    palette = fixed_colors(colors, sorted({str(c) for c in df[color_by].to_list()}))
    for name in sorted({c for c in df[color_by].to_list()}, key=lambda v: str(v)):
        g = df.filter(pl.col(color_by) == name) if name is not None else df.filter(pl.col(color_by).is_null())
        dur_ms = [(e - s).total_seconds() * 1000 for s, e in zip(g[start].to_list(), g[end].to_list())]
        fig.add_trace(go.Bar(
            base=g[start].to_list(), x=dur_ms, y=[label(n) for n in g[node].to_list()], orientation="h",
            name=label(name), marker_color=palette[str(name)], marker_line_width=0.3,
            text=[label(h) for h in g[hover].to_list()], textposition="none",
            hovertemplate="%{y}<br>%{text}<extra></extra>"))
    fig.update_layout(barmode="overlay", bargap=0.15)
    fig.update_xaxes(type="date")
    # every node labelled at a readable size (tickvals: Plotly would otherwise drop every second label)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=[label(n) for n in nodes],
                     tickmode="array", tickvals=[label(n) for n in nodes], autorange="reversed",
                     tickfont=dict(size=LABEL_PX))
    fig = _layout(fig, title, "time (UTC)", "node", height=max(320, 15 * len(nodes) + 120))
    # one entry per team: beside the plot, where a long list cannot run into the title
    fig.update_layout(legend=dict(orientation="v", x=1.01, xanchor="left", y=1.0, yanchor="top",
                                  title_text=label(color_by)))
    return fig


def _natural(value) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(value)))
