"""Speed of the scheduling engine at a lab's scale (issue 16), against the same run with the newer mechanism off.

5. Issue 16, linear in the backlog: CPU per scheduling pass as a capped team's backlog grows 1x, 3x, 10x on the
   same cluster, with the fair-share order's class skipping (``engine.policies.buckets.SKIP``) on and off
   (identical results required); with ``QUOTALOOP_BENCH_512`` (a ``quotaloop sample --nodes 512`` store) also
   the 512-node capped / caps-scaled ratio.
6. Issue 16, the capped / uncapped ratio on 512 nodes (``QUOTALOOP_BENCH_512``): the sample's budgets.toml against
   its GPU counts x4 and x4 without max_gpus, one process; minutes long, so it runs only when named with -k.
7. Issue 16, the compiled node pool (``engine/_nodecore.c``) against the Python pool: 30-day fair share + EASY +
   8 h contracts on the sample (128 nodes) and on the stores named by ``QUOTALOOP_BENCH_NODES``, one process.
7b. Issue 16, the fair-share + EASY pass with the compiled order's cursor examining and starting the backfill
   candidates (``_fsorder.Funded``) against the per-bucket walk before it and the all-Python engine, one process.
8. Issue 16, the growth curve: the same month on the sample and the ``QUOTALOOP_BENCH_NODES`` stores (1,024 to
   8,192 GPUs), engine CPU, CPU per job, peak RSS per job and the growth exponent against n log n, each size in a
   child process of its own; minutes long, so it runs only when named (-k growth_curve).

Times are process CPU seconds (``time.process_time``: the 2-core machine is shared). The naive baselines and the
HPC2N comparisons are in ``bench_engine.py``, whose ``timed`` and ``REPO`` these reuse.
Run: ``python -m pytest tests/benchmarks/bench_engine_scale.py -m benchmark -s``
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from bench_engine import REPO, timed  # tests/benchmarks is on sys.path when pytest imports this module
from engine import Cluster, SimConfig, simulate


# ------------------------------------------------------------------------------------------ 5. backlog growth
def capped_backlog_month(backlog, seed=5):
    """A fortnight on 32 x 8 GPUs: the same uncapped demand, plus ``backlog`` jobs of a team capped at 8 GPUs,
    submitted in the first day, that queue for the rest of the run (what the sample's ``max_gpus`` caps do to a
    bigger cluster)."""
    rng = np.random.default_rng(seed)
    n = 12000
    t0 = 1_790_000_000_000_000
    submit = np.sort(rng.uniform(0, 14 * 86400, n))
    gpus = rng.choice([1, 2, 4, 8], n, p=[.4, .3, .2, .1])
    run = np.maximum(60.0, np.round(rng.lognormal(8, 1.0, n)))
    base = pl.DataFrame({
        "job_id": [str(i + 1) for i in range(n)], "submit": (submit * 1e6).astype(np.int64) + t0,
        "elapsed_s": run, "time_limit_s": np.round(run * rng.uniform(1.2, 3.0, n)), "req_gpus": gpus.astype(float),
        "account": rng.choice(["lab/a", "lab/b"], n)})
    sub = np.sort(rng.uniform(0, 86400, backlog))
    g = rng.choice([2, 4, 8], backlog, p=[.3, .4, .3])
    r = np.round(rng.uniform(3600, 4 * 3600, backlog))
    capped = pl.DataFrame({
        "job_id": [f"c{i}" for i in range(backlog)], "submit": (sub * 1e6).astype(np.int64) + t0,
        "elapsed_s": r, "time_limit_s": r * 2, "req_gpus": g.astype(float), "account": "ops"})
    jobs = pl.concat([base, capped]).sort("submit").with_columns(
        pl.col("submit").cast(pl.Datetime("us", "UTC")), req_cpus=pl.col("req_gpus") * 8,
        req_mem_bytes=pl.col("req_gpus") * 2.0**35, min_runtime_s=pl.lit(8 * 3600.0), job_class=pl.lit("training"))
    return jobs, Cluster.uniform(32, 8, 64, 2**39)


@pytest.mark.benchmark
def test_time_per_event_flat_as_the_capped_backlog_grows():
    # issue 16, "linear in the backlog": the fair-share order skips a capped bucket's held-back request classes
    # unseen (engine.policies.buckets.SKIP). Engine CPU per scheduling pass (one per event instant) as the capped
    # backlog grows 1x, 3x, 10x, with the skipping on and off, identical results required.
    import engine.policies.buckets as buckets

    budgets = {"lab": {"share": 3}, "lab/a": 1, "lab/b": 1, "ops": {"share": 1, "max_gpus": 8}}
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=budgets)
    print("\ncapped backlog on 32 x 8 GPUs, fair share + EASY + 8 h contracts: CPU per pass (us), skipping on / off")
    curve = {}
    for backlog in (500, 1500, 5000):
        jobs, cluster = capped_backlog_month(backlog)
        row = {}
        for on in (True, False):
            buckets.SKIP = on
            try:
                best = None
                for _ in range(2):
                    res, cpu, _ = timed(simulate, jobs, cluster, cfg)
                    best = cpu if best is None else min(best, cpu)
            finally:
                buckets.SKIP = True
            row[on] = (res, best)
        (on_res, on_cpu), (off_res, off_cpu) = row[True], row[False]
        assert on_res.jobs.equals(off_res.jobs) and on_res.timeline.equals(off_res.timeline)
        passes = on_res.metrics["scheduler"]["passes"]
        queued = (on_res.jobs["wait_s"] > 86400).sum()
        curve[backlog] = (on_cpu / passes, off_cpu / passes)
        print(f"  backlog {backlog:>5} ({queued} jobs wait > 1 day), {passes} passes: on {on_cpu:.2f} s = "
              f"{on_cpu / passes * 1e6:.0f} us/pass; off {off_cpu:.2f} s = {off_cpu / passes * 1e6:.0f} us/pass")
    on_growth = curve[5000][0] / curve[500][0]
    off_growth = curve[5000][1] / curve[500][1]
    print(f"  per-pass time, backlog x10: on x{on_growth:.2f}, off x{off_growth:.2f}")
    big = REPO.parent / "shared" / "bench-512"  # optional: `quotaloop sample --nodes 512 --days 30 --store` there
    store = Path(__import__("os").environ.get("QUOTALOOP_BENCH_512", big))
    if not (store / "_manifest.json").exists():
        print(f"  (no 512-node store at {store}: set QUOTALOOP_BENCH_512 for the capped vs uncapped ratio)")
        return
    from queries.store import Store

    from engine import min_runtime
    from engine.budgets import load

    s = Store(store)
    jobs, cluster = s.read("jobs"), Cluster.from_frame(s.read("nodes"))
    text = (REPO / "sample_data" / "budgets.toml").read_text()
    import re
    import tempfile

    scaled = re.sub(r"^(cluster_gpus|guaranteed_gpus|max_gpus) = (\d+)",
                    lambda m: f"{m.group(1)} = {int(m.group(2)) * 4}", text, flags=re.M)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(scaled)
    mr = min_runtime.parse_overrides(["8h"], "--min-runtime")
    times = {}
    for label, tree in (("sample budgets.toml (capped)", load(REPO / "sample_data" / "budgets.toml")),
                        ("caps x4 (scaled to the cluster)", load(Path(f.name)))):
        res, cpu, wall = timed(simulate, jobs, cluster, SimConfig(policy="fairshare", backfill="easy", budgets=tree,
                                                                 min_runtime_by_class=mr))
        times[label] = cpu
        print(f"  512 nodes, {label}: {cpu:.1f} s CPU ({wall:.1f} s wall), {res.metrics['scheduler']}")
    a, b = times.values()
    print(f"  capped / uncapped: {a / b:.2f}x (issue 16 asks <= 3x)")


# ------------------------------------------------------------------------------------------ 6. capped / uncapped
@pytest.mark.benchmark
def test_capped_vs_caps_scaled_512_nodes(request):
    # issue 16: "the capped 4,096-GPU case <= 3x the uncapped one". 512 nodes (`quotaloop sample --nodes 512
    # --days 30 --store DIR`, named by QUOTALOOP_BENCH_512), 30-day fair share + EASY + 8 h contracts, simulate()
    # CPU with the sample's budgets.toml (its max_gpus caps leave most GPUs idle: a backlog of thousands) and with
    # every GPU count in it x4 (scaled to the cluster), and x4 without any max_gpus, in one process. Minutes long: runs only when named
    # (-k capped_vs_caps_scaled). Identical output with the class skipping off: tests/engine/test_engine_backlog.py.
    if "capped_vs_caps_scaled" not in (request.config.getoption("keyword") or ""):
        pytest.skip("minutes long: run with -k capped_vs_caps_scaled")
    import os
    import re
    import tempfile

    from engine import min_runtime
    from engine.budgets import load
    from queries.store import Store

    store = Path(os.environ.get("QUOTALOOP_BENCH_512", REPO.parent / "shared" / "bench-512"))
    if not (store / "_manifest.json").exists():
        pytest.skip(f"no 512-node store at {store}: set QUOTALOOP_BENCH_512")
    s = Store(store)
    jobs, cluster = s.read("jobs"), Cluster.from_frame(s.read("nodes"))
    text = (REPO / "sample_data" / "budgets.toml").read_text()
    scaled = re.sub(r"^(cluster_gpus|guaranteed_gpus|max_gpus) = (\d+)",
                    lambda m: f"{m.group(1)} = {int(m.group(2)) * 4}", text, flags=re.M)
    uncapped = re.sub(r"^max_gpus = \d+\n", "", scaled, flags=re.M)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "x4.toml").write_text(scaled)
        (Path(d) / "none.toml").write_text(uncapped)
        trees = {"capped": load(REPO / "sample_data" / "budgets.toml"), "caps x4": load(Path(d) / "x4.toml"),
                 "no max_gpus": load(Path(d) / "none.toml")}
    mr = min_runtime.parse_overrides(["8h"], "--min-runtime")
    print(f"\n512 nodes ({jobs.height} jobs), fair share + EASY + 8 h contracts, simulate() CPU "
          f"(load average {os.getloadavg()[0]:.1f}):")
    cpu = {}
    for label, tree in trees.items():
        res, cpu[label], wall = timed(simulate, jobs, cluster, SimConfig(
            policy="fairshare", backfill="easy", budgets=tree, min_runtime_by_class=mr))
        queued = int((res.jobs["wait_s"] > 86400).sum())
        print(f"  {label}: {cpu[label]:.1f} s CPU ({wall:.1f} s wall), {queued} jobs wait > 1 day, "
              f"{res.metrics['scheduler']}")
        assert res.jobs.height > 0.99 * jobs.height  # a whole month simulated (a cap may skip a few jobs: over_cap)
    print(f"  capped / caps x4: {cpu['capped'] / cpu['caps x4']:.2f}x, capped / no max_gpus: "
          f"{cpu['capped'] / cpu['no max_gpus']:.2f}x (issue 16 asks <= 3x)")


# ------------------------------------------------------------------------------------------ 7. compiled node pool
def _scaled_budgets(factor: int) -> Path:
    """The sample's budgets.toml with cluster_gpus and every GPU count times ``factor`` (caps scaled to the cluster)."""
    import re
    import tempfile

    text = (REPO / "sample_data" / "budgets.toml").read_text()
    if factor != 1:
        text = re.sub(r"^(cluster_gpus|guaranteed_gpus|max_gpus) = (\d+)",
                      lambda m: f"{m.group(1)} = {int(m.group(2)) * factor}", text, flags=re.M)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    return Path(f.name)


