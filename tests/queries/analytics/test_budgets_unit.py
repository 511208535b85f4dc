"""Budgets in core-hours on a cluster without GPUs (issue 12): ``unit`` in budgets.toml, else inferred from the
node list; attainment then counts CPU cores x hours, hand-computed on the tiny SWF fixture."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from engine import budgets as bt
from queries.analytics import budgets as qb
from queries.ingest import ingest
from queries.store import Store

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "swf" / "tiny.swf"
SAMPLE_BUDGETS = Path(__file__).resolve().parents[3] / "sample_data" / "budgets.toml"
T0 = dt.datetime(2001, 9, 9, 1, 46, 40, tzinfo=dt.timezone.utc)  # UnixStartTime 1000000000 = submit 0
TREE = "[tree.swf.group1]\nshare = 1\n[tree.swf.group2]\nshare = 1\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("budget_unit") / "store"
    ingest([TINY], store, fmt="swf", procs_per_node=2)
    return store


def test_unit_is_parsed_and_checked():
    assert bt.parse(TREE).unit is None
    assert bt.parse('unit = "cpu"\n' + TREE).unit == "cpu"
    assert bt.parse('unit = "gpu"\n' + TREE).unit == "gpu"
    with pytest.raises(bt.BudgetError, match="unit"):
        bt.parse('unit = "tpu"\n' + TREE)


def test_the_unit_is_inferred_from_the_cluster(tiny, sample_store):
    tree = bt.parse(TREE)
    assert qb.budget_unit(tree, store=tiny) == "cpu"             # 4 nodes x 2 cores, no GPUs
    assert qb.budget_unit(tree, capacity_gpus=0.0) == "cpu"       # a known layout without GPUs
    assert qb.budget_unit(tree, capacity_gpus=8.0) == "gpu"
    assert qb.budget_unit(bt.parse('unit = "gpu"\n' + TREE), store=tiny) == "gpu"  # said explicitly: kept
    assert qb.budget_unit(bt.load(SAMPLE_BUDGETS), store=sample_store) == "gpu"


def test_attainment_in_core_hours_by_hand(tiny):
    """Window [0 s, 120 s): capacity 8 cores x 120 s = 960 core-s. swf/group1 received jobs 1 (4 x 100), 10
    (3 x 10), 5 (2 x 50) and 5-part1 (2 x 40) = 610 core-s and waited 4 x 10 (job 1) + 3 x 2 (job 10) + 2 x 60
    (job 5) + 8 x 20 (job 3, cancelled before it started) = 326: demanded 936. swf/group2: job 4, 2 x 60 = 120,
    no wait. Job 2 has no account: unbudgeted, 30.25. Water-filling 960 over shares 1:1: group2 is capped at its
    120, group1 gets the remaining 840 -> attainment 610 / 840; static share 480 -> 610 / 480."""
    a = qb.attainment(tiny, bt.parse(TREE), T0, T0 + dt.timedelta(seconds=120))
    assert a.unit == "cpu" and a.unit_label == "core-hours"
    assert a.capacity_gpu_hours == pytest.approx(960 / 3600)
    rows = {r["node"]: r for r in a.table.iter_rows(named=True)}
    g1, g2 = rows["swf/group1"], rows["swf/group2"]
    assert g1["received_gpu_hours"] == pytest.approx(610 / 3600)
    assert g1["demanded_gpu_hours"] == pytest.approx(936 / 3600)
    assert g1["entitled_gpu_hours"] == pytest.approx(840 / 3600)
    assert g1["attainment"] == pytest.approx(610 / 840)
    assert g1["attainment_static"] == pytest.approx(610 / 480)
    assert (g2["received_gpu_hours"], g2["attainment"]) == (pytest.approx(120 / 3600), pytest.approx(1.0))
    assert rows["unbudgeted"]["received_gpu_hours"] == pytest.approx(30.25 / 3600)
    assert a.summary["worst_node"] == "swf/group1"


def test_a_gpu_budget_on_a_cluster_without_gpus_says_how_to_fix_it(tiny):
    with pytest.raises(ValueError, match='unit = "cpu"'):
        qb.attainment_of(Store(tiny).read("jobs"), bt.parse('unit = "gpu"\n' + TREE), T0,
                         T0 + dt.timedelta(seconds=120), capacity_gpus=0.0)


def test_a_gpu_cluster_is_unchanged(sample_store):
    """The sample store (GPUs): budget_usage's default and resource='gpu' agree, and the unit stays GPU-hours."""
    start, end = dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc), dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc)
    default = qb.usage(sample_store, start, end)
    assert default.equals(qb.usage(sample_store, start, end, resource="gpu"))
    assert not default.equals(qb.usage(sample_store, start, end, resource="cpu"))
    a = qb.attainment(sample_store, bt.load(SAMPLE_BUDGETS), start, end)
    assert a.unit == "gpu" and a.unit_label == "GPU-hours"
