"""Budget trees: parsing and validation errors, account mapping, hierarchical water-filling (hand-computed).
Attainment on a store is in ``test_budgets_attainment.py``."""
from __future__ import annotations

import datetime as dt
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.budgets import (
    JOB_CLASSES, UNBUDGETED, BudgetError, entitlements, parse, static_entitlements, validate, water_fill,
)
from queries.store import schema

UTC = dt.timezone.utc


def T(text: str):
    return parse(textwrap.dedent(text), source="b.toml")


def approx(d: dict) -> dict:
    return {k: pytest.approx(v, abs=1e-9) for k, v in d.items()}


SIMPLE = """
    cluster_gpus = 8
    [tree.research]
    share = 3
    [tree.research.vision]
    share = 1
    [tree.research.nlp]
    share = 1
    [tree.ops]
    share = 1
"""

# ------------------------------------------------------------------------------------------ water-filling
def test_split_by_share_when_every_team_wants_more():
    tree = T("[tree.a]\nshare = 1\n[tree.b]\nshare = 3\n")
    got = entitlements(tree, 100.0, {"a": 1000.0, "b": 1000.0})
    assert got == approx({"a": 25.0, "b": 75.0, UNBUDGETED: 0.0})
    # all demand above entitlement: water-filling equals the static share x capacity
    assert got == approx(static_entitlements(tree, 100.0))


def test_team_with_zero_demand_leaves_its_share_to_its_siblings():
    tree = T("[tree.a]\nshare = 1\n[tree.b]\nshare = 1\n[tree.c]\nshare = 2\n")
    # a wants nothing: b and c split 90 as 1:2 (lam = 30)
    assert entitlements(tree, 90.0, {"b": 100.0, "c": 100.0}) == approx({"a": 0.0, "b": 30.0, "c": 60.0,
                                                                        UNBUDGETED: 0.0})


NESTED = """
    [tree.A]
    [tree.A.a1]
    [tree.A.a2]
    [tree.B]
    [tree.B.b1]
"""


def test_unused_share_flows_to_siblings_first():
    # A and B split 100 as 50/50; inside A, a1 only wants 10 so a2 gets 40 (not b1: b1 stays at B's 50)
    got = entitlements(T(NESTED), 100.0, {"A/a1": 10.0, "A/a2": 100.0, "B/b1": 100.0})
    assert got == approx({"A": 50.0, "A/a1": 10.0, "A/a2": 40.0, "B": 50.0, "B/b1": 50.0, UNBUDGETED: 0.0})


def test_unused_share_flows_up_when_the_siblings_are_satisfied():
    # A's whole subtree wants 30 < its 50: the 20 left goes up, to B
    got = entitlements(T(NESTED), 100.0, {"A/a1": 10.0, "A/a2": 20.0, "B/b1": 100.0})
    assert got == approx({"A": 30.0, "A/a1": 10.0, "A/a2": 20.0, "B": 70.0, "B/b1": 70.0, UNBUDGETED: 0.0})


def test_unused_share_flows_up_two_levels():
    tree = T("""
        [tree.o1]
        [tree.o1.g1]
        [tree.o1.g1.t1]
        [tree.o1.g1.t2]
        [tree.o1.g2]
        [tree.o1.g2.t3]
        [tree.o2]
        [tree.o2.g3]
        [tree.o2.g3.t4]
    """)
    # cap 120: o1 = o2 = 60; o1's g1 (t1 5 + t2 5) and g2 (t3 10) want 20 in all, so 40 goes up to o2
    got = entitlements(tree, 120.0, {"o1/g1/t1": 5.0, "o1/g1/t2": 5.0, "o1/g2/t3": 10.0, "o2/g3/t4": 500.0})
    assert got["o1"] == pytest.approx(20.0) and got["o2/g3/t4"] == pytest.approx(100.0)
    # t2 idle: t1 absorbs g1's 30 only up to its demand; g1's rest goes to g2 (t3 wants 45), then up to o2
    got = entitlements(tree, 120.0, {"o1/g1/t1": 20.0, "o1/g2/t3": 45.0, "o2/g3/t4": 500.0})
    assert got == approx({"o1": 60.0, "o1/g1": 20.0, "o1/g1/t1": 20.0, "o1/g1/t2": 0.0, "o1/g2": 40.0,
                          "o1/g2/t3": 40.0, "o2": 60.0, "o2/g3": 60.0, "o2/g3/t4": 60.0, UNBUDGETED: 0.0})


