"""``quotaloop rollup``: the status line of a store without and with its rollup, ``--rebuild`` in one commit, and
that the rebuilt rows are what the queries then read (the same answers)."""
from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from dashboard.cli import main
from queries.analytics import run
from queries.store import Store

from test_queries_fixture import build


def _cli(capsys, *args) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_status_then_rebuild_then_status(tmp_path, capsys):
    store = build(tmp_path / "store")  # written straight through a transaction: no rollup yet
    jobs = Store(store).read("jobs").height
    before = run("job_waste", store)
    rc, out, err = _cli(capsys, "rollup", "--store", str(store))
    assert (rc, err) == (0, "")
    assert f"{jobs} jobs, 0 with a rollup row; {jobs} jobs without a row" in out and "--rebuild" in out
    manifest = (store / "_manifest.json").read_text()
    rc, out, err = _cli(capsys, "rollup", "--store", str(store), "--rebuild")
    assert (rc, err, out.strip()) == (0, "", f"{store}: job_rollup rebuilt: {jobs} rows")
    assert (store / "_manifest.json").read_text() != manifest
    rows = Store(store).read("job_rollup")
    assert rows.height == jobs and rows.select(pl.struct("cluster", "job_id").is_unique().all()).item()
    rc, out, err = _cli(capsys, "rollup", "--store", str(store))
    assert (rc, err, out.strip()) == (0, "", f"{store}: {jobs} jobs, {jobs} with a rollup row")
    assert_frame_equal(run("job_waste", store), before, check_exact=False, rel_tol=1e-9)
