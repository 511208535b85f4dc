"""The report model and its one-file HTML rendering.

Invariants:
- The HTML is self-contained: plotly.js is inlined once in ``<head>``, each figure is a ``<div>`` plus an
  inline ``Plotly.newPlot`` call, CSS is inline; nothing is loaded from the network.
- Every value from the logs is escaped: the page is rendered by Jinja2 with ``autoescape=True`` and only two
  kinds of markup are marked safe on purpose: plotly.js itself and Plotly's own figure snippets, whose JSON
  payload Plotly serialises with ``<``, ``>`` and ``/`` escaped as ``\\u003c`` etc., so a job name such as
  ``</script><script>alert(1)</script>`` cannot close the script element.
- Rendering is deterministic (figure ids derive from section keys, no wall-clock time in the page), so the
  same store and window give byte-identical HTML.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from functools import lru_cache

import jinja2
import plotly.io as pio
from plotly.offline import get_plotlyjs
import polars as pl
from markupsafe import Markup

from . import charts


@dataclass
class Kpi:
    label: str
    value: object
    fmt: str = "num1"  # see ``fmt`` below
    note: str = ""


@dataclass
class Chart:
    key: str            # unique in the report; also the PNG/SVG file suffix
    kind: str           # a key of charts.KINDS
    frame: pl.DataFrame
    title: str
    caption: str        # one line on how to read it
    args: dict = field(default_factory=dict)


@dataclass
class Table:
    key: str            # file suffix of the CSV/Parquet export
    title: str
    frame: pl.DataFrame  # exported in full (CSV, Parquet)
    columns: list[tuple[str, str, str]]  # (column, header, fmt) shown in the HTML
    max_rows: int = 25


@dataclass
class Section:
    key: str
    title: str
    intro: str = ""
    kpis: list[Kpi] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    empty: str | None = None  # shown instead of charts/tables when the window has no data for it


@dataclass
class Report:
    title: str
    audience: str
    subject: str          # "whole cluster", "team X", "user Y"
    window_text: str
    window_label: str
    store_name: str
    sections: list[Section]
    empty: str | None = None  # whole-window message (no jobs at all)

    def tables(self) -> list[Table]:
        return [t for s in self.sections for t in s.tables]

    def charts(self) -> list[Chart]:
        return [c for s in self.sections for c in s.charts]


def fmt(value, kind: str = "num1") -> str:
    """Human formatting for the HTML only; exported tables keep raw values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if kind == "text":
        return str(value)
    if kind == "pct":
        return f"{100 * float(value):.1f} %"
    if kind == "int":
        return f"{int(round(float(value))):,}"
    if kind == "coef":
        return f"{float(value):.2f}×"
    if kind == "delta":
        return f"{float(value):+.2f}"
    if kind == "dur":
        s = float(value)
        if s < 90:
            return f"{s:.0f} s"
        if s < 5400:
            return f"{s / 60:.1f} min"
        if s < 2 * 86400:
            return f"{s / 3600:.1f} h"
        return f"{s / 86400:.1f} d"
    if kind == "dt":
        return value.strftime("%Y-%m-%d %H:%M") if isinstance(value, dt.datetime) else str(value)
    if isinstance(value, (int, float)):
        digits = {"num0": 0, "num1": 1, "num2": 2}.get(kind, 1)
        return f"{float(value):,.{digits}f}"
    return str(value)


def _figure_html(chart: Chart) -> Markup:
    fig = charts.plotly(chart.kind, chart.frame, chart.title, **chart.args)
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=f"fig-{chart.key}",
                       config={"displaylogo": False, "responsive": True}, validate=True)
    return Markup(html)


@lru_cache(maxsize=1)
def plotlyjs() -> str:
    js = get_plotlyjs()
    if "</script" in js.lower():  # an inline script ends at the first "</script": never inline such a bundle
        raise RuntimeError("this plotly.js bundle contains '</script' and cannot be inlined")
    return js


TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="quotaloop report">
<title>{{ r.title }} · {{ r.window_label }}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2935;background:#f6f7f9}
header{background:#264653;color:#fff;padding:18px 32px}
header h1{margin:0 0 4px;font-size:1.5rem} header p{margin:2px 0;opacity:.9}
nav{padding:8px 32px;background:#e9eef2;font-size:.9rem} nav a{margin-right:14px;color:#264653}
main{padding:8px 32px 40px;max-width:1200px}
section{background:#fff;border-radius:8px;padding:12px 20px 16px;margin:18px 0;box-shadow:0 1px 2px #0001}
h2{font-size:1.2rem;margin:6px 0 8px} .intro,.caption{color:#52606d;font-size:.9rem;margin:4px 0 10px}
.kpis{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0}
.kpi{border:1px solid #dde3e8;border-radius:6px;padding:8px 12px;min-width:150px}
.kpi .v{font-size:1.35rem;font-weight:600} .kpi .l{font-size:.8rem;color:#52606d} .kpi .n{font-size:.75rem;color:#7b8794}
table{border-collapse:collapse;font-size:.82rem;margin:8px 0;width:100%}
th,td{border-bottom:1px solid #e4e7eb;padding:4px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums} th{background:#f0f4f8}
.empty{background:#fff8e6;border:1px solid #f0d58c;padding:10px 14px;border-radius:6px}
.more{font-size:.8rem;color:#7b8794} ul.notes{font-size:.88rem;color:#334e68}
footer{font-size:.8rem;color:#7b8794;padding:0 32px 24px}
</style>
<script type="text/javascript">{{ plotlyjs }}</script>
</head>
<body>
<header>
<h1>{{ r.title }}</h1>
<p>{{ r.subject }} · {{ r.window_text }}</p>
<p>Audience: {{ r.audience }} · store: {{ r.store_name }}</p>
</header>
<nav>{% for s in r.sections %}<a href="#{{ s.key }}">{{ s.title }}</a>{% endfor %}</nav>
<main>
{% if r.empty %}<p class="empty" id="empty-window">{{ r.empty }}</p>{% endif %}
{% for s in r.sections %}
<section id="{{ s.key }}">
<h2>{{ s.title }}</h2>
{% if s.intro %}<p class="intro">{{ s.intro }}</p>{% endif %}
{% if s.kpis %}<div class="kpis">{% for k in s.kpis %}
<div class="kpi" data-kpi="{{ k.label }}" data-value="{{ k.value if k.value is not none else '' }}">
<div class="v">{{ fmt(k.value, k.fmt) }}</div><div class="l">{{ k.label }}</div>{% if k.note %}<div class="n">{{ k.note }}</div>{% endif %}
</div>{% endfor %}</div>{% endif %}
{% if s.empty %}<p class="empty">{{ s.empty }}</p>{% else %}
{% for c in s.charts %}<figure class="chart" data-chart="{{ c.key }}">{{ figure(c) }}
<figcaption class="caption">{{ c.caption }}</figcaption></figure>{% endfor %}
{% for t in s.tables %}
<h3 style="font-size:1rem">{{ t.title }}</h3>
{% if t.max_rows %}<table data-table="{{ t.key }}"><thead><tr>{% for col, head, f in t.columns %}<th>{{ head }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in t.frame.head(t.max_rows).iter_rows(named=True) %}<tr>{% for col, head, f in t.columns %}
<td{% if f != 'text' %} class="n"{% endif %} data-col="{{ col }}">{{ fmt(row[col], f) }}</td>{% endfor %}</tr>{% endfor %}</tbody></table>
{% if t.frame.height > t.max_rows %}<p class="more">Showing {{ t.max_rows }} of {{ t.frame.height }} rows; the full table is in the CSV/Parquet export ({{ t.key }}).</p>{% endif %}
{% else %}<p class="more">{{ t.frame.height }} rows, in the CSV/Parquet export ({{ t.key }}).</p>{% endif %}
{% endfor %}{% endif %}
{% if s.notes %}<ul class="notes">{% for n in s.notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
</section>
{% endfor %}
</main>
<footer>quotaloop report {{ r.window_label }} · waste = requested − used resource-seconds (allocated where the
log records it); efficiency = used / requested; metric definitions in queries/README.md.</footer>
</body>
</html>
"""


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(TEMPLATE)


def render(report: Report) -> str:
    return _template().render(r=report, fmt=fmt, figure=_figure_html, plotlyjs=Markup(plotlyjs()))
