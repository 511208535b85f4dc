"""``quotaloop report``: each audience's report against the queries, scoping, escaping, CSV neutralising,
empty windows, atomic re-runs and clean failures. Browser checks are in test_report_browser.py."""
from __future__ import annotations

import csv
import datetime as dt
import html as htmlmod
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

import queries
from dashboard.report.build import build_report, file_stem, slug
from dashboard.report.files import ReportError, make_window
from test_report_support import (BREAKOUT_NAME, EVIL_USER, FORMULA_NAME, XSS_NAME, built_reports, figures,
                                 report_store, subject, window_end)


class _Page(HTMLParser):
    """KPI tiles (data-kpi / data-value), tables (data-table, cells by data-col) and script bodies."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.kpis, self.tables, self.scripts = {}, {}, []
        self._table = self._row = self._col = None
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-kpi" in a:
            self.kpis[a["data-kpi"]] = a.get("data-value")
        elif tag == "table" and "data-table" in a:
            self._table = self.tables.setdefault(a["data-table"], [])
        elif tag == "tr" and self._table is not None:
            self._row = {}
        elif tag == "td" and self._row is not None:
            self._col = a.get("data-col")
            self._row[self._col] = ""
        elif tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "tr" and self._table is not None and self._row:
            self._table.append(self._row)
            self._row = None
        elif tag == "td":
            self._col = None
        elif tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data
        elif self._col is not None and self._row is not None:
            self._row[self._col] += data


def _page(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return report_store(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def reports(store, tmp_path_factory) -> dict[str, list[Path]]:
    return built_reports(tmp_path_factory.getbasetemp())


def _window():
    w = make_window(7 * 86400, window_end())
    return {"start": w.start, "end": w.end, "team_level": 3}


def _file(paths: list[Path], suffix: str) -> Path:
    [hit] = [p for p in paths if p.name.endswith(suffix)]
    return hit


# ------------------------------------------------------------------ names and windows
def test_names_carry_the_window(reports):
    w = make_window(7 * 86400, window_end())
    html = _file(reports["platform"], ".html")
    assert html.name == f"quotaloop-report-{w.label}.html"
    assert w.label == f"{window_end() - dt.timedelta(days=6):%Y-%m-%d}_{window_end():%Y-%m-%d}"
    assert html.parent.joinpath(f"quotaloop-report-{w.label}-user_ranking.csv").exists()
    assert html.parent.joinpath(f"quotaloop-report-{w.label}-user_ranking.parquet").exists()
    team, user = subject()
    assert _file(reports["user"], ".html").name == f"{file_stem(w, 'user', None, user)}.html"
    assert slug("a/b c") != slug("a/b_c") and "/" not in slug("../../etc")


def test_window_is_whole_utc_days():
    w = make_window(7 * 86400, dt.date(2026, 11, 29))
    assert w.label == "2026-11-23_2026-11-29"
    assert w.start == dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)
    assert w.end == dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc)
    assert make_window(36 * 3600, dt.date(2026, 11, 29)).label == "2026-11-28_2026-11-29"  # rounded up


# ------------------------------------------------------------------ figures against the queries
def test_platform_figures_match_the_queries(store, reports):
    html_path = _file(reports["platform"], ".html")
    page = _page(html_path)
    jw = queries.run("job_waste", store=store, **_window())
    wasted_gpu_h = jw["gpu_seconds_wasted"].sum() / 3600
    assert jw.height > 0 and wasted_gpu_h > 0
    assert float(page.kpis["GPU-hours wasted"]) == pytest.approx(wasted_gpu_h, rel=1e-9)
    assert int(page.kpis["jobs"]) == jw.height
    assert float(page.kpis["CPU-hours wasted"]) == pytest.approx(jw["cpu_seconds_wasted"].sum() / 3600, rel=1e-9)

    # the daily waste bars add up to job_waste's wasted GPU-hours over the window (gap_area is exact across
    # buckets and, like job_waste, leaves a job without usage data out of the waste: its unknown_usage_seconds)
    figs = figures(html_path.read_text())
    trend = figs["fig-waste_trend"][0][0]["y"]
    assert sum(trend) == pytest.approx(wasted_gpu_h, rel=1e-6)

    # top wasters: the table and the bar chart list user_ranking's order, which an independent Polars
    # group-by over job_waste reproduces
    ur = queries.run("user_ranking", store=store, order_by="gpu", **_window())
    by_user = (jw.group_by("user").agg(pl.col("gpu_seconds_wasted").sum() / 3600)
               .sort(["gpu_seconds_wasted", "user"], descending=[True, False]))
    top = [htmlmod.unescape(r["user"]) for r in page.tables["user_ranking"][:10]]
    assert top == ur["user"].head(10).to_list()
    assert set(top[:5]) == set(by_user["user"].head(5).to_list())
    bars = figs["fig-top_wasters"][0][0]
    assert [htmlmod.unescape(y) for y in bars["y"]] == ur["user"].head(15).to_list()
    assert bars["x"] == pytest.approx(ur["gpu_hours_wasted"].head(15).to_list())

    # exported tables are the query results: Parquet exactly (one DuckDB thread, as the report runs it, so the
    # float sums add up in the same order), CSV numerically
    con = queries.connect(store, threads=1)
    try:
        exact = queries.run("user_ranking", con=con, order_by="gpu", **_window())
    finally:
        con.close()
    pq = pl.read_parquet(_file(reports["platform"], "-user_ranking.parquet"))
    assert pq.equals(exact)
    csv_ = pl.read_csv(_file(reports["platform"], "-user_ranking.csv"))
    assert csv_["gpu_hours_wasted"].to_list() == pytest.approx(ur["gpu_hours_wasted"].to_list())

    fa = queries.run("fairshare_attainment", store=store, **_window())
    shown = {htmlmod.unescape(r["team"]): r["attainment"] for r in page.tables["fairshare"]}
    assert set(shown) == set(fa["team"].to_list())
    for row in fa.iter_rows(named=True):
        if row["attainment"] is not None:
            assert shown[row["team"]] == f"{100 * row['attainment']:.1f} %"
    att = figs["fig-attainment"][0]
    assert att[2]["y"] == pytest.approx(fa["received_gpu_hours"].to_list())

    waits = queries.run("queue_waits", store=store, **_window())
    per_class = waits.filter((pl.col("team") == "(all)") & (pl.col("job_class") != "(all)")).sort("job_class")
    wfig = figs["fig-queue_waits"][0]
    assert wfig[0]["x"] == per_class["job_class"].to_list()
    assert wfig[1]["y"] == pytest.approx((per_class["wait_p90_s"] / 60).to_list())


def test_quota_changes_explain_every_user(reports):
    q = pl.read_parquet(_file(reports["platform"], "-quota_changes.parquet"))
    assert q.height > 0 and q["explanation"].null_count() == 0
    for row in q.iter_rows(named=True):
        assert row["previous_coefficient"] + row["coefficient_change"] == pytest.approx(row["coefficient"])
        if row["held"]:
            assert row["explanation"].startswith("Held at")
        elif row["coefficient_change"] == 0:
            assert "dead band" in row["explanation"]
        else:
            assert f"{row['coefficient_change']:+.2f}" in row["explanation"]


def test_manager_report_is_the_team(store, reports):
    team, _ = subject()
    page = _page(_file(reports["manager"], ".html"))
    jw = queries.run("job_waste", store=store, account_prefix=team, **_window())
    assert float(page.kpis["GPU-hours wasted"]) == pytest.approx(jw["gpu_seconds_wasted"].sum() / 3600, rel=1e-9)
    ranked = pl.read_parquet(_file(reports["manager"], "-user_ranking.parquet"))
    assert set(ranked["user"].to_list()) == set(jw["user"].to_list())
    fa = pl.read_parquet(_file(reports["manager"], "-fairshare.parquet"))
    assert fa.height >= 1 and all(t == team or t.startswith(team + "/") or team.startswith(t + "/")
                                  for t in fa["team"].to_list())
    assert "cluster-wide mean attainment" in page.kpis


def test_user_report_holds_only_that_users_jobs(store, reports):
    _, user = subject()
    paths = reports["user"]
    others = set(queries.run("job_waste", store=store, **_window())["user"].to_list()) - {user}
    assert EVIL_USER in others and len(others) >= 3
    mine = set(queries.run("job_waste", store=store, user=user, **_window())["job_id"].to_list())
    for p in paths:
        if p.suffix == ".parquet":
            df = pl.read_parquet(p)
            for col in ("user", "group_key"):
                if col in df.columns:
                    assert set(df[col].drop_nulls().to_list()) <= {user, "(all)"}, (p.name, col)
            if "job_id" in df.columns:
                assert set(df["job_id"].to_list()) <= mine, p.name
    names = {p.name.rsplit("-", 1)[-1] for p in paths}
    assert not {"user_ranking.csv", "team_ranking.csv", "fairshare.csv"} & names
    page = _page(_file(paths, ".html"))
    cells = {htmlmod.unescape(v) for t in page.tables.values() for r in t for v in r.values()}
    fig_text = set()
    for data, _layout in figures(_file(paths, ".html").read_text()).values():
        for trace in data:
            for key in ("x", "y", "text", "name"):
                vals = trace.get(key)
                fig_text.update(map(str, vals if isinstance(vals, list) else [vals]))
    leaked = {o for o in others if o in cells or any(o == htmlmod.unescape(t) for t in fig_text)}
    assert not leaked
    shown = {htmlmod.unescape(r["job_name"]) for r in page.tables["jobs"]}
    assert {XSS_NAME, BREAKOUT_NAME, FORMULA_NAME} <= shown  # the hostile names are shown, as text
    low = {htmlmod.unescape(r["job_name"]) for r in page.tables["low_efficiency_jobs"]}
    assert XSS_NAME in low


# ------------------------------------------------------------------ safety
def test_log_values_are_escaped_in_html(reports):
    for audience in ("platform", "user"):
        text = _file(reports[audience], ".html").read_text()
        page = _page(_file(reports[audience], ".html"))
        assert XSS_NAME not in text and "<img" not in text.lower()
        for body in page.scripts:  # every script is plotly.js or a figure call: none was injected
            assert body.lstrip().startswith(("/**", "window.PLOTLYENV")) or "plotly.js" in body[:2000], body[:80]
        assert len(page.scripts) == 1 + len(figures(text))
    user_text = _file(reports["user"], ".html").read_text()
    assert htmlmod.escape(XSS_NAME, quote=False) in user_text
    assert "&lt;img src=x onerror=alert(3)&gt;" in _file(reports["platform"], ".html").read_text()


def test_csv_cells_cannot_become_formulas(reports):
    path = _file(reports["user"], "-jobs.csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    names = {r["job_name"] for r in rows}
    assert "'" + FORMULA_NAME in names and FORMULA_NAME not in names
    assert "'@SUM(1+1)" in names and "'-2+3" in names
    assert XSS_NAME in names  # '<' is no formula trigger: kept as is
    for r in rows:  # numbers stay numbers
        if r["gpu_efficiency"]:
            assert not r["gpu_efficiency"].startswith("'") and 0 <= float(r["gpu_efficiency"]) <= 1
    assert all(float(r["gpu_seconds_wasted"]) >= 0 for r in rows if r["gpu_seconds_wasted"] not in ("", "NaN"))
    low = list(csv.DictReader(io.StringIO(_file(reports["user"], "-low_efficiency_jobs.csv").read_text())))
    assert all(not r["job_name"].startswith(("=", "+", "-", "@")) for r in low)
    changes = list(csv.DictReader(io.StringIO(_file(reports["platform"], "-quota_changes.csv").read_text())))
    negative = [r["coefficient_change"] for r in changes if r["coefficient_change"].startswith("-")]
    assert negative and all(float(v) < 0 for v in negative)  # a negative number is not neutralised
    ranking = list(csv.DictReader(io.StringIO(_file(reports["platform"], "-user_ranking.csv").read_text())))
    assert EVIL_USER in {r["user"] for r in ranking}  # '<' is no formula trigger: kept as is


# ------------------------------------------------------------------ empty window, reruns, failures
def test_empty_window_reports_that_it_is_empty(store, tmp_path):
    paths = build_report(store, 7 * 86400, end="2001-01-07", formats="html,csv", out_dir=tmp_path)
    html = _file(paths, ".html")
    assert html.name == "quotaloop-report-2001-01-01_2001-01-07.html"
    text = html.read_text()
    assert 'id="empty-window"' in text and "No jobs ran in this window" in text
    totals = list(csv.DictReader(io.StringIO(_file(paths, "-totals.csv").read_text())))
    assert [r["resource"] for r in totals] == ["GPU", "CPU", "memory"]
    assert all(r["requested"] in ("", "0.0") for r in totals)
    assert _file(paths, "-user_ranking.csv").read_text().startswith("user,")  # header only
    assert len(_file(paths, "-user_ranking.csv").read_text().strip().splitlines()) == 1


def test_rerun_replaces_files_atomically_with_identical_bytes(store, tmp_path):
    _, user = subject()
    store_before = {(p.relative_to(store), p.stat().st_mtime_ns, p.stat().st_size) for p in store.rglob("*")}
    first = build_report(store, 7 * 86400, end=window_end(), audience="user", user=user,
                         formats="html,csv,parquet", out_dir=tmp_path)
    before = {p.name: (p.read_bytes(), p.stat().st_ino) for p in first}
    second = build_report(store, 7 * 86400, end=window_end(), audience="user", user=user,
                          formats="html,csv,parquet", out_dir=tmp_path)
    assert [p.name for p in second] == [p.name for p in first]
    for p in second:
        data, inode = before[p.name]
        assert p.read_bytes() == data, p.name           # deterministic
        assert p.stat().st_ino != inode, p.name         # a new file swapped in, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)  # no temporaries left
    # reports only read the store (it may be mounted read-only)
    assert {(p.relative_to(store), p.stat().st_mtime_ns, p.stat().st_size) for p in store.rglob("*")} == store_before


def test_scope_errors_are_one_line(store, tmp_path):
    with pytest.raises(ReportError, match="needs --user"):
        build_report(store, 7 * 86400, audience="user", out_dir=tmp_path)
    with pytest.raises(ReportError, match="needs --team"):
        build_report(store, 7 * 86400, audience="manager", out_dir=tmp_path)
    with pytest.raises(ReportError, match="unknown report format pdf"):
        build_report(store, 7 * 86400, formats="html,pdf", out_dir=tmp_path)
    with pytest.raises(ReportError, match="no such directory"):
        build_report(tmp_path / "nope", 7 * 86400, out_dir=tmp_path / "out")
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ budget tree
def _budgets_toml(path: Path, accounts) -> Path:
    """Equal shares at every level of the accounts' own tree (a budget tree the store's logs fully name)."""
    nodes = sorted({"/".join(a.split("/")[: i + 1]) for a in accounts for i in range(len(a.split("/")))})
    lines = ["cluster_gpus = 1024"]
    for node in nodes:
        lines += [f"[tree.{'.'.join(json.dumps(part) for part in node.split('/'))}]", "share = 1"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_budget_tree_drives_fair_share(store, tmp_path):
    from engine.budgets import load
    from queries.analytics import budgets

    w = make_window(7 * 86400, window_end())
    accounts = queries.run("job_waste", store=store, **_window())["account"].unique().to_list()
    toml = _budgets_toml(tmp_path / "budgets.toml", accounts)
    paths = build_report(store, 7 * 86400, end=window_end(), formats="parquet", out_dir=tmp_path / "out",
                         budgets=toml)
    shown = pl.read_parquet(_file(paths, "-fairshare.parquet"))
    expected = budgets.attainment(store, load(toml), w.start, w.end).table
    expected = expected.filter((pl.col("demanded_gpu_hours") > 0) | (pl.col("kind") == "node"))
    assert shown["team"].to_list() == expected["node"].to_list()
    assert shown["entitled_gpu_hours"].to_list() == pytest.approx(expected["entitled_gpu_hours"].to_list())
    assert shown["attainment"].to_list() == pytest.approx(expected["attainment"].to_list(), nan_ok=True)
    bad = tmp_path / "bad.toml"
    bad.write_text('[tree.a]\nshare = -1\n')
    with pytest.raises(ReportError, match=r"^budgets: .*share"):
        build_report(store, 7 * 86400, end=window_end(), formats="html", out_dir=tmp_path / "o2", budgets=bad)
    assert not (tmp_path / "o2").exists()


def test_a_log_without_usage_gets_no_chart_of_zero_waste(tmp_path):
    """An SWF log whose jobs record no CPU time (field 6 is -1): the report says the waste per day is unknown
    instead of drawing days of zero waste, and its totals leave used and wasted empty."""
    from queries.ingest import ingest

    swf = tmp_path / "nousage.swf"
    swf.write_text("; UnixStartTime: 1000000000\n; MaxProcs: 8\n"
                   "1 0 10 3600 4 -1 -1 4 7200 -1 1 1 1 1 1 1 -1 -1\n"
                   "2 60 20 1800 2 -1 -1 2 3600 -1 1 2 1 1 1 1 -1 -1\n")
    store = tmp_path / "store"
    ingest([swf], store, fmt="swf", procs_per_node=2)
    paths = build_report(store, 7 * 86400, end="2001-09-10", formats="html,csv", out_dir=tmp_path / "out")
    text = _file(paths, ".html").read_text()
    assert "the waste per day is unknown, not 0" in text
    assert 'data-chart="waste_trend"' not in text and 'data-chart="pyramid"' in text
    totals = {r["resource"]: r for r in csv.DictReader(io.StringIO(_file(paths, "-totals.csv").read_text()))}
    assert float(totals["CPU"]["requested"]) == pytest.approx((4 * 3600 + 2 * 1800) / 3600)
    assert totals["CPU"]["used"] == totals["CPU"]["wasted"] == ""