def _node_stores() -> dict[int, Path]:
    """Node count -> store: the sample (128 GPU nodes) plus QUOTALOOP_BENCH_NODES="256=/path,512=/path,..."."""
    import os

    stores = {128: REPO / "sample_data" / "store"}
    for item in filter(None, os.environ.get("QUOTALOOP_BENCH_NODES", "").split(",")):
        k, v = item.split("=", 1)
        stores[int(k)] = Path(v)
    return stores


def _loaded(stores: dict[int, Path]):
    """(nodes, jobs, cluster) of each store that exists, smallest first; says which are missing."""
    from queries.store import Store

    for nodes, path in sorted(stores.items()):
        if not (path / "_manifest.json").exists():
            print(f"  {nodes} nodes: no store at {path}")
            continue
        s = Store(path)
        yield nodes, s.read("jobs"), Cluster.from_frame(s.read("nodes"))


@pytest.mark.benchmark
def test_node_mode_compiled_pool_vs_python():
    # issue 16's node-mode target: 30-day fair share + EASY + --min-runtime 8h on generated clusters, budgets scaled
    # to each cluster, the engine with the compiled node pool (engine/_nodecore.c) against QUOTALOOP_ENGINE=python
    # in the same process, identical output required. Stores: the sample (128 GPU nodes), and
    # QUOTALOOP_BENCH_NODES="256=/path,512=/path,..." (`quotaloop sample --nodes N --days 30 --store /path`).
    import os


    import engine.nodepool as nodepool
    from engine import min_runtime
    from engine.backfill.fastpath import ENGINE_ENV
    from engine.budgets import load

    if nodepool.compiled is None:
        pytest.skip("the compiled node pool is not built")
    stores = _node_stores()
    mr = min_runtime.parse_overrides(["8h"], "--min-runtime")
    print(f"\nnode mode, 30-day fair share + EASY + 8 h, caps scaled to the cluster: CPU s python / compiled pool "
          f"(load average {os.getloadavg()[0]:.1f})")
    rows = []
    for nodes, jobs, cluster in _loaded(stores):
        cfg = SimConfig(policy="fairshare", backfill="easy", budgets=load(_scaled_budgets(max(1, nodes // 128))),
                        min_runtime_by_class=mr)
        out = {}
        for engine in ("python", "compiled"):
            os.environ[ENGINE_ENV] = engine
            try:
                out[engine] = timed(simulate, jobs, cluster, cfg)
            finally:
                del os.environ[ENGINE_ENV]
        (py, py_cpu, _), (c, c_cpu, _) = out["python"], out["compiled"]
        assert py.jobs.equals(c.jobs, null_equal=True) and py.timeline.equals(c.timeline, null_equal=True)
        n = jobs.height
        rows.append((nodes, n, py_cpu, c_cpu))
        print(f"  {nodes} nodes ({cluster.total_gpus:.0f} GPUs), {n} jobs: python {py_cpu:.1f} s, compiled pool "
              f"{c_cpu:.1f} s = {py_cpu / c_cpu:.2f}x; identical output; {c.metrics['scheduler']}")
    if len(rows) > 1:
        n0, j0, _, c0 = rows[0]
        for nodes, n, _, cpu in rows[1:]:
            nlogn = (n * math.log(n)) / (j0 * math.log(j0))
            print(f"  {nodes} vs {n0} nodes: jobs x{n / j0:.2f}, compiled CPU x{cpu / c0:.2f} (n log n: x{nlogn:.2f})")


@pytest.mark.benchmark
def test_compiled_pass_vs_per_bucket_walk():
    # issue 16, the fair-share + EASY backfill pass without Python per candidate: the compiled order's cursor
    # (``_fsorder.Funded``: descents, buckets, walk, and the examination and start of each backfill candidate)
    # against the order before it (``fairshare.CURSOR`` off: the per-bucket loop in Python around the compiled
    # walk, every candidate handed over to ``easy._backfill``) and QUOTALOOP_ENGINE=python, in one process,
    # alternating, best of 2; identical output required. 30-day fair share + EASY + --min-runtime 8h with the
    # sample's budgets.toml (the README's run) on the sample and on QUOTALOOP_BENCH_NODES stores.
    import os


    import engine.policies.fairshare as fairshare
    from engine import fsorder, min_runtime
    from engine.backfill.fastpath import ENGINE_ENV
    from engine.budgets import load

    if fsorder.compiled is None:
        pytest.skip("the compiled fair-share order is not built")
    stores = _node_stores()
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=load(REPO / "sample_data" / "budgets.toml"),
                    min_runtime_by_class=min_runtime.parse_overrides(["8h"], "--min-runtime"))
    print(f"\nfair share + EASY + 8 h, budgets.toml: simulate() CPU s, best of 2 (load average "
          f"{os.getloadavg()[0]:.1f})")
    for nodes, jobs, cluster in _loaded(stores):
        best, out = {}, {}
        for _ in range(2):
            for mode in ("python", "walk", "cursor"):
                os.environ[ENGINE_ENV] = "python" if mode == "python" else "compiled"
                fairshare.CURSOR = mode != "walk"
                try:
                    res, cpu, _ = timed(simulate, jobs, cluster, cfg)
                finally:
                    del os.environ[ENGINE_ENV]
                    fairshare.CURSOR = True
                best[mode] = min(best.get(mode, math.inf), cpu)
                out[mode] = res
        for mode in ("python", "walk"):
            assert out[mode].jobs.equals(out["cursor"].jobs, null_equal=True)
            assert out[mode].timeline.equals(out["cursor"].timeline, null_equal=True)
        print(f"  {nodes} nodes, {jobs.height} jobs: cursor {best['cursor']:.2f} s, per-bucket walk "
              f"{best['walk']:.2f} s ({best['walk'] / best['cursor']:.2f}x), all Python {best['python']:.2f} s "
              f"({best['python'] / best['cursor']:.2f}x); identical output; load {os.getloadavg()[0]:.1f}")


# ------------------------------------------------------------------------------------------ 8. the growth curve
def growth_point(store: Path, nodes: int) -> dict:
    """One point of the growth curve, run in a fresh process so its peak RSS is this size's alone: the store's
    30-day month, fair share + EASY + 8 h contracts, budgets scaled to the cluster (``_scaled_budgets(nodes //
    128)``: cluster_gpus, guaranteed_gpus and max_gpus x1 / x2 / x4 / x8 on 128 / 256 / 512 / 1,024 nodes),
    ``simulate()`` timed alone (process CPU). Peak RSS is read before the run (store read, budgets loaded) and
    after it, so the engine's own memory is the difference."""
    import resource

    from queries.store import Store

    from engine import min_runtime
    from engine.budgets import load

    s = Store(store)
    jobs, cluster = s.read("jobs"), Cluster.from_frame(s.read("nodes"))
    cfg = SimConfig(policy="fairshare", backfill="easy", budgets=load(_scaled_budgets(max(1, nodes // 128))),
                    min_runtime_by_class=min_runtime.parse_overrides(["8h"], "--min-runtime"))
    before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res, cpu, wall = timed(simulate, jobs, cluster, cfg)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"nodes": nodes, "gpus": float(cluster.total_gpus), "jobs": jobs.height, "simulated": res.jobs.height,
            "cpu_s": cpu, "wall_s": wall, "rss_before_kib": before_kib, "rss_peak_kib": peak_kib,
            "passes": res.metrics["scheduler"].get("passes")}


@pytest.mark.benchmark
def test_growth_curve_fairshare_easy_min8h(request):
    # issue 16: "30-day fair share + EASY + min runtime on 1,024 / 2,048 / 4,096 / 8,192 GPUs: engine CPU <= 2 s
    # at 4,096 GPUs, growth with the number of jobs no worse than n log n (print the curve)", and "memory per
    # simulated job stays flat". The sample (128 nodes) plus QUOTALOOP_BENCH_NODES="256=/path,512=/path,1024=/path"
    # (`quotaloop sample --nodes N --days 30 --store /path`). Each size runs in its own child process (growth_point)
    # so the peak RSS is that size's; sizes in turn, never two at once. Minutes long: runs only when named
    # (-k growth_curve).
    if "growth_curve" not in (request.config.getoption("keyword") or ""):
        pytest.skip("minutes long: run with -k growth_curve")
    import json
    import os
    import subprocess
    import sys

    stores = _node_stores()
    here = Path(__file__).resolve().parent
    print(f"\ngrowth curve: 30-day fair share + EASY + --min-runtime 8h, budgets.toml's GPU counts x nodes/128, "
          f"simulate() CPU, one child process per size (load average at start {os.getloadavg()[0]:.1f})")
    rows = []
    for nodes, path in sorted(stores.items()):
        if not (path / "_manifest.json").exists():
            print(f"  {nodes} nodes: no store at {path}")
            continue
        code = (f"import json, sys; sys.path.insert(0, {str(here)!r}); from pathlib import Path; "
                f"from bench_engine_scale import growth_point; "
                f"print(json.dumps(growth_point(Path({str(path)!r}), {nodes})))")
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        assert row["simulated"] > 0.99 * row["jobs"]  # a whole month simulated (a cap may skip a few: over_cap)
        rows.append(row)
        engine_kib = row["rss_peak_kib"] - row["rss_before_kib"]
        print(f"  {nodes:>5} nodes ({row['gpus']:.0f} GPUs), {row['jobs']:>7} jobs: {row['cpu_s']:7.1f} s CPU "
              f"({row['wall_s']:.1f} s wall, load {os.getloadavg()[0]:.1f}), {row['cpu_s'] / row['jobs'] * 1e6:6.0f} "
              f"us CPU/job, {row['passes']} passes; peak RSS {row['rss_peak_kib'] / 1024:.0f} MiB "
              f"({row['rss_peak_kib'] / row['jobs']:.2f} KiB/job), of it the run {engine_kib / 1024:.0f} MiB "
              f"({engine_kib / row['jobs']:.2f} KiB/job)")
    if len(rows) < 2:
        return
    # the local exponent d log(cpu) / d log(n) between neighbours, against n log n's over the same step (~1.1)
    print("  step: jobs x, CPU x, n log n x; exponent of CPU in n, of n log n")
    for a, b in zip(rows, rows[1:]):
        n0, n1, c0, c1 = a["jobs"], b["jobs"], a["cpu_s"], b["cpu_s"]
        nlogn = (n1 * math.log(n1)) / (n0 * math.log(n0))
        print(f"  {a['nodes']} -> {b['nodes']} nodes: jobs x{n1 / n0:.2f}, CPU x{c1 / c0:.2f}, n log n x{nlogn:.2f}; "
              f"exponent {math.log(c1 / c0) / math.log(n1 / n0):.2f} (n log n {math.log(nlogn) / math.log(n1 / n0):.2f})")
    x = np.log([r["jobs"] for r in rows])
    y = np.log([r["cpu_s"] for r in rows])
    slope = float(np.polyfit(x, y, 1)[0])
    n0, n1 = rows[0]["jobs"], rows[-1]["jobs"]
    ref = math.log((n1 * math.log(n1)) / (n0 * math.log(n0))) / math.log(n1 / n0)
    print(f"  least-squares exponent over all sizes: CPU ~ n^{slope:.2f} (n log n over the same range: n^{ref:.2f})")
