"""The hour cells (store table ``usage_hours``): gap_area's per-bucket sums per hour and per UTC day, kept by every ingest.

A cell is the jobs of one cluster, submit month, user and account, and one UTC hour (``grain_s`` 3600) or day
(86400): the requested, used and unknown-usage CPU, GPU and memory resource-seconds its jobs put into it,
counted exactly as ``gap_area`` counts them per bucket (each sample's interval clipped to the job's run and to
the cell, capped at the allocation, GPU utilisation at 1; job totals spread evenly where a job has no samples
of the resource; a job of unknown usage in requested and unknown). The SQL is ``sql/_usage_hours.sql``. A
``gap_area`` whose buckets, origin and window are whole hours (or days) sums the cells instead of clipping every
sample (``sql/_hour_cells.sql``); the team comes from the account at query time, as with ``usage_cube``.

Invariants (as ``cube``'s):
- Complete or absent. ``rebuild`` writes the table whole (``quotaloop rollup --rebuild``); an ingest into a store
  holding it (its manifest lists the table, even empty) or into an empty store keeps it; an ingest into an
  older store with jobs but no table writes none (``gap_area`` then reads the samples, as before).
- Same commit, incremental = rebuild: ``refresh`` re-derives the cells keyed by the (cluster, submit month, user,
  account) of the jobs the rollup refresh re-derived (before and after), from the jobs of those keys and their
  samples (the sample files whose footer may hold one of them), from the store as the transaction will commit
  it, and rewrites the files holding those keys' users' cells with their other cells as they were
  (``cells.refresh``).
- A RUNNING job without an end puts only its sampled usage into the cells (each sample clipped to its run): its
  requested, unknown and totals-based usage depend on its run end, its cluster's snapshot, which every ingest
  moves; ``gap_area`` derives them per job from its ``jobs`` row and its ``job_rollup`` row's sample counts
  (``sql/_hour_cells.sql``). Its samples end inside its run (the rollup refresh re-derives, at a snapshot move,
  the RUNNING jobs whose samples reach past their row's run end), so a snapshot move changes no cell. Those
  cells are its own: ``open_run`` true, in files of their own (``SPLIT``), re-derived by their key
  (cluster, month, user, account, ``open_run``): new samples of a long job (every day's, for a job that runs for
  weeks) rewrite its user's open cells of that month, not the cells of every job the user ran in it. A table
  written when those jobs had whole cells of their own (``cells.legacy``) is not read by ``gap_area``, and its
  next refresh rebuilds it, once.
- Compaction's rollup refresh re-derives the months whose samples it coarsened, as an ingest's does.
"""
from __future__ import annotations

import polars as pl

from ..store import keyindex, schema
from . import cells

TABLE = "usage_hours"
QUERY = "_usage_hours"
# files of their own per grain (a query reads one: the files' statistics let DuckDB skip the other) and for the
# open runs' cells (their new samples rewrite those small files, not their users' other cells)
SPLIT = ("grain_s", cells.OPEN)


def _sources(tx, months: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The ``jobs`` of the month partitions ``months`` and the ``samples`` of those jobs, as ``tx`` would commit
    them."""
    frames = cells.month_rows(tx, "jobs", months)
    jobs = pl.concat(frames).unique(["cluster", "job_id"]) if frames else schema.empty("jobs")
    keys = jobs.select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
    samples = keyindex.read_keyed([str(tx.store.root / r) for r in tx.tables.get("samples", [])], "samples", keys)
    return {"jobs": jobs, "samples": samples}


def derive(tx, months: pl.DataFrame | None = None, threads: int | None = None) -> pl.DataFrame:
    """The ``usage_hours`` rows of the partitions ``months`` (cluster, month; None: every job) of the store as
    ``tx`` would commit it."""
    # every job's clipped samples come from ``samples``: no rollup row answers for it
    extra = {"job_rollup": schema.empty("job_rollup"), "job_day_rollup": schema.empty("job_day_rollup")}
    if months is not None:
        extra.update(_sources(tx, months))
    rows = cells.derive_cells(tx, TABLE, QUERY, extra, threads=threads)
    return rows if months is None else cells.only(rows, months)


def _write(tx, rows: pl.DataFrame, months: pl.DataFrame) -> None:
    """Replace the partitions ``months`` of the table by ``rows``, in files per ``SPLIT``."""
    cells.write(tx, TABLE, rows, months, split=SPLIT)


def _derive_jobs(tx, jobs: pl.DataFrame) -> pl.DataFrame:
    """The cells of exactly the ``jobs`` rows given (with their samples), for ``cells.refresh``."""
    keys = jobs.select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
    samples = keyindex.read_keyed([str(tx.store.root / r) for r in tx.tables.get("samples", [])], "samples", keys)
    return cells.derive_cells(tx, TABLE, QUERY, {"job_rollup": schema.empty("job_rollup"),
                                                 "job_day_rollup": schema.empty("job_day_rollup"),
                                                 "jobs": jobs, "samples": samples})


def refresh(tx, scoped: cells.Scope) -> int:
    """Re-derive the cells ``scoped`` (``cells.Scope``: those of the jobs whose rollup rows a refresh re-derived),
    or the whole table when it was written with whole cells of RUNNING jobs (``cells.refresh``); the number of
    cells written, in files per ``SPLIT``."""
    return cells.refresh(tx, TABLE, scoped, _derive_jobs, rebuild, split=SPLIT)


def rebuild(tx, threads: int | None = None) -> int:
    """Re-derive the whole table of ``tx``'s store (inside ``rollup.rebuild``'s transaction), one partition at a
    time as a refresh derives it (one month's jobs in memory, not the store's); the cells written."""
    return cells.rebuild(tx, TABLE, derive, _write, threads)
