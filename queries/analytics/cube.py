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
- Same commit, incremental = rebuild: ``refresh`` re-derives the cells keyed by the (cluster, submit month or
  ``running``, user, account) of the jobs the rollup refresh re-derived (before and after), from the jobs of
  those keys, and the ``running`` partition (``cells``) of their clusters whose snapshot moved, from the store as
  the transaction will commit it, and rewrites those partitions with their other cells as they were. The cells of RUNNING jobs without an end live apart: a snapshot move
  lengthens their runs, and re-deriving every month they were submitted in cost a rebuild per daily ingest on
  a store whose RUNNING jobs span its months (36x an empty store's ingest at 3M jobs). A cube written before the
  split (a cluster with RUNNING jobs and no ``running`` partition) has their cells in their months: its first
  refresh re-derives those months too, once.
- Compaction's rollup refresh re-derives the months whose samples it coarsened, as an ingest's does.
"""
from __future__ import annotations

import functools

import polars as pl

from ..store import connect, schema
from . import cells
from .cells import RUNNING, months_of
from .loader import run

TABLE = "usage_cube"
QUERY = "_usage_cube"
# the tables a month's cells are derived from, each partitioned by the job's submit month as the cube is
_SOURCES = ("jobs", "job_rollup")


def maintained(tx) -> bool:
    """Whether ``tx``'s store keeps a cube: its manifest lists the table, or it held no jobs before."""
    return TABLE in tx.tables or not any(r.startswith("jobs/") for r in tx.base_files)


def _sources(tx, months: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """``jobs`` and ``job_rollup`` of the partitions ``months``: a month's rows, and every RUNNING job without an
    end of a cluster for its ``RUNNING`` partition."""
    running = cells.running_keys(tx, months.filter(pl.col("month") == RUNNING)["cluster"].to_list())
    out = {}
    for table in _SOURCES:
        frames = cells.month_rows(tx, table, months)
        if running.height:
            frames.append(cells.read_keyed([str(tx.store.root / r) for r in tx.tables.get(table, [])], table, running))
        out[table] = pl.concat(frames).unique(["cluster", "job_id"]) if frames else schema.empty(table)
    return out


def derive(tx, months: pl.DataFrame | None = None, threads: int | None = None) -> pl.DataFrame:
    """The ``usage_cube`` rows of the partitions ``months`` (cluster, month or ``RUNNING``; None: every job) of
    the store as ``tx`` would commit it."""
    extra = _sources(tx, months) if months is not None else {}
    con = connect(pending=tx, extra=extra, threads=threads)
    con.execute("set enable_progress_bar = false")
    try:
        rows = schema.conform(run(QUERY, con=con), TABLE)
    finally:
        con.close()
    return rows if months is None else cells.only(rows, months)


def _write(tx, rows: pl.DataFrame, months: pl.DataFrame) -> None:
    cells.write(tx, TABLE, rows, months)


def _legacy_months(tx, clusters: list[str]) -> pl.DataFrame:
    """The submit months of the RUNNING jobs of ``clusters`` whose cube has no ``running`` partition (written
    before the split, or never needed): their cells may sit in those months, to be re-derived once."""
    have = {r.split("/")[1].removeprefix("cluster=") for r in tx.tables.get(TABLE, []) if f"/month={RUNNING}/" in r}
    todo = [c for c in clusters if c not in have]
    running = cells.running_keys(tx, todo)
    if not running.height:
        return pl.DataFrame(schema=cells.NO_PARTS)
    jobs = cells.read_keyed([str(tx.store.root / r) for r in tx.tables.get("jobs", [])], "jobs", running)
    return months_of(jobs.select("cluster", "submit"))


def _derive_jobs(tx, jobs: pl.DataFrame, fresh: pl.DataFrame | None = None) -> pl.DataFrame:
    """The cells of exactly the ``jobs`` rows given (with their ``job_rollup`` rows: those of ``fresh``, the rows
    the rollup refresh is writing, and the others read from the files that may hold them), for
    ``cells.refresh``."""
    keys = jobs.select(pl.col("cluster").cast(pl.String), pl.col("job_id").cast(pl.String))
    fresh = (schema.conform(fresh, "job_rollup").join(keys, on=cells.KEYS, how="semi")
             if fresh is not None and fresh.height else schema.empty("job_rollup"))
    rest = keys.join(fresh.select(cells.KEYS), on=cells.KEYS, how="anti")
    rolled = cells.read_keyed([str(tx.store.root / r) for r in tx.tables.get("job_rollup", [])], "job_rollup", rest)
    return cells.derive_cells(tx, TABLE, QUERY, {"jobs": jobs, "job_rollup": pl.concat([fresh, rolled])})


def refresh(tx, changed: pl.DataFrame, moved: pl.DataFrame | None = None, fresh: pl.DataFrame | None = None) -> int:
    """Re-derive the cells of the jobs in ``changed`` (``cluster``, ``job_id``: the rollup rows a refresh
    re-derived) and the ``RUNNING`` partition of every cluster of theirs or of ``moved`` (the RUNNING jobs whose
    run end moved with a snapshot) whose snapshot moved (``cells.refresh``), and once the months of a cube
    written before the split; the number of cells written. ``fresh``: ``job_rollup`` rows the transaction is
    writing (the refresh takes them from there, not from the files)."""
    if not maintained(tx):
        return 0
    moved = moved if moved is not None else changed.clear()
    clusters = pl.concat([f.select(pl.col("cluster").cast(pl.String).fill_null("default")) for f in (changed, moved)])
    legacy = _legacy_months(tx, sorted(clusters.unique()["cluster"].to_list()))
    return cells.refresh(tx, TABLE, changed, moved, functools.partial(_derive_jobs, fresh=fresh), whole=legacy)


def rebuild(tx, threads: int | None = None) -> int:
    """Re-derive the whole cube of ``tx``'s store (inside ``rollup.rebuild``'s transaction), one partition at a
    time as a refresh derives it (one month's jobs in memory, not the store's); the cells written."""
    return cells.rebuild(tx, TABLE, derive, _write, threads)
