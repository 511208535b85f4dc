"""The per-job account codes of ``engine.workload.Workload`` and ``engine.attainment.Spans`` come from Polars'
dense rank (no Python lookup per job): they must equal the index of each account in ``sorted`` unique accounts,
the dict lookup they replaced, on any strings (non-ASCII, empty, nulls, one account, none)."""
from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from engine import Cluster, attainment
from engine.workload import prepare
from engine.pool import Pool
from engine.run import load_cluster

ALPHABET = ["a", "b", "Z", "é", "ß", "日", "😀", " ", "-", "0", "swf/group1", "swf/group10", "swf/group2"]


def _old_codes(values: list) -> list[int]:
    index = {a: k for k, a in enumerate(sorted(set(values)))}
    return [index[a] for a in values]


def _accounts(rng: random.Random, n: int) -> list:
    pool = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(1, 12))]
    return [None if rng.random() < 0.1 else rng.choice(pool) for _ in range(n)]


def _jobs(accounts: list) -> pl.DataFrame:
    n = len(accounts)
    return pl.DataFrame({
        "job_id": [str(k) for k in range(n)], "account": pl.Series(accounts, dtype=pl.String),
        "submit": [float(k) for k in range(n)], "start": [float(k) + 1 for k in range(n)],
        "end": [float(k) + 5 for k in range(n)], "elapsed_s": [4.0] * n, "state": ["COMPLETED"] * n,
        "alloc_cpus": [1.0] * n, "req_cpus": [1.0] * n, "time_limit_s": [10.0] * n,
    })


@pytest.mark.parametrize("seed", range(25))
def test_spans_account_codes_equal_the_sorted_index(seed):
    rng = random.Random(seed)
    accounts = _accounts(rng, rng.randint(0, 60))
    spans = attainment.Spans(_jobs(accounts), "cpus")
    filled = ["" if a is None else a for a in accounts]
    assert spans.accounts == sorted(set(filled))
    assert spans.acct.tolist() == _old_codes(filled)
    assert spans.acct.dtype == np.int64


def test_spans_running_and_pending_as_strings_compared():
    jobs = _jobs(["a", "b", "c", "d"]).with_columns(
        pl.Series("state", ["RUNNING", "PENDING", None, "running"], dtype=pl.String))
    spans = attainment.Spans(jobs, "cpus")
    assert spans.running.tolist() == [True, False, False, False]
    assert spans.pending.tolist() == [False, True, False, False]
    no_state = attainment.Spans(jobs.drop("state"), "cpus")
    assert no_state.running.tolist() == no_state.pending.tolist() == [False] * 4


@pytest.mark.parametrize("seed", range(15))
def test_workload_account_codes_equal_the_sorted_index(seed):
    rng = random.Random(100 + seed)
    accounts = _accounts(rng, rng.randint(1, 60))
    wl = prepare(_jobs(accounts), Pool(load_cluster(Cluster.procs(4))))
    kept = wl.frame["account"].cast(pl.String).fill_null("(none)").to_list()
    assert wl.accounts == sorted(set(kept))
    assert wl.acct == _old_codes(kept)
    assert all(type(a) is int for a in wl.acct)
