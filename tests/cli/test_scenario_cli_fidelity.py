"""``quotaloop scenario --config-file`` (the calibration.json of ``validate --calibrate``, read by ``simulate``'s
loader): both runs get the calibrated knobs, an explicit flag wins, a bad file is one line; and the scenario's
output carries the baseline's fidelity (table column, the two ``fidelity:`` lines, scenario.json, fidelity.csv)."""
from __future__ import annotations

import json
import signal
from pathlib import Path

import polars as pl
import pytest

import dashboard_fixture as fx
from dashboard.cli import main
from engine.calibrate import FILE_FORMAT


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return fx.build(tmp_path_factory.mktemp("scn") / "store")


def cal_file(tmp_path: Path, config: dict, fmt: str = FILE_FORMAT) -> Path:
    p = tmp_path / "calibration.json"
    p.write_text(json.dumps({"format": fmt, "config": config, "modeled": {"policy": "fcfs"}}))
    return p


def run(capsys, *argv) -> tuple[int, str, str]:
    old = signal.getsignal(signal.SIGPIPE)
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    finally:
        signal.signal(signal.SIGPIPE, old)
    out, err = capsys.readouterr()
    return rc, out, err


def scenario(capsys, store, out, *extra):
    return run(capsys, "scenario", "backfill", "--store", str(store), "--window", "3d", "--out", str(out), *extra)


def params(out: Path, which: str) -> dict:
    return json.loads((out / which / "metrics.json").read_text())["params"]


def test_the_config_file_reaches_both_runs(store, tmp_path, capsys):
    f = cal_file(tmp_path, {"sched_interval_s": 600, "sched_cycle": "backfill", "reservation_depth": 2})
    rc, out, err = scenario(capsys, store, tmp_path / "cal", "--config-file", str(f))
    assert rc == 0, err
    base, scen = params(tmp_path / "cal", "baseline"), params(tmp_path / "cal", "scenario")
    assert (base["sched_interval_s"], base["sched_cycle"], base["reservation_depth"]) == (600.0, "backfill", 2)
    # the backfill kind changes the mode (its own depth) but keeps the calibrated cycle
    assert (scen["sched_interval_s"], scen["sched_cycle"], scen["backfill"]) == (600.0, "backfill", "conservative")
    doc = json.loads((tmp_path / "cal" / "scenario.json").read_text())
    assert doc["scenario"]["config"] == {"reservation_depth": 2, "sched_cycle": "backfill", "sched_interval_s": 600.0}
    assert "calibrated reservation_depth=2 sched_cycle=backfill sched_interval_s=600" in out.splitlines()[0]


def test_without_the_file_the_engine_defaults_and_the_parameters_are_unchanged(store, tmp_path, capsys):
    rc, _, err = scenario(capsys, store, tmp_path / "plain")
    assert rc == 0, err
    assert "sched_interval_s" not in params(tmp_path / "plain", "baseline")  # default 0: not even written
    assert "config" not in json.loads((tmp_path / "plain" / "scenario.json").read_text())["scenario"]


def test_an_explicit_flag_wins_over_the_file(store, tmp_path, capsys):
    f = cal_file(tmp_path, {"sched_interval_s": 600, "sched_cycle": "backfill"})
    rc, _, err = scenario(capsys, store, tmp_path / "flag", "--config-file", str(f), "--sched-interval", "60s",
                          "--sched-cycle", "all")
    assert rc == 0, err
    base = params(tmp_path / "flag", "baseline")
    assert (base["sched_interval_s"], base.get("sched_cycle", "all")) == (60.0, "all")  # "all" is the default


@pytest.mark.parametrize("fmt, needle", [("something-else/1", "not a quotaloop calibration file")])
def test_a_file_that_is_not_a_calibration_is_one_line(store, tmp_path, capsys, fmt, needle):
    f = cal_file(tmp_path, {"sched_interval_s": 600}, fmt=fmt)
    rc, out, err = scenario(capsys, store, tmp_path / "bad", "--config-file", str(f))
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err and "Traceback" not in out + err
    assert not (tmp_path / "bad" / "scenario.json").exists()


def test_the_output_carries_the_baselines_fidelity(store, tmp_path, capsys):
    rc, out, err = scenario(capsys, store, tmp_path / "fid")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[1].endswith("delta vs the baseline's error")
    head = next(x for x in lines if x.startswith("fidelity: On the last 3 days the modeled baseline "))
    doc = json.loads((tmp_path / "fid" / "scenario.json").read_text())["fidelity"]
    assert doc["available"] is True and doc["headline"] == head[len("fidelity: "):]
    o = doc["overall"]
    p90 = abs(o["p90_rel_err"])
    verb = "reproduces logged p90 waits within" if p90 <= 0.25 else "misses logged p90 waits by"
    assert f"{verb} {100 * p90:.0f} %" in head and f"Spearman {o['spearman']:.2f}" in head
    table = pl.read_csv(tmp_path / "fid" / "fidelity.csv")
    cmp = pl.read_csv(tmp_path / "fid" / "comparison.csv")
    assert table["metric"].to_list() == cmp["metric"].to_list()
    assert set(table["status"]) <= {"inside error", "beyond error", "not validated", "no change"}
    assert dict(zip(table["metric"], table["status"])) == doc["conclusions"]
    # every judged row: inside exactly when |delta| <= its error band
    for r in table.filter(pl.col("status").is_in(["inside error", "beyond error"])).iter_rows(named=True):
        assert (abs(r["delta"]) <= r["error"]) == (r["status"] == "inside error"), r
    # the row of the printed table carries the same status
    p90 = next(x for x in lines if x.startswith("p90 wait "))
    assert p90.endswith(dict(zip(table["metric"], table["status"]))["wait_s.p90"])


def test_a_spec_takes_only_settings_a_calibration_can_fix():
    from dashboard.whatif.params import ScenarioError
    from dashboard.whatif.spec import ScenarioSpec

    spec = ScenarioSpec.make("shares", sim_knobs={"sched_interval_s": 600.0, "reservation_depth": 2})
    assert spec.sim_knobs == (("reservation_depth", 2), ("sched_interval_s", 600.0))
    assert spec == ScenarioSpec.make("shares", sim_knobs={"reservation_depth": 2, "sched_interval_s": 600.0})
    for bad in ({"policy": "fcfs"}, {"budgets": None}, {"no_such_setting": 1}):
        with pytest.raises(ScenarioError, match="not a simulator setting a calibration can fix"):
            ScenarioSpec.make("shares", sim_knobs=bad)
