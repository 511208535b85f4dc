"""The usage cube (store table ``usage_cube``): per-cell sums of the per-job usage figures, kept by every ingest.

A cell is the jobs of one cluster, submit month, user and account whose run interval (as ``_jobs`` stages it)
lies in the same span of whole UTC days ``[day_lo_s, day_hi_s)``; its columns are the sums of the figures
``_job_usage`` gives each of them for a window holding its whole run (requested / used / wasted CPU, GPU and
memory seconds, the requested seconds whose usage is known, job counts by usage source) plus what the rankings'
scores take per job that is not a sum: the largest job footprint and the sum and count of the legacy task
scores, at ``_scores``' default rates and time unit. The SQL is ``sql/_usage_cube.sql``. A query whose window is
whole UTC days (or open) reads the cells it holds whole instead of those jobs (``sql/_cube.sql``), as Open XDMoD
reads its aggregation tables; distinct counts stay exact because ``user`` and ``account`` are dimensions.

Invariants:
- The cube of a store is complete or absent. ``rebuild`` writes it whole (``quotaloop rollup --rebuild``); an
  ingest into a store holding one (its manifest lists the table, even empty) or into an empty store keeps it;
  an ingest into an older store with jobs but no cube writes none (the queries then derive every job).
- Same commit, incremental = rebuild: ``refresh`` re-derives every cell of each (cluster, submit month)
  partition the rollup refresh touched (the months of the jobs it re-derived or whose run end moved with a
  snapshot, before and after), from the store as the transaction will commit it, and replaces those
  partitions. A cell's jobs all live in one month partition of ``jobs`` and ``job_rollup``, so the refresh
  reads those partitions only (its cost grows with the months an ingest touches, as the jobs upsert's does).
- Compaction's rollup refresh re-derives the months whose samples it coarsened, as an ingest's does.
"""
from __future__ import annotations

import polars as pl

from ..store import connect, schema
from ..store.store import _partition_dir
from .loader import run

TABLE = "usage_cube"
QUERY = "_usage_cube"
# the tables a month's cells are derived from, each partitioned by the job's submit month as the cube is
_SOURCES = ("jobs", "job_rollup")


def _months(frame: pl.DataFrame) -> pl.DataFrame:
    """The (cluster, month) partitions of the rows of ``frame`` (columns ``cluster``, ``submit``), named as the
    store names them (``YYYY-MM``, ``unknown`` without a submit time)."""
    if not frame.height:
        return pl.DataFrame(schema={"cluster": pl.String, "month": pl.String})
    return frame.select(pl.col("cluster").cast(pl.String).fill_null("default"),
                        pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown").alias("month")).unique()


def _dir(table: str, cluster: str, month: str) -> str:
    return _partition_dir(table, cluster, month)


def maintained(tx) -> bool:
    """Whether ``tx``'s store keeps a cube: its manifest lists the table, or it held no jobs before."""
    return TABLE in tx.tables or not any(r.startswith("jobs/") for r in tx.base_files)


def derive(tx, months: pl.DataFrame | None = None, threads: int | None = None) -> pl.DataFrame:
    """The ``usage_cube`` rows of the (cluster, month) partitions ``months`` (None: every job) of the store as
    ``tx`` would commit it."""
    extra = {}
    if months is not None:
        for table in _SOURCES:
            dirs = tuple(_dir(table, c, m) + "/" for c, m in months.iter_rows())
            files = [str(tx.store.root / r) for r in tx.tables.get(table, []) if r.startswith(dirs)]
            extra[table] = (pl.concat([schema.conform(pl.read_parquet(f), table) for f in files])
                            if files else schema.empty(table))
    con = connect(pending=tx, extra=extra, threads=threads)
    con.execute("set enable_progress_bar = false")
    try:
        rows = run(QUERY, con=con)
    finally:
        con.close()
    return schema.conform(rows, TABLE)


def _write(tx, rows: pl.DataFrame, months: pl.DataFrame) -> None:
    """Replace the partitions ``months`` of the cube by ``rows`` (a partition without rows is left empty). The
    store's partition writers sort by job id, which a cell has not: the files are staged directly."""
    tx.tables.setdefault(TABLE, [])
    keyed = _months(rows).join(months, on=["cluster", "month"], how="anti")
    if keyed.height:
        raise AssertionError(f"usage_cube rows outside the partitions refreshed: {keyed.rows()[:3]}")
    for cluster, month in months.iter_rows():
        rel_dir = _dir(TABLE, cluster, month)
        tx.tables[TABLE] = [r for r in tx.tables[TABLE] if not r.startswith(rel_dir + "/")]
        part = rows.filter((pl.col("cluster").fill_null("default") == cluster)
                           & (pl.col("submit").dt.strftime("%Y-%m").fill_null("unknown") == month))
        if part.height:
            tx._write(TABLE, rel_dir, part)


def refresh(tx, changed: pl.DataFrame) -> int:
    """Re-derive the cube partitions of the jobs in ``changed`` (rows with ``cluster`` and ``submit``: the
    rollup rows a refresh wrote or replaced, old and new); the number of cells written."""
    if not maintained(tx):
        return 0
    months = _months(changed)
    if not months.height:
        return 0
    rows = derive(tx, months)
    _write(tx, rows, months)
    return rows.height


def rebuild(tx, threads: int | None = None) -> int:
    """Re-derive the whole cube of ``tx``'s store (inside ``rollup.rebuild``'s transaction); the cells written."""
    rows = derive(tx, None, threads=threads)
    tx.tables[TABLE] = []
    _write(tx, rows, _months(rows))
    return rows.height
