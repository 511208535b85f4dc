"""The compiled fast kernel (``engine/backfill/_fastpath.c``) against its oracle, the Python reference
``fastpath.run_python``: byte-identical on random workloads, on the sample store's jobs in processor-count mode and
on every SWF trace in shared data.

Three levels: the kernel alone on raw per-job lists (inputs the workload builder never produces too: zero-size
jobs, jobs larger than the machine, infinite estimates), whole simulations (``result.jobs``, timeline, metrics and
the simulator's per-job lists and wait-reason sums, insertion order included), and the files ``quotaloop
simulate`` writes. ``QUOTALOOP_ENGINE`` selects the kernel; the build check FAILS (never skips) when gcc is here
but the compiled module is absent or stale, so a run cannot silently fall back to the slow path.
"""
from __future__ import annotations

import hashlib
import math
import os
import shutil
import sysconfig
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.backfill.fastpath as fastpath
from engine import Cluster, SimConfig, simulate
from engine.core import Simulator
from engine.pool import Pool
from engine.reasons import WaitReasons
from engine.result import metrics_json
from engine.run import load_cluster
from engine.workload import prepare

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "engine" / "backfill" / "_fastpath.c"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SIM_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

needs_compiled = pytest.mark.skipif(fastpath.compiled is None, reason="compiled kernel not built (see "
                                    "test_compiled_kernel_is_built, which fails in that case when gcc is here)")


# ------------------------------------------------------------------------------ the build
def test_compiled_kernel_is_built():
    """With gcc and the Python headers on the machine the install must have built the kernel from the current
    source, and the default engine must be it: a missing or stale module would silently run the slow path."""
    if os.environ.get(fastpath.ENGINE_ENV, "").strip().lower() == "python":
        pytest.skip(f"{fastpath.ENGINE_ENV}=python selects the Python kernel for this run")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if shutil.which("gcc") is None or not headers.is_file():
        pytest.skip("no gcc or no Python headers: the package runs the Python kernel by design")
    assert fastpath.compiled is not None, "gcc is here but engine.backfill._fastpath is not built: pip install -e ."
    assert fastpath.compiled.SOURCE_SHA256 == hashlib.sha256(SOURCE.read_bytes()).hexdigest(), \
        "engine.backfill._fastpath was built from another _fastpath.c: rebuild with pip install -e ."
    assert fastpath.engine_choice() == "compiled"


def test_engine_choice_follows_the_environment(monkeypatch):
    monkeypatch.setenv(fastpath.ENGINE_ENV, "python")
    assert fastpath.engine_choice() == "python"
    monkeypatch.setenv(fastpath.ENGINE_ENV, "fortran")
    with pytest.raises(ValueError, match="QUOTALOOP_ENGINE='fortran'"):
        fastpath.engine_choice()
    monkeypatch.setattr(fastpath, "compiled", None)
    monkeypatch.setenv(fastpath.ENGINE_ENV, "compiled")
    with pytest.raises(ValueError, match="not built"):
        fastpath.engine_choice()
    monkeypatch.delenv(fastpath.ENGINE_ENV)
    assert fastpath.engine_choice() == "python"  # no compiled module: the reference runs


# ------------------------------------------------------------------------------ the kernel alone
class _Recorder:
    def set_single_attempts(self, start, end, seq, size, use_c):
        self.args = (list(start), list(end), list(seq), use_c)
        return None, None


class KernelOnly:
    """The attributes ``run_python`` / ``run_compiled`` read and write, without a workload: any per-job values."""

    def __init__(self, submit, run, est, size, procs, depth, margin, resource):
        n = len(submit)
        self.n, self.now, self.depth = n, 0.0, depth
        self.submit, self.rem, self.limit_left = list(submit), list(run), list(est)
        self.req_c = list(size) if resource == "cpus" else [0] * n
        self.req_g = list(size) if resource == "gpus" else [0] * n
        cluster = type("C", (), {"resource": resource})()
        self.pool = type("P", (), {"cluster": cluster, "cap_c": [procs], "cap_g": [procs]})()
        self.cfg = type("Cfg", (), {"walltime_margin": margin})()
        self.first_start, self.end_time, self.start_seq, self.reserved = [None] * n, [None] * n, [None] * n, [None] * n
        self.attempt = [0] * n
        self.waits = WaitReasons(n, "priority" if depth == 0 else "resources", self.attempt)
        self.intervals = _Recorder()

    def adopt_whole_run(self, now, seq, passes, full_passes, start_s, end_s):
        self.adopted = (now, seq, passes, full_passes)

    def state(self):
        w = self.waits
        return (self.first_start, self.end_time, self.start_seq, self.reserved, w.reason, w.since,
                [(k, list(v.items())) for k, v in w.acc.items()], self.adopted, self.intervals.args)


