"""The per-user running limit as a calibration knob (``validate --calibrate --user-limits``): on a tiny SWF log
whose schedule shows a limit of 2 running jobs per user, the evidence, the choice, and the round trip through
calibration.json into ``simulate`` / ``validate`` (an explicit ``--max-jobs-per-user`` winning)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dashboard.cli import main
from engine import calibrate

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "swf" / "user_limit.swf"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """user_limit.swf, 8 processors, 10 blocks 1000 s apart: user 1's three 1-processor jobs (run 100) at +0, +1,
    +2 and user 2's (run 50) at +3; the log starts user 1's third job only at +100 (waits 0, 0, 98, 0)."""
    path = tmp_path_factory.mktemp("ulim") / "store"
    assert main(["ingest", "--store", str(path), str(LOG)]) == 0
    return path


def test_candidates_cross_the_user_limits_last():
    got = calibrate.candidates((0, 60), ("all",), user_limits=(0, 2))
    assert got == [{"sched_interval_s": 0.0, "sched_cycle": "all", "max_running_jobs_per_user": 0},
                   {"sched_interval_s": 0.0, "sched_cycle": "all", "max_running_jobs_per_user": 2},
                   {"sched_interval_s": 60.0, "sched_cycle": "all", "max_running_jobs_per_user": 0},
                   {"sched_interval_s": 60.0, "sched_cycle": "all", "max_running_jobs_per_user": 2}]


def test_the_limit_the_log_shows_is_chosen_and_simulate_applies_it(store, tmp_path, capsys):
    out = tmp_path / "cal"
    assert main(["validate", "--store", str(store), "--procs", "8", "--calibrate", "--grid", "0", "--cycles", "all",
                 "--user-limits", "0,1,2,4", "--workers", "1", "--out", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    cal = json.loads(captured.out)["calibration"]
    assert [c["max_running_jobs_per_user"] for c in cal["candidates"]] == [0, 1, 2, 4]
    assert "8 replays" in captured.err  # 4 on the training part, 4 held-back (the base, 0, is a candidate)
    # per block: logged waits 0, 0, 98, 0 (mean 24.5); no limit (or 4): all 0; limit 1: 99 and 198 for user 1's
    # second and third jobs (mean 74.25); limit 2: exactly the log
    assert [c["mean_rel_err"] for c in cal["candidates"]] == [pytest.approx(-1.0), pytest.approx(74.25 / 24.5 - 1),
                                                              0.0, pytest.approx(-1.0)]
    assert cal["chosen"] == {"sched_interval_s": 0.0, "sched_cycle": "all", "max_running_jobs_per_user": 2}
    assert cal["held_back"]["baseline"]["overall"]["mean_rel_err"] == pytest.approx(-1.0)
    assert cal["held_back"]["calibrated"]["overall"]["mean_rel_err"] == 0.0
    # evidence from the 7 training blocks: user 1's ceiling 2, user 2's 1; user 1 sat at 2 with its third job
    # waiting beside idle processors for 98 s a block, which is all the waiting there was
    ev = cal["evidence"]["user_limits"]
    assert ev["ceilings"] == {"1": 1, "2": 1}  # JSON keys: ceiling -> users
    assert ev["users_held_at_ceiling"] == 1 and ev["most_common_held_ceiling"] == 2
    assert ev["wait_s_total"] == pytest.approx(7 * 98) and ev["share_wait_explained"] == pytest.approx(1.0)
    saved = out / "calibration.json"
    doc = json.loads(saved.read_text())
    assert doc["config"]["max_running_jobs_per_user"] == 2 and doc["evidence"]["user_limits"] == ev
    assert calibrate.read_config_file(saved)["max_running_jobs_per_user"] == 2
    assert main(["simulate", "--store", str(store), "--procs", "8", "--config-file", str(saved),
                 "--out", str(tmp_path / "s")]) == 0
    assert json.loads((tmp_path / "s" / "metrics.json").read_text())["params"]["max_running_jobs_per_user"] == 2
    # an explicit --max-jobs-per-user, 0 included, beats the file
    assert main(["simulate", "--store", str(store), "--procs", "8", "--config-file", str(saved),
                 "--max-jobs-per-user", "0", "--out", str(tmp_path / "s0")]) == 0
    assert "max_running_jobs_per_user" not in json.loads((tmp_path / "s0" / "metrics.json").read_text())["params"]
    capsys.readouterr()
    assert main(["validate", "--store", str(store), "--procs", "8", "--config-file", str(saved),
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["mean_rel_err"] == 0.0
    assert main(["validate", "--store", str(store), "--procs", "8", "--max-jobs-per-user", "2",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["mean_rel_err"] == 0.0


@pytest.mark.parametrize("flags", [["--user-limits", "1001"], ["--user-limits", "-1"], ["--user-limits", "x"],
                                   ["--user-limits", ","]])
def test_bad_user_limits_are_one_line_errors(store, capsys, flags):
    assert main(["validate", "--store", str(store), "--procs", "8", "--calibrate", *flags]) == 2
    err = capsys.readouterr().err
    assert "--user-limits" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_negative_limit_flag_is_a_one_line_error(store, tmp_path, capsys):
    assert main(["simulate", "--store", str(store), "--procs", "8", "--max-jobs-per-user", "-1",
                 "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "max_running_jobs_per_user" in err and "Traceback" not in err


@pytest.mark.parametrize("value", [1001, -1, 2.5, True])
def test_a_limit_outside_its_bound_in_a_config_file_is_refused(tmp_path, value):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"format": calibrate.FILE_FORMAT, "config": {"max_running_jobs_per_user": value}}))
    with pytest.raises(ValueError, match="max_running_jobs_per_user"):
        calibrate.read_config_file(p)