def test_shares_change_at_an_effective_date():
    tree = T(SIMPLE + """
        [[period]]
        start = 2026-11-15
        [period.tree.ops]
        share = 3
    """)
    demand = {"research/vision": 100.0, "research/nlp": 100.0, "ops": 100.0}
    before = entitlements(tree, 80.0, demand, when=dt.datetime(2026, 11, 14, 23, tzinfo=UTC))
    after = entitlements(tree, 80.0, demand, when=dt.date(2026, 11, 15))
    assert before == approx({"research": 60.0, "research/vision": 30.0, "research/nlp": 30.0, "ops": 20.0,
                             UNBUDGETED: 0.0})
    assert after == approx({"research": 40.0, "research/vision": 20.0, "research/nlp": 20.0, "ops": 40.0,
                            UNBUDGETED: 0.0})
    segs = tree.segments(dt.datetime(2026, 11, 14, tzinfo=UTC), dt.datetime(2026, 11, 16, tzinfo=UTC))
    assert [(a.day, b.day) for a, b, _ in segs] == [(14, 15), (15, 16)]
    assert [r.index["ops"].share for _, _, r in segs] == [1.0, 3.0]


def test_guarantee_is_a_floor_and_max_gpus_a_cap():
    tree = T("[tree.a]\nshare = 1\nguaranteed_gpus = 6\n[tree.b]\nshare = 3\n[tree.c]\nshare = 1\nmax_gpus = 1\n")
    # 10 h: a floor 60 GPU-h, c cap 10 GPU-h. clamp(l, 60, 500) + 3l + min(l, 10) = 100 -> l = 10: b 30
    got = entitlements(tree, 100.0, {"a": 500.0, "b": 500.0, "c": 500.0}, window_hours=10.0)
    assert got == approx({"a": 60.0, "b": 30.0, "c": 10.0, UNBUDGETED: 0.0})
    # without the window the GPU numbers do not apply: plain 1:3:1
    assert entitlements(tree, 100.0, {"a": 500.0, "b": 500.0, "c": 500.0})["b"] == pytest.approx(60.0)


def test_unfunded_buckets_get_only_leftovers():
    tree = T("[tree.research]\n[tree.research.vision]\n[tree.ops]\n")
    # research/x names no child of research: a zero-share direct bucket; 'zzz' is unbudgeted (zero share at root)
    got = entitlements(tree, 100.0, {"research/vision": 30.0, "research/x": 40.0, "ops": 10.0, "zzz": 50.0})
    # research cap 70 & ops 10 are both met (80), leaving 20 for unbudgeted; vision 30 first, then direct 40
    assert got == approx({"research": 70.0, "research/vision": 30.0, "research/(direct)": 40.0, "ops": 10.0,
                          UNBUDGETED: 20.0})
    got = entitlements(tree, 100.0, {"research/vision": 80.0, "research/x": 40.0, "ops": 10.0, "zzz": 50.0})
    # research gets 90 (ops capped at 10): vision 80, direct only the 10 vision leaves; nothing for unbudgeted
    assert got == approx({"research": 90.0, "research/vision": 80.0, "research/(direct)": 10.0, "ops": 10.0,
                          UNBUDGETED: 0.0})


def test_oversold_floors_are_scaled_down_proportionally():
    assert water_fill(60.0, [1, 1], [60.0, 30.0], [100.0, 100.0]) == pytest.approx([40.0, 20.0])


def _bisect_fill(amount, weights, caps):
    """Independent computation: bisection on lambda (no floors, positive weights)."""
    if amount >= sum(caps):
        return list(caps)
    lo, hi = 0.0, 1.0
    while sum(min(hi * w, c) for w, c in zip(weights, caps)) < amount:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(min(mid * w, c) for w, c in zip(weights, caps)) < amount else (lo, mid)
    return [min(hi * w, c) for w, c in zip(weights, caps)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 100), st.floats(0, 1000)), min_size=1, max_size=12),
       st.floats(0, 5000))
def test_water_fill_matches_bisection(items, amount):
    weights, caps = [w for w, _ in items], [c for _, c in items]
    got = water_fill(amount, weights, [0.0] * len(items), caps)
    assert got == pytest.approx(_bisect_fill(amount, weights, caps), rel=1e-6, abs=1e-6)
    assert sum(got) == pytest.approx(min(amount, sum(caps)), rel=1e-9, abs=1e-6)
    assert all(-1e-9 <= g <= c + 1e-9 for g, c in zip(got, caps))


# ------------------------------------------------------------------------------------------ parsing
FULL = """
    cluster = "h100"
    cluster_gpus = 64
    [min_runtime]
    training = "8h"
    debug = 0
    default = "1h30m"
    [tree.research]
    share = 3
    guaranteed_gpus = 32
    max_gpus = 60
    [tree.research.vision]
    share = 2
    [tree.research.vision.min_runtime]
    training = "4h"
    [tree.research.nlp]
    [[node]]
    name = "ops"
    [[node]]
    name = "infra"
    parent = "ops"
    share = 0.5
    [[period]]
    start = 2026-11-15
    [period.tree.research.vision]
    share = 1
    [[period.node]]
    path = "ops"
    share = 2
"""


