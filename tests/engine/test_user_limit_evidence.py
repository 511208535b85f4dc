"""The per-user running limit's evidence from a log (``engine.user_limit_evidence``) on tiny hand-made logs."""
from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from engine.user_limit_evidence import user_limit_evidence

T = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def log(rows):
    """rows: (user, size, submit, start, end) in seconds after T."""
    at = lambda x: T + dt.timedelta(seconds=x)  # noqa: E731
    return pl.DataFrame({"user": [r[0] for r in rows], "req_cpus": [float(r[1]) for r in rows],
                         "submit": [at(r[2]) for r in rows], "start": [at(r[3]) for r in rows],
                         "end": [at(r[4]) for r in rows]})


# Capacity 10. u runs a and b (1 each) over [0, 100) and c (1) waits from 0 to 100 though 6-8 processors stay
# idle: u sits at its ceiling 2 with a fitting job waiting for 100 s, which explains c's 100 s of wait. v runs d
# (2) over [10, 50): ceiling 1. w's e (10 processors) waits [20, 150): it never fits (at most 9 idle) and w runs
# nothing meanwhile, so it is not u's kind of wait. All waiting: 100 + 130 = 230 job-seconds.
LOG = [("u", 1, 0, 0, 100), ("u", 1, 0, 0, 100), ("u", 1, 0, 100, 150), ("v", 2, 10, 10, 50),
       ("w", 10, 20, 150, 160)]


def test_ceilings_and_the_wait_they_explain():
    t0, t1 = T.timestamp(), T.timestamp() + 200
    ev = user_limit_evidence(log(LOG), "req_cpus", 10.0, t0, t1)
    assert ev["users"] == 3
    assert ev["ceilings"] == {1: 2, 2: 1}
    assert ev["users_held_at_ceiling"] == 1
    assert ev["most_common_held_ceiling"] == 2
    assert ev["ceiling_most_wait_explained"] == 2
    assert ev["held_user_seconds"] == pytest.approx(100.0)
    assert ev["wait_s_total"] == pytest.approx(230.0)
    assert ev["wait_s_explained"] == pytest.approx(100.0)
    assert ev["share_wait_explained"] == pytest.approx(100 / 230)


def test_the_window_counts_jobs_running_at_its_start_and_clips_waits():
    # from t0 = 50: a and b run across t0, so u's ceiling is still 2; v's d ended at 50 (outside: v ran nothing
    # in the window and is not counted); c waits [50, 100), e [50, 150)
    t0 = T.timestamp() + 50
    ev = user_limit_evidence(log(LOG), "req_cpus", 10.0, t0, T.timestamp() + 200)
    assert ev["users"] == 2 and ev["ceilings"] == {1: 1, 2: 1}
    assert ev["wait_s_total"] == pytest.approx(150.0)
    assert ev["wait_s_explained"] == pytest.approx(50.0)


def test_back_to_back_jobs_are_not_two_at_once_and_the_capacity_matters():
    # u's two jobs run [0, 10) and [10, 20): ceiling 1. The second waited [0, 10) and the third (2 processors)
    # [0, 20), while u ran one job (its ceiling): explained only while they fitted the idle capacity. Capacity 2
    # with u's job of 1 running leaves 1: the second (1) fits, the third never does: 10 of 30 s explained
    rows = [("u", 1, 0, 0, 10), ("u", 1, 0, 10, 20), ("u", 2, 0, 20, 30)]
    ev = user_limit_evidence(log(rows), "req_cpus", 2.0, T.timestamp(), T.timestamp() + 30)
    assert ev["ceilings"] == {1: 1}
    assert ev["wait_s_total"] == pytest.approx(10.0 + 20.0)
    assert ev["wait_s_explained"] == pytest.approx(10.0) and ev["most_common_held_ceiling"] == 1
    wide = user_limit_evidence(log(rows), "req_cpus", 4.0, T.timestamp(), T.timestamp() + 30)
    assert wide["wait_s_explained"] == pytest.approx(10.0 + 20.0)  # with room for it, all of it


def test_no_user_column_gives_no_evidence():
    ev = user_limit_evidence(log(LOG).drop("user"), "req_cpus", 10.0)
    assert ev["users"] == 0 and ev["share_wait_explained"] is None
