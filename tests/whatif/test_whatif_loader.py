"""The one store -> engine-input loader (``dashboard.whatif.loader``): the ``replay_jobs`` query keeps exactly the
rows of ``engine.warm_start.window_filter`` (an independent Polars computation), by hand on a tiny store and on the
whole sample store, and ``workload`` gives what the engine takes."""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import queries
from dashboard.whatif import budgets as whatif_budgets
from dashboard.whatif import loader, runner
from engine.tenants import to_tree
from engine.warm_start import window_filter
from queries.store import schema
from queries.store import Store
from test_scenarios import h, job, write_store



def test_replay_jobs_by_hand(tmp_path):
    """Window [10 h, 20 h), lookback 5 h (so history must stop after 5 h): ``old`` ran 0-4 h (before the
    lookback: out), ``hist`` 2-6 h (stopped in the lookback: in), ``pin`` 8-12 h (running at 10 h: in), ``pend``
    submitted 9 h and started 11 h (pending at 10 h: in), ``new`` submitted 15 h (in), ``late`` submitted 20 h
    (at the end: out). Cold: only the jobs submitted in the window, ``new``."""
    rows = [job("old", "lab/a", 1, 0, 4), job("hist", "lab/a", 1, 2, 4), job("pin", "lab/b", 1, 8, 4),
            {**job("pend", "lab/b", 1, 9, 1), "start": h(11), "end": h(12)}, job("new", "lab/a", 1, 15, 1),
            job("late", "lab/a", 1, 20, 1)]
    store = write_store(tmp_path / "s", rows)
    warm = loader.replay_jobs(store, start=h(10), end=h(20), lookback_s=5 * 3600.0)
    assert sorted(warm["job_id"]) == ["hist", "new", "pend", "pin"]
    cold = loader.replay_jobs(store, start=h(10), end=h(20), warm_start=False)
    assert cold["job_id"].to_list() == ["new"]
    assert loader.replay_jobs(store, end=h(9)).height == 3  # no start: everything submitted before the end
    assert loader.replay_jobs(store, cluster="other").height == 0
    per = loader.clusters(store)
    assert per["cluster"].to_list() == ["c"] and loader.last_submit_end(per, "c") == h(20) + dt.timedelta(
        microseconds=1)


@pytest.mark.parametrize("warm", [True, False])
def test_replay_jobs_equals_the_engine_window_on_the_sample(warm, sample_store):
    jobs = Store(sample_store).read("jobs")
    end = jobs["submit"].max() + dt.timedelta(microseconds=1)
    start = end - dt.timedelta(days=5)
    keep = window_filter(start, end, 3 * 86400.0) if warm else (pl.col("submit") >= start) & (pl.col("submit") < end)
    want = schema.conform(jobs.filter(keep).sort("submit", "job_id"), "jobs")
    got, nodes = loader.load(sample_store, cluster="acme", start=start, end=end, warm_start=warm, lookback_s=3 * 86400.0)
    assert got.height > 1000 and got.equals(want) and got.schema == want.schema
    assert nodes.height == Store(sample_store).read("nodes").filter(pl.col("cluster") == "acme").height > 0


def _held(rows):
    """replay_node_usage rows: (node_list, start h, stop h or None, gpus, cpus, mem GiB or None)."""
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return pl.DataFrame(
        {"cluster": ["c"] * len(rows), "job_id": [str(i) for i in range(len(rows))],
         "node_list": [r[0] for r in rows], "start": [t0 + dt.timedelta(hours=r[1]) for r in rows],
         "stop": [None if r[2] is None else t0 + dt.timedelta(hours=r[2]) for r in rows],
         "gpus": [float(r[3]) for r in rows], "cpus": [float(r[4]) for r in rows],
         "mem_bytes": [None if r[5] is None else r[5] * 2.0**30 for r in rows]},
        schema_overrides={"start": pl.Datetime("us", "UTC"), "stop": pl.Datetime("us", "UTC"),
                          "mem_bytes": pl.Float64})


