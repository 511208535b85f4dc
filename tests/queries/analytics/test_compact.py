"""Retention: ``queries.analytics.compact`` replaces old raw samples by hourly ones and no query answer changes
(on windows, buckets and periods of whole hours), the rollup stays what a rebuild gives, and it is atomic."""
from __future__ import annotations

import datetime as dt
import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from queries.analytics import compact, load, rollup, run
from queries.ingest import ingest
from queries.store import Store

from test_queries_random import random_store
from test_rollup import _raw  # the query answered from the samples alone (the rollup hidden)

UTC = dt.timezone.utc
KEYS = ["cluster", "job_id"]
COUNTS = ["n_samples", "n_cpu", "n_gpu", "n_mem"]
STORED = [*COUNTS, "samples_end_s"]  # what describes the stored rows, not the usage: compaction changes them


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    # the queries clip intervals in epoch seconds (~1.8e9: a float's last bit is 2.4e-7 s), and a coarse sample
    # has two interval ends where its raw samples had many: integrals agree to that rounding, not to the bit
    assert_frame_equal(a, b, check_exact=False, rel_tol=1e-8, abs_tol=1e-5)


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, UTC)


# ------------------------------------------------------------------ a hand-computed job
def test_hand_computed_hour(tmp_path):
    """One job on 2 CPUs, 10:20-10:50, four 10-min samples from 10:10 (one before its start, one capped):
    one hourly sample at 10:20 for 1800 s with the capped mean, a zero-length one with the peaks at 10:10."""
    day = 1_700_006_400.0  # a UTC midnight
    h10 = day + 10 * 3600
    jobs = pl.DataFrame({"cluster": ["c"], "job_id": ["1"], "user": ["u"], "account": ["a"], "state": ["COMPLETED"],
                         "submit": [_ts(h10)], "start": [_ts(h10 + 1200)], "end": [_ts(h10 + 3000)],
                         "elapsed_s": [1800.0], "req_cpus": [2.0], "req_mem_bytes": [8e9]})
    samples = pl.DataFrame({"cluster": ["c"] * 4, "job_id": ["1"] * 4,
                            "ts": [_ts(h10 + 600 + 600 * k) for k in range(4)], "interval_s": [600.0] * 4,
                            "cpu_used": [1.9, 1.0, 3.0, 0.5], "mem_bytes": [1e9, 2e9, 4e9, None]})
    with Store(tmp_path).transaction() as tx:
        tx.upsert("jobs", jobs)
        tx.upsert("samples", samples)
        tx.record_snapshot("c", _ts(day + 5 * 86400))
    rollup.rebuild(tmp_path)
    before = Store(tmp_path).read("job_rollup")
    done = compact.compact(tmp_path, compact.parse_keep("1d"))
    assert (done.read, done.replaced, done.kept, done.coarse, done.peaks) == (4, 4, 0, 1, 2)
    got = Store(tmp_path).read("samples").sort("ts", "interval_s")
    # 10:10 sample is outside the run (zero overlap): replaced, its peak kept by the zero-length sample
    assert got["interval_s"].to_list() == [0.0, 1800.0, 0.0]
    coarse = got.row(1, named=True)
    assert coarse["ts"] == _ts(h10 + 1200)
    # CPU: 1.0 x 600 + min(3, 2) x 600 + 0.5 x 600 = 2100 CPU-s over 1800 s
    assert coarse["cpu_used"] == pytest.approx(2100 / 1800)
    # memory: the last sample has none: (2 + 4) GB x 600 s = 3600 GB-s over 1800 s covered
    assert coarse["mem_bytes"] == pytest.approx(2e9)
    peak = got.row(0, named=True)
    assert (peak["ts"], peak["cpu_used"], peak["mem_bytes"]) == (_ts(h10 + 600), 3.0, 4e9)
    assert got.row(2, named=True)["ts"] == _ts(h10 + 2400) and got.row(2, named=True)["cpu_used"] is None
    after = Store(tmp_path).read("job_rollup")
    _same(after.drop(STORED), before.drop(STORED))
    assert after["cpu_used_s"].item() == pytest.approx(2100.0)
    assert after["mem_used_gbs"].item() == pytest.approx(3600.0)
    assert after["sampled_s"].item() == pytest.approx(1800.0)
    assert (after["peak_cpus_sampled"].item(), after["peak_mem_gb_sampled"].item()) == (3.0, 4.0)


