"""Attainment from logs (``queries.analytics.budgets``) on a tiny real store: entitled / demanded / received
GPU-hours by leaf, by level and across an effective date (hand-computed), its history over sliding windows, the budget
frames joined in SQL, and the bundled sample budgets file."""
from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import polars as pl
import pytest

import queries
from engine.budgets import UNBUDGETED, static_entitlements, validate
from queries.analytics import budgets
from queries.store import schema
from queries.store import Store

from test_budgets import SIMPLE, T

REPO = Path(__file__).resolve().parents[3]
UTC = dt.timezone.utc


def ts(day: int, hour: int) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, tzinfo=UTC)


JOBS = [  # job_id, account, state, gpus, submit, start, end
    ("j1", "research/vision/alice", "COMPLETED", 4.0, ts(9, 19), ts(9, 20), ts(10, 5)),
    ("j2", "research/nlp", "COMPLETED", 2.0, ts(10, 1), ts(10, 3), ts(10, 13)),
    ("j3", "ops", "COMPLETED", 2.0, ts(10, 0), ts(10, 0), ts(10, 3)),
    ("j4", "research/vision", "PENDING", 8.0, ts(10, 0), None, None),
    ("j5", "mystery/x", "RUNNING", 1.0, ts(10, 2), ts(10, 2), None),
    ("j6", "ops", "CANCELLED", 2.0, ts(10, 5), None, ts(10, 6)),
    ("j7", "research/nlp", "COMPLETED", 2.0, ts(9, 10), ts(9, 11), ts(9, 12)),
    ("j8", "research/nlp", "COMPLETED", 1.0, ts(9, 23), ts(10, 1), ts(10, 2)),
]
W0, W1 = ts(10, 0), ts(10, 10)


@pytest.fixture
def store(tmp_path):
    jobs = pl.DataFrame(
        [{"cluster": "c1", "job_id": j, "account": a, "state": s, "req_gpus": g,
          "alloc_gpus": None if st_ is None else g, "submit": sub, "start": st_, "end": en}
         for j, a, s, g, sub, st_, en in JOBS],
        schema_overrides={"submit": schema.UTC_TS, "start": schema.UTC_TS, "end": schema.UTC_TS},
    )
    nodes = pl.DataFrame({"node": ["n1", "n2"], "gpus": [4.0, 4.0]})
    with Store(tmp_path).transaction() as tx:
        tx.upsert("jobs", jobs)
        tx.replace_nodes("c1", nodes)
    return tmp_path


def test_budget_usage_sql(store):
    got = {r["account"]: r for r in budgets.usage(store, W0, W1).iter_rows(named=True)}
    # hand-computed GPU-hours inside [00:00, 10:00); j7 ran before the window and is absent
    expected = {  # account: (received, waiting)
        "mystery/x": (8, 0),                 # j5 RUNNING 02:00 -> window end, 1 GPU
        "ops": (6, 2),                       # j3 3 h x 2; j6 cancelled while queued 05:00-06:00 x 2
        "research/nlp": (14 + 1, 4 + 1),     # j2 03-10 x 2, queued 01-03 x 2; j8 01-02 x 1, queued 00-01 x 1
        "research/vision": (0, 80),          # j4 PENDING 8 GPUs the whole window
        "research/vision/alice": (20, 0),    # j1 00-05 x 4 (started before the window)
    }
    assert sorted(got) == sorted(expected)
    for account, (rec, wait) in expected.items():
        row = got[account]
        assert row["received_gpu_s"] == pytest.approx(rec * 3600), account
        assert row["waiting_gpu_s"] == pytest.approx(wait * 3600), account
        assert row["demanded_gpu_s"] == pytest.approx((rec + wait) * 3600), account
    assert got["research/nlp"]["running_jobs"] == 2 and got["research/vision"]["waiting_jobs"] == 1
    assert budgets.usage(store, W0, W1, cluster="other").height == 0


def _rows(result) -> dict:
    return {r["node"]: r for r in result.table.iter_rows(named=True)}


