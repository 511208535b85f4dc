"""QoS preemption (Slurm's PreemptType=preempt/qos), hand-computed on one 8-GPU node.

L: QoS low, 8 GPUs, submitted at 0, runs 10 h (limit 10 h), min runtime 2 h, no checkpoints.
H: QoS high, 8 GPUs, submitted at 0.5 h, runs 1 h. Policy priority (high 3 > low 1), EASY backfill.
- With `high` preempting `low`: H waits until L has run its min runtime (2 h), not before; L is requeued then
  (its 2 h lost), H runs 2 h -> 3 h, L restarts at 3 h and ends at 13 h.
- Without pairs, or with pairs that do not name (high, low): H waits for L to end (10 h) - the 19 h wait of
  the issue's hand case is this, at another scale.
"""
from __future__ import annotations


import polars as pl
import pytest

import engine
from engine.budgets import BudgetError, parse
from queries.store import schema

from test_scenarios import h, job, nodes


def _jobs(l_min_rt=2 * 3600.0, h_submit=0.5):
    rows = [dict(job("L", "lab", 8, 0, 10, min_rt=l_min_rt, limit_h=10), qos="low"),
            dict(job("H", "lab", 8, h_submit, 1, limit_h=1), qos="high")]
    return schema.conform(pl.DataFrame(rows), "jobs").sort("submit", "job_id")


def _run(jobs, **cfg):
    return engine.simulate(jobs, nodes(1), engine.SimConfig(policy="priority", backfill="easy", **cfg))


def _rows(res) -> dict:
    return {r["job_id"]: r for r in res.jobs.iter_rows(named=True)}


def test_high_qos_preempts_low_once_its_min_runtime_has_passed():
    res = _run(_jobs(), qos_preempts={"high": ["low", "normal"]})
    rows = _rows(res)
    assert set(rows) == {"L;0", "L", "H"}
    assert rows["L;0"]["state"] == "PREEMPTED"
    assert (rows["L;0"]["start"], rows["L;0"]["end"]) == (h(0), h(2))
    assert (rows["H"]["start"], rows["H"]["end"]) == (h(2), h(3))
    assert (rows["L"]["start"], rows["L"]["end"]) == (h(3), h(13))
    assert res.metrics["preemptions"] == 1
    assert res.metrics["lost_gpu_hours"] == pytest.approx(16.0)


def test_min_runtime_protects_the_victim_for_its_whole_length():
    """L's min runtime 5 h: H (submitted at 0.5 h) starts at 5 h, not earlier."""
    rows = _rows(_run(_jobs(l_min_rt=5 * 3600.0), qos_preempts={"high": ["low"]}))
    assert rows["H"]["start"] == h(5) and rows["L;0"]["end"] == h(5)


def test_no_preemption_without_pairs_or_between_unpaired_qos():
    for cfg in ({}, {"qos_preempts": {"normal": ["low"]}}, {"qos_preempts": {"high": ["normal"]}}):
        rows = _rows(_run(_jobs(), **cfg))
        assert set(rows) == {"L", "H"}, cfg
        assert rows["L"]["start"] == h(0) and rows["L"]["end"] == h(10)
        assert rows["H"]["start"] == h(10), cfg


def test_a_victim_without_a_min_runtime_contract_is_never_preempted():
    rows = _rows(_run(_jobs(l_min_rt=None), qos_preempts={"high": ["low"]}))
    assert rows["H"]["start"] == h(10) and "L;0" not in rows


def test_the_budget_files_qos_table_sets_the_pairs():
    tree = parse('[qos]\nhigh = { preempts = ["low"] }\n[tree.lab]\nshare = 1\n')
    assert tree.qos_preempts == (("high", ("low",)),)
    rows = _rows(_run(_jobs(), budgets=tree))
    assert rows["H"]["start"] == h(2) and rows["L"]["end"] == h(13)
    # an explicit config wins over the file (here: pairs that do not apply)
    rows = _rows(_run(_jobs(), budgets=tree, qos_preempts={"normal": ["low"]}))
    assert rows["H"]["start"] == h(10)


@pytest.mark.parametrize("text,needle", [
    ('[qos]\nhigh = ["low"]\n[tree.lab]\n', "must be a table"),
    ('[qos]\nhigh = { preempts = "low" }\n[tree.lab]\n', "preempts must be a list"),
    ('[qos]\nhigh = { preempt = ["low"] }\n[tree.lab]\n', "unknown key 'preempt'"),
    ('[qos]\nhigh = { preempts = ["high"] }\n[tree.lab]\n', "cannot preempt itself"),
])
def test_bad_qos_tables_are_one_line_errors(text, needle):
    with pytest.raises(BudgetError, match=needle):
        parse(text)


def test_qos_preemption_is_deterministic(tmp_path):
    a = _run(_jobs(), qos_preempts={"high": ["low"]}, seed=3)
    b = _run(_jobs(), qos_preempts={"high": ["low"]}, seed=3)
    a.write(tmp_path / "a")
    b.write(tmp_path / "b")
    for name in ("jobs.parquet", "timeline.parquet", "metrics.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert {k: list(v) for k, v in a.metrics["params"]["qos_preempts"].items()} == {"high": ["low"]}
    # without pairs the parameter is not listed: earlier runs' metrics.json are unchanged
    assert "qos_preempts" not in _run(_jobs()).metrics["params"]


def test_simulate_cli_qos_preempt(tmp_path, capsys):
    from dashboard.cli import main

    wl, layout = tmp_path / "jobs.csv", tmp_path / "nodes.csv"
    _jobs().write_csv(wl)
    nodes(1).write_csv(layout)
    base = ["simulate", "--workload", str(wl), "--format", "csv", "--nodes-csv", str(layout), "--policy", "priority"]
    assert main(base + ["--qos-preempt", "high=low,normal", "--out", str(tmp_path / "a")]) == 0
    got = pl.read_parquet(tmp_path / "a" / "jobs.parquet")
    assert got.filter(pl.col("job_id") == "H")["start"].item() == h(2)
    assert main(base + ["--out", str(tmp_path / "b")]) == 0
    assert pl.read_parquet(tmp_path / "b" / "jobs.parquet").filter(pl.col("job_id") == "H")["start"].item() == h(10)
    assert main(base + ["--qos-preempt", "high", "--out", str(tmp_path / "c")]) != 0
    assert "expected QOS=QOS" in capsys.readouterr().err
