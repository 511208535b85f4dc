"""``quotaloop validate`` end to end on tiny SWF fixtures, the scheduler-cycle knob (``sched_interval_s``) and the
calibration of it (``engine.calibrate``)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from pathlib import Path

import polars as pl
import pytest

from dashboard.cli import main
from engine import Cluster, SimConfig, simulate
from engine import calibrate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "swf"
CYCLE60 = FIXTURES / "cycle60.swf"


@pytest.fixture(scope="module")
def c60_store(tmp_path_factory):
    """cycle60.swf: job i submitted at i*300 + (i*37 % 250) s, logged start at the next multiple of 60 s."""
    store = tmp_path_factory.mktemp("c60") / "store"
    assert main(["ingest", "--store", str(store), str(CYCLE60)]) == 0
    return store


def test_the_fixture_is_what_it_claims(c60_store):
    from queries.store import Store

    jobs = Store(str(c60_store)).read("jobs").sort("submit")
    t0 = jobs["submit"][0]
    for sub, st in zip(jobs["submit"], jobs["start"]):
        s, t = (sub - t0).total_seconds(), (st - t0).total_seconds()
        assert t == math.ceil(s / 60) * 60


# ----------------------------------------------------------------------------- the knob
def _two_jobs():
    return pl.DataFrame({"job_id": ["a", "b"], "submit": [0.0, 1.0], "req_cpus": [2.0, 2.0],
                         "elapsed_s": [5.0, 5.0], "time_limit_s": [5.0, 5.0]})


def test_a_job_freed_at_5_starts_at_the_next_cycle_10():
    # a runs [0, 5) on the whole machine; b waits; with a 10 s cycle the pass after a's end is at t=10
    res = simulate(_two_jobs(), Cluster.procs(2), SimConfig(sched_interval_s=10))
    starts = dict(zip(res.jobs["job_id"], res.jobs["start"]))
    assert starts == {"a": 0.0, "b": 10.0}
    assert dict(zip(res.jobs["job_id"], res.jobs["wait_s"]))["b"] == 9.0
    every_event = simulate(_two_jobs(), Cluster.procs(2), SimConfig())
    assert dict(zip(every_event.jobs["job_id"], every_event.jobs["start"]))["b"] == 5.0
    # a submission between cycles waits for the cycle too: submitted at 1 on an idle machine -> starts at 10
    one = pl.DataFrame({"job_id": ["c"], "submit": [1.0], "req_cpus": [1.0], "elapsed_s": [3.0]})
    assert simulate(one, Cluster.procs(2), SimConfig(sched_interval_s=10)).jobs["start"][0] == 10.0


def test_backfill_cycle_keeps_an_event_driven_main_pass():
    # 3 processors; a holds 2 in [0, 25) (limit 25); b needs 3 (submitted at 1: the blocked head, reserved for 25);
    # c needs 1 for 5 s (submitted at 2): a backfill candidate that fits before b's reservation
    w = pl.DataFrame({"job_id": ["a", "b", "c"], "submit": [0.0, 1.0, 2.0], "req_cpus": [2.0, 3.0, 1.0],
                      "elapsed_s": [25.0, 5.0, 5.0], "time_limit_s": [25.0, 5.0, 5.0]})

    def starts(**kw):
        res = simulate(w, Cluster.procs(3), SimConfig(**kw))
        return dict(zip(res.jobs["job_id"], res.jobs["start"]))

    assert starts() == {"a": 0.0, "b": 25.0, "c": 2.0}
    # every pass on the 10 s cycle: c backfilled at 10, b started at the cycle after a's end, 30
    assert starts(sched_interval_s=10) == {"a": 0.0, "b": 30.0, "c": 10.0}
    # only backfilling on the cycle: c still waits for 10, but b starts at a's end, 25, by the main pass
    assert starts(sched_interval_s=10, sched_cycle="backfill") == {"a": 0.0, "b": 25.0, "c": 10.0}


def test_cycle_on_node_layout_and_fairshare():
    w = _two_jobs().with_columns(pl.lit("acct").alias("account"))
    res = simulate(w, Cluster.uniform(1, 0, 2), SimConfig(policy="fairshare", sched_interval_s=10))
    assert dict(zip(res.jobs["job_id"], res.jobs["start"])) == {"a": 0.0, "b": 10.0}


def test_negative_cycle_is_a_one_line_config_error():
    from engine import ConfigError

    with pytest.raises(ConfigError, match="sched_interval_s"):
        simulate(_two_jobs(), Cluster.procs(2), SimConfig(sched_interval_s=-1))


# Hashes of the outputs computed with the code of main at d9918b6, before the knob existed (KTH-SP2, March 1-8
# 1997 warm-started, 100 processors): sched_interval_s=0 must keep them byte-identical. The Parquet files are
# hashed by content: since the outputs' zstd level changed (issue 16) the file bytes differ while every value,
# type and row is the same. The content hashes were first taken at 2f7fb72 as the frame written to Arrow IPC by
# Polars, whose Parquet bytes still matched d9918b6's file hashes (58e37a68..., 95d753ae..., 722d9e14...,
# 229d1abd...). Polars 2.2 writes the same frame to different IPC bytes, so the hash is now of each column's
# name, Arrow type and values read by pyarrow (`_content_sha256`), independent of Polars' version: taken from
# outputs whose IPC hashes under Polars 2.1.0 were still the earlier ones (13d55167..., bc6f434f...,
# 919d18fa..., 95b48e91...), and the same under 2.1.0 and 2.2.0.
GOLDEN = {
    "easy": {"jobs.parquet": "2763265ffb122b8ff6d7015427278c96db8a2ce85980ce363198e0679a25e9fd",
             "metrics.json": "62b3ac43ff1636890c9e0abf94978ccd7a56a137b0c3cbb621101f8a6c14fcdf",
             "timeline.parquet": "17f017d8e16a683b887a7262d1bc39ee0615e97295f94fd0c28aeeec62514484"},
    "conservative": {"jobs.parquet": "d97636de676aea701c583554cafb50f20339e90e3372872b4e0d5323eb1b3a1f",
                     "metrics.json": "fd4d7944245ae588f373b73ec0f84c87cb372a97b6e6ac3e1583dfe1e4adea57",
                     "timeline.parquet": "fd7c7fb8a5ed5413349418e1e695d407f4a05899e8501babc9435069ea780dbf"},
}


def _content_sha256(path) -> str:
    """sha256 of a Parquet file's columns (name, Arrow type, values in row order; times as their integers), else
    of the file's bytes."""
    if path.suffix != ".parquet":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    import pyarrow as pa
    import pyarrow.parquet as pq

    h = hashlib.sha256()
    table = pq.read_table(path)
    for name, col in zip(table.column_names, table.columns):
        typ = col.type
        if pa.types.is_timestamp(typ) or pa.types.is_duration(typ) or pa.types.is_date64(typ):
            col = col.cast(pa.int64())
        elif pa.types.is_date32(typ):
            col = col.cast(pa.int32())
        elif pa.types.is_dictionary(typ):
            col = col.cast(typ.value_type)
        h.update(repr((name, str(typ), col.to_pylist())).encode())
    return h.hexdigest()


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_cycle_zero_is_byte_identical_to_before(shared_data, tmp_path, backfill):
    from engine.warm_start import window_filter
    from queries.ingest import swf

    jobs = swf.parse(str(shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz")).jobs
    t0, t1 = dt.datetime(1997, 3, 1, tzinfo=dt.timezone.utc), dt.datetime(1997, 3, 8, tzinfo=dt.timezone.utc)
    w = jobs.filter(window_filter(t0, t1, 7 * 86400.0))
    simulate(w, Cluster.procs(100), SimConfig(backfill=backfill, warm_start=t0, window_end=t1,
                                              sched_interval_s=0)).write(tmp_path)
    got = {f: _content_sha256(tmp_path / f) for f in GOLDEN[backfill]}
    assert got == GOLDEN[backfill]


def test_cycle_zero_on_the_fast_path_is_unchanged(tmp_path):
    """The fixture through the CLI with and without an explicit --sched-interval 0: same bytes, and the knob is
    absent from metrics.json's params when 0 (older runs stay byte-identical)."""
    outs = []
    for extra in ([], ["--sched-interval", "0"]):
        out = tmp_path / str(len(outs))
        assert main(["simulate", "--workload", str(CYCLE60), "--procs", "4", "--out", str(out), *extra]) == 0
        outs.append(out)
    for f in ("jobs.parquet", "metrics.json", "timeline.parquet"):
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes()
    assert "sched_interval_s" not in json.loads((outs[0] / "metrics.json").read_text())["params"]
    out = tmp_path / "cycle"
    assert main(["simulate", "--workload", str(CYCLE60), "--procs", "4", "--out", str(out),
                 "--sched-interval", "1m"]) == 0
    assert json.loads((out / "metrics.json").read_text())["params"]["sched_interval_s"] == 60.0


def test_the_cycle_reproduces_the_fixture_log_exactly():
    from queries.ingest import swf

    jobs = swf.parse(str(CYCLE60)).jobs
    res = simulate(jobs, Cluster.procs(4), SimConfig(sched_interval_s=60))
    got = res.jobs.sort("job_id")["start"].to_list()
    assert got == jobs.sort("job_id")["start"].to_list()


# ----------------------------------------------------------------------------- validate end to end
def test_validate_json_has_the_fields(c60_store, tmp_path, capsys):
    out = tmp_path / "val"
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--format", "json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "validation.json").read_text())
    assert saved == doc
    for key in ("overall", "by_class", "by_size", "start_order", "occupancy", "verdict", "jobs_compared", "window"):
        assert key in doc
    o = doc["overall"]
    for key in ("pearson", "spearman", "median_abs_err_s", "mean_log_s", "mean_sim_s", "mean_rel_err", "p50_log_s",
                "p90_log_s", "p90_sim_s", "zero_wait_share_log", "zero_wait_share_sim"):
        assert key in o
    assert doc["jobs_compared"] == 60
    # every-event scheduling starts each job at once; the log waited for the 60 s cycle (3 of 60 submitted on it)
    assert o["zero_wait_share_sim"] == 1.0 and o["zero_wait_share_log"] == pytest.approx(3 / 60)
    assert o["mean_rel_err"] == -1.0
    assert set(doc["by_size"]) == {"1", "2-3", "4-7"}
    assert "-100 %" in doc["verdict"]


