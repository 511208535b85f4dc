"""Per-file job summaries, so a writer reads only the files that can hold a job.

A file of a table keyed by job (``jobs``, ``samples``, ``job_rollup``, ``job_day_rollup``: ``INDEXED``) carries,
in its Parquet key-value metadata, written with the file (hence in the same commit, never out of step with it):

* ``quotaloop.job_ids``: the range of the file's job ids, in the order of their UTF-8 length then bytes (Slurm's
  growing numeric ids fall in narrow ranges, so a day of new jobs is ruled out of every older file by its footer
  alone), and the number and CRC-32 of the file's *key hashes*: the sorted distinct 64-bit hashes of its job ids,
  8 bytes a job, kept beside the file in ``<file>.keys`` (``sidecar``). A look-up of many keys (the RUNNING jobs
  of a snapshot move, a compaction's chunk) has no false positive but a hash collision, where a Bloom filter of
  a few bits a key would match every big file. The hashes are read only for a look-up the range cannot settle.
  They are not in the footer because every reader of the file, DuckDB's scans included, parses the whole
  footer: at 10M jobs that was hundreds of MB per ingest, and tens of ms per dashboard scan.
  The fingerprint (the hashes of ``FINGERPRINT_IDS``) tells whether the hash still is the one that built them;
* ``quotaloop.running`` (``jobs`` only): the ``(cluster, job_id)`` of its RUNNING jobs without an end (the jobs
  a snapshot move extends);
* ``quotaloop.open_rows`` (``job_rollup`` only): the ``(cluster, job_id, t_start, samples_end_s)`` of its rows
  with a run start and no run end (the open runs whose rows a snapshot move leaves as they are).

Invariants:
- No false negative: ``may_hold(path, ids)`` is False only when no id of ``ids`` is a ``job_id`` of the file,
  whatever the cluster (the summary is over job ids alone; a partition directory holds one cluster). A file
  without a summary (written before it existed, or by another tool), with one that does not parse, whose
  sidecar is missing or does not match the footer's count and CRC, or built by a hash that no longer gives the
  recorded fingerprint may hold anything: True (but for the range, which depends on no hash).
- ``running(path)`` is None when the file records nothing (the caller scans it), else exactly its RUNNING jobs
  without an end; ``open_rows(path)`` likewise for its rows with a ``t_start`` and no ``t_end``.
- The sidecar is written (fsynced, renamed into place) before its Parquet file, and the store's writer treats
  the pair as one file: committed, retired and collected together (``queries.store.store``).
A false positive only costs a read: every caller then looks at the file's rows themselves. Files written with
the summary's previous form (``"v": 2``: the hashes base64 in the footer) are still read.
"""
from __future__ import annotations

import base64
import functools
import json
import os
import zlib
from collections import OrderedDict
from pathlib import Path

import numpy as np
import polars as pl

from . import schema

INDEXED = ("jobs", "samples", "job_rollup", "job_day_rollup")
IDS_KEY = "quotaloop.job_ids"
RUNNING_KEY = "quotaloop.running"
OPEN_ROWS_KEY = "quotaloop.open_rows"
SIDECAR_SUFFIX = ".keys"
_VERSION = 3
_RUNNING_SCHEMA = {"cluster": pl.String, "job_id": pl.String}
_OPEN_ROWS_SCHEMA = {"cluster": pl.String, "job_id": pl.String, "t_start": pl.Float64, "samples_end_s": pl.Float64}
FINGERPRINT_IDS = ["quotaloop", "0", "123_4", "job-\u00e9"]
_SEED = 20261202
_CACHE_BYTES = 256 << 20  # parsed summaries kept per process (by path, size and mtime), up to this many bytes
_cache: OrderedDict[tuple, dict | None] = OrderedDict()
_UNREAD = object()  # a summary's hashes not read yet (in the sidecar)


def _hashes(ids: pl.Series) -> np.ndarray:
    return ids.cast(pl.String).hash(seed=_SEED).to_numpy().astype(np.uint64, copy=False)


