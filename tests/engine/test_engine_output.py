"""Engine output contract (canonical jobs schema + extras), files, compare, cluster loaders and the CLI."""
from __future__ import annotations

import json
import math

import polars as pl
import pytest

from dashboard.cli import main
from engine import Cluster, ConfigError, SimConfig, compare, parse_duration, simulate
from engine.result import EXTRA_COLUMNS
from queries.store import schema
from queries.store import Store

T0 = 1_780_000_000_000_000  # µs, 2026-05-28


def canonical_jobs(n=60, seed=3):
    """A small canonical jobs frame (datetimes, strings, all schema columns) for a 4 x 8-GPU cluster."""
    import random

    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        gpus = rnd.choice([1, 2, 4, 8, 16])
        run = rnd.randint(60, 7200)
        rows.append({
            "cluster": "c1", "job_id": str(1000 + i), "job_name": f"j{i}", "user": rnd.choice(["ana", "ben"]),
            "account": rnd.choice(["lab/vision", "lab/speech"]), "partition": "gpu", "qos": "normal",
            "job_class": rnd.choice(["training", "debug"]), "state": rnd.choice(["COMPLETED", "FAILED"]),
            "submit": T0 + i * 120_000_000, "start": T0 + i * 120_000_000 + 5_000_000, "elapsed_s": float(run),
            "time_limit_s": float(run * 2), "req_gpus": float(gpus), "req_cpus": float(gpus * 8),
            "req_mem_bytes": gpus * 32.0 * 2**30, "mean_gpu_util": 0.5,
        })
    df = pl.DataFrame(rows).with_columns(pl.col("submit", "start").cast(pl.Datetime("us", "UTC")))
    return schema.conform(df, "jobs")


CLUSTER = Cluster.uniform(4, 8, 64, 512 * 2**30)


def test_output_has_the_canonical_columns_then_the_extras():
    w = canonical_jobs()
    res = simulate(w, CLUSTER, SimConfig(backfill="easy"))
    names = list(schema.JOBS)
    assert res.jobs.columns == names + list(EXTRA_COLUMNS)
    for name in names:
        assert res.jobs.schema[name] == schema.JOBS[name][0], name
    j = res.jobs
    assert (j["source"] == "sim").all()
    assert j["start"].dtype == pl.Datetime("us", "UTC")
    # wait_s, elapsed and the timestamps agree
    assert (((j["start"] - j["submit"]).dt.total_microseconds() / 1e6 - j["wait_s"]).abs() < 1e-6).all()
    assert (((j["end"] - j["start"]).dt.total_microseconds() / 1e6 - j["elapsed_s"]).abs() < 1e-6).all()
    assert j["node_list"].null_count() == 0 and (j["nodes"] >= 1).all()
    # a 16-GPU job is a gang of two whole nodes
    big = j.filter(pl.col("req_gpus") == 16)
    assert big.height and (big["nodes"] == 2).all() and (big["alloc_gpus"] == 16).all()
    # the conformed output is the same frame (nothing outside the schema lost in its columns)
    assert schema.conform(j, "jobs").equals(j.select(names))


def test_write_is_a_flat_store_the_queries_read(tmp_path):
    import queries

    res = simulate(canonical_jobs(), CLUSTER, SimConfig())
    out = res.write(tmp_path / "sim")
    assert sorted(p.name for p in out.iterdir()) == ["jobs.parquet", "metrics.json", "timeline.parquet"]
    assert pl.read_parquet(out / "jobs.parquet").equals(res.jobs)
    assert pl.read_parquet(out / "timeline.parquet").equals(res.timeline)
    text = (out / "metrics.json").read_text()
    assert json.loads(text)["jobs_simulated"] == 60
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=1) + "\n"  # sorted keys, stable layout
    assert Store(out).read("jobs").height == 60
    # an independent computation (DuckDB, the queue_waits query) of the overall mean wait agrees
    waits = queries.run("queue_waits", store=str(out)).filter((pl.col("job_class") == "(all)") & (pl.col("team") == "(all)"))
    assert waits["wait_mean_s"][0] == pytest.approx(res.metrics["wait_s"]["mean"], rel=1e-9, abs=1e-6)
    assert waits["jobs_started"][0] == 60