def test_full_file_parses_into_versions():
    tree = T(FULL)
    assert [v.start for v in tree.versions] == [None, dt.datetime(2026, 11, 15, tzinfo=UTC)]
    base, later = (v.root for v in tree.versions)
    assert [n.path for n in base.walk()][1:] == ["research", "research/vision", "research/nlp", "ops", "ops/infra"]
    assert (base.index["research/vision"].share, later.index["research/vision"].share) == (2.0, 1.0)
    assert (base.index["ops"].share, later.index["ops"].share) == (1.0, 2.0)
    assert later.index["research"].guaranteed_gpus == 32.0 and later.index["ops/infra"].share == 0.5
    assert tree.cluster == "h100" and tree.cluster_gpus == 64.0
    assert tree.min_runtime("training", "research/vision/alice") == 4 * 3600
    assert tree.min_runtime("training", "ops") == 8 * 3600
    assert tree.min_runtime("eval", "ops") == 5400 and tree.min_runtime("debug", "zzz") == 0


def test_job_classes_mirror_the_schema():
    assert JOB_CLASSES == schema.JOB_CLASSES


def test_resolve_longest_prefix_and_unbudgeted():
    tree = T(FULL)
    assert tree.resolve("research/vision/alice/run1") == "research/vision"
    assert tree.resolve("Research/NLP") == "research/nlp"
    assert tree.resolve("research/robotics") == "research"
    assert tree.bucket("research/robotics") == "research/(direct)"
    assert tree.resolve("infra") == "ops/infra"  # bare Slurm account name, unique in the tree
    assert tree.resolve("vision/bob") == "research/vision"
    for account in ("marketing/x", "", None, "/"):
        assert tree.resolve(account) == UNBUDGETED
    assert T("[tree.a.x]\n[tree.b.x]\n").resolve("x") == UNBUDGETED  # a bare name found twice is ambiguous
    assert tree.bucket("marketing") == UNBUDGETED


def _err(text: str) -> BudgetError:
    with pytest.raises(BudgetError) as info:
        T(text)
    return info.value


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(text).splitlines(), 1) if needle in line)


BAD = [
    ("negative share", "[tree.a]\n[tree.a.b]\nshare = -1\n", "tree.a.b.share", "share = -1"),
    ("non-numeric share", "[tree.a]\nshare = \"high\"\n", "tree.a.share", "share ="),
    ("boolean share", "[tree.a]\nshare = true\n", "tree.a.share", "share ="),
    ("unknown node key", "[tree.a]\nshares = 2\n", "tree.a.shares", "shares"),
    ("unknown top key", "clustr_gpus = 8\n[tree.a]\n", "clustr_gpus", "clustr_gpus"),
    ("scalar node", "[tree]\na = 3\n", "tree.a", "a = 3"),
    ("parent cycle", "[[node]]\nname = \"a\"\nparent = \"b\"\n[[node]]\nname = \"b\"\nparent = \"a\"\n",
     "node[0].parent", None),
    ("duplicate name", "[[node]]\nname = \"a\"\n[[node]]\nname = \"a\"\n", "node[1].name", None),
    ("nested and flat duplicate", "[tree.ops]\n[[node]]\nname = \"OPS\"\n", "node[0]", None),
    ("case duplicate siblings", "[tree.ops]\n[tree.Ops]\n", "tree.Ops", "[tree.Ops]"),
    ("unknown parent", "[[node]]\nname = \"a\"\nparent = \"nope\"\n", "node[0].parent", "parent ="),
    ("guaranteed above max", "[tree.a]\nguaranteed_gpus = 10\nmax_gpus = 5\n", "tree.a", "[tree.a]"),
    ("children guarantees", "[tree.a]\nguaranteed_gpus = 10\n[tree.a.x]\nguaranteed_gpus = 6\n"
                            "[tree.a.y]\nguaranteed_gpus = 6\n", "tree.a", "[tree.a]"),
    ("unsorted periods", "[tree.a]\n[[period]]\nstart = 2026-12-01\n[[period]]\nstart = 2026-11-01\n",
     "period[1].start", "2026-11-01"),
    ("overlapping periods", "[tree.a]\n[[period]]\nstart = 2026-12-01\n[[period]]\nstart = 2026-12-01T00:00:00Z\n",
     "period[1].start", "T00:00"),
    ("period without start", "[tree.a]\n[[period]]\n[period.tree.a]\nshare = 2\n", "period[0]", "[[period]]"),
    ("bad period start", "[tree.a]\n[[period]]\nstart = \"soon\"\n", "period[0].start", "soon"),
    ("period adds orphan", "[tree.a]\n[[period]]\nstart = 2026-12-01\n[[period.node]]\npath = \"b/c\"\n",
     "period[0].node[0]", "[[period.node]]"),
    ("unknown job class", "[min_runtime]\ntrainig = \"8h\"\n[tree.a]\n", "min_runtime.trainig", "trainig"),
    ("bad duration", "[tree.a]\n[tree.a.min_runtime]\ntraining = \"eight hours\"\n", "tree.a.min_runtime.training",
     "eight"),
    ("reserved name", "[tree.unbudgeted]\n", "tree.unbudgeted", "[tree.unbudgeted]"),
    ("slash in name", "[[node]]\nname = \"a/b\"\n", "node[0].name", "name ="),
    ("negative guarantee", "[tree.a]\nguaranteed_gpus = -8\n", "tree.a.guaranteed_gpus", "guaranteed_gpus"),
    ("negative cap", "[tree.a]\nmax_gpus = -1\n", "tree.a.max_gpus", "max_gpus"),
    ("negative cluster", "cluster_gpus = -4\n[tree.a]\n", "cluster_gpus", "cluster_gpus"),
    ("impossible date", "[tree.a]\n[[period]]\nstart = \"2026-13-01\"\n", "period[0].start", "2026-13-01"),
    ("negative duration", "[min_runtime]\ndebug = -5\n[tree.a]\n", "min_runtime.debug", "debug = -5"),
    ("duration unit", "[min_runtime]\ndebug = \"5w\"\n[tree.a]\n", "min_runtime.debug", "5w"),
    ("period unknown key", "[tree.a]\n[[period]]\nstart = 2026-12-01\nshare = 2\n", "period[0].share", "share = 2"),
    ("period negative share", "[tree.a]\n[[period]]\nstart = 2026-12-01\n[period.tree.a]\nshare = -2\n",
     "period[0].tree.a.share", "share = -2"),
    ("no nodes", "cluster_gpus = 8\n", None, None),
]


