"""``quotaloop simulate --workload`` as a process: what it loads and that its outputs are whole when it ends.

Start-up is a fixed cost of every run (issue 16: the whole HPC2N process against a C loop), so the workload path
must not import the query room's DuckDB: reading a scheduler export needs Polars only.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "swf" / "tiny.swf"


def _simulate_in_child(out, *extra: str) -> dict:
    code = ("import json, sys; from dashboard.cli import main; "
            f"code = main(['simulate', '--workload', {str(TINY)!r}, '--procs', '8', '--out', {str(out)!r}, "
            f"*{list(extra)!r}]); "
            "print(json.dumps({'code': code, 'loaded': sorted(m for m in ('duckdb', 'pyarrow', 'plotly', "
            "'streamlit', 'queries.analytics', 'queries.store.connection') if m in sys.modules)}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_simulate_workload_loads_no_duckdb(tmp_path):
    got = _simulate_in_child(tmp_path / "sim")
    assert got["code"] == 0
    assert got["loaded"] == []
    # and it did simulate: the outputs are there (a run that failed early would load nothing too)
    assert pl.read_parquet(tmp_path / "sim" / "jobs.parquet").height > 0
    assert json.loads((tmp_path / "sim" / "metrics.json").read_text())["workload"]["rows_read"] > 0


def test_simulate_as_a_program_ends_with_complete_outputs(tmp_path):
    """The ``quotaloop`` script leaves without the interpreter's teardown after ``simulate`` (dashboard.cli's
    ``_end_process``): its summary line, even through a pipe, and every output file are complete, and the
    outputs equal an in-process run's (which returns normally)."""
    script = Path(sys.executable).with_name("quotaloop")
    args = ["simulate", "--workload", str(TINY), "--procs", "8"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered, as in a pipe
    done = subprocess.run([str(script), *args, "--out", str(tmp_path / "proc")], cwd=REPO, capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{TINY}: read ") and "jobs simulated" in lines[-1] and done.stdout.endswith("\n")
    as_json = subprocess.run([str(script), *args, "--out", str(tmp_path / "json"), "--json"], cwd=REPO,
                             capture_output=True, text=True, check=True, env=env).stdout
    assert json.loads(as_json)["workload"]["rows_read"] > 0  # the whole JSON document reached the pipe
    from dashboard.cli import main

    assert main([*args, "--out", str(tmp_path / "inproc")]) == 0  # in-process: returns, pytest goes on
    for name in ("jobs.parquet", "timeline.parquet", "metrics.json"):
        assert (tmp_path / "proc" / name).read_bytes() == (tmp_path / "inproc" / name).read_bytes(), name
    assert not list((tmp_path / "proc").glob(".*.tmp"))