def test_infer_nodes_by_hand():
    # A holds n[1-2] 0-10 h with 4 GPUs / 6 cores / 8 GiB: 2 GPUs, 3 cores, 4 GiB on each node. B holds n1 5-15 h
    # with 1 GPU, 2 cores, 1 GiB: n1 peaks at 3 GPUs, 5 cores, 5 GiB. C starts on n2 at 10 h, the instant A stops
    # (a stop comes first), with 2 GPUs, 1 core, 6 GiB and still runs: n2 peaks at 2 GPUs, 3 cores, 6 GiB.
    # D is on n[3-5] with 1 GPU and 3 cores: a third of a GPU each, rounded up to 1 (not more: summed thirds must
    # not round up past it), one core each; no memory known: none (unbounded), not 0 bytes.
    held = _held([("n[1-2]", 0, 10, 4, 6, 8), ("n1", 5, 15, 1, 2, 1), ("n2", 10, None, 2, 1, 6),
                  ("n[3-5]", 1, 2, 1, 3, None)])
    nodes = loader.infer_nodes(held)
    assert nodes.schema == schema.polars_schema("nodes")
    got = {r["node"]: (r["gpus"], r["cpus"], None if r["mem_bytes"] is None else r["mem_bytes"] / 2**30)
           for r in nodes.iter_rows(named=True)}
    assert got == {"n1": (3.0, 5.0, 5.0), "n2": (2.0, 3.0, 6.0), "n3": (1.0, 1.0, None), "n4": (1.0, 1.0, None),
                   "n5": (1.0, 1.0, None)}
    assert nodes["partition"].null_count() == nodes.height and nodes["gpu_type"].null_count() == nodes.height
    assert loader.infer_nodes(held.clear()).is_empty()


def test_inferred_layout_of_the_sample_is_its_real_one(sample_store):
    # every sample node ran full at some point: the layout read from the jobs equals the node list, node by node
    real = Store(sample_store).read("nodes").select("cluster", "node", "gpus", "cpus").sort("cluster", "node")
    inferred = loader.infer_nodes(queries.run("replay_node_usage", sample_store))
    joined = real.join(inferred.select("cluster", "node", "gpus", "cpus"), on=["cluster", "node"], how="full",
                       suffix="_inferred")
    assert joined.height == real.height
    assert (joined["gpus_inferred"] == joined["gpus"]).all()
    assert (joined["cpus_inferred"] <= joined["cpus"]).all()


def test_a_store_without_a_node_list_replays_on_the_layout_its_jobs_name(tmp_path, sample_store):
    # the sample's jobs without its nodes table: the loader falls back to the inferred layout and says so
    jobs = Store(sample_store).read("jobs")
    store = tmp_path / "store"
    with Store(store).transaction() as tx:
        tx.upsert("jobs", jobs)
    assert loader.layout_inferred(store) and not loader.layout_inferred(sample_store)
    nodes = loader.replay_nodes(store, "acme")
    assert nodes.height == Store(sample_store).read("nodes").height
    # the what-if inputs carry it, so the scenario and the page say the layout was inferred
    tree = to_tree({"a": 1.0})
    assert runner.load_inputs(store, tree, window_s=86400.0).layout_inferred
    assert not runner.load_inputs(sample_store, tree, window_s=86400.0).layout_inferred


def test_logged_contracts_by_hand():
    # training: two of three jobs logged a contract (4 h and 8 h: median 6 h); eval: none; a null class counts as ""
    jobs = pl.DataFrame({"job_class": ["training", "training", "training", "eval", None],
                         "min_runtime_s": [14400.0, 28800.0, None, None, 0.0]})
    assert whatif_budgets.logged_contracts(jobs) == {"": (1, 1, 0.0), "eval": (0, 1, None),
                                                    "training": (2, 3, 21600.0)}
    assert whatif_budgets.logged_contracts(jobs.clear()) == {}
    assert whatif_budgets.logged_contracts(jobs.drop("min_runtime_s")) == {}
