"""Capacity over time on a processor-count pool (``engine.capacity``, issue 18): drains of k processors over
[t0, t1), hand-computed on P = 10 with a 4-processor outage over [100, 200) (capacity 6 inside it)."""
from __future__ import annotations

import polars as pl
import pytest

from engine import Cluster, SimConfig, drains, simulate
from engine.backfill import fastpath
from engine.config import CapacityEvent, ConfigError

OUTAGE = (CapacityEvent(100.0, 4, 200.0),)


def _jobs(rows):
    """rows: (id, submit, procs, run, limit)."""
    return pl.DataFrame({"job_id": [r[0] for r in rows], "submit": [float(r[1]) for r in rows],
                         "req_cpus": [float(r[2]) for r in rows], "elapsed_s": [float(r[3]) for r in rows],
                         "time_limit_s": [float(r[4]) for r in rows], "account": ["lab"] * len(rows)})


def _starts(rows, events=OUTAGE, procs=10, **cfg):
    res = simulate(_jobs(rows), Cluster.procs(procs), SimConfig(capacity_events=events, **cfg))
    out = {r["job_id"]: r for r in res.jobs.iter_rows(named=True)}
    return {k: r["start"] for k, r in out.items()}, out, res


def test_a_job_larger_than_what_is_left_waits_for_the_return():
    """8 processors submitted at 150, inside the outage: 6 are in service, so it starts at 200."""
    starts, _, res = _starts([("A", 150, 8, 10, 10)])
    assert starts == {"A": 200.0}
    assert res.metrics["node_events"]["drain"] == 1
    assert _starts([("A", 150, 6, 10, 10)])[0] == {"A": 150.0}  # 6 fit at once
    assert _starts([("A", 150, 8, 10, 10)], events=())[0] == {"A": 150.0}  # undrained


def test_a_job_running_across_the_drain_keeps_running_and_owes_the_drained_processors():
    """R (8 procs) runs 0 -> 150 across t0 = 100: not killed. At 100 two processors were free: the drain takes
    them and owes the other two, so B (2 procs, submitted 120) finds nothing free until R ends at 150 (R's 8 pay
    the 2 owed: 6 free)."""
    starts, rows, _ = _starts([("R", 0, 8, 150, 150), ("B", 120, 2, 10, 10)])
    assert (starts["R"], rows["R"]["end"], rows["R"]["state"]) == (0.0, 150.0, "COMPLETED")
    assert starts["B"] == 150.0
    assert _starts([("R", 0, 8, 150, 150), ("B", 120, 2, 10, 10)], events=())[0]["B"] == 120.0
    # B of 3 still fits after the debt is paid (6 free at 150); one of 7 waits for the return
    assert _starts([("R", 0, 8, 150, 150), ("B", 120, 7, 10, 10)])[0]["B"] == 200.0


EASY_ROWS = [("C", 110, 8, 50, 50), ("D", 110, 2, 100, 100), ("E", 110, 3, 100, 100), ("F", 110, 3, 80, 80)]


@pytest.mark.parametrize("python_only", [False, True])
def test_easy_reserves_the_return(monkeypatch, python_only):
    """At 110 (6 in service) C (8) blocks; its reservation is 200, when the 4 return (10 free then: 2 extra).
    D (2, ends 210 > 200) takes the 2 extra; E (3, ends 210) neither ends by 200 nor fits the extra left (0):
    it waits; F (3, ends 190) backfills. C starts at 200 on the returned processors; E starts when C ends
    (250: D's 2 alone are too few). A reservation blind to the return (INF, as a node-mode drain) would have
    started D and E at 110 and left F waiting."""
    if python_only:
        monkeypatch.setenv(fastpath.ENGINE_ENV, "python")
    starts, rows, _ = _starts(EASY_ROWS)
    assert starts == {"C": 200.0, "D": 110.0, "E": 250.0, "F": 110.0}
    assert rows["C"]["reserved_start"] == 200.0
    assert rows["E"]["wait_reason"] == "reservation"


def test_a_reservation_before_the_drain_counts_the_drained_processors_out():
    """At 0, X (6 procs, limit 150) runs; Y (8, submitted 10) blocks. Without the outage Y's reservation is 150
    (X's end; 2 extra): Z (3 procs, limit 170, submitted 20) neither ends by then nor fits the extra, so it waits,
    Y starts at 150 and Z at 160 (Y's end). With the outage 150 falls inside it (6 in service): the first instant
    Y fits is 200, Z ends by then and backfills at 20, and Y starts at 200."""
    rows = [("X", 0, 6, 150, 150), ("Y", 10, 8, 10, 10), ("Z", 20, 3, 170, 170)]
    starts, out, _ = _starts(rows)
    assert out["Y"]["reserved_start"] == 200.0 and starts == {"X": 0.0, "Y": 200.0, "Z": 20.0}
    starts, out, _ = _starts(rows, events=())
    assert out["Y"]["reserved_start"] == 150.0 and starts == {"X": 0.0, "Y": 150.0, "Z": 160.0}


