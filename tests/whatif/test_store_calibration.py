"""A store's own calibration (``dashboard.whatif.calibration``): ``validate --calibrate --save`` writes it beside the
store's data, and ``simulate --store``, ``scenario``, the Fair share page and the report's validation section then
replay under it, say so, and ignore it on ``--no-calibration``; a broken file is one line, never skipped silently."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import dashboard_fixture as fx
from dashboard.cli import main
from dashboard.config import load as load_config
from dashboard.whatif import calibration
from engine.calibrate import FILE_FORMAT
from test_scenario_cli_fidelity import run  # the CLI run with its exit code, stdout, stderr

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
KNOBS = {"sched_interval_s": 600, "sched_cycle": "backfill"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return fx.build(tmp_path_factory.mktemp("calstore") / "store")


@pytest.fixture
def store(built, tmp_path) -> Path:
    """A private copy (the tests put files beside its data)."""
    return Path(shutil.copytree(built, tmp_path / "store"))


def write(path: Path, config: dict, **extra) -> Path:
    path.write_text(json.dumps({"format": FILE_FORMAT, "config": config, "modeled": {"policy": "fcfs",
                                                                                     "backfill": "easy"}, **extra}))
    return path


def params(out: Path, which: str) -> dict:
    return json.loads((out / which / "metrics.json").read_text())["params"]


# ----------------------------------------------------------------------------- the module
def test_weights_apply_only_under_the_policy_they_were_fitted_for(tmp_path):
    f = write(tmp_path / "c.json", {"sched_interval_s": 300, "priority_weight_size": -1.0},
              held_back={"calibrated": {"spearman": 0.7123, "mean_rel_err": -0.051, "p90_rel_err": 0.12}})
    cal = calibration.load(f)
    assert cal.for_policy("multifactor") == ({"sched_interval_s": 300.0, "priority_weight_size": -1.0}, [])
    kept, notes = cal.for_policy("fairshare")
    assert kept == {"sched_interval_s": 300.0} and len(notes) == 1 and "multifactor policy only" in notes[0]
    text = cal.describe()
    assert "priority_weight_size=-1" in text and "sched_interval_s=300" in text and "(fitted under fcfs/easy)" in text
    assert "Spearman 0.71, mean wait -5 %, p90 wait +12 %" in text


def test_resolve_prefers_the_explicit_file_and_finds_the_stores_own(tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    assert calibration.resolve(store) is None
    own = write(store / "calibration.json", {"sched_interval_s": 60})
    other = write(tmp_path / "other.json", {"sched_interval_s": 120})
    assert calibration.resolve(store).knobs == {"sched_interval_s": 60.0} and calibration.resolve(store).discovered
    assert calibration.resolve(store, other).knobs == {"sched_interval_s": 120.0}
    assert calibration.resolve(store, ignore_store=True) is None
    own.write_text("{not json")
    with pytest.raises(ValueError, match=r"calibration\.json: not JSON \(line 1\)"):
        calibration.resolve(store)


def test_the_dashboard_config_names_the_file_else_the_stores_own(tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    assert load_config({"QUOTALOOP_STORE": str(store)}).calibration_path is None
    own = write(store / "calibration.json", {})
    assert load_config({"QUOTALOOP_STORE": str(store)}).calibration_path == own
    assert load_config({"QUOTALOOP_STORE": str(store), "QUOTALOOP_CALIBRATION": "/x/c.json"}).calibration_path \
        == Path("/x/c.json")


# ----------------------------------------------------------------------------- the CLI
def scenario(capsys, store, out, *extra):
    return run(capsys, "scenario", "backfill", "--store", str(store), "--window", "3d", "--out", str(out), *extra)


def test_scenario_replays_under_the_stores_calibration_and_says_so(store, tmp_path, capsys):
    write(store / "calibration.json", KNOBS)
    rc, out, err = scenario(capsys, store, tmp_path / "cal")
    assert rc == 0, err
    base = params(tmp_path / "cal", "baseline")
    assert (base["sched_interval_s"], base["sched_cycle"]) == (600.0, "backfill")
    assert f"{store / 'calibration.json'}: applying the store's calibrated knobs" in err
    assert "--no-calibration" in err
    rc, _, err = scenario(capsys, store, tmp_path / "plain", "--no-calibration")
    assert rc == 0, err
    assert "sched_interval_s" not in params(tmp_path / "plain", "baseline") and "applying" not in err
    # an explicit file beats the store's own
    other = write(tmp_path / "other.json", {"sched_interval_s": 120})
    rc, _, err = scenario(capsys, store, tmp_path / "other", "--config-file", str(other))
    assert rc == 0, err
    assert params(tmp_path / "other", "baseline")["sched_interval_s"] == 120.0


def test_a_broken_store_calibration_stops_the_cli_with_one_line(store, tmp_path, capsys):
    write(store / "calibration.json", {"sched_interval_s": -5})
    rc, out, err = scenario(capsys, store, tmp_path / "bad")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert "calibration.json: config.sched_interval_s" in err and "--no-calibration" in err
    rc, _, err = scenario(capsys, store, tmp_path / "ok", "--no-calibration")
    assert rc == 0, err


def test_simulate_store_applies_it_and_drains_join_the_calibrations(store, tmp_path, capsys):
    import datetime as dt

    node = fx.nodes_frame()["node"][0]
    at = [(fx.T0 + dt.timedelta(days=d)).isoformat() for d in (1, 2, 3)]
    write(store / "calibration.json", {"sched_interval_s": 300, "node_events": [[at[0], node, "drain", at[1]]]})
    rc, _, err = run(capsys, "simulate", "--store", str(store), "--drain", f"{node}@{at[2][:16]}",
                     "--out", str(tmp_path / "sim"))
    assert rc == 0, err
    p = json.loads((tmp_path / "sim" / "metrics.json").read_text())["params"]
    assert p["sched_interval_s"] == 300.0 and len(p["node_events"]) == 2  # the file's drain and --drain's


def test_processor_drains_fitted_under_procs_drain_the_last_nodes_of_the_stores_layout(store, tmp_path, capsys):
    """A calibration fitted under --procs saves processor drains (``capacity_events``); the scenario replays the
    store's node layout (4 nodes of 8 GPUs), where 8 drained GPUs over the window are the last node drained."""
    import datetime as dt

    span = [fx.T0.isoformat(), (fx.T0 + dt.timedelta(days=60)).isoformat()]
    write(store / "calibration.json", {"capacity_events": [[span[0], 8, span[1]]]})
    rc, _, err = scenario(capsys, store, tmp_path / "cal")
    assert rc == 0, err
    assert "1 inferred processor drain(s)" in err
    metrics = json.loads((tmp_path / "cal" / "baseline" / "metrics.json").read_text())
    assert len(metrics["params"]["capacity_events"]) == 1 and metrics["node_events"]["drain"] == 1
    rc, _, err = scenario(capsys, store, tmp_path / "plain", "--no-calibration")
    assert rc == 0, err
    assert json.loads((tmp_path / "plain" / "baseline" / "metrics.json").read_text())["node_events"]["drain"] == 0


