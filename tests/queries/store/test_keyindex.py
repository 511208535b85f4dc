"""The job summaries in the footer of every keyed store file (``queries.store.keyindex``): never a false negative,
no false positive but a hash collision, a file without one (or built by another hash) may hold anything, the RUNNING jobs listed
exactly; and an ingest of new jobs leaves every older file of the store as it was."""
from __future__ import annotations

import base64
import datetime as dt
import json

import numpy as np
import polars as pl
import pytest

from queries.analytics import rollup
from queries.ingest import ingest
from queries.store import Store, keyindex

UTC = dt.timezone.utc


def _file(tmp_path, df: pl.DataFrame, table: str, name: str = "f.parquet") -> str:
    path = tmp_path / name
    df.write_parquet(path, metadata=keyindex.footer(df, table, path))
    return str(path)


def test_no_false_negative_and_no_false_positive(tmp_path):
    rng = np.random.default_rng(7)
    ids = [str(x) for x in rng.choice(10**9, size=20_000, replace=False)]
    path = _file(tmp_path, pl.DataFrame({"cluster": ["c"] * len(ids), "job_id": ids}), "samples")
    # every id of the file is found, one at a time and all together
    assert all(keyindex.may_hold(path, pl.Series([i])) for i in ids[:2000])
    assert keyindex.may_hold(path, pl.Series(ids))
    others = [f"x{i}" for i in range(20_000)]
    # 64-bit hashes: a false positive needs a collision (about 20,000^2 / 2^64 here)
    assert not any(keyindex.may_hold(path, pl.Series([o])) for o in others[:2000])
    assert not keyindex.may_hold(path, pl.Series(others))
    assert not keyindex.may_hold(path, pl.Series([], dtype=pl.String))


def test_a_file_without_a_usable_summary_may_hold_anything(tmp_path, monkeypatch):
    df = pl.DataFrame({"cluster": ["c", "c"], "job_id": ["1", "3"]})
    plain = tmp_path / "plain.parquet"
    df.write_parquet(plain)
    assert keyindex.may_hold(plain, pl.Series(["2"])) and keyindex.running(plain) is None
    assert not keyindex.is_current(plain)
    indexed = _file(tmp_path, df, "jobs", "indexed.parquet")
    assert keyindex.is_current(indexed)
    assert not keyindex.may_hold(indexed, pl.Series(["2"]))
    # a Polars whose hash no longer gives the recorded fingerprint: the hashes are not trusted, the range still is
    monkeypatch.setattr(keyindex, "_fingerprint", lambda: ["0", "0", "0", "0"])
    keyindex._cache.clear()
    assert keyindex.may_hold(indexed, pl.Series(["2"])) and not keyindex.may_hold(indexed, pl.Series(["4"]))
    assert not keyindex.is_current(indexed)
    monkeypatch.undo()
    # a sidecar that is missing, cut short or not the one the footer describes: the same
    keys = keyindex.sidecar(indexed)
    good = keys.read_bytes()
    for bad in (None, good[:8], good[8:] + good[:8]):
        keyindex._cache.clear()
        keys.unlink() if bad is None else keys.write_bytes(bad)
        assert keyindex.may_hold(indexed, pl.Series(["2"])) and not keyindex.may_hold(indexed, pl.Series(["0"]))
        assert not keyindex.is_current(indexed)
    keyindex._cache.clear()
    # a footer another tool rewrote: a range that is not two ids
    meta = pl.read_parquet_metadata(indexed)
    bad = json.loads(meta[keyindex.IDS_KEY]) | {"range": [1, 3]}
    df.write_parquet(indexed, metadata=meta | {keyindex.IDS_KEY: json.dumps(bad)})
    assert keyindex.may_hold(indexed, pl.Series(["4"])) and keyindex.running(indexed) is None
    keyindex._cache.clear()


def test_the_footer_is_small_and_the_range_settles_new_ids_without_the_hashes(tmp_path, monkeypatch):
    """Every reader of a file parses its whole footer (DuckDB's scans too): the 8 bytes a job are beside it."""
    ids = [str(x) for x in range(1_000_000, 1_050_000)]
    path = _file(tmp_path, pl.DataFrame({"cluster": ["c"] * len(ids), "job_id": ids}), "samples")
    meta = pl.read_parquet_metadata(path)
    assert len(meta[keyindex.IDS_KEY]) < 500
    assert keyindex.sidecar(path).stat().st_size == 8 * len(ids)
    keyindex._cache.clear()
    read = []
    monkeypatch.setattr(keyindex, "_held", lambda summary: read.append(summary) or None)
    # the next ids (longer, or as long and greater) and shorter ones: ruled out by the footer alone
    assert not keyindex.may_hold(path, pl.Series(["1050000", "10000000", "999999", "0", "a"]))
    assert read == []
    assert keyindex.may_hold(path, pl.Series(["1049999x", "1000000"]))  # in range: the hashes would be read
    assert len(read) == 1
    keyindex._cache.clear()


