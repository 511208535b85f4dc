"""The report's validation section (issue 18, "the report has a validation section"): the what-if baseline
replayed over the report's window and compared with the log (``sections.validation`` through
``dashboard.whatif.runner.window_fidelity``). Its figures agree with its own table and with the log, a hostile
job class stays text in the HTML and inert in the CSV, a store without a node list validates on the layout its
jobs name (and says so) or says why it cannot, the user report and
``--no-validation`` leave it out."""
from __future__ import annotations

import csv
import datetime as dt
import html as html_lib
import io
import re
from pathlib import Path

import polars as pl
import pytest

import dashboard_fixture as fx
from dashboard.cli import main
from dashboard.report.build import build_report
from dashboard.whatif import loader
from queries.store import Store

XSS_CLASS = "<script>alert('cls')</script>"
FORMULA_CLASS = '=HYPERLINK("http://x","y")'
END = dt.date(2026, 11, 8)  # the fixture's 7 days: 2026-11-02 .. 2026-11-08


def tiny_store(root: Path, *, nodes: bool = True, hostile: bool = False, named_nodes: bool = True) -> Path:
    """``dashboard_fixture``'s 4-node cluster; ``hostile``: two jobs with a script / a formula as their class;
    ``named_nodes`` False: the jobs name no nodes (no node list to infer a layout from)."""
    jobs = fx.jobs_frame()
    if not named_nodes:
        jobs = jobs.with_columns(pl.lit(None, dtype=pl.String).alias("node_list"))
    if hostile:
        jobs = jobs.with_columns(pl.when(pl.int_range(pl.len()) % 5 == 1).then(pl.lit(XSS_CLASS))
                                 .when(pl.int_range(pl.len()) % 5 == 2).then(pl.lit(FORMULA_CLASS))
                                 .otherwise(pl.col("job_class")).alias("job_class"))
    with Store(root).transaction() as tx:
        tx.upsert("jobs", jobs)
        if nodes:
            tx.replace_nodes(fx.CLUSTER, fx.nodes_frame())
    return root


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("val")
    store = tiny_store(root / "store", hostile=True)
    paths = build_report(store, 7 * 86400.0, end=END, out_dir=root / "out")
    return store, {p.name: p for p in paths}


def _one(files: dict, suffix: str) -> Path:
    return next(p for n, p in files.items() if n.endswith(suffix))


def test_the_section_and_its_table_are_written(hostile_report):
    _, files = hostile_report
    html = _one(files, ".html").read_text()
    assert "How far to trust a what-if: the simulator against the log" in html
    assert re.search(r"On the last 7 days the modeled baseline (reproduces logged p90 waits within|misses logged p90 "
                     r"waits by) \d+ %", html)
    assert "Verdict: over " in html
    table = pl.read_csv(_one(files, "-validation.csv"))
    assert table["scope"][0] == "overall"


def test_the_figures_agree_with_the_table_and_the_log(hostile_report):
    store, files = hostile_report
    rows = list(csv.DictReader(io.StringIO(_one(files, "-validation.csv").read_text())))
    o = rows[0]
    n, mean_log, mean_sim = int(o["n"]), float(o["mean_log_s"]), float(o["mean_sim_s"])
    assert float(o["mean_rel_err"]) == pytest.approx((mean_sim - mean_log) / mean_log)
    # independent of engine.fidelity: the logged waits of the jobs submitted in the window, straight from the store
    jobs = Store(store).read("jobs")
    t0 = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)
    w = jobs.filter((pl.col("submit") >= t0) & (pl.col("submit") < t0 + dt.timedelta(days=7))
                    & pl.col("start").is_not_null())
    waits = (w["start"] - w["submit"]).dt.total_seconds().cast(pl.Float64)
    # compared = started both in the log and in the replay: a few may still wait in the replay at the window end
    assert 0.9 * w.height <= n <= w.height
    if n == w.height:
        assert mean_log == pytest.approx(float(waits.mean()))
    # per class and size rows partition the compared jobs
    assert sum(int(r["n"]) for r in rows if r["scope"].startswith("class:")) == n
    assert sum(int(r["n"]) for r in rows if r["scope"].startswith("size:")) == n


