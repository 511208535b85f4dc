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
- Same commit, incremental = rebuild: ``refresh`` re-derives the cells keyed by the (cluster, submit month, user,
  account) of the jobs the rollup refresh re-derived (before and after), from the jobs of those keys, from the
  store as the transaction will commit it, and rewrites the files holding those keys' users' cells with their
  other cells as they were (``cells.refresh``).
- A RUNNING job without an end is in no cell (the queries derive it per job, ``sql/_cube.sql``): its run end is
  its cluster's snapshot, which every ingest moves, and a cell holding it would have to be re-derived at every
  ingest (when such cells lived in a partition of their own, re-deriving them cost a daily ingest into a 3M-job
  store 4.6x the same day into an empty store, growing with the store's RUNNING jobs). A cube written when they
  had cells (``cells.legacy``) is not read by the queries, and its next refresh rebuilds it, once.
- Compaction's rollup refresh re-derives the months whose samples it coarsened, as an ingest's does.
"""
from __future__ import annotations

import functools

import polars as pl

from ..store import keyindex, schema
from . import cells

TABLE = "usage_cube"
QUERY = "_usage_cube"
# the tables a month's cells are derived from, each partitioned by the job's submit month as the cube is
_SOURCES = ("jobs", "job_rollup")


def _sources(tx, months: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """``jobs`` and ``job_rollup`` of the month partitions ``months``."""
    out = {}
    for table in _SOURCES:
        frames = cells.month_rows(tx, table, months)
        out[table] = pl.concat(frames).unique(["cluster", "job_id"]) if frames else schema.empty(table)
    return out


def derive(tx, months: pl.DataFrame | None = None, threads: int | None = None) -> pl.DataFrame:
    """The ``usage_cube`` rows of the partitions ``months`` (cluster, month; None: every job) of the store as ``tx``
    would commit it."""
    extra = _sources(tx, months) if months is not None else {}
    rows = cells.derive_cells(tx, TABLE, QUERY, extra, threads=threads)
    return rows if months is None else cells.only(rows, months)


def _write(tx, rows: pl.DataFrame, months: pl.DataFrame) -> None:
    cells.write(tx, TABLE, rows, months)


def _derive_jobs(tx, jobs: pl.DataFrame, fresh: pl.DataFrame | None = None) -> pl.DataFrame:
    """The cells of exactly the ``jobs`` rows given (with their ``job_rollup`` rows: those of ``fresh``, the rows
    the rollup refresh is writing, and the others read from the files that may hold them), for
    ``cells.refresh``."""
    keys = jobs.select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
    fresh = (schema.conform(fresh, "job_rollup").join(keys, on=cells.KEYS, how="semi")
             if fresh is not None and fresh.height else schema.empty("job_rollup"))
    rest = keys.join(fresh.select(cells.KEYS), on=cells.KEYS, how="anti")
    rolled = keyindex.read_keyed([str(tx.store.root / r) for r in tx.tables.get("job_rollup", [])], "job_rollup", rest)
    return cells.derive_cells(tx, TABLE, QUERY, {"jobs": jobs, "job_rollup": pl.concat([fresh, rolled])})


def refresh(tx, scoped: cells.Scope, fresh: pl.DataFrame | None = None) -> int:
    """Re-derive the cells ``scoped`` (``cells.Scope``: those of the jobs whose rollup rows a refresh re-derived),
    or the whole cube when it was written with cells of RUNNING jobs (``cells.refresh``); the number of cells
    written. ``fresh``: ``job_rollup`` rows the transaction is writing (the refresh takes them from there, not
    from the files). A job that is an open run before and after the transaction is in no cell: its key is not
    re-derived for it (``cells.Scope.closed``)."""
    return cells.refresh(tx, TABLE, scoped.closed, functools.partial(_derive_jobs, fresh=fresh), rebuild)


def rebuild(tx, threads: int | None = None) -> int:
    """Re-derive the whole cube of ``tx``'s store (inside ``rollup.rebuild``'s transaction), one partition at a
    time as a refresh derives it (one month's jobs in memory, not the store's); the cells written."""
    return cells.rebuild(tx, TABLE, derive, _write, threads)
