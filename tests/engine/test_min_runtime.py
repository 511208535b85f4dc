"""engine.min_runtime: one precedence (scenario override > log value > budget file > default) and one "no
contract" (None = never preempted; 0 = preemptible at once). Hand-computed cases, in the resolver and end to end.

The end-to-end case (``test_engine_preempt``'s): one processor, team B's B1 (training, 100 s) runs from 0, team
A's A1 (training, 10 s) arrives at 10; A and B have share 1 each. B1 past its min runtime m is preempted at
max(m, 10) (A under-served, B over-served) and reruns after A1; without a contract it is never preempted.
"""
from __future__ import annotations

import math

import pytest

from dashboard.whatif import budgets as whatif_budgets
from engine import Cluster, ConfigError, SimConfig, simulate
from engine import budgets as bt
from engine import min_runtime

from test_engine_preempt import attempt_rows, frame

NO_TABLE = bt.parse("[tree.A]\n[tree.B]\n")                                  # a budget file without [min_runtime]
ONE_HOUR = bt.parse('[min_runtime]\ntraining = "1h"\n[tree.A]\n[tree.B]\n')
PREEMPTED_AT_30 = {"B1": (0.0, 140.0, 1), "A1": (30.0, 40.0, 0)}
NEVER = {"B1": (0.0, 100.0, 0), "A1": (100.0, 110.0, 0)}


def test_the_precedence_by_hand():
    r = min_runtime.resolve
    assert r("training", "A", tree=NO_TABLE) is None                       # nothing: no contract
    assert r("training", "A", tree=NO_TABLE, default_s=5) == 5.0            # default, last
    assert r("training", "A", tree=ONE_HOUR, default_s=5) == 3600.0         # budget file beats default
    assert r("training", "A", logged_s=30, tree=ONE_HOUR) == 30.0           # log beats budget file
    assert r("training", "A", logged_s=30, tree=ONE_HOUR, override_s={"training": 60}) == 60.0  # override beats log
    assert r("eval", "A", logged_s=30, override_s={"training": 60}) == 30.0  # an override names its classes only
    assert r("eval", "A", override_s={"training": 60, "default": 7}) == 7.0  # ... or every class: "default"
    assert r("training", "A", override_s={"training": 60, "default": 7}) == 60.0
    assert r("training", "A", override_s={"training": 0}, tree=ONE_HOUR) == 0.0      # 0: a contract
    assert r("training", "A", override_s={"training": None}, logged_s=30) is None    # None: no contract
    assert r("training", "A", override_s={"training": 60}, tree=ONE_HOUR, pinned=True) == 3600.0  # ran as logged
    assert r("training", "A", logged_s=math.nan, tree=ONE_HOUR) == 3600.0   # NaN / negative: not logged
    assert r("training", "A", logged_s=-1.0) is None


def test_the_budget_file_says_none_when_no_table_names_the_class():
    assert NO_TABLE.min_runtime("training", "A") is None
    assert ONE_HOUR.min_runtime("training", "A") == 3600.0 and ONE_HOUR.min_runtime("debug", "A") is None
    # the Fair share page's baseline is the same answer (it showed "0 (preemptible)" while the replay never
    # preempted these jobs)
    assert whatif_budgets.baseline_min_runtime_s(NO_TABLE, "training") is None
    assert whatif_budgets.baseline_min_runtime_s(ONE_HOUR, "training") == 3600.0


def _run(logged, tree, override=None):
    w = frame([("B1", 0, 1, 100, 100, "B", logged), ("A1", 10, 1, 10, 10, "A", logged)],
              job_class=["training", "training"])
    res = simulate(w, Cluster.procs(1), SimConfig(policy="fairshare", budgets=tree,
                                                  min_runtime_by_class=override or {}))
    got = {n: (rows[0][2], rows[-1][3], len(rows) - 1) for n in ("B1", "A1") for rows in [attempt_rows(res, n)]}
    return got, res.jobs.filter(res.jobs["job_name"] == "A1")["min_runtime_s"].to_list()


@pytest.mark.parametrize("logged, tree, override, expected, written", [
    (None, NO_TABLE, None, NEVER, [None]),                  # no [min_runtime], nothing logged: never preempted
    (30.0, NO_TABLE, None, PREEMPTED_AT_30, [30.0]),        # the log's own contract
    (None, ONE_HOUR, None, NEVER, [3600.0]),                # the file's 1 h outlasts B1's 100 s run
    (30.0, ONE_HOUR, None, PREEMPTED_AT_30, [30.0]),        # log beats the budget file
    (5000.0, ONE_HOUR, {"training": 30.0}, PREEMPTED_AT_30, [30.0]),  # the scenario override beats both
    (30.0, NO_TABLE, {"training": None}, NEVER, [None]),    # override to "no contract"
    (5000.0, ONE_HOUR, {"default": 30.0}, PREEMPTED_AT_30, [30.0]),   # simulate --min-runtime 30s
])
def test_who_wins_end_to_end(logged, tree, override, expected, written):
    assert _run(logged, tree, override) == (expected, written)


def test_command_line_overrides():
    p = min_runtime.parse_overrides
    assert p(["8h"]) == {"default": 28800.0}
    assert p(["training=4h", "debug=0", "eval=none"]) == {"training": 14400.0, "debug": 0.0, "eval": None}
    with pytest.raises(ConfigError, match="unknown job class 'trainig'"):
        p(["trainig=4h"])
    with pytest.raises(ConfigError, match="--min-runtime training=: not a duration"):
        p(["training=4x"])
