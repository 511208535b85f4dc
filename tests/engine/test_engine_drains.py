"""Node drains as a manager writes them (issue 17.3): ``NODES@TIME[..END]`` specs, the drain file
(``node,start,end,reason``), instants on a datetime workload, and a drain window's end; hand-computed on one
8-GPU node. Job A (8 GPUs, min runtime 2 h, no checkpoints) runs 0 h -> 10 h unless drained."""
from __future__ import annotations

import json

import polars as pl
import pytest

import engine
from engine import drains
from engine.config import ConfigError, NodeEvent
from queries.store import schema

from test_scenarios import T0, h, job, nodes


def _a():
    return schema.conform(pl.DataFrame([job("A", "lab", 8, 0, 10, min_rt=2 * 3600.0, limit_h=12)]), "jobs")


def _rows(events, **cfg):
    res = engine.simulate(_a(), nodes(1), engine.SimConfig(policy="fcfs", node_events=tuple(events), **cfg))
    return {r["job_id"]: r for r in res.jobs.iter_rows(named=True)}, res


def test_spec_syntax():
    ev = drains.parse_spec("gpu[001-003]@2026-11-25T06:00")
    assert [e.node for e in ev] == ["gpu001", "gpu002", "gpu003"]
    assert {e.time_s for e in ev} == {T0.replace(day=25, hour=6)} and {e.kind for e in ev} == {"drain"}
    ev = drains.parse_spec("n1,h100-[001,007]@3600..7200")
    assert [(e.node, e.time_s, e.until) for e in ev] == [("n1", 3600.0, 7200.0), ("h100-001", 3600.0, 7200.0),
                                                        ("h100-007", 3600.0, 7200.0)]
    assert drains.parse_spec("n1@2026-11-25")[0].time_s == T0.replace(day=25)
    for bad in ("n1", "@2026-11-25", "n1@", "n1@tomorrow", "n1@10..soon"):
        with pytest.raises(ConfigError):
            drains.parse_spec(bad)


def test_drain_file(tmp_path):
    f = tmp_path / "drains.csv"
    f.write_text("node,start,end,reason\n# rack 3 overheated\nn[1-2],2026-11-02T01:00,2026-11-02T09:00,thermal\n"
                 "n3,2026-11-02T05:00,,\"ECC, bank 2\"\n")
    ev = drains.load_file(f)
    assert [(e.node, e.time_s, e.until) for e in ev] == [("n1", h(1), h(9)), ("n2", h(1), h(9)), ("n3", h(5), None)]
    f.write_text("host,when\nn1,2026-11-02\n")
    with pytest.raises(ConfigError, match="line 1: expected the header node,start,end,reason"):
        drains.load_file(f)
    f.write_text("node,start,end,reason\nn1,2026-11-02T05:00,2026-11-02T04:00,x\n")
    with pytest.raises(ConfigError, match="line 2, field end"):
        drains.load_file(f)
    f.write_text("node,start,end,reason\nn1,,,x\n")
    with pytest.raises(ConfigError, match="line 2, field start"):
        drains.load_file(f)


def test_a_drain_requeues_at_min_runtime_and_the_node_returns_at_the_windows_end():
    """Drained at 1 h until 9 h: A leaves at 2 h (its min runtime; 2 h lost), the node is down 2 h -> 9 h, A
    restarts at 9 h and ends at 19 h."""
    rows, res = _rows([NodeEvent(h(1), "n1", "drain", h(9))])
    assert (rows["A;0"]["start"], rows["A;0"]["end"], rows["A;0"]["state"]) == (h(0), h(2), "PREEMPTED")
    assert (rows["A"]["start"], rows["A"]["end"]) == (h(9), h(19))
    assert res.metrics["node_events"] == {"drain": 1, "fail": 0, "ignored": 0}
    assert res.metrics["lost_gpu_hours"] == pytest.approx(16.0)


def test_without_an_end_the_node_returns_repair_time_after_it_emptied():
    rows, _ = _rows([NodeEvent(h(1), "n1", "drain")], repair_time_s=3 * 3600.0)
    assert rows["A"]["start"] == h(5) and rows["A"]["end"] == h(15)   # down 2 h -> 5 h


def test_a_window_ending_before_the_node_empties_brings_it_back_when_empty():
    rows, _ = _rows([NodeEvent(h(1), "n1", "drain", h(1.5))])
    assert rows["A"]["start"] == h(2) and rows["A"]["end"] == h(12)


def test_a_fail_kills_at_once_and_seconds_work_on_the_datetime_workload_clock():
    rows, _ = _rows([NodeEvent(3600.0, "n1", "fail", 4 * 3600.0)])
    assert rows["A;0"]["end"] == h(1) and rows["A;0"]["state"] == "NODE_FAIL"
    assert rows["A"]["start"] == h(4) and rows["A"]["end"] == h(14)


def test_no_drain_no_change_in_the_output(tmp_path):
    """An empty drain list is the old configuration: metrics.json lists node_events as before."""
    _, res = _rows([])
    assert res.metrics["params"]["node_events"] == []