@pytest.mark.parametrize("text,key,needle", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_config_names_the_key(text, key, needle):
    err = _err(text)
    assert err.source == "b.toml"
    if key is None:
        assert "no budget nodes" in str(err)
        return
    assert err.key == key and f": {key}: " in str(err), str(err)
    if needle:
        assert err.line == _line_of(text, needle), str(err)


def test_cycle_message_shows_the_loop():
    err = _err("[[node]]\nname = \"a\"\nparent = \"b\"\n[[node]]\nname = \"b\"\nparent = \"c\"\n"
               "[[node]]\nname = \"c\"\nparent = \"a\"\n")
    assert "a -> b -> c -> a" in str(err)


def test_unknown_key_suggests_the_right_one():
    assert "did you mean 'share'" in str(_err("[tree.a]\nshares = 2\n"))


def test_invalid_toml_reports_the_line():
    err = _err("[tree.a]\nshare = = 2\n")
    assert "not valid TOML" in str(err) and "line 2" in str(err)


def test_guarantees_above_cluster_capacity():
    tree = T("[tree.a]\nguaranteed_gpus = 600\n[tree.b]\nguaranteed_gpus = 500\n")
    with pytest.raises(BudgetError, match="guaranteed_gpus sum to 1100 GPUs, above the cluster's 1000") as info:
        validate(tree, cluster_gpus=1000)
    assert info.value.key == "tree"
    assert not [w for w in validate(tree, cluster_gpus=1100) if "guarantee" in w]
    # guarantees set on groups under an org without one still claim the cluster (sample_data's shape)
    deep = T("[tree.acme]\n[tree.acme.a]\nguaranteed_gpus = 600\n[tree.acme.b]\nguaranteed_gpus = 500\n"
             "[tree.acme.b.x]\nguaranteed_gpus = 400\n")
    with pytest.raises(BudgetError, match=r"sum to 1100 GPUs.*acme/a=600, acme/b=500"):
        validate(deep, cluster_gpus=1000)
    # the file's own cluster_gpus is used when none is given; a period that oversells is named
    tree = T("cluster_gpus = 1000\n[tree.a]\nguaranteed_gpus = 600\n[[period]]\nstart = 2026-12-01\n"
             "[period.tree.a]\nguaranteed_gpus = 1200\n")
    with pytest.raises(BudgetError) as info:
        validate(tree)
    assert info.value.key == "period[0].tree"


def test_validate_warns_about_nodes_without_accounts_and_unbudgeted_accounts():
    tree = T(SIMPLE)
    warnings = validate(tree, accounts=["research/vision/alice", "mystery/x", None])
    assert "tree node research/nlp has no account in the logs" in warnings
    assert "tree node ops has no account in the logs" in warnings
    assert any("2 account(s)" in w and "'mystery/x'" in w for w in warnings)  # '' (null account) too
    assert not any("research/vision" in w for w in warnings)
