"""The calibration knobs beyond the scheduler's cycle (``engine.calibrate``): the estimate handling
(``walltime_margin``) and the multifactor priority weights, on tiny SWF logs whose schedules are computed by hand."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dashboard.cli import main
from engine import Cluster, SimConfig, calibrate, simulate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "swf"
MARGIN = FIXTURES / "margin.swf"


@pytest.fixture(scope="module")
def margin_store(tmp_path_factory):
    """margin.swf, 4 processors, 10 blocks 1000 s apart: A (2 procs, run = limit = 100) at +0 starts at once;
    B (4 procs, run 10) at +10 waits for A and starts at +100; C (2 procs, run 50, limit 60) at +20 would fit the
    80 s hole before B's reservation, but the log starts it after B, at +110 (waits logged: 0, 90, 90)."""
    store = tmp_path_factory.mktemp("margin") / "store"
    assert main(["ingest", "--store", str(store), str(MARGIN)]) == 0
    return store


def _jobs(store):
    from queries.store import Store

    return Store(str(store)).read("jobs")


@pytest.mark.parametrize("margin, c_wait", [(0.0, 0.0), (0.2, 0.0), (0.3, 90.0), (0.5, 90.0)])
def test_the_margin_decides_whether_c_backfills(margin_store, margin, c_wait):
    """C backfills iff 60 / (1 - margin) <= 80, i.e. margin <= 0.25 (0.2 fits, 0.3 does not); else it starts after
    B (at +110)."""
    res = simulate(_jobs(margin_store), Cluster.procs(4), SimConfig(walltime_margin=margin).validated())
    out = res.jobs.sort("submit")
    waits = [(s - u).total_seconds() for s, u in zip(out["start"], out["submit"])]
    assert waits == [0.0, 90.0, c_wait] * 10


def test_estimate_evidence_is_the_run_over_limit_ratio():
    jobs = pl.DataFrame({"elapsed_s": [50.0, 100.0, 10.0, 5.0, 7.0], "time_limit_s": [100.0, 100.0, 40.0, None, 0.0]})
    ev = calibrate.estimate_evidence(jobs)
    # ratios 0.5, 1.0, 0.25 (no limit and a zero limit are left out)
    assert ev == {"jobs_with_limit": 3, "median_run_over_limit": 0.5, "mean_run_over_limit": pytest.approx(0.5833333),
                  "share_at_limit": pytest.approx(1 / 3)}
    assert calibrate.estimate_evidence(jobs.drop("time_limit_s"))["jobs_with_limit"] == 0


def test_candidates_cross_the_margins_last_and_skip_duplicates():
    got = calibrate.candidates((0, 60), ("all", "backfill"), (None,), (0.0, 0.5))
    assert got == [{"sched_interval_s": 0.0, "sched_cycle": "all", "walltime_margin": 0.0},
                   {"sched_interval_s": 0.0, "sched_cycle": "all", "walltime_margin": 0.5},
                   {"sched_interval_s": 60.0, "sched_cycle": "all", "walltime_margin": 0.0},
                   {"sched_interval_s": 60.0, "sched_cycle": "all", "walltime_margin": 0.5},
                   {"sched_interval_s": 60.0, "sched_cycle": "backfill", "walltime_margin": 0.0},
                   {"sched_interval_s": 60.0, "sched_cycle": "backfill", "walltime_margin": 0.5}]