@functools.cache
def _fingerprint() -> list[str]:
    return [str(h) for h in _hashes(pl.Series(FINGERPRINT_IDS, dtype=pl.String))]


def _order_key(job_id: str) -> tuple[int, str]:
    # UTF-8 length first: "999" < "1000", as the numbers; then code points, which order as UTF-8 bytes do
    return len(job_id.encode()), job_id


def _range(ids: pl.Series) -> list[str] | None:
    """The least and greatest of ``ids`` (String, no null) in ``_order_key``'s order; None when empty."""
    if not ids.len():
        return None
    n = ids.str.len_bytes()
    return [ids.filter(n == n.min()).min(), ids.filter(n == n.max()).max()]


def sidecar(path: str | os.PathLike) -> Path:
    """Where the key hashes of the Parquet file at ``path`` are kept."""
    return Path(f"{os.fspath(path)}{SIDECAR_SUFFIX}")


def footer(df: pl.DataFrame, table: str, path: str | os.PathLike) -> dict[str, str] | None:
    """The summary to write into the footer of the file of ``table`` that will hold ``df`` at ``path`` (None for a
    table that has none), once its key hashes are written, durably, to ``sidecar(path)``."""
    if table not in INDEXED or "job_id" not in df.columns:
        return None
    ids = df.get_column("job_id").drop_nulls().cast(pl.String)
    raw = np.unique(_hashes(ids)).astype("<u8").tobytes()
    keys = sidecar(path)
    tmp = keys.with_name(keys.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, keys)
    meta = {IDS_KEY: json.dumps({"v": _VERSION, "seed": _SEED, "fingerprint": _fingerprint(),
                                 "n": len(raw) // 8, "crc32": zlib.crc32(raw), "range": _range(ids)})}
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
    """The parsed summary of the file at ``path`` (None: none usable), cached by path, size and mtime. Its
    ``hashes`` are ``_UNREAD`` until ``_held`` reads them from the sidecar."""
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
        if raw and raw.get("v") in (2, _VERSION):
            trusted = raw.get("seed") == _SEED and raw.get("fingerprint") == _fingerprint()
            out = {"path": str(path), "v": raw["v"], "trusted": trusted, "n": raw.get("n"), "crc32": raw.get("crc32"),
                   "range": tuple(_order_key(x) for x in raw["range"]) if raw.get("range") else None,
                   "hashes": _UNREAD if raw["v"] == _VERSION else (
                       _checked(np.frombuffer(base64.b64decode(raw["hashes"]), dtype="<u8")) if trusted else None),
                   **{name: json.loads(meta[k]) if k in meta else None
                      for name, k in (("running", RUNNING_KEY), ("open_rows", OPEN_ROWS_KEY))}}
            if raw["v"] == _VERSION and not (isinstance(out["n"], int) and isinstance(out["crc32"], int)):
                raise ValueError("no hash count or CRC")
            # kept as frames: a snapshot move asks every file for them
            if out["running"] is not None:
                out["running"] = pl.DataFrame(out["running"], schema=_RUNNING_SCHEMA, orient="row")
            if out["open_rows"] is not None:
                out["open_rows"] = pl.DataFrame(out["open_rows"], schema=_OPEN_ROWS_SCHEMA)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pl.exceptions.PolarsError):
        out = None
    _cache[key] = out
    _evict()
    return out


def _evict() -> None:
    while len(_cache) > 1 and sum(v["hashes"].nbytes for v in _cache.values()
                                  if v and isinstance(v["hashes"], np.ndarray)) > _CACHE_BYTES:
        _cache.popitem(last=False)


def _checked(hashes: np.ndarray) -> np.ndarray:
    hashes = hashes.astype(np.uint64)
    if hashes.size > 1 and not (hashes[1:] > hashes[:-1]).all():
        raise ValueError("hashes not sorted")
    return hashes


def _held(summary: dict) -> np.ndarray | None:
    """The file's key hashes (None: not usable, the file may hold anything), read from its sidecar once."""
    if summary["hashes"] is _UNREAD:
        hashes = None
        if summary["trusted"]:
            try:
                raw = sidecar(summary["path"]).read_bytes()
                if len(raw) == 8 * summary["n"] and zlib.crc32(raw) == summary["crc32"]:
                    hashes = _checked(np.frombuffer(raw, dtype="<u8"))
            except (OSError, ValueError):
                pass
        summary["hashes"] = hashes
        _evict()
    return summary["hashes"]


def is_current(path: str | os.PathLike) -> bool:
    """Whether the file's summary is in its current form and usable, its sidecar included (else ``rollup
    --rebuild`` rewrites the file: one without a summary is read whenever a job is looked for, one with the
    hashes in its footer costs every reader of it a parse of them)."""
    summary = _summary(path)
    return summary is not None and summary["v"] == _VERSION and _held(summary) is not None


class Probe:
    """The distinct job ids of a look-up, their hashes and their order, computed once for probing many files
    (``may_hold``)."""

    def __init__(self, ids: pl.Series):
        self._ids = ids.drop_nulls().cast(pl.String)
        self.hashes = np.unique(_hashes(self._ids))
        self._by_len: dict[int, pl.Series] | None = None

    def any_within(self, lo: tuple[int, str], hi: tuple[int, str]) -> bool:
        """Whether an id lies in ``[lo, hi]`` (``_order_key``'s order)."""
        if self._by_len is None:  # the ids sorted by bytes, per UTF-8 length (a few lengths, however many ids)
            ids = self._ids.unique().sort()
            self._by_len = {n: ids.filter(ids.str.len_bytes() == n) for n in ids.str.len_bytes().unique().to_list()}
        for n, ids in self._by_len.items():
            if not lo[0] <= n <= hi[0]:
                continue
            at = ids.search_sorted(lo[1], side="left") if n == lo[0] else 0
            if at < ids.len() and (n < hi[0] or ids[at] <= hi[1]):
                return True
        return False


def may_hold(path: str | os.PathLike, ids: pl.Series | Probe) -> bool:
    """False only when the file at ``path`` certainly holds none of the job ids ``ids`` (a ``Probe`` of them when
    many files are probed with the same ids)."""
    summary = _summary(path)
    if summary is None:
        return True
    probe = ids if isinstance(ids, Probe) else Probe(ids)
    if not probe.hashes.size:
        return False
    if summary["range"] is None and summary["n"] == 0:  # no job id at all
        return False
    if summary["range"] is not None and not probe.any_within(*summary["range"]):
        return False
    held = _held(summary)
    if held is None:
        return True
    if not held.size:
        return False
    at = np.searchsorted(held, probe.hashes).clip(max=held.size - 1)
    return bool((held[at] == probe.hashes).any())


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


def scan_keyed(path: str | os.PathLike, keys: pl.DataFrame) -> pl.LazyFrame:
    """The rows of the file at ``path`` whose ``(cluster, job_id)`` is in ``keys``. The ids' range (plain string
    order) is a filter first: a file is sorted by job id, so the reader skips the row groups outside it by their
    statistics, and a comparison costs less than a set look-up for the rows inside; then the ids themselves, so
    the other columns are decoded only for the rows that pass; the semi-join makes it exact."""
    ids = keys.get_column("job_id").cast(pl.String).unique()
    job_id = pl.col("job_id").cast(pl.String)
    return (pl.scan_parquet(path)
            .filter(job_id.is_between(pl.lit(ids.min(), pl.String), pl.lit(ids.max(), pl.String))
                    & job_id.is_in(ids.implode()))
            .join(keys.lazy(), on=["cluster", "job_id"], how="semi"))


def read_keyed(files: list[str], table: str, keys: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``table``'s ``files`` whose ``(cluster, job_id)`` is in ``keys``, conformed to the table's
    schema. Only the files whose summary says they may hold one of them are read (a new job's samples may sit in
    any older file, and the summaries say which), each by ``scan_keyed``."""
    probe = Probe(keys.get_column("job_id"))
    parts = [schema.conform(scan_keyed(f, keys).collect(), table)
             for f in files if keys.height and may_hold(f, probe)]
    return pl.concat(parts) if parts else schema.empty(table)