def test_timeline_matches_jobs_and_capacity():
    res = simulate(canonical_jobs(), CLUSTER, SimConfig(backfill="conservative"))
    tl = res.timeline
    per_job = tl.group_by("job_id").agg(pl.col("gpus").sum().alias("g"), pl.col("start").min().alias("s"))
    j = res.jobs.join(per_job, on="job_id")
    assert (j["g"] == j["alloc_gpus"]).all() and (j["s"] == j["start"]).all()
    occupancy = res.metrics["allocated_resource_hours"]
    expect = (tl.select(((pl.col("end") - pl.col("start")).dt.total_microseconds() / 3.6e9 * pl.col("gpus")).sum()))
    assert occupancy == pytest.approx(expect.item())


def test_metrics_definitions_on_a_hand_case():
    # 2 processors: a (2 procs, 0-10), b (1 proc, submitted 1, waits until 10, runs 5 s)
    w = pl.DataFrame({"job_id": ["1", "2"], "submit": [0.0, 1.0], "req_cpus": [2.0, 1.0], "elapsed_s": [10.0, 5.0],
                      "time_limit_s": [10.0, 5.0], "job_class": ["training", "debug"], "account": ["x", "y"]})
    m = simulate(w, Cluster.procs(2), SimConfig()).metrics
    assert m["span_s"] == 15.0
    assert m["occupancy"] == pytest.approx((2 * 10 + 1 * 5) / (2 * 15))
    assert m["wait_s"]["mean"] == 4.5 and m["wait_s"]["p50"] == 4.5
    assert m["wait_s_by_class"]["debug"]["p90"] == 9.0
    # bounded slowdown: a 1, b (14 / max(5, 10)) = 1.4
    assert m["bounded_slowdown_mean"] == pytest.approx((1 + 1.4) / 2)
    assert set(m["wait_s_by_team"]) == {"x", "y"}


def test_compare_is_one_table_of_deltas():
    w = canonical_jobs()
    a = simulate(w, CLUSTER, SimConfig(backfill="none"))
    b = simulate(w, CLUSTER, SimConfig(backfill="easy"))
    t = compare(a, b)
    assert t.columns == ["metric", "baseline", "scenario", "delta"]
    row = t.filter(pl.col("metric") == "wait_s.mean").row(0, named=True)
    assert row["baseline"] == pytest.approx(a.metrics["wait_s"]["mean"])
    assert row["delta"] == pytest.approx(b.metrics["wait_s"]["mean"] - a.metrics["wait_s"]["mean"])
    assert t["metric"].is_unique().all() and t["metric"].to_list() == sorted(t["metric"].to_list())
    assert compare(a.metrics, a.metrics)["delta"].drop_nulls().abs().max() == 0


def test_durations():
    assert [parse_duration(x) for x in ("3600", 90, "30m", "8h", "1h30m", "2d", "1.5h", "0")] == \
        [3600, 90, 1800, 28800, 5400, 172800, 5400, 0]
    for bad in ("8x", "-5", "h", "", None, "1h-30m"):
        with pytest.raises(ConfigError):
            parse_duration(bad)


# ------------------------------------------------------------------------------------------ cluster layouts
def test_openb_node_list_loads(shared_data):
    path = shared_data / "gpu-clusters" / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
    cl = Cluster.from_csv(path)
    raw = pl.read_csv(path)
    assert cl.size == raw.height == 1213
    assert cl.total_gpus == raw["gpu"].sum()
    assert cl.total_cpus == pytest.approx(raw["cpu_milli"].sum() / 1000)
    k = cl.names.index("openb-node-0000")
    assert (cl.gpus[k], cl.cpus[k], cl.mem_bytes[k], cl.gpu_type[k]) == (2.0, 64.0, 262144 * 2.0**20, "P100")
    # jobs asking for a GPU model land on that model only; jobs too big for any node set are skipped
    w = pl.DataFrame({"job_id": ["1", "2", "3"], "submit": [0.0, 0.0, 0.0], "elapsed_s": [10.0, 10.0, 10.0],
                      "req_gpus": [8.0, 1.0, 100000.0], "req_cpus": [8.0, 4.0, 1.0], "gpu_type": ["G3", "T4", None]})
    res = simulate(w, cl, SimConfig())
    nodes = dict(zip(res.jobs["job_id"].to_list(), res.jobs["node_list"].to_list()))
    assert cl.gpu_type[cl.names.index(nodes["1"])] == "G3" and cl.gpu_type[cl.names.index(nodes["2"])] == "T4"
    assert res.metrics["jobs_skipped_by_reason"]["too_large"] == 1


