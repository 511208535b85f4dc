"""The report exporter: a dated, self-contained HTML report per window and audience, with its tables as
CSV/Parquet and its charts as PNG/SVG. No Streamlit here: ``quotaloop report`` (``dashboard.cli.report``) and
the dashboard's Reports page (``dashboard.data.reports``, ``dashboard.views.reports``) both call it.

- ``build``: ``build_report`` (queries in, files out, all or nothing) and the matching ``command_line``;
- ``sections``: what each audience's report contains (named queries -> KPIs, charts, tables);
- ``html``: the report model and its Jinja template (autoescaped, plotly.js inlined);
- ``charts``: every chart kind as Plotly (in the HTML) and as Altair (static PNG/SVG);
- ``files``: report windows (whole UTC days) and the atomic file staging.
"""
from .build import build_report, command_line, filters_of, parse_formats
from .files import ReportError, parse_duration

__all__ = ["ReportError", "build_report", "command_line", "filters_of", "parse_duration", "parse_formats"]
