"""Stores for the report tests (imported by tests/report/test_report*.py and tests/e2e; its own tests check the fixture itself).

``report_store()`` is the bundled sample store (sample_data/store) copied to a temporary directory when it
exists, else a small generated store (5 weeks, 5 teams, 14 users, deterministic), written through the real
``Store.transaction()``. Either way it then gets the hostile jobs of ``EVIL_JOBS`` upserted: job names and a
user that try HTML/script injection and spreadsheet-formula injection. Every test works in both cases.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import polars as pl

from queries.analytics import rollup
from queries.store import Store

REPO = Path(__file__).resolve().parents[2]
# QUOTALOOP_REPORT_TEST_STORE runs the report tests on another store (it is copied, never modified).
SAMPLE_STORE = Path(os.environ.get("QUOTALOOP_REPORT_TEST_STORE", REPO / "sample_data" / "store"))
UTC = dt.timezone.utc

XSS_NAME = "<script>alert(1)</script>"
BREAKOUT_NAME = "</script><script>alert(2)</script>"
FORMULA_NAME = '=HYPERLINK("http://x","y")'
EVIL_USER = "<img src=x onerror=alert(3)>"
VICTIM = "mallory"  # a fixture user whose team is the busiest: owner of the hostile jobs in the fixture store

TEAMS = ["acme/vision/detect", "acme/vision/segment", "acme/nlp/llm", "acme/nlp/asr", "acme/infra/tools"]
FIXTURE_FIRST = dt.datetime(2026, 10, 26, tzinfo=UTC)  # a Monday
FIXTURE_DAYS = 35
_CACHE: dict[str, Path] = {}


def _fixture_jobs(n: int = 1400, seed: int = 7) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    users = [f"u{i:02d}" for i in range(13)] + [VICTIM] * 3  # mallory submits the most
    team_of = {u: TEAMS[i % len(TEAMS)] for i, u in enumerate(users)}
    team_of[VICTIM] = TEAMS[0]
    classes = ["training", "debug", "interactive", "eval", "dataprep"]
    rows = []
    for i in range(n):
        user = users[int(rng.integers(len(users)))]
        cls = classes[int(rng.choice(5, p=[0.35, 0.25, 0.1, 0.15, 0.15]))]
        submit = FIXTURE_FIRST + dt.timedelta(seconds=float(rng.uniform(0, FIXTURE_DAYS * 86400 - 7200)))
        wait = float(rng.exponential({"debug": 120, "interactive": 300}.get(cls, 1800)))
        run = float({"training": rng.lognormal(9.5, 1.0), "debug": rng.lognormal(6, 0.8),
                     "interactive": rng.lognormal(8, 0.6), "eval": rng.lognormal(7.5, 0.7),
                     "dataprep": rng.lognormal(8, 0.8)}[cls])
        gpus = 0.0 if cls == "dataprep" else float(rng.choice([1, 2, 4, 8]))
        cpus = float(rng.choice([4, 8, 16, 32, 64]))
        mem = float(rng.choice([16, 64, 128, 256])) * 1e9
        state = str(rng.choice(["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"], p=[0.7, 0.12, 0.13, 0.05]))
        start = submit + dt.timedelta(seconds=wait)
        end = start + dt.timedelta(seconds=run)
        gu = float(rng.beta(2, 3)) if gpus else None
        rows.append(dict(
            cluster="fixture", job_id=str(10000 + i), job_name=f"{cls}-run{i % 17}", user=user,
            account=team_of[user], partition="gpu" if gpus else "cpu", qos="normal", job_class=cls, state=state,
            exit_code="0:0", submit=submit, start=start, end=end, elapsed_s=run, time_limit_s=run * 2 + 600,
            nodes=1, node_list=f"n{int(rng.integers(16)):02d}", req_cpus=cpus, req_gpus=gpus, gpu_type="a100",
            req_mem_bytes=mem, alloc_cpus=cpus, alloc_gpus=gpus, alloc_mem_bytes=mem,
            cpu_seconds_used=cpus * run * float(rng.beta(2, 4)), max_rss_bytes=mem * float(rng.beta(2, 3)),
            mean_gpu_util=gu, max_gpu_util=None if gu is None else min(1.0, gu + 0.2),
            max_cpu_util=float(rng.uniform(0.2, 1.0)), source="csv", source_file="fixture",
        ))
    return pl.DataFrame(rows)


def evil_jobs(day: dt.date, account: str, owner: str) -> pl.DataFrame:
    """Hostile jobs of ``owner`` in ``account``, all running on ``day``, large and wasteful enough to appear in
    rankings and in the owner's low-efficiency list; the last belongs to a user whose name is the payload."""
    base = dt.datetime.combine(day, dt.time(1, 0), tzinfo=UTC)
    rows = []
    for k, (name, user) in enumerate([(XSS_NAME, owner), (BREAKOUT_NAME, owner), (FORMULA_NAME, owner),
                                      ("@SUM(1+1)", owner), ("-2+3", owner), ("plain", EVIL_USER)]):
        start = base + dt.timedelta(minutes=10 * k)
        # big and idle, so they top any store's lists: the hostile user ranks among the largest wasters and the
        # owner's hostile jobs among the owner's most wasteful and least efficient jobs
        big = user == EVIL_USER
        run, gpus, util = (47 * 3600.0, 64.0, 0.02) if big else (20 * 3600.0, 16.0, 0.002 * (k + 1))
        rows.append(dict(
            cluster="evil", job_id=f"e{k}", job_name=name, user=user, account=account, partition="gpu",
            qos="normal", job_class="training", state="COMPLETED", exit_code="0:0",
            submit=start - dt.timedelta(minutes=5), start=start, end=start + dt.timedelta(seconds=run),
            elapsed_s=run, time_limit_s=2 * run, nodes=1, node_list="e01", req_cpus=32.0, req_gpus=gpus,
            gpu_type="a100", req_mem_bytes=256e9, alloc_cpus=32.0, alloc_gpus=gpus, alloc_mem_bytes=256e9,
            cpu_seconds_used=32 * run * 0.05, max_rss_bytes=20e9, mean_gpu_util=util,
            max_gpu_util=0.2, max_cpu_util=0.1, source="csv", source_file="evil",
        ))
    return pl.DataFrame(rows)