def test_conservative_plans_every_job_on_the_schedule():
    """Conservative backfill plans on the same profile for a job's whole limit: G (8 procs, limit 50) at 80
    would run into the outage (6 in service from 100), so it is planned at 200, not started at 80."""
    starts, out, _ = _starts([("G", 80, 8, 50, 50)], backfill="conservative")
    assert starts == {"G": 200.0}
    # EASY starts it at once (free capacity now); it runs through the drain (the debt is paid at its end)
    assert _starts([("G", 80, 8, 50, 50), ("H", 120, 6, 10, 10)])[0] == {"G": 80.0, "H": 130.0}


def test_no_events_is_byte_identical_and_the_fast_path_steps_aside(monkeypatch):
    rows = [(str(i), 7 * i, 1 + (3 * i) % 10, 20 + (11 * i) % 90, 40 + (11 * i) % 90) for i in range(60)]
    plain = simulate(_jobs(rows), Cluster.procs(10), SimConfig())
    empty = simulate(_jobs(rows), Cluster.procs(10), SimConfig(capacity_events=()))
    assert plain.jobs.equals(empty.jobs) and plain.metrics == empty.metrics
    assert "capacity_events" not in plain.metrics["params"]  # metrics.json unchanged
    calls = []
    monkeypatch.setattr(fastpath, "run", lambda sim: calls.append(sim) or fastpath.run_python(sim))
    simulate(_jobs(rows), Cluster.procs(10), SimConfig())
    assert calls  # the whole-run kernel runs without events ...
    calls.clear()
    drained = simulate(_jobs(rows), Cluster.procs(10), SimConfig(capacity_events=OUTAGE))
    assert not calls  # ... and never with them
    assert not drained.jobs.equals(plain.jobs)


def test_drains_never_over_commit_the_pool():
    """Random-ish workload with overlapping outages (one larger than the pool): at every instant the running
    jobs that started inside an outage fit the capacity in service when they started."""
    rows = [(str(i), 13 * i, 1 + (7 * i) % 10, 30 + (17 * i) % 200, 60 + (17 * i) % 200) for i in range(80)]
    events = (CapacityEvent(150.0, 3, 600.0), CapacityEvent(400.0, 9, 500.0), CapacityEvent(700.0, 12, 760.0))
    for backfill in ("easy", "conservative", "none"):
        _, out, _ = _starts(rows, events=events, backfill=backfill)
        spans = [(r["start"], r["end"], r["req_cpus"]) for r in out.values()]
        for t, _, _ in spans:
            drained = sum(e.procs for e in events if e.time_s <= t < e.until)
            started_now = sum(p for s, _, p in spans if s == t)
            others = sum(p for s, e, p in spans if s < t < e)
            assert started_now == 0 or started_now + others <= 10 - drained + 1e-9, (backfill, t)


def test_specs_and_config_checks():
    assert drains.parse_procs_spec("20@1997-03-01..1997-03-02").procs == 20
    assert drains.parse_procs_spec("4@100..200") == CapacityEvent(100.0, 4, 200.0)
    for bad in ("20@100", "x@100..200", "0@100..200", "4@200..100", "node1@100..200"):
        with pytest.raises(ConfigError):
            drains.parse_procs_spec(bad)
    with pytest.raises(ConfigError, match="capacity_events\\[0\\].procs"):
        SimConfig(capacity_events=((0.0, -1, 5.0),)).validated()


def test_on_named_nodes_a_processor_drain_drains_the_last_nodes():
    """4 nodes of 3 processors; 7 processors drained over [100, 200): the last two nodes (6 <= 7 < 9). A (7 procs,
    whole nodes) at 150 finds 2 nodes = 6 processors in service: it starts at 200."""
    layout = Cluster.uniform(4, cpus_per_node=3)
    res = simulate(_jobs([("A", 150, 7, 10, 10)]), layout, SimConfig(capacity_events=(CapacityEvent(100.0, 7, 200.0),)))
    assert res.metrics["node_events"]["drain"] == 2 and res.jobs["start"].to_list() == [200.0]
    res = simulate(_jobs([("A", 150, 7, 10, 10)]), layout, SimConfig(capacity_events=(CapacityEvent(100.0, 2, 200.0),)))
    assert res.metrics["node_events"]["drain"] == 0 and res.jobs["start"].to_list() == [150.0]  # < one node


def test_the_node_kernel_on_the_pool_agrees_with_the_scalar_one(monkeypatch):
    """Under borrowing caps the processor pool runs EASY's node kernel (``capacity.node_reservation``): forced on
    a workload with overlapping drains, it gives the scalar kernel's starts, ends and reservations."""
    from engine.backfill import easy

    rows = [(str(i), 11 * i, 1 + (7 * i) % 10, 30 + (17 * i) % 200, 60 + (23 * i) % 200) for i in range(90)]
    events = (CapacityEvent(150.0, 3, 600.0), CapacityEvent(400.0, 6, 500.0), CapacityEvent(700.0, 9, 900.0))
    keep = ["job_id", "start", "end", "reserved_start"]
    scalar = simulate(_jobs(rows), Cluster.procs(10), SimConfig(capacity_events=events)).jobs.select(keep)
    monkeypatch.setattr(easy, "kernel", lambda sim: easy.node_pass)
    node = simulate(_jobs(rows), Cluster.procs(10), SimConfig(capacity_events=events)).jobs.select(keep)
    assert scalar.equals(node)
    assert scalar["reserved_start"].drop_nulls().len() > 10  # reservations were made (and compared)
