"""The sample cluster generator (``quotaloop sample``): determinism, export format, realism, consistency, ingest.

Every statistic here is recomputed with plain polars from the generated *files* (sacct text, samples Parquet,
nodes CSV), never from the generator's internals. Most tests use a small cluster (32 GPU nodes, 7 days);
one module-scoped full-size generation (128 nodes, 30 days: the bundled configuration) checks the documented
distribution ranges of sample_data/README.md.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import tomllib
from pathlib import Path

import polars as pl
import pytest

from queries import samplegen

REPO = Path(__file__).resolve().parents[3]
HEADER = ("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|Timelimit|"
          "NNodes|NodeList|ReqCPUS|AllocCPUS|ReqMem|ReqTRES|AllocTRES|TotalCPU|MaxRSS|TRESUsageInAve|"
          "TRESUsageInMax|Priority|Comment")
END = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)
SMALL = dict(seed=7, days=7, nodes=32)
FAILED_STATES = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


# ------------------------------------------------------------------ independent readers
def read_sacct(path) -> pl.DataFrame:
    df = pl.read_csv(path, separator="|", infer_schema=False, quote_char=None)
    return df.with_columns(pl.all().fill_null(""))  # sacct prints nothing for "not applicable"


def duration_s(col: str) -> pl.Expr:
    """``[D-]HH:MM:SS`` or ``MM:SS.mmm`` -> seconds."""
    c = pl.col(col)
    days = c.str.extract(r"^(\d+)-", 1).cast(pl.Float64).fill_null(0.0)
    parts = c.str.replace(r"^\d+-", "").str.split(":")
    three = parts.list.len() == 3
    hours = pl.when(three).then(parts.list.get(0).cast(pl.Float64)).otherwise(0.0)
    minutes = pl.when(three).then(parts.list.get(1)).otherwise(parts.list.get(0)).cast(pl.Float64)
    return days * 86400 + hours * 3600 + minutes * 60 + parts.list.get(-1).cast(pl.Float64)


def tres(col: str, key: str) -> pl.Expr:
    return pl.col(col).str.extract(rf"(?:^|,){re.escape(key)}=([^,]+)", 1)


def mem_bytes(e: pl.Expr) -> pl.Expr:
    unit = e.str.extract(r"([KMGT])$", 1).replace_strict({"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40},
                                                         return_dtype=pl.Float64)
    return e.str.extract(r"^([\d.]+)", 1).cast(pl.Float64) * unit


def epoch(col: str) -> pl.Expr:
    return pl.col(col).str.to_datetime("%Y-%m-%dT%H:%M:%S", time_zone="UTC", strict=False).dt.epoch("s")


def expand_hostlist(s: str) -> list[str]:
    out = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?", s):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            out.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            out += [f"{prefix}{v:0{len(lo)}d}" for v in range(int(lo), int(hi or lo) + 1)]
    return out


def allocations(df: pl.DataFrame) -> pl.DataFrame:
    """Allocation rows with parsed numbers; ``tasks`` = array tasks a collapsed pending row stands for."""
    rng = pl.col("JobID").str.extract(r"_\[(.*)\]$", 1)
    tasks = rng.str.split(",").list.eval(
        pl.element().str.split("-").list.last().cast(pl.Int64)
        - pl.element().str.split("-").list.first().cast(pl.Int64) + 1).list.sum()
    return df.filter(~pl.col("JobID").str.contains(".", literal=True)).with_columns(
        state=pl.col("State").str.replace(r" by \d+$", ""),
        gpus=tres("ReqTRES", "gres/gpu").cast(pl.Int64).fill_null(0),
        elapsed_s=duration_s("Elapsed"), limit_s=duration_s("Timelimit"), total_cpu_s=duration_s("TotalCPU"),
        submit_s=epoch("Submit"), start_s=epoch("Start"), end_s=epoch("End"),
        tasks=pl.when(rng.is_null()).then(1).otherwise(tasks),
    )


def window(days: int) -> tuple[int, int]:
    t1 = int(END.timestamp())
    return t1 - days * 86400, t1


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return samplegen.generate(tmp_path_factory.mktemp("small"), **SMALL)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    return samplegen.generate(tmp_path_factory.mktemp("full"), seed=0)  # the bundled configuration


@pytest.fixture(scope="module")
def full_jobs(full):
    return allocations(read_sacct(full["sacct"]))


# ------------------------------------------------------------------ format and determinism
def test_header_is_exactly_the_agreed_sacct_fields(small):
    with open(small["sacct"], encoding="utf-8") as fh:
        assert fh.readline().rstrip("\n") == HEADER
    assert all(line.count("|") == 26 for line in Path(small["sacct"]).read_text().splitlines())


def test_same_seed_is_byte_identical_and_another_seed_differs(small, tmp_path):
    again = samplegen.generate(tmp_path / "again", **SMALL)
    for key in ("sacct", "samples", "nodes", "truth"):
        assert Path(again[key]).read_bytes() == Path(small[key]).read_bytes(), key
    other = samplegen.generate(tmp_path / "other", **{**SMALL, "seed": 8})
    assert Path(other["sacct"]).read_bytes() != Path(small["sacct"]).read_bytes()
    assert Path(other["samples"]).read_bytes() != Path(small["samples"]).read_bytes()


def test_rows_look_like_slurm(small):
    df = read_sacct(small["sacct"])
    jobs = allocations(df)
    ws, we = window(SMALL["days"])
    assert set(jobs["state"].unique()) >= {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY"}
    assert jobs.filter(pl.col("State").str.starts_with("CANCELLED"))["State"].str.contains(r"^CANCELLED by \d+$").all()
    assert (jobs["Submit"].str.contains(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")).all()
    assert jobs["Timelimit"].str.contains(r"^(\d+-)?\d\d:\d\d:\d\d$").all()
    assert jobs["Comment"].str.contains(r"^min_runtime_s=\d+$").all()
    # sacct -S/-E semantics: everything was submitted before the end and was active inside the window.
    assert (jobs["submit_s"] < we).all()
    assert jobs.filter(pl.col("end_s").is_not_null(), pl.col("end_s") < ws).height == 0
    running, pending = jobs.filter(pl.col("state") == "RUNNING"), jobs.filter(pl.col("state") == "PENDING")
    assert running.height and (running["End"] == "Unknown").all() and (running["start_s"] < we).all()
    assert pending.height and (pending["Start"] == "Unknown").all() and (pending["End"] == "Unknown").all()
    started = jobs.filter(pl.col("start_s").is_not_null())
    assert (started["start_s"] >= started["submit_s"]).all()
    # A job that hit its limit ran exactly to it.
    timeout = jobs.filter(pl.col("state") == "TIMEOUT")
    assert timeout.height and (timeout["elapsed_s"] == timeout["limit_s"]).all()
    others = jobs.filter(pl.col("state").is_in(["COMPLETED", "FAILED", "CANCELLED"]))
    assert (others["elapsed_s"] < others["limit_s"]).all()
    # Array tasks print as 123_4 with their own raw id.
    tasks = jobs.filter(pl.col("JobID").str.contains(r"^\d+_\d+$"))
    assert tasks.height and (tasks["JobID"] != tasks["JobIDRaw"]).all()
    # Every started job has .batch and .extern steps; multi-node gangs an srun .0 step.
    steps = df.filter(pl.col("JobID").str.contains(".", literal=True)).with_columns(
        job=pl.col("JobID").str.replace(r"\.[^.]+$", ""), step=pl.col("JobID").str.extract(r"\.([^.]+)$", 1))
    ran = jobs.filter(pl.col("AllocTRES") != "")
    for step, who in (("batch", ran), ("extern", ran), ("0", ran.filter(pl.col("NNodes").cast(pl.Int64) > 1))):
        have = set(steps.filter(pl.col("step") == step)["job"])
        assert who.height and set(who["JobID"]) <= have, step
    # Cancelled while pending: never started, nothing allocated.
    never = jobs.filter(pl.col("Start") == "None")
    assert (never["NodeList"] == "None assigned").all() and (never["state"] == "CANCELLED").all()


def test_min_runtime_contracts_by_class(small):
    jobs = allocations(read_sacct(small["sacct"])).with_columns(
        min_rt=pl.col("Comment").str.extract(r"(\d+)$", 1).cast(pl.Int64))
    assert (jobs.filter(pl.col("QOS") == "debug")["min_rt"] == 0).all()
    assert (jobs.filter(pl.col("QOS").is_in(["high", "low"]))["min_rt"] == 8 * 3600).all()  # training QoS
    assert (jobs.filter(pl.col("gpus") == 0)["min_rt"] == 0).all()  # CPU-only data prep
    assert set(jobs["min_rt"].unique()) <= {0, 1800, 3600, 7200, 8 * 3600}


def test_accounts_are_a_three_level_tree_matching_the_budgets_file(full_jobs):
    accounts = set(full_jobs["Account"].unique())
    assert len(accounts) == 15 and all(a.count("/") == 2 and a.startswith("acme/") for a in accounts)
    assert len({a.rsplit("/", 1)[0] for a in accounts}) == 3
    assert 120 <= full_jobs["User"].n_unique() <= 150
    budget = tomllib.loads((REPO / "sample_data" / "budgets.toml").read_text())
    leaves = {f"acme/{g}/{t}" for g, teams in budget["tree"]["acme"].items() if isinstance(teams, dict)
              for t, v in teams.items() if isinstance(v, dict) and "share" in v}
    assert accounts == leaves


# ------------------------------------------------------------------ capacity and consistency
def _over_allocation(paths, days) -> pl.DataFrame:
    """Nodes whose allocated GPUs / CPUs / memory ever exceed their capacity (sweep line per node)."""
    nodes = pl.read_csv(paths["nodes"])
    _, we = window(days)
    jobs = allocations(read_sacct(paths["sacct"])).filter(pl.col("start_s").is_not_null(), pl.col("AllocTRES") != "")
    per_node = jobs.select(
        "JobID", "start_s", pl.col("end_s").fill_null(we).alias("end_s"),
        pl.col("NodeList").map_elements(expand_hostlist, return_dtype=pl.List(pl.String)).alias("node"),
        (tres("AllocTRES", "gres/gpu").cast(pl.Float64).fill_null(0.0) / pl.col("NNodes").cast(pl.Float64)).alias("g"),
        (tres("AllocTRES", "cpu").cast(pl.Float64) / pl.col("NNodes").cast(pl.Float64)).alias("c"),
        (mem_bytes(tres("AllocTRES", "mem")) / pl.col("NNodes").cast(pl.Float64)).alias("m"),
    ).explode("node")
    assert (per_node.group_by("JobID").agg(pl.col("node").n_unique() == pl.len())["node"]).all()
    ev = pl.concat([
        per_node.select("node", pl.col("start_s").alias("t"), pl.lit(1).alias("up"), "g", "c", "m"),
        per_node.select("node", pl.col("end_s").alias("t"), pl.lit(0).alias("up"), -pl.col("g"), -pl.col("c"),
                        -pl.col("m")),
    ]).sort(["node", "t", "up"])  # at equal times ends (up=0) come first: a node is reused the same second
    used = ev.with_columns(pl.col("g", "c", "m").cum_sum().over("node")).group_by("node").agg(
        pl.col("g", "c", "m").max())
    joined = used.join(nodes, on="node", how="left")
    assert joined["cpus"].null_count() == 0, "a NodeList names a node that nodes.csv does not have"
    return joined.filter((pl.col("g") > pl.col("gpus") + 1e-9) | (pl.col("c") > pl.col("cpus") + 1e-9)
                         | (pl.col("m") > pl.col("mem_bytes") + 1.0))


def test_no_node_is_ever_over_allocated(small, full):
    assert _over_allocation(small, SMALL["days"]).height == 0
    assert _over_allocation(full, 30).height == 0


def test_over_allocation_check_catches_a_double_booking(small, tmp_path):
    """The checker itself can fail: copy an 8-GPU job under another id, so its node holds 16 GPUs."""
    lines = Path(small["sacct"]).read_text().splitlines()
    victim = allocations(read_sacct(small["sacct"])).filter(
        pl.col("NNodes") == "1", pl.col("AllocTRES").str.contains("gres/gpu=8,")).row(0, named=True)
    fields = next(ln for ln in lines if ln.startswith(victim["JobID"] + "|")).split("|")
    fields[0] = fields[1] = "99999999"
    bad = tmp_path / "sacct.txt"
    bad.write_text("\n".join([*lines, "|".join(fields)]) + "\n")
    over = _over_allocation({**small, "sacct": bad}, SMALL["days"])
    assert over["node"].to_list() == [victim["NodeList"]]


def test_sacct_totals_match_the_samples(small):
    df = read_sacct(small["sacct"])
    jobs = allocations(df)
    _, we = window(SMALL["days"])
    s = pl.read_parquet(small["samples"])
    assert s.columns == ["job_id", "ts", "interval_s", "cpu_used", "mem_bytes", "gpu_util", "gpu_mem_bytes"]
    per_job = s.group_by("job_id").agg(
        n=pl.len(), span=pl.col("interval_s").sum(), cpu=(pl.col("cpu_used") * pl.col("interval_s")).sum(),
        mem=pl.col("mem_bytes").max(), gmean=(pl.col("gpu_util") * pl.col("interval_s")).sum()
        / pl.col("interval_s").sum(), gmax=pl.col("gpu_util").max(), cpu_peak=pl.col("cpu_used").max(),
        first=pl.col("ts").min().dt.epoch("s"))
    assert per_job["n"].max() <= 288
    j = jobs.join(per_job, left_on="JobID", right_on="job_id", how="inner")
    assert j.height == per_job.height > 100  # every sampled job is an exported job
    assert (j["first"] == j["start_s"]).all()
    expect_span = pl.when(pl.col("state") == "RUNNING").then(we - pl.col("start_s")).otherwise(pl.col("elapsed_s"))
    assert j.select((pl.col("span") == expect_span).all()).item()
    done = j.filter(pl.col("state") != "RUNNING")
    assert (done["total_cpu_s"] - done["cpu"]).abs().max() <= 1.0  # TotalCPU = integral of cpu_used
    assert (done["cpu_peak"] <= done["AllocCPUS"].cast(pl.Float64) + 1e-9).all()
    # Steps of single-node jobs: MaxRSS = peak memory, gpuutil mean / peak in percent.
    batch = df.filter(pl.col("JobID").str.ends_with(".batch")).select(
        pl.col("JobID").str.replace(r"\.batch$", "").alias("JobID"),
        mem_bytes(pl.col("MaxRSS")).alias("rss"),
        tres("TRESUsageInAve", "gres/gpuutil").cast(pl.Float64).alias("ave"),
        tres("TRESUsageInMax", "gres/gpuutil").cast(pl.Float64).alias("mx"))
    b = done.filter(pl.col("NNodes") == "1").join(batch, on="JobID")
    assert b.height > 100
    assert (b["rss"] == (b["mem"] // 1024) * 1024).all()
    g = b.filter(pl.col("gpus") > 0)
    assert g.height > 50
    assert ((g["ave"] - (g["gmean"] * 100)).abs() <= 0.5 + 1e-6).all()
    assert ((g["mx"] - (g["gmax"] * 100)).abs() <= 0.5 + 1e-6).all()
    assert s.filter(pl.col("gpu_util") > 1).height == 0 and s.filter(pl.col("gpu_util") < 0).height == 0


# ------------------------------------------------------------------ realism (full size, documented ranges)
def test_distributions_land_in_the_documented_ranges(full, full_jobs):
    jobs = full_jobs
    s = pl.read_parquet(full["samples"])
    assert 20_000 <= jobs["tasks"].sum() <= 60_000
    assert s.height < 5_000_000
    cpu_only = (jobs["gpus"] == 0).mean()
    assert 0.40 <= cpu_only <= 0.50  # Helios: 47 %
    gpu = jobs.filter(pl.col("gpus") > 0)
    assert gpu["gpus"].median() == 1 and 3.0 <= gpu["gpus"].mean() <= 4.5  # Helios: median 1, mean 3.7
    done = gpu.filter(~pl.col("state").is_in(["RUNNING", "PENDING", "PREEMPTED"]))
    share = {k: (done["state"].is_in(v)).mean() for k, v in
             {"completed": ["COMPLETED"], "cancelled": ["CANCELLED"], "failed": list(FAILED_STATES)}.items()}
    assert 0.55 <= share["completed"] <= 0.69 and 0.16 <= share["cancelled"] <= 0.28
    assert 0.11 <= share["failed"] <= 0.22  # Helios GPU jobs: 62 / 22 / 16 %
    gpu_s = done.with_columns(gs=pl.col("gpus") * pl.col("elapsed_s"))
    cancelled_time = gpu_s.filter(pl.col("state") == "CANCELLED")["gs"].sum() / gpu_s["gs"].sum()
    assert cancelled_time >= 0.2 and cancelled_time > share["cancelled"]  # cancelled jobs burn much GPU time
    ran = done.filter(pl.col("elapsed_s") > 0)
    assert 60 <= ran["elapsed_s"].median() <= 1800 and 3600 <= ran["elapsed_s"].mean() <= 6 * 3600
    completed = jobs.filter(pl.col("state") == "COMPLETED")
    assert 0.3 <= (completed["elapsed_s"] / completed["limit_s"]).median() <= 0.65
    assert (jobs["state"] == "TIMEOUT").mean() >= 0.01


def _demand_and_occupancy(paths, jobs, days) -> tuple[float, float]:
    """GPUs held or waited for (pending + running) and GPUs held, time-averaged over the window / capacity."""
    ws, we = window(days)
    capacity = pl.read_csv(paths["nodes"])["gpus"].sum() * (we - ws)
    g = jobs.filter(pl.col("gpus") > 0)

    def area(since: str, weight) -> float:
        lo = pl.max_horizontal(pl.col(since), pl.lit(ws))
        hi = pl.min_horizontal(pl.col("end_s").fill_null(we), pl.lit(we))
        return g.filter(pl.col(since).is_not_null()).select(((hi - lo).clip(0) * weight).sum()).item()

    demand = area("submit_s", pl.col("gpus") * pl.col("tasks")) / capacity
    return demand, area("start_s", pl.col("gpus")) / capacity


def test_demand_is_two_to_three_times_capacity_and_the_cluster_is_busy(full, full_jobs):
    demand, occupancy = _demand_and_occupancy(full, full_jobs, 30)
    assert 2.0 <= demand <= 3.0  # DOMAIN.md section 6: demand 2-3x supply at all times
    assert 0.8 <= occupancy <= 1.0
    pending = full_jobs.filter(pl.col("state") == "PENDING").with_columns(
        master=pl.col("JobID").str.extract(r"^(\d+)_", 1))
    assert pending.height > 0
    # Still-pending tasks of one array are printed as one row `123_[4-9]` (the bundled seed has one).
    assert pending["JobID"].str.contains(r"^\d+_\[[\d,-]+\]$").any()
    tasks = pending.filter(pl.col("master").is_not_null())
    assert tasks["master"].n_unique() == tasks.height


def test_waste_rankings_have_a_story(full, full_jobs):
    """Planted habits (ground_truth.json) show up in the logs: hoarders waste CPU, parkers idle GPUs."""
    truth = pl.DataFrame(json.loads(Path(full["truth"]).read_text())["users"])
    # Request habit: per user, the median job's CPU efficiency (TotalCPU / (AllocCPUS x Elapsed)) over
    # single-node jobs of 10+ minutes (gangs get whole nodes whoever asks, so they do not show a habit).
    j = full_jobs.filter(pl.col("state") != "RUNNING", pl.col("elapsed_s") >= 600, pl.col("NNodes") == "1",
                         pl.col("AllocTRES") != "")
    eff = j.group_by("User").agg(
        eff=(pl.col("total_cpu_s") / (pl.col("AllocCPUS").cast(pl.Float64) * pl.col("elapsed_s"))).median()
    ).join(truth, left_on="User", right_on="user")
    by_habit = dict(eff.group_by("habit").agg(pl.col("eff").median()).iter_rows())
    assert by_habit["hoarder"] < by_habit["over-requester"] < by_habit["typical"] < by_habit["right-sizer"]
    assert by_habit["right-sizer"] > 3 * by_habit["hoarder"]
    batch = read_sacct(full["sacct"]).filter(pl.col("JobID").str.ends_with(".batch")).select(
        pl.col("JobID").str.replace(r"\.batch$", ""),
        tres("TRESUsageInAve", "gres/gpuutil").cast(pl.Float64).alias("u"))
    # GPU habit: GPU-time-weighted mean utilisation of each user's single-node GPU jobs.
    gu = j.filter(pl.col("gpus") > 0).join(batch, on="JobID").with_columns(w=pl.col("gpus") * pl.col("elapsed_s"))
    gu = gu.group_by("User").agg(u=(pl.col("u") * pl.col("w")).sum() / pl.col("w").sum()).join(
        truth, left_on="User", right_on="user")
    by_habit = dict(gu.group_by("habit").agg(pl.col("u").median()).iter_rows())
    assert by_habit["hoarder"] < by_habit["over-requester"] < by_habit["typical"] < by_habit["right-sizer"]
    inter = full_jobs.filter(pl.col("QOS") == "interactive").join(batch, on="JobID").join(
        truth.select("user", "parks_interactive_gpus"), left_on="User", right_on="user")
    util = dict(inter.group_by("parks_interactive_gpus").agg(pl.col("u").mean()).iter_rows())
    assert util[True] < 3 and util[False] > 2 * util[True] + 3  # percent: ~1 % against ~10 %


# ------------------------------------------------------------------ through the real ingest path and the CLI
def test_sample_store_is_built_by_the_real_ingest(small, tmp_path):
    from queries.store import Store

    store = tmp_path / "store"
    paths, summaries = samplegen.build_store(store, export_dir=tmp_path / "export", **SMALL)
    assert Path(paths["sacct"]).read_bytes() == Path(small["sacct"]).read_bytes()
    assert summaries[0].format == "sacct" and len(summaries) == 3
    assert all(s.rows_rejected == 0 and s.rows_read == s.rows_accepted for s in summaries)  # a clean export
    st = Store(store)
    jobs, samples, nodes = st.read("jobs"), st.read("samples"), st.read("nodes")
    alloc = allocations(read_sacct(small["sacct"]))
    assert jobs.height == alloc.height
    assert samples.height == pl.read_parquet(small["samples"]).height
    assert nodes.height == pl.read_csv(small["nodes"]).height and set(nodes["cluster"]) == {"acme"}
    j = jobs.join(alloc.select("JobID", "total_cpu_s", "state"), left_on="job_id", right_on="JobID")
    done = j.filter(pl.col("state").is_in(["COMPLETED", "FAILED", "TIMEOUT"]))
    # Job names and QoS carry the class, as a lab's conventions do: ingest's rules recover every class.
    classes = dict(jobs.group_by("job_class").len().iter_rows())
    assert set(classes) == {"debug", "interactive", "eval", "training", "dataprep"}, classes
    assert (jobs.filter(pl.col("req_gpus") == 0)["job_class"] == "dataprep").all()
    # TotalCPU is printed to the second above an hour (gangs also split it over steps): 1 s resolution.
    assert done.height and ((done["cpu_seconds_used"] - done["total_cpu_s"]).abs() <= 1.0).all()


def test_cli_sample_writes_export_and_store(tmp_path, capsys):
    from dashboard.cli import main

    store = tmp_path / "s"
    rc = main(["sample", "--store", str(store), "--days", "2", "--nodes", "8", "--seed", "3", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert Path(out["files"]["sacct"]).parent == tmp_path / "s-export"
    assert sum(s["jobs"] for s in out["ingest"]) > 0
    assert main(["sample", "--store", str(store), "--nodes", "4"]) == 2
    assert "--nodes" in capsys.readouterr().err


def test_cli_default_end_matches_the_generator():
    from dashboard.cli import sample

    assert sample.DEFAULT_END == samplegen.DEFAULT_END