# ------------------------------------------------------------------ random store: every query unchanged
WINDOWS = [{}, {"start": "2026-03-03", "end": "2026-03-08"}, {"end": "2026-03-06", "cluster": "east"},
           {"start": "2026-03-02", "end": "2026-03-09", "user": "u2"},  # a week
           {"start": "2026-03-04 07:00", "end": "2026-03-06 13:00"}]   # whole hours cutting days
QUERIES = ["job_waste", "user_ranking", "team_ranking", "overview", "metric_pyramid", "gaming_check",
           "quota_backtest", "gap_area", "budget_usage", "fairshare_attainment", "queue_waits", "selection_resource"]


SMALL_CHUNKS = {"CHUNK_SAMPLES": 97, "CHUNK_JOBS": 13}  # many chunks on a small store


def _compact_in_chunks(store, keep: str, samples: int, jobs: int) -> compact.Compaction:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compact, "CHUNK_SAMPLES", samples)
        mp.setattr(rollup, "CHUNK_JOBS", jobs)
        return compact.compact(store, compact.parse_keep(keep))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """(the random store with its rollup, the same store compacted to 2 days before its snapshots), compacted in
    chunks of ~97 samples and a refresh of 13 jobs at a time, so every test below holds for the chunked path."""
    before = random_store(tmp_path_factory.mktemp("compact_before"), seed=11)
    rollup.rebuild(before)
    after = tmp_path_factory.mktemp("compact_after") / "store"
    shutil.copytree(before, after)
    done = _compact_in_chunks(after, "2d", SMALL_CHUNKS["CHUNK_SAMPLES"], SMALL_CHUNKS["CHUNK_JOBS"])
    assert done.replaced > 300 and done.coarse > 100  # not vacuous: most samples were rolled up
    assert done.read == done.kept + done.replaced
    return before, after


def _params(name, params):
    takes = {p.name for p in load(name).params}
    return {k: v for k, v in params.items() if k in takes}


@pytest.mark.parametrize("params", WINDOWS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "all")
@pytest.mark.parametrize("name", QUERIES)
def test_queries_unchanged_by_compaction(stores, name, params):
    before, after = stores
    params = _params(name, params)
    _same(run(name, after, **params), run(name, before, **params))
    # and from the samples alone: the coarse samples themselves integrate to the raw figures
    _same(_raw(name, after, **params), _raw(name, before, **params))


@pytest.mark.parametrize("params", [{"bucket_s": 3600}, {"bucket_s": 86400, "group_by": "user"},
                                    {"bucket_s": 7 * 86400, "resource": "cpu"}, {"bucket_s": 4 * 3600,
                                                                                 "resource": "mem"}])
def test_gap_area_buckets_of_whole_hours_unchanged(stores, params):
    before, after = stores
    _same(_raw("gap_area", after, **params), _raw("gap_area", before, **params))


@pytest.mark.parametrize("period_s", [3600, 86400, 7 * 86400])
def test_quota_backtest_periods_unchanged(stores, period_s):
    before, after = stores
    _same(run("quota_backtest", after, period_s=period_s), run("quota_backtest", before, period_s=period_s))


@pytest.mark.parametrize("name,params", [("user_summary", {"user": "u3"}),
                                         ("user_low_efficiency_jobs", {"user": "u3", "start": "2026-03-04"})])
def test_per_user_queries_unchanged(stores, name, params):
    before, after = stores
    _same(run(name, after, **params), run(name, before, **params))
    _same(_raw(name, after, **params), _raw(name, before, **params))