def test_validate_with_the_cycle_matches_and_table_and_csv_print(c60_store, capsys):
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--sched-interval", "60"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split()[:3] == ["scope", "n", "mean_log_s"]
    assert "verdict:" in text and "close enough" in text
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--sched-interval", "60",
                 "--format", "csv"]) == 0
    rows = pl.read_csv(capsys.readouterr().out.encode())
    overall = rows.filter(pl.col("scope") == "overall").row(0, named=True)
    assert overall["mean_rel_err"] == 0.0 and overall["spearman"] == pytest.approx(1.0)


def test_validate_attainment_error_with_budgets(c60_store, tmp_path, capsys):
    budgets = tmp_path / "b.toml"
    budgets.write_text('[tree.swf]\nshare = 1\n[tree.swf.group1]\nshare = 2\n[tree.swf.group2]\nshare = 1\n'
                       '[tree.swf.group3]\nshare = 1\n')
    code = main(["validate", "--store", str(c60_store), "--procs", "4", "--budgets", str(budgets),
                 "--format", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    teams = doc["attainment"]["teams"]
    # every job runs 30 s; in the log it first waits for the cycle (~29 s on average): received / demanded ~ 0.5;
    # the every-event replay starts each at once: 1.0
    g1 = teams["swf/group1"]
    assert g1["sim"] == pytest.approx(1.0) and g1["log"] == pytest.approx(0.505, abs=0.01)
    assert doc["attainment"]["mean_abs_err"] == pytest.approx(g1["abs_err"])
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--budgets", str(budgets),
                 "--sched-interval", "60", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["attainment"]["mean_abs_err"] == pytest.approx(0.0, abs=1e-9)


def test_validate_user_errors_are_one_line(c60_store, tmp_path, capsys):
    assert main(["validate", "--store", str(tmp_path / "nope"), "--procs", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("quotaloop validate:") and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "quotaloop-simconfig/1", "config": {"sched_interval_s": -5}}')
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--config-file", str(bad)]) == 2
    assert "config.sched_interval_s" in capsys.readouterr().err
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--warm-start", "2030-01-01"]) == 2
    err = capsys.readouterr().err
    assert "no job submitted in the window" in err and len(err.strip().splitlines()) == 1
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--calibrate", "--train-fraction", "1.5"]) == 2
    assert "--train-fraction" in capsys.readouterr().err


# ----------------------------------------------------------------------------- calibration
def test_calibration_picks_the_cycle_the_log_shows_and_saves_it(c60_store, tmp_path, capsys):
    out = tmp_path / "cal"
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--calibrate", "--grid", "0,30,60,120",
                 "--workers", "1", "--out", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    # 0 s, then 30 / 60 / 120 s with each scope: 7 candidates on the training part + the held-back part under each
    assert "14 replays" in captured.err
    cal = json.loads(captured.out)["calibration"]
    assert cal["chosen"] == {"sched_interval_s": 60.0, "sched_cycle": "all"}
    losses = {(c["sched_interval_s"], c["sched_cycle"]): c["loss"] for c in cal["candidates"]}
    assert len(losses) == 7
    # every job arrives on an idle machine: an event-driven main pass starts it at once, as every-event does
    assert losses[(60.0, "all")] == pytest.approx(0.0) and min(v for k, v in losses.items() if k != (60.0, "all")) > 0.5
    held = cal["held_back"]
    assert held["calibrated"]["overall"]["mean_rel_err"] == pytest.approx(0.0)
    assert held["baseline"]["overall"]["mean_rel_err"] == -1.0
    saved = json.loads((out / "calibration.json").read_text())
    assert saved["config"] == {"sched_interval_s": 60.0, "sched_cycle": "all"}
    # simulate --config-file applies it: the replay reproduces the log's starts
    sim_out = tmp_path / "sim"
    assert main(["simulate", "--store", str(c60_store), "--procs", "4", "--config-file", str(out / "calibration.json"),
                 "--out", str(sim_out)]) == 0
    assert json.loads((sim_out / "metrics.json").read_text())["params"]["sched_interval_s"] == 60.0
    # an explicit flag wins over the file
    assert main(["simulate", "--store", str(c60_store), "--procs", "4", "--config-file", str(out / "calibration.json"),
                 "--sched-interval", "0", "--out", str(tmp_path / "sim0")]) == 0
    assert "sched_interval_s" not in json.loads((tmp_path / "sim0" / "metrics.json").read_text())["params"]


def test_held_back_split_is_respected(c60_store):
    """The training replays see only jobs submitted before the split; the held-back reports only jobs after it."""
    from queries.store import Store

    jobs = Store(str(c60_store)).read("jobs")
    t0 = jobs["submit"].min()
    split = calibrate.split_time(jobs["submit"].to_list(), 0.7)
    before = jobs.filter(pl.col("submit") < split).height
    assert before == 42  # int(0.7 * 60): no two submits tie in the fixture
    seen = []
    real = calibrate.replay_and_compare

    def spy(cfg, a, b):
        w = calibrate.window_jobs(calibrate._STATE["jobs"], cfg.warm_start, cfg.window_end, cfg.lookback_s)
        seen.append((cfg.warm_start, cfg.window_end, w["submit"].max()))
        return real(cfg, a, b)

    calibrate.replay_and_compare = spy
    try:
        res = calibrate.run(jobs, Cluster.procs(4), SimConfig().validated(), t0, split, None, grid=(0, 60), workers=1)
    finally:
        calibrate.replay_and_compare = real
    train, held = seen[:2], seen[2:]
    assert all(ws == t0 and we == split and last < split for ws, we, last in train)
    assert all(ws == split and we is None for ws, we, _ in held)
    assert res["train_jobs"] == before
    assert res["held_back"]["calibrated"]["jobs_compared"] == 60 - before
    assert [c["sched_interval_s"] for c in res["candidates"]] == [0.0, 60.0]


def test_parallel_pool_gives_the_same_result_as_one_worker(c60_store):
    from queries.store import Store

    jobs = Store(str(c60_store)).read("jobs")
    t0 = jobs["submit"].min()
    split = calibrate.split_time(jobs["submit"].to_list(), 0.7)
    args = (jobs, Cluster.procs(4), SimConfig().validated(), t0, split, None, (0, 30, 60))
    one, two = calibrate.run(*args, workers=1), calibrate.run(*args, workers=2)
    assert one == two


def test_reservation_depth_as_a_second_knob_round_trips(c60_store, tmp_path, capsys):
    out = tmp_path / "cal"
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--calibrate", "--grid", "0,60",
                 "--cycles", "all", "--depths", "1,3", "--workers", "1", "--out", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    cal = json.loads(captured.out)["calibration"]
    settings = [(c["sched_interval_s"], c["reservation_depth"]) for c in cal["candidates"]]
    assert settings == [(0.0, 1), (0.0, 3), (60.0, 1), (60.0, 3)]
    assert "8 replays" in captured.err  # the base setting (0 s, depth 1) is a candidate: no extra held-back run
    # no job ever waits for another here: the depth cannot matter, the tie goes to the earlier candidate
    assert cal["chosen"] == {"sched_interval_s": 60.0, "sched_cycle": "all", "reservation_depth": 1}
    saved = out / "calibration.json"
    assert calibrate.read_config_file(saved) == {"sched_interval_s": 60.0, "sched_cycle": "all",
                                                 "reservation_depth": 1}
    doc = json.loads(saved.read_text())
    doc["config"]["reservation_depth"] = 3
    saved.write_text(json.dumps(doc))
    assert main(["simulate", "--store", str(c60_store), "--procs", "4", "--config-file", str(saved),
                 "--out", str(tmp_path / "s1")]) == 0
    assert json.loads((tmp_path / "s1" / "metrics.json").read_text())["params"]["reservation_depth"] == 3
    assert main(["simulate", "--store", str(c60_store), "--procs", "4", "--config-file", str(saved),
                 "--reservation-depth", "2", "--out", str(tmp_path / "s2")]) == 0
    assert json.loads((tmp_path / "s2" / "metrics.json").read_text())["params"]["reservation_depth"] == 2
    assert main(["validate", "--store", str(c60_store), "--procs", "4", "--calibrate", "--depths", "0"]) == 2
    assert "--depths" in capsys.readouterr().err


@pytest.mark.parametrize("scope", ["all", "backfill"])
def test_cycle_starts_on_cycle_instants_or_events_on_a_random_workload(scope):
    """Every pass of ``all`` runs at a multiple of the cycle; with ``backfill`` a start off the cycle happens only
    at an event instant (a submit or another job's end) and only for a job at the head of the queue order."""
    import numpy as np

    rng = np.random.default_rng(3)
    n = 300
    w = pl.DataFrame({"job_id": [str(i) for i in range(n)],
                      "submit": np.sort(rng.integers(0, 20000, n)).astype(float),
                      "req_cpus": rng.integers(1, 9, n).astype(float),
                      "elapsed_s": rng.integers(1, 900, n).astype(float)})
    w = w.with_columns((pl.col("elapsed_s") * 2).alias("time_limit_s"))
    res = simulate(w, Cluster.procs(8), SimConfig(sched_interval_s=7, sched_cycle=scope)).jobs
    starts, ends, submits = (res[c].to_numpy() for c in ("start", "end", "submit"))
    assert (starts >= submits).all()
    off = starts[starts % 7 != 0]
    if scope == "all":
        assert len(off) == 0
    else:
        events = set(submits.tolist()) | set(ends.tolist())
        assert len(off) > 0 and all(t in events for t in off)
    every_event = simulate(w, Cluster.procs(8), SimConfig()).jobs
    assert res["wait_s"].mean() > every_event["wait_s"].mean()  # on this workload the cycle raises the mean wait