def test_calibration_finds_the_margin_the_log_shows_and_simulate_applies_it(margin_store, tmp_path, capsys):
    out = tmp_path / "cal"
    assert main(["validate", "--store", str(margin_store), "--procs", "4", "--calibrate", "--grid", "0",
                 "--margins", "0,0.2,0.5", "--workers", "1", "--out", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    cal = doc["calibration"]
    assert [c["walltime_margin"] for c in cal["candidates"]] == [0.0, 0.2, 0.5]
    assert "6 replays" in captured.err  # 3 on the training part, 3 held-back (the base margin 0 is a candidate)
    assert cal["chosen"] == {"sched_interval_s": 0.0, "sched_cycle": "all", "walltime_margin": 0.5}
    # 0 and 0.2 backfill C: simulated mean 30 s against 60 s logged, on both parts
    assert [c["mean_rel_err"] for c in cal["candidates"]] == [pytest.approx(-0.5), pytest.approx(-0.5), 0.0]
    assert cal["held_back"]["baseline"]["overall"]["mean_rel_err"] == pytest.approx(-0.5)
    assert cal["held_back"]["calibrated"]["overall"]["mean_rel_err"] == 0.0
    # the training part is blocks 0-6 (21 jobs: the split is the 22nd submit)
    assert cal["train_jobs"] == 21 and cal["held_back"]["calibrated"]["jobs_compared"] == 9
    # C waits 80 s beside 2 idle processors in each block: far below an hour, no suspect outage
    assert cal["evidence"]["capacity"]["intervals"] == 0 and cal["evidence"]["capacity"]["hours"] == 0.0
    ev = cal["evidence"]["estimates"]
    assert ev["jobs_with_limit"] == 21 and ev["share_at_limit"] == pytest.approx(14 / 21)
    saved = out / "calibration.json"
    assert calibrate.read_config_file(saved)["walltime_margin"] == 0.5
    assert json.loads(saved.read_text())["evidence"] == cal["evidence"]
    assert main(["simulate", "--store", str(margin_store), "--procs", "4", "--config-file", str(saved),
                 "--out", str(tmp_path / "s")]) == 0
    assert json.loads((tmp_path / "s" / "metrics.json").read_text())["params"]["walltime_margin"] == 0.5
    # an explicit --walltime-margin, 0 included, beats the file in simulate as in validate
    assert main(["simulate", "--store", str(margin_store), "--procs", "4", "--config-file", str(saved),
                 "--walltime-margin", "0", "--out", str(tmp_path / "s0")]) == 0
    assert json.loads((tmp_path / "s0" / "metrics.json").read_text())["params"]["walltime_margin"] == 0.0
    capsys.readouterr()
    # validate applies it too, and an explicit flag beats the file
    assert main(["validate", "--store", str(margin_store), "--procs", "4", "--config-file", str(saved),
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["mean_rel_err"] == 0.0
    assert main(["validate", "--store", str(margin_store), "--procs", "4", "--config-file", str(saved),
                 "--walltime-margin", "0", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["mean_rel_err"] == pytest.approx(-0.5)


@pytest.mark.parametrize("flags, word", [(["--margins", "0.95"], "--margins"), (["--margins", "x"], "--margins"),
                                         (["--margins", "0.2", "--backfill", "none"], "--margins")])
def test_bad_margins_are_one_line_errors(margin_store, capsys, flags, word):
    assert main(["validate", "--store", str(margin_store), "--procs", "4", "--calibrate", *flags]) == 2
    err = capsys.readouterr().err
    assert word in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_margin_outside_its_bound_in_a_config_file_is_refused(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"format": calibrate.FILE_FORMAT, "config": {"walltime_margin": 0.95}}))
    with pytest.raises(ValueError, match="walltime_margin"):
        calibrate.read_config_file(p)


# ----------------------------------------------------------------------------- the priority weights
def _size_log(path):
    """10 blocks 1000 s apart on 4 processors: X (4 procs, 0-100), a (1 proc, run 50) at +10, b (4 procs, run 30)
    at +20; the logged scheduler favoured the large job: b at +100, a after it at +130 (FCFS would give a +100,
    b +150)."""
    lines = ["; Version: 2.2", "; Computer: a size-favouring priority (test)", "; UnixStartTime: 1000000000",
             "; MaxNodes: 4", "; MaxProcs: 4"]
    jid = 0
    for k in range(10):
        t = 1000 * k
        for sub, wait, run, procs in ((t, 0, 100, 4), (t + 10, 120, 50, 1), (t + 20, 80, 30, 4)):
            jid += 1
            lines.append(" ".join(str(x) for x in (jid, sub, wait, run, procs, -1, -1, procs, run, -1, 1, 1, 1, -1,
                                                   1, -1, -1, -1)))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def size_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("size")
    store = d / "store"
    assert main(["ingest", "--store", str(store), str(_size_log(d / "size.swf"))]) == 0
    return store


def test_calibration_finds_the_size_weight_and_simulate_applies_it(size_store, tmp_path, capsys):
    out = tmp_path / "cal"
    assert main(["validate", "--store", str(size_store), "--procs", "4", "--backfill", "none", "--policy",
                 "multifactor", "--calibrate", "--grid", "0", "--weights", "1:0:0,1:1:0,1:-1:0", "--workers", "1",
                 "--out", str(out), "--format", "json"]) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    weights = [(c["priority_weight_age"], c["priority_weight_size"], c["priority_weight_fairshare"])
               for c in cal["candidates"]]
    assert weights == [(1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (1.0, -1.0, 0.0)]
    # logged waits per block 0, 120, 80 (mean 66.7); FCFS order (and favouring small) gives 0, 90, 130 (73.3: +10 %)
    assert [c["mean_rel_err"] for c in cal["candidates"]] == [pytest.approx(0.1), 0.0, pytest.approx(0.1)]
    assert cal["chosen"]["priority_weight_size"] == 1.0 and cal["chosen"]["priority_weight_age"] == 1.0
    assert cal["held_back"]["baseline"]["overall"]["mean_rel_err"] == pytest.approx(0.1)
    assert cal["held_back"]["calibrated"]["overall"]["mean_rel_err"] == 0.0
    ev = cal["evidence"]["priority"]
    assert ev["jobs"] == 21 and ev["share_overtaken"] == pytest.approx(7 / 21)  # every a, by its block's b
    assert ev["spearman_wait_size"] < 0  # the 1-processor jobs waited longest
    saved = out / "calibration.json"
    assert calibrate.read_config_file(saved) == {"sched_interval_s": 0.0, "sched_cycle": "all",
                                                 "priority_weight_age": 1.0, "priority_weight_size": 1.0,
                                                 "priority_weight_fairshare": 0.0}
    assert main(["simulate", "--store", str(size_store), "--procs", "4", "--backfill", "none", "--policy",
                 "multifactor", "--config-file", str(saved), "--out", str(tmp_path / "s")]) == 0
    params = json.loads((tmp_path / "s" / "metrics.json").read_text())["params"]
    assert (params["policy"], params["priority_weight_size"]) == ("multifactor", 1.0)
    capsys.readouterr()
    assert main(["validate", "--store", str(size_store), "--procs", "4", "--backfill", "none", "--policy",
                 "multifactor", "--config-file", str(saved), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["mean_rel_err"] == 0.0
    # under another policy the weights would be silently ignored: a one-line error instead
    assert main(["simulate", "--store", str(size_store), "--procs", "4", "--config-file", str(saved),
                 "--out", str(tmp_path / "s2")]) == 2
    err = capsys.readouterr().err
    assert "priority_weight_size" in err and "multifactor" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flags, word", [(["--weights", "1:0:0"], "--policy multifactor"),
                                         (["--policy", "multifactor", "--weights", "1:0"], "age:size:fairshare"),
                                         (["--policy", "multifactor", "--weights=-1:0:0"], "priority_weight_age"),
                                         (["--policy", "multifactor", "--weights", "1:20:0"], "priority_weight_size")])
def test_bad_weights_are_one_line_errors(size_store, capsys, flags, word):
    assert main(["validate", "--store", str(size_store), "--procs", "4", "--calibrate", *flags]) == 2
    err = capsys.readouterr().err
    assert word in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_weights_outside_their_bounds_in_a_config_file_are_refused(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"format": calibrate.FILE_FORMAT, "config": {"priority_weight_fairshare": -1}}))
    with pytest.raises(ValueError, match="priority_weight_fairshare"):
        calibrate.read_config_file(p)


# ----------------------------------------------------------------------------- capacity over time
def _outage_log(path):
    """10 blocks 20000 s apart on 4 one-processor nodes: A (2 procs, run 10000) starts at once; B (1 proc, run
    500) submitted at +100 waits until +7300 beside 2 idle processors: the log shows a 2 h outage of 2 nodes."""
    lines = ["; Version: 2.2", "; Computer: an outage the log does not state (test)", "; UnixStartTime: 1000000000",
             "; MaxNodes: 4", "; MaxProcs: 4"]
    jid = 0
    for k in range(10):
        t = 20000 * k
        for sub, wait, run, procs in ((t, 0, 10000, 2), (t + 100, 7200, 500, 1)):
            jid += 1
            lines.append(" ".join(str(x) for x in (jid, sub, wait, run, procs, -1, -1, procs, run, -1, 1, 1, 1, -1,
                                                   1, -1, -1, -1)))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def outage_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("outage")
    store = d / "store"
    assert main(["ingest", "--store", str(store), str(_outage_log(d / "outage.swf"))]) == 0
    return store


NODES4 = ["--nodes", "4", "--cpus-per-node", "1"]


def test_drain_events_take_the_last_nodes_for_the_idle_capacity():
    from engine import Cluster

    ev = calibrate.drain_events([(100.0, 7300.0, 2.0), (200.0, 300.0, 3.0)], Cluster.uniform(4, cpus_per_node=1), 0.5)
    assert [(e.node, e.time_s.timestamp(), e.until.timestamp()) for e in ev] == [
        ("node004", 100.0, 7300.0), ("node004", 200.0, 300.0)]  # floor(0.5 x 2) = 1, floor(0.5 x 3) = 1
    # under --procs: floor(fraction x idle) processors for each outage's span (none when that is 0)
    ev = calibrate.drain_events([(100.0, 7300.0, 2.0), (200.0, 300.0, 3.0), (400.0, 500.0, 1.0)], Cluster.procs(4), 0.5)
    assert [(e.procs, e.time_s.timestamp(), e.until.timestamp()) for e in ev] == [(1, 100.0, 7300.0), (1, 200.0, 300.0)]
    ev = calibrate.drain_events([(100.0, 7300.0, 9.0)], Cluster.procs(4), 1.0)
    assert [e.procs for e in ev] == [4]  # never more than the pool


def test_calibration_drains_the_idle_capacity_the_log_shows(outage_store, tmp_path, capsys):
    out = tmp_path / "cal"
    assert main(["validate", "--store", str(outage_store), *NODES4, "--calibrate", "--grid", "0",
                 "--drain-fractions", "0,0.5,1", "--workers", "1", "--out", str(out), "--format", "json"]) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert [c["capacity_drain_fraction"] for c in cal["candidates"]] == [0.0, 0.5, 1.0]
    assert "capacity_drain_fraction" in cal["knobs"]
    # logged mean wait 3600 s; no drain or one node drained: B starts at once (-100 %); two nodes: exact
    assert [c["mean_rel_err"] for c in cal["candidates"]] == [-1.0, -1.0, 0.0]
    assert cal["chosen"]["capacity_drain_fraction"] == 1.0
    assert cal["held_back"]["baseline"]["overall"]["mean_rel_err"] == -1.0
    assert cal["held_back"]["calibrated"]["overall"]["mean_rel_err"] == 0.0
    cap = cal["evidence"]["capacity"]  # the training part: blocks 0-6
    assert cap["intervals"] == 7 and cap["hours"] == pytest.approx(14.0)
    doc = json.loads((out / "calibration.json").read_text())
    assert doc["capacity_drain_fraction"] == 1.0 and len(doc["config"]["node_events"]) == 20  # 2 nodes x 10 blocks
    knobs = calibrate.read_config_file(out / "calibration.json")
    assert "capacity_drain_fraction" not in knobs and len(knobs["node_events"]) == 20
    assert main(["validate", "--store", str(outage_store), *NODES4, "--config-file", str(out / "calibration.json"),
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["mean_rel_err"] == 0.0


def test_drain_fractions_under_procs_drain_processors(outage_store, tmp_path, capsys):
    """The same log under --procs 4 (one pool): each outage's 2 idle processors drained for its span. Half of them
    (1) still lets B start at once; all of them reproduce the log (B waits 7200 s: mean 3600 s). The fraction 0
    replay equals the run without the knob; the file's processor drains round-trip to simulate and validate."""
    out = tmp_path / "cal"
    assert main(["validate", "--store", str(outage_store), "--procs", "4", "--calibrate", "--grid", "0",
                 "--drain-fractions", "0,0.5,1", "--workers", "1", "--out", str(out), "--format", "json"]) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert [c["mean_rel_err"] for c in cal["candidates"]] == [-1.0, -1.0, 0.0]
    assert cal["chosen"]["capacity_drain_fraction"] == 1.0
    assert cal["held_back"]["calibrated"]["overall"]["mean_rel_err"] == 0.0
    assert main(["validate", "--store", str(outage_store), "--procs", "4", "--calibrate", "--grid", "0",
                 "--workers", "1", "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)["calibration"]
    fraction0 = {k: v for k, v in cal["candidates"][0].items() if k != "capacity_drain_fraction"}
    assert plain["candidates"] == [fraction0]  # fraction 0: the replay without the knob, figure for figure
    doc = json.loads((out / "calibration.json").read_text())
    events = doc["config"]["capacity_events"]
    assert len(events) == 10 and all(e[1] == 2 for e in events) and "node_events" not in doc["config"]
    knobs = calibrate.read_config_file(out / "calibration.json")
    assert len(knobs["capacity_events"]) == 10
    assert main(["validate", "--store", str(outage_store), "--procs", "4", "--config-file",
                 str(out / "calibration.json"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["mean_rel_err"] == 0.0
    sim = tmp_path / "sim"
    assert main(["simulate", "--store", str(outage_store), "--procs", "4", "--config-file",
                 str(out / "calibration.json"), "--out", str(sim)]) == 0
    capsys.readouterr()
    metrics = json.loads((sim / "metrics.json").read_text())
    assert metrics["wait_s"]["mean"] == pytest.approx(3600.0) and metrics["node_events"]["drain"] == 10
    # the same drains by hand: --drain PROCS@TIME..END under --procs (here the first block's only)
    t0, t1 = events[0][0], events[0][2]
    assert main(["simulate", "--store", str(outage_store), "--procs", "4", "--drain", f"2@{t0}..{t1}",
                 "--out", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert one["wait_s"]["mean"] == pytest.approx(7200.0 / 20) and one["node_events"]["drain"] == 1


def test_a_procs_drain_without_an_end_is_a_one_line_error(outage_store, tmp_path, capsys):
    assert main(["simulate", "--store", str(outage_store), "--procs", "4", "--drain", "2@100",
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "PROCS@TIME..END" in err and len(err.strip().splitlines()) == 1