def test_window_bounds_keep_first_and_last_sample_times(stores):
    before, after = stores
    a, b = run("window_bounds", after), run("window_bounds", before)
    _same(a.drop("samples"), b.drop("samples"))
    assert (a["samples"] < b["samples"]).all()  # the one figure that changes: stored rows


def test_rollup_unchanged_but_for_counts_and_rebuild_equal(stores, tmp_path):
    before, after = stores
    rows_b = Store(before).read("job_rollup").sort(KEYS)
    rows_a = Store(after).read("job_rollup").sort(KEYS)
    _same(rows_a.drop(STORED), rows_b.drop(STORED))
    for c in COUNTS:  # the queries only ask "has samples" of a count
        assert ((rows_a[c] > 0) == (rows_b[c] > 0)).all()
    days_b = Store(before).read("job_day_rollup").sort([*KEYS, "day_s"])
    _same(Store(after).read("job_day_rollup").sort([*KEYS, "day_s"]), days_b)
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(after, rebuilt)
    rollup.rebuild(rebuilt)
    _same(Store(rebuilt).read("job_rollup").sort(KEYS), rows_a)
    _same(Store(rebuilt).read("job_day_rollup").sort([*KEYS, "day_s"]),
          Store(after).read("job_day_rollup").sort([*KEYS, "day_s"]))


def test_chunks_give_what_one_chunk_gives(stores, tmp_path):
    """The same store compacted in one chunk (the whole partition, every changed job refreshed at once): the same
    samples, rollup, day rows and counts as the chunked compaction of the fixture."""
    before, after = stores
    whole = tmp_path / "whole"
    shutil.copytree(before, whole)
    one = _compact_in_chunks(whole, "2d", 10**9, 10**9)
    chunked = _compact_in_chunks(shutil.copytree(before, tmp_path / "chunked"), "2d", 97, 13)
    assert one == chunked
    order = KEYS + ["ts", "interval_s", "source"]
    _same(Store(whole).read("samples").sort(order), Store(after).read("samples").sort(order))
    _same(Store(whole).read("job_rollup").sort(KEYS), Store(after).read("job_rollup").sort(KEYS))
    _same(Store(whole).read("job_day_rollup").sort([*KEYS, "day_s"]),
          Store(after).read("job_day_rollup").sort([*KEYS, "day_s"]))
    # the chunked one did write several files a partition
    rels = [r for r in Store(after).manifest()["tables"]["samples"]]
    assert len(rels) > len({r.rsplit("/", 1)[0] for r in rels})


def test_compacting_again_changes_nothing(stores, tmp_path):
    _, after = stores
    again = tmp_path / "again"
    shutil.copytree(after, again)
    done = compact.compact(again, compact.parse_keep("2d"))
    assert (done.replaced, done.coarse, done.partitions) == (0, 0, 0)
    _same(Store(again).read("samples").sort(KEYS + ["ts", "interval_s"]),
          Store(after).read("samples").sort(KEYS + ["ts", "interval_s"]))


def test_only_old_samples_are_replaced(stores):
    before, after = stores
    snap = Store(before).snapshots()["east"]
    cutoff = dt.datetime.combine((snap - dt.timedelta(days=2)).date(), dt.time(), UTC)
    old = pl.col("ts") >= cutoff
    recent_b = Store(before).read("samples").filter(pl.col("cluster") == "east", old)
    recent_a = Store(after).read("samples").filter(pl.col("cluster") == "east", old, pl.col("source").fill_null("") != "compact")
    _same(recent_a.sort(KEYS + ["ts"]), recent_b.sort(KEYS + ["ts"]))