@pytest.mark.parametrize("seed", range(5))
def test_the_range_check_agrees_with_a_plain_comparison(tmp_path, seed):
    """Ids of mixed lengths and scripts: a probe is ruled out by the range exactly when no id of it lies between
    the file's least and greatest id in (UTF-8 length, bytes) order, computed here in Python."""
    rng = np.random.default_rng(seed)
    alphabet = list("0123456789_-ab") + ["\u00e9", "\u4e2d", "\U0001f600"]

    def some(n):
        return ["".join(rng.choice(alphabet, size=int(rng.integers(1, 6)))) for _ in range(n)]

    def order(x):
        return len(x.encode()), x.encode()

    held = some(40)
    lo, hi = min(held, key=order), max(held, key=order)
    keyindex._cache.clear()
    summary = keyindex._summary(_file(tmp_path, pl.DataFrame({"job_id": held}), "samples"))
    assert summary["range"] == ((len(lo.encode()), lo), (len(hi.encode()), hi))
    for _ in range(300):
        probe = some(int(rng.integers(1, 4)))
        within = any(order(lo) <= order(x) <= order(hi) for x in probe)
        assert keyindex.Probe(pl.Series(probe)).any_within(*summary["range"]) == within, probe


@pytest.mark.parametrize("seed", range(3))
def test_a_keyed_read_returns_exactly_the_rows_of_its_keys(tmp_path, seed):
    """Over row groups the ids' range skips (a file sorted by job id, as the store writes them), ids of mixed
    lengths (their string range is wide), and a key whose job id is in the file under another cluster."""
    rng = np.random.default_rng(seed)
    n = 5_000
    rows = pl.DataFrame({"cluster": rng.choice(["a", "b"], size=n).tolist(),
                         "job_id": [str(x) for x in rng.integers(1, 10**int(rng.integers(2, 7)), size=n)],
                         "v": np.arange(n, dtype=np.float64)}).sort("job_id")
    path = tmp_path / "rows.parquet"
    rows.write_parquet(path, row_group_size=256, metadata=keyindex.footer(rows, "samples", path))
    keys = pl.concat([rows.sample(40, seed=seed).select("cluster", "job_id"),
                      pl.DataFrame({"cluster": ["z", "a"], "job_id": [rows["job_id"][0], "nope"]})]).unique()
    got = keyindex.scan_keyed(path, keys).collect().sort("v")
    assert got.height >= 40
    assert got.equals(rows.join(keys, on=["cluster", "job_id"], how="semi").sort("v"))
    read = keyindex.read_keyed([str(path)], "samples", keys)
    assert read.select("cluster", "job_id").sort("cluster", "job_id").equals(
        got.select("cluster", "job_id").sort("cluster", "job_id"))


def _day(tmp_path, k: int) -> list[str]:
    t = dt.datetime(2026, 3, 1 + k, tzinfo=UTC)
    ids = [f"{k}-{i}" for i in range(50)]
    jobs = pl.DataFrame({"cluster": ["c"] * 50, "job_id": ids, "state": ["COMPLETED"] * 50,
                         "submit": [t] * 50, "start": [t] * 50, "end": [t + dt.timedelta(hours=1)] * 50,
                         "req_cpus": [2.0] * 50})
    samples = pl.DataFrame({"cluster": ["c"] * 50, "job_id": ids, "ts": [t] * 50, "interval_s": [600.0] * 50,
                            "cpu_used": [1.0] * 50})
    paths = [tmp_path / f"jobs{k}.parquet", tmp_path / f"samples{k}.parquet"]
    jobs.write_parquet(paths[0])
    samples.write_parquet(paths[1])
    return [str(p) for p in paths]


def _v2_footer(df: pl.DataFrame, table: str, path=None) -> dict[str, str] | None:
    """The summary's previous form (``"v": 2``, written until 2026-12-07): the hashes base64 in the footer."""
    if table not in keyindex.INDEXED:
        return None
    hashes = np.unique(keyindex._hashes(df.get_column("job_id").drop_nulls())).astype("<u8").tobytes()
    meta = {keyindex.IDS_KEY: json.dumps({"v": 2, "seed": keyindex._SEED, "fingerprint": keyindex._fingerprint(),
                                          "hashes": base64.b64encode(hashes).decode()})}
    if table == "jobs":
        running = df.filter((pl.col("state") == "RUNNING") & pl.col("end").is_null())
        meta[keyindex.RUNNING_KEY] = json.dumps(running.select("cluster", "job_id").rows())
    return meta


