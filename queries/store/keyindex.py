"""Per-file job summaries kept in each Parquet file's footer, so a writer reads only the files that can hold a job.

A file of a table keyed by job (``jobs``, ``samples``, ``job_rollup``, ``job_day_rollup``: ``INDEXED``) carries,
in its Parquet key-value metadata, written with the file (hence in the same commit, never out of step with it):

* ``quotaloop.job_ids``: the sorted 64-bit hashes of the file's distinct ``job_id`` values (8 bytes a job:
  a look-up of many keys, the RUNNING jobs of a snapshot move or a compaction's chunk, has no false positive
  but a hash collision, where a Bloom filter of a few bits a key would match every big file), and the hashes
  of ``FINGERPRINT_IDS`` under the hash it was built with;
* ``quotaloop.running`` (``jobs`` only): the ``(cluster, job_id)`` of its RUNNING jobs without an end (the jobs
  a snapshot move extends);
* ``quotaloop.open_rows`` (``job_rollup`` only): the ``(cluster, job_id, t_start, samples_end_s)`` of its rows
  with a run start and no run end (the open runs whose rows a snapshot move leaves as they are).

Invariants:
- No false negative: ``may_hold(path, ids)`` is False only when no id of ``ids`` is a ``job_id`` of the file,
  whatever the cluster (the filter is over job ids alone; a partition directory holds one cluster). A file
  without a summary (written before it existed, or by another tool), with one that does not parse, or built by a
  hash that no longer gives the recorded fingerprint (another Polars version) may hold anything: True.
- ``running(path)`` is None when the file records nothing (the caller scans it), else exactly its RUNNING jobs
  without an end; ``open_rows(path)`` likewise for its rows with a ``t_start`` and no ``t_end``.
A false positive only costs a read: every caller then looks at the file's rows themselves.
"""
from __future__ import annotations

import base64
import functools
import json
import os
from collections import OrderedDict

import numpy as np
import polars as pl

INDEXED = ("jobs", "samples", "job_rollup", "job_day_rollup")
IDS_KEY = "quotaloop.job_ids"
RUNNING_KEY = "quotaloop.running"
OPEN_ROWS_KEY = "quotaloop.open_rows"
_RUNNING_SCHEMA = {"cluster": pl.String, "job_id": pl.String}
_OPEN_ROWS_SCHEMA = {"cluster": pl.String, "job_id": pl.String, "t_start": pl.Float64, "samples_end_s": pl.Float64}
FINGERPRINT_IDS = ["quotaloop", "0", "123_4", "job-\u00e9"]
_SEED = 20261202
_CACHE_BYTES = 256 << 20  # parsed summaries kept per process (by path, size and mtime), up to this many bytes
_cache: OrderedDict[tuple, dict | None] = OrderedDict()


def _hashes(ids: pl.Series) -> np.ndarray:
    return ids.cast(pl.String).hash(seed=_SEED).to_numpy().astype(np.uint64, copy=False)


@functools.cache
def _fingerprint() -> list[str]:
    return [str(h) for h in _hashes(pl.Series(FINGERPRINT_IDS, dtype=pl.String))]


def footer(df: pl.DataFrame, table: str) -> dict[str, str] | None:
    """The summary to write into a file of ``table`` holding ``df`` (None for a table that has none)."""
    if table not in INDEXED or "job_id" not in df.columns:
        return None
    hashes = np.unique(_hashes(df.get_column("job_id").drop_nulls()))
    meta = {IDS_KEY: json.dumps({"v": 2, "seed": _SEED, "fingerprint": _fingerprint(),
                                 "hashes": base64.b64encode(hashes.astype("<u8").tobytes()).decode()})}
    if table == "jobs" and {"state", "end", "cluster"} <= set(df.columns):
        open_ = df.filter((pl.col("state") == "RUNNING") & pl.col("end").is_null()).select(
            pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
        meta[RUNNING_KEY] = json.dumps(open_.rows())
    if table == "job_rollup" and set(_OPEN_ROWS_SCHEMA) | {"t_end"} <= set(df.columns):
        open_ = df.filter(pl.col("t_start").is_not_null() & pl.col("t_end").is_null()).select(
            pl.col(c).cast(t) for c, t in _OPEN_ROWS_SCHEMA.items())
        meta[OPEN_ROWS_KEY] = json.dumps(open_.to_dict(as_series=False))  # by column: read back in one go
    return meta


def _summary(path: str | os.PathLike) -> dict | None:
    """The parsed summary of the file at ``path`` (None: none usable), cached by path, size and mtime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    out = None
    try:
        meta = pl.read_parquet_metadata(path)
        raw = json.loads(meta[IDS_KEY]) if IDS_KEY in meta else None
        if raw and raw.get("v") == 2 and raw.get("seed") == _SEED and raw.get("fingerprint") == _fingerprint():
            hashes = np.frombuffer(base64.b64decode(raw["hashes"]), dtype="<u8").astype(np.uint64)
            if hashes.size > 1 and not (hashes[1:] > hashes[:-1]).all():
                raise ValueError("hashes not sorted")
            out = {"hashes": hashes, **{name: json.loads(meta[key]) if key in meta else None
                                        for name, key in (("running", RUNNING_KEY), ("open_rows", OPEN_ROWS_KEY))}}
            # kept as frames: a snapshot move asks every file for them
            if out["running"] is not None:
                out["running"] = pl.DataFrame(out["running"], schema=_RUNNING_SCHEMA, orient="row")
            if out["open_rows"] is not None:
                out["open_rows"] = pl.DataFrame(out["open_rows"], schema=_OPEN_ROWS_SCHEMA)
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        out = None
    _cache[key] = out
    while len(_cache) > 1 and sum(v["hashes"].nbytes for v in _cache.values() if v) > _CACHE_BYTES:
        _cache.popitem(last=False)
    return out


def has_summary(path: str | os.PathLike) -> bool:
    return _summary(path) is not None


class Probe:
    """The sorted distinct hashes of a set of job ids, computed once for probing many files (``may_hold``)."""

    def __init__(self, ids: pl.Series):
        self.hashes = np.unique(_hashes(ids.drop_nulls()))


def may_hold(path: str | os.PathLike, ids: pl.Series | Probe) -> bool:
    """False only when the file at ``path`` certainly holds none of the job ids ``ids`` (a ``Probe`` of them when
    many files are probed with the same ids)."""
    summary = _summary(path)
    if summary is None:
        return True
    probe = (ids if isinstance(ids, Probe) else Probe(ids)).hashes
    held = summary["hashes"]
    if not probe.size or not held.size:
        return False
    at = np.searchsorted(held, probe).clip(max=held.size - 1)
    return bool((held[at] == probe).any())


def running(path: str | os.PathLike) -> pl.DataFrame | None:
    """The ``(cluster, job_id)`` of the RUNNING jobs without an end in the ``jobs`` file at ``path``; None when
    the file does not record them."""
    summary = _summary(path)
    return None if summary is None else summary["running"]


def open_rows(path: str | os.PathLike) -> pl.DataFrame | None:
    """The ``(cluster, job_id, t_start, samples_end_s)`` of the rows with a run start and no run end of the
    ``job_rollup`` file at ``path``; None when the file does not record them."""
    summary = _summary(path)
    return None if summary is None else summary["open_rows"]