def latest_day(store: Path) -> dt.date:
    files = Store(store).files("jobs")
    last = pl.scan_parquet(files).select(pl.max_horizontal(pl.col("end").max(), pl.col("submit").max())).collect()
    return last.item().date()


def _subject(store: Path) -> tuple[str, str]:
    """The busiest account and its busiest user: the manager and user reports are built for them."""
    jobs = Store(store).read("jobs").filter(pl.col("account").is_not_null() & pl.col("user").is_not_null())
    team = jobs.group_by("account").len().sort(["len", "account"], descending=[True, False])["account"][0]
    user = (jobs.filter(pl.col("account") == team).group_by("user").len()
            .sort(["len", "user"], descending=[True, False])["user"][0])
    return team, user


def report_store(base_tmp: Path) -> Path:
    """The store every report test uses (built once per session). See ``subject()`` and ``window_end()``."""
    if "store" in _CACHE:
        return _CACHE["store"]
    root = base_tmp / "report-store"
    if SAMPLE_STORE.joinpath("_manifest.json").exists():
        shutil.copytree(SAMPLE_STORE, root)
        end = latest_day(root)
    else:
        with Store(root).transaction() as tx:
            tx.upsert("jobs", _fixture_jobs())
            n = 32
            nodes = pl.DataFrame({"node": [f"n{i:02d}" for i in range(n)], "partition": ["gpu"] * n,
                                  "cpus": [128.0] * n, "gpus": [8.0] * n, "gpu_type": ["a100"] * n,
                                  "mem_bytes": [2e12] * n, "state": ["idle"] * n})
            tx.replace_nodes("fixture", nodes)
        end = (FIXTURE_FIRST + dt.timedelta(days=FIXTURE_DAYS - 1)).date()
    team, user = _subject(root)
    with Store(root).transaction() as tx:
        tx.upsert("jobs", evil_jobs(end - dt.timedelta(days=2), team, user))
        rollup.refresh(tx)  # the copied sample store keeps usage rollups: they must follow the new jobs
    _CACHE.update(store=root, end=end, team=team, user=user)
    return root


def window_end() -> dt.date:
    """Last day of the 7-day window the tests report on; the hostile jobs run two days before it."""
    return _CACHE["end"]


def subject() -> tuple[str, str]:
    """(team, user): the manager report's team and the user report's user (owner of the hostile jobs)."""
    return _CACHE["team"], _CACHE["user"]


def built_reports(base_tmp: Path) -> dict[str, list[Path]]:
    """The three audiences' reports (HTML, CSV, Parquet) of the 7-day window, built once per session into
    separate directories. Tests must treat them as read-only."""
    if "reports" in _CACHE:
        return _CACHE["reports"]
    from dashboard.report import build_report

    root = report_store(base_tmp)
    team, user = subject()
    out = {}
    for audience, kw in (("platform", {}), ("manager", {"team": team}), ("user", {"user": user})):
        out[audience] = build_report(root, 7 * 86400, end=window_end(), audience=audience,
                                     formats="html,csv,parquet", out_dir=base_tmp / f"reports-{audience}", **kw)
    _CACHE["reports"] = out
    return out


def figures(html: str) -> dict[str, tuple[list, dict]]:
    """Each embedded Plotly figure's (data, layout), by div id, parsed back from the page's script."""
    out = {}
    decoder = json.JSONDecoder()
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', html):
        data, pos = decoder.raw_decode(html, m.end())
        pos = html.index("{", pos)
        layout, _ = decoder.raw_decode(html, pos)
        out[m.group(1)] = (data, layout)
    return out


def test_fixture_store_holds_the_hostile_jobs(tmp_path_factory):
    root = report_store(tmp_path_factory.getbasetemp())
    jobs = Store(root).read("jobs")
    names = set(jobs["job_name"].to_list())
    assert {XSS_NAME, BREAKOUT_NAME, FORMULA_NAME} <= names
    assert EVIL_USER in set(jobs["user"].to_list())
    assert jobs.filter(pl.col("cluster") != "evil").height > 100