def test_a_file_written_with_the_hashes_in_its_footer_is_still_read(tmp_path):
    ids = pl.Series(["5", "7", "12"])
    jobs = pl.DataFrame({"cluster": ["c"] * 3, "job_id": ids, "state": ["COMPLETED", "RUNNING", "COMPLETED"],
                         "end": [None] * 3}, schema_overrides={"end": pl.Datetime("us", "UTC")})
    path = tmp_path / "old.parquet"
    jobs.write_parquet(path, metadata=_v2_footer(jobs, "jobs"))
    keyindex._cache.clear()
    assert keyindex.running(path).rows() == [("c", "7")]
    assert keyindex.may_hold(path, pl.Series(["12"])) and not keyindex.may_hold(path, pl.Series(["6", "70"]))
    assert not keyindex.is_current(path)  # ``rollup --rebuild`` rewrites it with its hashes beside it


def test_a_rebuild_moves_the_hashes_of_an_older_store_out_of_its_footers(tmp_path, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setattr(keyindex, "footer", _v2_footer)
    ingest(_day(tmp_path, 0), store, fmt="parquet")
    monkeypatch.undo()
    keyindex._cache.clear()
    before = {t: Store(store).read(t).sort("job_id") for t in ("jobs", "samples", "job_rollup")}
    files = [f for t in keyindex.INDEXED for f in Store(store).files(t)]
    assert files and not any(keyindex.is_current(f) or keyindex.sidecar(f).exists() for f in files)
    rollup.rebuild(store)
    files = [f for t in keyindex.INDEXED for f in Store(store).files(t)]
    assert files and all(keyindex.is_current(f) for f in files)
    assert all(len(pl.read_parquet_metadata(f)[keyindex.IDS_KEY]) < 500 for f in files)
    for t, rows in before.items():
        assert Store(store).read(t).sort("job_id").equals(rows), t


def test_running_jobs_are_listed_exactly(tmp_path):
    t = dt.datetime(2026, 3, 1, tzinfo=UTC)
    jobs = pl.DataFrame({"cluster": ["a", "a", "b", "b"], "job_id": ["1", "2", "1", "3"],
                         "state": ["RUNNING", "RUNNING", "COMPLETED", "RUNNING"],
                         "end": [None, t, t, None]}, schema_overrides={"end": pl.Datetime("us", "UTC")})
    path = _file(tmp_path, jobs, "jobs")
    assert sorted(keyindex.running(path).rows()) == [("a", "1"), ("b", "3")]
    assert keyindex.running(_file(tmp_path, jobs, "samples", "s.parquet")) is None


def test_open_rollup_rows_are_listed_exactly(tmp_path):
    rows = pl.DataFrame({"cluster": ["a", "a", "a", "b"], "job_id": ["1", "2", "3", "1"],
                         "t_start": [10.0, 10.0, None, 0.1 + 0.2], "t_end": [None, 20.0, None, None],
                         "samples_end_s": [15.5, 18.0, None, None]})
    path = _file(tmp_path, rows, "job_rollup")
    # a row with a run start and no run end (a never-started job has neither: not an open run); floats exact
    assert sorted(keyindex.open_rows(path).rows()) == [("a", "1", 10.0, 15.5), ("b", "1", 0.1 + 0.2, None)]
    assert keyindex.open_rows(_file(tmp_path, rows, "job_day_rollup", "d.parquet")) is None
    assert keyindex.open_rows(_file(tmp_path, rows.head(0), "job_rollup", "e.parquet")).height == 0


def test_a_day_of_new_jobs_leaves_every_older_file_as_it_was(tmp_path):
    """New jobs and their samples go into new files (their keys are in no older file's summary): the older jobs,
    samples and rollup files stay live, unread but for their footers. Their answers are checked elsewhere
    (tests/queries/analytics/test_rollup.py: incremental = rebuild)."""
    store = tmp_path / "store"
    ingest(_day(tmp_path, 0), store, fmt="parquet")
    before = json.loads((store / "_manifest.json").read_text())["tables"]
    ingest(_day(tmp_path, 1), store, fmt="parquet")
    after = json.loads((store / "_manifest.json").read_text())["tables"]
    for table in ("jobs", "samples", "job_rollup", "job_day_rollup"):
        assert set(before[table]) < set(after[table]), table  # kept, and one more file beside them
    assert Store(store).read("jobs").height == 100 and Store(store).read("job_rollup").height == 100