def test_reingest_of_an_old_job_after_compaction(stores, tmp_path):
    """Re-ingesting an old job's row (unchanged) re-derives its rollup from the coarse samples: same figures."""
    before, after = stores
    store = tmp_path / "reingest"
    shutil.copytree(after, store)
    jobs = Store(store).read("jobs")
    old = (Store(after).read("samples").filter(pl.col("source") == "compact").select(KEYS).unique()
           .join(jobs, on=KEYS).filter(pl.col("state") == "COMPLETED").head(5))
    assert old.height == 5
    path = tmp_path / "old_jobs.parquet"
    old.write_parquet(path)
    ingest([str(path)], store=str(store), fmt="parquet")
    ids = old.select(KEYS)
    rows_a = Store(store).read("job_rollup").join(ids, on=KEYS).sort(KEYS)
    rows_b = Store(before).read("job_rollup").join(ids, on=KEYS).sort(KEYS)
    _same(rows_a.drop(STORED), rows_b.drop(STORED))
    for name in ("job_waste", "user_ranking"):
        _same(run(name, store, start="2026-03-03", end="2026-03-08"), run(name, before, start="2026-03-03", end="2026-03-08"))


def test_a_failed_compaction_leaves_the_store_as_it_was(stores, tmp_path, monkeypatch):
    _, after = stores
    store = tmp_path / "failing"
    before = random_store(tmp_path / "src", seed=5)
    rollup.rebuild(before)
    shutil.copytree(before, store)
    manifest = (store / "_manifest.json").read_text()

    def broken(tx, **_):
        raise RuntimeError("disk full")

    monkeypatch.setattr(rollup, "refresh", broken)
    with pytest.raises(RuntimeError):
        compact.compact(store, compact.parse_keep("1d"))
    assert (store / "_manifest.json").read_text() == manifest
    _same(Store(store).read("samples").sort(KEYS + ["ts"]), Store(before).read("samples").sort(KEYS + ["ts"]))


@pytest.mark.parametrize("text", ["0d", "-3d", "90", "3w", "1.5d", "", "d"])
def test_bad_keep_is_refused(text):
    with pytest.raises(compact.CompactError, match="keep-samples"):
        compact.parse_keep(text)


def test_a_store_without_rollup_is_refused(tmp_path):
    store = random_store(tmp_path / "norollup", seed=2)
    with pytest.raises(compact.CompactError, match="rollup --store .* --rebuild"):
        compact.compact(store, compact.parse_keep("1d"))


# ------------------------------------------------------------------ the sample store: the dashboard's windows
SAMPLE_WINDOWS = [{}, {"start": "2026-11-02", "end": "2026-11-09"},  # a week inside the compacted part
                  {"start": "2026-11-10", "end": "2026-11-11"},      # one day across the cut-off's days
                  {"start": "2026-10-26", "end": "2026-11-23"}]      # four weeks across the cut-off
SAMPLE_QUERIES = ["job_waste", "user_ranking", "team_ranking", "overview", "metric_pyramid", "gap_area",
                  "quota_backtest", "budget_usage", "fairshare_attainment", "gaming_check"]


@pytest.fixture(scope="module")
def sample_stores(sample_store, tmp_path_factory):
    after = tmp_path_factory.mktemp("compact_sample") / "store"
    shutil.copytree(sample_store, after)
    done = compact.compact(after, compact.parse_keep("14d"))
    assert done.replaced > 100_000, done.summary()
    return sample_store, after


@pytest.mark.parametrize("params", SAMPLE_WINDOWS, ids=lambda p: ",".join(p.values()) or "all")
@pytest.mark.parametrize("name", SAMPLE_QUERIES)
def test_sample_store_queries_unchanged_by_compaction(sample_stores, name, params):
    before, after = sample_stores
    params = _params(name, params)
    _same(run(name, after, **params), run(name, before, **params))


@pytest.mark.parametrize("name", ["job_waste", "user_ranking", "gap_area"])
def test_sample_store_from_the_samples_alone_unchanged(sample_stores, name):
    before, after = sample_stores
    params = {"start": "2026-11-02", "end": "2026-11-09"}
    _same(_raw(name, after, **params), _raw(name, before, **params))
