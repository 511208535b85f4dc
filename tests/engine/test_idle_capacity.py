"""``engine.idle_capacity``: capacity the log left idle while its oldest waiting job fit it (suspect outages), on
hand-built logs whose answers are computed by hand."""
from __future__ import annotations

import polars as pl
import pytest

from engine.idle_capacity import idle_while_waiting


def log(rows):
    """rows: (submit, start, end, size) in seconds."""
    return pl.DataFrame({"submit": [float(r[0]) for r in rows], "start": [float(r[1]) for r in rows],
                         "end": [float(r[2]) for r in rows], "req_cpus": [float(r[3]) for r in rows]})


# 4 processors. A (2) runs 0-10000. B (1) waits 100-7300 with 2 idle: a 2 h suspect outage. C (3) waits
# 8000-10000 but does not fit the 2 idle ones: not counted. D (1) waits 60 s at 10600 on an idle machine: too short.
ROWS = [(0, 0, 10000, 2), (100, 7300, 8000, 1), (8000, 10000, 10500, 3), (10600, 10660, 10700, 1)]


def test_a_long_wait_beside_idle_capacity_is_a_suspect_outage():
    got = idle_while_waiting(log(ROWS), "req_cpus", 4.0, 0.0, 10700.0)
    assert got["intervals"] == 1 and got["hours"] == pytest.approx(2.0)
    assert got["share_of_time"] == pytest.approx(7200 / 10700)
    assert got["capacity_idle_share"] == pytest.approx(7200 * 2 / (4 * 10700))
    assert got["longest"] == [{"start_s": 100.0, "end_s": 7300.0, "idle_at_least": 2.0}]


def test_short_gaps_count_only_below_the_threshold():
    got = idle_while_waiting(log(ROWS), "req_cpus", 4.0, 0.0, 10700.0, min_duration_s=0)
    assert got["intervals"] == 2
    assert got["hours"] == pytest.approx((7200 + 60) / 3600)
    assert got["longest"][1] == {"start_s": 10600.0, "end_s": 10660.0, "idle_at_least": 4.0}


def test_the_window_clips_the_intervals():
    got = idle_while_waiting(log(ROWS), "req_cpus", 4.0, 3700.0, 10700.0)
    assert got["hours"] == pytest.approx(1.0) and got["longest"][0]["start_s"] == 3700.0


def test_a_job_that_starts_when_submitted_never_waited():
    got = idle_while_waiting(log([(0, 0, 5000, 1), (10, 10, 9000, 1)]), "req_cpus", 4.0, min_duration_s=0)
    assert got["intervals"] == 0 and got["hours"] == 0.0


def test_a_small_job_behind_an_older_large_one_is_a_reservation_not_an_outage():
    # A (3) runs 0-10000; H (4, the head) waits 100-10000; S (1) waits 200-10000 beside the idle processor: EASY
    # keeps it idle for H's reservation, so nothing is counted, however long
    rows = [(0, 0, 10000, 3), (100, 10000, 11000, 4), (200, 11000, 11500, 1)]
    got = idle_while_waiting(log(rows), "req_cpus", 4.0, min_duration_s=0)
    assert got["intervals"] == 0
    # without the head, S alone fits the idle processor for 10800 s (200 to 11000; A ends at 10000)
    got = idle_while_waiting(log([rows[0], rows[2]]), "req_cpus", 4.0)
    assert got["intervals"] == 1 and got["hours"] == pytest.approx(3.0)