def test_attainment_by_leaf(store):
    result = budgets.attainment(store, T(SIMPLE), W0, W1)
    assert result.capacity_gpu_hours == pytest.approx(80.0)  # 8 GPUs from the node inventory x 10 h
    rows = _rows(result)
    assert list(rows) == ["ops", "research/nlp", "research/vision", UNBUDGETED]
    # demand: vision 100, nlp 20, ops 8, unbudgeted 8. Root: ops capped at 8, research 3*24 = 72 (lam 24), nothing
    # left for unbudgeted. Research 72: nlp capped at 20, vision 52. Static: research 60 -> 30/30, ops 20.
    expected = {  # entitled, static, demanded, received
        "research/vision": (52, 30, 100, 20), "research/nlp": (20, 30, 20, 15), "ops": (8, 20, 8, 6),
        UNBUDGETED: (0, 0, 8, 8),
    }
    for node, (ent, stat, dem, rec) in expected.items():
        r = rows[node]
        got = (r["entitled_gpu_hours"], r["static_gpu_hours"], r["demanded_gpu_hours"], r["received_gpu_hours"])
        assert got == pytest.approx((ent, stat, dem, rec)), node
    assert rows["research/vision"]["attainment"] == pytest.approx(20 / 52)
    assert rows["research/vision"]["attainment_static"] == pytest.approx(20 / 30)
    assert rows["research/nlp"]["attainment"] == pytest.approx(0.75)
    assert rows["ops"]["attainment"] == pytest.approx(0.75)
    assert rows[UNBUDGETED]["attainment"] is None  # entitled 0: undefined, never hidden
    assert rows[UNBUDGETED]["kind"] == "unbudgeted" and rows["ops"]["kind"] == "node"
    s = result.summary
    assert (s["teams"], s["worst_node"], s["at_least_95"], s["over_entitled"]) == (3, "research/vision", 0, 0)
    assert s["mean"] == pytest.approx((20 / 52 + 0.75 + 0.75) / 3) and s["worst"] == pytest.approx(20 / 52)
    assert result.warnings == ()


def test_attainment_by_level_and_direct_bucket(store):
    result = budgets.attainment(store, T(SIMPLE), W0, W1, level=1)
    rows = _rows(result)
    assert list(rows) == ["ops", "research", UNBUDGETED]
    r = rows["research"]
    assert (r["entitled_gpu_hours"], r["demanded_gpu_hours"], r["received_gpu_hours"]) == pytest.approx((72, 120, 35))
    assert r["attainment"] == pytest.approx(35 / 72)
    # a tree without nlp: research/nlp's demand is research's direct bucket, a row of its own (never lost)
    tree = T("[tree.research]\nshare = 3\n[tree.research.vision]\n[tree.ops]\n")
    rows = _rows(budgets.attainment(store, tree, W0, W1))
    d = rows["research/(direct)"]
    assert d["kind"] == "direct" and (d["demanded_gpu_hours"], d["received_gpu_hours"]) == pytest.approx((20, 15))
    # research gets 72: vision (share 1) takes it all up to its 100 demand; the zero-share direct bucket gets 0
    assert (rows["research/vision"]["entitled_gpu_hours"], d["entitled_gpu_hours"]) == pytest.approx((72, 0))
    total = sum(r["demanded_gpu_hours"] for r in rows.values())
    assert total == pytest.approx(136)  # 100 + 20 + 8 + 8: every account counted exactly once


def test_attainment_across_an_effective_date(store):
    tree = T(SIMPLE + """
        [[period]]
        start = 2026-11-10T05:00:00Z
        [period.tree.research.nlp]
        share = 0
    """)
    rows = _rows(budgets.attainment(store, tree, W0, W1))
    # 00-05 (cap 40): demand vision 60, nlp 10, ops 6, unb 3 -> research 34 (lam 11.33), ops 6; vision 24, nlp 10.
    # 05-10 (cap 40): vision 40, nlp 10, ops 2, unb 5 -> research 38, ops 2; nlp has share 0: vision 38, nlp 0.
    expected = {"research/vision": (62, 15 + 30, 100, 20), "research/nlp": (10, 15 + 0, 20, 15),
                "ops": (8, 10 + 10, 8, 6), UNBUDGETED: (0, 0, 8, 8)}
    for node, want in expected.items():
        r = rows[node]
        got = (r["entitled_gpu_hours"], r["static_gpu_hours"], r["demanded_gpu_hours"], r["received_gpu_hours"])
        assert got == pytest.approx(want), node
    assert rows["research/nlp"]["attainment"] == pytest.approx(1.5)  # got more than its (defunded) entitlement
    assert rows["research/nlp"]["attainment_static"] == pytest.approx(1.0)
    s = budgets.summarize(pl.DataFrame(list(rows.values())))
    assert s["mean"] == pytest.approx((20 / 62 + 1.0 + 0.75) / 3) and (s["at_least_95"], s["over_entitled"]) == (1, 1)