def test_nodes_csv_and_bad_layouts(tmp_path):
    p = tmp_path / "nodes.csv"
    p.write_text("node,partition,cpus,gpus,gpu_type,mem_bytes\nb1,gpu,64,8,h100,1e12\na1,cpu,128,0,,\n")
    cl = Cluster.from_csv(p)
    assert cl.names == ("a1", "b1") and cl.gpus == (0.0, 8.0) and cl.mem_bytes == (None, 1e12)
    assert cl.gpu_type == (None, "h100") and cl.partition == ("cpu", "gpu")
    bad = tmp_path / "bad.csv"
    bad.write_text("node,cpus,gpus\nx,lots,8\n")
    with pytest.raises(ConfigError, match="bad.csv:2: cpus: not a number"):
        Cluster.from_csv(bad)
    other = tmp_path / "other.csv"
    other.write_text("host,cores\nx,8\n")
    with pytest.raises(ConfigError, match="expected a nodes CSV"):
        Cluster.from_csv(other)
    with pytest.raises(ConfigError, match="duplicate node names"):
        Cluster.from_frame(pl.DataFrame({"node": ["x", "x"], "cpus": [1.0, 1.0]}))
    with pytest.raises(ConfigError):
        Cluster.procs(0)


# ------------------------------------------------------------------------------------------ CLI
SWF = """; UnixStartTime: 1000000000
; MaxProcs: 4
1 0 0 10 2 -1 -1 2 10 -1 1 1 1 -1 1 -1 -1 -1
2 1 0 10 4 -1 -1 4 10 -1 1 2 1 -1 1 -1 -1 -1
3 2 0 5 2 -1 -1 2 5 -1 1 1 1 -1 1 -1 -1 -1
4 3 0 -1 1 -1 -1 1 10 -1 5 1 1 -1 1 -1 -1 -1
"""


def test_cli_simulate_swf_workload(tmp_path, capsys):
    wf = tmp_path / "tiny.swf"
    wf.write_text(SWF)
    out = tmp_path / "out"
    rc = main(["simulate", "--workload", str(wf), "--format", "swf", "--procs", "4", "--policy", "fcfs",
               "--backfill", "easy", "--out", str(out), "--json"])
    assert rc == 0
    m = json.loads(capsys.readouterr().out)
    # job 4 never ran (run -1): skipped. 1 runs 0-10; 2 (4 procs) waits for 10; 3 (2 procs, 5 s) would end
    # at 7 <= 10, the reservation of job 2, so it backfills at 2.
    assert m["jobs_simulated"] == 3 and m["jobs_skipped_by_reason"]["never_ran"] == 1
    jobs = pl.read_parquet(out / "jobs.parquet")
    start = dict(zip(jobs["job_id"].to_list(), (jobs["start"].dt.epoch("s") - 1_000_000_000).to_list()))
    assert start == {"1": 0, "2": 10, "3": 2}
    assert m["params"]["backfill"] == "easy"