def test_simulate_cli_drain_flags(tmp_path, capsys):
    from dashboard.cli import main

    wl = tmp_path / "jobs.csv"
    _a().write_csv(wl)
    layout = tmp_path / "nodes.csv"
    nodes(1).write_csv(layout)
    f = tmp_path / "drains.csv"
    f.write_text("node,start,end,reason\nn1,2026-11-02T01:00,2026-11-02T09:00,thermal\n")
    out = tmp_path / "sim"
    assert main(["simulate", "--workload", str(wl), "--format", "csv", "--nodes-csv", str(layout), "--drain-file",
                 str(f), "--out", str(out)]) == 0
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert sorted(jobs["job_id"].to_list()) == ["A", "A;0"]
    assert jobs.filter(pl.col("job_id") == "A")["start"].item() == h(9)
    out2 = tmp_path / "sim2"
    assert main(["simulate", "--workload", str(wl), "--format", "csv", "--nodes-csv", str(layout), "--drain",
                 "n1@2026-11-02T01:00..2026-11-02T09:00", "--out", str(out2)]) == 0
    assert (out / "jobs.parquet").read_bytes() == (out2 / "jobs.parquet").read_bytes()
    m = json.loads((out2 / "metrics.json").read_text())
    assert m["node_events"]["drain"] == 1
    assert main(["simulate", "--workload", str(wl), "--format", "csv", "--nodes-csv", str(layout), "--drain",
                 "n9@2026-11-02T01:00", "--out", str(tmp_path / "x")]) != 0
    assert "unknown node 'n9'" in capsys.readouterr().err


def test_drains_scenario_by_hand():
    """Two 8-GPU nodes, A and B (8 GPUs, min runtime 2 h, 10 h each) from 0 h. Drain n1 at 1 h until 5 h: the
    job on n1 leaves at 2 h (16 GPU-hours lost), restarts at 5 h and ends at 15 h; the baseline has no drain.
    A failure instead kills it at 1 h. (FCFS: no fair-share preemption between the two.)"""
    from dashboard.whatif import runner
    from dashboard.whatif.params import ScenarioError
    from dashboard.whatif.spec import ScenarioSpec

    from test_scenarios import inputs

    rows = [job("A", "lab/a", 8, 0, 10, min_rt=7200.0, limit_h=12), job("B", "lab/b", 8, 0, 10, min_rt=7200.0,
                                                                          limit_h=12)]
    spec = ScenarioSpec.make("drains", drains=["n1@2026-11-02T01:00..2026-11-02T05:00"], policy="fcfs")
    res = runner.run(spec, inputs(rows))
    assert res.baseline.metrics["preemptions"] == 0
    assert res.scenario.metrics["preemptions"] == 1
    assert res.scenario.metrics["lost_gpu_hours"] == pytest.approx(16.0)
    ends = sorted(r["end"] for r in res.scenario.jobs.iter_rows(named=True))
    assert ends == [h(2), h(10), h(15)]
    assert "drains at min runtime: n1@" in spec.describe()
    fail = runner.run(ScenarioSpec.make("drains", drains=["n1@2026-11-02T01:00..2026-11-02T05:00"], mode="fail",
                                         policy="fcfs"), inputs(rows))
    assert sorted(r["end"] for r in fail.scenario.jobs.iter_rows(named=True)) == [h(1), h(10), h(15)]
    with pytest.raises(ScenarioError, match="drains"):
        ScenarioSpec.make("drains", drains=["n1"])
    with pytest.raises(ValueError, match="not an instant inside the window"):
        runner.run(ScenarioSpec.make("drains", drains=["n1@2026-10-01"]), inputs(rows))


def test_scenario_cli_drains_on_the_sample(tmp_path, capsys, sample_store, repo):
    from dashboard.cli import main

    store = sample_store
    f = tmp_path / "drains.csv"
    f.write_text("node,start,end,reason\nh100-[001-004],2026-11-28T00:00,2026-11-28T12:00,firmware\n")
    out = tmp_path / "scn"
    assert main(["scenario", "drains", "--store", str(store), "--budgets", str(repo / "sample_data" / "budgets.toml"),
                 "--window", "2d", "--drain", "h100-[005-008]@2026-11-27T12:00", "--drain-file", str(f),
                 "--out", str(out)]) == 0
    scn = json.loads((out / "scenario.json").read_text())
    assert scn["scenario"]["params"]["drains"] == ["h100-[005-008]@2026-11-27T12:00",
                                                   *[f"h100-00{i}@2026-11-28T00:00:00+00:00..2026-11-28T12:00:00+00:00"
                                                     for i in range(1, 5)]]
    base = json.loads((out / "baseline" / "metrics.json").read_text())
    sim = json.loads((out / "scenario" / "metrics.json").read_text())
    assert base["node_events"]["drain"] == 0 and sim["node_events"]["drain"] == 8
    assert sim["preemptions"] > base["preemptions"]
