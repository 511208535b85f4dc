"""``quotaloop report`` as cron runs it: a real subprocess, real files, real failures injected mid-way."""
from __future__ import annotations

import datetime as dt
import os
import resource
import signal
import struct
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from queries.store import Store
from test_report_support import REPO, figures, report_store, subject, window_end


def _cli(*args: str, limit_bytes: int | None = None) -> subprocess.CompletedProcess:
    def limit():  # a real "disk full" for this process only: writes past the limit fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("QUOTALOOP_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "dashboard.cli", "report", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=limit if limit_bytes else None)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return report_store(tmp_path_factory.getbasetemp())


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_cli_writes_html_tables_and_static_charts(store, tmp_path):
    _, user = subject()
    out = tmp_path / "reports"
    r = _cli("--store", str(store), "--window", "7d", "--end", str(window_end()), "--audience", "user",
             "--user", user, "--out", str(out), "--format", "html,csv,parquet,png,svg")
    assert r.returncode == 0, r.stderr
    printed = [Path(line) for line in r.stdout.splitlines()]
    assert printed and all(p.exists() for p in printed)
    assert sorted(p.name for p in printed) == sorted(p.name for p in out.iterdir())
    html = [p for p in printed if p.suffix == ".html"]
    assert len(html) == 1
    n_figs = len(figures(html[0].read_text()))
    pngs = [p for p in printed if p.suffix == ".png"]
    svgs = [p for p in printed if p.suffix == ".svg"]
    assert n_figs >= 4 and len(pngs) == n_figs and len(svgs) == n_figs
    for png in pngs:
        head = png.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", head[16:24])
        assert width >= 300 and height >= 100, png.name
    for svg in svgs:
        assert svg.read_text().lstrip().startswith("<svg")
    assert len([p for p in printed if p.suffix == ".csv"]) == len([p for p in printed if p.suffix == ".parquet"])


def test_cli_write_failure_leaves_no_partial_file(store, tmp_path):
    _, user = subject()
    out = tmp_path / "reports"
    args = ("--store", str(store), "--end", str(window_end()), "--audience", "user", "--user", user,
            "--out", str(out))
    # CSVs and Parquet fit under the limit, the HTML (plotly.js inline, > 4 MB) does not: the write fails
    # mid-way, after several files were staged
    r = _cli(*args, limit_bytes=1_000_000)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quotaloop report: cannot write") and "large" in lines[0]
    assert list(out.iterdir()) == []  # nothing: no report file, no temporary
    assert _cli(*args).returncode == 0
    before = _snapshot(out)
    assert any(len(b) > 1_000_000 for b in before.values()) and len(before) > 5
    r = _cli(*args, limit_bytes=1_000_000)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert _snapshot(out) == before  # the previous report is intact, byte for byte


def test_cli_unreadable_store_is_one_line(tmp_path):
    bad = tmp_path / "store"
    jobs = pl.DataFrame({"cluster": ["c"], "job_id": ["1"], "user": ["a"],
                         "submit": [dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc)]})
    with Store(bad).transaction() as tx:
        tx.upsert("jobs", jobs)
    [part] = Store(bad).files("jobs")
    Path(part).write_bytes(b"PAR1 this is not parquet PAR1")  # a real corrupt file, named in the manifest
    out = tmp_path / "out"
    r = _cli("--store", str(bad), "--end", "2026-11-22", "--out", str(out))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quotaloop report: "), r.stderr
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (("--audience", "user"), "needs --user"),
    (("--window", "7x"), "is not a duration"),
    (("--end", "29/11/2026"), "is not a date"),
    (("--format", "html,pdf"), "unknown report format pdf"),
])
def test_cli_bad_arguments_are_one_line(store, tmp_path, args, message):
    r = _cli("--store", str(store), "--out", str(tmp_path / "o"), *args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], r.stderr
    assert not (tmp_path / "o").exists()