def test_save_needs_calibrate(store, capsys):
    rc, _, err = run(capsys, "validate", "--store", str(store), "--save")
    assert rc == 2 and "--save" in err and "--calibrate" in err and len(err.strip().splitlines()) == 1
    assert not (store / "calibration.json").exists()


def test_validate_calibrate_save_writes_what_simulate_then_applies(tmp_path, capsys):
    from test_validate_cli import CYCLE60

    store = tmp_path / "c60"
    assert main(["ingest", "--store", str(store), str(CYCLE60)]) == 0
    capsys.readouterr()
    rc, _, err = run(capsys, "validate", "--store", str(store), "--procs", "4", "--calibrate", "--grid", "0,60",
                     "--cycles", "all", "--workers", "1", "--save")
    assert rc == 0, err
    saved = json.loads((store / "calibration.json").read_text())
    assert saved["config"] == {"sched_interval_s": 60.0, "sched_cycle": "all"} and saved["format"] == FILE_FORMAT
    assert "saved as the store's calibration" in err
    rc, _, err = run(capsys, "simulate", "--store", str(store), "--procs", "4", "--out", str(tmp_path / "sim"))
    assert rc == 0, err
    assert json.loads((tmp_path / "sim" / "metrics.json").read_text())["params"]["sched_interval_s"] == 60.0


# ----------------------------------------------------------------------------- the page
@pytest.fixture
def page(store, monkeypatch):
    def open_page():
        monkeypatch.setenv("QUOTALOOP_STORE", str(store))
        monkeypatch.setenv("QUOTALOOP_AUTH", "open")
        monkeypatch.setenv("QUOTALOOP_ADMINS", "")
        monkeypatch.delenv("QUOTALOOP_CONFIG", raising=False)
        monkeypatch.delenv("QUOTALOOP_CALIBRATION", raising=False)
        at = AppTest.from_file(APP, default_timeout=180).run()
        at.switch_page("views/fairshare.py").run()
        return at
    return open_page


def test_the_fair_share_page_replays_under_the_stores_calibration(store, page):
    write(store / "calibration.json", KNOBS, held_back={"calibrated": {"spearman": 0.5, "mean_rel_err": 0.1}})
    at = page()
    captions = " ".join(c.value for c in at.caption)
    assert "Replays use the calibrated knobs from calibration.json" in captions
    assert "sched_interval_s=600" in captions and "Spearman 0.50" in captions and "validate --calibrate --save" in captions
    at.segmented_control(key="fs_kind").set_value("backfill").run()
    at.button(key="fs_simulate").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    _flt, spec = at.session_state["last_scenario"]
    assert dict(spec.sim_knobs) == {"sched_interval_s": 600.0, "sched_cycle": "backfill"}
    from dashboard.data import sim

    res = sim.run_scenario(_flt, spec)  # the cached run the page showed: its baseline ran under the knobs
    assert res.baseline.metrics["params"]["sched_interval_s"] == 600.0


def test_a_broken_calibration_is_an_error_on_the_page_not_a_silent_default(store, page):
    (store / "calibration.json").write_text('{"format": "nope"}')
    at = page()
    assert not at.exception, [e.value for e in at.exception]
    errors = " ".join(e.value for e in at.error)
    assert "calibration cannot be used" in errors and "not a quotaloop calibration file" in errors


def test_a_calibrated_user_limit_reaches_the_scenario_and_the_flag_wins(store, tmp_path, capsys):
    write(store / "calibration.json", {"sched_interval_s": 300, "max_running_jobs_per_user": 2})
    assert "max_running_jobs_per_user=2" in calibration.resolve(store).describe()
    rc, _, err = scenario(capsys, store, tmp_path / "cal")
    assert rc == 0, err
    assert params(tmp_path / "cal", "baseline")["max_running_jobs_per_user"] == 2
    assert params(tmp_path / "cal", "scenario")["max_running_jobs_per_user"] == 2
    rc, _, err = scenario(capsys, store, tmp_path / "off", "--max-jobs-per-user", "0")
    assert rc == 0, err
    assert "max_running_jobs_per_user" not in params(tmp_path / "off", "baseline")
