"""``validate --calibrate --ray ADDRESS``: the candidate search's replays as Ray tasks give the local pool's results,
in grid order. Ray runs as a local single-node Ray here (``address="local"``, 2 CPUs: Ray 2.60 dropped
``local_mode``); the tests that need Ray skip with the reason when the ``ray`` extra is not installed."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from dashboard.cli import main
from engine import Cluster, SimConfig, calibrate

CYCLE60 = Path(__file__).resolve().parents[1] / "fixtures" / "swf" / "cycle60.swf"
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray is not installed (optional extra: pip install 'quotaloop[ray]')")


@pytest.fixture(scope="module")
def c60(tmp_path_factory):
    store = tmp_path_factory.mktemp("c60ray") / "store"
    assert main(["ingest", "--store", str(store), str(CYCLE60)]) == 0
    from queries.store import Store

    return store, Store(str(store)).read("jobs")


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(address="local", num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False,
             log_to_driver=False, logging_level="ERROR")
    try:
        yield ray
    finally:
        ray.shutdown()


@needs_ray
def test_ray_tasks_give_the_local_pool_result_in_grid_order(c60, local_ray):
    _, jobs = c60
    t0 = jobs["submit"].min()
    split = calibrate.split_time(jobs["submit"].to_list(), 0.7)
    args = (jobs, Cluster.procs(4), SimConfig().validated(), t0, split, None, (0, 30, 60, 120))
    pool = calibrate.run(*args, workers=1, cycles=("all", "backfill"), depths=(1, 2))
    on_ray = calibrate.run(*args, workers=1, cycles=("all", "backfill"), depths=(1, 2), ray_address="local")
    assert on_ray == pool
    assert [(c["sched_interval_s"], c["sched_cycle"], c["reservation_depth"]) for c in on_ray["candidates"]][:4] == [
        (0.0, "all", 1), (0.0, "all", 2), (30.0, "all", 1), (30.0, "all", 2)]
    assert on_ray["chosen"]["sched_interval_s"] == 60.0  # the fixture's own cycle


@needs_ray
def test_validate_ray_flag_runs_the_search_on_ray(c60, local_ray, tmp_path, capsys):
    store, _ = c60
    common = ["validate", "--store", str(store), "--procs", "4", "--calibrate", "--grid", "0,60", "--format", "json"]
    assert main(common + ["--ray", "local"]) == 0
    captured = capsys.readouterr()
    on_ray = json.loads(captured.out)["calibration"]
    assert "with Ray at local" in captured.err and on_ray["ray"] == "local"
    assert main(common + ["--workers", "1"]) == 0
    pool = json.loads(capsys.readouterr().out)["calibration"]
    for k in ("candidates", "chosen", "held_back", "replays"):
        assert on_ray[k] == pool[k]


def test_ray_flag_without_ray_is_a_one_line_error(c60, monkeypatch, capsys):
    store, _ = c60
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert main(["validate", "--store", str(store), "--procs", "4", "--calibrate", "--ray", "auto"]) == 2
    err = capsys.readouterr().err
    assert "--ray" in err and "quotaloop[ray]" in err and len(err.strip().splitlines()) == 1
