"""``quotaloop query --format table``: as many columns as fit the terminal, ``--columns`` to choose, and notes
saying what was left out; ``--columns`` applies to csv/json too."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from test_queries_fixture import build


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("cli-table"))


def _cli(*args, columns=None, check=True):
    env = dict(os.environ, **({"COLUMNS": str(columns)} if columns else {}))
    proc = subprocess.run([sys.executable, "-m", "dashboard.cli", "query", *args], capture_output=True, text=True,
                          timeout=300, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_table_fits_the_terminal_and_names_the_columns_it_left_out(store):
    out = _cli("user_ranking", "--store", str(store), columns=100).stdout
    lines = out.splitlines()
    table = [ln for ln in lines if ln.startswith(("┌", "│", "╞", "└"))]
    assert table and max(len(ln) for ln in table) <= 100
    note = [ln for ln in lines if "more columns" in ln]
    assert len(note) == 1 and "rec_coefficient" in note[0] and "--columns" in note[0]
    assert "rec_coefficient" not in "\n".join(table)
    wide = _cli("user_ranking", "--store", str(store), columns=2000).stdout
    assert "more columns" not in wide and "rec_coefficient" in wide


def test_columns_select_and_order_in_every_format(store):
    table = _cli("user_ranking", "--store", str(store), "-c", "job_count,user", columns=100).stdout
    header = next(ln for ln in table.splitlines() if ln.startswith("│"))
    assert [c.strip() for c in header.strip("│").split("┆")] == ["job_count", "user"]
    rows = list(csv.reader(io.StringIO(_cli("user_ranking", "--store", str(store), "-f", "csv",
                                           "--columns", "user,job_count").stdout)))
    assert rows[0] == ["user", "job_count"] and len(rows) > 1
    data = json.loads(_cli("user_ranking", "--store", str(store), "-f", "json", "-c", "user").stdout)
    assert data and all(list(r) == ["user"] for r in data)


def test_unknown_column_is_one_line_error(store):
    proc = _cli("user_ranking", "--store", str(store), "-c", "user,nope", check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown column(s) nope" in lines[0] and "job_count" in lines[0]
