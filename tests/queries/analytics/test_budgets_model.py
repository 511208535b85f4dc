"""engine.budgets.attainment is the one attainment formula: the window tally (log path and simulated runs) and
the static SQL form (``fairshare_attainment``) give what it gives. Hand-computed cases."""
from __future__ import annotations

import polars as pl
import pytest

import queries
from engine import budgets as bt
from engine.attainment import summary as run_summary
from queries.analytics.budgets import summarize

from test_queries_fixture import store  # noqa: F401 - store is a fixture


@pytest.mark.parametrize("received, demanded, entitled, expected", [
    (3.0, 4.0, 2.0, 1.5),    # entitled binds: 3 / min(2, 4)
    (3.0, 4.0, 6.0, 0.75),   # demand binds: 3 / min(6, 4)
    (0.0, 5.0, 5.0, 0.0),    # asked, got nothing
    (0.0, 0.0, 5.0, None),   # no demand: no attainment (not 0, not 1)
    (2.0, 5.0, 0.0, None),   # an unfunded bucket with nothing left over
])
def test_attainment_by_hand(received, demanded, entitled, expected):
    assert bt.attainment(received, demanded, entitled) == expected


def test_the_window_tally_uses_it():
    # capacity 10 h; a (share 3) asks 8 h and gets 6, b (share 1) asks 1 h and gets 1: water-filling gives b its
    # 1 h (its demand), a the other 9 h capped at its demand 8; static: a 7.5, b 2.5
    tree = bt.parse("[tree.a]\nshare = 3\n[tree.b]\nshare = 1\n")
    tally = bt.WindowTally()
    tally.add_segment(tree.at(None), 10.0, 1.0, [("a", 8.0, 6.0), ("b", 1.0, 1.0)])
    rows = {r[0]: r for r in tally.rows()}
    assert rows["a"][3:] == (8.0, 7.5, 8.0, 6.0, 0.75, 0.8)   # 6 / min(8, 8), 6 / min(7.5, 8)
    assert rows["b"][3:] == (1.0, 2.5, 1.0, 1.0, 1.0, 1.0)
    assert rows["unbudgeted"][7:] == (None, None)


def test_the_static_sql_form_agrees(store):
    rows = queries.run("fairshare_attainment", store=store, team_level=2).to_dicts()
    assert len(rows) >= 3
    for r in rows:
        want = bt.attainment(r["received_gpu_hours"], r["demanded_gpu_hours"], r["entitled_gpu_hours"])
        assert r["attainment"] == want, r["team"]


def test_attainment_summary_is_one_formula_under_two_names():
    # nodes a 0.5, b 1.4 (capped at 1 in the mean, over-entitled), c None (no demand: left out), d 0.96;
    # a "direct" row is not a team. mean = (0.5 + 1 + 0.96) / 3 = 0.82; worst a; at >= 0.95: b, d.
    rows = [("a", "node", 0.5), ("b", "node", 1.4), ("c", "node", None), ("d", "node", 0.96), ("x", "direct", 0.1)]
    s = bt.summary(rows)
    assert s == {"teams": 3, "mean": pytest.approx(0.82), "worst": 0.5, "worst_node": "a", "at_least": 2,
                 "over_entitled": 1}
    teams = {k: {"kind": kind, "attainment": a} for k, kind, a in rows}
    table = pl.DataFrame(rows, schema=["node", "kind", "attainment"], orient="row")
    assert run_summary(teams) == {"teams_count": 3, "mean": s["mean"], "worst": 0.5, "worst_node": "a",
                                  "teams_at_95pct": 2, "over_entitled": 1}
    assert summarize(table) == {"teams": 3, "mean": s["mean"], "worst": 0.5, "worst_node": "a", "at_least_95": 2,
                                "over_entitled": 1}
    assert bt.summary([])["teams"] == 0 and bt.summary([])["mean"] is None


def test_validate_warnings_say_what_is_unchecked_and_who_is_unbudgeted():
    plain = bt.parse("[tree.a]\nshare = 1\n")
    # no guarantee: nothing went unchecked for want of the cluster's size
    assert bt.validate(plain, accounts=["a"]) == []
    guaranteed = bt.parse("[tree.a]\nshare = 1\nguaranteed_gpus = 8\n")
    assert bt.validate(guaranteed, accounts=["a"]) == [
        "cluster capacity unknown (cluster_gpus): guarantees were not checked against it"]
    # jobs without an account are named as such, not as ''
    assert bt.validate(plain, accounts=[None, "a", "b"]) == [
        "2 account(s) not in the tree count as 'unbudgeted': (jobs without an account), 'b'"]
