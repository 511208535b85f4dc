"""``quotaloop simulate --workload`` as a process: what it loads and that its outputs are whole when it ends.

Start-up is a fixed cost of every run (issue 16: the whole HPC2N process against a C loop), so the workload path
must not import the query room's DuckDB: reading a scheduler export needs Polars only.
"""
from __future__ import annotations

import json
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