def test_attainment_capacity_sources(store, tmp_path):
    tree = T(SIMPLE)
    assert budgets.attainment(store, tree, W0, W1, capacity_gpus=16).capacity_gpu_hours == pytest.approx(160)
    with Store(store).transaction() as tx:  # without a node inventory the tree's cluster_gpus (8) is used
        tx.replace_nodes("c1", pl.DataFrame({"node": [], "gpus": []}, schema={"node": pl.String, "gpus": pl.Float64}))
    assert budgets.attainment(store, tree, W0, W1).capacity_gpu_hours == pytest.approx(80)
    with pytest.raises(ValueError, match="capacity unknown"):
        budgets.attainment(store, T("[tree.a]\n"), W0, W1)
    # a capacity too small for what ran is reported, not silently accepted
    assert budgets.attainment(store, tree, W0, W1, capacity_gpus=2).warnings


def test_attainment_history_overlapping_windows_match_independent_runs(store):
    tree = T(SIMPLE)
    hist = budgets.attainment_history(store, tree, ts(9, 20), W1, window_hours=6, step_hours=2)
    # windows [t - 6 h, t) for t = 02:00, 04:00, ..., 10:00 on the 10th (stepped every 2 h, overlapping)
    assert hist["window_end"].to_list() == [ts(10, 2 * k) for k in range(1, 6)]
    for row in hist.iter_rows(named=True):
        one = budgets.attainment(store, tree, row["window_start"], row["window_end"]).summary
        for key in ("teams", "worst_node", "at_least_95", "over_entitled"):
            assert row[key] == one[key], (row["window_end"], key)
        for key in ("mean", "worst"):
            assert row[key] == pytest.approx(one[key]), (row["window_end"], key)
    assert hist["teams"].min() >= 1


def test_attainment_history_slides(store):
    hist = budgets.attainment_history(store, T(SIMPLE), W0, W1, window_hours=5, step_hours=5)
    assert hist["window_end"].to_list() == [ts(10, 5), ts(10, 10)]
    first = budgets.attainment(store, T(SIMPLE), W0, ts(10, 5)).summary
    assert hist.row(0, named=True)["mean"] == pytest.approx(first["mean"])


def test_budget_frames_join_in_sql(store):
    tree = T(SIMPLE)
    frames = budgets.budget_frames(tree, W0, W1, store=store)
    shares = frames["budget_shares"]
    assert shares.filter(pl.col("leaf"))["share"].sum() == pytest.approx(1.0)
    assert dict(shares.select("account", "share").iter_rows())["research/vision"] == pytest.approx(0.375)
    con = queries.connect(store, extra=frames)
    try:
        per_node = dict(con.sql(
            "select a.node, count(*) as n from jobs as j join budget_accounts as a using (account) "
            "group by a.node").pl().iter_rows())
    finally:
        con.close()
    assert per_node == {"research/vision": 2, "research/nlp": 3, "ops": 2, UNBUDGETED: 1}


def test_sample_budgets_file_parses():
    path = REPO / "sample_data" / "budgets.toml"
    if not path.exists():
        pytest.skip("sample_data/budgets.toml not written yet")
    from engine.budgets import load

    tree = load(path)
    assert tree.versions and all(v.root.children for v in tree.versions)
    validate(tree)  # raises on oversold guarantees
    assert not math.isnan(sum(static_entitlements(tree, 1.0).values()))
