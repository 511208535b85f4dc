"""Scheduled report export: one self-contained HTML file per window and audience, its tables as CSV and
Parquet beside it, and static PNG/SVG charts on request.

``build_report(store, window_s, end, audience, team, user, formats, out_dir)`` is what ``quotaloop report``
and the dashboard's Reports page call. It returns the paths it wrote.

Invariants:
- Names carry the window (``quotaloop-report-2026-11-23_2026-11-29.html``, first and last UTC day inclusive)
  and, for a narrower scope, the audience and subject (``...-user-alice.html``); tables are
  ``<stem>-<table>.csv|.parquet``, charts ``<stem>-<chart>.png|.svg``.
- Everything is computed and rendered in memory first, then staged and swapped in (``files.Staging``):
  a failure anywhere raises ``ReportError`` with one line and leaves the previous files of that name intact
  and no temporary file behind. Re-running a window overwrites its files atomically.
- The output depends only on the store, the window and the options (no wall clock in it), so re-running it
  on the same store gives byte-identical HTML, CSV and Parquet.
- An empty window is not an error: the report says so.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
import re
from pathlib import Path

import polars as pl
import vl_convert as vlc

import queries
from engine.budgets import load, validate
from queries.store import Store, StoreError

from .. import safe_csv
from . import charts, sections
from .files import DAY_S, ReportError, Staging, Window, make_window, parse_end
from .html import Report, render

AUDIENCES = ("platform", "manager", "user")
FORMATS = ("html", "csv", "parquet", "png", "svg")
DEFAULT_FORMATS = ("html", "csv", "parquet")
FILTER_KEYS = ("cluster", "partition", "state", "job_class")


def filters_of(args) -> dict:
    """The job filters given on a command line (``args``: an argparse namespace), as ``build_report(filters=...)``
    takes them; the Reports page passes its sidebar's the same way, so the page and ``quotaloop report`` write
    the same files."""
    return {k: getattr(args, k) for k in FILTER_KEYS if getattr(args, k, None)}


def parse_formats(text: str | list | tuple) -> tuple[str, ...]:
    items = [f.strip().lower() for f in (text.split(",") if isinstance(text, str) else text) if f and f.strip()]
    bad = [f for f in items if f not in FORMATS]
    if bad or not items:
        raise ReportError(f"unknown report format {', '.join(bad) or '(none)'}; choose from {', '.join(FORMATS)}")
    return tuple(dict.fromkeys(items))


def slug(text: str) -> str:
    """A file-name-safe form of a team or user name; a hash keeps lossy mappings from colliding."""
    out = re.sub(r"[^A-Za-z0-9._-]+", "_", text.replace("/", ".")).strip("._-")[:60]
    if out != text.replace("/", "."):
        out = f"{out or 'x'}-{hashlib.blake2s(text.encode(), digest_size=4).hexdigest()}"
    return out


def file_stem(window: Window, audience: str, team: str | None, user: str | None) -> str:
    stem = f"quotaloop-report-{window.label}"
    subject = user if audience == "user" else team
    return stem + (f"-{audience}-{slug(subject)}" if subject else "")


def latest_day(store: str | os.PathLike) -> dt.date | None:
    """The UTC day of the newest job event in the store (for ``--end latest``)."""
    files = Store(store).files("jobs")
    if not files:
        return None
    last = pl.scan_parquet(files, missing_columns="insert", extra_columns="ignore").select(
        pl.max_horizontal(pl.col("end").max(), pl.col("start").max(), pl.col("submit").max())).collect().item()
    return None if last is None else last.astimezone(dt.timezone.utc).date()


def _check_scope(audience: str, team: str | None, user: str | None) -> None:
    if audience not in AUDIENCES:
        raise ReportError(f"unknown audience {audience!r}; choose from {', '.join(AUDIENCES)}")
    if audience == "user" and not user:
        raise ReportError("the user audience needs --user NAME (a user report shows only that user's jobs)")
    if audience == "manager" and not team:
        raise ReportError("the manager audience needs --team ACCOUNT (the team's account path)")
    if audience != "user" and user:
        raise ReportError("--user only applies to the user audience")


def _load_budgets(path):
    if path is None:
        return None
    try:
        return load(path)
    except ValueError as exc:  # BudgetError: names the file and the key
        raise ReportError(f"budgets: {exc}") from exc


def _check_budgets(tree, store, cluster: str | None) -> None:
    """Oversold guarantees stop the report as they stop ``simulate`` and ``scenario``: one shared check,
    ``engine.budgets.validate``, against the same capacity (the node list's GPUs, else the budget file's
    ``cluster_gpus``). Its warnings are for the interactive commands."""
    if tree is None:
        return
    nodes = Store(store).read("nodes")
    if cluster:
        nodes = nodes.filter(pl.col("cluster") == cluster)
    try:
        validate(tree, float(nodes["gpus"].fill_null(0).sum()) or None)
    except ValueError as exc:  # BudgetError: names the file and the guarantees
        raise ReportError(f"budgets: {exc}") from exc


def collect(store, window: Window, audience: str = "platform", team: str | None = None, user: str | None = None,
            team_level: int = 3, filters: dict | None = None, budgets=None, validation: bool = True) -> Report:
    """Run the queries of one report and return its model (no files written).

    ``budgets``: a budgets.toml path; fair share then uses its water-filled entitlements (queries.analytics.budgets).
    ``validation``: the platform and manager reports end with the what-if baseline's fidelity against the log of
    the window (``sections.validation``: one simulator replay); False leaves it out."""
    _check_scope(audience, team, user)
    try:
        Store(store).check()
    except StoreError as exc:  # missing, not a directory, not a store, corrupt manifest, truncated partition
        raise ReportError(str(exc)) from None
    tree = _load_budgets(budgets)
    _check_budgets(tree, store, (filters or {}).get("cluster"))
    scope = sections.Scope(window, audience, team or None, user or None, team_level,
                           {k: (filters or {})[k] for k in FILTER_KEYS if (filters or {}).get(k) not in (None, "")})
    con = None
    try:
        # One DuckDB thread: parallel aggregation adds floats in a varying order (last-bit differences between
        # runs); single-threaded, the same store gives the same bytes, and on 2 cores it is not slower.
        con = queries.connect(store, threads=1)
        q = sections.Runner(con, scope, store)
        first, ov = sections.overview(q, scope)
        gap = sections.gap(q, scope, ov["capacity_gpus"])
        if audience == "user":
            parts = [first, gap, sections.own_jobs(q, scope), sections.quota(q, scope)]
        elif audience == "manager":  # the team's budget first
            parts = [first, sections.fairshare(q, scope, tree), gap, sections.rankings(q, scope),
                     sections.quota(q, scope)]
        else:
            parts = [first, gap, sections.rankings(q, scope), sections.quota(q, scope),
                     sections.fairshare(q, scope, tree)]
        parts.append(sections.waits(q, scope))
        if validation and audience != "user":  # a user report holds only that user's jobs: no cluster replay
            parts.append(sections.validation(q, scope, tree))
    except ReportError:
        raise
    except (queries.QueryError, ValueError) as exc:  # ValueError: e.g. the budget tree vs this store
        raise ReportError(f"query failed: {str(exc).splitlines()[0]}") from exc
    except Exception as exc:  # DuckDB / Arrow errors while reading the store
        if type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb", "pyarrow", "polars"):
            raise ReportError(f"cannot read store {store}: {str(exc).splitlines()[0]}") from exc
        raise
    finally:
        if con is not None:
            con.close()
    subject = {"platform": f"whole cluster{f', team {team}' if team else ''}", "manager": f"team {team}",
               "user": f"user {user}{f', account {team}' if team else ''}"}[audience]
    if scope.filters:
        subject += " · " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in scope.filters.items())
    title = {"platform": "Cluster waste and fair-share report", "manager": "Team budget and waste report",
             "user": "Your jobs: waste and right-sizing report"}[audience]
    empty = None
    if not ov["jobs"]:
        empty = (f"No jobs ran in this window ({window.text()}) for {subject}. Nothing was wasted, and nothing "
                 "was measured: the sections below are empty on purpose.")
    return Report(title, audience, subject, window.text(), window.label, Path(store).name, parts, empty)


def _png_or_svg(chart, fmt: str) -> bytes:
    spec = charts.altair(chart.kind, chart.frame, chart.title, **chart.args).to_dict()
    if fmt == "png":
        return vlc.vegalite_to_png(spec, scale=2)
    return vlc.vegalite_to_svg(spec).encode()


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_parquet(buf, compression="zstd", statistics=True)
    return buf.getvalue()


def build_report(store, window_s: float, end=None, audience: str = "platform", team: str | None = None,
                 user: str | None = None, formats=DEFAULT_FORMATS, out_dir: str | os.PathLike = ".", *,
                 team_level: int = 3, filters: dict | None = None, budgets=None,
                 validation: bool = True) -> list[Path]:
    """Write the report of the window of ``window_s`` seconds (whole UTC days) ending on day ``end``.

    ``end``: a date, ``YYYY-MM-DD``, ``today`` / None (today, UTC) or ``latest`` (the newest job's day).
    ``team``: the manager report's team; for the platform and user audiences an optional account subtree filter.
    ``filters``: optional cluster / partition / state / job_class, as the dashboard's sidebar sets them.
    ``budgets``: optional budgets.toml; without it fair share assumes equal shares per account level.
    ``validation``: False leaves out the validation section (and its replay).
    Returns the written paths (HTML first). Raises ``ReportError`` (one line) on any failure.
    """
    formats = parse_formats(formats)
    store = Path(store) if store else queries.DEFAULT_STORE
    try:
        Store(store).check()  # before --end latest reads it: "no such directory", not "holds no job"
        last_day = parse_end(end, latest=lambda: latest_day(store))
    except StoreError as exc:
        raise ReportError(str(exc)) from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ReportError(f"cannot read store {store}: {str(exc).splitlines()[0]}") from exc
    window = make_window(window_s, last_day)
    report = collect(store, window, audience, team, user, team_level, filters, budgets, validation)
    stem = file_stem(window, audience, team, user)
    try:
        files = _render_files(report, stem, formats)
    except ReportError:
        raise
    except Exception as exc:  # rendering failed: nothing has been written yet
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ReportError(f"cannot render the report: {type(exc).__name__}: {first}") from exc
    # Tables and charts are staged before the large HTML, so a disk-full failure tends to hit mid-way;
    # either way nothing is renamed into place until every file is complete.
    order = {name: i for i, (name, _) in enumerate(files)}
    with Staging(out_dir) as staging:
        for name, data in sorted(files, key=lambda f: f[0].endswith(".html")):
            staging.add_bytes(name, data)
        written = staging.commit()
    return sorted(written, key=lambda p: order[p.name])


def command_line(store, window_s: float, end=None, audience: str = "platform", team: str | None = None,
                 user: str | None = None, formats=DEFAULT_FORMATS, out: str = "reports/", *,
                 filters: dict | None = None, budgets=None, validation: bool = True) -> list[str]:
    """The ``quotaloop report`` argv that writes what ``build_report`` with the same arguments writes (the
    dashboard's Reports page shows it, so a report built there can be scheduled as is)."""
    days = max(1, int(-(-float(window_s) // DAY_S)))
    argv = ["quotaloop", "report", "--store", str(store), "--window", f"{days}d"]
    if end is not None:
        argv += ["--end", str(end)]
    argv += ["--audience", audience]
    argv += ["--team", team] if team else []
    argv += ["--user", user] if user else []
    for key in FILTER_KEYS:
        if (filters or {}).get(key):
            argv += [f"--{key.replace('_', '-')}", str(filters[key])]
    argv += ["--budgets", str(budgets)] if budgets else []
    argv += [] if validation else ["--no-validation"]
    return argv + ["--format", ",".join(parse_formats(formats)), "--out", str(out)]


def _render_files(report: Report, stem: str, formats) -> list[tuple[str, bytes]]:
    """(file name, bytes) of every requested output, HTML first."""
    files: list[tuple[str, bytes]] = []
    if "html" in formats:
        files.append((f"{stem}.html", render(report).encode("utf-8")))
    for table in report.tables():
        if "csv" in formats:
            files.append((f"{stem}-{table.key}.csv", safe_csv.to_csv_bytes(table.frame)))
        if "parquet" in formats:
            files.append((f"{stem}-{table.key}.parquet", _parquet_bytes(table.frame)))
    for chart in report.charts():
        for fmt in ("png", "svg"):
            if fmt in formats:
                files.append((f"{stem}-{chart.key}.{fmt}", _png_or_svg(chart, fmt)))
    return files
