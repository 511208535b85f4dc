"""The Reports page builds what ``quotaloop report`` writes for the same filters: every sidebar filter (window,
partition, account subtree, state, job class) and the configured budget file reach ``build_report``, and the
command the page prints, run as a real subprocess, writes byte-identical files. Figures are checked against an
independent computation from the fixture definition."""
from __future__ import annotations

import datetime as dt
import io
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest

import dashboard_fixture as fx
from test_dashboard_access import ALICE
from test_dashboard_pages import downloaded, make_app, no_errors, store  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[2]
UTC = dt.timezone.utc
FIRST, LAST = dt.date(2026, 11, 3), dt.date(2026, 11, 6)  # a sub-window: jobs straddle both edges


def _budgets(path: Path) -> Path:
    lines = ["cluster_gpus = 32"]
    for node, share in (("lab", 1), ("lab/vision", 3), ("lab/vision/detect", 1), ("lab/vision/seg", 1),
                        ("lab/nlp", 1), ("lab/nlp/llm", 1)):
        lines += [f"[tree.{'.'.join(node.split('/'))}]", f"share = {share}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _set_filters(at, *, account=None, state=None, job_class=None):
    at.date_input(key="flt_window").set_value((FIRST, LAST)).run()
    for key, value in (("flt_account", account), ("flt_state", state), ("flt_class", job_class)):
        if value:
            at.selectbox(key=key).select(value).run()
    no_errors(at)


def _build(at, formats=("html", "csv", "parquet")) -> tuple[dict[str, bytes], list[str]]:
    at.multiselect(key="rep_formats").set_value(list(formats)).run()
    at.button(key="rep_build").click().run()
    no_errors(at)
    assert at.success, "the report was not built"
    with zipfile.ZipFile(io.BytesIO(downloaded(at, "rep_dl_zip"))) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    command = next(c.value for c in at.code if c.value.startswith("quotaloop report"))
    return files, shlex.split(command)


def _cli(argv: list[str], out: Path, env_extra: dict | None = None) -> dict[str, bytes]:
    assert argv[:2] == ["quotaloop", "report"] and argv[-2] == "--out"
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    r = subprocess.run([sys.executable, "-m", "dashboard.cli", *argv[1:-1], str(out)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _same(page: dict[str, bytes], cli: dict[str, bytes]) -> None:
    assert sorted(page) == sorted(cli)
    for name in page:
        a, b = page[name], cli[name]
        if a != b:
            at = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y) if len(a) == len(b) else min(len(a), len(b))
            raise AssertionError(f"{name} differs at byte {at}: page {a[at - 80:at + 80]!r} vs cli {b[at - 80:at + 80]!r}")


def _expected_gpu_wasted_h(accounts_prefix: str, state: str | None, job_class: str | None) -> float:
    """GPU-hours wasted inside [FIRST, LAST + 1 day) from the fixture definition (constant utilisation per user)."""
    lo = dt.datetime.combine(FIRST, dt.time(), tzinfo=UTC)
    hi = dt.datetime.combine(LAST + dt.timedelta(days=1), dt.time(), tzinfo=UTC)
    total = 0.0
    for j in fx.jobs_frame().iter_rows(named=True):
        if not (j["account"] + "/").startswith(accounts_prefix + "/"):
            continue
        if (state and j["state"] != state) or (job_class and j["job_class"] != job_class):
            continue
        overlap_s = (min(j["end"], hi) - max(j["start"], lo)).total_seconds()
        if overlap_s > 0:
            total += j["req_gpus"] * overlap_s / 3600 * (1 - fx.USERS[j["user"]][2])
    return total


def test_platform_report_from_the_page_equals_the_cli_for_the_same_filters(make_app, tmp_path, monkeypatch):
    budgets = _budgets(tmp_path / "budgets.toml")
    monkeypatch.setenv("QUOTALOOP_BUDGETS", str(budgets))
    at = make_app()
    at.switch_page("views/reports.py").run()
    _set_filters(at, account="lab/vision", state="COMPLETED", job_class="training")
    files, argv = _build(at)
    for flag, value in (("--window", "4d"), ("--end", LAST.isoformat()), ("--team", "lab/vision"),
                        ("--state", "COMPLETED"), ("--job-class", "training"), ("--budgets", str(budgets)),
                        ("--audience", "platform")):
        assert argv[argv.index(flag) + 1] == value, flag
    cli = _cli(argv, tmp_path / "cli")
    assert sorted(files) == sorted(cli)
    _same(files, cli)  # byte-identical: same figures, same tables, same HTML
    stem = f"quotaloop-report-{FIRST}_{LAST}-platform-lab.vision"
    assert f"{stem}.html" in files
    # the filters really reached the figures: GPU-hours wasted of completed training jobs of lab/vision only
    totals = pl.read_parquet(io.BytesIO(files[f"{stem}-totals.parquet"]))
    gpu = totals.filter(pl.col("resource") == "GPU").row(0, named=True)
    assert gpu["wasted"] == pytest.approx(_expected_gpu_wasted_h("lab/vision", "COMPLETED", "training"), rel=1e-9)
    unfiltered = _expected_gpu_wasted_h("lab", None, None)
    assert gpu["wasted"] < 0.6 * unfiltered
    ranking = pl.read_parquet(io.BytesIO(files[f"{stem}-user_ranking.parquet"]))
    assert set(ranking["user"]) == {"alice", "bob", "carol"}
    fair = pl.read_parquet(io.BytesIO(files[f"{stem}-fairshare.parquet"]))
    assert set(fair["share_source"]) == {"budgets"}  # the configured budget file, as --budgets gives it


def test_manager_report_team_comes_from_the_sidebar_subtree(make_app, tmp_path):
    at = make_app()
    at.switch_page("views/reports.py").run()
    _set_filters(at, account="lab/nlp/llm")
    at.radio(key="rep_audience").set_value("manager").run()
    assert at.selectbox(key="rep_team").options == ["lab/nlp/llm"]  # only the sidebar's subtree is on offer
    files, argv = _build(at, ("html", "csv"))
    assert argv[argv.index("--team") + 1] == "lab/nlp/llm" and "--budgets" not in argv
    _same(files, _cli(argv, tmp_path / "cli"))
    stem = f"quotaloop-report-{FIRST}_{LAST}-manager-lab.nlp.llm"
    ranking = pl.read_csv(io.BytesIO(files[f"{stem}-user_ranking.csv"]))
    assert sorted(ranking["user"]) == ["dave", "erin"]


def test_researcher_report_is_their_own_with_the_sidebar_filters(make_app, tmp_path):
    at = make_app("oidc", user=ALICE, query_params={"user": "bob", "rep_user": "bob"})
    at.switch_page("views/reports.py").run()
    _set_filters(at, state="COMPLETED")
    assert at.radio(key="rep_audience").options == ["Researcher"]
    files, argv = _build(at, ("html", "csv"))
    assert argv[argv.index("--user") + 1] == "alice" and argv[argv.index("--state") + 1] == "COMPLETED"
    _same(files, _cli(argv, tmp_path / "cli"))
    from plotly.offline import get_plotlyjs

    body = b"".join(files.values())
    library = get_plotlyjs().encode()
    assert library in body  # the inlined plotly.js mentions "north carolina": search the report's own content
    body = body.replace(library, b"")
    for other in sorted(set(fx.USERS) - {"alice"}):
        assert not re.search(rb"\b" + other.encode() + rb"\b", body), other
    jobs = pl.read_csv(io.BytesIO(files[f"quotaloop-report-{FIRST}_{LAST}-user-alice-jobs.csv"]))
    expected = fx.jobs_frame().filter((pl.col("user") == "alice") & (pl.col("state") == "COMPLETED")
                                      & (pl.col("start") < dt.datetime.combine(LAST + dt.timedelta(days=1),
                                                                               dt.time(), tzinfo=UTC))
                                      & (pl.col("end") > dt.datetime.combine(FIRST, dt.time(), tzinfo=UTC)))
    assert sorted(jobs["job_id"]) == sorted(expected["job_id"])


def test_changing_a_filter_after_a_build_asks_for_a_rebuild(make_app):
    at = make_app()
    at.switch_page("views/reports.py").run()
    at.button(key="rep_build").click().run()
    assert at.success
    at.selectbox(key="flt_state").select("FAILED").run()
    no_errors(at)
    assert not at.success and any("press **Build report** again" in c.value for c in at.caption)
    assert "--state FAILED" in next(c.value for c in at.code)