def _same_bits(a, b) -> bool:
    """Equal values of equal types (a float 1.0 is not the int 1; -0.0 is not 0.0)."""
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_bits(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return type(b) is float and (math.copysign(1.0, a) == math.copysign(1.0, b)) and (a == b or a != a and b != b)
    return type(a) is type(b) and a == b


@st.composite
def raw_jobs(draw):
    n = draw(st.integers(0, 25))
    procs = draw(st.integers(1, 8))
    submit = sorted(float(draw(st.integers(0, 30))) + draw(st.sampled_from([0.0, 0.5])) for _ in range(n))
    run = [float(draw(st.integers(1, 20))) + draw(st.sampled_from([0.0, 0.25])) for _ in range(n)]
    est = [draw(st.one_of(st.just(r), st.floats(0.5, 40.0), st.just(math.inf))) for r in run]
    size = [draw(st.integers(0, procs + 2)) for _ in range(n)]  # zero-size and larger-than-the-machine jobs
    return submit, run, est, size, procs


@needs_compiled
@SETTINGS
@given(jobs=raw_jobs(), depth=st.sampled_from([0, 1]), margin=st.sampled_from([0.0, 0.1, 0.25]),
       resource=st.sampled_from(["cpus", "gpus"]))
def test_kernel_alone_identical(jobs, depth, margin, resource):
    submit, run, est, size, procs = jobs
    py = KernelOnly(submit, run, est, size, procs, depth, margin, resource)
    c = KernelOnly(submit, run, est, size, procs, depth, margin, resource)
    fastpath.run_python(py)
    fastpath.run_compiled(c)
    assert _same_bits(py.state(), c.state())


def test_kernel_alone_hand_computed():
    """4 processors, EASY, all submitted at 0. A (3 procs, 10 s) starts; B (2 procs) does not fit the 1 free:
    its reservation is A's estimated end, 10, with 4 - 2 = 2 extra processors then; C (1 proc, 20 s) ends after 10
    but fits in the extra: starts at 0. At 10 A ends and B starts, after 10 s waiting for resources. Passes at 0
    and 10 (full: a job ended); none at 15 and 20 (queue empty)."""
    k = KernelOnly([0.0, 0.0, 0.0], [10.0, 5.0, 20.0], [10.0, 5.0, 20.0], [3, 2, 1], 4, 1, 0.0, "cpus")
    kernel = fastpath.run_compiled if fastpath.compiled is not None else fastpath.run_python
    kernel(k)
    assert k.first_start == [0.0, 10.0, 0.0]
    assert k.end_time == [10.0, 15.0, 20.0]
    assert k.start_seq == [4, 6, 5]
    assert k.reserved == [None, 10.0, None]
    assert k.waits.acc == {1: {"resources": 10.0}}
    assert k.adopted == (20.0, 6, 2, 1)


# ------------------------------------------------------------------------------ whole simulations
def _sim(jobs, cluster, cfg, engine, monkeypatch):
    monkeypatch.setenv(fastpath.ENGINE_ENV, engine)
    res = simulate(jobs, cluster, cfg)
    monkeypatch.delenv(fastpath.ENGINE_ENV)
    return res


def assert_same_result(jobs, cluster, cfg, monkeypatch):
    """Both kernels through ``simulate``: identical jobs frames, timelines and metrics (passes included)."""
    py = _sim(jobs, cluster, cfg, "python", monkeypatch)
    c = _sim(jobs, cluster, cfg, "compiled", monkeypatch)
    assert py.jobs.equals(c.jobs, null_equal=True)
    assert py.timeline.equals(c.timeline, null_equal=True)
    assert metrics_json(py.metrics) == metrics_json(c.metrics)
    return py, c


def assert_same_files(py, c, tmp_path):
    """What ``quotaloop simulate --out`` writes (``SimResult.write``), byte for byte."""
    a, b = Path(py.write(tmp_path / "python")), Path(c.write(tmp_path / "compiled"))
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def simulator_state(jobs, cluster, cfg, engine, monkeypatch):
    """The simulator after a run: every per-job list the kernels write and the wait-reason sums in order."""
    monkeypatch.setenv(fastpath.ENGINE_ENV, engine)
    cfg = cfg.validated()
    pool = Pool(load_cluster(cluster))
    wl = prepare(jobs, pool, None, warm_start=cfg.warm_start, window_end=cfg.window_end)
    sim = Simulator(wl, pool, cfg)
    assert fastpath.applies(sim)
    sim.run()
    monkeypatch.delenv(fastpath.ENGINE_ENV)
    iv = sim.intervals
    return (sim.first_start, sim.end_time, sim.start_seq, sim.reserved, sim.waits.reason, sim.waits.since,
            [(k, list(v.items())) for k, v in sim.waits.acc.items()], sim.now, sim.seq_counter, sim.counters,
            [getattr(iv, a).tolist() for a in ("job", "start", "end", "seq", "a_g", "a_c")])


@st.composite
def workloads(draw, max_jobs=20, procs=6):
    n = draw(st.integers(1, max_jobs))
    rows = []
    for i in range(n):
        run = draw(st.integers(1, 30))
        limit = draw(st.one_of(st.none(), st.just(run), st.integers(1, 60)))
        rows.append((str(i + 1), float(draw(st.integers(0, 25))), float(draw(st.integers(0, procs + 1))),
                     float(run), None if limit is None else float(limit)))
    ids, submit, size, run, limit = (list(c) for c in zip(*rows))
    return pl.DataFrame({"job_id": ids, "submit": submit, "elapsed_s": run, "req_cpus": size,
                         "time_limit_s": pl.Series(limit, dtype=pl.Float64)})


@needs_compiled
@SIM_SETTINGS
@given(w=workloads(), backfill=st.sampled_from(["none", "easy"]),
       margin=st.sampled_from([0.0, 0.25]))
def test_random_workloads_identical(w, backfill, margin):
    """Ties in submit times, missing estimates (time limit None), estimates below and above the run time,
    zero-size and larger-than-the-machine jobs (the workload builder skips both; the rest must still agree)."""
    with pytest.MonkeyPatch.context() as mp:
        cfg = SimConfig(backfill=backfill, walltime_margin=margin)
        assert_same_result(w, Cluster.procs(6), cfg, mp)
        assert simulator_state(w, Cluster.procs(6), cfg, "python", mp) == \
            simulator_state(w, Cluster.procs(6), cfg, "compiled", mp)


@needs_compiled
def test_sample_store_in_processor_mode(sample_store, monkeypatch):
    """The sample's GPU jobs (25.6k of its 41.7k; CPU-only jobs ask nothing of a GPU pool) on one pool of its
    1,024 GPUs, FCFS + EASY with a walltime margin."""
    from queries.store import Store

    jobs = Store(sample_store).read("jobs")
    for backfill in ("easy",):
        cfg = SimConfig(policy="fcfs", backfill=backfill, walltime_margin=0.1)
        py, _ = assert_same_result(jobs, Cluster.procs(1024, "gpus"), cfg, monkeypatch)
        assert py.jobs.height > 20_000


# ------------------------------------------------------------------------------ every SWF trace
SWF = sorted(p.name for p in (REPO.parent / "shared" / "data" / "swf").glob("*.swf.gz"))


def _procs(path, parsed) -> int:
    """The header's ``MaxProcs`` (the machine), raised to the largest job's request (so no job is skipped)."""
    import gzip
    import re

    with gzip.open(path, "rt", errors="replace") as f:
        header = "".join(line for _, line in zip(range(60), f) if line.startswith(";"))
    m = re.search(r"MaxProcs:\s*(\d+)", header)
    jobs = parsed.jobs
    return max(int(m.group(1)) if m else 1, *(int(jobs[c].max() or 1) for c in ("req_cpus", "alloc_cpus")))


@needs_compiled
@pytest.mark.shared_data
@pytest.mark.parametrize("name", SWF or ["(no traces)"])
def test_swf_trace_identical(name, shared_data, monkeypatch, tmp_path):
    """Every SWF trace, FCFS + EASY on its machine's processor count: the whole result (jobs, timeline, metrics)
    and the files ``quotaloop simulate --out`` writes."""
    from queries.ingest import swf

    path = shared_data / "swf" / name
    parsed = swf.parse(path)
    cluster = Cluster.procs(_procs(path, parsed))
    cfg = SimConfig(policy="fcfs", backfill="easy")
    py, c = assert_same_result(parsed.jobs, cluster, cfg, monkeypatch)
    assert py.jobs.height > 1000 and py.jobs["start"].null_count() == 0
    assert_same_files(py, c, tmp_path)