def test_cli_simulate_counts_records_rejected_at_read_time(tmp_path, capsys):
    """A record the reader rejects (job number 0) is neither simulated nor skipped by the engine: the summary
    says it was read and rejected, in text and in JSON."""
    wf = tmp_path / "tiny.swf"
    wf.write_text(SWF + "0 4 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n")
    base = ["simulate", "--workload", str(wf), "--format", "swf", "--procs", "4"]
    assert main(base + ["--out", str(tmp_path / "o1")]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == f"{wf}: read 5 = accepted 4 + rejected 1 (rejected records are not simulated)"
    assert "3 jobs simulated (1 skipped" in second
    assert main(base + ["--out", str(tmp_path / "o2"), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["workload"] == {"file": str(wf), "rows_read": 5, "rows_accepted": 4, "rows_rejected": 1}
    assert m["jobs_simulated"] + m["jobs_skipped"] == m["workload"]["rows_accepted"]


def test_cli_simulate_store_with_budgets(tmp_path, capsys):
    store = tmp_path / "store"
    nodes = schema.conform(pl.DataFrame({"cluster": ["c1"] * 4, "node": [f"n{i}" for i in range(4)],
                                         "gpus": [8.0] * 4, "cpus": [64.0] * 4}), "nodes")
    with Store(store).transaction() as tx:
        tx.upsert("jobs", canonical_jobs())
        tx.replace_nodes("c1", nodes)
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[tree.lab]\nshare = 1\n[tree.lab.vision]\nshare = 3\n[tree.lab.speech]\nshare = 1\n'
                       '[min_runtime]\ntraining = "1h"\ndebug = 0\n')
    out = tmp_path / "out"
    rc = main(["simulate", "--store", str(store), "--policy", "fairshare", "--backfill", "conservative",
               "--budgets", str(budgets), "--checkpoint-interval", "30m", "--seed", "3", "--out", str(out)])
    assert rc == 0
    line = capsys.readouterr().out
    assert "60 jobs simulated" in line
    jobs = pl.read_parquet(out / "jobs.parquet")
    mrt = dict(zip(jobs["job_class"].to_list(), jobs["min_runtime_s"].to_list()))
    assert mrt == {"training": 3600.0, "debug": 0.0}
    assert set(jobs["budget_bucket"].unique().to_list()) == {"lab/vision", "lab/speech"}
    m = json.loads((out / "metrics.json").read_text())
    assert m["params"]["seed"] == 3 and m["params"]["checkpoint_interval_s"] == 1800
    # the rows of the log path's attainment table: the budget's leaves, plus "unbudgeted" (no demand here)
    teams = m["attainment"]["teams"]
    assert {k for k, t in teams.items() if t["kind"] == "node"} == {"lab/vision", "lab/speech"}
    assert set(teams) == {"lab/vision", "lab/speech", "unbudgeted"} and teams["unbudgeted"]["demanded_hours"] == 0


@pytest.mark.parametrize("argv, msg", [
    (["--procs", "4", "--min-runtime", "8x"], "--min-runtime: not a duration"),
    ([], "no cluster layout"),
    (["--procs", "4", "--nodes", "2", "--gpus-per-node", "8"], "give one of --nodes-csv"),
    (["--procs", "4", "--walltime-margin", "1.5"], "walltime_margin"),
    (["--procs", "4", "--budgets", "MISSING"], "cannot read"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path, capsys, argv, msg):
    wf = tmp_path / "tiny.swf"
    wf.write_text(SWF)
    argv = [a.replace("MISSING", str(tmp_path / "nope.toml")) for a in argv]
    rc = main(["simulate", "--workload", str(wf), "--out", str(tmp_path / "o")] + argv)
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1, err


def test_same_seed_same_bytes_across_cli_runs(tmp_path):
    wf = tmp_path / "tiny.swf"
    wf.write_text(SWF)
    for k in (1, 2):
        assert main(["simulate", "--workload", str(wf), "--procs", "4", "--out", str(tmp_path / f"o{k}")]) == 0
    for name in ("jobs.parquet", "timeline.parquet", "metrics.json"):
        assert (tmp_path / "o1" / name).read_bytes() == (tmp_path / "o2" / name).read_bytes()
    assert not math.isnan(json.loads((tmp_path / "o1" / "metrics.json").read_text())["occupancy"])


def test_cli_flags_exactly_as_the_issue_spells_them(tmp_path, capsys):
    """--workload FILE --format swf|sacct|csv, --nodes-csv nodes.csv | --nodes/--gpus-per-node/--cpus-per-node |
    --procs, every policy/backfill flag, --out DIR and --json: each run's metrics.json records what was asked."""
    fixtures = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures"
    jobs_csv = tmp_path / "jobs.csv"
    canonical_jobs(40).with_columns(pl.col("submit", "start").dt.strftime("%Y-%m-%dT%H:%M:%SZ")).write_csv(jobs_csv)
    nodes_csv = tmp_path / "nodes.csv"
    nodes_csv.write_text("node,partition,cpus,gpus,gpu_type,mem_bytes\n" +
                         "".join(f"n{i},gpu,64,8,,{512 * 2**30}\n" for i in range(4)))
    runs = {
        "csv+cluster": ["--workload", str(jobs_csv), "--format", "csv", "--nodes-csv", str(nodes_csv),
                        "--policy", "priority", "--backfill", "conservative", "--reservation-depth", "2",
                        "--backfill-order", "area", "--min-runtime", "1h", "--checkpoint-interval", "30m",
                        "--walltime-margin", "0.2", "--seed", "5"],
        "csv+nodes": ["--workload", str(jobs_csv), "--format", "csv", "--nodes", "4", "--gpus-per-node", "8",
                      "--cpus-per-node", "64", "--policy", "drf", "--backfill", "easy", "--backfill-order", "smallest"],
        "sacct+nodes": ["--workload", str(fixtures / "sacct" / "gpu_cluster.txt"), "--format", "sacct",
                        "--nodes", "2", "--gpus-per-node", "8", "--cpus-per-node", "64", "--policy", "fairshare",
                        "--backfill", "none"],
        "swf+procs": ["--workload", str(fixtures / "swf" / "tiny.swf"), "--format", "swf", "--procs", "64",
                      "--policy", "fcfs", "--backfill", "easy", "--bf-max-job-test", "3"],
    }
    for label, argv in runs.items():
        out = tmp_path / label
        assert main(["simulate", *argv, "--out", str(out), "--json"]) == 0, label
        m = json.loads(capsys.readouterr().out)
        assert m == json.loads((out / "metrics.json").read_text()), label
        assert m["jobs_simulated"] > 0 and pl.read_parquet(out / "jobs.parquet").height == m["jobs_simulated"]
        assert (out / "timeline.parquet").exists()
        p = m["params"]
        assert p["policy"] == argv[argv.index("--policy") + 1] and p["backfill"] == argv[argv.index("--backfill") + 1]
    p = json.loads((tmp_path / "csv+cluster" / "metrics.json").read_text())["params"]
    # --min-runtime is the what-if override of every job (engine.min_runtime), not the lowest-ranked default
    assert (p["reservation_depth"], p["backfill_order"], p["min_runtime_by_class"], p["min_runtime_s"],
            p["checkpoint_interval_s"], p["walltime_margin"], p["seed"]) == (2, "area", {"default": 3600}, None,
                                                                             1800, 0.2, 5)
    assert json.loads((tmp_path / "csv+cluster" / "metrics.json").read_text())["cluster"]["gpus"] == 32
    assert json.loads((tmp_path / "csv+nodes" / "metrics.json").read_text())["params"]["backfill_order"] == "smallest"
    m = json.loads((tmp_path / "swf+procs" / "metrics.json").read_text())
    assert m["cluster"]["procs_mode"] and m["params"]["backfill_max_job_test"] == 3


def test_cli_replay_logged(tmp_path, capsys):
    store = tmp_path / "store"
    with Store(store).transaction() as tx:
        tx.upsert("jobs", canonical_jobs().with_columns(pl.lit("gpu001").alias("node_list"), pl.lit(1).alias("nodes")))
        tx.replace_nodes("c1", schema.conform(pl.DataFrame({"cluster": ["c1"], "node": ["gpu001"], "gpus": [16.0],
                                                            "cpus": [128.0]}), "nodes"))
    out = tmp_path / "out"
    assert main(["simulate", "--store", str(store), "--replay", "logged", "--out", str(out), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    jobs = pl.read_parquet(out / "jobs.parquet")
    src = canonical_jobs()
    assert jobs.sort("job_id")["start"].to_list() == src.sort("job_id")["start"].to_list()
    assert m["params"]["replay"] == "logged" and m["preemptions"] == 0


def test_cli_warm_start(tmp_path, capsys):
    # canonical_jobs(): job i submitted at T0 + 120 i s, logged start 5 s later. Warm start at T0 + 1 h: jobs
    # 0..29 started before it (30 x 120 s = 1 h) run as logged; the window ends at T0 + 2 h, so jobs submitted
    # after it are not replayed; metrics cover [T0 + 1 h, T0 + 2 h).
    import datetime as dt

    store = tmp_path / "store"
    nodes = schema.conform(pl.DataFrame({"cluster": ["c1"] * 4, "node": [f"n{i}" for i in range(4)],
                                         "gpus": [8.0] * 4, "cpus": [64.0] * 4, "mem_bytes": [512.0 * 2**30] * 4}),
                           "nodes")
    with Store(store).transaction() as tx:
        tx.upsert("jobs", canonical_jobs())
        tx.replace_nodes("c1", nodes)
    t0 = dt.datetime.fromtimestamp(T0 / 1e6, dt.timezone.utc)
    warm, end = t0 + dt.timedelta(hours=1), t0 + dt.timedelta(hours=2)
    out = tmp_path / "out"
    assert main(["simulate", "--store", str(store), "--warm-start", warm.isoformat(), "--window-end", end.isoformat(),
                 "--out", str(out), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["params"]["warm_start"] == warm.isoformat() and m["span_s"] == 3600.0
    assert m["attainment"]["window_start"] == warm.isoformat()
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert jobs.filter(pl.col("pinned")).height == m["warm_start"]["jobs_pinned"] == 30
    assert jobs.filter(~pl.col("pinned")).height == m["jobs_simulated"] == 30  # submitted in [1 h, 2 h)
    assert (jobs.filter(~pl.col("pinned"))["start"] >= warm).all()
    assert main(["simulate", "--store", str(store), "--warm-start", "soon", "--out", str(out)]) == 2
    assert "--warm-start: not an ISO time: 'soon'" in capsys.readouterr().err