def test_a_hostile_job_class_is_text_in_html_and_inert_in_csv(hostile_report):
    _, files = hostile_report
    html = _one(files, ".html").read_text()
    assert XSS_CLASS not in html and "class:&lt;script&gt;" in html
    raw = _one(files, "-validation.csv").read_text()
    cells = [c for row in csv.reader(io.StringIO(raw)) for c in row]
    assert f"class:{FORMULA_CLASS}" in cells  # the scope prefix keeps the class from starting a cell
    assert not any(c[:1] in ("=", "+", "@") for c in cells)


def test_a_store_without_a_node_list_validates_on_the_layout_its_jobs_name(tmp_path):
    store = tiny_store(tmp_path / "store", nodes=False)
    paths = build_report(store, 7 * 86400.0, end=END, out_dir=tmp_path / "out", formats=("html",))
    html = paths[0].read_text()
    assert "Not validated" not in html
    assert f"Layout: {loader.INFERRED_NOTE}." in html_lib.unescape(html)


def test_a_store_whose_jobs_name_no_nodes_says_so(tmp_path):
    store = tiny_store(tmp_path / "store", nodes=False, named_nodes=False)
    paths = build_report(store, 7 * 86400.0, end=END, out_dir=tmp_path / "out", formats=("html",))
    html = paths[0].read_text()
    assert f"Not validated: {loader.NO_LAYOUT}." in html_lib.unescape(html)


def test_the_user_report_and_no_validation_leave_it_out(tmp_path, capsys):
    store = tiny_store(tmp_path / "store")
    paths = build_report(store, 7 * 86400.0, end=END, audience="user", user="alice", out_dir=tmp_path / "u")
    assert not any(p.name.endswith("-validation.csv") for p in paths)
    assert main(["report", "--store", str(store), "--window", "7d", "--end", str(END), "--no-validation",
                 "--out", str(tmp_path / "p")]) == 0
    names = capsys.readouterr().out
    assert ".html" in names and "-validation" not in names
    assert "How far to trust a what-if" not in next((tmp_path / "p").glob("*.html")).read_text()


def test_the_section_replays_under_the_stores_calibration_and_names_it(tmp_path):
    """A store's own calibration.json (``validate --calibrate --save``) is what the Fair share page and ``scenario``
    replay under, so the report's baseline does too, and its intro says which knobs; a broken file is said, not
    skipped."""
    import json

    from engine.calibrate import FILE_FORMAT

    store = tiny_store(tmp_path / "store")
    (store / "calibration.json").write_text(json.dumps({"format": FILE_FORMAT, "config": {"sched_interval_s": 900},
                                                        "modeled": {"policy": "fcfs", "backfill": "easy"}}))
    html = html_lib.unescape(build_report(store, 7 * 86400.0, end=END, out_dir=tmp_path / "cal",
                                          formats=("html",))[0].read_text())
    assert "under the calibrated knobs from calibration.json (fitted under fcfs/easy): sched_interval_s=900" in html
    plain = html_lib.unescape(build_report(tiny_store(tmp_path / "plain"), 7 * 86400.0, end=END,
                                           out_dir=tmp_path / "p", formats=("html",))[0].read_text())
    # the knob changed the replay, so the validation figures differ from the uncalibrated report's
    figures = [re.search(r"On the last 7 days the modeled baseline [^.]*", h).group(0) for h in (html, plain)]
    assert figures[0] != figures[1]
    (store / "calibration.json").write_text("{}")
    html = html_lib.unescape(build_report(store, 7 * 86400.0, end=END, out_dir=tmp_path / "bad",
                                          formats=("html",))[0].read_text())
    assert "Not validated: the store's calibration cannot be used:" in html and "not a quotaloop calibration" in html
